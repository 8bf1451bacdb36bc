//! The figure registry: every figure a test direction records, as one
//! entry each — its name in results documents (which is also its CSV
//! column, its `data-key` in the HTML tables and its figure in
//! comparisons), the `--expect` figure it is (`model::criteria::FIGURES`,
//! which gives its unit and whether lower is better), its label, the
//! tests that have it, its Prometheus series, and how it is computed from
//! a test direction and from one interval.
//!
//! The outputs read figures through it: the CSV writer's figure columns
//! are [`ALL`] in order, comparisons and baselines take direction and unit
//! from [`Figure::kind`] and [`Figure::lower_is_better`], Prometheus its
//! series names, the terminal tables their figure columns' heads and text
//! ([`Figure::head`], [`Figure::text`]), the HTML summary cards the rate
//! a test is judged by ([`received`]). A new figure is one entry here plus its computation (the
//! `summary` and `interval` functions).
//!
//! A figure's name appears as a string only here (and in the `--expect`
//! grammar's aliases); `tests/layers.rs` counts the files that spell it.

use crate::model::criteria::{self, Kind};
use crate::model::units;
use crate::report::figures::{self, is_tcp, IntervalFigures};
use crate::results::{DirectionResult, TestResult};

/// Which tests have a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tests {
    /// Packet streams (UDP): TCP and HTTP leave it empty.
    Packets,
    /// Any test that records it.
    All,
}

/// How Prometheus exposes a figure: one series, its value the figure
/// divided by `per` (ratios 0–1 from %).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Series {
    pub name: &'static str,
    /// `gauge` or `counter`.
    pub kind: &'static str,
    pub help: &'static str,
    pub per: f64,
}

/// One figure of a test direction.
pub struct Figure {
    /// Its name in results documents, CSV columns, the HTML tables'
    /// `data-key` and comparisons.
    pub key: &'static str,
    /// The `--expect` figures it is, if criteria can name it (received L2
    /// is also TCP's goodput): its unit and direction come from the first.
    pub criteria: &'static [&'static str],
    /// How a comparison table names it.
    pub label: &'static str,
    /// Its column's head in the terminal tables, unit included (the
    /// value as [`Figure::text`] writes it).
    pub head: &'static str,
    /// Its head in the TCP and HTTP table, where that differs.
    pub tcp_head: Option<&'static str>,
    /// Its unit when no criterion names it.
    pub unit: Kind,
    pub tests: Tests,
    /// Its Prometheus series, where it has one of its own.
    pub series: Option<Series>,
    /// The figure over a whole test direction.
    pub summary: fn(&TestResult, &DirectionResult) -> Option<f64>,
    /// The figure over one interval; the second argument is the run's line
    /// rate in bit/s (0: unknown).
    pub interval: fn(&IntervalFigures, f64) -> Option<f64>,
}

impl Figure {
    /// The `--expect` figure it is.
    pub fn criterion(&self) -> Option<&'static criteria::Figure> {
        self.criteria.first().and_then(|c| criteria::figure(c))
    }

    /// What it measures, which decides its unit.
    pub fn kind(&self) -> Kind {
        self.criterion().map(|c| c.kind).unwrap_or(self.unit)
    }

    /// Lower is better (loss, retransmits).
    pub fn lower_is_better(&self) -> bool {
        self.criterion().is_some_and(|c| c.lower_is_better)
    }

    /// Whether test `t` has this figure.
    pub fn applies(&self, t: &TestResult) -> bool {
        match self.tests {
            Tests::Packets => !is_tcp(t),
            Tests::All => true,
        }
    }

    /// Its column's head in the terminal table of TCP and HTTP tests
    /// (`tcp`) or of packet streams.
    pub fn head(&self, tcp: bool) -> &'static str {
        match self.tcp_head {
            Some(h) if tcp => h,
            _ => self.head,
        }
    }

    /// Value `v` as the terminal tables write it under [`Figure::head`]:
    /// whole packets per second and counts, Gbit/s with 3 decimals, loss
    /// in % with 3, % of the line rate with 1.
    pub fn text(&self, v: f64) -> String {
        match self.kind() {
            Kind::Bps => format!("{:.3}", v / 1e9),
            Kind::Ratio => format!("{:.3}", v * 100.0),
            Kind::Percent => format!("{v:.1}"),
            _ => format!("{v:.0}"),
        }
    }

    /// The figure over direction `d` of test `t`; none where the test
    /// does not have it.
    pub fn value(&self, t: &TestResult, d: &DirectionResult) -> Option<f64> {
        if self.applies(t) {
            (self.summary)(t, d)
        } else {
            None
        }
    }
}

