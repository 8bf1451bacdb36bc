//! Multi-core UDP jobs: one job, several worker threads. Each worker owns a
//! share of the flows (senders) or one SO_REUSEPORT socket (receivers) and
//! adds to its own [`Counters`]; the job's thread is the reporter that turns
//! the sum of all workers' counters into interval samples. Workers never
//! report intervals themselves, so intervals of many threads cannot drift
//! apart, and the last interval is what the final counters say minus what was
//! already reported: intervals add up exactly to the job's totals.

use crate::proto::{IntervalSample, ThreadFigures};
use crate::sys;
use std::sync::atomic::{AtomicU64, Ordering};

/// What one worker has counted so far. Aligned to its own cache lines so
/// workers on different cores do not slow each other down.
#[derive(Default, Debug)]
#[repr(align(128))]
pub struct Counters {
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub tx_errors: AtomicU64,
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub reordered: AtomicU64,
    pub duplicates: AtomicU64,
    /// Sequence numbers below the highest seen that never arrived (a level,
    /// not a count: late packets lower it).
    pub missing: AtomicU64,
    pub foreign: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        if n > 0 {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The sum of all workers' counters at one instant.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub missing: u64,
    pub foreign: u64,
}

impl Totals {
    pub fn of<'a>(workers: impl IntoIterator<Item = &'a Counters>) -> Totals {
        let mut t = Totals::default();
        for c in workers {
            let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
            t.tx_packets += r(&c.tx_packets);
            t.tx_bytes += r(&c.tx_bytes);
            t.tx_errors += r(&c.tx_errors);
            t.rx_packets += r(&c.rx_packets);
            t.rx_bytes += r(&c.rx_bytes);
            t.reordered += r(&c.reordered);
            t.duplicates += r(&c.duplicates);
            t.missing += r(&c.missing);
            t.foreign += r(&c.foreign);
        }
        t
    }
}

/// Turns successive [`Totals`] into interval samples and keeps what was
/// reported, so the sum of the samples is always the latest totals.
#[derive(Default, Debug)]
pub struct Intervals {
    reported: Totals,
    /// Loss reported so far: the growth of `missing`, never negative (a late
    /// packet that fills an earlier gap is carried until new loss absorbs it).
    lost_reported: u64,
    /// Sum of every sample handed out.
    pub total: IntervalSample,
}

impl Intervals {
    /// The sample of the interval (a, b] that ends with totals `now`.
    pub fn sample(&mut self, now: Totals, a: f64, b: f64, tx_target: u64) -> IntervalSample {
        let d = |new: u64, old: u64| new.saturating_sub(old);
        let lost = now.missing.saturating_sub(self.lost_reported);
        self.lost_reported = self.lost_reported.max(now.missing);
        let s = IntervalSample {
            t_start: a,
            t_end: b,
            tx_packets: d(now.tx_packets, self.reported.tx_packets),
            tx_bytes: d(now.tx_bytes, self.reported.tx_bytes),
            tx_errors: d(now.tx_errors, self.reported.tx_errors),
            tx_target,
            rx_packets: d(now.rx_packets, self.reported.rx_packets),
            rx_bytes: d(now.rx_bytes, self.reported.rx_bytes),
            lost,
            reordered: d(now.reordered, self.reported.reordered),
            duplicates: d(now.duplicates, self.reported.duplicates),
            ..Default::default()
        };
        self.reported = now;
        self.add(&s);
        s
    }

    /// The last sample: its loss is whatever makes the samples' loss add up
    /// to `lost_total` (tail loss the sequence numbers could not see, minus
    /// loss taken back by late packets).
    pub fn last(
        &mut self,
        now: Totals,
        a: f64,
        b: f64,
        tx_target: u64,
        lost_total: u64,
    ) -> IntervalSample {
        let mut s = self.sample(now, a, b, tx_target);
        let before = self.total.lost - s.lost;
        self.total.lost = before;
        s.lost = lost_total.saturating_sub(before);
        self.total.lost += s.lost;
        s
    }

    fn add(&mut self, s: &IntervalSample) {
        let t = &mut self.total;
        t.tx_packets += s.tx_packets;
        t.tx_bytes += s.tx_bytes;
        t.tx_errors += s.tx_errors;
        t.tx_target += s.tx_target;
        t.rx_packets += s.rx_packets;
        t.rx_bytes += s.rx_bytes;
        t.lost += s.lost;
        t.reordered += s.reordered;
        t.duplicates += s.duplicates;
    }
}

