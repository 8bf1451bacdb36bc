//! Tests against a stock iperf3 server: the client conversation runs as
//! a job on the generator's agent (local, a namespace, an ssh host), and
//! the result puts this end's measurements (intervals, TCP_INFO, CPU,
//! kernel counters, the bottleneck verdict) beside the server's own
//! figures from iperf3's results exchange (`far_end`). `record` also
//! turns a test that `linerate serve --iperf3` served into a result.

use super::jobs::{collect, collect_stopped, Collected, Jobs};
use super::kind::TestKind;
use super::record;
use super::setup::{next_id, Ends, Leg, OnProgress, Progress};
use crate::iperf3::{Measured, Outcome, StreamTotals};
use crate::proto::iperf3::{ClientJob, FarEnd, Mode, TestParams, Transport};
use crate::proto::{Direction, EndpointSummary, IntervalSample, Job, StreamSample};
use crate::results::{
    pair_intervals, CpuUse, CrossCheck, DirectionResult, Protocol, RunDir, TestResult,
};
use crate::runner::error::{err, fail, Result};
use crate::topology::Addressing;
use std::time::{Duration, Instant};

/// The roles of a client test's two ends, as results name them.
pub const CLIENT_ROLES: (&str, &str) = ("linerate", "iperf3 server (far end)");

/// A test against a stock iperf3 server, validated.
#[derive(Debug, Clone)]
pub struct Iperf3Test {
    pub name: String,
    pub direction: Direction,
    /// The test as the client sends it (the agent validates it again).
    pub params: TestParams,
    /// The interval lines' width (whole seconds: the client samples every
    /// second).
    pub interval: Duration,
    pub job: ClientJob,
    /// linerate's own iperf3 server to start on the sink's agent first (a
    /// plan's `iperf3_server` host); every generator and instance is then
    /// a client of it at once. None: a stock server, one client.
    pub serve: Option<crate::proto::iperf3::ServerJob>,
}

/// One sample of this end as the slicer's parts: what it sent towards
/// the server (with the streams' retransmits) and what it received back.
fn local_parts(s: &IntervalSample, fwd: bool, rev: bool) -> Vec<super::slices::Part> {
    use super::slices::Part;
    let mut v = Vec::new();
    if fwd {
        v.push(Part {
            direction: "client_to_server".into(),
            sender: true,
            bytes: s.tx_bytes,
            packets: s.tx_packets,
            retransmits: s
                .streams
                .iter()
                .filter(|st| st.sender)
                .map(|st| st.retransmits)
                .sum(),
            ..Default::default()
        });
    }
    if rev {
        v.push(Part {
            direction: "server_to_client".into(),
            sender: false,
            bytes: s.rx_bytes,
            packets: s.rx_packets,
            lost: s.lost,
            ..Default::default()
        });
    }
    v
}

/// Runs from the first generator of `ends`, whose sink is that same
/// generator's side (the far end is the iperf3 server, with no agent).
/// `serve` is not this kind's: a test against linerate's own server runs
/// through `run_iperf3_served`, a result per client.
impl TestKind for Iperf3Test {
    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self, ends: &Ends) -> crate::results::TestParams {
        let mut params = params_of(&self.params);
        params.ip_version = if self.job.server.is_ipv6() { 6 } else { 4 };
        params.lab = ends.lab;
        params.cpus = self.job.cpus.clone();
        params
    }

    /// `--abort-on-fail` does not watch an iperf3 test while it runs.
    fn interval(&self) -> Option<Duration> {
        None
    }

    fn body(
        &self,
        ends: &mut Ends,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()> {
        let started = result.started_at.clone();
        iperf3_inner(ends, self, dir.as_deref_mut(), on_progress, started, result)
    }
}

