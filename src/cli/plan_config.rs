//! Stage two for plan files: a parsed [`crate::plan::Plan`] becomes the same
//! validated configuration the command line produces. Each `[[test]]` is
//! turned into the flags of its ad-hoc command and parsed by the real CLI
//! parser, so a plan accepts exactly the options the command takes, and any
//! error points at the key's line and column.

use crate::cli::run_args::RunArgs;
use crate::cli::{self, Cli};
use crate::lab::ports::{PortFlags, PortsSpec};
use crate::orchestrate::config::{
    Command, HostConfig, PlanConfig, PlanTest, PortLabConfig, RunOpts, TestSpec,
};
use crate::plan::{self, HostKind, Plan, TestKind};
use crate::topology::ssh::SshTarget;
use crate::topology::Endpoint;
use anyhow::{anyhow, bail, Context, Result};
use clap::{CommandFactory, Parser};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flags a plan's test may not set: the plan says where traffic goes, and
/// results and ssh settings belong to the whole run.
const RUN_FLAGS: [&str; 25] = [
    "repeat",
    "baseline",
    "tolerance",
    "junit",
    "client",
    "server",
    "target",
    "client-address",
    "lab",
    "back-to-back",
    "results-dir",
    "name",
    "json",
    "no-progress",
    "interval",
    "ipv6",
    "no-results",
    "allow-target",
    "ssh-config",
    "ssh-option",
    "ssh-accept-new",
    "connect-timeout",
    "remote-binary",
    "push",
    "help",
];

/// `linerate run`: the plan its flags name, validated.
pub fn run_config(a: &RunArgs) -> Result<Command> {
    let mut cmd = load(&a.plan, a.common.run_opts()?, a.trust_plan)?;
    if let Command::Plan(p, _) = &mut cmd {
        p.fail_fast = a.fail_fast;
    }
    Ok(cmd)
}

