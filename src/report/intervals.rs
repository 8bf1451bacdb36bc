//! Per-interval lines (`--interval SECS`), iperf3 `-i` style: one line per
//! period, printed whether or not the output is a terminal, so a log or a
//! pipe shows a run as it goes. Tests that cut their own slices of the
//! test clock (tcp, udp: `runner::slices`) get a line per slice, every
//! figure counted in it; others get the mean of the rates their updates
//! carried in the period.

use crate::model::stderr::errln;
use crate::model::units;
use crate::runner::slices::{LineStyle, Slice, SliceFigures};
use crate::runner::Progress;
use std::sync::Mutex;

/// Prints a line every `every_s` seconds of a test.
pub struct IntervalLines {
    every_s: f64,
    /// On stdout (the results table's stream) unless stdout carries JSON.
    to_stdout: bool,
    state: Mutex<Period>,
    sliced: Mutex<Sliced>,
}

/// Slices not printed yet (lines wider than the slices), and whether the
/// legend for incomplete lines was printed.
#[derive(Default)]
struct Sliced {
    test: String,
    pending: Option<Slice>,
    legend_said: bool,
}

/// The updates seen since the last line.
#[derive(Default)]
struct Period {
    test: String,
    from_s: f64,
    to_s: f64,
    updates: u32,
    /// Updates that carried each side's figures (a side not heard from
    /// yet in a test reports zeros, which are not a rate).
    tx_n: u32,
    rx_n: u32,
    tx_pps: f64,
    rx_pps: f64,
    tx_bps: f64,
    rx_bps: f64,
    loss: f64,
    /// HTTP: the last update's open connections, and the sum of the
    /// updates' responses per second.
    connections: Option<u32>,
    requests_per_s: f64,
}

impl Period {
    fn line(&self) -> Option<String> {
        if self.updates == 0 {
            return None;
        }
        let rate = |pps: f64, bps: f64, n: u32| {
            if n == 0 {
                return "-".to_string();
            }
            let n = f64::from(n);
            if pps > 0.0 {
                format!("{}pps {}bit/s", units::si(pps / n), units::si(bps / n))
            } else {
                format!("{}bit/s", units::si(bps / n))
            }
        };
        let mut l = format!(
            "[{:>6.1}-{:>6.1} s] {}  offered {}  received {}",
            self.from_s,
            self.to_s,
            self.test,
            rate(self.tx_pps, self.tx_bps, self.tx_n),
            rate(self.rx_pps, self.rx_bps, self.rx_n)
        );
        if self.tx_pps > 0.0 || self.rx_pps > 0.0 {
            let n = f64::from(self.rx_n.max(1));
            l.push_str(&format!("  loss {:.3} %", self.loss / n * 100.0));
        }
        if let Some(c) = self.connections {
            let r = self.requests_per_s / f64::from(self.updates);
            l.push_str(&format!("  {c} conn  {r:.0} req/s"));
        }
        Some(l)
    }
}

impl IntervalLines {
    pub fn new(every_s: f64, to_stdout: bool) -> Self {
        IntervalLines {
            every_s,
            to_stdout,
            state: Mutex::new(Period::default()),
            sliced: Mutex::new(Sliced::default()),
        }
    }

    /// A test's slices: one line each, or several merged into one where
    /// the lines are wider than the test's slices (a ramp's 1 s samples
    /// under `-i 2`).
    fn slices(&self, p: &Progress) {
        let Ok(mut s) = self.sliced.lock() else {
            return;
        };
        if s.test != p.test {
            if let Some(old) = s.pending.take() {
                self.print_slice(&mut s, &old);
            }
            *s = Sliced {
                test: p.test.clone(),
                ..Default::default()
            };
        }
        for slice in &p.slices {
            let merged = match s.pending.take() {
                Some(mut m) if m.omitted == slice.omitted => {
                    merge(&mut m, slice);
                    m
                }
                Some(m) => {
                    self.print_slice(&mut s, &m);
                    slice.clone()
                }
                None => slice.clone(),
            };
            let last = (merged.to_s - merged.from_s) >= self.every_s - 1e-6
                || slice.to_s >= p.duration_s - 1e-6;
            if last {
                self.print_slice(&mut s, &merged);
            } else {
                s.pending = Some(merged);
            }
        }
    }