/// Packets per second sent.
pub const TX_PPS: Figure = Figure {
    key: "tx_pps",
    criteria: &["tx_pps"],
    label: "offered",
    head: "Offered pps",
    tcp_head: None,
    unit: Kind::Pps,
    tests: Tests::Packets,
    series: Some(Series {
        name: "linerate_offered_packets_per_second",
        kind: "gauge",
        help: "Packets per second the sender sent.",
        per: 1.0,
    }),
    summary: |_, d| Some(d.tx_pps),
    interval: |f, _| f.tx_pps,
};

/// Packets per second received.
pub const RX_PPS: Figure = Figure {
    key: "rx_pps",
    criteria: &["rx_pps"],
    label: "received",
    head: "Received pps",
    tcp_head: None,
    unit: Kind::Pps,
    tests: Tests::Packets,
    series: Some(Series {
        name: "linerate_received_packets_per_second",
        kind: "gauge",
        help: "Packets per second that arrived.",
        per: 1.0,
    }),
    summary: |_, d| Some(d.rx_pps),
    interval: |f, _| f.rx_pps,
};

/// L2 bit/s sent (TCP: payload).
pub const TX_L2_BPS: Figure = Figure {
    key: "tx_l2_bps",
    criteria: &[],
    label: "offered L2",
    head: "Offered L2 Gbit/s",
    tcp_head: None,
    unit: Kind::Bps,
    tests: Tests::All,
    series: None,
    summary: |t, d| {
        if is_tcp(t) {
            Some(figures::offered(t, d))
        } else {
            figures::avg_frame(t).map(|f| units::l2_bps(d.tx_pps, f))
        }
    },
    interval: |f, _| f.tx_l2_bps,
};

/// L2 bit/s received (TCP, HTTP: goodput).
pub const RX_L2_BPS: Figure = Figure {
    key: "rx_l2_bps",
    criteria: &["l2_bps", "goodput"],
    label: "goodput",
    head: "L2 Gbit/s",
    tcp_head: Some("Goodput Gbit/s"),
    unit: Kind::Bps,
    tests: Tests::All,
    series: None,
    summary: |_, d| Some(d.rx_l2_bps),
    interval: |f, _| f.rx_l2_bps,
};

/// L1 bit/s received (L2 plus 20 B per frame).
pub const RX_L1_BPS: Figure = Figure {
    key: "rx_l1_bps",
    criteria: &["l1_bps"],
    label: "received L1",
    head: "L1 Gbit/s",
    tcp_head: None,
    unit: Kind::Bps,
    tests: Tests::All,
    series: None,
    summary: |_, d| d.rx_l1_bps,
    interval: |f, _| f.rx_l1_bps,
};

/// Received L1 rate (TCP: goodput) in % of the line rate.
pub const LINE_RATE_PCT: Figure = Figure {
    key: "line_rate_pct",
    criteria: &["line_pct"],
    label: "line rate",
    head: "% line",
    tcp_head: None,
    unit: Kind::Percent,
    tests: Tests::All,
    series: Some(Series {
        name: "linerate_line_rate_ratio",
        kind: "gauge",
        help: "Received L1 rate (TCP: goodput) as a share of the line rate, 0-1.",
        per: 100.0,
    }),
    summary: |_, d| d.line_rate_pct,
    interval: |f, line_rate| {
        f.rx_l1_bps
            .or(f.rx_l2_bps)
            .map(|b| b / line_rate * 100.0)
            .filter(|_| line_rate > 0.0)
    },
};

