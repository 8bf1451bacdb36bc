//! Runs one test between two agents: starts receivers, snapshots kernel
//! counters, starts senders, gathers interval reports, stops, snapshots again
//! and assembles a [`TestResult`] with cross-checks.
//!
//! The same code serves the lab and ad-hoc tests between named endpoints.

use crate::controller::{interrupted, Fleet};
use crate::lab::Addressing;
use crate::proto::{
    Cidr, Direction, EndpointSummary, FlowSpec, FlowTotal, FrameSpec, IntervalSample, Job,
    RateProfile, Request, Response, Snapshot,
};
use crate::results::{
    pair_intervals, CpuUse, CrossCheck, DirectionResult, FlowMode, KernelCounters, Protocol,
    RunDir, TestParams, TestResult, TestStatus,
};
use crate::{engine::udp, units};
use anyhow::{anyhow, bail, Result};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT_TEST: AtomicU32 = AtomicU32::new(1);

fn next_id() -> u32 {
    NEXT_TEST.fetch_add(1, Ordering::Relaxed)
}

/// The two endpoints of a test and whoever else should be watched.
pub struct Ends<'a> {
    pub fleet: &'a mut Fleet,
    pub gen: usize,
    pub sink: usize,
    /// Agents whose kernel counters are recorded too (the DUT).
    pub observers: Vec<usize>,
    pub gen_addr: Addressing,
    pub sink_addr: Addressing,
    /// True when a DUT sits between gen and sink (attributes kernel drops).
    pub through_dut: bool,
    pub lab: Option<usize>,
}

impl<'a> Ends<'a> {
    /// Generator and sink (agent indexes), with the DUT's agent watched when
    /// there is one; `lab` is the lab's index in results.json, if any.
    pub fn new(
        fleet: &'a mut Fleet,
        (gen, sink, dut): (usize, usize, Option<usize>),
        (gen_addr, sink_addr): (Addressing, Addressing),
        lab: Option<usize>,
    ) -> Self {
        Ends {
            fleet,
            gen,
            sink,
            observers: dut.into_iter().collect(),
            gen_addr,
            sink_addr,
            through_dut: dut.is_some(),
            lab,
        }
    }

    /// The same endpoints, borrowed again for a callee that takes `Ends`.
    pub fn reborrow(&mut self) -> Ends<'_> {
        Ends {
            fleet: &mut *self.fleet,
            gen: self.gen,
            sink: self.sink,
            observers: self.observers.clone(),
            gen_addr: self.gen_addr.clone(),
            sink_addr: self.sink_addr.clone(),
            through_dut: self.through_dut,
            lab: self.lab,
        }
    }
}

#[derive(Debug, Clone)]
pub struct UdpTest {
    pub name: String,
    pub ipv6: bool,
    pub frame: FrameSpec,
    pub flow_mode: FlowMode,
    pub flows: u16,
    pub direction: Direction,
    pub duration: Duration,
    pub rate_pps: Option<f64>,
    /// A rate that changes over time (ramps); overrides `rate_pps`.
    pub rate_profile: Option<RateProfile>,
    pub batch: u16,
    pub cpus: Vec<usize>,
    pub allow: Vec<Cidr>,
}

#[derive(Debug, Clone)]
pub struct TcpTest {
    pub name: String,
    pub ipv6: bool,
    pub streams: u16,
    pub direction: Direction,
    pub duration: Duration,
    pub cpus: Vec<usize>,
    pub congestion: Option<String>,
    pub buffer_len: u32,
    pub allow: Vec<Cidr>,
}

/// Live figures for the progress line.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub test: String,
    pub elapsed_s: f64,
    pub duration_s: f64,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub tx_bps: f64,
    pub rx_bps: f64,
    pub loss_ratio: f64,
}

pub type OnProgress<'a> = &'a mut dyn FnMut(&Progress);