    fn print_slice(&self, s: &mut Sliced, slice: &Slice) {
        let fd = if self.to_stdout { 1 } else { 2 };
        let width = crate::report::columns::width_for(fd);
        for l in slice_lines(&s.test, slice, width) {
            self.emit(&l);
        }
        if slice.jobs < slice.of_jobs && !s.legend_said {
            s.legend_said = true;
            self.emit(
                "  * a job of this test reported no sample in this interval (the run was cut \
                 short, or an agent went silent): the figures of its side read 0 there",
            );
        }
    }

    /// Takes one progress update; prints a line when a period is complete.
    /// The rates of a period are the mean of the updates within it (each
    /// update holds the rates of the agents' latest 1 s sample).
    pub fn update(&self, p: &Progress) {
        if p.sliced {
            self.slices(p);
            return;
        }
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if s.test != p.test {
            if let Some(l) = s.line() {
                self.emit(&l);
            }
            *s = Period {
                test: p.test.clone(),
                ..Default::default()
            };
        }
        s.to_s = p.elapsed_s;
        s.updates += 1;
        s.connections = p.connections.or(s.connections);
        s.requests_per_s += p.requests_per_s;
        if p.tx_bps > 0.0 {
            s.tx_n += 1;
            s.tx_pps += p.tx_pps;
            s.tx_bps += p.tx_bps;
        }
        if p.rx_bps > 0.0 || p.loss_ratio > 0.0 {
            s.rx_n += 1;
            s.rx_pps += p.rx_pps;
            s.rx_bps += p.rx_bps;
            s.loss += p.loss_ratio;
        }
        if p.elapsed_s - s.from_s >= self.every_s - 1e-6 {
            if let Some(l) = s.line() {
                self.emit(&l);
            }
            *s = Period {
                test: p.test.clone(),
                from_s: p.elapsed_s,
                ..Default::default()
            };
        }
    }

    /// Prints what is left of the last period (the end of a test).
    pub fn flush(&self) {
        if let Ok(mut s) = self.sliced.lock() {
            if let Some(old) = s.pending.take() {
                self.print_slice(&mut s, &old);
            }
            *s = Sliced::default();
        }
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if let Some(l) = s.line() {
            self.emit(&l);
        }
        *s = Period::default();
    }

    fn emit(&self, line: &str) {
        if self.to_stdout {
            crate::model::stdout::println(line);
        } else {
            errln!("{line}");
        }
    }
}

/// Adds `b` (the slice after `a`) into `a`.
fn merge(a: &mut Slice, b: &Slice) {
    a.to_s = b.to_s;
    a.jobs = a.jobs.min(b.jobs);
    for f in &b.directions {
        match a.directions.iter_mut().find(|x| x.direction == f.direction) {
            Some(x) => {
                x.tx_bytes += f.tx_bytes;
                x.tx_packets += f.tx_packets;
                x.rx_bytes += f.rx_bytes;
                x.rx_packets += f.rx_packets;
                x.lost += f.lost;
                x.retransmits += f.retransmits;
                x.requests += f.requests;
                x.connections = x.connections.max(f.connections);
                x.tx_seen |= f.tx_seen;
                x.rx_seen |= f.rx_seen;
            }
            None => a.directions.push(f.clone()),
        }
    }
}

