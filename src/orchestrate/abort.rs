//! `--abort-on-fail` (k6's abortOnFail): criteria held against a test's
//! interval lines while it runs, so a CI gate stops a run that has
//! clearly failed instead of waiting for its end. This file owns which
//! criteria qualify, their figures over the intervals so far (computed as
//! the final figure is: loss over every frame sent so far, a rate as the
//! mean of the intervals so far, the worse direction) and the grace
//! period. Pure: no clock, no I/O; `run.rs` feeds it each test's slices
//! and stops the run on the first criterion it names.

use crate::model::criteria::{self, Criterion, Kind, Op};
use crate::report::registry;
use crate::results::criteria::AbortRecord;
use crate::runner::slices::Slice;
use std::collections::BTreeMap;
use std::time::Duration;

/// Without `--abort-after`, a criterion may fail once the test's
/// intervals cover this many of its interval widths (3 s at 1 s lines).
pub const GRACE_INTERVALS: u32 = 3;

// The registry's names, as constants the patterns below can match.
const RX_PPS: &str = registry::RX_PPS.key;
const TX_PPS: &str = registry::TX_PPS.key;
const RETRANSMITS: &str = registry::RETRANSMITS.key;

/// The figures the interval lines carry enough to compute, and the tests
/// whose lines carry them.
pub const WATCHABLE: &[(&str, &str)] = &[
    ("loss", "udp"),
    ("lost", "udp"),
    (RX_PPS, "udp"),
    (TX_PPS, "udp"),
    ("l1_bps", "udp"),
    ("l2_bps", "udp, tcp"),
    ("goodput", "tcp"),
    (RETRANSMITS, "tcp"),
];

/// The watchable figures in words, for errors and `--help`.
pub fn watchable_words() -> String {
    let names: Vec<&str> = WATCHABLE.iter().map(|w| w.0).collect();
    format!(
        "{} (counts, lost and retransmits, only with < or <=)",
        names.join(", ")
    )
}

/// Why `c` cannot be checked while a test runs; `None` when it can.
pub fn unwatchable(c: &Criterion) -> Option<String> {
    let name = c.figure.name;
    if !WATCHABLE.iter().any(|w| w.0 == name) {
        return Some(format!(
            "{name} is not in the interval lines: it is known only when the test ends"
        ));
    }
    // A count only grows: past a bound from above it has failed for
    // good; below one from below it may still reach it.
    if c.figure.kind == Kind::Count && !matches!(c.op, Op::Lt | Op::Le) {
        return Some(format!(
            "{name} is a count that may still reach its bound before the end: only {name}< or \
             {name}<= can fail while the test runs"
        ));
    }
    None
}

/// Why `--abort-on-fail` could never stop a run, so it is refused before
/// anything runs.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error(
        "--abort-on-fail stops a run when a criterion has clearly failed, and none is given: \
         add one with --expect (e.g. --expect 'loss<=0.1%'), or drop --abort-on-fail"
    )]
    NoCriterion,
    #[error(
        "--abort-on-fail: none of the criteria can be checked while a test runs ({why}); the \
         figures checked per interval are {}; add such a criterion or drop --abort-on-fail (the \
         others are still held at the end)",
        watchable_words()
    )]
    NoneWatchable { why: String },
    #[error(
        "--abort-on-fail does not work with {command}: {why}; it watches the tests of udp, tcp, \
         latency, lab and plans (run); drop --abort-on-fail (--expect is still held at the end)"
    )]
    Command { command: String, why: &'static str },
}

/// Refuses criteria none of which can be checked while a test runs.
/// `--abort-on-fail` (`on`) with its grace period (`--abort-after`) over
/// `expect`: None when it is off; refused when nothing could make it stop
/// a run (see [`check_criteria`]).
pub fn opts(
    on: bool,
    after_s: Option<f64>,
    expect: &[Criterion],
) -> Result<Option<crate::orchestrate::config::AbortOpts>, Refused> {
    if !on {
        return Ok(None);
    }
    check_criteria(expect)?;
    Ok(Some(crate::orchestrate::config::AbortOpts {
        after: after_s.map(Duration::from_secs_f64),
    }))
}

pub fn check_criteria(expect: &[Criterion]) -> Result<(), Refused> {
    if expect.is_empty() {
        return Err(Refused::NoCriterion);
    }
    let why: Vec<String> = expect
        .iter()
        .filter_map(|c| unwatchable(c).map(|w| format!("{}: {w}", c.text)))
        .collect();
    if why.len() == expect.len() {
        return Err(Refused::NoneWatchable {
            why: why.join("; "),
        });
    }
    Ok(())
}

