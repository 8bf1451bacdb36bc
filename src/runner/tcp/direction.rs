//! One direction of a TCP client/server pair: its figures from the jobs'
//! summaries and samples, and its cross-checks.

use crate::proto::{EndpointSummary, IntervalSample};
use crate::results::{
    in_omit, mark_omitted, pair_intervals, CrossCheck, DirectionBuffers, DirectionResult,
    TestResult,
};
use crate::runner::record::delta_ns;
use crate::runner::sequence::Snapshots;
use crate::runner::setup::{Ends, Leg};

/// One side's part of an interval: the sender's (or the receiver's)
/// streams and their bytes.
fn one_side(iv: &IntervalSample, sender: bool) -> IntervalSample {
    let bytes: u64 = iv
        .streams
        .iter()
        .filter(|s| s.sender == sender)
        .map(|s| s.bytes)
        .sum();
    IntervalSample {
        t_start: iv.t_start,
        t_end: iv.t_end,
        tx_bytes: if sender { bytes } else { 0 },
        rx_bytes: if sender { 0 } else { bytes },
        streams: iv
            .streams
            .iter()
            .filter(|s| s.sender == sender)
            .cloned()
            .collect(),
        ..Default::default()
    }
}

/// One direction of one client/server pair. Its figures leave out the
/// first `omit_s` seconds (by the receiver's samples; the sender's for what
/// was sent); the summaries stay the jobs' own counts.
pub(super) fn direction(
    leg: &Leg,
    (txs, rxs): (&EndpointSummary, &EndpointSummary),
    (tx_iv, rx_iv): (&[IntervalSample], &[IntervalSample]),
    ends: &Ends,
    omit_s: f64,
) -> DirectionResult {
    let side_bytes = |iv: &[IntervalSample], sender: bool| -> (u64, u64) {
        iv.iter()
            .filter(|s| !in_omit(s, omit_s))
            .flat_map(|s| s.streams.iter().filter(|x| x.sender == sender))
            .fold((0, 0), |(b, r), x| (b + x.bytes, r + x.retransmits))
    };
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
    let whole_retr: u64 = txs
        .streams
        .iter()
        .filter(|s| s.sender)
        .map(|s| s.retransmits)
        .sum();
    let (got_kept, retr) = if omit_s > 0.0 {
        (side_bytes(rx_iv, false).0, side_bytes(tx_iv, true).1)
    } else {
        (got, whole_retr)
    };
    let elapsed = (txs.elapsed_s - omit_s).max(1e-6);
    let goodput = got_kept as f64 * 8.0 / elapsed;
    let mut intervals = pair_intervals(
        tx_iv.iter().map(|s| one_side(s, true)).collect(),
        rx_iv.iter().map(|r| one_side(r, false)).collect(),
    );
    mark_omitted(&mut intervals, omit_s);
    let socket_buffers = DirectionBuffers::of(txs.socket_buffers, rxs.socket_buffers);
    DirectionResult {
        direction: leg.name.clone(),
        sender: ends.role(leg.tx_agent),
        receiver: ends.role(leg.rx_agent),
        instance: leg.instance,
        duration_s: (txs.elapsed_s - omit_s).max(0.0),
        rx_l2_bps: goodput,
        rx_l1_bps: None,
        retransmits: Some(retr),
        intervals,
        socket_buffers,
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
    }
}

/// Payload sent vs received, and (with `kernel`: one sender per agent, one
/// direction, else the counters are shared) received vs the kernel's rx_bytes.
pub(super) fn checks(
    ends: &Ends,
    leg: &Leg,
    d: &DirectionResult,
    kernel: Option<(bool, &Snapshots, &Snapshots)>,
    result: &mut TestResult,
) {
    let (sent, got) = (d.sender_summary.tx_bytes, d.receiver_summary.rx_bytes);
    result.cross_checks.push(CrossCheck::new(
        format!(
            "{}: TCP payload sent by {} vs received",
            ends.role(leg.rx_agent),
            ends.role(leg.tx_agent)
        ),
        sent,
        got,
    ));
    let Some((ipv6, before, after)) = kernel else {
        return;
    };
    // The whole run's retransmits, as the kernel counted the whole run
    // (`retransmits` leaves out the omitted seconds).
    let retr: u64 = d.sender_summary.streams.iter().map(|s| s.retransmits).sum();
    let rx_ns = delta_ns(before, after, leg.rx_agent);
    // The kernel counts headers (one set per GSO/GRO packet) and
    // retransmitted segments too; add both before comparing.
    let header: u64 = if ipv6 { 14 + 40 + 32 } else { 14 + 20 + 32 };
    let mss: u64 = if ipv6 { 1428 } else { 1448 };
    result.cross_checks.push(CrossCheck::new(
        format!(
            "{}: TCP payload + headers + retransmitted segments vs kernel rx_bytes",
            ends.role(leg.rx_agent)
        ),
        got + rx_ns.rx_packets * header + retr * mss,
        rx_ns.rx_bytes,
    ));
}
