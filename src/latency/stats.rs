//! Statistics of a probe run, computed by the controller from the client's
//! samples: per phase, HDR histograms of RTT, one-way delay each way and
//! IPDV, loss per direction, reordering and duplicates. Pure logic: no I/O,
//! no clocks of its own.

use crate::proto::probe::ProbeSample;
use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Percentiles of one quantity, in seconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, JsonSchema)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    pub mean: f64,
    pub min: f64,
    /// Values recorded.
    pub count: u64,
}

/// An HDR histogram of nanoseconds (3 significant digits).
pub fn histogram() -> Histogram<u64> {
    // Auto-resizing: never fails to record, whatever the delay. `new` only
    // fails for more than 5 significant digits.
    Histogram::<u64>::new(3).expect("3 significant digits is a valid precision")
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let s = |ns: u64| ns as f64 / 1e9;
        Some(Percentiles {
            p50: s(h.value_at_quantile(0.5)),
            p90: s(h.value_at_quantile(0.9)),
            p99: s(h.value_at_quantile(0.99)),
            p99_9: s(h.value_at_quantile(0.999)),
            max: s(h.max()),
            mean: h.mean() / 1e9,
            min: s(h.min()),
            count: h.len(),
        })
    }
}

/// A phase's time span on the client's clock, ns since the Unix epoch.
#[derive(Debug, Clone)]
pub struct PhaseSpan {
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One phase of a latency run (`idle`, `loaded`, `after`).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct LatencyPhase {
    pub name: String,
    /// Seconds since the first probe.
    pub start_s: f64,
    pub end_s: f64,
    pub sent: u64,
    pub answered: u64,
    /// Round trip, the responder's own turnaround time taken out.
    pub rtt_s: Option<Percentiles>,
    /// One-way delay client → responder (see `LatencyResult::clock`).
    pub forward_s: Option<Percentiles>,
    /// One-way delay responder → client.
    pub reverse_s: Option<Percentiles>,
    /// |IPDV| of the forward one-way delay between consecutive answered
    /// probes (RFC 3393, RFC 5481).
    pub ipdv_s: Option<Percentiles>,
    /// Probes the responder never received.
    pub lost_forward: u64,
    /// Probes the responder answered whose reply never came back.
    pub lost_reverse: u64,
    pub loss_forward_ratio: f64,
    pub loss_reverse_ratio: f64,
    /// Replies that came after a later probe's reply.
    pub reordered: u64,
    /// Extra copies of replies.
    pub duplicates: u64,
    /// RTT distribution: (seconds, fraction of answered probes at or below).
    pub rtt_cdf: Vec<[f64; 2]>,
}

/// How one-way delays were corrected for the two ends' clocks.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct OneWayClock {
    /// Client and responder read the same clock (one host's namespaces):
    /// one-way delays are exact.
    pub same_clock: bool,
    /// Responder clock minus client clock, as the controller measured it
    /// over the control channel (0 on the same clock).
    pub offset_s: f64,
    /// Bound of the correction's error: half of each clock exchange's round
    /// trip, summed (0 on the same clock).
    pub error_s: f64,
}

/// A probe's RTT at a time; `None` when it was lost.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, JsonSchema)]
pub struct SeriesPoint {
    pub t_s: f64,
    pub rtt_s: Option<f64>,
}

/// The responder's own counts for the session.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, JsonSchema)]
pub struct ResponderCounts {
    pub accepted: u64,
    pub replied: u64,
    /// Datagrams refused: not a probe, wrong token, wrong address, late.
    pub refused: u64,
    /// Probes over the session's rate cap (and failed sends).
    pub rate_capped: u64,
}

/// Latency of one test: probes before, during and after its load.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct LatencyResult {
    /// The responder's address and port.
    pub target: String,
    pub interval_s: f64,
    /// UDP payload bytes of each probe.
    pub payload_bytes: u16,
    /// What loaded the path in the `loaded` phase (tcp, udp).
    pub load: String,
    pub clock: OneWayClock,
    pub phases: Vec<LatencyPhase>,
    /// Loaded p50 RTT minus idle p50 RTT: what the load costs in latency.
    pub added_latency_s: Option<f64>,
    /// Loaded p99 RTT minus idle p99 RTT.
    pub added_latency_p99_s: Option<f64>,
    /// RTT over time (at most [`MAX_SERIES`] points; per point the worst
    /// probe of its slot).
    pub series: Vec<SeriesPoint>,
    pub responder: ResponderCounts,
}

pub const MAX_SERIES: usize = 1500;

/// Everything the analysis needs besides the samples.
pub struct Inputs<'a> {
    pub samples: &'a [ProbeSample],
    /// Responder clock minus client clock, ns (0 on the same clock).
    pub offset_ns: i64,
    pub phases: &'a [PhaseSpan],
    /// The responder's accepted count at the session's end, when known.
    pub final_count: Option<u32>,
}

