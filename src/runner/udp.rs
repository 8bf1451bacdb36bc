//! UDP packet-stream tests: receivers first, senders together, loss from
//! sequence numbers, cross-checked against the kernel's counters.

use super::jobs::{collect_stopped, collect_ticking, Collected, Jobs, LiveSum};
use super::kind::TestKind;
use super::record::{self, delta_ns, NsDelta};
use super::setup::{legs, pick_rx_cpus, pick_tx_cpus, unspecified, Ends, Leg, OnProgress};
use super::setup::{Progress, UdpTest};
use super::slices::{self, Part, Slicer};
use crate::model::units;
use crate::proto::{EndpointSummary, FlowTotal, IntervalSample, Job, RateProfile};
use crate::results::bottleneck::sender_short;
use crate::results::{
    in_omit, mark_omitted, pair_intervals, DirectionResult, FlowMode, Protocol, RunDir, TestParams,
    TestResult, TestStatus,
};
use crate::runner::error::{err, fail, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};

impl TestKind for UdpTest {
    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self, ends: &Ends) -> TestParams {
        let duration_s = self.duration.as_secs_f64();
        TestParams {
            frame: Some(self.frame),
            average_frame_bytes: Some(crate::engine::frame::average_frame(self.frame)),
            flow_mode: Some(self.flow_mode),
            flows: Some(if self.flow_mode == FlowMode::One {
                1
            } else {
                self.flows
            }),
            rate_pps: self.rate_pps,
            rate_profile: self.rate_profile.clone(),
            cpus: self.cpus.clone(),
            lab: ends.lab,
            omit_s: self.omit.as_secs_f64(),
            window_bytes: self.window,
            dscp: self.dscp,
            ..TestParams::new(Protocol::Udp, self.ipv6, self.direction, duration_s)
        }
    }

    fn interval(&self) -> Option<Duration> {
        Some(self.interval)
    }

    /// See [`fail_if_nothing_arrived`].
    fn fails_on_total_loss(&self) -> bool {
        true
    }

    fn body(
        &self,
        ends: &mut Ends,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()> {
        udp_inner(ends, self, dir, on_progress, result)
    }
}