/// Refuses a command whose tests report no interval lines to hold
/// criteria to: `command` as the CLI names it (`udp`, `tcp`, `latency`;
/// "" for `lab` and `run`, whose udp and tcp tests are watched), `iperf3`
/// when its sink is a stock iperf3 server.
pub fn check_command(command: &str, iperf3: bool) -> Result<(), Refused> {
    let why = match command {
        _ if iperf3 => "a stock iperf3 server's test reports no interval lines to check",
        "" | "udp" | "tcp" | "latency" => return Ok(()),
        "ramp" => "a ramp loses by design past the DUT's limit",
        "search" => "a search's trials lose by design above the DUT's limit",
        _ => "its tests report no interval lines to check criteria on while they run",
    };
    let command = if iperf3 {
        "--server iperf3://"
    } else {
        command
    };
    Err(Refused::Command {
        command: command.to_string(),
        why,
    })
}

/// One direction's sums over the intervals so far.
#[derive(Debug, Default, Clone)]
struct Sums {
    tx_packets: u64,
    rx_packets: u64,
    rx_bytes: u64,
    lost: u64,
    retransmits: u64,
}

/// The criteria watched over one test, and its intervals so far.
#[derive(Debug)]
pub struct Watch {
    /// Each criterion with its grace period, in seconds.
    criteria: Vec<(Criterion, f64)>,
    /// Seconds the intervals summed so far cover (omitted ones left out).
    covered_s: f64,
    /// The test counts packets (UDP); `None` before its first line.
    packets: Option<bool>,
    directions: BTreeMap<String, Sums>,
}

impl Watch {
    /// Watches the criteria of `list` that qualify ([`unwatchable`]), each
    /// with its grace period; `None` when none does.
    pub fn new(list: &[(Criterion, Duration)]) -> Option<Watch> {
        let criteria: Vec<(Criterion, f64)> = list
            .iter()
            .filter(|(c, _)| unwatchable(c).is_none())
            .map(|(c, g)| (c.clone(), g.as_secs_f64()))
            .collect();
        (!criteria.is_empty()).then_some(Watch {
            criteria,
            covered_s: 0.0,
            packets: None,
            directions: BTreeMap::new(),
        })
    }

    /// Takes the interval lines completed since the last call and returns
    /// the first criterion that has clearly failed: its grace period is
    /// covered and its figure over every line so far misses the bound.
    /// `elapsed_s` is the test's time now, for the record.
    pub fn check(&mut self, slices: &[Slice], elapsed_s: f64) -> Option<AbortRecord> {
        if slices.is_empty() {
            return None;
        }
        for s in slices.iter().filter(|s| !s.omitted) {
            self.covered_s += (s.to_s - s.from_s).max(0.0);
            self.packets = Some(s.packets);
            for d in &s.directions {
                let sum = self.directions.entry(d.direction.clone()).or_default();
                sum.tx_packets += d.tx_packets;
                sum.rx_packets += d.rx_packets;
                sum.rx_bytes += d.rx_bytes;
                sum.lost += d.lost;
                sum.retransmits += d.retransmits;
            }
        }
        for (c, grace_s) in &self.criteria {
            // The lines cover whole slices; a hair under counts as covered.
            if self.covered_s + 1e-6 < *grace_s {
                continue;
            }
            let Some(v) = self.figure(c.figure.name) else {
                continue;
            };
            if c.op.holds(v, c.value) {
                continue;
            }
            let kind = c.figure.kind;
            return Some(AbortRecord {
                expect: c.text.clone(),
                test: String::new(),
                figure: c.figure.name.to_string(),
                expected: c.value,
                measured: v,
                over_s: self.covered_s,
                after_s: elapsed_s,
                detail: format!(
                    "aborted after {elapsed_s:.1} s: {} failed: {} over {:.1} s",
                    c.text,
                    criteria::show(kind, v),
                    self.covered_s
                ),
            });
        }
        None
    }

    /// `name` over the intervals so far, the worse of the directions that
    /// measure it; `None` when no line carries it (a UDP figure of a TCP
    /// test, a loss before any frame was sent).
    pub fn figure(&self, name: &str) -> Option<f64> {
        let packets = self.packets?;
        let secs = self.covered_s;
        let per_direction = |d: &Sums| -> Option<f64> {
            let rate = |n: f64| (secs > 0.0).then(|| n / secs);
            match (name, packets) {
                ("loss", true) => (d.tx_packets > 0).then(|| d.lost as f64 / d.tx_packets as f64),
                ("lost", true) => Some(d.lost as f64),
                (RX_PPS, true) => rate(d.rx_packets as f64),
                (TX_PPS, true) => rate(d.tx_packets as f64),
                // UDP lines count L2 bytes with the FCS; L1 adds 20 B a frame.
                ("l1_bps", true) => rate((d.rx_bytes + 20 * d.rx_packets) as f64 * 8.0),
                ("l2_bps", _) | ("goodput", false) => rate(d.rx_bytes as f64 * 8.0),
                (RETRANSMITS, false) => Some(d.retransmits as f64),
                _ => None,
            }
        };
        let lower_is_better = criteria::figure(name).is_some_and(|f| f.lower_is_better);
        self.directions
            .values()
            .filter_map(per_direction)
            .reduce(|a, b| if lower_is_better { a.max(b) } else { a.min(b) })
    }
}

