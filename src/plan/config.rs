//! A parsed plan becomes the validated configuration the command line
//! produces (`orchestrate::config`): its hosts, its `[ssh]` joined with the
//! command line's, its sweeps expanded, its port lab checked. What only the
//! command line's parser knows (a `[[test]]`'s or `[lab]`'s keys read as
//! the flags of their command) comes through [`TestParser`], so a plan
//! accepts exactly the options the command takes.

use super::trust::TrustError;
use super::{HostKind, Plan, PlanArg, PlanError};
use crate::lab::LabSpec;
use crate::model::criteria::Criterion;
use crate::orchestrate::config::{
    AbortOpts, Command, HostConfig, PlanConfig, PlanTest, RunOpts, TestSpec,
};
use crate::topology::ssh::SshTarget;
use crate::topology::Endpoint;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod ports;

use ports::port_lab;

/// The command line's parser, as plans need it. Its errors are placed in
/// the plan (`Plan::error_at`), at the key they are about.
pub trait TestParser {
    /// The long flags of `linerate KIND` a plan test may set.
    fn flags(&self, kind: &str) -> Vec<String>;
    /// The long flags of `linerate run` that set the whole run (a test's
    /// key naming one is told to go there).
    fn run_flags(&self) -> Vec<String>;
    /// The test `argv` (`linerate KIND --flag=value…`, from `t`) describes,
    /// its own criteria, and whether they abort the run when they clearly
    /// fail (`abort_on_fail`); `iperf3`: its sink is a stock iperf3 server.
    fn test(
        &self,
        plan: &Plan,
        t: &super::PlanTest,
        argv: &[String],
        iperf3: bool,
    ) -> Result<(TestSpec, Vec<Criterion>, Option<AbortOpts>), PlanError>;
    /// The lab `settings` describe, read by `linerate lab`'s own parser.
    fn lab(&self, plan: &Plan, settings: &[PlanArg]) -> Result<LabSpec, PlanError>;
}

/// Why a plan file did not become a configuration. Every message is the
/// one a user sees after "error: ".
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading plan {path}: {error}")]
    Read { path: String, error: std::io::Error },
    /// At a place in the plan (`file:line:column`).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// What an untrusted plan may not do.
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error(
        "{file}: [ssh] config = \"{config}\": no such file ({path}); paths are relative to the plan"
    )]
    NoSshConfig {
        file: String,
        config: String,
        path: String,
    },
    #[error("{file}: [ssh] options: '{option}' is not KEY=VALUE")]
    SshOption { file: String, option: String },
    #[error("test '{test}' cannot run in a [lab] with dut = \"stick\": {reason}")]
    StickSockets { test: String, reason: String },
    /// The plan's ports, refused by the lab.
    #[error(transparent)]
    Ports(Box<dyn std::error::Error + Send + Sync>),
    #[error("no ports")]
    NoPorts,
}

/// Reads, parses and validates the plan at `path`.
/// `trust` (`--trust-plan`) lets the plan's `[ssh]` run local commands.
pub fn load(
    path: &Path,
    mut opts: RunOpts,
    trust: bool,
    parser: &dyn TestParser,
) -> Result<Command, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|error| LoadError::Read {
        path: path.display().to_string(),
        error,
    })?;
    let file = path.display().to_string();
    let plan = super::parse(&file, &text)?;
    let copy = if trust {
        None
    } else {
        super::trust::check(&plan, path)?
    };
    merge_run_opts(&plan, path, &mut opts, copy, !trust)?;
    let hosts = plan
        .hosts
        .iter()
        .map(|h| host(&plan, h))
        .collect::<Result<Vec<_>, _>>()?;
    let mut tests = Vec::new();
    let mut sweeps = Vec::new();
    for t in &plan.tests {
        match &t.sweep {
            None => {
                let mut one = test(&plan, t, &hosts, &opts, parser)?;
                if plan.lab.is_some() {
                    let settings = plan.lab.as_ref().map(|l| l.settings.clone());
                    one.lab = Some(parser.lab(&plan, &settings.unwrap_or_default())?);
                    in_lab(&mut one.spec);
                    fits_the_lab(&one)?;
                }
                tests.push(one);
            }
            Some(s) => {
                sweeps.push(
                    s.spec(&t.name)
                        .info(s.rows.clone(), s.cols.clone(), s.cell.clone())
                        .map_err(|e| plan.error_at(s.span, e))?,
                );
                tests.extend(sweep_points(&plan, t, s, &hosts, &opts, parser)?);
            }
        }
    }
    let port_lab = port_lab(&plan, &hosts, &tests)?;
    Ok(Command::Plan(
        PlanConfig {
            name: plan.name.clone(),
            file: path.to_path_buf(),
            hosts,
            tests,
            port_lab,
            sweeps,
            fail_fast: false,
        },
        opts,
    ))
}

