//! `linerate lab`: build the lab, run the standard suite, tear down.

use crate::lab::{self, LabSpec};
use crate::model::error::{chain, Context};
use crate::model::signals::stop_requested;
use crate::model::stderr::errln;
use crate::orchestrate::config::{self, LabConfig, RunOpts, SearchConfig, SearchPlan, Stream};
use crate::orchestrate::error::{fail, Result};
use crate::orchestrate::run::Run;
use crate::proto::{Direction, FrameSpec};
use crate::results::FlowMode;
use crate::runner::{Ends, HttpServerSide, HttpTest, LatencyTest, TcpTest, UdpTest};
use std::time::Duration;

mod profiles;

use profiles::{profile_wanted, profiles};

pub fn lab(args: &LabConfig, opts: &RunOpts) -> i32 {
    let checked = match &args.ports {
        Some(p) => lab::ports::preflight_ports(&args.spec, p).map(drop),
        None => lab::preflight(&args.spec),
    };
    if let Err(e) = checked {
        errln!("error: {e:#}");
        return 2;
    }
    // No clean-up pass here: this lab's namespaces die with its agents, and
    // removing lr-* names at start could break another user's lab.
    let name = opts.name.clone().unwrap_or_else(|| match &args.ports {
        Some(p) if p.dut.is_none() => "lab-ports-back-to-back".into(),
        Some(_) => "lab-ports".into(),
        None => format!(
            "lab-{}",
            args.spec.dut.map(|d| d.name()).unwrap_or("back-to-back")
        ),
    });
    let mut run = match Run::start(opts, &name) {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {}", chain(&e));
            return 2;
        }
    };
    let n = run.repeat();
    let mut err = None;
    for i in 1..=n {
        if stop_requested() || err.is_some() {
            break;
        }
        if n > 1 {
            errln!("repetition {i} of {n} of the suite");
        }
        err = suite(args, opts, &mut run).err();
    }
    run.finish(err)
}

fn suite(args: &LabConfig, opts: &RunOpts, run: &mut Run) -> Result<()> {
    let ports = args.ports.as_ref();
    let secs = args
        .duration_s
        .unwrap_or(if args.quick { 2.0 } else { 6.0 });
    let make = RowMaker {
        args,
        d: Duration::from_secs_f64(secs.clamp(0.5, 3600.0)),
        cpus: &opts.cpus,
        allow: &opts.allow_target,
    };
    let log_dir = run.dir.as_ref().map(|r| r.path.join("agents"));
    let self_test = make.udp(
        "self-test udp 64B var2",
        FrameSpec::Fixed(64),
        FlowMode::Var2,
        false,
    );
    // 1. The tester measured against itself: what any DUT result is capped by.
    if wanted(args, &self_test.name) {
        run_self_test(&args.spec, &self_test, log_dir.as_deref(), run)?;
    }
    if stop_requested() {
        return Ok(());
    }

    // 2. Through the DUT.
    let stick = args.spec.dut == Some(lab::DutMode::Stick) && ports.is_none();
    let mut rows = suite_rows(&make, stick);
    let notes = if stick {
        rows.skip_on_stick()
    } else {
        Vec::new()
    };
    if rows.is_empty() {
        if !notes.is_empty() {
            fail!(
                "--only {:?} leaves no test that runs on the stick DUT: {}",
                args.only,
                notes.join(" ")
            );
        }
        if run.results.tests.is_empty() {
            fail!("--only {:?} matches no test of the suite", args.only);
        }
        return Ok(());
    }
    let mut l = match ports {
        Some(p) => lab::ports::build(&args.spec, p, log_dir.as_deref())?,
        None => lab::build(args.spec.clone(), log_dir.as_deref())?,
    };
    l.topology.notes.extend(notes);
    run.results.labs.push(l.topology.clone());
    let lab_idx = run.results.labs.len() - 1;
    let mut ends = Ends::of_lab(&mut l, Some(lab_idx));
    if !rows.run(run, &mut ends) {
        return Ok(());
    }
    if rows.any_profile {
        profiles(args, opts, run, &mut ends)?;
    }
    drop(ends);
    l.fleet.shutdown();
    Ok(())
}

/// Whether `--only` selects the suite row `name` (by part of its name).
fn wanted(args: &LabConfig, name: &str) -> bool {
    args.only.is_empty()
        || args
            .only
            .iter()
            .any(|o| name.to_lowercase().contains(o.as_str()))
}

