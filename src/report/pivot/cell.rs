//! What a pivot cell shows: one of the `--expect` figures
//! (`model::criteria::FIGURES`, no list of its own), in its unit or, for a
//! packet rate with `%` appended (`ndr%`), in % of the line rate; the
//! default per kind; and the scale a column of such values is written in.

use crate::model::criteria::{self, Figure, Kind};
use crate::report::error::{fail, Result};
use crate::report::registry;
use crate::results::{Protocol, TestResult};
use std::collections::BTreeMap;

/// A figure, and whether a packet rate is shown in % of the line rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub figure: &'static Figure,
    pub of_line: bool,
}

/// `name`, which must be one of the figures.
fn named(name: &str) -> Cell {
    match criteria::figure(name) {
        Some(figure) => Cell {
            figure,
            of_line: false,
        },
        // The names below are FIGURES' own; a test pins them.
        None => unreachable!("{name} is not in model::criteria::FIGURES"),
    }
}

impl Cell {
    /// `--cell NAME` or `NAME%`.
    pub fn parse(text: &str) -> Result<Cell> {
        let t = text.trim();
        let (name, of_line) = match t.strip_suffix('%') {
            Some(n) => (n.trim(), true),
            None => (t, false),
        };
        let Some(figure) = criteria::figure(name) else {
            fail!(
                "--cell '{text}' is no figure linerate measures; give one of: {} \
                 (a packet rate with % appended, e.g. rx_pps% or ndr%, is shown in % of the line rate)",
                criteria::figure_names()
            );
        };
        if of_line && figure.kind != Kind::Pps {
            fail!(
                "--cell '{text}': only packet rates can be shown in % of the line rate \
                 ({} is {}); drop the %, or use line_pct for a test's received rate",
                figure.name,
                kind_words(figure.kind)
            );
        }
        Ok(Cell { figure, of_line })
    }

    /// As `--cell` takes it back.
    pub fn name(&self) -> String {
        format!(
            "{}{}",
            self.figure.name,
            if self.of_line { "%" } else { "" }
        )
    }

    /// What the figure is, in words.
    pub fn about(&self) -> String {
        if self.of_line {
            format!("{} in % of the line rate", self.figure.about)
        } else {
            self.figure.about.to_string()
        }
    }
}

fn kind_words(k: Kind) -> &'static str {
    match k {
        Kind::Pps => "a packet rate",
        Kind::Bps => "a bit rate",
        Kind::Ratio | Kind::Percent => "a percentage",
        Kind::Seconds => "a duration",
        Kind::Count => "a count",
        Kind::PerSecond => "a rate per second",
    }
}

/// UDP: received rate in % of the line rate (packets per second when no
/// line rate is known); TCP and HTTP: goodput.
pub fn default_for_test(t: &TestResult) -> Cell {
    match t.params.protocol {
        Protocol::Udp if t.directions.iter().any(|d| d.line_rate_pct.is_some()) => {
            named("line_pct")
        }
        Protocol::Udp => named(registry::RX_PPS.key),
        Protocol::Tcp | Protocol::Http => named("goodput"),
    }
}

/// Ramps: the saturation point in % of the line rate.
pub fn default_for_ramp() -> Cell {
    Cell {
        of_line: true,
        ..named("saturation")
    }
}

/// Searches: the NDR in % of the line rate (RFC 2544 throughput when the
/// search found no NDR).
pub fn default_for_search(figures: &BTreeMap<&'static str, f64>) -> Cell {
    let name = ["ndr", "throughput", "pdr"]
        .into_iter()
        .find(|n| figures.contains_key(n))
        .unwrap_or("ndr");
    Cell {
        of_line: true,
        ..named(name)
    }
}

/// A test's received rate in % of the line rate.
pub fn line_pct() -> Cell {
    named("line_pct")
}

/// Figures two directions add up to (rates and counts; not loss ratios,
/// latencies or CPU).
pub fn adds_up(name: &str) -> bool {
    name == "line_pct"
        || criteria::figure(name)
            .is_some_and(|f| matches!(f.kind, Kind::Pps | Kind::Bps | Kind::Count))
}

/// Cells of one class can share a column's unit.
pub fn unit_class(c: &Cell) -> &'static str {
    if c.of_line || c.figure.name == "line_pct" {
        return "% of line";
    }
    match c.figure.kind {
        Kind::Pps => "pps",
        Kind::Bps => "bit/s",
        Kind::Ratio => "ratio",
        Kind::Percent => "%",
        Kind::Seconds => "s",
        Kind::Count => "count",
        Kind::PerSecond => "/s",
    }
}

/// How a set of values of one class is written: divided by `div`, with
/// `unit` after them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub div: f64,
    pub unit: &'static str,
}