#[derive(Default)]
struct Acc {
    rtt: Option<Histogram<u64>>,
    fwd: Option<Histogram<u64>>,
    rev: Option<Histogram<u64>>,
    ipdv: Option<Histogram<u64>>,
    sent: u64,
    answered: u64,
    lost_fwd: u64,
    lost_rev: u64,
    reordered: u64,
    duplicates: u64,
    last_fwd: Option<i64>,
}

fn rec(h: &mut Option<Histogram<u64>>, ns: i64) {
    let h = h.get_or_insert_with(histogram);
    // One-way delays may come out negative within the clock error: they
    // count as the smallest value rather than vanish.
    let _ = h.record(ns.max(1) as u64);
}

/// Per-probe delays in ns: (rtt, forward, reverse).
pub fn delays(s: &ProbeSample, offset_ns: i64) -> Option<(i64, i64, i64)> {
    if !s.answered() {
        return None;
    }
    let (c_tx, c_rx, r_rx, r_tx) = (s.1 as i64, s.2 as i64, s.3 as i64, s.4 as i64);
    let turnaround = (r_tx - r_rx).max(0);
    let rtt = (c_rx - c_tx - turnaround).max(0);
    let fwd = (r_rx - offset_ns) - c_tx;
    let rev = c_rx - (r_tx - offset_ns);
    Some((rtt, fwd, rev))
}

/// Which lost probes were lost on the way there: for each unanswered
/// probe, true when forward (the responder never counted it). Between two
/// answered probes the responder's count says how many of the gap it got;
/// which ones is unknown, so the first that many count as reverse losses.
pub fn loss_directions(samples: &[ProbeSample], final_count: Option<u32>) -> Vec<Option<bool>> {
    let mut out = vec![None; samples.len()];
    let mut prev: Option<(usize, u32)> = None;
    let mark = |from: usize, to: usize, got: u64, out: &mut Vec<Option<bool>>| {
        let mut got = got;
        for o in out.iter_mut().take(to).skip(from) {
            *o = Some(got == 0);
            got = got.saturating_sub(1);
        }
    };
    for (i, s) in samples.iter().enumerate() {
        if !s.answered() {
            continue;
        }
        let (from, base) = match prev {
            Some((p, c)) => (p + 1, c),
            None => (0, 0),
        };
        let missing = (i - from) as u64;
        let got = u64::from(s.5.saturating_sub(base).saturating_sub(1)).min(missing);
        mark(from, i, got, &mut out);
        prev = Some((i, s.5));
    }
    let (from, base) = match prev {
        Some((p, c)) => (p + 1, c),
        None => (0, 0),
    };
    let missing = (samples.len() - from) as u64;
    let got = u64::from(final_count.unwrap_or(base).saturating_sub(base)).min(missing);
    mark(from, samples.len(), got, &mut out);
    out
}

/// Cuts the samples into phases and computes every statistic.
pub fn analyze(inp: &Inputs) -> (Vec<LatencyPhase>, Vec<SeriesPoint>) {
    let t0 = inp.samples.first().map(|s| s.1).unwrap_or(0);
    let secs = |ns: u64| ns.saturating_sub(t0) as f64 / 1e9;
    let dirs = loss_directions(inp.samples, inp.final_count);
    let mut accs: Vec<Acc> = inp.phases.iter().map(|_| Acc::default()).collect();
    for (s, dir) in inp.samples.iter().zip(&dirs) {
        let Some(pi) = inp
            .phases
            .iter()
            .position(|p| s.1 >= p.start_ns && s.1 < p.end_ns)
        else {
            continue;
        };
        let a = &mut accs[pi];
        a.sent += 1;
        a.duplicates += u64::from(s.duplicates());
        match delays(s, inp.offset_ns) {
            Some((rtt, fwd, rev)) => {
                a.answered += 1;
                if s.reordered() {
                    a.reordered += 1;
                }
                rec(&mut a.rtt, rtt);
                rec(&mut a.fwd, fwd);
                rec(&mut a.rev, rev);
                if let Some(l) = a.last_fwd {
                    rec(&mut a.ipdv, (fwd - l).abs());
                }
                a.last_fwd = Some(fwd);
            }
            None => match dir {
                Some(false) => a.lost_rev += 1,
                _ => a.lost_fwd += 1,
            },
        }
    }
    let phases = inp
        .phases
        .iter()
        .zip(accs)
        .map(|(p, a)| {
            let ratio = |n: u64| {
                if a.sent > 0 {
                    n as f64 / a.sent as f64
                } else {
                    0.0
                }
            };
            LatencyPhase {
                name: p.name.clone(),
                start_s: secs(p.start_ns),
                end_s: secs(p.end_ns),
                sent: a.sent,
                answered: a.answered,
                rtt_s: a.rtt.as_ref().and_then(Percentiles::of),
                forward_s: a.fwd.as_ref().and_then(Percentiles::of),
                reverse_s: a.rev.as_ref().and_then(Percentiles::of),
                ipdv_s: a.ipdv.as_ref().and_then(Percentiles::of),
                lost_forward: a.lost_fwd,
                lost_reverse: a.lost_rev,
                loss_forward_ratio: ratio(a.lost_fwd),
                loss_reverse_ratio: ratio(a.lost_rev),
                reordered: a.reordered,
                duplicates: a.duplicates,
                rtt_cdf: a.rtt.as_ref().map(cdf).unwrap_or_default(),
            }
        })
        .collect();
    (phases, series(inp.samples, inp.offset_ns, t0))
}

