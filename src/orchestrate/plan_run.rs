//! `linerate run PLAN.toml`: starts one agent per host the plan's tests
//! use (ssh hosts over one ControlMaster each), records where they are and
//! how their clocks stand, then runs every test through the one runner.
//! A host lost mid-run ends the run partial; the other agents are stopped.
//! Hosts that bring a physical port run their agent in a fresh namespace
//! there, and the two ports become a lab around the external DUT.

use crate::lab::ports::PortLab;
use crate::lab::LabSpec;
use crate::model::error::{chain, Context, Step};
use crate::model::signals::stop_requested;
use crate::model::stderr::errln;
use crate::orchestrate::config::{HostConfig, PlanConfig, PlanTest, RunOpts};
use crate::orchestrate::error::{err, fail, OrchestrateError, Result};
use crate::orchestrate::run::Run;
use crate::orchestrate::sweep::finish_point;
use crate::results::criteria::Marks;
use crate::runner::{Ends, Side};
use crate::topology::Netns;
use crate::topology::{Addressing, Hosts};
use std::collections::BTreeSet;

/// The hosts the plan's tests run agents on (a stock iperf3 server runs
/// none; a plan with a `[lab]` runs in the lab it builds).
fn used_hosts(plan: &PlanConfig) -> BTreeSet<usize> {
    if plan.tests.iter().any(|t| t.lab.is_some()) {
        return BTreeSet::new();
    }
    plan.tests
        .iter()
        .flat_map(|t| t.from.iter().copied().chain([t.to]).chain(t.dut))
        .filter(|&i| plan.hosts[i].iperf3.is_none())
        .collect()
}

/// What can be checked of the plan's hosts before anything starts: a
/// named namespace that does not exist (or root to enter it) is a mistake
/// in the plan, said before a results directory is made, not a run that
/// failed after its first tests.
pub fn preflight(plan: &PlanConfig) -> Result<()> {
    for i in used_hosts(plan) {
        let h = &plan.hosts[i];
        match &h.vm {
            Some(vm) => crate::vm::host::preflight(vm),
            None => h.endpoint.preflight().map_err(crate::vm::VmError::from),
        }
        .with_context(|| format!("plan {}: host {}", plan.file.display(), h.name))?;
    }
    Ok(())
}

pub fn run(plan: &PlanConfig, opts: &RunOpts, run: &mut Run) -> Result<()> {
    run.results.sweeps.extend(plan.sweeps.iter().cloned());
    if plan.tests.iter().any(|t| t.lab.is_some()) {
        return run_in_labs(plan, run);
    }
    let used = used_hosts(plan);
    errln!(
        "plan {} ({}): {} host{}, {} test{}",
        plan.name,
        plan.file.display(),
        used.len(),
        if used.len() == 1 { "" } else { "s" },
        plan.tests.len(),
        if plan.tests.len() == 1 { "" } else { "s" },
    );
    let mut hosts = Hosts::new(opts.ssh.clone()).allowing(&opts.allow_target);
    let mut agents = Agents {
        plan,
        of: vec![None; plan.hosts.len()],
    };
    for &i in &used {
        agents.of[i] = Some(start_host(&mut hosts, &plan.hosts[i], run)?);
    }
    // The port lab: its addressing replaces the hosts' own for its tests.
    let lab = port_lab(plan, &mut hosts, &agents, run)?;
    for t in &plan.tests {
        if stop_requested() {
            break;
        }
        let in_lab = lab
            .as_ref()
            .filter(|(g, s, _, _)| t.from == [*g] && t.to == *s);
        let (gens, sink) = test_sides(&mut hosts, &agents, t, in_lab.map(|(_, _, l, _)| l))?;
        let mut ends = Ends {
            fleet: &mut hosts.fleet,
            gens,
            sink,
            instances: t.instances.max(1),
            observers: t
                .dut
                .map(|i| agents.get(i))
                .transpose()?
                .into_iter()
                .collect(),
            lab: in_lab.map(|(_, _, _, idx)| *idx),
        };
        let from = crate::results::criteria::Marks::of(&run.results);
        run.watch_scope(&t.expect, t.abort);
        let r = crate::orchestrate::loadtest::exec_test(run, &mut ends, &t.spec);
        run.watch_scope(&[], None);
        drop(ends);
        run.hold_to(&t.expect, from);
        run.record_agents(&hosts);
        match &t.sweep {
            Some(p) => {
                let failed =
                    finish_point(&mut run.results, from, p, t.spec.kind(), r.as_ref().err());
                run.save();
                if failed && plan.fail_fast {
                    hosts.shutdown();
                    fail!("sweep stopped at point \"{}\" (--fail-fast)", p.name);
                }
            }
            None => {
                if let Err(e) = r {
                    return Err(Step::new(format!("test {}", t.name), e).into());
                }
            }
        }
        hosts.check_lost()?;
    }
    hosts.shutdown();
    Ok(())
}