fn udp_inner(
    ends: &mut Ends,
    t: &UdpTest,
    dir: &mut Option<&mut RunDir>,
    on_progress: OnProgress,
    result: &mut TestResult,
) -> Result<()> {
    let mut legs = legs(ends, t.direction);
    // The test's own tags (a plan test's `vlan`) apply to both ends.
    for leg in legs.iter_mut().filter(|_| t.vlan.is_some()) {
        leg.from.vlan = t.vlan;
        leg.to.vlan = t.vlan;
    }
    if let Some(tags) = legs.iter().find_map(|l| l.from.vlan.or(l.to.vlan)) {
        result.vlan = Some(crate::results::TestVlan {
            tags,
            devices: Vec::new(),
        });
    }
    for leg in &legs {
        for vlan in [leg.from.vlan, leg.to.vlan] {
            crate::engine::frame::check_frames(t.frame, t.ipv6, vlan)?;
        }
    }
    let agents = ends.agents();
    let roles: HashMap<u32, String> = legs
        .iter()
        .flat_map(|l| [(l.tx_id, l.name.clone()), (l.rx_id, l.name.clone())])
        .collect();
    let mut watch = super::dut::DutWatch::new(
        ends.observers.first().copied(),
        dir.as_deref().map(|d| d.path.as_path()),
    );
    let mut jobs = Jobs::new(ends.fleet);
    // Receivers first, so the first datagram already has a socket.
    let mut flows_of = HashMap::new();
    let mut port_of = HashMap::new();
    for (i, leg) in legs.iter().enumerate() {
        let port = jobs.start(
            leg.rx_agent,
            leg.rx_id,
            Job::UdpReceive {
                bind: unspecified(t.ipv6),
                port: super::setup::nth_port(t.port, i)?,
                flows: t.flows.max(1),
                interval_ms: slices::sample_ms(t.interval),
                cpus: pick_rx_cpus(&t.cpus, t.threads),
                threads: t.threads,
                rx_engine: t.rx_engine,
                target: leg.to.main(t.ipv6),
                vlan: leg.to.vlan,
                dscp: t.dscp,
                window: t.window,
            },
            None,
        )?;
        let port = port.ok_or_else(|| err!("the receiver reported no port"))?;
        port_of.insert(leg.rx_id, port);
        let flows = super::build_flows(t.flow_mode, t.flows, t.ipv6, &leg.from, &leg.to, port)?;
        flows_of.insert(leg.tx_id, flows);
    }
    let span_from = jobs.fleet.unix_ns();
    let before = jobs.snapshot(&agents)?;
    let span_from = span_from / 2 + jobs.fleet.unix_ns() / 2;
    let meter = crate::host::efficiency::Meter::start();
    watch.read(jobs.fleet);
    let senders: Vec<usize> = legs.iter().map(|l| l.tx_agent).collect();
    let start_at = jobs.agree_start(&senders);
    let t0 = jobs.fleet.now();
    for leg in &legs {
        jobs.start(
            leg.tx_agent,
            leg.tx_id,
            Job::UdpSend {
                flows: flows_of.remove(&leg.tx_id).unwrap_or_default(),
                frame: t.frame,
                rate: t
                    .rate_profile
                    .clone()
                    .or(t.rate_pps.map(RateProfile::constant)),
                duration_ms: (t.duration + t.omit).as_millis() as u64,
                batch: t.batch,
                interval_ms: slices::sample_ms(t.interval),
                cpus: pick_tx_cpus(&t.cpus, t.threads),
                allow: t.allow.clone(),
                tx_engine: t.tx_engine,
                threads: t.threads,
                vlan: leg.from.vlan,
                dscp: t.dscp,
                max_frames: t.max_frames,
                window: t.window,
            },
            start_at,
        )?;
    }
    let mut col = Collected::new(dir.as_deref().map(|d| d.path.as_path()));
    let tx_ids: Vec<u32> = legs.iter().map(|l| l.tx_id).collect();
    let rx_ids: Vec<u32> = legs.iter().map(|l| l.rx_id).collect();
    let frame = crate::engine::frame::average_frame(t.frame);
    let whole = t.duration + t.omit;
    let dur = whole.as_secs_f64();
    let mut live = LiveSum::default();
    let mut last = Progress {
        test: t.name.clone(),
        duration_s: dur,
        sliced: true,
        ..Default::default()
    };
    let all_ids: Vec<u32> = tx_ids.iter().chain(&rx_ids).copied().collect();
    let labels: HashMap<u32, String> = legs
        .iter()
        .flat_map(|l| {
            [
                (l.tx_id, slices::sum_label(&l.name)),
                (l.rx_id, slices::sum_label(&l.name)),
            ]
        })
        .collect();
    let order: Vec<String> = legs.iter().map(|l| slices::sum_label(&l.name)).collect();
    let mut slicer = Slicer::new(
        t.interval.as_secs_f64(),
        dur,
        t.omit.as_secs_f64(),
        &all_ids,
        &order,
    )
    .counting_packets();
    let lead = start_at
        .map(|s| Duration::from_nanos(s.saturating_sub(jobs.fleet.unix_ns())))
        .unwrap_or_default();
    let mut on_sample = |id: u32, s: &crate::proto::IntervalSample, now: Instant| {
        if let (Some(d), Some(role)) = (dir.as_deref_mut(), roles.get(&id)) {
            d.log_interval(&t.name, role, s);
        }
        if let Some(label) = labels.get(&id) {
            let sender = tx_ids.contains(&id);
            let part = Part {
                direction: label.clone(),
                sender,
                bytes: if sender { s.tx_bytes } else { s.rx_bytes },
                packets: if sender { s.tx_packets } else { s.rx_packets },
                lost: if sender { 0 } else { s.lost },
                ..Default::default()
            };
            last.slices = slicer.add(id, s.t_start, s.t_end, &[part]);
        }
        if tx_ids.contains(&id) {
            live.update(id, s, 0, s.tx_packets);
            (last.tx_pps, _, _) = live.sum(&tx_ids);
            last.tx_bps = units::l1_bps(last.tx_pps, frame);
        } else {
            live.update(id, s, 0, s.rx_packets);
            (last.rx_pps, _, last.loss_ratio) = live.sum(&rx_ids);
            last.rx_bps = units::l1_bps(last.rx_pps, frame);
        }
        last.elapsed_s = now
            .saturating_duration_since(t0)
            .saturating_sub(lead)
            .as_secs_f64()
            .min(dur);
        on_progress(&last);
        last.slices.clear();
    };
    let done = collect_ticking(
        jobs.fleet,
        &mut col,
        &tx_ids,
        t0 + lead + whole + Duration::from_secs(15),
        &mut on_sample,
        |f| watch.tick(f),
    )?;
    if !done {
        // Cut short (Ctrl-C, or senders that never reported): stop the
        // senders first and take their counts, so the receivers get the
        // real totals and the loss is exact for the time that ran.
        for leg in &legs {
            jobs.stop(leg.tx_agent, leg.tx_id, vec![]);
        }
        let by = jobs.fleet.now() + Duration::from_secs(5);
        collect_stopped(jobs.fleet, &mut col, &tx_ids, by, &mut on_sample)?;
    }
    // Let the last datagrams cross the DUT, then stop receivers with totals.
    jobs.fleet.sleep(Duration::from_millis(200));
    watch.read(jobs.fleet);
    for leg in &legs {
        let totals: Vec<FlowTotal> = col
            .summary(leg.tx_id)
            .flows
            .iter()
            .map(|f| FlowTotal {
                id: f.id,
                tx_packets: f.tx_packets,
            })
            .collect();
        jobs.stop(leg.rx_agent, leg.rx_id, totals);
    }
    let by = jobs.fleet.now() + Duration::from_secs(5);
    collect_stopped(jobs.fleet, &mut col, &all_ids, by, &mut on_sample)?;
    let span_to = jobs.fleet.unix_ns();
    last.slices = slicer.finish();
    if !last.slices.is_empty() {
        on_progress(&last);
    }
    let after = jobs.snapshot(&agents)?;
    result.counters_span_ns = Some((span_from, span_to / 2 + jobs.fleet.unix_ns() / 2));
    jobs.disarm();
    if !col.errors.is_empty() {
        fail!("{}", col.errors.join("; "));
    }
    // A receiver that never reported has not measured zero loss.
    if let Some(l) = legs.iter().find(|l| !col.finished.contains_key(&l.rx_id)) {
        fail!(
            "the {} receiver did not report its counts within 5 s of Stop; this test has no loss figure",
            ends.role(l.rx_agent)
        );
    }
    record::counters(ends, &before, &after, result);
    record::udp_cross_checks(ends, &legs, &col, &before, &after, result);
    record::stick_counts(ends, &legs, &col, &before, &after, result);
    let start_ns = start_at.unwrap_or(0);
    let driver_drops = record::sender_driver_drops(ends, &legs, &col, &before, &after);
    for leg in &legs {
        let mut d = direction(
            ends,
            leg,
            &mut col,
            (&before, &after),
            frame,
            (start_ns, t.omit.as_secs_f64()),
            driver_drops.get(&leg.tx_id).copied().unwrap_or(0),
        );
        d.port = port_of.get(&leg.rx_id).copied();
        result.directions.push(d);
    }
    record::dut_loss(ends, &before, &after, result);
    watch.record(ends, &legs, result);
    record::cpu(ends, &before, &after, &col, &legs, result);
    record::bottleneck(ends, &before, &after, &col, &legs, result);
    let received: u64 = result.directions.iter().map(|d| d.rx_packets).sum();
    let gen = ends.gens.first().map(|g| g.agent);
    if let Some((b, a)) = gen.and_then(|g| Some((before.get(&g)?, after.get(&g)?))) {
        result.efficiency = Some(meter.finish(received, &b.system_cpu, &a.system_cpu));
    }
    if ends.many() {
        result.aggregate = Some(record::aggregate(ends, &legs, result, Some(frame)));
    }
    if !done {
        fail!("{}", super::setup::cut_short());
    }
    Ok(())
}