/// A slice's lines, iperf3-like: `[  0.00-1.00 s] NAME: offered …
/// received …`, one per direction (named when there are several), with
/// `(omitted)` inside `--omit`. UDP: packets and L1 bit/s each way and the
/// packets lost of those expected; TCP: payload bit/s each way, the bytes
/// received and the retransmits. Each line is as full as fits `width`
/// (none: all): the bit rates of UDP and TCP's bytes go first, then the
/// test's name (and "offered"/"received" become "sent"/"recv"), then the
/// line is cut with "…".
pub fn slice_lines(test: &str, s: &Slice, width: Option<usize>) -> Vec<String> {
    let w = (s.to_s - s.from_s).max(1e-6);
    let many = s.directions.len() > 1;
    let mark = if s.jobs < s.of_jobs { " *" } else { "" };
    let omitted = if s.omitted { "  (omitted)" } else { "" };
    let span = format!("{:.2}-{:.2}", s.from_s, s.to_s);
    s.directions
        .iter()
        .map(|f| {
            let name = if many {
                format!("{test} {}", f.direction)
            } else {
                test.to_string()
            };
            let (full, short, shortest) = if s.style == LineStyle::Http {
                http_figures(f, w)
            } else if s.style == LineStyle::LocalEnd {
                local_figures(f, w, s.packets)
            } else if s.packets {
                let l1 = |bytes: u64, pkts: u64| (bytes + 20 * pkts) as f64 * 8.0 / w;
                let expected = f.rx_packets + f.lost;
                let pct = if expected > 0 {
                    f.lost as f64 / expected as f64 * 100.0
                } else {
                    0.0
                };
                let (tx, rx) = (
                    units::si(f.tx_packets as f64 / w),
                    units::si(f.rx_packets as f64 / w),
                );
                let lost = format!("lost {}/{} ({pct:.3} %)", f.lost, expected);
                (
                    format!(
                        "offered {tx}pps {}bit/s  received {rx}pps {}bit/s  {lost}",
                        units::si(l1(f.tx_bytes, f.tx_packets)),
                        units::si(l1(f.rx_bytes, f.rx_packets)),
                    ),
                    format!("offered {tx}pps  received {rx}pps  {lost}"),
                    format!("sent {tx}pps  recv {rx}pps  {lost}"),
                )
            } else {
                let (tx, rx) = (
                    units::si(f.tx_bytes as f64 * 8.0 / w),
                    units::si(f.rx_bytes as f64 * 8.0 / w),
                );
                (
                    format!(
                        "offered {tx}bit/s  received {}B {rx}bit/s  retr {}",
                        units::si(f.rx_bytes as f64),
                        f.retransmits
                    ),
                    format!(
                        "offered {tx}bit/s  received {rx}bit/s  retr {}",
                        f.retransmits
                    ),
                    format!("sent {tx}bit/s  recv {rx}bit/s  retr {}", f.retransmits),
                )
            };
            let head = format!("[{span:>13} s]");
            let variants = [
                format!("{head} {name}: {full}{omitted}{mark}"),
                format!("{head} {name}: {short}{omitted}{mark}"),
                format!("{head} {shortest}{omitted}{mark}"),
            ];
            fit(&variants, width)
        })
        .collect()
}

/// An HTTP client's line: goodput, the body bytes received, responses
/// per second and the connections open in the slice.
fn http_figures(f: &SliceFigures, w: f64) -> (String, String, String) {
    let rx = units::si(f.rx_bytes as f64 * 8.0 / w);
    let rps = f.requests as f64 / w;
    let tail = format!("{rps:.0} req/s  {} conn", f.connections);
    (
        format!(
            "goodput {rx}bit/s  received {}B  {tail}",
            units::si(f.rx_bytes as f64)
        ),
        format!("goodput {rx}bit/s  {tail}"),
        format!("{rx}bit/s  {tail}"),
    )
}

