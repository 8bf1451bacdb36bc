//! Interval lines cut on the test's own clock, iperf3 `-i` style. Slice k
//! covers seconds [k·w, (k+1)·w) after the test started, whatever time the
//! agents' samples reach the controller: a sample counts in the slice its
//! middle falls in (the agents sample at the slice width or an even
//! fraction of it, so a sample lies in one slice give or take the
//! sampler's few ms of jitter), and one that spans more than one and a half
//! slices (a sampler that woke late) is shared out by overlap. A slice is
//! complete, and handed out once, when every job has reported a sample of
//! a later slice; the last slice waits for [`Slicer::finish`], which comes
//! after the jobs' final samples (a UDP receiver's drain among them).
//!
//! Pure: no clock, no I/O. The runner turns each agent sample into
//! [`Part`]s (which direction, sending or receiving side) and the report
//! prints the [`Slice`]s.

use std::collections::{BTreeMap, HashMap};

/// One job's counts of one direction in one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    /// The direction's label (e.g. `gen_to_sink`); parts of one label sum.
    pub direction: String,
    /// Counted where the traffic leaves (true) or arrives (false).
    pub sender: bool,
    /// Payload bytes for TCP; L2 bytes with FCS for UDP.
    pub bytes: u64,
    pub packets: u64,
    /// Packets missing by sequence number (receivers of UDP).
    pub lost: u64,
    /// Retransmitted segments (senders of TCP).
    pub retransmits: u64,
    /// HTTP: responses completed.
    pub requests: u64,
    /// HTTP: connections open in the sample (a level: a slice shows the
    /// most any of its samples saw).
    pub connections: u32,
}

/// One direction's sums in one slice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SliceFigures {
    pub direction: String,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub lost: u64,
    pub retransmits: u64,
    pub requests: u64,
    pub connections: u32,
    /// A sample of the sending (`tx_seen`) or receiving side counted here:
    /// with [`LineStyle::LocalEnd`] a line shows only the sides measured.
    pub tx_seen: bool,
    pub rx_seen: bool,
}

/// What an interval line of a test shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LineStyle {
    /// Both ends measured (tcp, udp): offered and received.
    #[default]
    BothEnds,
    /// Only this end measured (a stock iperf3 server's tests): what it
    /// sent and what it received, each where it did.
    LocalEnd,
    /// An HTTP client: goodput, responses per second, connections open.
    Http,
}

/// One interval line's worth: a slice of the test clock and the sums of
/// every direction in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slice {
    pub from_s: f64,
    pub to_s: f64,
    /// Inside `--omit`: shown, left out of the test's totals.
    pub omitted: bool,
    /// Jobs whose samples are summed here, and of how many the test ran
    /// (fewer in a run cut short or with a job that went silent).
    pub jobs: usize,
    pub of_jobs: usize,
    /// The test counts packets (UDP); TCP counts bytes only.
    pub packets: bool,
    pub style: LineStyle,
    pub directions: Vec<SliceFigures>,
}

/// Cuts samples into slices of the test clock.
#[derive(Debug)]
pub struct Slicer {
    width: f64,
    /// Slices in the whole test (the last may be short).
    count: usize,
    whole_s: f64,
    omit_s: f64,
    /// Per job, the highest slice it has reported into (absent: none yet).
    reached: HashMap<u32, Option<usize>>,
    /// Direction labels in the order lines show them.
    labels: Vec<String>,
    acc: BTreeMap<usize, Acc>,
    next: usize,
    packets: bool,
    style: LineStyle,
}

#[derive(Debug, Default)]
struct Acc {
    figures: Vec<SliceFigures>,
    jobs: Vec<u32>,
}

impl Slicer {
    /// A test of `whole_s` seconds (omitted ones included) cut every
    /// `width_s`; `jobs` are the ids whose samples make up each slice and
    /// `labels` the directions, in the order shown.
    pub fn new(width_s: f64, whole_s: f64, omit_s: f64, jobs: &[u32], labels: &[String]) -> Self {
        let width = width_s.max(1e-3);
        let count = ((whole_s / width) - 1e-6).ceil().max(1.0) as usize;
        let mut uniq: Vec<String> = Vec::new();
        for l in labels {
            if !uniq.contains(l) {
                uniq.push(l.clone());
            }
        }
        Slicer {
            width,
            count,
            whole_s,
            omit_s,
            reached: jobs.iter().map(|&j| (j, None)).collect(),
            labels: uniq,
            acc: BTreeMap::new(),
            next: 0,
            packets: false,
            style: LineStyle::BothEnds,
        }
    }

    /// Slices whose lines show `style`.
    pub fn styled(mut self, style: LineStyle) -> Self {
        self.style = style;
        self
    }