/// The `linerate lab` flags a plan's `[lab]` (and lab axes) may set.
const LAB_KEYS: &[&str] = super::LAB_KEYS;

/// One test per point of `t`'s sweep: the test with the point's values in
/// place of the swept options, checked by the command's parser (an error
/// points at the value in the list), the lab axes building its lab.
fn sweep_points(
    plan: &Plan,
    t: &super::PlanTest,
    s: &super::PlanSweep,
    hosts: &[HostConfig],
    opts: &RunOpts,
    parser: &dyn TestParser,
) -> Result<Vec<PlanTest>, LoadError> {
    let points = s
        .spec(&t.name)
        .expand(super::MAX_TESTS)
        .map_err(|e| plan.error_at(s.span, e))?;
    let mut out = Vec::with_capacity(points.len());
    for p in points {
        let mut one = t.clone();
        one.name = p.name.clone();
        one.sweep = None;
        let mut lab = plan
            .lab
            .as_ref()
            .map(|l| l.settings.clone())
            .unwrap_or_default();
        for (c, axis) in p.point.coords.iter().zip(ordered(s, &p)) {
            let Some(&(_, at)) = axis.values.iter().find(|(v, _)| *v == c.value) else {
                continue;
            };
            let is_switch = matches!(c.value.as_str(), "true" | "false")
                && plan.text_at(at).is_some_and(|x| x == c.value);
            let values = if is_switch {
                vec![]
            } else {
                vec![c.value.clone()]
            };
            let arg = PlanArg {
                key: axis.key.clone(),
                flag: axis.flag.clone(),
                values,
                span: axis.span,
                value_span: at,
            };
            let target = if plan.lab.is_some() && LAB_KEYS.contains(&axis.key.as_str()) {
                lab.retain(|a| a.key != axis.key);
                &mut lab
            } else {
                &mut one.args
            };
            if c.value != "false" || !is_switch {
                target.push(arg);
            }
        }
        let mut pt = test(plan, &one, hosts, opts, parser)?;
        if plan.lab.is_some() {
            pt.lab = Some(parser.lab(plan, &lab)?);
            in_lab(&mut pt.spec);
            fits_the_lab(&pt)?;
        }
        pt.sweep = Some(p);
        out.push(pt);
    }
    Ok(out)
}

/// The axes of `s` in the order of `p`'s coordinates.
fn ordered<'s>(
    s: &'s super::PlanSweep,
    p: &crate::model::sweep::Point,
) -> Vec<&'s super::PlanAxis> {
    p.point
        .coords
        .iter()
        .filter_map(|c| s.axes.iter().find(|a| a.key == c.key))
        .collect()
}

/// The stick DUT carries only frames linerate's engines tag: a test over
/// sockets there is refused before anything runs, with the reason.
fn fits_the_lab(t: &PlanTest) -> Result<(), LoadError> {
    let stick = t
        .lab
        .as_ref()
        .is_some_and(|l| l.dut == Some(crate::lab::DutMode::Stick));
    let sockets = match &t.spec {
        TestSpec::Tcp(_) | TestSpec::Http(_) | TestSpec::Iperf3(_) | TestSpec::Latency(_) => true,
        TestSpec::Udp(_) | TestSpec::Ramp(_) | TestSpec::Search(_) => false,
    };
    if stick && sockets {
        return Err(LoadError::StickSockets {
            test: t.name.clone(),
            reason: crate::lab::stick::socket_reason(),
        });
    }
    Ok(())
}

/// In the lab, senders are pinned as `linerate lab` pins them, so the
/// lab's core layout (from the same CPUs) is what the tests do.
fn in_lab(spec: &mut TestSpec) {
    let cpus = crate::lab::cores::default_cpus();
    let fill = |c: &mut Vec<usize>| {
        if c.is_empty() {
            c.clone_from(&cpus);
        }
    };
    match spec {
        TestSpec::Udp(t) => fill(&mut t.cpus),
        TestSpec::Ramp(r) => fill(&mut r.stream.cpus),
        TestSpec::Search(s) => fill(&mut s.stream.cpus),
        TestSpec::Latency(l) => {
            if let crate::runner::Load::Udp(t) = &mut l.load {
                fill(&mut t.cpus)
            }
        }
        TestSpec::Tcp(_) | TestSpec::Http(_) | TestSpec::Iperf3(_) => {}
    }
}

