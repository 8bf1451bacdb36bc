//! One-way latency counted in hdrhistogram's own layout, so a counter array
//! filled where no library runs (the XDP sink, `sink.bpf.c`) merges into an
//! [`hdrhistogram::Histogram`] without losing anything.
//!
//! The layout is the histogram's for a lowest value of 1 ns and 2
//! significant digits: values below 2^(SUB_BITS+1) ns each have a slot;
//! every power of two above is split into 2^SUB_BITS equal sub-buckets, so
//! a slot is never wider than 1/128 (0.8 %) of the values in it. The same
//! numbers are `LR_SINK_HDR_*` in `src/engine/xdp/linerate.h` (a test of
//! the sink holds them equal). A slot index is hdrhistogram's counts
//! index; each slot is recorded at its lowest value into a histogram of
//! the same precision, so every count lands in the slot it came from.

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two: 2^SUB_BITS.
pub const SUB_BITS: u32 = 7;
/// Slots up to [`MAX_NS`].
pub const SLOTS: usize = 3840;
/// The highest value with a slot of its own (2^36 - 1 ns, 68.7 s); later
/// frames count in the last slot.
pub const MAX_NS: u64 = (1 << 36) - 1;
/// The histogram's precision in significant digits (hdrhistogram's
/// `sigfig` that gives this layout).
pub const SIGFIG: u8 = 2;

/// The slot of a latency of `ns` nanoseconds (as `hdr_slot` in sink.bpf.c).
pub fn slot(ns: u64) -> usize {
    let ns = ns.min(MAX_NS);
    let floor = (1u64 << (SUB_BITS + 1)) - 1;
    let b = (63 - (ns | floor).leading_zeros()) - SUB_BITS;
    ((b << SUB_BITS) as usize) + (ns >> b) as usize
}

/// The lowest value in slot `i` (`i` below [`SLOTS`]).
pub fn slot_low(i: usize) -> u64 {
    let half = 1usize << SUB_BITS;
    if i < 2 * half {
        return i as u64;
    }
    let b = i / half - 1;
    ((i - b * half) as u64) << b
}

/// An empty histogram of the sink's layout.
pub fn histogram() -> Histogram<u64> {
    // Constant bounds that hdrhistogram accepts (low >= 1, high >= 2 low,
    // sigfig <= 5): the unit test below builds it.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("1 ns to 2^36 ns at 2 digits is valid")
}

/// A slot index beyond the layout: a peer's document, not the sink's.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("latency slot {0} is beyond the {SLOTS} slots of the HDR layout")]
pub struct BadSlot(pub u32);

/// Merges sparse `(slot, frames)` counts into a histogram.
pub fn merge(counts: &[(u32, u64)]) -> Result<Histogram<u64>, BadSlot> {
    let mut h = histogram();
    for &(i, n) in counts {
        if i as usize >= SLOTS {
            return Err(BadSlot(i));
        }
        if n > 0 {
            // The value is in the histogram's range by construction.
            h.record_n(slot_low(i as usize), n)
                .map_err(|_| BadSlot(i))?;
        }
    }
    Ok(h)
}

/// A dense counter array (index: slot) as sparse `(slot, frames)` pairs.
pub fn sparse(dense: &[u64]) -> Vec<(u32, u64)> {
    dense
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| (i as u32, n))
        .collect()
}

/// One direction's one-way latency: how many frames, and the percentiles
/// of their latency, ns. Each figure is the highest value of the slot the
/// percentile falls in (hdrhistogram's convention), so it is at most
/// 0.8 % above the frames' own value (`min_ns`: the slot's lowest).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub struct OwdSummary {
    pub frames: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
}

impl OwdSummary {
    /// The figures of `h`; `None` when it holds no frame.
    pub fn of(h: &Histogram<u64>) -> Option<OwdSummary> {
        if h.is_empty() {
            return None;
        }
        let q = |q: f64| h.value_at_quantile(q);
        Some(OwdSummary {
            frames: h.len(),
            min_ns: h.min(),
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p99_9_ns: q(0.999),
            max_ns: h.max(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_hdrhistograms_own_counts_index() {
        // Every slot's lowest value maps back to it, slots are contiguous,
        // and hdrhistogram agrees on which values are equivalent.
        let h = histogram();
        for i in 0..SLOTS {
            let lo = slot_low(i);
            assert_eq!(slot(lo), i, "slot {i} low {lo}");
            if i + 1 < SLOTS {
                let next = slot_low(i + 1);
                assert_eq!(slot(next - 1), i);
                assert_eq!(h.lowest_equivalent(next - 1), lo, "slot {i}");
                assert_eq!(h.highest_equivalent(lo), next - 1, "slot {i}");
            }
        }
        assert_eq!(slot(MAX_NS), SLOTS - 1);
        assert_eq!(slot(u64::MAX), SLOTS - 1);
        assert_eq!(slot(0), 0);
        assert_eq!(slot(255), 255);
        assert_eq!(slot(256), 256);
        assert_eq!(slot(257), 256);
        assert_eq!(slot(258), 257);
    }

    #[test]
    fn a_slot_is_never_wider_than_its_precision() {
        for i in 1..SLOTS - 1 {
            let (lo, hi) = (slot_low(i), slot_low(i + 1));
            assert!(((hi - lo) as f64) <= (lo as f64) / 128.0 + 1.0, "slot {i}");
        }
    }

    #[test]
    fn merged_counts_keep_every_frame_and_its_slot() {
        // 900 frames at 10 µs, 90 at 100 µs, 9 at 1 ms, 1 at 10 ms.
        let values = [
            (10_000u64, 900u64),
            (100_000, 90),
            (1_000_000, 9),
            (10_000_000, 1),
        ];
        let mut dense = vec![0u64; SLOTS];
        let mut exact = histogram();
        for (v, n) in values {
            dense[slot(v)] += n;
            exact.record_n(v, n).unwrap();
        }
        let h = merge(&sparse(&dense)).unwrap();
        assert_eq!(h.len(), 1000);
        let s = OwdSummary::of(&h).unwrap();
        let e = OwdSummary::of(&exact).unwrap();
        // The same slots, so the same figures as recording each value.
        assert_eq!(s.p50_ns, e.p50_ns);
        assert_eq!(s.p99_ns, e.p99_ns);
        assert_eq!(s.p99_9_ns, e.p99_9_ns);
        assert_eq!(s.max_ns, e.max_ns);
        assert_eq!(slot(s.min_ns), slot(10_000));
        for (fig, v) in [(s.p50_ns, 10_000), (s.p90_ns, 10_000), (s.p99_ns, 100_000)] {
            assert!(
                fig >= v && (fig - v) as f64 <= v as f64 / 128.0,
                "{fig} vs {v}"
            );
        }
        assert_eq!(slot(s.p99_9_ns), slot(1_000_000));
        assert_eq!(slot(s.max_ns), slot(10_000_000));
        assert_eq!(merge(&[]).map(|h| OwdSummary::of(&h)), Ok(None));
    }

    #[test]
    fn a_slot_beyond_the_layout_is_refused() {
        assert_eq!(
            merge(&[(SLOTS as u32, 1)]).err(),
            Some(BadSlot(SLOTS as u32))
        );
        assert!(merge(&[((SLOTS - 1) as u32, 3)]).is_ok());
    }
}