/// Reads, parses and validates the plan at `path`.
/// `trust` (`--trust-plan`) lets the plan's `[ssh]` run local commands.
pub fn load(path: &Path, mut opts: RunOpts, trust: bool) -> Result<Command> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading plan {}", path.display()))?;
    let file = path.display().to_string();
    let plan = plan::parse(&file, &text).map_err(|e| anyhow!("{e}"))?;
    let copy = if trust {
        None
    } else {
        super::plan_trust::check(&plan, path)?
    };
    merge_run_opts(&plan, path, &mut opts, copy, !trust)?;
    let hosts = plan
        .hosts
        .iter()
        .map(|h| host(&plan, h))
        .collect::<Result<Vec<_>>>()?;
    let mut tests = Vec::new();
    let mut sweeps = Vec::new();
    for t in &plan.tests {
        match &t.sweep {
            None => {
                let mut one = test(&plan, t, &hosts, &opts)?;
                if plan.lab.is_some() {
                    let settings = plan.lab.as_ref().map(|l| l.settings.clone());
                    one.lab = Some(lab_spec(&plan, &settings.unwrap_or_default())?);
                    in_lab(&mut one.spec);
                    fits_the_lab(&one)?;
                }
                tests.push(one);
            }
            Some(s) => {
                sweeps.push(
                    s.spec(&t.name)
                        .info(s.rows.clone(), s.cols.clone(), s.cell.clone())
                        .map_err(|e| anyhow!("{}", plan.error_at(s.span, e)))?,
                );
                tests.extend(sweep_points(&plan, t, s, &hosts, &opts)?);
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
const LAB_KEYS: &[&str] = plan::LAB_KEYS;

/// One test per point of `t`'s sweep: the test with the point's values in
/// place of the swept options, checked by the command's parser (an error
/// points at the value in the list), the lab axes building its lab.
fn sweep_points(
    plan: &Plan,
    t: &plan::PlanTest,
    s: &plan::PlanSweep,
    hosts: &[HostConfig],
    opts: &RunOpts,
) -> Result<Vec<PlanTest>> {
    let points = s
        .spec(&t.name)
        .expand(plan::MAX_TESTS)
        .map_err(|e| anyhow!("{}", plan.error_at(s.span, e)))?;
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
            let arg = plan::PlanArg {
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
        let mut pt = test(plan, &one, hosts, opts)?;
        if plan.lab.is_some() {
            pt.lab = Some(lab_spec(plan, &lab)?);
            in_lab(&mut pt.spec);
            fits_the_lab(&pt)?;
        }
        pt.sweep = Some(p);
        out.push(pt);
    }
    Ok(out)
}

/// The axes of `s` in the order of `p`'s coordinates.
fn ordered<'s>(s: &'s plan::PlanSweep, p: &crate::model::sweep::Point) -> Vec<&'s plan::PlanAxis> {
    p.point
        .coords
        .iter()
        .filter_map(|c| s.axes.iter().find(|a| a.key == c.key))
        .collect()
}

/// The lab `settings` describe, read by `linerate lab`'s own parser.
fn lab_spec(plan: &Plan, settings: &[plan::PlanArg]) -> Result<crate::lab::LabSpec> {
    let mut argv = vec!["linerate".to_string(), "lab".to_string()];
    argv.extend(settings.iter().flat_map(plan::PlanArg::argv));
    let at = |msg: String| {
        let span = settings
            .iter()
            .find(|a| msg.contains(&a.flag) || msg.contains(&a.key))
            .map(|a| a.value_span)
            .or_else(|| plan.lab.as_ref().map(|l| l.span))
            .unwrap_or_default();
        anyhow!("{}", plan.error_at(span, format!("lab setting: {msg}")))
    };
    let parsed = Cli::try_parse_from(&argv).map_err(|e| {
        // The message up to clap's usage line: "required arguments were
        // not provided:" names them on the lines after it.
        let text = e.render().to_string();
        let msg: Vec<&str> = text
            .lines()
            .take_while(|l| !l.starts_with("Usage:"))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        at(msg.join(" ").trim_start_matches("error: ").to_string())
    })?;
    let cli::Command::Lab(a) = parsed.command else {
        return Err(at("not a lab".into()));
    };
    match cli::lab::lab_config(&a).map_err(|e| at(format!("{e:#}")))? {
        Command::Lab(cfg, _) => Ok(cfg.spec),
        _ => Err(at("not a lab".into())),
    }
}

/// The stick DUT carries only frames linerate's engines tag: a test over
/// sockets there is refused before anything runs, with the reason.
fn fits_the_lab(t: &crate::orchestrate::config::PlanTest) -> Result<()> {
    let stick = t
        .lab
        .as_ref()
        .is_some_and(|l| l.dut == Some(crate::lab::DutMode::Stick));
    let sockets = match &t.spec {
        TestSpec::Tcp(_) | TestSpec::Http(_) | TestSpec::Iperf3(_) | TestSpec::Latency(_) => true,
        TestSpec::Udp(_) | TestSpec::Ramp(_) | TestSpec::Search(_) => false,
    };
    if stick && sockets {
        bail!(
            "test '{}' cannot run in a [lab] with dut = \"stick\": {}",
            t.name,
            crate::lab::stick::socket_reason()
        );
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

/// Hosts with a port make a lab around the external DUT: exactly one on the
/// generator side and one on the sink side, and tests between those two.
fn port_lab(
    plan: &Plan,
    hosts: &[HostConfig],
    tests: &[PlanTest],
) -> Result<Option<PortLabConfig>> {
    let with_port: Vec<usize> = (0..hosts.len())
        .filter(|&i| !hosts[i].ports.is_empty())
        .collect();
    if with_port.is_empty() {
        return Ok(None);
    }
    let at = |i: usize, msg: String| anyhow!("{}", plan.error_at(plan.hosts[i].span, msg));
    let sends = |i: usize| tests.iter().any(|t| t.from.contains(&i));
    let receives = |i: usize| tests.iter().any(|t| t.to == i);
    let mut gen = None;
    let mut sink = None;
    for &i in &with_port {
        let name = &hosts[i].name;
        let slot = match (sends(i), receives(i)) {
            (true, false) => &mut gen,
            (false, true) => &mut sink,
            (true, true) => {
                return Err(at(
                    i,
                    format!("host {name} has a port and both sends and receives; a port is one side of the DUT"),
                ))
            }
            (false, false) => {
                return Err(at(i, format!("host {name} has a port but no test uses it")))
            }
        };
        if let Some(other) = slot.replace(i) {
            return Err(at(
                i,
                format!(
                    "hosts {} and {name} both bring a port to the same side of the DUT; \
                     one generator port and one sink port make the lab",
                    hosts[other].name
                ),
            ));
        }
    }
    let (Some(gen), Some(sink)) = (gen, sink) else {
        return Err(at(
            with_port[0],
            "a port lab needs a generator host with a port and a sink host with a port".into(),
        ));
    };
    let ports = PortsSpec::from_flags(&PortFlags {
        gen_port: Some(&hosts[gen].ports[0]),
        sink_port: Some(&hosts[sink].ports[0]),
        ..Default::default()
    })?
    .ok_or_else(|| anyhow!("no ports"))?;
    let (sink4, sink6) = ports.sink_addresses();
    for (t, pt) in tests.iter().zip(&plan.tests) {
        let touches = t.to == sink || t.from.contains(&gen);
        if !touches {
            continue;
        }
        if t.from != [gen] || t.to != sink {
            return Err(anyhow!(
                "{}",
                plan.error_at(
                    pt.span,
                    format!(
                        "test {}: with ports, traffic goes from {} through the DUT to {}; \
                         name exactly those as from and to",
                        t.name, hosts[gen].name, hosts[sink].name
                    )
                )
            ));
        }
        if t.target != std::net::IpAddr::V4(sink4) && t.target != std::net::IpAddr::V6(sink6) {
            return Err(anyhow!(
                "{}",
                plan.error_at(
                    pt.span,
                    format!(
                        "test {}: the sink's port gets {sink4} and {sink6} (the lab's \
                         addressing); send there (target, or address on host {})",
                        t.name, hosts[sink].name
                    )
                )
            ));
        }
    }
    Ok(Some(PortLabConfig {
        gen_host: gen,
        sink_host: sink,
        ports,
    }))
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
) -> Result<()> {
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
                return Err(anyhow!(
                    "{}: [ssh] config = \"{c}\": no such file ({}); paths are relative to the plan",
                    plan.file,
                    p.display()
                ));
            }
            opts.ssh.untrusted |= untrusted;
            opts.ssh.config = Some(copy.unwrap_or(p));
        }
    }
    if !s.options.is_empty() {
        opts.ssh.untrusted |= untrusted;
    }
    for o in &s.options {
        let (k, v) = crate::topology::ssh::option_pair(o)
            .ok_or_else(|| anyhow!("{}: [ssh] options: '{o}' is not KEY=VALUE", plan.file))?;
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

fn host(plan: &Plan, h: &plan::PlanHost) -> Result<HostConfig> {
    if h.ports.len() > 1 {
        return Err(anyhow!(
            "{}",
            plan.error_at(
                h.span,
                format!(
                    "host {} names {} ports; give each host one port (for a tester with two \
                     ports, name the machine twice: [hosts.gen] and [hosts.sink], one port each)",
                    h.name,
                    h.ports.len()
                )
            )
        ));
    }
    let endpoint = match &h.kind {
        // Never spawned: a plan with [lab] runs in the lab it builds, and
        // an iperf3 server has no agent.
        HostKind::Local | HostKind::Lab | HostKind::Iperf3(_) => Endpoint::Local,
        HostKind::Netns(n) => Endpoint::Netns(n.clone()),
        HostKind::Ssh(s) => Endpoint::Ssh(
            SshTarget::parse_bare(s)
                .map_err(|e| anyhow!("{}", plan.error_at(h.span, e.to_string())))?,
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
    })
}

/// The long flags of `linerate KIND` a plan test may set.
fn allowed_flags(kind: &str) -> Vec<String> {
    let cmd = Cli::command();
    cmd.find_subcommand(kind)
        .map(|sub| {
            sub.get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|l| !RUN_FLAGS.contains(l))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn test(plan: &Plan, t: &plan::PlanTest, hosts: &[HostConfig], opts: &RunOpts) -> Result<PlanTest> {
    let kind = t.kind.as_str();
    let allowed = allowed_flags(kind);
    let known: Vec<&str> = allowed.iter().map(String::as_str).collect();
    plan.check_args(t, &known).map_err(|e| anyhow!("{e}"))?;
    let index = |name: &str| {
        hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| anyhow!("{}", plan.error_at(t.span, format!("no host '{name}'"))))
    };
    let from = t
        .from
        .iter()
        .map(|n| index(n))
        .collect::<Result<Vec<_>>>()?;
    let to = index(&t.to)?;
    let dut = t.dut.as_deref().map(index).transpose()?;
    let client_address = from.iter().find_map(|&i| hosts[i].address);
    let iperf3 = hosts[to].iperf3;
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
    // A conversion error names the flag it is about: point at that key.
    let at_test = |e: anyhow::Error| {
        let msg = format!("{e:#}");
        let span = t
            .args
            .iter()
            .find(|a| msg.contains(&a.flag))
            .map(|a| a.value_span)
            .unwrap_or(t.span);
        anyhow!("{}", plan.error_at(span, msg))
    };
    let parsed = Cli::try_parse_from(&argv).map_err(|e| clap_error(plan, t, &e))?;
    let expect = parsed
        .command
        .criteria_args()
        .map(|c| cli::criteria_args::parse_expect(&c.expect))
        .transpose()
        .map_err(at_test)?
        .unwrap_or_default();
    cli::criteria_args::check_measured(
        &expect,
        &parsed.command.name(),
        &parsed.command.figure_flags(),
    )
    .map_err(at_test)?;
    let mut spec = match (t.kind, parsed.command) {
        (TestKind::Tcp, cli::Command::Tcp(a)) if iperf3.is_some() => {
            TestSpec::Iperf3(cli::iperf3::tcp_test(&a).map_err(at_test)?.1)
        }
        (TestKind::Udp, cli::Command::Udp(a)) if iperf3.is_some() => {
            TestSpec::Iperf3(cli::iperf3::udp_test(&a).map_err(at_test)?.1)
        }
        (TestKind::Tcp, cli::Command::Tcp(a)) => cli::tcp::tcp(&a).map_err(at_test)?.1,
        (TestKind::Udp, cli::Command::Udp(a)) => cli::udp::udp_cmd(&a).map_err(at_test)?.1,
        (TestKind::Ramp, cli::Command::Ramp(a)) => {
            TestSpec::Ramp(cli::ramp::ramp(&a).map_err(at_test)?)
        }
        (TestKind::Search, cli::Command::Search(a)) => {
            TestSpec::Search(cli::search::search_cfg(&a).map_err(at_test)?)
        }
        (TestKind::Http, cli::Command::Http(a)) => cli::http::http_tests(&a).map_err(at_test)?.1,
        _ => return Err(at_test(anyhow!("kind '{kind}' cannot run in a plan yet"))),
    };
    let ipv6 = t.target.is_ipv6();
    match &mut spec {
        TestSpec::Tcp(x) => {
            x.name = t.name.clone();
            x.allow = opts.allow_target.clone();
        }
        TestSpec::Udp(x) => {
            x.name = t.name.clone();
            x.allow = opts.allow_target.clone();
        }
        TestSpec::Latency(l) => match &mut l.load {
            crate::runner::Load::Tcp(x) => {
                x.name = t.name.clone();
                x.allow = opts.allow_target.clone();
            }
            crate::runner::Load::Udp(x) => {
                x.name = t.name.clone();
                x.allow = opts.allow_target.clone();
            }
        },
        TestSpec::Ramp(r) => {
            r.stream.ipv6 = ipv6;
            r.stream.allow = opts.allow_target.clone();
        }
        TestSpec::Search(s) => {
            s.stream.ipv6 = ipv6;
            s.stream.allow = opts.allow_target.clone();
        }
        TestSpec::Http(tests) => {
            for x in tests.iter_mut() {
                if x.row.is_none() {
                    x.name = t.name.clone();
                }
                x.allow = opts.allow_target.clone();
            }
        }
        TestSpec::Iperf3(x) => {
            x.name = t.name.clone();
            x.job.allow = opts.allow_target.clone();
        }
    }
    crate::engine::check_destination(t.target, &opts.allow_target).map_err(|m| {
        anyhow!(
            "{}",
            plan.error_at(
                t.span,
                format!("{m}; or list it in the plan's allow_target")
            )
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
        sweep: None,
        lab: None,
    })
}

/// Places a CLI parser error at the key it came from (else at the test).
fn clap_error(plan: &Plan, t: &plan::PlanTest, e: &clap::Error) -> anyhow::Error {
    use clap::error::{ContextKind, ContextValue};
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    let span = t
        .args
        .iter()
        .find(|a| !arg.is_empty() && arg.starts_with(&a.flag))
        .map(|a| a.value_span)
        .unwrap_or(t.span);
    let msg = e
        .render()
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .replace("--", "")
        .replace("argument '", "key '");
    anyhow!(
        "{}",
        plan.error_at(span, format!("in [[test]] \"{}\": {msg}", t.name))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> RunOpts {
        RunOpts {
            name: None,
            line_rate_bps: 10e9,
            results_dir: "r".into(),
            write_results: false,
            json: false,
            progress: false,
            interval_s: None,
            allow_target: vec![],
            cpus: vec![],
            expect_loss: false,
            ssh: Default::default(),
            criteria: Default::default(),
            line_rate_given: false,
        }
    }

    fn load_text(text: &str) -> Result<Command> {
        let dir =
            std::env::temp_dir().join(format!("lr-plan-cfg-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(&dir)?;
        let p = dir.join(format!("p{}.toml", text.len()));
        std::fs::write(&p, text)?;
        let r = load(&p, opts(), false);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    const HOSTS: &str = "[hosts.gen1]\nssh = \"root@198.18.9.1\"\n[hosts.gen2]\nssh = \"root@198.18.9.2\"\n[hosts.sink]\nnetns = \"sink\"\naddress = \"198.18.9.3\"\n";

    #[test]
    fn plan_accepts_http() {
        let text = format!(
            "{HOSTS}[[test]]\nname = \"dl\"\nkind = \"http\"\nfrom = \"gen1\"\nto = \"sink\"\nconnections = 4\ntls = true\nsize = \"10M\"\nduration = 2\n"
        );
        let Command::Plan(p, _) = load_text(&text).unwrap() else {
            panic!("not a plan")
        };
        let TestSpec::Http(v) = &p.tests[0].spec else {
            panic!("not http")
        };
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].name, "dl");
        assert_eq!(v[0].connections, 4);
        assert!(v[0].tls);
        assert_eq!(v[0].duration, Duration::from_secs(2));
    }

    #[test]
    fn plan_tests_become_config() {
        let text = format!(
            "{HOSTS}[[test]]\nname = \"u\"\nkind = \"udp\"\nfrom = [\"gen1\", \"gen2\"]\nto = \"sink\"\ninstances = 3\nframe_size = 128\nrate = \"10kpps\"\nduration = 2\n[[test]]\nkind = \"tcp\"\nfrom = \"gen1\"\nto = \"sink\"\nstreams = 10\n"
        );
        let Command::Plan(p, _) = load_text(&text).unwrap() else {
            panic!("not a plan")
        };
        assert_eq!(p.hosts.len(), 3);
        assert!(matches!(p.hosts[0].endpoint, Endpoint::Ssh(_)));
        let u = &p.tests[0];
        assert_eq!((u.from.clone(), u.to, u.instances), (vec![0, 1], 2, 3));
        let TestSpec::Udp(t) = &u.spec else { panic!() };
        assert_eq!(t.name, "u");
        assert_eq!(t.frame, crate::proto::FrameSpec::Fixed(128));
        assert_eq!(t.rate_pps, Some(10_000.0));
        assert_eq!(t.duration, Duration::from_secs(2));
        let TestSpec::Tcp(t) = &p.tests[1].spec else {
            panic!()
        };
        assert_eq!(t.streams, 10);
        assert_eq!(
            p.tests[1].target,
            "198.18.9.3".parse::<std::net::IpAddr>().unwrap()
        );
    }

    #[test]
    fn bad_values_point_at_the_key() {
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\nframe_size = 12\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains(":12:14:"), "{e}");
        assert!(e.contains("frame size 12"), "{e}");
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"tcp\"\nfrom = \"gen1\"\nto = \"sink\"\nframe_size = 64\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains(":12:1:") && e.contains("frame_size"), "{e}");
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"tcp\"\nfrom = \"gen1\"\nto = \"sink\"\nresults_dir = \"x\"\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains(":12:1:"), "{e}");
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\nduration = 0.01\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains(":12:12:") && e.contains("duration"), "{e}");
    }

    /// Issue 23: a bare rate in a plan is refused at its key, with units.
    #[test]
    fn plan_rates_need_units() {
        let udp = |line: &str| {
            format!("{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\n{line}\n")
        };
        let e = load_text(&udp("rate = 100000")).unwrap_err().to_string();
        assert!(e.contains(":12:8:"), "{e}");
        assert!(
            e.contains("a rate needs a unit: 100000pps, 100kpps or 100kbps?"),
            "{e}"
        );
        let e = load_text(&udp("rate = \"1.5mpps\""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":12:8:") && e.contains("did you mean 1.5Mpps?"),
            "{e}"
        );
        assert!(load_text(&udp("rate = \"1.5Mpps\"")).is_ok());
        assert!(load_text(&udp("duration = \"2m\"")).is_ok());
        let e = load_text(&udp("flows = 8\nflow_mode = \"one\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--flow-mode ports"), "{e}");
    }

    /// Issue 21: seed 001's matrix from one plan, in the lab.
    #[test]
    fn plan_sweeps_expand_with_lab_axes() {
        let text = "[lab]\ndut = \"route\"\n[[test]]\nname = \"ndr\"\nkind = \"search\"\n\
            sweep = { dut = [\"route\", \"bridge\", \"nat\", \"fw\"], profile = [\"bench-var2-1514b\", \"bench-var2-imix\", \"bench-var2-64b\", \"bench\"], bidir = [false, true] }\n\
            rows = [\"profile\", \"bidir\"]\ncols = [\"dut\"]\n";
        let Command::Plan(p, _) = load_text(text).unwrap() else {
            panic!("not a plan")
        };
        assert_eq!(p.tests.len(), 32);
        assert_eq!(p.sweeps.len(), 1);
        assert_eq!(p.sweeps[0].axes, ["dut", "profile", "bidir"]);
        assert_eq!(p.sweeps[0].cols, ["dut"]);
        let t = &p.tests[9];
        assert_eq!(t.name, "ndr dut=bridge profile=bench-var2-1514b bidir=true");
        assert_eq!(
            t.lab.as_ref().and_then(|l| l.dut),
            Some(crate::lab::DutMode::Bridge)
        );
        let TestSpec::Search(s) = &t.spec else {
            panic!("not a search")
        };
        assert!(s.stream.bidir);
        assert_eq!(s.profiles[0].name, "bench-var2-1514b");
        let TestSpec::Search(s) = &p.tests[8].spec else {
            panic!("not a search")
        };
        assert!(!s.stream.bidir);
        assert_eq!(p.tests[8].sweep.as_ref().unwrap().point.index, 8);
    }

    /// Issue 35: `[lab] dut_vm = true` with its kernel, vCPUs and
    /// accelerator is the DUT VM `linerate lab --dut-vm` builds.
    #[test]
    fn plan_lab_dut_vm() {
        let text = "[lab]\ndut = \"nat\"\ndut_vm = true\ndut_kernel = \"debian:trixie\"\n\
                    dut_vcpus = 2\nvm_accel = \"tcg\"\n[[test]]\nkind = \"udp\"\n";
        let Command::Plan(p, _) = load_text(text).unwrap() else {
            panic!("not a plan")
        };
        let lab = p.tests[0].lab.as_ref().unwrap();
        assert_eq!(lab.dut, Some(crate::lab::DutMode::Nat));
        let vm = lab.dut_vm.as_ref().expect("a DUT VM");
        assert_eq!(vm.kernel, crate::vm::KernelSource::Debian("trixie".into()));
        assert_eq!((vm.cpus, vm.accel), (2, crate::vm::Accel::Tcg));
        let Command::Plan(p, _) = load_text("[lab]\n[[test]]\nkind = \"udp\"\n").unwrap() else {
            panic!("not a plan")
        };
        assert!(p.tests[0].lab.as_ref().unwrap().dut_vm.is_none());
        // A VM setting without the VM is refused at its place.
        let e = match load_text("[lab]\ndut_vcpus = 2\n[[test]]\nkind = \"udp\"\n") {
            Ok(_) => panic!("dut_vcpus without dut_vm was taken"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("dut-vm") || e.contains("dut_vm"), "{e}");
    }

    /// Issue 21: the queue count of the lab's veths, set in [lab] or swept.
    #[test]
    fn plan_lab_queues_set_and_swept() {
        let Command::Plan(p, _) =
            load_text("[lab]\nqueues = 4\n[[test]]\nkind = \"udp\"\n").unwrap()
        else {
            panic!("not a plan")
        };
        assert_eq!(p.tests[0].lab.as_ref().map(|l| l.queues), Some(4));
        let Command::Plan(p, _) = load_text("[lab]\n[[test]]\nkind = \"udp\"\n").unwrap() else {
            panic!("not a plan")
        };
        assert_eq!(
            p.tests[0].lab.as_ref().map(|l| l.queues),
            Some(1),
            "default"
        );
        let text = "[lab]\nmtu = 1500\n[[test]]\nname = \"q\"\nkind = \"udp\"\n\
                    sweep = { queues = [1, 2, 16], frame_size = [64, 1518] }\n";
        let Command::Plan(p, _) = load_text(text).unwrap() else {
            panic!("not a plan")
        };
        assert_eq!(p.tests.len(), 6);
        let queues: Vec<u32> = p
            .tests
            .iter()
            .filter_map(|t| t.lab.as_ref().map(|l| l.queues))
            .collect();
        assert_eq!(queues, [1, 1, 2, 2, 16, 16]);
        assert_eq!(p.tests[2].name, "q queues=2 frame_size=64");
        let c = &p.tests[2].sweep.as_ref().unwrap().point.coords[0];
        assert_eq!((c.key.as_str(), c.value.as_str()), ("queues", "2"));
        // Out of range: at the value, with the range and why.
        for (text, at) in [
            ("[lab]\nqueues = 0\n[[test]]\nkind = \"udp\"\n", ":2:10:"),
            (
                "[lab]\n[[test]]\nkind = \"udp\"\nsweep = { queues = [2, 17] }\n",
                ":4:24:",
            ),
        ] {
            let e = load_text(text).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains("1..=16"), "{e}");
            assert!(e.contains("NAPI"), "says why: {e}");
        }
    }

    #[test]
    fn plan_sweep_errors_point_at_the_value() {
        let udp = |lines: &str| {
            format!("{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\n{lines}\n")
        };
        // The second element of the list, line 12 column 29.
        let e = load_text(&udp("sweep = { frame_size = [64, 12] }"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(":12:29:") && e.contains("frame size 12"), "{e}");
        let e = load_text(&udp(
            "sweep = { frame_size = [64, 128, 256], rate = [\"1kpps\", \"2kpps\"] }\nzip = [[\"frame_size\", \"rate\"]]",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains(":13:7:") && e.contains("3 values"), "{e}");
        let e = load_text(&udp("sweep = { frame_sise = [64] }"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(":12:11:") && e.contains("frame_size"), "{e}");
        let e = load_text(&udp("frame_size = 64\nsweep = { frame_size = [64] }"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":13:11:") && e.contains("both set and swept"),
            "{e}"
        );
        let e = load_text(&udp("sweep = { flows = [1, 2] }\nrows = [\"dut\"]"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(":13:9:") && e.contains("does not sweep"), "{e}");
        let e = load_text(&udp("rows = [\"flows\"]"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":12:1:") && e.contains("only means something"),
            "{e}"
        );
        // Without [lab], dut is not an option of udp.
        let e = load_text(&udp("sweep = { dut = [\"nat\"] }"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":12:11:") && e.contains("unknown key 'dut'"),
            "{e}"
        );
        // A lab setting is checked by `linerate lab`'s parser, at its value.
        let e =
            load_text("[lab]\n[[test]]\nkind = \"udp\"\nsweep = { dut = [\"route\", \"nut\"] }\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains(":4:27:") && e.contains("nut"), "{e}");
        let e = load_text(&format!("[lab]\n{HOSTS}[[test]]\nkind = \"udp\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("remove [hosts]"), "{e}");
    }
}