/// Runs the agent's iperf3 client to its end (or stops it when it
/// overruns or Ctrl-C comes), its interval lines on the test's clock, this
/// end's figures; what it reported, and whether it ended by itself.
fn run_client(
    jobs: &mut Jobs,
    t: &Iperf3Test,
    (gen, id): (usize, u32),
    mut dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> Result<(Collected, bool)> {
    let whole = t.params.time_s + t.params.omit_s;
    let answer = Duration::from_millis(t.job.answer_timeout_ms);
    // The test, then the results exchange, each with its answer timeout.
    let deadline = jobs.fleet.now() + Duration::from_secs_f64(whole) + answer * 3;
    let mut col = Collected::new(dir.as_deref().map(|d| d.path.as_path()));
    // Lines on the test's clock, iperf3's figures of this end: the agent's
    // client samples every second, so lines are whole seconds wide.
    let width = t.interval.as_secs_f64().ceil().max(1.0);
    let fwd = matches!(t.direction, Direction::Forward | Direction::Both);
    let rev = matches!(t.direction, Direction::Reverse | Direction::Both);
    let labels: Vec<String> = [(fwd, "client_to_server"), (rev, "server_to_client")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, l)| l.to_string())
        .collect();
    let mut slicer = super::slices::Slicer::new(width, whole, t.params.omit_s, &[id], &labels)
        .styled(super::slices::LineStyle::LocalEnd);
    if t.params.transport == crate::proto::iperf3::Transport::Udp {
        slicer = slicer.counting_packets();
    }
    let mut last = Progress {
        test: t.name.clone(),
        duration_s: whole,
        sliced: true,
        ..Default::default()
    };
    let mut progress = |_: u32, s: &IntervalSample, _: Instant| {
        if let Some(d) = dir.as_deref_mut() {
            d.log_interval(&t.name, "gen", s);
        }
        let span = (s.t_end - s.t_start).max(1e-6);
        last.elapsed_s = s.t_end.min(whole);
        (last.tx_pps, last.rx_pps) = (s.tx_packets as f64 / span, s.rx_packets as f64 / span);
        last.tx_bps = s.tx_bytes as f64 * 8.0 / span;
        last.rx_bps = s.rx_bytes as f64 * 8.0 / span;
        last.slices = slicer.add(id, s.t_start, s.t_end, &local_parts(s, fwd, rev));
        on_progress(&last);
    };
    let done = collect(jobs.fleet, &mut col, &[id], deadline, &mut progress)?;
    if !done {
        // Ctrl-C or a client that overran: it ends the test with
        // CLIENT_TERMINATE and reports what it measured.
        jobs.stop(gen, id, vec![]);
        let by = jobs.fleet.now() + answer + Duration::from_secs(5);
        collect_stopped(jobs.fleet, &mut col, &[id], by, &mut progress)?;
    }
    last.slices = slicer.finish();
    if !last.slices.is_empty() {
        on_progress(&last);
    }
    Ok((col, done))
}

/// The client's run as the test's one leg, for its host's CPU and verdict.
fn client_leg(name: &str, gen: usize, id: u32) -> Leg {
    Leg {
        name: name.to_string(),
        tx_agent: gen,
        rx_agent: gen,
        tx_id: id,
        rx_id: id,
        from: Addressing::default(),
        to: Addressing::default(),
        instance: None,
        gen_agent: gen,
    }
}

/// The client end's role in the record: the lab's plain generator (or an
/// unnamed end) is iperf3's client, a plan's host keeps its name.
fn local_role(role: &str) -> String {
    if role == "gen" || role.is_empty() {
        CLIENT_ROLES.0.to_string()
    } else {
        role.to_string()
    }
}

fn iperf3_inner(
    ends: &mut Ends,
    t: &Iperf3Test,
    dir: Option<&mut RunDir>,
    on_progress: OnProgress,
    started: String,
    result: &mut TestResult,
) -> Result<()> {
    let gen = ends
        .gens
        .first()
        .map(|g| g.agent)
        .ok_or_else(|| err!("an iperf3 test needs a client"))?;
    let id = next_id();
    let agents = ends.agents();
    let mut jobs = Jobs::new(ends.fleet);
    let before = jobs.snapshot(&agents)?;
    jobs.start(gen, id, Job::Iperf3Client(Box::new(t.job.clone())), None)?;
    let (mut col, done) = run_client(&mut jobs, t, (gen, id), dir, on_progress)?;
    let after = jobs.snapshot(&agents)?;
    jobs.disarm();
    if !col.errors.is_empty() {
        fail!("{}", col.errors.join("; "));
    }
    let Some(mut summary) = col.finished.get(&id).cloned() else {
        fail!("{}", super::setup::cut_short());
    };
    let report = summary.iperf3.take().ok_or_else(|| {
        err!(
            "the agent's iperf3 client reported no stream totals: is the linerate on that \
             host older than this one? Install the same version on both"
        )
    })?;
    let outcome = Outcome {
        params: t.params.clone(),
        local: Measured {
            summary,
            intervals: col.intervals.take(id),
            streams: report.streams.clone(),
        },
        far: report.far.clone(),
    };
    let kept = (result.params.lab, result.params.cpus.clone());
    let role = ends.role(gen);
    let local = local_role(&role);
    *result = record(&t.name, &outcome, (&local, CLIENT_ROLES.1), started);
    (result.params.lab, result.params.cpus) = kept;
    // This end's host: its CPU share, kernel counters and verdict, read
    // from the agent's snapshots like every other test's.
    result.cpu.clear();
    let leg = client_leg(&t.name, gen, id);
    record::counters(ends, &before, &after, result);
    record::cpu(
        ends,
        &before,
        &after,
        &col,
        std::slice::from_ref(&leg),
        result,
    );
    record::bottleneck(
        ends,
        &before,
        &after,
        &col,
        std::slice::from_ref(&leg),
        result,
    );
    kernel_check(result, &role, CLIENT_ROLES.1);
    if let Some(lost) = report.lost {
        fail!("{lost}");
    }
    if !done {
        fail!("{}", super::setup::cut_short());
    }
    Ok(())
}