/// Lost frames as a share of those sent, 0..1.
pub const LOSS_RATIO: Figure = Figure {
    key: "loss_ratio",
    criteria: &["loss"],
    label: "loss",
    head: "Loss %",
    tcp_head: None,
    unit: Kind::Ratio,
    tests: Tests::Packets,
    series: Some(Series {
        name: "linerate_loss_ratio",
        kind: "gauge",
        help: "Lost packets as a share of packets sent, 0-1.",
        per: 1.0,
    }),
    summary: |_, d| Some(d.loss_ratio),
    interval: |f, _| f.loss_ratio,
};

/// TCP segments retransmitted.
pub const RETRANSMITS: Figure = Figure {
    key: "retransmits",
    criteria: &["retransmits"],
    label: "retransmits",
    head: "Retransmits",
    tcp_head: None,
    unit: Kind::Count,
    tests: Tests::All,
    series: Some(Series {
        name: "linerate_tcp_retransmitted_segments_total",
        kind: "counter",
        help: "TCP segments the sender retransmitted.",
        per: 1.0,
    }),
    summary: |_, d| d.retransmits.map(|r| r as f64),
    interval: |f, _| f.retransmits.map(|r| r as f64),
};

/// Every figure of a test direction, in the order of the CSV columns.
pub const ALL: &[&Figure] = &[
    &TX_PPS,
    &RX_PPS,
    &TX_L2_BPS,
    &RX_L2_BPS,
    &RX_L1_BPS,
    &LINE_RATE_PCT,
    &LOSS_RATIO,
    &RETRANSMITS,
];

/// The received rate a test is judged by: packets per second for packet
/// streams, goodput for TCP and HTTP.
pub fn received(t: &TestResult) -> &'static Figure {
    if is_tcp(t) {
        &RX_L2_BPS
    } else {
        &RX_PPS
    }
}

/// The figure whose key is `key`.
pub fn by_key(key: &str) -> Option<&'static Figure> {
    ALL.iter().copied().find(|f| f.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_criteria_exist() {
        for (i, f) in ALL.iter().enumerate() {
            assert_eq!(by_key(f.key).map(|g| g.key), Some(f.key));
            assert!(ALL[..i].iter().all(|g| g.key != f.key), "{} twice", f.key);
            for c in f.criteria {
                assert!(criteria::figure(c).is_some(), "{c} is no --expect figure");
            }
        }
        assert_eq!(LOSS_RATIO.kind(), Kind::Ratio);
        assert!(LOSS_RATIO.lower_is_better() && RETRANSMITS.lower_is_better());
        assert!(!RX_PPS.lower_is_better() && !TX_L2_BPS.lower_is_better());
    }

    #[test]
    fn terminal_heads_and_text_follow_the_unit() {
        assert_eq!(RX_L2_BPS.head(false), "L2 Gbit/s");
        assert_eq!(RX_L2_BPS.head(true), "Goodput Gbit/s");
        assert_eq!(RX_PPS.head(true), RX_PPS.head);
        assert_eq!(RX_L2_BPS.text(12_345_678_901.0), "12.346");
        assert_eq!(RX_PPS.text(1_234_567.4), "1234567");
        assert_eq!(LOSS_RATIO.text(0.001_23), "0.123");
        assert_eq!(LINE_RATE_PCT.text(99.94), "99.9");
        assert_eq!(RETRANSMITS.text(1710.0), "1710");
        for (i, f) in ALL.iter().enumerate() {
            assert!(
                ALL[..i].iter().all(|g| g.head != f.head),
                "{} twice",
                f.head
            );
        }
    }

    #[test]
    fn packet_figures_are_empty_for_tcp() {
        let t = crate::report::testdata::tcp_test("tcp");
        let d = &t.directions[0];
        assert_eq!(RX_PPS.value(&t, d), None);
        assert_eq!(LOSS_RATIO.value(&t, d), None);
        assert_eq!(RX_L2_BPS.value(&t, d), Some(d.rx_l2_bps));
        assert_eq!(received(&t).key, RX_L2_BPS.key);
        let u = crate::report::testdata::udp_test("udp", 64);
        let d = &u.directions[0];
        assert_eq!(RX_PPS.value(&u, d), Some(d.rx_pps));
        assert_eq!(received(&u).key, RX_PPS.key);
    }
}