/// A line of what this end measured alone (a stock iperf3 server's test):
/// what it sent (with TCP's retransmits) where it sent, what it received
/// (with UDP's loss) where it received.
fn local_figures(f: &SliceFigures, w: f64, packets: bool) -> (String, String, String) {
    let rate = |bytes: u64, pkts: u64, full: bool| {
        let bps = if packets {
            (bytes + 20 * pkts) as f64 * 8.0 / w
        } else {
            bytes as f64 * 8.0 / w
        };
        match (packets, full) {
            (true, true) => format!("{}pps {}bit/s", units::si(pkts as f64 / w), units::si(bps)),
            (true, false) => format!("{}pps", units::si(pkts as f64 / w)),
            (false, true) => format!("{}B {}bit/s", units::si(bytes as f64), units::si(bps)),
            (false, false) => format!("{}bit/s", units::si(bps)),
        }
    };
    let side = |full: bool, short_words: bool| {
        let mut v = Vec::new();
        if f.tx_seen {
            let retr = if packets {
                String::new()
            } else {
                format!("  retr {}", f.retransmits)
            };
            v.push(format!(
                "sent {}{retr}",
                rate(f.tx_bytes, f.tx_packets, full)
            ));
        }
        if f.rx_seen {
            let word = if short_words { "recv" } else { "received" };
            let mut r = format!("{word} {}", rate(f.rx_bytes, f.rx_packets, full));
            if packets {
                let expected = f.rx_packets + f.lost;
                let pct = if expected > 0 {
                    f.lost as f64 / expected as f64 * 100.0
                } else {
                    0.0
                };
                r.push_str(&format!("  lost {}/{expected} ({pct:.3} %)", f.lost));
            }
            v.push(r);
        }
        if v.is_empty() {
            v.push("no sample".to_string());
        }
        v.join("  ")
    };
    (side(true, false), side(false, false), side(false, true))
}