/// Each plan host's agent, once started.
struct Agents<'a> {
    plan: &'a PlanConfig,
    of: Vec<Option<usize>>,
}

impl Agents<'_> {
    /// The agent of host `i`; a host the run started none on is an error.
    fn get(&self, i: usize) -> Result<usize> {
        match self.of[i] {
            Some(a) => Ok(a),
            None => fail!("host {} has no agent", self.plan.hosts[i].name),
        }
    }
}

/// Starts the agent of `h` (a guest through qemu, or on its endpoint; in a
/// fresh namespace when it brings a port), records it and says where it is
/// and how its clock stands.
fn start_host(hosts: &mut Hosts, h: &HostConfig, run: &mut Run) -> Result<usize> {
    let log = run.dir.as_ref().map(|d| d.agent_log(&h.name));
    // A host bringing a port runs its agent in a fresh namespace there,
    // which takes the port and gives it back at the end.
    let netns = if h.ports.is_empty() {
        Netns::Current
    } else {
        Netns::New
    };
    let spawned = match &h.vm {
        // A guest: the same agent, reached through qemu.
        Some(vm) => crate::vm::host::boot(&mut hosts.fleet, &h.name, vm, log.as_deref()).map(
            |(idx, rec)| {
                hosts.vms.push((idx, rec));
                idx
            },
        ),
        None => hosts
            .spawn(
                &h.name,
                &h.endpoint,
                netns,
                h.binary.as_deref(),
                log.as_deref(),
            )
            .map_err(crate::vm::VmError::from),
    };
    run.record_agents(hosts);
    let idx = spawned.with_context(|| format!("starting host {}", h.name))?;
    let a = hosts.fleet.agent(idx);
    let at = match hosts.vms.iter().find(|(i, _)| *i == idx) {
        Some((_, vm)) => format!("a VM ({}, kernel {})", vm.kind(), vm.kernel_release),
        None => h.endpoint.to_string(),
    };
    errln!(
        "host {}: {} ({}) up in {:.2} s, clock offset {:+.3} ms (rtt {:.3} ms)",
        h.name,
        at,
        a.hostname,
        a.connect_s,
        a.clock.offset_s * 1e3,
        a.clock.rtt_s * 1e3
    );
    Ok(idx)
}

/// The lab around the plan's ports, if it has them, built and recorded:
/// its generator and sink hosts, the lab, and its index in the results.
fn port_lab(
    plan: &PlanConfig,
    hosts: &mut Hosts,
    agents: &Agents,
    run: &mut Run,
) -> Result<Option<(usize, usize, PortLab, usize)>> {
    let Some(p) = &plan.port_lab else {
        return Ok(None);
    };
    let (g, s) = (agents.get(p.gen_host)?, agents.get(p.sink_host)?);
    let built = crate::lab::ports::configure(&mut hosts.fleet, g, s, 1500, &p.ports)
        .context("building the lab around the plan's ports")?;
    run.results.labs.push(built.topology.clone());
    let idx = run.results.labs.len() - 1;
    run.save();
    errln!(
        "port lab: {} port {} -> DUT -> {} port {}",
        plan.hosts[p.gen_host].name,
        p.ports.gen,
        plan.hosts[p.sink_host].name,
        p.ports.sink
    );
    Ok(Some((p.gen_host, p.sink_host, built, idx)))
}

