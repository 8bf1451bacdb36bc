//! The commands, on validated configuration: each builds a topology (a lab,
//! two named endpoints, a plan's hosts), turns it into [`Ends`] and hands
//! its tests to [`exec_test`], the one place every kind of test is run.

use crate::lab::{self, LabSpec};
use crate::model::error::{chain, Context};
use crate::model::stderr::errln;
use crate::orchestrate::config::{AgentConfig, Command, Pair, RunOpts, SweepConfig, TestSpec};
use crate::orchestrate::error::{err, fail, OrchestrateError, Result};
use crate::orchestrate::loadtest;
use crate::orchestrate::run::Run;
use crate::results::criteria::Marks;
use crate::runner::Ends;
use crate::topology::Netns;
use crate::topology::{Addressing, Hosts};

/// `linerate agent`: serves the controller on stdin/stdout in the
/// namespace it names, until the controller hangs up. Returns the exit
/// status.
pub fn agent(cfg: &AgentConfig) -> i32 {
    let netns = match cfg.netns.as_deref() {
        None => Netns::Current,
        Some("new") => Netns::New,
        Some(n) => Netns::Named(n.to_string()),
    };
    let limits = crate::agent::Limits {
        max_duration: cfg.max_duration,
        max_rate_pps: cfg.max_rate_pps,
    };
    match crate::agent::run(netns, limits) {
        Ok(()) => 0,
        Err(e) => {
            errln!("agent: {}", crate::model::error::chain(&e));
            1
        }
    }
}

/// Runs a command; returns the process exit status.
pub fn execute(cmd: Command) -> i32 {
    match cmd {
        Command::LabCleanup => cleanup(),
        Command::Lab(cfg, opts) => crate::orchestrate::suite::lab(&cfg, &opts),
        Command::Pair(pair, spec, opts) => {
            let name = opts.name.clone().unwrap_or_else(|| spec.kind().to_string());
            with_run(&opts, &name, |run| pair_test(&pair, &spec, &opts, run))
        }
        Command::LabBench(lab, spec, opts) => {
            if let Err(e) = lab::preflight(&lab) {
                errln!("error: {e:#}");
                return 2;
            }
            let name = opts.name.clone().unwrap_or_else(|| spec.kind().to_string());
            with_run(&opts, &name, |run| lab_test(lab, &spec, run))
        }
        Command::Iperf3(client, t, opts) => {
            let name = opts.name.clone().unwrap_or_else(|| "iperf3".into());
            with_run(&opts, &name, |run| iperf3_test(&client, &t, &opts, run))
        }
        Command::Sweep(sweep, opts) => {
            let name = opts.name.clone().unwrap_or_else(|| sweep.info.name.clone());
            with_run(&opts, &name, |run| sweep_run(&sweep, run))
        }
        Command::Plan(plan, opts) => {
            if let Err(e) = crate::orchestrate::plan_run::preflight(&plan) {
                errln!("error: {}", chain(&e));
                return 2;
            }
            let name = opts.name.clone().unwrap_or_else(|| plan.name.clone());
            with_run(&opts, &name, |run| {
                crate::orchestrate::plan_run::run(&plan, &opts, run)
            })
        }
    }
}

fn cleanup() -> i32 {
    match lab::cleanup() {
        Ok(v) if v.is_empty() => {
            crate::model::stdout::println("nothing to clean up: no lr-* namespaces found");
            0
        }
        Ok(v) => {
            crate::model::stdout::println(&format!("removed {}", v.join(", ")));
            0
        }
        Err(e) => {
            errln!("error: {e:#}");
            1
        }
    }
}

/// Starts a run, gives it to `body`, and finishes it (partial on error).
fn with_run(opts: &RunOpts, name: &str, body: impl FnOnce(&mut Run) -> Result<()>) -> i32 {
    let mut run = match Run::start(opts, name) {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {}", chain(&e));
            return 2;
        }
    };
    let err = body(&mut run).err();
    run.finish(err)
}

/// An ad-hoc test between two endpoints the user named.
fn pair_test(pair: &Pair, spec: &TestSpec, opts: &RunOpts, run: &mut Run) -> Result<()> {
    let mut hosts = Hosts::new(opts.ssh.clone()).allowing(&opts.allow_target);
    let log = |role: &str| run.dir.as_ref().map(|d| d.agent_log(role));
    let spawned = (|| {
        let gen = hosts.spawn(
            "gen",
            &pair.client,
            Netns::Current,
            None,
            log("gen").as_deref(),
        )?;
        let sink = hosts.spawn(
            "sink",
            &pair.server,
            Netns::Current,
            None,
            log("sink").as_deref(),
        )?;
        let dut = match &pair.dut {
            Some(d) => Some(
                hosts
                    .spawn("dut", d, Netns::Current, None, log("dut").as_deref())
                    .with_context(|| format!("starting the DUT's agent on {d}"))?,
            ),
            None => None,
        };
        Ok::<_, OrchestrateError>((gen, sink, dut))
    })();
    run.record_agents(&hosts);
    let (gen, sink, dut) = spawned?;
    // A download from a server linerate did not start (`http --url`) is
    // aimed at that server, not at the server endpoint: nothing to check.
    let foreign_server =
        matches!(spec, TestSpec::Http(tests) if tests.iter().all(|t| t.url.is_some()));
    if !foreign_server {
        crate::runner::check_target(
            &mut hosts.fleet,
            sink,
            &pair.server.to_string(),
            pair.target,
        )?;
    }
    let client_address = crate::runner::client_address(
        &mut hosts.fleet,
        gen,
        &pair.client.to_string(),
        pair.client_address,
        pair.target,
    );
    let mut ends = Ends::new(
        &mut hosts.fleet,
        (gen, sink, dut),
        (
            Addressing {
                vlan: pair.vlan,
                ..Addressing::single(client_address)
            },
            Addressing {
                vlan: pair.vlan,
                ..Addressing::single(Some(pair.target))
            },
        ),
        None,
    );
    let r = loadtest::exec_test(run, &mut ends, spec);
    drop(ends);
    run.record_agents(&hosts);
    r?;
    Ok(hosts.check_lost()?)
}

