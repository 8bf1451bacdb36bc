//! Where a test's interval samples wait for `results.json`: a [`Spill`]
//! file, so a controller's memory does not grow with the length of a run.
//! What the run needs while it goes stays in memory and is bounded: per
//! job, the running sum of its samples (the summary of a job that never
//! finished). The samples come back in order, per job, when the test
//! assembles its result.

use crate::model::spill::Spill;
use crate::proto::{EndpointSummary, IntervalSample};
use std::collections::HashMap;
use std::path::Path;

/// The interval samples of one test's jobs.
pub(super) struct IntervalStore {
    /// Per job: how many samples it reported and their running sum.
    jobs: HashMap<u32, (usize, EndpointSummary)>,
    samples: Spill<(u32, IntervalSample)>,
}

impl IntervalStore {
    /// A store whose scratch file lives in `dir` (the run's results
    /// directory), or in the temp directory without one.
    pub fn new(dir: Option<&Path>) -> Self {
        IntervalStore {
            jobs: HashMap::new(),
            samples: Spill::new("interval samples", dir),
        }
    }

    /// Takes one sample of job `id`.
    pub fn push(&mut self, id: u32, sample: IntervalSample) {
        let (count, sum) = self.jobs.entry(id).or_default();
        *count += 1;
        add_sample(sum, &sample);
        self.samples.push((id, sample));
    }

    /// The sum of job `id`'s samples so far (see [`add_sample`]).
    pub fn running_summary(&self, id: u32) -> Option<&EndpointSummary> {
        self.jobs.get(&id).map(|(_, sum)| sum)
    }

    /// Samples held in memory now (not in the scratch file).
    #[cfg(test)]
    pub fn held_in_memory(&self) -> usize {
        self.samples.held_in_memory()
    }

    /// Job `id`'s samples in the order they came; the store forgets the job.
    pub fn take(&mut self, id: u32) -> Vec<IntervalSample> {
        let Some((count, _)) = self.jobs.remove(&id) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(count);
        self.samples.for_each(|(job, s)| {
            if job == id {
                out.push(s);
            }
        });
        self.samples.retain_pending(|(job, _)| *job != id);
        out
    }
}

/// Adds one sample to a running summary: counters summed, elapsed time up
/// to the latest interval, TCP streams' bytes and retransmits summed (cwnd
/// and RTT as last seen). Per-flow counters stay empty: intervals carry none.
pub(super) fn add_sample(s: &mut EndpointSummary, i: &IntervalSample) {
    s.elapsed_s = s.elapsed_s.max(i.t_end);
    s.tx_packets += i.tx_packets;
    s.tx_bytes += i.tx_bytes;
    s.tx_errors += i.tx_errors;
    s.tx_target += i.tx_target;
    s.rx_packets += i.rx_packets;
    s.rx_bytes += i.rx_bytes;
    s.lost += i.lost;
    s.reordered += i.reordered;
    s.duplicates += i.duplicates;
    for st in &i.streams {
        match s
            .streams
            .iter_mut()
            .find(|x| x.id == st.id && x.sender == st.sender)
        {
            Some(x) => {
                x.bytes += st.bytes;
                x.retransmits += st.retransmits;
                x.cwnd = st.cwnd;
                x.rtt_us = st.rtt_us;
            }
            None => s.streams.push(st.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::StreamSample;
    use crate::results::{pair_intervals, IntervalPair};

    /// A varied sample: every field set, streams on some, links down on
    /// others, so a lossy round trip through the file would show.
    fn sample(k: u64, receiver: bool) -> IntervalSample {
        let t = k as f64;
        IntervalSample {
            t_start: t,
            t_end: t + 1.0,
            tx_packets: if receiver { 0 } else { 1000 + k },
            tx_bytes: if receiver { 0 } else { 64_000 + k * 7 },
            tx_errors: k % 3,
            tx_target: 1000,
            rx_packets: if receiver { 990 + k % 10 } else { 0 },
            rx_bytes: if receiver { 63_360 + k } else { 0 },
            lost: if receiver { 10 - k % 10 } else { 0 },
            reordered: k % 2,
            duplicates: k % 5,
            streams: (0..(k % 3) as u16)
                .map(|id| StreamSample {
                    id,
                    sender: !receiver,
                    bytes: 1 << 20 | k,
                    retransmits: k % 4,
                    cwnd: 10 + k as u32,
                    rtt_us: 100 + id as u32,
                })
                .collect(),
            links_down: if k % 7 == 3 {
                vec!["veth0".into()]
            } else {
                vec![]
            },
            connections: (k % 5) as u32,
            requests: k % 11,
        }
    }

    #[test]
    fn results_from_the_spilled_intervals_equal_the_in_memory_ones() {
        // The in-memory path as it was: every sample in a Vec per job.
        let (tx, rx): (Vec<_>, Vec<_>) = (0..300)
            .map(|k| (sample(k, false), sample(k, true)))
            .unzip();
        let rx = rx[..298].to_vec(); // a side may have fewer samples
        let in_memory: Vec<IntervalPair> = pair_intervals(tx.clone(), rx.clone());
        // The streamed path: interleaved as agents report, two jobs more.
        let mut store = IntervalStore::new(None);
        for (k, t) in tx.iter().enumerate() {
            store.push(1, t.clone());
            store.push(9, sample(k as u64, false));
            if let Some(r) = rx.get(k) {
                store.push(2, r.clone());
            }
        }
        // The running summary is the old summary of every interval.
        let mut expect = EndpointSummary::default();
        tx.iter().for_each(|s| add_sample(&mut expect, s));
        assert_eq!(store.running_summary(1), Some(&expect));
        assert!(expect.tx_packets > 0 && !expect.streams.is_empty());
        let streamed = pair_intervals(store.take(1), store.take(2));
        // As results.json has it: the same document, byte for byte.
        assert_eq!(
            serde_json::to_string(&streamed).unwrap(),
            serde_json::to_string(&in_memory).unwrap()
        );
        // A taken job is gone; the other job's samples are all still there.
        assert!(store.take(1).is_empty());
        assert_eq!(store.take(9).len(), 300);
    }

    #[test]
    fn the_store_holds_a_bounded_number_of_samples_in_memory() {
        let mut store = IntervalStore::new(None);
        let mut most = 0;
        for k in 0..100_000u64 {
            store.push((k % 4) as u32, sample(k % 1000, k % 2 == 1));
            most = most.max(store.held_in_memory());
        }
        // In memory: one batch at most and a running sum per job, whose
        // streams are as many as a job has (2 here), not per interval.
        assert!(most <= crate::model::spill::BATCH, "{most} samples held");
        for id in 0..4 {
            let sum = store.running_summary(id).unwrap();
            assert!(sum.streams.len() <= 2, "{} streams", sum.streams.len());
        }
        // Nothing was dropped: every sample comes back, in order.
        let back = store.take(3);
        assert_eq!(back.len(), 25_000);
        for (j, s) in back.iter().enumerate() {
            assert_eq!(*s, sample((4 * j as u64 + 3) % 1000, true), "sample {j}");
        }
    }
}