const INTERVAL_MS: u64 = 1000;

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// Builds the flows of one direction towards a receiver's port.
pub fn build_flows(
    mode: FlowMode,
    n: u16,
    v6: bool,
    from: &Addressing,
    to: &Addressing,
    port: u16,
) -> Result<Vec<FlowSpec>> {
    let dst_main = to
        .main(v6)
        .ok_or_else(|| anyhow!("the receiver has no IPv{} address", if v6 { 6 } else { 4 }))?;
    let need_prefix = |a: &Addressing, side: &str| -> Result<()> {
        if a.flow_v4.is_none() && a.flow_v6.is_none() {
            bail!(
                "flow mode {mode:?} varies {side} addresses, which needs a locally accepted prefix \
                 (the lab sets one up); between named endpoints use --flow-mode one or ports"
            );
        }
        Ok(())
    };
    let n = if mode == FlowMode::One { 1 } else { n.max(1) };
    if mode == FlowMode::Ports && n > 4096 {
        bail!("--flows {n}: the ports flow mode opens one socket per flow; use at most 4096");
    }
    let mut flows = Vec::with_capacity(usize::from(n));
    for i in 0..n {
        let (src, src_port, dst) = match mode {
            FlowMode::One => (None, 0, dst_main),
            FlowMode::Ports => (None, 10_000 + i, dst_main),
            FlowMode::Var1 => {
                need_prefix(from, "source")?;
                (from.flow(v6, i), 0, dst_main)
            }
            FlowMode::Var2 => {
                need_prefix(from, "source")?;
                need_prefix(to, "destination")?;
                (from.flow(v6, i), 0, to.flow(v6, i).unwrap_or(dst_main))
            }
        };
        flows.push(FlowSpec {
            id: i,
            src,
            src_port,
            dst: SocketAddr::new(dst, port),
        });
    }
    Ok(flows)
}

fn snapshot_all(fleet: &mut Fleet, agents: &[usize]) -> Result<HashMap<usize, Snapshot>> {
    let mut out = HashMap::new();
    for &a in agents {
        match fleet.call(a, &Request::Snapshot, Duration::from_secs(10))? {
            Response::Snapshot { snapshot } => {
                out.insert(a, snapshot);
            }
            other => bail!("unexpected answer to snapshot: {other:?}"),
        }
    }
    Ok(out)
}

fn start(fleet: &mut Fleet, agent: usize, test: u32, job: Job) -> Result<Option<u16>> {
    match fleet.call(
        agent,
        &Request::Start { test, job },
        Duration::from_secs(15),
    )? {
        Response::Started { port, .. } => Ok(port),
        other => bail!("unexpected answer to start: {other:?}"),
    }
}

/// One side of the traffic: who sends to whom, under which test ids.
struct Leg {
    name: String,
    tx_agent: usize,
    rx_agent: usize,
    tx_id: u32,
    rx_id: u32,
}

#[derive(Default)]
struct Collected {
    intervals: HashMap<u32, Vec<IntervalSample>>,
    finished: HashMap<u32, EndpointSummary>,
    errors: Vec<String>,
}

/// Gathers reports until every id in `wait_for` finished, the deadline
/// passes, or the user interrupts.
fn collect(
    fleet: &mut Fleet,
    col: &mut Collected,
    wait_for: &[u32],
    deadline: Instant,
    mut on_sample: impl FnMut(u32, &IntervalSample, &Collected),
) -> Result<bool> {
    loop {
        if wait_for.iter().all(|id| col.finished.contains_key(id)) {
            return Ok(true);
        }
        if interrupted() || Instant::now() > deadline {
            return Ok(false);
        }
        let Some((_, ev)) = fleet.next_event(Duration::from_millis(100))? else {
            continue;
        };
        match ev {
            Response::Interval { test, sample } => {
                col.intervals.entry(test).or_default().push(sample.clone());
                on_sample(test, &sample, col);
            }
            Response::Finished { test, summary } => {
                col.finished.insert(test, summary);
            }
            Response::Error {
                test: Some(test),
                message,
            } => {
                col.errors.push(message);
                col.finished.insert(test, EndpointSummary::default());
            }
            _ => {}
        }
    }
}

fn role_of(fleet: &Fleet, idx: usize) -> String {
    fleet.agent(idx).role.clone()
}