/// UDP datagrams this end sent (received) against the packets its
/// network interfaces sent (received) over the test. The control
/// connection adds a few dozen packets; more than 1 % apart means the
/// datagrams went another way than the interfaces recorded, or were
/// dropped before the wire (qdisc, socket buffer).
pub(super) fn kernel_check(result: &mut TestResult, role: &str, far_role: &str) {
    if result.params.protocol != Protocol::Udp {
        return;
    }
    let mine: Vec<_> = result
        .kernel_counters
        .iter()
        .filter(|k| k.role == role && k.interface != "lo")
        .collect();
    if mine.is_empty() {
        return;
    }
    let if_tx: u64 = mine
        .iter()
        .map(|k| k.after.tx_packets.saturating_sub(k.before.tx_packets))
        .sum();
    let if_rx: u64 = mine
        .iter()
        .map(|k| k.after.rx_packets.saturating_sub(k.before.rx_packets))
        .sum();
    let mut checks = Vec::new();
    for d in &result.directions {
        let (app, kernel, what) = if d.sender != far_role {
            (d.tx_packets, if_tx, "sent")
        } else {
            (d.rx_packets, if_rx, "received")
        };
        if app > 0 {
            checks.push(CrossCheck::new(
                format!(
                    "{}: datagrams {what} by linerate vs packets {what} by its interfaces",
                    d.direction
                ),
                app,
                kernel,
            ));
        }
    }
    result.cross_checks.extend(checks);
}

pub(super) fn params_of(p: &TestParams) -> crate::results::TestParams {
    let protocol = match p.transport {
        Transport::Tcp => Protocol::Tcp,
        Transport::Udp => Protocol::Udp,
    };
    let direction = match p.mode {
        Mode::ClientSends => Direction::Forward,
        Mode::Reverse => Direction::Reverse,
        Mode::Bidir => Direction::Both,
    };
    crate::results::TestParams {
        streams: Some(p.streams as u16),
        congestion: p.congestion.clone(),
        rate_bps: (p.bandwidth_bps > 0).then(|| p.bandwidth_bps as f64 * f64::from(p.streams)),
        omit_s: p.omit_s,
        ..crate::results::TestParams::new(protocol, false, direction, p.time_s)
    }
}

/// One test as a `TestResult`: a direction per way traffic went, this
/// end's figures measured here (intervals, TCP_INFO, CPU), the far end's
/// from its results (named "far end"), both kept in `far_end`.
pub fn record(name: &str, o: &Outcome, roles: (&str, &str), started: String) -> TestResult {
    let mut r = TestResult::new(name, started, params_of(&o.params));
    let ipv6 = o.far.as_ref().is_some_and(|f| f.address.starts_with('['));
    r.params.ip_version = if ipv6 { 6 } else { 4 };
    let (local, far_role) = roles;
    let local_sends = o.local.streams.iter().any(|s| s.sends);
    let local_gets = o.local.streams.iter().any(|s| !s.sends);
    let client_side = o.far.as_ref().is_none_or(|f| f.role == "server");
    let name_of = |local_to_far: bool| {
        if local_to_far == client_side {
            "client_to_server"
        } else {
            "server_to_client"
        }
    };
    for (local_to_far, present) in [(true, local_sends), (false, local_gets)] {
        if !present {
            continue;
        }
        let d = direction_result(
            o,
            local_to_far,
            (local, far_role),
            name_of(local_to_far),
            ipv6,
        );
        let (sent, got) = (d.tx_packets, d.rx_packets + d.lost);
        let check = if o.params.transport == Transport::Udp {
            (o.far.is_some() && sent > 0).then(|| {
                CrossCheck::new(
                    format!(
                        "{}: datagrams sent vs received + lost by sequence number",
                        d.direction
                    ),
                    sent,
                    got,
                )
            })
        } else {
            (o.far.is_some()).then(|| {
                CrossCheck::new(
                    format!(
                        "{}: TCP payload sent ({}) vs received ({})",
                        d.direction, d.sender, d.receiver
                    ),
                    d.sender_summary.tx_bytes,
                    d.receiver_summary.rx_bytes,
                )
            })
        };
        r.cross_checks.extend(check);
        r.directions.push(d);
    }
    let elapsed = o.local.summary.elapsed_s.max(1e-6);
    let cpus = crate::host::kernel::host_cpus();
    r.cpu.push(CpuUse {
        role: local.into(),
        process_pct: o.local.summary.cpu_s / elapsed * 100.0 / f64::from(cpus),
        softirq_pct: 0.0,
        cpus,
    });
    // The far end's CPU stays in `far_end` as iperf3 reports it (its
    // process's share of one core): its host's CPU count is unknown here,
    // so it cannot be put in this list's unit (% of the host's CPUs).
    r.far_end = o.far.clone();
    r
}