/// The plan's `[ssh]` table and `allow_target` join the command line's;
/// flags given on the command line win.
/// `copy` is the private copy of the plan's ssh config ssh reads instead of
/// the plan's own file; `untrusted` (no `--trust-plan`) gives ssh the
/// overrides an untrusted plan's config or options cannot undo.
fn merge_run_opts(
    plan: &Plan,
    path: &Path,
    opts: &mut RunOpts,
    copy: Option<PathBuf>,
    untrusted: bool,
) -> Result<(), LoadError> {
    for c in &plan.allow_target {
        if !opts.allow_target.contains(c) {
            opts.allow_target.push(*c);
        }
    }
    let s = &plan.ssh;
    let dir = path.parent().unwrap_or(Path::new("."));
    if opts.ssh.config.is_none() {
        if let Some(c) = &s.config {
            let p = dir.join(c);
            if !p.is_file() {
                return Err(LoadError::NoSshConfig {
                    file: plan.file.clone(),
                    config: c.clone(),
                    path: p.display().to_string(),
                });
            }
            opts.ssh.untrusted |= untrusted;
            opts.ssh.config = Some(copy.unwrap_or(p));
        }
    }
    if !s.options.is_empty() {
        opts.ssh.untrusted |= untrusted;
    }
    for o in &s.options {
        let (k, v) = crate::topology::ssh::option_pair(o).ok_or_else(|| LoadError::SshOption {
            file: plan.file.clone(),
            option: o.clone(),
        })?;
        opts.ssh.options.push((k, v));
    }
    opts.ssh.accept_new |= s.accept_new;
    opts.ssh.push |= s.push;
    if opts.ssh.remote_binary.is_none() {
        opts.ssh.remote_binary = s.remote_binary.clone();
    }
    if let Some(t) = s.connect_timeout {
        opts.ssh.connect_timeout = Duration::from_secs(u64::from(t));
    }
    Ok(())
}

fn host(plan: &Plan, h: &super::PlanHost) -> Result<HostConfig, PlanError> {
    if h.ports.len() > 1 {
        return Err(plan.error_at(
            h.span,
            format!(
                "host {} names {} ports; give each host one port (for a tester with two \
                     ports, name the machine twice: [hosts.gen] and [hosts.sink], one port each)",
                h.name,
                h.ports.len()
            ),
        ));
    }
    let endpoint = match &h.kind {
        // Never spawned: a plan with [lab] runs in the lab it builds, and
        // an iperf3 server has no agent.
        // A VM host's agent is reached through qemu (`vm`).
        HostKind::Local | HostKind::Lab | HostKind::Iperf3(_) | HostKind::Vm(_) => Endpoint::Local,
        HostKind::Netns(n) => Endpoint::Netns(n.clone()),
        HostKind::Ssh(s) => Endpoint::Ssh(
            SshTarget::parse_bare(s).map_err(|e| plan.error_at(h.span, e.to_string()))?,
        ),
    };
    Ok(HostConfig {
        name: h.name.clone(),
        endpoint,
        binary: h.linerate.clone(),
        ports: h.ports.clone(),
        address: h.address,
        iperf3: match h.kind {
            HostKind::Iperf3(a) => Some(a),
            _ => None,
        },
        iperf3_server: h.iperf3_server.map(|s| crate::proto::iperf3::ServerJob {
            listen: std::net::SocketAddr::new(
                std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                s.port,
            ),
            max_clients: s.max_clients,
            max_time_s: f64::from(s.max_test_time_s),
            max_udp_send_bps: s.max_udp_send_bps,
            // Set per test, from the client's own.
            answer_timeout_ms: 0,
            cpus: vec![],
            duration_ms: 0,
        }),
        vm: match &h.kind {
            HostKind::Vm(vm) => Some((**vm).clone()),
            _ => None,
        },
    })
}