/// About 45 points of the RTT distribution.
pub fn cdf(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut qs: Vec<f64> = (0..=40).map(|i| f64::from(i) / 40.0).collect();
    qs.extend([0.99, 0.995, 0.999]);
    qs.sort_by(f64::total_cmp);
    qs.iter()
        .map(|&q| [h.value_at_quantile(q) as f64 / 1e9, q])
        .collect()
}

/// RTT over time, at most [`MAX_SERIES`] points (worst of each slot).
fn series(samples: &[ProbeSample], offset_ns: i64, t0: u64) -> Vec<SeriesPoint> {
    let per = samples.len().div_ceil(MAX_SERIES).max(1);
    samples
        .chunks(per)
        .map(|c| {
            let rtt = c
                .iter()
                .filter_map(|s| delays(s, offset_ns).map(|d| d.0))
                .max()
                .map(|ns| ns as f64 / 1e9);
            SeriesPoint {
                t_s: c[0].1.saturating_sub(t0) as f64 / 1e9,
                rtt_s: rtt,
            }
        })
        .collect()
}

/// Loaded p50 minus idle p50 (and the same for p99), seconds.
pub fn added_latency(phases: &[LatencyPhase]) -> (Option<f64>, Option<f64>) {
    let get = |n: &str| phases.iter().find(|p| p.name == n).and_then(|p| p.rtt_s);
    match (get("idle"), get("loaded")) {
        (Some(i), Some(l)) => (Some(l.p50 - i.p50), Some(l.p99 - i.p99)),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe every 10 ms: client clock = t, responder clock = t + off.
    fn sample(seq: u32, rtt_ms: u64, off: i64, count: u32) -> ProbeSample {
        let tx = 1_000_000_000 + u64::from(seq) * 10_000_000;
        let fwd = rtt_ms * 1_000_000 / 2;
        let r_rx = (tx + fwd) as i64 + off;
        ProbeSample(
            seq,
            tx,
            tx + rtt_ms * 1_000_000 + 5,
            r_rx as u64,
            r_rx as u64 + 5,
            count,
            0,
        )
    }

    #[test]
    fn phases_percentiles_and_one_way() {
        let off = 3_000_000_000i64;
        let mut v = Vec::new();
        let mut count = 0;
        for seq in 0..300u32 {
            count += 1;
            let rtt = if (100..200).contains(&seq) { 50 } else { 2 };
            v.push(sample(seq, rtt, off, count));
        }
        let base = 1_000_000_000u64;
        let span = |n: &str, a: u64, b: u64| PhaseSpan {
            name: n.into(),
            start_ns: base + a * 10_000_000,
            end_ns: base + b * 10_000_000,
        };
        let phases = [
            span("idle", 0, 100),
            span("loaded", 100, 200),
            span("after", 200, 300),
        ];
        let (p, series) = analyze(&Inputs {
            samples: &v,
            offset_ns: off,
            phases: &phases,
            final_count: Some(count),
        });
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].sent, 100);
        let idle = p[0].rtt_s.unwrap();
        let loaded = p[1].rtt_s.unwrap();
        assert!((idle.p50 - 0.002).abs() < 1e-5, "{idle:?}");
        assert!((loaded.p50 - 0.050).abs() < 1e-4, "{loaded:?}");
        let f = p[1].forward_s.unwrap();
        assert!((f.p50 - 0.025).abs() < 1e-4, "offset corrected: {f:?}");
        let (added, _) = added_latency(&p);
        assert!((added.unwrap() - 0.048).abs() < 1e-4);
        assert_eq!(series.len(), 300);
        assert!(p[1].ipdv_s.unwrap().p50 < 1e-6);
    }

    #[test]
    fn forward_and_reverse_loss_told_apart() {
        // seq 1 lost forward (count does not move), seq 3 lost on the way
        // back (count moves by 2 at seq 4), seq 5 lost at the tail forward.
        let mut v = vec![sample(0, 1, 0, 1)];
        v.push(ProbeSample(1, 1, 0, 0, 0, 0, 0));
        v.push(sample(2, 1, 0, 2));
        v.push(ProbeSample(3, 1, 0, 0, 0, 0, 0));
        v.push(sample(4, 1, 0, 4));
        v.push(ProbeSample(5, 1, 0, 0, 0, 0, 0));
        let d = loss_directions(&v, Some(4));
        assert_eq!(
            d,
            vec![None, Some(true), None, Some(false), None, Some(true)]
        );
        let d = loss_directions(&v, Some(5));
        assert_eq!(d[5], Some(false), "the responder got the last one");
    }
}