/// One side's totals of one direction: (bytes, packets, lost, seconds,
/// retransmits, per-stream samples).
struct EndSide {
    bytes: u64,
    packets: u64,
    lost: u64,
    seconds: f64,
    retransmits: Option<u64>,
    streams: Vec<StreamSample>,
}

/// This end's figures for the streams that send (`sends`) or receive;
/// `info` is the engine's summary, whose streams carry the last TCP_INFO
/// (cwnd, RTT) of each.
fn local_side(
    streams: &[StreamTotals],
    info: &[StreamSample],
    sends: bool,
    len: u64,
    udp: bool,
) -> EndSide {
    let mine: Vec<&StreamTotals> = streams.iter().filter(|s| s.sends == sends).collect();
    let bytes = mine.iter().map(|s| s.bytes).sum();
    EndSide {
        bytes,
        packets: if udp && !sends {
            // Received datagrams, not the highest sequence number.
            mine.iter().map(|s| s.bytes / len.max(1)).sum()
        } else {
            mine.iter().map(|s| s.packets).sum()
        },
        lost: mine.iter().map(|s| s.lost).sum(),
        seconds: mine.iter().map(|s| s.seconds).fold(0.0, f64::max),
        retransmits: (!udp && sends).then(|| mine.iter().map(|s| s.retransmits).sum()),
        streams: mine
            .iter()
            .map(|s| {
                let last = info.iter().find(|i| i.id == s.id && i.sender == sends);
                StreamSample {
                    id: s.id,
                    sender: sends,
                    bytes: s.bytes,
                    retransmits: s.retransmits,
                    cwnd: last.map_or(0, |i| i.cwnd),
                    rtt_us: last.map_or(0, |i| i.rtt_us),
                }
            })
            .collect(),
    }
}

fn far_side(f: &FarEnd, sends: bool) -> EndSide {
    let theirs: Vec<_> = f.streams.iter().filter(|s| s.sender == sends).collect();
    let lost: u64 = theirs.iter().filter_map(|s| s.lost).sum();
    let packets: u64 = theirs.iter().filter_map(|s| s.packets).sum();
    EndSide {
        bytes: theirs.iter().map(|s| s.bytes).sum(),
        // A receiver's "packets" is the highest sequence number it saw.
        packets: if sends {
            packets
        } else {
            packets.saturating_sub(lost)
        },
        lost,
        seconds: theirs.iter().map(|s| s.seconds).fold(0.0, f64::max),
        retransmits: if sends {
            theirs.iter().map(|s| s.retransmits).sum()
        } else {
            None
        },
        streams: theirs
            .iter()
            .map(|s| StreamSample {
                id: s.id as u16,
                sender: sends,
                bytes: s.bytes,
                retransmits: s.retransmits.unwrap_or(0),
                ..Default::default()
            })
            .collect(),
    }
}

/// One end's summary for the direction: the local end's own summary (its
/// `base`) or an empty one, with this end's streams and its counts on the
/// side it played (`sending`); `wire_bytes`: its bytes as the wire sees
/// them.
fn end_summary(
    s: Option<&EndSide>,
    sending: bool,
    base: Option<&EndpointSummary>,
    wire_bytes: u64,
) -> EndpointSummary {
    let mut e = base.cloned().unwrap_or_default();
    e.streams = s.map(|s| s.streams.clone()).unwrap_or_default();
    e.flows.clear();
    if let Some(s) = s {
        e.elapsed_s = if base.is_some() {
            e.elapsed_s
        } else {
            s.seconds
        };
        if sending {
            (e.tx_bytes, e.tx_packets, e.rx_bytes, e.rx_packets) = (wire_bytes, s.packets, 0, 0);
            e.lost = 0;
        } else {
            (e.rx_bytes, e.rx_packets, e.tx_bytes, e.tx_packets) = (wire_bytes, s.packets, 0, 0);
            e.lost = s.lost;
        }
    }
    e
}