/// The first of `variants` (fullest first) that fits `width`, else the
/// last cut to it with "…".
fn fit(variants: &[String], width: Option<usize>) -> String {
    let Some(width) = width else {
        return variants.first().cloned().unwrap_or_default();
    };
    if let Some(v) = variants.iter().find(|v| v.chars().count() <= width) {
        return v.clone();
    }
    let last = variants.last().cloned().unwrap_or_default();
    let mut cut: String = last.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_period_with_its_mean() {
        let iv = IntervalLines::new(2.0, false);
        let p = |t: f64, rx: f64| Progress {
            test: "udp".into(),
            elapsed_s: t,
            duration_s: 4.0,
            tx_pps: 1000.0,
            rx_pps: rx,
            tx_bps: 1e6,
            rx_bps: rx * 1e3,
            loss_ratio: 0.0,
            ..Default::default()
        };
        iv.update(&p(1.0, 800.0));
        assert_eq!(iv.state.lock().unwrap().updates, 1);
        iv.update(&p(2.0, 1000.0));
        // The period ended: a new one starts at 2 s.
        let s = iv.state.lock().unwrap();
        assert_eq!((s.updates, s.from_s), (0, 2.0));
        drop(s);
        let mut period = Period {
            test: "udp".into(),
            from_s: 0.0,
            to_s: 2.0,
            ..Default::default()
        };
        for rx in [800.0, 1000.0] {
            period.updates += 1;
            period.tx_n += 1;
            period.rx_n += 1;
            period.tx_pps += 1000.0;
            period.rx_pps += rx;
            period.tx_bps += 1e6;
            period.rx_bps += rx * 1e3;
        }
        let l = period.line().unwrap();
        assert!(l.starts_with("[   0.0-   2.0 s] udp"), "{l}");
        assert!(l.contains("received 900.00 pps"), "{l}");
        assert!(l.contains("loss 0.000 %"), "{l}");
    }

    fn figures(dir: &str, tx: u64, rx: u64) -> crate::runner::slices::SliceFigures {
        crate::runner::slices::SliceFigures {
            direction: dir.into(),
            tx_bytes: tx,
            rx_bytes: rx,
            ..Default::default()
        }
    }

    #[test]
    fn slice_lines_fill_in_every_figure_of_every_direction() {
        let s = Slice {
            from_s: 0.0,
            to_s: 1.0,
            omitted: true,
            jobs: 2,
            of_jobs: 2,
            packets: false,
            style: LineStyle::BothEnds,
            directions: vec![figures("gen_to_sink", 125_000_000, 120_000_000)],
        };
        let l = slice_lines("tcp 4 streams", &s, None);
        assert_eq!(
            l,
            vec![
                "[    0.00-1.00 s] tcp 4 streams: offered 1.00 Gbit/s  received 120.00 MB \
                 960.00 Mbit/s  retr 0  (omitted)"
            ]
        );
        let udp = Slice {
            packets: true,
            omitted: false,
            jobs: 1,
            directions: vec![
                crate::runner::slices::SliceFigures {
                    tx_packets: 1000,
                    tx_bytes: 64_000,
                    rx_packets: 990,
                    rx_bytes: 63_360,
                    lost: 10,
                    ..figures("gen_to_sink", 0, 0)
                },
                figures("sink_to_gen", 0, 0),
            ],
            ..s
        };
        let l = slice_lines("udp 64b one", &udp, None);
        assert_eq!(l.len(), 2);
        assert!(
            l[0].contains("udp 64b one gen_to_sink: offered 1.00 kpps 672.00 kbit/s"),
            "{}",
            l[0]
        );
        assert!(l[0].contains("received 990.00 pps"), "{}", l[0]);
        assert!(l[0].contains("lost 10/1000 (1.000 %)"), "{}", l[0]);
        // A job that reported nothing in the interval is marked.
        assert!(
            l[0].ends_with(" *") && l[1].contains("sink_to_gen: offered 0.00 pps"),
            "{l:?}"
        );
        // On 80 columns the bit rates go first, then the name; the loss stays.
        for width in [80, 60] {
            for line in slice_lines("udp 64b one", &udp, Some(width)) {
                assert!(line.chars().count() <= width, "{width}: {line}");
            }
        }
        let l = slice_lines("udp 64b one", &udp, Some(80));
        assert!(
            !l[0].contains("bit/s") && l[0].contains("lost 10/1000 (1.000 %)"),
            "{}",
            l[0]
        );
        assert!(slice_lines("udp 64b one", &udp, Some(60))[0].ends_with('…'));
    }

    #[test]
    fn http_and_one_end_lines_show_only_what_was_measured() {
        let http = Slice {
            from_s: 2.0,
            to_s: 2.5,
            jobs: 1,
            of_jobs: 1,
            style: LineStyle::Http,
            directions: vec![SliceFigures {
                requests: 500,
                connections: 4,
                rx_seen: true,
                ..figures("sink_to_gen", 0, 50_000_000)
            }],
            ..Default::default()
        };
        assert_eq!(
            slice_lines("http 4 connections", &http, None),
            vec![
                "[    2.00-2.50 s] http 4 connections: goodput 800.00 Mbit/s  received 50.00 MB  \
                 1000 req/s  4 conn"
            ]
        );
        let iperf3 = Slice {
            style: LineStyle::LocalEnd,
            directions: vec![SliceFigures {
                retransmits: 3,
                tx_seen: true,
                ..figures("client_to_server", 125_000_000, 0)
            }],
            ..http
        };
        let l = slice_lines("iperf3 tcp", &iperf3, None);
        assert_eq!(
            l,
            vec!["[    2.00-2.50 s] iperf3 tcp: sent 125.00 MB 2.00 Gbit/s  retr 3"]
        );
    }

    #[test]
    fn lines_wider_than_the_slices_sum_them() {
        let iv = IntervalLines::new(2.0, false);
        let slice = |k: f64| Slice {
            from_s: k,
            to_s: k + 1.0,
            jobs: 1,
            of_jobs: 1,
            directions: vec![figures("a", 100, 100)],
            ..Default::default()
        };
        let p = Progress {
            test: "ramp".into(),
            duration_s: 4.0,
            sliced: true,
            slices: vec![slice(0.0)],
            ..Default::default()
        };
        iv.update(&p);
        let pending = iv.sliced.lock().unwrap().pending.clone().unwrap();
        assert_eq!((pending.from_s, pending.to_s), (0.0, 1.0));
        iv.update(&Progress {
            slices: vec![slice(1.0)],
            ..p.clone()
        });
        assert!(iv.sliced.lock().unwrap().pending.is_none(), "0-2 printed");
        let mut a = slice(0.0);
        merge(&mut a, &slice(1.0));
        assert_eq!((a.to_s, a.directions[0].rx_bytes), (2.0, 200));
    }
}
