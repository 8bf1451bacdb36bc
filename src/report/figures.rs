//! Figures in the field's units, computed once from a results document for
//! every output (terminal, HTML, charts, CSV, Prometheus): labels, rates per
//! interval, and the offered load. Pure functions over `results` types.

use crate::model::units;
use crate::proto::{FrameSpec, IntervalSample};
use crate::results::{DirectionResult, Protocol, TestResult};

/// TCP bulk and HTTP downloads: goodput and retransmits, no packets.
pub fn is_tcp(t: &TestResult) -> bool {
    matches!(t.params.protocol, Protocol::Tcp | Protocol::Http)
}

/// `gen_to_sink` → `gen→sink`.
pub fn dir_label(direction: &str) -> String {
    direction.replace("_to_", "→")
}

/// Frame size as the seeds write it: `64 B`, `imix`; TCP has none.
pub fn frame_label(t: &TestResult) -> String {
    match t.params.frame {
        Some(FrameSpec::Fixed(n)) => format!("{n} B"),
        Some(FrameSpec::Imix) => "imix".into(),
        None => "-".into(),
    }
}

/// Flows (UDP) or streams (TCP), with the flow mode: `16 var2`, `4 streams`.
pub fn flows_label(t: &TestResult) -> String {
    if t.params.protocol == Protocol::Http {
        let n = t.params.streams.unwrap_or(1);
        return format!("{n} conn{}", if n == 1 { "" } else { "s" });
    }
    if is_tcp(t) {
        let n = t.params.streams.unwrap_or(1);
        return format!("{n} stream{}", if n == 1 { "" } else { "s" });
    }
    let mode = t
        .params
        .flow_mode
        .map(|m| format!("{m:?}").to_lowercase())
        .unwrap_or_default();
    format!("{} {mode}", t.params.flows.unwrap_or(1))
        .trim()
        .to_string()
}

/// Average frame size in bytes (FCS included) of a UDP test.
pub fn avg_frame(t: &TestResult) -> Option<f64> {
    t.params.average_frame_bytes.filter(|f| *f > 0.0)
}

/// What the sender put on the wire over the whole test: pps for UDP,
/// payload bit/s for TCP.
pub fn offered(t: &TestResult, d: &DirectionResult) -> f64 {
    if is_tcp(t) {
        rate(
            d.sender_summary.tx_bytes as f64 * 8.0,
            d.sender_summary.elapsed_s,
        )
        .unwrap_or(0.0)
    } else {
        d.tx_pps
    }
}

/// What arrived: pps for UDP, payload bit/s for TCP.
pub fn received(t: &TestResult, d: &DirectionResult) -> f64 {
    if is_tcp(t) {
        d.rx_l2_bps
    } else {
        d.rx_pps
    }
}

/// Unit of [`offered`] and [`received`].
pub fn rate_unit(t: &TestResult) -> &'static str {
    if is_tcp(t) {
        "bit/s"
    } else {
        "pps"
    }
}

/// The rate the test asked for, in pps, when it asked for one. A constant
/// rate is the one asked (`--rate 200kpps` is 200000, not the 199976 that
/// the frames due over the sender's measured run time divide to); a
/// ramp's changing rate is its mean, from the frames due.
pub fn target_pps(t: &TestResult, d: &DirectionResult) -> Option<f64> {
    match t.params.rate_pps {
        Some(r) if t.params.rate_profile.is_none() => Some(r),
        _ if d.tx_target > 0 => rate(d.tx_target as f64, d.duration_s),
        _ => t.params.rate_pps,
    }
}

fn rate(count: f64, seconds: f64) -> Option<f64> {
    (seconds > 0.0 && count.is_finite()).then(|| count / seconds)
}

