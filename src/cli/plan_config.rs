//! Stage two for plan files: `plan::config` turns a parsed plan into the
//! same validated configuration the command line produces; this file is
//! the command line's part of it ([`CliParser`]). Each `[[test]]` is
//! turned into the flags of its ad-hoc command and parsed by the real CLI
//! parser, so a plan accepts exactly the options the command takes, and
//! any error points at the key's line and column.

use crate::cli::run_args::RunArgs;
use crate::cli::{self, Cli};
use crate::model::criteria::Criterion;
use crate::orchestrate::config::LabSpec;
use crate::orchestrate::config::{AbortOpts, Command, RunOpts, TestSpec};
use crate::plan::config::TestParser;
use crate::plan::{self, Plan, PlanError, TestKind};
use anyhow::{anyhow, Result};
use clap::{CommandFactory, Parser};
use std::path::Path;

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
pub fn load(path: &Path, opts: RunOpts, trust: bool) -> Result<Command> {
    Ok(plan::config::load(path, opts, trust, &CliParser)?)
}

/// A plan's tests and `[lab]` read by the command line's own parser.
pub struct CliParser;

impl TestParser for CliParser {
    fn flags(&self, kind: &str) -> Vec<String> {
        allowed_flags(kind)
    }

    fn run_flags(&self) -> Vec<String> {
        let cmd = Cli::command();
        cmd.find_subcommand("run")
            .map(|sub| {
                sub.get_arguments()
                    .filter_map(|a| a.get_long())
                    .filter(|l| RUN_FLAGS.contains(l) && *l != "help")
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn test(
        &self,
        plan: &Plan,
        t: &plan::PlanTest,
        argv: &[String],
        iperf3: bool,
    ) -> Result<(TestSpec, Vec<Criterion>, Option<AbortOpts>), PlanError> {
        test(plan, t, argv, iperf3)
    }

    fn lab(&self, plan: &Plan, settings: &[plan::PlanArg]) -> Result<LabSpec, PlanError> {
        lab_spec(plan, settings)
    }
}

/// The lab `settings` describe, read by `linerate lab`'s own parser.
fn lab_spec(plan: &Plan, settings: &[plan::PlanArg]) -> Result<LabSpec, PlanError> {
    let mut argv = vec!["linerate".to_string(), "lab".to_string()];
    argv.extend(settings.iter().flat_map(plan::PlanArg::argv));
    let at = |msg: String| {
        let span = settings
            .iter()
            .find(|a| msg.contains(&a.flag) || msg.contains(&a.key))
            .map(|a| a.value_span)
            .or_else(|| plan.lab.as_ref().map(|l| l.span))
            .unwrap_or_default();
        plan.error_at(span, format!("lab setting: {msg}"))
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

/// The test `argv` describes, and its criteria; errors at `t`'s keys.
fn test(
    plan: &Plan,
    t: &plan::PlanTest,
    argv: &[String],
    iperf3: bool,
) -> Result<(TestSpec, Vec<Criterion>, Option<AbortOpts>), PlanError> {
    let kind = t.kind.as_str();
    // A conversion error names the flag it is about: point at that key.
    let at_test = |e: anyhow::Error| {
        let msg = format!("{e:#}");
        let span = t
            .args
            .iter()
            .find(|a| msg.contains(&a.flag))
            .map(|a| a.value_span)
            .unwrap_or(t.span);
        plan.error_at(span, msg)
    };
    let parsed = Cli::try_parse_from(argv).map_err(|e| clap_error(plan, t, &e))?;
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
    // `abort_on_fail = true`: the test's own criteria stop the run.
    let abort = match parsed.command.criteria_args() {
        Some(c) => c.abort_opts(&expect).map_err(at_test)?,
        None => None,
    };
    if abort.is_some() {
        crate::orchestrate::abort::check_command(&parsed.command.name(), iperf3)
            .map_err(|e| at_test(e.into()))?;
    }
    let spec = match (t.kind, parsed.command) {
        (TestKind::Tcp, cli::Command::Tcp(a)) if iperf3 => {
            TestSpec::Iperf3(cli::iperf3::tcp_test(&a).map_err(at_test)?.1)
        }
        (TestKind::Udp, cli::Command::Udp(a)) if iperf3 => {
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
    Ok((spec, expect, abort))
}

/// Places a CLI parser error at the key it came from (else at the test).
fn clap_error(plan: &Plan, t: &plan::PlanTest, e: &clap::Error) -> PlanError {
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
    plan.error_at(span, format!("in [[test]] \"{}\": {msg}", t.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrate::config::Endpoint;
    use std::time::Duration;

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
        // One directory per call: tests run in parallel, and two plans of
        // the same length once shared a file (and a test read the other's).
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("lr-plan-cfg-{}-{n}", std::process::id()));
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

    /// `dscp` in a `[[test]]` is `--dscp`: names in any case, numbers, on
    /// udp, tcp and http; a bad value is an error at its key that lists
    /// the valid forms.
    #[test]
    fn plan_tests_take_a_dscp() {
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\ndscp = \"EF\"\n\
             [[test]]\nkind = \"tcp\"\nfrom = \"gen1\"\nto = \"sink\"\ndscp = 10\n\
             [[test]]\nkind = \"http\"\nfrom = \"gen1\"\nto = \"sink\"\ndscp = \"af41\"\n"
        );
        let Command::Plan(p, _) = load_text(&text).unwrap() else {
            panic!("not a plan")
        };
        let dscp = |spec: &TestSpec| match spec {
            TestSpec::Udp(t) => t.dscp,
            TestSpec::Tcp(t) => t.dscp,
            TestSpec::Http(v) => v[0].dscp,
            _ => panic!("not udp, tcp or http"),
        };
        let got: Vec<Option<u8>> = p
            .tests
            .iter()
            .map(|t| dscp(&t.spec).map(crate::proto::Dscp::value))
            .collect();
        assert_eq!(got, [Some(46), Some(10), Some(34)]);
        let bad = format!(
            "{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\ndscp = \"af14\"\n"
        );
        let e = format!("{:#}", load_text(&bad).unwrap_err());
        assert!(e.contains(":12:"), "at the dscp key's line: {e}");
        assert!(
            e.contains("'af14' is not a DSCP") && e.contains("af11..af43"),
            "{e}"
        );
    }

    #[test]
    fn a_plan_test_aborts_on_its_own_criteria() {
        let text = format!(
            "{HOSTS}[[test]]\nname = \"u\"\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\nexpect = [\"loss<=0.1%\"]\nabort_on_fail = true\nabort_after = 5\n[[test]]\nname = \"t\"\nkind = \"tcp\"\nfrom = \"gen1\"\nto = \"sink\"\nexpect = [\"goodput>=1Gbit/s\"]\n"
        );
        let Command::Plan(p, _) = load_text(&text).unwrap() else {
            panic!("not a plan")
        };
        assert_eq!(
            p.tests[0].abort,
            Some(AbortOpts {
                after: Some(Duration::from_secs(5))
            })
        );
        assert_eq!(p.tests[0].expect[0].text, "loss<=0.1%");
        assert_eq!(p.tests[1].abort, None);
        // Without a criterion, or with none checked while the test runs:
        // refused at the key.
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\nabort_on_fail = true\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains(":12:17:") && e.contains("--expect"), "{e}");
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"tcp\"\nfrom = \"gen1\"\nto = \"sink\"\nexpect = [\"cpu<=50%\"]\nabort_on_fail = true\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains("none of the criteria can be checked"), "{e}");
        let text = format!(
            "{HOSTS}[[test]]\nkind = \"http\"\nfrom = \"gen1\"\nto = \"sink\"\nexpect = [\"goodput>=1Gbit/s\"]\nabort_on_fail = true\n"
        );
        let e = load_text(&text).unwrap_err().to_string();
        assert!(e.contains("does not work with http"), "{e}");
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
            Some(crate::orchestrate::config::DutMode::Bridge)
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
        assert_eq!(lab.dut, Some(crate::orchestrate::config::DutMode::Nat));
        let vm = lab.dut_vm.as_ref().expect("a DUT VM");
        assert_eq!(
            vm.kernel,
            crate::orchestrate::config::KernelSource::Debian("trixie".into())
        );
        assert_eq!(
            (vm.cpus, vm.accel),
            (2, crate::orchestrate::config::Accel::Tcg)
        );
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