impl Scale {
    /// The scale that writes the largest of `values` with 1–3 digits
    /// before the point.
    pub fn for_values(c: &Cell, values: &[f64]) -> Scale {
        let top = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let pick = |steps: &[(f64, &'static str)]| {
            let (div, unit) = steps
                .iter()
                .copied()
                .find(|(d, _)| top >= *d)
                .unwrap_or(steps[steps.len() - 1]);
            Scale { div, unit }
        };
        if c.of_line {
            return Scale {
                div: 1.0,
                unit: "%",
            };
        }
        match c.figure.kind {
            Kind::Percent => Scale {
                div: 1.0,
                unit: "%",
            },
            Kind::Ratio => Scale {
                div: 0.01,
                unit: "%",
            },
            Kind::Pps => pick(&[(1e9, "Gpps"), (1e6, "Mpps"), (1e3, "kpps"), (1.0, "pps")]),
            Kind::Bps => pick(&[
                (1e9, "Gbit/s"),
                (1e6, "Mbit/s"),
                (1e3, "kbit/s"),
                (1.0, "bit/s"),
            ]),
            Kind::Seconds => pick(&[(1.0, "s"), (1e-3, "ms"), (1e-6, "µs")]),
            Kind::Count => Scale { div: 1.0, unit: "" },
            Kind::PerSecond => Scale {
                div: 1.0,
                unit: "/s",
            },
        }
    }

    /// `v` in this scale, three significant digits (more below 1 % so
    /// small shares stay readable), without the unit.
    pub fn number(&self, v: f64) -> String {
        let x = v / self.div;
        let a = x.abs();
        let digits = if a >= 100.0 || (self.unit.is_empty() && x.fract() == 0.0) {
            0
        } else if a >= 10.0 {
            1
        } else if a >= 1.0 || a == 0.0 {
            2
        } else {
            3
        };
        format!("{x:.digits$}")
    }

    /// `v` in this scale with its unit: `12.3 %`, `9.41 Gbit/s`.
    pub fn text(&self, v: f64) -> String {
        if self.unit.is_empty() {
            self.number(v)
        } else if self.unit == "%" {
            format!("{}%", self.number(v))
        } else {
            format!("{} {}", self.number(v), self.unit)
        }
    }

    /// The value as a number in this scale, for CSV.
    pub fn scaled(&self, v: f64) -> f64 {
        v / self.div
    }
}

/// The unit uPlot's axis formats values of this cell in (report.js), and
/// the factor from the cell's base unit to it.
pub fn chart_unit(c: &Cell) -> (&'static str, f64) {
    if c.of_line {
        return ("%", 1.0);
    }
    match c.figure.kind {
        Kind::Percent => ("%", 1.0),
        Kind::Ratio => ("%", 100.0),
        Kind::Pps => ("pps", 1.0),
        Kind::Bps => ("bit/s", 1.0),
        Kind::Seconds => ("s", 1.0),
        Kind::Count | Kind::PerSecond => ("count", 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_figures_of_expect() {
        for c in [
            default_for_ramp(),
            line_pct(),
            named("rx_pps"),
            named("goodput"),
        ] {
            assert_eq!(criteria::figure(c.figure.name), Some(c.figure));
        }
        assert_eq!(default_for_search(&BTreeMap::new()).name(), "ndr%");
    }

    #[test]
    fn parse_takes_names_aliases_and_percent() {
        assert_eq!(Cell::parse("rx_pps").unwrap().name(), "rx_pps");
        assert_eq!(Cell::parse("goodput_bps").unwrap().name(), "goodput");
        assert_eq!(Cell::parse("ndr%").unwrap().name(), "ndr%");
        let e = Cell::parse("speed").unwrap_err().to_string();
        assert!(e.contains("rx_pps, tx_pps") && e.contains("ndr%"), "{e}");
        let e = Cell::parse("loss%").unwrap_err().to_string();
        assert!(e.contains("only packet rates"), "{e}");
    }

    #[test]
    fn scales_write_three_digits() {
        let pps = Cell::parse("rx_pps").unwrap();
        let s = Scale::for_values(&pps, &[1.2e6, 3.4e5]);
        assert_eq!(s.text(1.234e6), "1.23 Mpps");
        assert_eq!(s.text(3.4e5), "0.340 Mpps");
        let loss = Cell::parse("loss").unwrap();
        assert_eq!(Scale::for_values(&loss, &[0.5]).text(0.015), "1.50%");
        let g = Cell::parse("goodput").unwrap();
        assert_eq!(Scale::for_values(&g, &[9.41e9]).text(9.41e9), "9.41 Gbit/s");
        assert_eq!(Scale::for_values(&line_pct(), &[192.0]).text(192.4), "192%");
    }
}