/// A direction whose senders offered frames and whose receivers counted
/// none fails its test (100 % loss is a broken path or a wrong target, not
/// a measurement); the caller skips this when the user expects it
/// (`--expect-loss`). Search trials never call it: a trial above the DUT's
/// limit may lose everything.
pub fn fail_if_nothing_arrived(result: &mut TestResult) {
    if result.status != TestStatus::Ok {
        return;
    }
    let dead: Vec<String> = result
        .directions
        .iter()
        .filter(|d| d.tx_packets > 0 && d.rx_packets == 0)
        .map(|d| format!("{} ({} frames offered)", d.direction, d.tx_packets))
        .collect();
    if dead.is_empty() {
        return;
    }
    result.status = TestStatus::Failed;
    result.error = Some(format!(
        "100 % loss: no frame arrived in {}; check that --target is an address of the server \
         endpoint and that the path forwards to it, or pass --expect-loss when the test is \
         meant to lose everything",
        dead.join(", ")
    ));
}

type Snapshots = HashMap<usize, crate::proto::Snapshot>;

/// The counts of a sender's and a receiver's samples after the first
/// `omit_s` seconds, in summaries' form: what the totals of a test with
/// `--omit` are made of.
fn after_omit(
    tx: &EndpointSummary,
    (tx_iv, rx_iv): (&[IntervalSample], &[IntervalSample]),
    omit_s: f64,
) -> (EndpointSummary, EndpointSummary) {
    let mut t = EndpointSummary {
        elapsed_s: (tx.elapsed_s - omit_s).max(0.0),
        ..Default::default()
    };
    for s in tx_iv.iter().filter(|s| !in_omit(s, omit_s)) {
        t.tx_packets += s.tx_packets;
        t.tx_bytes += s.tx_bytes;
        t.tx_errors += s.tx_errors;
        t.tx_target += s.tx_target;
    }
    let mut r = EndpointSummary::default();
    for s in rx_iv.iter().filter(|s| !in_omit(s, omit_s)) {
        r.rx_packets += s.rx_packets;
        r.rx_bytes += s.rx_bytes;
        r.lost += s.lost;
        r.reordered += s.reordered;
        r.duplicates += s.duplicates;
    }
    (t, r)
}