    /// The test ended at `t_s` seconds, before the length it was cut for
    /// (a count of requests done early): the last slice ends there.
    pub fn end_at(&mut self, t_s: f64) {
        self.whole_s = self.whole_s.min(t_s.max(0.0));
    }

    /// Slices of a test that counts packets (UDP).
    pub fn counting_packets(mut self) -> Self {
        self.packets = true;
        self
    }

    /// Takes one sample of job `job` spanning `t_start..t_end` seconds of
    /// the test; returns the slices it completed, in order.
    pub fn add(&mut self, job: u32, t_start: f64, t_end: f64, parts: &[Part]) -> Vec<Slice> {
        let span = (t_end - t_start).max(0.0);
        let last = self.count - 1;
        let index = |t: f64| ((t / self.width).floor().max(0.0) as usize).min(last);
        let shares: Vec<(usize, f64)> = if span > 1.5 * self.width {
            let (a, b) = (index(t_start), index(t_end - 1e-9));
            (a..=b)
                .map(|k| {
                    let lo = (k as f64 * self.width).max(t_start);
                    let hi = if k == last {
                        t_end
                    } else {
                        ((k + 1) as f64 * self.width).min(t_end)
                    };
                    (k, (hi - lo).max(0.0) / span)
                })
                .collect()
        } else {
            vec![(index((t_start + t_end) / 2.0), 1.0)]
        };
        // Whole counts: each share rounds down and the rest goes to the
        // last slice, so a sample's counts add up exactly.
        let mut left: Vec<Part> = parts.to_vec();
        for (n, &(k, f)) in shares.iter().enumerate() {
            let final_share = n + 1 == shares.len();
            let acc = self.acc.entry(k).or_default();
            if !acc.jobs.contains(&job) {
                acc.jobs.push(job);
            }
            for (p, rest) in parts.iter().zip(left.iter_mut()) {
                let take = |whole: u64, rest: &mut u64| {
                    let v = if final_share {
                        *rest
                    } else {
                        ((whole as f64 * f) as u64).min(*rest)
                    };
                    *rest -= v;
                    v
                };
                let (bytes, packets) = (
                    take(p.bytes, &mut rest.bytes),
                    take(p.packets, &mut rest.packets),
                );
                let (lost, retr) = (
                    take(p.lost, &mut rest.lost),
                    take(p.retransmits, &mut rest.retransmits),
                );
                let f = match acc.figures.iter_mut().find(|f| f.direction == p.direction) {
                    Some(f) => f,
                    None => {
                        acc.figures.push(SliceFigures {
                            direction: p.direction.clone(),
                            ..Default::default()
                        });
                        let i = acc.figures.len() - 1;
                        &mut acc.figures[i]
                    }
                };
                let requests = take(p.requests, &mut rest.requests);
                if p.sender {
                    f.tx_bytes += bytes;
                    f.tx_packets += packets;
                    f.retransmits += retr;
                    f.tx_seen = true;
                } else {
                    f.rx_bytes += bytes;
                    f.rx_packets += packets;
                    f.rx_seen = true;
                }
                f.lost += lost;
                f.requests += requests;
                f.connections = f.connections.max(p.connections);
            }
        }
        if let Some(&(k, _)) = shares.last() {
            let r = self.reached.entry(job).or_insert(None);
            *r = Some(r.map_or(k, |was| was.max(k)));
        }
        self.complete()
    }

    /// Every slice before the lowest one all jobs have reached.
    fn complete(&mut self) -> Vec<Slice> {
        let Some(upto) = self.reached.values().copied().min().flatten() else {
            return vec![];
        };
        let mut out = Vec::new();
        while self.next < upto {
            out.push(self.take(self.next));
            self.next += 1;
        }
        out
    }

    /// The slices not handed out yet, up to the last one any job reported
    /// into: the end of the test (or of a run cut short).
    pub fn finish(&mut self) -> Vec<Slice> {
        let top = self.acc.keys().next_back().copied();
        let mut out = Vec::new();
        if let Some(top) = top {
            while self.next <= top {
                out.push(self.take(self.next));
                self.next += 1;
            }
        }
        out
    }