/// Worker threads a job runs when asked for `asked` (0 = choose): one per
/// CPU given; otherwise half the CPUs this agent may use (the other half
/// receive and forward), never more than `flows`, at least one.
pub fn thread_count(asked: u16, cpus: &[usize], flows: usize) -> usize {
    let n = if asked > 0 {
        usize::from(asked)
    } else if !cpus.is_empty() {
        cpus.len()
    } else {
        sys::allowed_cpus().map(|c| c.len() / 2).unwrap_or(1)
    };
    n.min(flows.max(1)).max(1)
}

/// The core worker `i` of `n` is pinned to: the CPUs given in turn; with
/// none given and more than one worker, this agent's allowed CPUs in turn
/// (one worker alone is left to the scheduler, as before threads existed).
pub fn worker_cpu(i: usize, n: usize, cpus: &[usize]) -> Option<usize> {
    if !cpus.is_empty() {
        return Some(cpus[i % cpus.len()]);
    }
    if n <= 1 {
        return None;
    }
    let allowed = sys::allowed_cpus().ok()?;
    if allowed.is_empty() {
        None
    } else {
        Some(allowed[i % allowed.len()])
    }
}

/// Splits `n` items over `k` shares round-robin: item i goes to share i % k.
pub fn shares(n: usize, k: usize) -> Vec<Vec<usize>> {
    let k = k.clamp(1, n.max(1));
    let mut out = vec![Vec::new(); k];
    for i in 0..n {
        out[i % k].push(i);
    }
    out
}

/// One worker's own figures for results.json.
pub fn figures(
    thread: usize,
    cpu: Option<usize>,
    flows: Vec<u16>,
    c: &Counters,
    cpu_s: f64,
) -> ThreadFigures {
    let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
    ThreadFigures {
        thread: thread as u16,
        cpu,
        flows,
        cpu_s,
        tx_packets: r(&c.tx_packets),
        tx_bytes: r(&c.tx_bytes),
        tx_errors: r(&c.tx_errors),
        rx_packets: r(&c.rx_packets),
        rx_bytes: r(&c.rx_bytes),
        reordered: r(&c.reordered),
        duplicates: r(&c.duplicates),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_round_robin_and_never_empty() {
        assert_eq!(shares(5, 2), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(shares(2, 8), vec![vec![0], vec![1]]);
        assert_eq!(shares(0, 3), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn thread_count_rules() {
        assert_eq!(thread_count(4, &[], 2), 2, "never more threads than flows");
        assert_eq!(thread_count(0, &[3, 5, 7], 10), 3, "one per CPU given");
        assert_eq!(thread_count(3, &[1], 10), 3, "asked wins over CPUs");
        assert!(thread_count(0, &[], 64) >= 1);
    }

    #[test]
    fn intervals_add_up_to_totals_and_loss_never_goes_negative() {
        let mut iv = Intervals::default();
        let t = |tx, rx, missing| Totals {
            tx_packets: tx,
            rx_packets: rx,
            missing,
            ..Default::default()
        };
        let a = iv.sample(t(100, 90, 10), 0.0, 1.0, 100);
        assert_eq!((a.tx_packets, a.rx_packets, a.lost), (100, 90, 10));
        // Late packets fill 4 of the gaps: no negative loss, carried instead.
        let b = iv.sample(t(200, 194, 6), 1.0, 2.0, 100);
        assert_eq!((b.tx_packets, b.rx_packets, b.lost), (100, 104, 0));
        let c = iv.sample(t(300, 290, 12), 2.0, 3.0, 100);
        assert_eq!(c.lost, 2, "new loss absorbs the carried late fills first");
        // The end: 5 more lost at the tail, 6 + 12... total loss is 17.
        let d = iv.last(t(310, 293, 12), 3.0, 3.1, 10, 17);
        assert_eq!(d.lost, 5);
        assert_eq!(iv.total.lost, 17);
        assert_eq!(iv.total.tx_packets, 310);
        assert_eq!(iv.total.rx_packets, 293);
        assert_eq!(iv.total.tx_target, 310);
    }
}