/// The self-test: `test` on a back-to-back lab of `spec`'s shape, its
/// agents' logs under `log_dir/self-test`.
fn run_self_test(
    spec: &LabSpec,
    test: &UdpTest,
    log_dir: Option<&std::path::Path>,
    run: &mut Run,
) -> Result<()> {
    let self_log = log_dir.map(|p| p.join("self-test"));
    if let Some(p) = &self_log {
        std::fs::create_dir(p).with_context(|| format!("creating {}", p.display()))?;
    }
    let mut b2b = lab::build(
        LabSpec {
            dut: None,
            dut_vm: None,
            dut_bond: false,
            ..spec.clone()
        },
        self_log.as_deref(),
    )?;
    run.results.labs.push(b2b.topology.clone());
    let lab_idx = run.results.labs.len() - 1;
    let mut ends = Ends::of_lab(&mut b2b, Some(lab_idx));
    run.test(&mut ends, test);
    b2b.fleet.shutdown();
    Ok(())
}

/// What every suite row shares: the lab's settings, the trial duration,
/// the CPUs and the allowed targets.
struct RowMaker<'a> {
    args: &'a LabConfig,
    d: Duration,
    cpus: &'a [usize],
    allow: &'a [crate::proto::Cidr],
}

impl RowMaker<'_> {
    /// A UDP row: 16 flows of `frame` in the lab's direction.
    fn udp(&self, name: &str, frame: FrameSpec, mode: FlowMode, ipv6: bool) -> UdpTest {
        UdpTest {
            name: name.into(),
            ipv6,
            frame,
            flow_mode: mode,
            flows: 16,
            direction: self.args.direction,
            duration: self.d,
            rate_pps: None,
            rate_profile: None,
            batch: 64,
            cpus: self.cpus.to_vec(),
            allow: self.allow.to_vec(),
            tx_engine: self.args.tx_engine,
            rx_engine: self.args.rx_engine,
            threads: self.args.threads,
            port: 0,
            interval: std::time::Duration::from_secs(1),
            omit: std::time::Duration::ZERO,
            dscp: None,
            max_frames: None,
            vlan: None,
            window: None,
        }
    }

    /// A TCP row of `streams` streams, forward.
    fn tcp(&self, name: &str, streams: u16, ipv6: bool) -> TcpTest {
        TcpTest {
            name: name.into(),
            ipv6,
            streams,
            direction: Direction::Forward,
            duration: self.d,
            cpus: self.cpus.to_vec(),
            congestion: self.args.congestion.clone(),
            buffer_len: crate::proto::iperf3::DEFAULT_TCP_LEN,
            allow: self.allow.to_vec(),
            port: 0,
            rate_bps: None,
            interval: std::time::Duration::from_secs(1),
            omit: std::time::Duration::ZERO,
            window: None,
            dscp: None,
            vlan: None,
        }
    }
}

/// The suite's rows through the DUT, as `--only` leaves them.
struct Rows {
    tcp: Vec<TcpTest>,
    udp: Vec<UdpTest>,
    http: Vec<HttpTest>,
    latency: Option<LatencyTest>,
    /// Whether the seed profiles' searches and ramps run.
    any_profile: bool,
}

/// The rows through the DUT. The stick's frames carry a 4 B tag: its
/// smallest frames are 68 B (IPv4) and 88 B (IPv6), and imix's 64 B cannot
/// be sent.
fn suite_rows(make: &RowMaker, stick: bool) -> Rows {
    let args = make.args;
    let (small4, small6) = if stick { (68, 88) } else { (64, 84) };
    let mut tcp = vec![
        make.tcp("tcp 1 stream", 1, false),
        make.tcp("tcp 4 streams", 4, false),
    ];
    let mut udp = vec![
        make.udp(
            &format!("udp {small4}B var2"),
            FrameSpec::Fixed(small4),
            FlowMode::Var2,
            false,
        ),
        make.udp("udp imix var2", FrameSpec::Imix, FlowMode::Var2, false),
        make.udp(
            "udp 1518B var2",
            FrameSpec::Fixed(1518),
            FlowMode::Var2,
            false,
        ),
        make.udp(
            &format!("udp {small4}B one flow"),
            FrameSpec::Fixed(small4),
            FlowMode::One,
            false,
        ),
    ];
    if args.ipv6 {
        // IPv6 + UDP + the linerate header need 84 B; imix's 64 B frames cannot be sent.
        tcp.push(make.tcp("tcp 1 stream ipv6", 1, true));
        udp.push(make.udp(
            &format!("udp {small6}B var2 ipv6"),
            FrameSpec::Fixed(small6),
            FlowMode::Var2,
            true,
        ));
        udp.push(make.udp(
            "udp 1518B var2 ipv6",
            FrameSpec::Fixed(1518),
            FlowMode::Var2,
            true,
        ));
        udp.push(make.udp(
            &format!("udp {small6}B one flow ipv6"),
            FrameSpec::Fixed(small6),
            FlowMode::One,
            true,
        ));
    }
    let mut http = http_rows(make.d, make.allow, args.congestion.as_deref());
    tcp.retain(|t| wanted(args, &t.name));
    udp.retain(|t| wanted(args, &t.name));
    let latency = latency_row(make);
    let latency = wanted(args, latency.load.name()).then_some(latency);
    http.retain(|t| wanted(args, &t.name));
    let any_profile = !args.quick
        && !args.no_search
        && config::SEED_PROFILES
            .iter()
            .any(|n| profile_wanted(args, n));
    Rows {
        tcp,
        udp,
        http,
        latency,
        any_profile,
    }
}

