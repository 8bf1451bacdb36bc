//! `linerate lab`: build the lab, run the standard suite, tear down.

use crate::cli::LabArgs;
use crate::controller::interrupted;
use crate::engine::udp;
use crate::lab::ports::PortsSpec;
use crate::lab::{self, LabSpec};
use crate::proto::{Direction, FrameSpec};
use crate::results::FlowMode;
use crate::run::Run;
use crate::runner::{Ends, TcpTest, UdpTest};
use anyhow::Result;
use std::time::Duration;

pub fn lab(args: &LabArgs) -> i32 {
    if args.cleanup {
        return match lab::cleanup() {
            Ok(v) if v.is_empty() => {
                println!("nothing to clean up: no lr-* namespaces found");
                0
            }
            Ok(v) => {
                println!("removed {}", v.join(", "));
                0
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                1
            }
        };
    }
    let spec = LabSpec {
        dut: Some(args.dut),
        fw_rules: args.fw_rules,
        mtu: args.mtu,
        dut_loss_pct: args.dut_loss,
        dut_police_pps: args.dut_police,
    };
    let ports = match PortsSpec::from_flags(&args.port_flags()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    let checked = match &ports {
        Some(p) => lab::ports::preflight_ports(&spec, p).map(drop),
        None => lab::preflight(&spec),
    };
    if let Err(e) = checked {
        eprintln!("error: {e:#}");
        return 2;
    }
    // No clean-up pass here: this lab's namespaces die with its agents, and
    // removing lr-* names at start could break another user's lab.
    let name = args.common.name.clone().unwrap_or_else(|| match &ports {
        Some(p) if p.dut.is_none() => "lab-ports-back-to-back".into(),
        Some(_) => "lab-ports".into(),
        None => format!("lab-{}", args.dut.name()),
    });
    let mut run = match Run::start(&args.common, &name, true) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 1;
        }
    };
    let err = suite(args, spec, ports.as_ref(), &mut run).err();
    run.finish(err)
}

fn suite(args: &LabArgs, spec: LabSpec, ports: Option<&PortsSpec>, run: &mut Run) -> Result<()> {
    let secs = args.duration.unwrap_or(if args.quick { 2.0 } else { 6.0 });
    let d = Duration::from_secs_f64(secs.clamp(0.5, 3600.0));
    let direction: Direction = args.direction.into();
    let cpus = args.common.cpus.clone().map(|c| c.0).unwrap_or_default();
    let allow = args.common.allow_target.clone();
    let udp = |name: &str, frame: FrameSpec, mode: FlowMode, ipv6: bool| UdpTest {
        name: name.into(),
        ipv6,
        frame,
        flow_mode: mode,
        flows: 16,
        direction,
        duration: d,
        rate_pps: None,
        rate_profile: None,
        batch: 64,
        cpus: cpus.clone(),
        allow: allow.clone(),
    };
    let tcp = |name: &str, streams: u16, ipv6: bool| TcpTest {
        name: name.into(),
        ipv6,
        streams,
        direction: Direction::Forward,
        duration: d,
        cpus: cpus.clone(),
        congestion: None,
        buffer_len: 128 * 1024,
        allow: allow.clone(),
    };
    let log_dir = run.dir.as_ref().map(|r| r.path.join("agents"));

    let wanted = |name: &str| {
        args.only.is_empty()
            || args
                .only
                .iter()
                .any(|o| name.to_lowercase().contains(&o.to_lowercase()))
    };
    let self_test = udp(
        "self-test udp 64B var2",
        FrameSpec::Fixed(64),
        FlowMode::Var2,
        false,
    );
    // 1. The tester measured against itself: what any DUT result is capped by.
    if wanted(&self_test.name) {
        let self_log = log_dir.as_deref().map(|p| p.join("self-test"));
        if let Some(p) = &self_log {
            std::fs::create_dir_all(p)?;
        }
        let mut b2b = lab::build(LabSpec { dut: None, ..spec }, self_log.as_deref())?;
        run.results.labs.push(b2b.topology.clone());
        let lab_idx = run.results.labs.len() - 1;
        let mut ends = b2b.ends(Some(lab_idx));
        run.udp(&mut ends, &self_test);
        b2b.fleet.shutdown();
    }
    if interrupted() {
        return Ok(());
    }

    // 2. Through the DUT.
    let mut tcp_tests = vec![
        tcp("tcp 1 stream", 1, false),
        tcp("tcp 4 streams", 4, false),
    ];
    let mut udp_tests = vec![
        udp("udp 64B var2", FrameSpec::Fixed(64), FlowMode::Var2, false),
        udp("udp imix var2", FrameSpec::Imix, FlowMode::Var2, false),
        udp(
            "udp 1518B var2",
            FrameSpec::Fixed(1518),
            FlowMode::Var2,
            false,
        ),
        udp(
            "udp 64B one flow",
            FrameSpec::Fixed(64),
            FlowMode::One,
            false,
        ),
    ];
    if args.ipv6 {
        // IPv6 + UDP + the linerate header need 84 B; imix's 64 B frames cannot be sent.
        tcp_tests.push(tcp("tcp 1 stream ipv6", 1, true));
        udp_tests.push(udp(
            "udp 84B var2 ipv6",
            FrameSpec::Fixed(84),
            FlowMode::Var2,
            true,
        ));
        udp_tests.push(udp(
            "udp 1518B var2 ipv6",
            FrameSpec::Fixed(1518),
            FlowMode::Var2,
            true,
        ));
        udp_tests.push(udp(
            "udp 84B one flow ipv6",
            FrameSpec::Fixed(84),
            FlowMode::One,
            true,
        ));
    }
    tcp_tests.retain(|t| wanted(&t.name));
    udp_tests.retain(|t| wanted(&t.name));
    let any_profile = !args.quick
        && !args.no_search
        && crate::loadtest::SEED_PROFILES
            .iter()
            .any(|n| profile_wanted(args, n));
    if tcp_tests.is_empty() && udp_tests.is_empty() && !any_profile {
        if run.results.tests.is_empty() {
            anyhow::bail!("--only {:?} matches no test of the suite", args.only);
        }
        return Ok(());
    }
    let mut l = match ports {
        Some(p) => lab::ports::build(&spec, p, log_dir.as_deref())?,
        None => lab::build(spec, log_dir.as_deref())?,
    };
    run.results.labs.push(l.topology.clone());
    let lab_idx = run.results.labs.len() - 1;
    let mut ends = l.ends(Some(lab_idx));
    for t in &tcp_tests {
        if interrupted() {
            return Ok(());
        }
        run.tcp(&mut ends, t);
    }
    for t in &udp_tests {
        if interrupted() {
            return Ok(());
        }
        run.udp(&mut ends, t);
    }
    if any_profile {
        profiles(args, run, &mut ends)?;
    }
    drop(ends);
    l.fleet.shutdown();
    Ok(())
}