    fn take(&mut self, k: usize) -> Slice {
        let acc = self.acc.remove(&k).unwrap_or_default();
        let from_s = k as f64 * self.width;
        let to_s = ((k + 1) as f64 * self.width).min(self.whole_s.max(from_s));
        let directions = self
            .labels
            .iter()
            .map(|l| {
                acc.figures
                    .iter()
                    .find(|f| &f.direction == l)
                    .cloned()
                    .unwrap_or(SliceFigures {
                        direction: l.clone(),
                        ..Default::default()
                    })
            })
            .chain(
                acc.figures
                    .iter()
                    .filter(|f| !self.labels.contains(&f.direction))
                    .cloned(),
            )
            .collect();
        Slice {
            from_s,
            to_s,
            omitted: from_s < self.omit_s - 1e-9,
            jobs: acc.jobs.len(),
            of_jobs: self.reached.len(),
            packets: self.packets,
            style: self.style,
            directions,
        }
    }
}

/// The agents' sampling interval for lines every `every`: the width
/// itself up to 1 s, else the even fraction of it nearest below 1 s
/// (2 s: 1 s, 2.5 s: 0.833 s), so each sample falls in one slice.
pub fn sample_interval(every: std::time::Duration) -> std::time::Duration {
    let s = every.as_secs_f64();
    if s <= 1.0 {
        every
    } else {
        std::time::Duration::from_secs_f64(s / s.ceil())
    }
}

/// [`sample_interval`] in the agents' unit, ms (at least 10).
pub fn sample_ms(every: std::time::Duration) -> u64 {
    (sample_interval(every).as_millis() as u64).max(10)
}

