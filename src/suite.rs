//! `linerate lab`: build the lab, run the standard suite, tear down.

use crate::cli::LabArgs;
use crate::controller::interrupted;
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
    };
    if let Err(e) = lab::preflight(&spec) {
        eprintln!("error: {e:#}");
        return 2;
    }
    // No clean-up pass here: this lab's namespaces die with its agents, and
    // removing lr-* names at start could break another user's lab.
    let name = args
        .common
        .name
        .clone()
        .unwrap_or_else(|| format!("lab-{}", args.dut.name()));
    let mut run = match Run::start(&args.common, &name, true) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 1;
        }
    };
    let err = suite(args, spec, &mut run).err();
    run.finish(err)
}

fn suite(args: &LabArgs, spec: LabSpec, run: &mut Run) -> Result<()> {
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
        let mut ends = Ends {
            fleet: &mut b2b.fleet,
            gen: b2b.gen,
            sink: b2b.sink,
            observers: vec![],
            gen_addr: b2b.gen_addr.clone(),
            sink_addr: b2b.sink_addr.clone(),
            through_dut: false,
            lab: Some(lab_idx),
        };
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
    if tcp_tests.is_empty() && udp_tests.is_empty() {
        if run.results.tests.is_empty() {
            anyhow::bail!("--only {:?} matches no test of the suite", args.only);
        }
        return Ok(());
    }
    let mut l = lab::build(spec, log_dir.as_deref())?;
    run.results.labs.push(l.topology.clone());
    let lab_idx = run.results.labs.len() - 1;
    let mut ends = Ends {
        fleet: &mut l.fleet,
        gen: l.gen,
        sink: l.sink,
        observers: l.dut.into_iter().collect(),
        gen_addr: l.gen_addr.clone(),
        sink_addr: l.sink_addr.clone(),
        through_dut: true,
        lab: Some(lab_idx),
    };
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
    l.fleet.shutdown();
    Ok(())
}