/// A test against a stock iperf3 server: an agent where `--client` says
/// is its client; there is no sink agent (the server is the far end).
fn iperf3_test(
    client: &crate::topology::Endpoint,
    t: &crate::runner::Iperf3Test,
    opts: &RunOpts,
    run: &mut Run,
) -> Result<()> {
    let mut hosts = Hosts::new(opts.ssh.clone()).allowing(&opts.allow_target);
    let log = run.dir.as_ref().map(|d| d.agent_log("gen"));
    let spawned = hosts.spawn("gen", client, Netns::Current, None, log.as_deref());
    run.record_agents(&hosts);
    let gen = spawned?;
    let mut ends = Ends::new(
        &mut hosts.fleet,
        (gen, gen, None),
        (
            Addressing::single(None),
            Addressing::single(Some(t.job.server.ip())),
        ),
        None,
    );
    let r = loadtest::exec_test(run, &mut ends, &TestSpec::Iperf3(t.clone()));
    drop(ends);
    run.record_agents(&hosts);
    r?;
    Ok(hosts.check_lost()?)
}

/// Every point of a `--sweep`, in order, in one run: each point's test
/// as the command alone would run it; points in a lab share it while its
/// settings stay the same. A failed point is recorded and the next runs,
/// unless `--fail-fast`.
fn sweep_run(s: &SweepConfig, run: &mut Run) -> Result<()> {
    run.results.sweeps.push(s.info.clone());
    run.save();
    let mut lab: Option<(LabSpec, lab::Lab, usize)> = None;
    for (p, cmd) in &s.points {
        if crate::model::signals::stop_requested() {
            break;
        }
        errln!(
            "sweep point {} of {}: {}",
            p.point.index + 1,
            s.points.len(),
            p.name
        );
        let from = Marks::of(&run.results);
        let (r, kind) = match cmd {
            Command::Pair(pair, spec, opts) => (pair_test(pair, spec, opts, run), spec.kind()),
            Command::Iperf3(client, t, opts) => (iperf3_test(client, t, opts, run), "iperf3"),
            Command::LabBench(spec, test, _) => {
                let same = lab.as_ref().is_some_and(|(l, _, _)| l == spec);
                if !same {
                    if let Some((_, mut old, _)) = lab.take() {
                        old.fleet.shutdown();
                    }
                }
                let r = (|| {
                    if lab.is_none() {
                        let log_dir = run.dir.as_ref().map(|d| d.path.join("agents"));
                        let l = lab::build(spec.clone(), log_dir.as_deref())?;
                        run.results.labs.push(l.topology.clone());
                        lab = Some((spec.clone(), l, run.results.labs.len() - 1));
                    }
                    let Some((_, l, idx)) = lab.as_mut() else {
                        fail!("the lab is gone");
                    };
                    let mut ends = Ends::of_lab(l, Some(*idx));
                    loadtest::exec_test(run, &mut ends, test)
                })();
                (r, test.kind())
            }
            other => (Err(err!("{other:?} cannot be a sweep point")), "sweep"),
        };
        let failed = crate::orchestrate::sweep::finish_point(
            &mut run.results,
            from,
            p,
            kind,
            r.as_ref().err(),
        );
        run.save();
        if let Err(e) = &r {
            errln!("sweep point {} failed: {}", p.name, chain(e));
        }
        if failed && s.fail_fast {
            if let Some((_, mut l, _)) = lab.take() {
                l.fleet.shutdown();
            }
            fail!(
                "sweep stopped at point \"{}\" (--fail-fast); the points after it did not run",
                p.name
            );
        }
    }
    if let Some((_, mut l, _)) = lab.take() {
        l.fleet.shutdown();
    }
    Ok(())
}

/// A ramp or search against a lab built for it.
fn lab_test(spec: LabSpec, test: &TestSpec, run: &mut Run) -> Result<()> {
    let log_dir = run.dir.as_ref().map(|d| d.path.join("agents"));
    let mut l = lab::build(spec, log_dir.as_deref())?;
    run.results.labs.push(l.topology.clone());
    let idx = run.results.labs.len() - 1;
    let mut ends = Ends::of_lab(&mut l, Some(idx));
    loadtest::exec_test(run, &mut ends, test)?;
    drop(ends);
    l.fleet.shutdown();
    Ok(())
}