/// One interval of one direction, both ends' view side by side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalFigures {
    pub index: usize,
    /// Seconds since the sender started (the receiver's clock when the
    /// sender has no sample for this interval).
    pub t_start: f64,
    pub t_end: f64,
    /// Both ends reported this interval. The receiver's drain after the
    /// sender stopped, or a sender's last sliver, have one side only.
    pub complete: bool,
    pub target_pps: Option<f64>,
    pub tx_pps: Option<f64>,
    pub rx_pps: Option<f64>,
    /// UDP: frames with FCS; TCP: payload goodput.
    pub tx_l2_bps: Option<f64>,
    pub rx_l2_bps: Option<f64>,
    /// UDP only: L2 + 20 B per frame.
    pub rx_l1_bps: Option<f64>,
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub tx_errors: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// lost / (received + lost) in this interval, from the receiver's
    /// sequence numbers alone (the two ends' intervals are not aligned).
    pub loss_ratio: Option<f64>,
    /// TCP: segments the sender retransmitted in this interval.
    pub retransmits: Option<u64>,
    /// TCP: mean smoothed RTT over the sender's streams, microseconds.
    pub rtt_us: Option<f64>,
}

fn span(s: &IntervalSample) -> f64 {
    s.t_end - s.t_start
}

/// The interval figures of one direction, in order.
pub fn intervals(t: &TestResult, d: &DirectionResult) -> Vec<IntervalFigures> {
    let tcp = is_tcp(t);
    let frame = avg_frame(t);
    d.intervals
        .iter()
        .enumerate()
        .map(|(index, pair)| {
            let (tx, rx) = (pair.sender.as_ref(), pair.receiver.as_ref());
            let clock = tx.or(rx);
            let mut f = IntervalFigures {
                index,
                t_start: clock.map(|s| s.t_start).unwrap_or(0.0),
                t_end: clock.map(|s| s.t_end).unwrap_or(0.0),
                complete: tx.is_some() && rx.is_some(),
                ..Default::default()
            };
            if let Some(s) = tx {
                f.tx_packets = s.tx_packets;
                f.tx_bytes = s.tx_bytes;
                f.tx_errors = s.tx_errors;
                if tcp {
                    f.tx_l2_bps = rate(s.tx_bytes as f64 * 8.0, span(s));
                    f.retransmits = Some(s.streams.iter().map(|x| x.retransmits).sum());
                    let rtts: Vec<f64> = s
                        .streams
                        .iter()
                        .filter(|x| x.sender && x.rtt_us > 0)
                        .map(|x| f64::from(x.rtt_us))
                        .collect();
                    if !rtts.is_empty() {
                        f.rtt_us = Some(rtts.iter().sum::<f64>() / rtts.len() as f64);
                    }
                } else {
                    f.tx_pps = rate(s.tx_packets as f64, span(s));
                    f.tx_l2_bps = f.tx_pps.zip(frame).map(|(p, b)| units::l2_bps(p, b));
                    if s.tx_target > 0 {
                        f.target_pps = rate(s.tx_target as f64, span(s));
                    }
                }
            }
            if let Some(s) = rx {
                f.rx_packets = s.rx_packets;
                f.rx_bytes = s.rx_bytes;
                f.lost = s.lost;
                f.reordered = s.reordered;
                f.duplicates = s.duplicates;
                if tcp {
                    f.rx_l2_bps = rate(s.rx_bytes as f64 * 8.0, span(s));
                } else {
                    f.rx_pps = rate(s.rx_packets as f64, span(s));
                    // The receiver's byte count is not the frame size; the
                    // summary uses the test's average frame, and so do we.
                    f.rx_l2_bps = f.rx_pps.zip(frame).map(|(p, b)| units::l2_bps(p, b));
                    f.rx_l1_bps = f.rx_pps.zip(frame).map(|(p, b)| units::l1_bps(p, b));
                    let expected = s.rx_packets + s.lost;
                    f.loss_ratio = (expected > 0).then(|| s.lost as f64 / expected as f64);
                }
            }
            f
        })
        .collect()
}