/// A leg's name without its instance tag (`gen#2_to_sink` → `gen_to_sink`):
/// the instances of one generator sum into one line.
pub fn sum_label(leg_name: &str) -> String {
    let mut out = String::with_capacity(leg_name.len());
    let mut chars = leg_name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '#' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(dir: &str, sender: bool, bytes: u64) -> Part {
        Part {
            direction: dir.into(),
            sender,
            bytes,
            packets: bytes / 100,
            ..Default::default()
        }
    }

    fn labels() -> Vec<String> {
        vec!["a_to_b".to_string()]
    }

    #[test]
    fn samples_arriving_late_or_jittered_still_make_aligned_slices() {
        // Sender (1) and receiver (2), each sampling every second with a
        // few ms of jitter; the receiver's samples arrive a whole slice
        // late. Lines must still be 0-1, 1-2, 2-3 with both sides in each.
        let mut s = Slicer::new(1.0, 3.0, 0.0, &[1, 2], &labels());
        let tx = |a, b| (1, a, b, vec![part("a_to_b", true, 1000)]);
        let rx = |a, b| (2, a, b, vec![part("a_to_b", false, 900)]);
        let order = [
            tx(0.0, 1.003),
            tx(1.003, 1.998),
            rx(0.0, 0.999),
            tx(1.998, 3.0),
            rx(0.999, 2.004),
            rx(2.004, 3.2),
        ];
        let mut out = Vec::new();
        for (job, a, b, p) in order {
            out.extend(s.add(job, a, b, &p));
        }
        assert_eq!(out.len(), 2, "slices 0 and 1 complete before the end");
        out.extend(s.finish());
        let spans: Vec<(f64, f64)> = out.iter().map(|l| (l.from_s, l.to_s)).collect();
        assert_eq!(spans, vec![(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]);
        for l in &out {
            assert_eq!(l.jobs, 2, "{l:?}");
            assert_eq!(l.directions[0].tx_bytes, 1000, "{l:?}");
            assert_eq!(l.directions[0].rx_bytes, 900, "{l:?}");
            assert!(!l.omitted);
        }
    }

    #[test]
    fn a_slice_waits_for_every_job() {
        let mut s = Slicer::new(1.0, 3.0, 0.0, &[1, 2], &labels());
        assert!(s.add(1, 0.0, 1.0, &[part("a_to_b", true, 10)]).is_empty());
        assert!(s.add(1, 1.0, 2.0, &[part("a_to_b", true, 10)]).is_empty());
        // Job 2 is still in slice 0: nothing is complete yet.
        assert!(s.add(2, 0.0, 1.0, &[part("a_to_b", false, 10)]).is_empty());
        let out = s.add(2, 1.0, 2.0, &[part("a_to_b", false, 10)]);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].from_s, out[0].to_s), (0.0, 1.0));
    }

    #[test]
    fn half_second_samples_make_half_second_slices() {
        let mut s = Slicer::new(0.5, 2.0, 0.0, &[1], &labels());
        let mut out = Vec::new();
        for k in 0..4 {
            let a = k as f64 * 0.5 + 0.002;
            out.extend(s.add(1, a, a + 0.5, &[part("a_to_b", true, 100)]));
        }
        out.extend(s.finish());
        let spans: Vec<(f64, f64)> = out.iter().map(|l| (l.from_s, l.to_s)).collect();
        assert_eq!(spans, vec![(0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, 2.0)]);
    }

    #[test]
    fn sub_samples_add_up_in_their_slice() {
        // Lines every 2 s from 1 s samples.
        let mut s = Slicer::new(2.0, 4.0, 0.0, &[1], &labels());
        let mut out = Vec::new();
        for k in 0..4 {
            out.extend(s.add(1, k as f64, k as f64 + 1.0, &[part("a_to_b", true, 100)]));
        }
        out.extend(s.finish());
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|l| l.directions[0].tx_bytes == 200));
    }

    #[test]
    fn a_late_sampler_spanning_two_slices_is_shared_by_overlap() {
        let mut s = Slicer::new(1.0, 4.0, 0.0, &[1], &labels());
        let mut out = s.add(1, 0.0, 1.0, &[part("a_to_b", true, 1000)]);
        out.extend(s.add(1, 1.0, 3.0, &[part("a_to_b", true, 2001)]));
        out.extend(s.add(1, 3.0, 4.0, &[part("a_to_b", true, 1000)]));
        out.extend(s.finish());
        let tx: Vec<u64> = out.iter().map(|l| l.directions[0].tx_bytes).collect();
        assert_eq!(tx, vec![1000, 1000, 1001, 1000]);
    }

    #[test]
    fn omitted_slices_are_marked_and_directions_without_samples_read_zero() {
        let two = vec!["a_to_b".to_string(), "b_to_a".to_string()];
        let mut s = Slicer::new(1.0, 3.0, 1.0, &[1], &two);
        let mut out = Vec::new();
        for k in 0..3 {
            out.extend(s.add(1, k as f64, k as f64 + 1.0, &[part("a_to_b", true, 5)]));
        }
        out.extend(s.finish());
        let omitted: Vec<bool> = out.iter().map(|l| l.omitted).collect();
        assert_eq!(omitted, vec![true, false, false]);
        assert_eq!(out[0].directions.len(), 2);
        assert_eq!(out[0].directions[1].direction, "b_to_a");
        assert_eq!(out[0].directions[1].tx_bytes, 0);
    }

    #[test]
    fn the_drain_after_the_end_stays_in_the_last_slice() {
        let mut s = Slicer::new(1.0, 2.0, 0.0, &[1], &labels());
        let mut out = s.add(1, 0.0, 1.0, &[part("a_to_b", false, 1)]);
        out.extend(s.add(1, 1.0, 2.4, &[part("a_to_b", false, 1)]));
        out.extend(s.add(1, 2.4, 2.41, &[part("a_to_b", false, 1)]));
        out.extend(s.finish());
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].to_s, 2.0);
        assert_eq!(out[1].directions[0].rx_bytes, 2);
    }

    #[test]
    fn http_slices_keep_the_most_connections_and_end_where_the_test_did() {
        let mut s = Slicer::new(1.0, 3600.0, 0.0, &[1], &labels()).styled(LineStyle::Http);
        let p = |conns, reqs| Part {
            direction: "a_to_b".into(),
            bytes: 1000,
            requests: reqs,
            connections: conns,
            ..Default::default()
        };
        let mut out = s.add(1, 0.0, 1.0, &[p(4, 10)]);
        // The closing sample: its connections have shut.
        out.extend(s.add(1, 1.0, 1.4, &[p(2, 5)]));
        out.extend(s.add(1, 1.4, 1.41, &[p(0, 0)]));
        s.end_at(1.41);
        out.extend(s.finish());
        let got: Vec<(f64, f64, u32, u64)> = out
            .iter()
            .map(|l| {
                (
                    l.from_s,
                    l.to_s,
                    l.directions[0].connections,
                    l.directions[0].requests,
                )
            })
            .collect();
        assert_eq!(got, vec![(0.0, 1.0, 4, 10), (1.0, 1.41, 2, 5)]);
        assert!(out.iter().all(|l| l.style == LineStyle::Http));
        assert!(out[0].directions[0].rx_seen && !out[0].directions[0].tx_seen);
    }

    #[test]
    fn instances_sum_under_one_label() {
        assert_eq!(sum_label("gen#2_to_sink"), "gen_to_sink");
        assert_eq!(sum_label("sink_to_gen#12"), "sink_to_gen");
        assert_eq!(sum_label("gen1_to_sink"), "gen1_to_sink");
    }

    #[test]
    fn sampling_interval_divides_the_line_width() {
        use std::time::Duration;
        let ms = |m| Duration::from_millis(m);
        assert_eq!(sample_interval(ms(500)), ms(500));
        assert_eq!(sample_interval(ms(1000)), ms(1000));
        assert_eq!(sample_interval(ms(2000)), ms(1000));
        assert_eq!(sample_interval(ms(2500)).as_millis(), 833);
    }
}