/// Gives the parsed test the plan's name for it (a matrix row keeps its
/// own), the plan's allowed targets, its address family and, for iperf3,
/// linerate's own server on the receiving host.
fn set_test_fields(
    spec: &mut TestSpec,
    t: &super::PlanTest,
    allow_target: &[crate::proto::Cidr],
    served: Option<crate::proto::iperf3::ServerJob>,
) {
    let ipv6 = t.target.is_ipv6();
    match spec {
        TestSpec::Tcp(x) => {
            x.name = t.name.clone();
            x.allow = allow_target.to_vec();
        }
        TestSpec::Udp(x) => {
            x.name = t.name.clone();
            x.allow = allow_target.to_vec();
        }
        TestSpec::Latency(l) => match &mut l.load {
            crate::runner::Load::Tcp(x) => {
                x.name = t.name.clone();
                x.allow = allow_target.to_vec();
            }
            crate::runner::Load::Udp(x) => {
                x.name = t.name.clone();
                x.allow = allow_target.to_vec();
            }
        },
        TestSpec::Ramp(r) => {
            r.stream.ipv6 = ipv6;
            r.stream.allow = allow_target.to_vec();
        }
        TestSpec::Search(s) => {
            s.stream.ipv6 = ipv6;
            s.stream.allow = allow_target.to_vec();
        }
        TestSpec::Http(tests) => {
            for x in tests.iter_mut() {
                if x.row.is_none() {
                    x.name = t.name.clone();
                }
                x.allow = allow_target.to_vec();
            }
        }
        TestSpec::Iperf3(x) => {
            x.name = t.name.clone();
            x.job.allow = allow_target.to_vec();
            x.serve = served.map(|s| served_for(s, x));
        }
    }
}

fn test(
    plan: &Plan,
    t: &super::PlanTest,
    hosts: &[HostConfig],
    opts: &RunOpts,
    parser: &dyn TestParser,
) -> Result<PlanTest, PlanError> {
    let kind = t.kind.as_str();
    let allowed = parser.flags(kind);
    let known: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let run_wide = parser.run_flags();
    let run_wide: Vec<&str> = run_wide.iter().map(String::as_str).collect();
    plan.check_args(t, &known, &run_wide)?;
    let index = |name: &str| {
        hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| plan.error_at(t.span, format!("no host '{name}'")))
    };
    let from = t
        .from
        .iter()
        .map(|n| index(n))
        .collect::<Result<Vec<_>, _>>()?;
    let to = index(&t.to)?;
    let dut = t.dut.as_deref().map(index).transpose()?;
    let client_address = from.iter().find_map(|&i| hosts[i].address);
    // linerate's own iperf3 server on `to` listens on the test's target.
    let served = hosts[to].iperf3_server.clone();
    let iperf3 = hosts[to].iperf3.or_else(|| {
        served
            .as_ref()
            .map(|s| std::net::SocketAddr::new(t.target, s.listen.port()))
    });
    let mut argv = vec![
        "linerate".to_string(),
        kind.to_string(),
        match iperf3 {
            Some(a) => format!("--server=iperf3://{a}"),
            None => format!("--target={}", t.target),
        },
    ];
    if let Some(a) = client_address {
        argv.push(format!("--client-address={a}"));
    }
    argv.extend(t.argv());
    let (mut spec, expect, abort) = parser.test(plan, t, &argv, iperf3.is_some())?;
    set_test_fields(&mut spec, t, &opts.allow_target, served);
    crate::engine::check_destination(t.target, &opts.allow_target).map_err(|m| {
        plan.error_at(
            t.span,
            format!("{m}; or list it in the plan's allow_target"),
        )
    })?;
    Ok(PlanTest {
        name: t.name.clone(),
        spec,
        from,
        to,
        dut,
        instances: t.instances,
        target: t.target,
        expect,
        abort,
        sweep: None,
        lab: None,
    })
}

/// The server a test against an `iperf3_server` host starts: on the
/// test's target, as patient as its clients, and bounded by the test (its
/// time, then the results exchange), so it never outlives it by long even
/// when the controller is gone.
fn served_for(
    s: crate::proto::iperf3::ServerJob,
    x: &crate::runner::Iperf3Test,
) -> crate::proto::iperf3::ServerJob {
    let answer_ms = x.job.answer_timeout_ms;
    let test_ms = ((x.params.time_s + x.params.omit_s) * 1e3).ceil() as u64;
    crate::proto::iperf3::ServerJob {
        listen: x.job.server,
        answer_timeout_ms: answer_ms,
        duration_ms: test_ms + answer_ms * 4 + 10_000,
        ..s
    }
}