/// The grace period of a test cut every `interval`: `after`, or
/// [`GRACE_INTERVALS`] of its intervals.
pub fn grace(after: Option<Duration>, interval: Duration) -> Duration {
    after.unwrap_or(interval * GRACE_INTERVALS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::criteria::parse;
    use crate::runner::slices::SliceFigures;

    /// A UDP line of second `k`: `tx` sent, `lost` of them missing, 1518 B frames.
    fn udp(k: u32, tx: u64, lost: u64) -> Slice {
        Slice {
            from_s: k as f64,
            to_s: k as f64 + 1.0,
            omitted: false,
            jobs: 2,
            of_jobs: 2,
            packets: true,
            directions: vec![SliceFigures {
                direction: "gen_to_sink".into(),
                tx_packets: tx,
                tx_bytes: tx * 1518,
                rx_packets: tx - lost,
                rx_bytes: (tx - lost) * 1518,
                lost,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn tcp(k: u32, bytes: u64, retransmits: u64) -> Slice {
        Slice {
            from_s: k as f64,
            to_s: k as f64 + 1.0,
            omitted: false,
            jobs: 2,
            of_jobs: 2,
            packets: false,
            directions: vec![SliceFigures {
                direction: "gen_to_sink".into(),
                tx_bytes: bytes,
                rx_bytes: bytes,
                retransmits,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn watch(list: &[&str], grace_s: u64) -> Watch {
        let list: Vec<(Criterion, Duration)> = list
            .iter()
            .map(|c| (parse(c).unwrap(), Duration::from_secs(grace_s)))
            .collect();
        Watch::new(&list).expect("a watchable criterion")
    }

    #[test]
    fn nothing_fails_inside_the_grace_period() {
        let mut w = watch(&["loss<=0.1%"], 3);
        // 5 % loss from the first second: still inside 3 s of grace.
        assert_eq!(w.check(&[udp(0, 1000, 50)], 1.0), None);
        assert_eq!(w.check(&[udp(1, 1000, 50)], 2.0), None);
        let a = w.check(&[udp(2, 1000, 50)], 4.0).expect("failed after 3 s");
        assert_eq!(a.expect, "loss<=0.1%");
        assert_eq!(a.figure, "loss");
        assert!((a.measured - 0.05).abs() < 1e-12, "{a:?}");
        assert_eq!((a.over_s, a.after_s), (3.0, 4.0));
        assert_eq!(
            a.detail,
            "aborted after 4.0 s: loss<=0.1% failed: 5 % over 3.0 s"
        );
    }

    #[test]
    fn figures_are_cumulative_not_the_last_interval() {
        // A burst of loss in second 0, none after: loss over every frame
        // sent so far is 150 of 3000 = 5 % at 3 s (fails 4 %), and 150 of
        // 5000 = 3 % at 5 s; the last interval alone lost nothing.
        let mut w = watch(&["loss<=4%"], 3);
        assert_eq!(w.check(&[udp(0, 1000, 150), udp(1, 1000, 0)], 2.0), None);
        let a = w.check(&[udp(2, 1000, 0)], 3.0).expect("5 % > 4 %");
        assert!((a.measured - 0.05).abs() < 1e-12);
        let mut w = watch(&["loss<=4%"], 5);
        let lines: Vec<Slice> = (0..5)
            .map(|k| udp(k, 1000, if k == 0 { 150 } else { 0 }))
            .collect();
        assert_eq!(w.check(&lines, 5.0), None, "3 % over 5 s passes");
        assert!((w.figure("loss").unwrap() - 0.03).abs() < 1e-12);
        // A rate is the mean of the lines so far: 3000 then 1000 pps.
        let mut w = watch(&["rx_pps>=2500pps"], 2);
        assert_eq!(w.check(&[udp(0, 3000, 0), udp(1, 3000, 0)], 2.0), None);
        let a = w.check(&[udp(2, 1000, 0)], 3.0).expect("mean 2333 pps");
        assert!((a.measured - 7000.0 / 3.0).abs() < 1e-9, "{a:?}");
    }

    #[test]
    fn a_passing_criterion_never_aborts() {
        let mut w = watch(&["loss<=10%", "rx_pps>=900pps", "l2_bps>=10Mbit/s"], 1);
        for k in 0..60 {
            assert_eq!(w.check(&[udp(k, 1000, 50)], k as f64 + 1.0), None);
        }
        // l1 = (1518 + 20) B · 8 · 950 pps; l2 = 1518 B · 8 · 950 pps.
        assert!((w.figure("l1_bps").unwrap() - 1538.0 * 8.0 * 950.0).abs() < 1e-6);
        assert!((w.figure("l2_bps").unwrap() - 1518.0 * 8.0 * 950.0).abs() < 1e-6);
        assert!((w.figure("tx_pps").unwrap() - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn omitted_lines_count_neither_in_figures_nor_in_the_grace_period() {
        let mut w = watch(&["loss<=1%"], 2);
        let mut first = udp(0, 1000, 1000);
        first.omitted = true;
        assert_eq!(w.check(&[first, udp(1, 1000, 0)], 2.0), None);
        assert_eq!(w.check(&[udp(2, 1000, 0)], 3.0), None);
        assert_eq!(w.figure("loss"), Some(0.0));
    }

    #[test]
    fn the_worse_direction_counts() {
        let mut s = udp(0, 1000, 10);
        let mut back = s.directions[0].clone();
        back.direction = "sink_to_gen".into();
        back.lost = 100;
        back.rx_packets = 900;
        s.directions.push(back);
        let mut w = watch(&["loss<=5%"], 1);
        let a = w.check(&[s], 1.0).expect("the reverse lost 10 %");
        assert!((a.measured - 0.1).abs() < 1e-12);
        assert_eq!(w.figure("rx_pps"), Some(900.0));
    }

    #[test]
    fn tcp_lines_give_goodput_and_retransmits() {
        let mut w = watch(&["goodput>=1Gbit/s", "retransmits<=5"], 2);
        assert_eq!(w.check(&[tcp(0, 200_000_000, 0)], 1.0), None);
        assert_eq!(w.check(&[tcp(1, 200_000_000, 0)], 2.0), None, "1.6 Gbit/s");
        let a = w.check(&[tcp(2, 200_000_000, 9)], 3.0).expect("9 > 5");
        assert_eq!((a.figure.as_str(), a.measured), ("retransmits", 9.0));
        // UDP figures are not in TCP lines: never a verdict on them.
        let mut w = watch(&["loss<=0.1%"], 0);
        assert_eq!(w.check(&[tcp(0, 1, 0)], 1.0), None);
        assert_eq!(w.figure("loss"), None);
    }

    #[test]
    fn which_criteria_qualify() {
        let ok = |c: &str| unwatchable(&parse(c).unwrap()).is_none();
        for c in [
            "loss<=0.1%",
            "lost<10",
            "rx_pps>=1Mpps",
            "tx_pps>=1Mpps",
            "l1_bps>=1Gbit/s",
            "l2_bps>=1Gbit/s",
            "goodput>=9Gbit/s",
            "retransmits<=100",
        ] {
            assert!(ok(c), "{c} is watchable");
        }
        for c in [
            "p99<=2ms",
            "jitter<=1ms",
            "cpu<=80%",
            "dut_loss<=1%",
            "ndr>=1Mpps",
            "line_pct>=90%",
            "requests_per_s>=1k",
            "lost>=10",
            "retransmits==0",
        ] {
            assert!(!ok(c), "{c} is not watchable");
        }
        let why = unwatchable(&parse("p99<=2ms").unwrap()).unwrap();
        assert!(why.contains("known only when the test ends"), "{why}");
        let why = unwatchable(&parse("lost>=10").unwrap()).unwrap();
        assert!(why.contains("lost<="), "{why}");
        // A watch of criteria none of which qualifies is none.
        let p99 = (parse("p99<=2ms").unwrap(), Duration::from_secs(1));
        assert!(Watch::new(std::slice::from_ref(&p99)).is_none());
        let loss = (parse("loss<=1%").unwrap(), Duration::from_secs(1));
        assert_eq!(Watch::new(&[p99, loss]).unwrap().criteria.len(), 1);
    }

    #[test]
    fn grace_defaults_to_three_intervals() {
        assert_eq!(grace(None, Duration::from_secs(1)), Duration::from_secs(3));
        assert_eq!(
            grace(None, Duration::from_millis(500)),
            Duration::from_millis(1500)
        );
        assert_eq!(
            grace(Some(Duration::from_secs(10)), Duration::from_secs(1)),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn each_criterion_keeps_its_own_grace_period() {
        let list = [
            (parse("loss<=1%").unwrap(), Duration::from_secs(5)),
            (parse("rx_pps>=2kpps").unwrap(), Duration::from_secs(1)),
        ];
        let mut w = Watch::new(&list).unwrap();
        let a = w.check(&[udp(0, 1000, 50)], 1.0).expect("rx_pps after 1 s");
        assert_eq!(a.figure, "rx_pps");
    }
}