/// The local end's interval as one side of the direction: the streams
/// it sent (`sending`) or received, and only that side's counts.
fn one_side(iv: &IntervalSample, sending: bool) -> IntervalSample {
    let mut s = iv.clone();
    s.streams.retain(|st| st.sender == sending);
    if sending {
        (s.rx_bytes, s.rx_packets, s.lost, s.reordered, s.duplicates) = (0, 0, 0, 0, 0);
    } else {
        (s.tx_bytes, s.tx_packets, s.tx_errors) = (0, 0, 0);
    }
    s
}

/// The direction's seconds: the local end's first, if it timed any.
/// Towards the server: its received bytes over the seconds this end
/// sent. The server's clock runs until TEST_END, which this end sends
/// only once all it sent was acknowledged and read (about 0.1 s later:
/// the FIN's delayed ACK and a read grace), so its seconds would count
/// that wait as sending time; `iperf3 -c` sends TEST_END at once and
/// leaves what is still in flight uncounted instead.
fn timed_by(ends: [Option<&EndSide>; 2]) -> f64 {
    ends.into_iter()
        .flatten()
        .map(|s| s.seconds)
        .find(|s| *s > 0.0)
        .unwrap_or(0.0)
        .max(1e-6)
}

/// Packets per second over `seconds`; 0 for TCP, whose packets are not
/// counted.
fn pps(udp: bool, packets: u64, seconds: f64) -> f64 {
    if udp {
        packets as f64 / seconds
    } else {
        0.0
    }
}

fn direction_result(
    o: &Outcome,
    local_to_far: bool,
    (local, far_role): (&str, &str),
    name: &str,
    ipv6: bool,
) -> DirectionResult {
    let udp = o.params.transport == Transport::Udp;
    let len = u64::from(o.params.len);
    let mine = local_side(
        &o.local.streams,
        &o.local.summary.streams,
        local_to_far,
        len,
        udp,
    );
    let theirs = o.far.as_ref().map(|f| far_side(f, !local_to_far));
    let (tx, rx) = if local_to_far {
        (Some(&mine), theirs.as_ref())
    } else {
        (theirs.as_ref(), Some(&mine))
    };
    let frame = len + if ipv6 { 66 } else { 46 };
    // The local end's summary is the base of its side's; the far end has
    // only its figures.
    let base = |local: bool| local.then_some(&o.local.summary);
    let wire = |s: &EndSide| if udp { s.packets * frame } else { s.bytes };
    let summary = |s: Option<&EndSide>, sending: bool, local: bool| {
        end_summary(s, sending, base(local), s.map_or(0, wire))
    };
    let seconds = if local_to_far {
        timed_by([tx, rx])
    } else {
        timed_by([rx, tx])
    };
    let rx_packets = rx.map_or(0, |s| s.packets);
    let tx_packets = tx.map_or(0, |s| s.packets);
    let lost = rx.map_or(0, |s| s.lost);
    let goodput = rx.map_or(0.0, |s| s.bytes as f64 * 8.0 / seconds);
    let local_iv = o.local.intervals.iter();
    let local_iv: Vec<IntervalSample> = local_iv.map(|iv| one_side(iv, local_to_far)).collect();
    DirectionResult {
        direction: name.into(),
        sender: if local_to_far { local } else { far_role }.into(),
        receiver: if local_to_far { far_role } else { local }.into(),
        duration_s: seconds,
        tx_packets,
        rx_packets,
        lost,
        dut_lost: lost,
        loss_ratio: if udp && tx_packets > 0 {
            lost as f64 / tx_packets.max(rx_packets + lost) as f64
        } else {
            0.0
        },
        tx_pps: pps(udp, tx_packets, seconds),
        rx_pps: pps(udp, rx_packets, seconds),
        rx_l2_bps: if udp {
            (rx_packets * frame) as f64 * 8.0 / seconds
        } else {
            goodput
        },
        rx_l1_bps: udp.then(|| (rx_packets * (frame + 20)) as f64 * 8.0 / seconds),
        retransmits: tx.and_then(|s| s.retransmits),
        tx_errors: if local_to_far {
            o.local.summary.tx_errors
        } else {
            0
        },
        intervals: if local_to_far {
            pair_intervals(local_iv, vec![])
        } else {
            pair_intervals(vec![], local_iv)
        },
        sender_summary: summary(tx, true, local_to_far),
        receiver_summary: summary(rx, false, !local_to_far),
        ..Default::default()
    }
}
