//! The aggregate of a test with many senders: in total, per sending host
//! and per interval.

use crate::results::{Aggregate, AggregateInterval, HostShare, TestResult};
use crate::runner::setup::{Ends, Leg};

/// Sums the directions of a test with many senders: in total, per sending
/// host, and per interval (all senders started together, so interval i of
/// each covers the same second of the common timebase).
pub(in crate::runner) fn aggregate(
    ends: &Ends,
    legs: &[Leg],
    result: &TestResult,
    frame: Option<f64>,
) -> Aggregate {
    let mut agg = Aggregate::default();
    let mut hosts: Vec<HostShare> = Vec::new();
    let mut intervals: Vec<AggregateInterval> = Vec::new();
    let mut retransmits = 0u64;
    for (leg, d) in legs.iter().zip(&result.directions) {
        agg.tx_packets += d.tx_packets;
        agg.rx_packets += d.rx_packets;
        agg.lost += d.lost;
        agg.dut_lost += d.dut_lost;
        agg.rx_pps += d.rx_pps;
        agg.rx_l2_bps += d.rx_l2_bps;
        retransmits += d.retransmits.unwrap_or(0);
        let host = ends.role(leg.gen_agent);
        let share = match hosts.iter_mut().position(|h| h.host == host) {
            Some(i) => &mut hosts[i],
            None => {
                hosts.push(HostShare {
                    host,
                    ..Default::default()
                });
                hosts.last_mut().expect("just pushed")
            }
        };
        share.instances = share.instances.max(leg.instance.unwrap_or(1));
        share.tx_packets += d.tx_packets;
        share.rx_packets += d.rx_packets;
        share.lost += d.lost;
        share.rx_l2_bps += d.rx_l2_bps;
        for (i, p) in d.intervals.iter().enumerate() {
            let Some(r) = &p.receiver else { continue };
            if intervals.len() <= i {
                intervals.resize_with(i + 1, Default::default);
            }
            let slot = &mut intervals[i];
            slot.t_start = i as f64;
            slot.t_end = (i + 1) as f64;
            slot.rx_packets += r.rx_packets;
            slot.rx_bytes += r.rx_bytes;
        }
    }
    for iv in &mut intervals {
        iv.rx_l2_bps = iv.rx_bytes as f64 * 8.0 / (iv.t_end - iv.t_start);
    }
    agg.loss_ratio = if agg.tx_packets > 0 {
        agg.lost as f64 / agg.tx_packets as f64
    } else {
        0.0
    };
    agg.rx_l1_bps = frame.map(|f| crate::model::units::l1_bps(agg.rx_pps, f));
    agg.retransmits = frame.is_none().then_some(retransmits);
    agg.per_host = hosts;
    agg.intervals = intervals;
    agg
}