fn legs(ends: &Ends, direction: Direction) -> Vec<Leg> {
    let g = role_of(ends.fleet, ends.gen);
    let s = role_of(ends.fleet, ends.sink);
    let fwd = || Leg {
        name: format!("{g}_to_{s}"),
        tx_agent: ends.gen,
        rx_agent: ends.sink,
        tx_id: next_id(),
        rx_id: next_id(),
    };
    let rev = || Leg {
        name: format!("{s}_to_{g}"),
        tx_agent: ends.sink,
        rx_agent: ends.gen,
        tx_id: next_id(),
        rx_id: next_id(),
    };
    match direction {
        Direction::Forward => vec![fwd()],
        Direction::Reverse => vec![rev()],
        Direction::Both => vec![fwd(), rev()],
    }
}

pub fn run_udp(
    ends: &mut Ends,
    t: &UdpTest,
    mut dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> TestResult {
    let started_at = crate::results::now_rfc3339();
    let params = TestParams {
        protocol: Protocol::Udp,
        ip_version: if t.ipv6 { 6 } else { 4 },
        direction: t.direction,
        duration_s: t.duration.as_secs_f64(),
        frame: Some(t.frame),
        average_frame_bytes: Some(udp::average_frame(t.frame)),
        flow_mode: Some(t.flow_mode),
        flows: Some(if t.flow_mode == FlowMode::One {
            1
        } else {
            t.flows
        }),
        rate_pps: t.rate_pps,
        rate_profile: t.rate_profile.clone(),
        streams: None,
        congestion: None,
        cpus: t.cpus.clone(),
        lab: ends.lab,
    };
    finish_test(TestResult::new(&t.name, started_at, params), |r| {
        udp_inner(ends, t, &mut dir, on_progress, r)
    })
}

fn all_agents(ends: &Ends) -> Vec<usize> {
    let mut v = vec![ends.gen];
    v.extend(ends.observers.iter().copied());
    v.push(ends.sink);
    v
}

fn udp_inner(
    ends: &mut Ends,
    t: &UdpTest,
    dir: &mut Option<&mut RunDir>,
    on_progress: OnProgress,
    result: &mut TestResult,
) -> Result<()> {
    udp::check_frames(t.frame, t.ipv6).map_err(|e| anyhow!(e))?;
    let legs = legs(ends, t.direction);
    // Jobs started so far: if set-up fails half way they are stopped, or a
    // receiver (which has no duration of its own) would run on.
    let mut started: Vec<(usize, u32)> = Vec::new();
    macro_rules! or_stop {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => {
                    stop_jobs(ends.fleet, &started);
                    return Err(e);
                }
            }
        };
    }
    // Receivers first, so the first datagram already has a socket.
    let mut flows_of = HashMap::new();
    for leg in &legs {
        let port = or_stop!(start(
            ends.fleet,
            leg.rx_agent,
            leg.rx_id,
            Job::UdpReceive {
                bind: unspecified(t.ipv6),
                flows: t.flows.max(1),
                interval_ms: INTERVAL_MS,
                cpus: pick_rx_cpus(&t.cpus),
            },
        ));
        started.push((leg.rx_agent, leg.rx_id));
        let port = or_stop!(port.ok_or_else(|| anyhow!("the receiver reported no port")));
        let (from, to) = if leg.tx_agent == ends.gen {
            (&ends.gen_addr, &ends.sink_addr)
        } else {
            (&ends.sink_addr, &ends.gen_addr)
        };
        let flows = or_stop!(build_flows(t.flow_mode, t.flows, t.ipv6, from, to, port));
        flows_of.insert(leg.tx_id, flows);
    }
    let agents = all_agents(ends);
    let before = or_stop!(snapshot_all(ends.fleet, &agents));
    let meter = crate::efficiency::Meter::start();
    let t0 = Instant::now();
    for leg in &legs {
        or_stop!(start(
            ends.fleet,
            leg.tx_agent,
            leg.tx_id,
            Job::UdpSend {
                flows: flows_of.remove(&leg.tx_id).unwrap_or_default(),
                frame: t.frame,
                rate: t
                    .rate_profile
                    .clone()
                    .or(t.rate_pps.map(RateProfile::constant)),
                duration_ms: t.duration.as_millis() as u64,
                batch: t.batch,
                interval_ms: INTERVAL_MS,
                cpus: pick_tx_cpus(&t.cpus),
                allow: t.allow.clone(),
            },
        ));
        started.push((leg.tx_agent, leg.tx_id));
    }
    let mut col = Collected::default();
    let tx_ids: Vec<u32> = legs.iter().map(|l| l.tx_id).collect();
    let name = t.name.clone();
    let dur = t.duration.as_secs_f64();
    let frame = udp::average_frame(t.frame);
    let roles: HashMap<u32, String> = legs
        .iter()
        .flat_map(|l| {
            [
                (l.tx_id, role_of(ends.fleet, l.tx_agent)),
                (l.rx_id, role_of(ends.fleet, l.rx_agent)),
            ]
        })
        .collect();
    let rx_ids: Vec<u32> = legs.iter().map(|l| l.rx_id).collect();
    let mut last = Progress {
        test: name.clone(),
        duration_s: dur,
        ..Default::default()
    };
    let done = collect(
        ends.fleet,
        &mut col,
        &tx_ids,
        t0 + t.duration + Duration::from_secs(15),
        |id, s, _| {
            if let (Some(d), Some(role)) = (dir.as_deref_mut(), roles.get(&id)) {
                d.log_interval(&name, role, s);
            }
            let span = (s.t_end - s.t_start).max(1e-6);
            if tx_ids.contains(&id) {
                last.tx_pps = s.tx_packets as f64 / span;
                last.tx_bps = units::l1_bps(last.tx_pps, frame);
            } else if rx_ids.contains(&id) {
                last.rx_pps = s.rx_packets as f64 / span;
                last.rx_bps = units::l1_bps(last.rx_pps, frame);
                let tot = s.rx_packets + s.lost;
                last.loss_ratio = if tot > 0 {
                    s.lost as f64 / tot as f64
                } else {
                    0.0
                };
            }
            last.elapsed_s = t0.elapsed().as_secs_f64().min(dur);
            on_progress(&last);
        },
    )?;
    // Let the last datagrams cross the DUT, then stop receivers with totals.
    std::thread::sleep(Duration::from_millis(200));
    for leg in &legs {
        let totals: Vec<FlowTotal> = col
            .finished
            .get(&leg.tx_id)
            .map(|s| {
                s.flows
                    .iter()
                    .map(|f| FlowTotal {
                        id: f.id,
                        tx_packets: f.tx_packets,
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !done {
            let _ = ends.fleet.send(
                leg.tx_agent,
                &Request::Stop {
                    test: leg.tx_id,
                    sender_totals: vec![],
                },
            );
        }
        ends.fleet.send(
            leg.rx_agent,
            &Request::Stop {
                test: leg.rx_id,
                sender_totals: totals,
            },
        )?;
    }
    let mut all_ids = tx_ids.clone();
    all_ids.extend(legs.iter().map(|l| l.rx_id));
    collect(
        ends.fleet,
        &mut col,
        &all_ids,
        Instant::now() + Duration::from_secs(5),
        |id, s, _| {
            if let (Some(d), Some(role)) = (dir.as_deref_mut(), roles.get(&id)) {
                d.log_interval(&name, role, s);
            }
        },
    )?;
    let after = snapshot_all(ends.fleet, &agents)?;
    if !col.errors.is_empty() {
        bail!("{}", col.errors.join("; "));
    }
    // A receiver that never reported has not measured zero loss.
    if let Some(l) = legs.iter().find(|l| !col.finished.contains_key(&l.rx_id)) {
        bail!(
            "the {} receiver did not report its counts within 5 s of Stop; this test has no loss figure",
            role_of(ends.fleet, l.rx_agent)
        );
    }
    record_counters(ends, &before, &after, result);
    for leg in &legs {
        let tx = col.finished.get(&leg.tx_id).cloned().unwrap_or_default();
        let rx = col.finished.get(&leg.rx_id).cloned().unwrap_or_default();
        let rx_ns = delta_ns(&before, &after, leg.rx_agent);
        let tx_ns = delta_ns(&before, &after, leg.tx_agent);
        // Socket overruns at the receiver, plus drops on its interfaces when
        // linerate built them (elsewhere an unrelated NIC's drops would hide
        // real loss). A veth backlog drop also shows as the peer's tx_dropped;
        // counting the receiver side only avoids counting it twice.
        let iface_drops = if ends.lab.is_some() {
            rx_ns.rx_dropped
        } else {
            0
        };
        let tester_drops = (rx_ns.udp_in_errors + iface_drops).min(rx.lost);
        let dur = tx.elapsed_s.max(1e-6);
        let rx_pps = rx.rx_packets as f64 / dur;
        let l1 = units::l1_bps(rx_pps, frame);
        result.cross_checks.push(CrossCheck::new(
            format!(
                "{}: datagrams sent vs kernel tx_packets",
                role_of(ends.fleet, leg.tx_agent)
            ),
            tx.tx_packets,
            tx_ns.tx_packets,
        ));
        result.cross_checks.push(CrossCheck::new(
            format!(
                "{}: datagrams received (+ duplicates, socket drops) vs kernel rx_packets",
                role_of(ends.fleet, leg.rx_agent)
            ),
            rx.rx_packets + rx.duplicates + rx_ns.udp_in_errors,
            rx_ns.rx_packets,
        ));
        let tx_iv = col.intervals.remove(&leg.tx_id).unwrap_or_default();
        let rx_iv = col.intervals.remove(&leg.rx_id).unwrap_or_default();
        result.directions.push(DirectionResult {
            direction: leg.name.clone(),
            sender: role_of(ends.fleet, leg.tx_agent),
            receiver: role_of(ends.fleet, leg.rx_agent),
            duration_s: tx.elapsed_s,
            tx_packets: tx.tx_packets,
            rx_packets: rx.rx_packets,
            lost: rx.lost,
            reordered: rx.reordered,
            duplicates: rx.duplicates,
            loss_ratio: if tx.tx_packets > 0 {
                rx.lost as f64 / tx.tx_packets as f64
            } else {
                0.0
            },
            tx_pps: tx.tx_packets as f64 / dur,
            rx_pps,
            rx_l2_bps: units::l2_bps(rx_pps, frame),
            rx_l1_bps: Some(l1),
            line_rate_pct: 0.0,
            tx_errors: tx.tx_errors,
            tx_target: tx.tx_target,
            // The sender fell more than 1 % short of what the rate asked for:
            // this trial measured the tester, not the DUT.
            tester_limited: tx.tx_target > 0 && (tx.tx_packets as f64) < 0.99 * tx.tx_target as f64,
            tester_drops,
            dut_lost: rx.lost.saturating_sub(tester_drops),
            retransmits: None,
            intervals: pair_intervals(tx_iv, rx_iv),
            sender_summary: tx,
            receiver_summary: rx,
        });
    }
    record_cpu(ends, &before, &after, &col, &legs, result);
    let received: u64 = result.directions.iter().map(|d| d.rx_packets).sum();
    if let (Some(b), Some(a)) = (before.get(&ends.gen), after.get(&ends.gen)) {
        result.efficiency = Some(meter.finish(received, &b.system_cpu, &a.system_cpu));
    }
    if !done {
        bail!("interrupted before the test ended");
    }
    Ok(())
}

/// Stops jobs a failed set-up left running (best effort: the error that
/// caused it is what the user needs to see).
fn stop_jobs(fleet: &mut Fleet, jobs: &[(usize, u32)]) {
    for &(agent, test) in jobs {
        let _ = fleet.send(
            agent,
            &Request::Stop {
                test,
                sender_totals: vec![],
            },
        );
    }
}

/// Sender threads go on the first CPU given, receivers on the second.
fn pick_tx_cpus(cpus: &[usize]) -> Vec<usize> {
    cpus.first().map(|&c| vec![c]).unwrap_or_default()
}
fn pick_rx_cpus(cpus: &[usize]) -> Vec<usize> {
    cpus.get(1)
        .or(cpus.first())
        .map(|&c| vec![c])
        .unwrap_or_default()
}

#[derive(Default)]
struct NsDelta {
    tx_packets: u64,
    rx_packets: u64,
    rx_bytes: u64,
    rx_dropped: u64,
    tx_dropped: u64,
    udp_in_errors: u64,
}

/// Sum of counter deltas over the non-loopback interfaces of one namespace.
fn delta_ns(
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    agent: usize,
) -> NsDelta {
    let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
        return NsDelta::default();
    };
    let mut d = NsDelta {
        udp_in_errors: a.udp.in_errors.saturating_sub(b.udp.in_errors),
        ..Default::default()
    };
    // Loopback counts: tests between endpoints in one namespace run over it
    // (in the lab it stays quiet). A bridge only repeats its ports' counts.
    for ia in a.interfaces.iter().filter(|i| !i.name.starts_with("br")) {
        let Some(ib) = b.interfaces.iter().find(|i| i.name == ia.name) else {
            continue;
        };
        d.tx_packets += ia.tx_packets.saturating_sub(ib.tx_packets);
        d.rx_packets += ia.rx_packets.saturating_sub(ib.rx_packets);
        d.rx_bytes += ia.rx_bytes.saturating_sub(ib.rx_bytes);
        d.rx_dropped += ia.rx_dropped.saturating_sub(ib.rx_dropped);
        d.tx_dropped += ia.tx_dropped.saturating_sub(ib.tx_dropped);
    }
    d
}

fn record_counters(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    result: &mut TestResult,
) {
    for agent in all_agents(ends) {
        let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
            continue;
        };
        let udp = crate::proto::UdpCounters {
            in_datagrams: a.udp.in_datagrams.saturating_sub(b.udp.in_datagrams),
            no_ports: a.udp.no_ports.saturating_sub(b.udp.no_ports),
            in_errors: a.udp.in_errors.saturating_sub(b.udp.in_errors),
            out_datagrams: a.udp.out_datagrams.saturating_sub(b.udp.out_datagrams),
            rcvbuf_errors: a.udp.rcvbuf_errors.saturating_sub(b.udp.rcvbuf_errors),
            sndbuf_errors: a.udp.sndbuf_errors.saturating_sub(b.udp.sndbuf_errors),
        };
        for ia in &a.interfaces {
            if let Some(ib) = b.interfaces.iter().find(|i| i.name == ia.name) {
                if ia.name == "lo" && ia == ib {
                    continue; // a quiet loopback says nothing
                }
                result.kernel_counters.push(KernelCounters {
                    role: role_of(ends.fleet, agent),
                    interface: ia.name.clone(),
                    before: ib.clone(),
                    after: ia.clone(),
                    udp_delta: udp.clone(),
                });
            }
        }
    }
}

fn record_cpu(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    col: &Collected,
    legs: &[Leg],
    result: &mut TestResult,
) {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as f64;
    for agent in all_agents(ends) {
        let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
            continue;
        };
        let wall = legs
            .iter()
            .filter_map(|l| col.finished.get(&l.tx_id))
            .map(|s| s.elapsed_s)
            .fold(0.0, f64::max)
            .max(1e-3);
        let softirq = (a.system_cpu.softirq_s - b.system_cpu.softirq_s).max(0.0);
        result.cpu.push(CpuUse {
            role: role_of(ends.fleet, agent),
            process_pct: ((a.process_cpu_s - b.process_cpu_s).max(0.0) / wall * 100.0),
            softirq_pct: softirq / (wall * cpus) * 100.0,
        });
    }
}