/// How a bottleneck verdict is shown: "bad" when it blames the tester (the
/// figures measure linerate, not the DUT), "ok" when the DUT or nothing is
/// the limit, "warn" otherwise. Every view (table notes, the CPU section,
/// the "Needs a look" card) uses this one mapping.
pub fn verdict_tone(kind: crate::results::BottleneckKind) -> &'static str {
    use crate::results::BottleneckKind as K;
    match kind {
        K::TesterSender | K::TesterReceiver | K::NothingArrived => "bad",
        K::NoneSaturated | K::Dut | K::RateLimited => "ok",
        _ => "warn",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::StreamSample;
    use crate::results::IntervalPair;

    fn sample(t0: f64, t1: f64) -> IntervalSample {
        IntervalSample {
            t_start: t0,
            t_end: t1,
            ..Default::default()
        }
    }

    #[test]
    fn udp_interval_rates_and_loss() {
        let mut t = crate::report::testdata::udp_test("udp 64B", 64);
        let tx = IntervalSample {
            tx_packets: 1000,
            tx_target: 2000,
            ..sample(0.0, 0.5)
        };
        let rx = IntervalSample {
            rx_packets: 900,
            lost: 100,
            ..sample(0.0, 0.5)
        };
        t.directions[0].intervals = vec![
            IntervalPair {
                sender: Some(tx),
                receiver: Some(rx),
                dut: None,
                omitted: false,
            },
            IntervalPair {
                sender: None,
                receiver: Some(sample(0.5, 0.7)),
                dut: None,
                omitted: false,
            },
        ];
        let f = intervals(&t, &t.directions[0]);
        assert_eq!(f.len(), 2);
        assert!(f[0].complete && !f[1].complete);
        assert_eq!(f[0].tx_pps, Some(2000.0));
        assert_eq!(f[0].target_pps, Some(4000.0));
        assert_eq!(f[0].rx_pps, Some(1800.0));
        assert_eq!(f[0].rx_l2_bps, Some(1800.0 * 64.0 * 8.0));
        assert_eq!(f[0].rx_l1_bps, Some(1800.0 * 84.0 * 8.0));
        assert_eq!(f[0].loss_ratio, Some(0.1));
        assert_eq!(f[1].loss_ratio, None, "nothing expected, no ratio");
        assert_eq!(f[1].t_start, 0.5);
    }

    #[test]
    fn tcp_interval_goodput_and_retransmits() {
        let mut t = crate::report::testdata::tcp_test("tcp 1 stream");
        let stream = |rtt| StreamSample {
            sender: true,
            retransmits: 3,
            rtt_us: rtt,
            ..Default::default()
        };
        let tx = IntervalSample {
            tx_bytes: 1_000_000,
            streams: vec![stream(100), stream(300)],
            ..sample(0.0, 2.0)
        };
        t.directions[0].intervals = vec![IntervalPair {
            sender: Some(tx),
            receiver: Some(IntervalSample {
                rx_bytes: 500_000,
                ..sample(0.0, 1.0)
            }),
            dut: None,
            omitted: false,
        }];
        let f = &intervals(&t, &t.directions[0])[0];
        assert_eq!(f.tx_l2_bps, Some(4e6));
        assert_eq!(f.rx_l2_bps, Some(4e6));
        assert_eq!(f.retransmits, Some(6));
        assert_eq!(f.rtt_us, Some(200.0));
        assert_eq!(f.tx_pps, None);
    }

    #[test]
    fn labels() {
        assert_eq!(dir_label("gen_to_sink"), "gen→sink");
        let t = crate::report::testdata::udp_test("x", 1518);
        assert_eq!(frame_label(&t), "1518 B");
        assert_eq!(flows_label(&t), "16 var2");
        let t = crate::report::testdata::tcp_test("y");
        assert_eq!(frame_label(&t), "-");
        assert_eq!(flows_label(&t), "4 streams");
    }
}