/// `--only` matches a profile by part of its name, or all with `profiles`.
fn profile_wanted(args: &LabArgs, name: &str) -> bool {
    args.only.is_empty()
        || args
            .only
            .iter()
            .any(|o| name.contains(&o.to_lowercase()) || o.eq_ignore_ascii_case("profiles"))
}

/// Per seed profile: a ramp, then an MLRsearch for NDR and PDR, both bounded
/// by what the tester showed it can send in the self-test.
fn profiles(args: &LabArgs, run: &mut Run, ends: &mut Ends) -> Result<()> {
    use crate::loadtest::{self, ProfileArgs, SearchPlan};
    use crate::search;
    // The tester's own ceiling: above it every trial measures the tester.
    let cap = run
        .results
        .tests
        .iter()
        .filter(|t| t.name.starts_with("self-test"))
        .flat_map(|t| t.directions.iter().map(|d| d.rx_pps))
        .fold(0.0, f64::max);
    let pa = ProfileArgs {
        profile: None,
        frame_size: None,
        flow_mode: None,
        flows: 16,
        bidir: args.direction == crate::cli::DirectionArg::Both,
    };
    let secs = args.duration.unwrap_or(8.0).clamp(2.0, 600.0);
    let mut lines = Vec::new();
    for name in loadtest::SEED_PROFILES {
        if interrupted() {
            break;
        }
        if !profile_wanted(args, name) {
            continue;
        }
        let p = loadtest::seed_profile(name)?;
        let line_pps =
            crate::units::line_rate_pps(args.common.line_rate, udp::average_frame(p.frame));
        let top = if cap > 0.0 {
            (cap * 1.2).min(line_pps)
        } else {
            line_pps
        };
        let spec = search::RampSpec {
            warmup_pps: top * 0.05,
            warmup_s: 1.0,
            target_pps: top,
            ramp_s: secs,
            hold_s: 2.0,
        };
        lines.extend(loadtest::run_ramp(
            ends,
            &p,
            &pa,
            &spec,
            0.001,
            false,
            &args.common,
            run,
        )?);
        let goal = search::MlrGoal {
            final_trial_duration_s: 1.0,
            initial_trial_duration_s: 0.5,
            duration_sum_s: 2.0,
            relative_width: 0.02,
            ..search::MlrGoal::ndr()
        };
        let plan = SearchPlan {
            method: loadtest::Method::Mlr,
            min_rate: Some(format!("{}pps", (top / 100.0).max(1000.0).round())),
            max_rate: format!("{}pps", top.round()),
            goals: vec![
                goal.clone(),
                search::MlrGoal {
                    name: "pdr".into(),
                    loss_ratio: 0.005,
                    ..goal
                },
            ],
            rfc_trial_s: 60.0,
            rfc_waits: true,
            rfc_acceptable_loss: 0.0,
            rfc_resolution: 0.02,
            frame_loss: false,
            cap_pps: None,
        };
        lines.extend(loadtest::run_search(
            ends.reborrow(),
            &p,
            &pa,
            &plan,
            false,
            &args.common,
            run,
        )?);
    }
    for l in lines {
        eprintln!("{l}");
    }
    Ok(())
}