/// Test `t`'s generators and sink: in the port lab its addressing, else
/// each generator's own address toward the target.
fn test_sides(
    hosts: &mut Hosts,
    agents: &Agents,
    t: &PlanTest,
    in_lab: Option<&PortLab>,
) -> Result<(Vec<Side>, Side)> {
    let plan = agents.plan;
    let gens = t
        .from
        .iter()
        .map(|&i| {
            Ok(Side {
                agent: agents.get(i)?,
                addr: match in_lab {
                    Some(l) => l.gen_addr.clone(),
                    None => {
                        let a = agents.get(i)?;
                        Addressing::single(crate::runner::client_address(
                            &mut hosts.fleet,
                            a,
                            &plan.hosts[i].name,
                            plan.hosts[i].address,
                            t.target,
                        ))
                    }
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Against an iperf3 server the client is its own far side's
    // agent: there is none at the server.
    let sink_agent = match plan.hosts[t.to].iperf3 {
        Some(_) => gens
            .first()
            .map(|g| g.agent)
            .ok_or_else(|| err!("test {} has no generator", t.name))?,
        None => agents.get(t.to)?,
    };
    let sink = Side {
        agent: sink_agent,
        addr: match in_lab {
            Some(l) => l.sink_addr.clone(),
            None => Addressing::single(Some(t.target)),
        },
    };
    Ok((gens, sink))
}

/// The plan's distinct lab settings, in the order its tests name them;
/// says how many tests run in how many.
fn lab_settings(plan: &PlanConfig) -> Vec<LabSpec> {
    let mut settings: Vec<LabSpec> = Vec::new();
    for t in &plan.tests {
        if let Some(l) = &t.lab {
            if !settings.contains(l) {
                settings.push(l.clone());
            }
        }
    }
    errln!(
        "plan {} ({}): {} test{} in {} lab setting{}",
        plan.name,
        plan.file.display(),
        plan.tests.len(),
        if plan.tests.len() == 1 { "" } else { "s" },
        settings.len(),
        if settings.len() == 1 { "" } else { "s" },
    );
    settings
}

/// Says which lab the next tests run in.
fn announce_lab(spec: &LabSpec) {
    errln!(
        "lab: DUT {}, MTU {}, {} queue{} per veth",
        spec.dut.map_or("none (back to back)", |d| d.name()),
        spec.mtu,
        spec.queues,
        if spec.queues == 1 { "" } else { "s" }
    );
}

/// A plan with `[lab]`: its tests grouped by the lab they need (in the
/// order each setting first appears), each lab built once, its tests run
/// in it, and torn down before the next.
fn run_in_labs(plan: &PlanConfig, run: &mut Run) -> Result<()> {
    let settings = lab_settings(plan);
    for spec in settings {
        if stop_requested() {
            break;
        }
        let tests: Vec<&PlanTest> = plan
            .tests
            .iter()
            .filter(|t| t.lab.as_ref() == Some(&spec))
            .collect();
        let log_dir = run.dir.as_ref().map(|d| d.path.join("agents"));
        let built = crate::lab::build(spec.clone(), log_dir.as_deref());
        let mut lab = match built {
            Ok(l) => l,
            Err(e) => {
                let e = OrchestrateError::from(Step::new(
                    format!(
                        "building the lab (DUT {})",
                        spec.dut.map_or("none", |d| d.name())
                    ),
                    e,
                ));
                // Every test of this setting fails with the reason.
                let mut any_point = false;
                for t in &tests {
                    if let Some(p) = &t.sweep {
                        any_point = true;
                        let from = Marks::of(&run.results);
                        finish_point(&mut run.results, from, p, t.spec.kind(), Some(&e));
                    }
                }
                run.save();
                if !any_point || plan.fail_fast {
                    return Err(e);
                }
                errln!("error: {}; its points are recorded as failed", chain(&e));
                continue;
            }
        };
        run.results.labs.push(lab.topology.clone());
        let idx = run.results.labs.len() - 1;
        run.save();
        announce_lab(&spec);
        for t in tests {
            if stop_requested() {
                break;
            }
            let mut ends = crate::runner::Ends::of_lab(&mut lab, Some(idx));
            ends.instances = t.instances.max(1);
            let from = Marks::of(&run.results);
            run.watch_scope(&t.expect, t.abort);
            let r = crate::orchestrate::loadtest::exec_test(run, &mut ends, &t.spec);
            run.watch_scope(&[], None);
            drop(ends);
            run.hold_to(&t.expect, from);
            let failed = match &t.sweep {
                Some(p) => finish_point(&mut run.results, from, p, t.spec.kind(), r.as_ref().err()),
                None => {
                    if let Err(e) = r {
                        lab.fleet.shutdown();
                        return Err(Step::new(format!("test {}", t.name), e).into());
                    }
                    false
                }
            };
            run.save();
            if failed && plan.fail_fast {
                lab.fleet.shutdown();
                fail!("sweep stopped at test \"{}\" (--fail-fast)", t.name);
            }
        }
        lab.fleet.shutdown();
    }
    Ok(())
}