/// Latency under load: probes idle, through a TCP stream, idle again.
fn latency_row(make: &RowMaker) -> LatencyTest {
    let args = make.args;
    LatencyTest {
        load: crate::runner::Load::Tcp(make.tcp("latency under load tcp", 1, false)),
        probes: crate::runner::ProbeOpts {
            idle: Duration::from_secs_f64(if args.quick { 1.0 } else { 2.0 }),
            // An external DUT (ports) is not ours to know; ours may NAT.
            client_seen_as: if args.ports.is_none() {
                lab::nat_source(args.spec.dut)
            } else {
                None
            },
            ..Default::default()
        },
    }
}

impl Rows {
    /// Drops the rows the stick DUT cannot run and prints why; the notes
    /// go into the lab's topology.
    fn skip_on_stick(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        let socket_rows = !self.tcp.is_empty() || self.latency.is_some() || !self.http.is_empty();
        if socket_rows {
            notes.push(lab::stick::socket_rows_note());
        }
        self.tcp.clear();
        self.http.clear();
        self.latency = None;
        if self.udp.iter().any(|t| t.frame == FrameSpec::Imix) {
            notes.push(
                "udp imix var2 skipped with --dut stick: imix's 64 B frames cannot carry a \
                 VLAN tag and the linerate header (tagged IPv4 frames start at 68 B)"
                    .into(),
            );
            self.udp.retain(|t| t.frame != FrameSpec::Imix);
        }
        if self.any_profile {
            notes.push(
                "ramps and NDR/PDR searches of the seed profiles skipped with --dut stick: \
                 their 64 B and imix frames cannot carry a VLAN tag; search the stick with \
                 `linerate search --lab --dut stick --frame-size 68`"
                    .into(),
            );
            self.any_profile = false;
        }
        for n in &notes {
            errln!("note: {n}");
        }
        notes
    }

    /// Whether no row is left to run.
    fn is_empty(&self) -> bool {
        self.tcp.is_empty()
            && self.udp.is_empty()
            && self.http.is_empty()
            && self.latency.is_none()
            && !self.any_profile
    }

    /// Runs the TCP, latency, UDP and HTTP rows in that order; false when a
    /// stop was requested between two of them.
    fn run(&self, run: &mut Run, ends: &mut Ends) -> bool {
        for t in &self.tcp {
            if stop_requested() {
                return false;
            }
            run.test(ends, t);
        }
        if let Some(t) = &self.latency {
            if stop_requested() {
                return false;
            }
            run.test(ends, t);
        }
        for t in &self.udp {
            if stop_requested() {
                return false;
            }
            run.test(ends, t);
        }
        for t in &self.http {
            if stop_requested() {
                return false;
            }
            run.test(ends, t);
        }
        true
    }
}

/// The suite's HTTP and HTTPS download rows (1 and 4 connections), kept
/// short: a 100 MB object from the sink's memory, at most 2 s each.
fn http_rows(d: Duration, allow: &[crate::proto::Cidr], cc: Option<&str>) -> Vec<HttpTest> {
    let mut v = Vec::new();
    for tls in [false, true] {
        for n in [1u16, 4] {
            v.push(HttpTest {
                name: format!(
                    "{} {n} connection{}",
                    if tls { "https" } else { "http" },
                    if n == 1 { "" } else { "s" }
                ),
                row: None,
                ipv6: false,
                server: Some(HttpServerSide {
                    content: crate::proto::http::Content::Size(100_000_000),
                    cold: false,
                    request_timeout: Duration::from_secs(10),
                    congestion: cc.map(String::from),
                }),
                url: None,
                path: "/".into(),
                tls,
                trust: crate::proto::http::Trust::Insecure,
                ktls: false,
                http2: false,
                dscp: None,
                request: Default::default(),
                ramp: vec![],
                interval: Duration::from_secs(1),
                connections: n,
                duration: d.min(Duration::from_secs(2)),
                requests: None,
                rate_per_s: None,
                allow: allow.to_vec(),
            });
        }
    }
    v
}