pub fn run_tcp(
    ends: &mut Ends,
    t: &TcpTest,
    mut dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> TestResult {
    let params = TestParams {
        protocol: Protocol::Tcp,
        ip_version: if t.ipv6 { 6 } else { 4 },
        direction: t.direction,
        duration_s: t.duration.as_secs_f64(),
        frame: None,
        average_frame_bytes: None,
        flow_mode: None,
        flows: None,
        rate_pps: None,
        rate_profile: None,
        streams: Some(t.streams),
        congestion: t.congestion.clone(),
        cpus: t.cpus.clone(),
        lab: ends.lab,
    };
    finish_test(
        TestResult::new(&t.name, crate::results::now_rfc3339(), params),
        |r| tcp_inner(ends, t, &mut dir, on_progress, r),
    )
}

/// Runs a test body; an error marks the result failed (or interrupted).
fn finish_test(
    mut result: TestResult,
    body: impl FnOnce(&mut TestResult) -> Result<()>,
) -> TestResult {
    if let Err(e) = body(&mut result) {
        result.status = if interrupted() {
            TestStatus::Interrupted
        } else {
            TestStatus::Failed
        };
        result.error = Some(format!("{e:#}"));
    }
    result
}

fn tcp_inner(
    ends: &mut Ends,
    t: &TcpTest,
    dir: &mut Option<&mut RunDir>,
    on_progress: OnProgress,
    result: &mut TestResult,
) -> Result<()> {
    let server_id = next_id();
    let client_id = next_id();
    let target_ip = ends.sink_addr.main(t.ipv6).ok_or_else(|| {
        anyhow!(
            "the server side has no IPv{} address",
            if t.ipv6 { 6 } else { 4 }
        )
    })?;
    let streams = t.streams.max(1);
    let expect = if t.direction == Direction::Both {
        streams * 2
    } else {
        streams
    };
    // Both ends of stream i share cpus[i % n]: on veth the receive path runs
    // in the sender's softirq, and a stream whose ends sit on two cores has its
    // segments delivered from two backlogs, out of order, which the sender
    // takes for loss (spurious retransmits). Same-core ends avoid that.
    let cpus: Vec<usize> = if t.cpus.is_empty() {
        (0..std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1))
            .collect()
    } else {
        t.cpus.clone()
    };
    let port = start(
        ends.fleet,
        ends.sink,
        server_id,
        Job::TcpListen {
            bind: unspecified(t.ipv6),
            expect_streams: expect,
            duration_ms: t.duration.as_millis() as u64,
            interval_ms: INTERVAL_MS,
            cpus: cpus.clone(),
            congestion: t.congestion.clone(),
        },
    )?
    .ok_or_else(|| anyhow!("the TCP server reported no port"))?;
    let agents = all_agents(ends);
    let before = snapshot_all(ends.fleet, &agents)?;
    let t0 = Instant::now();
    start(
        ends.fleet,
        ends.gen,
        client_id,
        Job::TcpConnect {
            target: SocketAddr::new(target_ip, port),
            streams,
            direction: t.direction,
            duration_ms: t.duration.as_millis() as u64,
            interval_ms: INTERVAL_MS,
            cpus,
            congestion: t.congestion.clone(),
            buffer_len: t.buffer_len,
            allow: t.allow.clone(),
        },
    )?;
    let mut col = Collected::default();
    let name = t.name.clone();
    let dur = t.duration.as_secs_f64();
    let gen_role = role_of(ends.fleet, ends.gen);
    let sink_role = role_of(ends.fleet, ends.sink);
    let mut last = Progress {
        test: name.clone(),
        duration_s: dur,
        ..Default::default()
    };
    let done = collect(
        ends.fleet,
        &mut col,
        &[server_id, client_id],
        t0 + t.duration + Duration::from_secs(20),
        |id, s, _| {
            let role = if id == client_id {
                &gen_role
            } else {
                &sink_role
            };
            if let Some(d) = dir.as_deref_mut() {
                d.log_interval(&name, role, s);
            }
            let span = (s.t_end - s.t_start).max(1e-6);
            if id == client_id {
                last.tx_bps = s.tx_bytes as f64 * 8.0 / span;
            } else {
                last.rx_bps = s.rx_bytes as f64 * 8.0 / span;
            }
            last.elapsed_s = t0.elapsed().as_secs_f64().min(dur);
            on_progress(&last);
        },
    )?;
    if !done {
        for (a, id) in [(ends.gen, client_id), (ends.sink, server_id)] {
            let _ = ends.fleet.send(
                a,
                &Request::Stop {
                    test: id,
                    sender_totals: vec![],
                },
            );
        }
        let _ = collect(
            ends.fleet,
            &mut col,
            &[server_id, client_id],
            Instant::now() + Duration::from_secs(3),
            |_, _, _| {},
        );
    }
    let after = snapshot_all(ends.fleet, &agents)?;
    if !col.errors.is_empty() {
        bail!("{}", col.errors.join("; "));
    }
    record_counters(ends, &before, &after, result);
    let client = col.finished.get(&client_id).cloned().unwrap_or_default();
    let server = col.finished.get(&server_id).cloned().unwrap_or_default();
    let client_iv = col.intervals.remove(&client_id).unwrap_or_default();
    let server_iv = col.intervals.remove(&server_id).unwrap_or_default();
    let mut dirs = Vec::new();
    if t.direction != Direction::Reverse {
        dirs.push((
            ends.gen, ends.sink, &client, &server, &client_iv, &server_iv,
        ));
    }
    if t.direction != Direction::Forward {
        dirs.push((
            ends.sink, ends.gen, &server, &client, &server_iv, &client_iv,
        ));
    }
    for (tx_agent, rx_agent, txs, rxs, tx_iv, rx_iv) in dirs {
        let sent: u64 = txs
            .streams
            .iter()
            .filter(|s| s.sender)
            .map(|s| s.bytes)
            .sum();
        let got: u64 = rxs
            .streams
            .iter()
            .filter(|s| !s.sender)
            .map(|s| s.bytes)
            .sum();
        let retr: u64 = txs
            .streams
            .iter()
            .filter(|s| s.sender)
            .map(|s| s.retransmits)
            .sum();
        let elapsed = txs.elapsed_s.max(1e-6);
        let goodput = got as f64 * 8.0 / elapsed;
        let rx_ns = delta_ns(&before, &after, rx_agent);
        result.cross_checks.push(CrossCheck::new(
            format!(
                "{}: TCP payload sent by {} vs received",
                role_of(ends.fleet, rx_agent),
                role_of(ends.fleet, tx_agent)
            ),
            sent,
            got,
        ));
        if t.direction != Direction::Both {
            // The kernel counts headers (one set per GSO/GRO packet) and
            // retransmitted segments too; add both before comparing.
            let header: u64 = if t.ipv6 { 14 + 40 + 32 } else { 14 + 20 + 32 };
            let mss: u64 = if t.ipv6 { 1428 } else { 1448 };
            result.cross_checks.push(CrossCheck::new(
                format!(
                    "{}: TCP payload + headers + retransmitted segments vs kernel rx_bytes",
                    role_of(ends.fleet, rx_agent)
                ),
                got + rx_ns.rx_packets * header + retr * mss,
                rx_ns.rx_bytes,
            ));
        }
        let side = |iv: &IntervalSample, sender: bool| IntervalSample {
            t_start: iv.t_start,
            t_end: iv.t_end,
            tx_bytes: if sender {
                iv.streams
                    .iter()
                    .filter(|s| s.sender)
                    .map(|s| s.bytes)
                    .sum()
            } else {
                0
            },
            rx_bytes: if sender {
                0
            } else {
                iv.streams
                    .iter()
                    .filter(|s| !s.sender)
                    .map(|s| s.bytes)
                    .sum()
            },
            streams: iv
                .streams
                .iter()
                .filter(|s| s.sender == sender)
                .cloned()
                .collect(),
            ..Default::default()
        };
        dirs_push(
            result,
            DirectionResult {
                direction: format!(
                    "{}_to_{}",
                    role_of(ends.fleet, tx_agent),
                    role_of(ends.fleet, rx_agent)
                ),
                sender: role_of(ends.fleet, tx_agent),
                receiver: role_of(ends.fleet, rx_agent),
                duration_s: txs.elapsed_s,
                rx_l2_bps: goodput,
                rx_l1_bps: None,
                retransmits: Some(retr),
                intervals: pair_intervals(
                    tx_iv.iter().map(|s| side(s, true)).collect(),
                    rx_iv.iter().map(|r| side(r, false)).collect(),
                ),
                sender_summary: EndpointSummary {
                    tx_bytes: sent,
                    streams: txs.streams.iter().filter(|s| s.sender).cloned().collect(),
                    ..txs.clone()
                },
                receiver_summary: EndpointSummary {
                    rx_bytes: got,
                    streams: rxs.streams.iter().filter(|s| !s.sender).cloned().collect(),
                    ..rxs.clone()
                },
                ..Default::default()
            },
        );
    }
    let legs = [Leg {
        name: String::new(),
        tx_agent: ends.gen,
        rx_agent: ends.sink,
        tx_id: client_id,
        rx_id: server_id,
    }];
    record_cpu(ends, &before, &after, &col, &legs, result);
    if !done {
        bail!("interrupted before the test ended");
    }
    Ok(())
}

fn dirs_push(result: &mut TestResult, d: DirectionResult) {
    result.directions.push(d);
}

/// Fills in "% of line rate" once the line rate is known.
pub fn apply_line_rate(result: &mut TestResult, line_rate_bps: f64) {
    for d in &mut result.directions {
        let bps = d.rx_l1_bps.unwrap_or(d.rx_l2_bps);
        d.line_rate_pct = bps / line_rate_bps * 100.0;
    }
}
