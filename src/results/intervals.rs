//! A test's interval samples: sender and receiver paired by index, and
//! those in the `--omit` seconds marked.

use crate::proto::IntervalSample;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct IntervalPair {
    /// Inside the omitted seconds (`--omit`): left out of the totals.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omitted: bool,
    pub sender: Option<IntervalSample>,
    pub receiver: Option<IntervalSample>,
    /// The watched DUT's CPU time per packet over the sender's interval
    /// (all its traffic: both directions of a bidirectional test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut: Option<crate::host::efficiency::DutStep>,
}

/// Pairs sender and receiver samples by index. The receiver's clock starts
/// at its first packet and it ends after a drain, so either side may have a
/// sample more than the other; none is dropped.
pub fn pair_intervals(tx: Vec<IntervalSample>, rx: Vec<IntervalSample>) -> Vec<IntervalPair> {
    let n = tx.len().max(rx.len());
    let (mut tx, mut rx) = (tx.into_iter(), rx.into_iter());
    (0..n)
        .map(|_| IntervalPair {
            omitted: false,
            sender: tx.next(),
            receiver: rx.next(),
            dut: None,
        })
        .collect()
}

/// Whether a sample lies in the first `omit_s` seconds (`--omit`), by its
/// middle, as the interval lines place it.
pub fn in_omit(s: &IntervalSample, omit_s: f64) -> bool {
    omit_s > 0.0 && (s.t_start + s.t_end) / 2.0 < omit_s
}

/// Marks the pairs whose sender's (else receiver's) sample lies in the
/// first `omit_s` seconds.
pub fn mark_omitted(pairs: &mut [IntervalPair], omit_s: f64) {
    for p in pairs {
        p.omitted = p
            .sender
            .as_ref()
            .or(p.receiver.as_ref())
            .is_some_and(|s| in_omit(s, omit_s));
    }
}