/// The frames of `lost` the tester itself dropped: at the receiver socket
/// overruns, plus drops on its interfaces when linerate built them
/// (elsewhere an unrelated NIC's drops would hide real loss); at the
/// sender the frames its driver's XDP transmit path refused
/// (`sender_dropped`, which never left it). A veth backlog drop also shows
/// as the peer's tx_dropped; counting the receiver side only avoids
/// counting it twice.
fn tester_drops(
    ends: &Ends,
    (rx_ns, rx_whole): (&NsDelta, &EndpointSummary),
    sender_dropped: u64,
    lost: u64,
) -> u64 {
    let iface_drops = if ends.lab.is_some() {
        rx_ns.rx_dropped
    } else {
        0
    };
    // The XDP sink counts before the stack: a socket overrun (UDP
    // InErrors) there is a frame it passed on, never a counted one.
    let socket_drops = if rx_whole.rx_engine == "xdp" {
        0
    } else {
        rx_ns.udp_in_errors
    };
    (socket_drops + iface_drops + sender_dropped).min(lost)
}

/// One leg's figures, with its cross-checks pushed onto `result`. With
/// `omit_s`, the figures cover the samples after it; the summaries stay
/// the jobs' own counts. `sender_dropped`: this leg's share of the frames
/// its sender's drivers refused ([`record::sender_driver_drops`]).
fn direction(
    ends: &Ends,
    leg: &Leg,
    col: &mut Collected,
    (before, after): (&Snapshots, &Snapshots),
    frame: f64,
    (start_ns, omit_s): (u64, f64),
    sender_dropped: u64,
) -> DirectionResult {
    let tx_whole = col.summary(leg.tx_id);
    let rx_whole = col.summary(leg.rx_id);
    let tx_iv = col.intervals.take(leg.tx_id);
    let rx_iv = col.intervals.take(leg.rx_id);
    let (tx, rx) = if omit_s > 0.0 {
        after_omit(&tx_whole, (&tx_iv, &rx_iv), omit_s)
    } else {
        (tx_whole.clone(), rx_whole.clone())
    };
    let rx_ns = delta_ns(before, after, leg.rx_agent);
    let tester_drops = tester_drops(ends, (&rx_ns, &rx_whole), sender_dropped, rx.lost);
    let dur = tx.elapsed_s.max(1e-6);
    let rx_pps = rx.rx_packets as f64 / dur;
    let mut intervals = pair_intervals(tx_iv, rx_iv);
    mark_omitted(&mut intervals, omit_s);
    DirectionResult {
        port: None,
        direction: leg.name.clone(),
        sender: ends.role(leg.tx_agent),
        receiver: ends.role(leg.rx_agent),
        instance: leg.instance,
        start_offset_s: record::start_offset(ends.fleet, leg.tx_agent, &tx_whole, start_ns),
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
        rx_l1_bps: Some(units::l1_bps(rx_pps, frame)),
        line_rate_pct: None,
        tx_errors: tx.tx_errors,
        tx_target: tx.tx_target,
        // The sender fell short of what the rate asked for by more than
        // counting noise and the DUT lost nothing: this trial measured the
        // tester, not the DUT. With DUT loss it measured the DUT at the
        // rate offered.
        tester_limited: sender_short(tx.tx_packets, tx.tx_target)
            && rx.lost.saturating_sub(tester_drops) == 0,
        tester_drops,
        dut_lost: rx.lost.saturating_sub(tester_drops),
        retransmits: None,
        intervals,
        socket_buffers: crate::results::DirectionBuffers::of(
            tx_whole.socket_buffers,
            rx_whole.socket_buffers,
        ),
        dscp_received: rx_whole.dscp_received.clone(),
        dscp_note: None,
        sender_summary: tx_whole,
        receiver_summary: rx_whole,
    }
}
