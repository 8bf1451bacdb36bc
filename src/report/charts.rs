//! What each chart of the HTML report receives: axes, series and the aligned
//! data arrays (`data[0]` is x, `data[i]` belongs to `series[i-1]`), built
//! from results documents. `report.js` turns a [`Chart`] into a uPlot chart
//! without knowing what it shows, so a new kind of chart (ramps: offered vs
//! forwarded with the ideal line; searches: trials as points) is a new
//! builder here, not new JavaScript. Snapshot tests pin this data.

use super::figures::{self, IntervalFigures};
use super::format::esc;
use super::registry;
use super::run::Run;
use crate::results::{DirectionResult, RunResults, TestResult, TestStatus};
use serde::Serialize;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Chart {
    /// Unique in the page; also the id of the element it is drawn in.
    pub id: String,
    pub title: String,
    pub x: Axis,
    /// Left axis first; a second one is drawn on the right.
    pub y: Vec<Axis>,
    pub series: Vec<Series>,
    /// `data[0]`: x values; `data[i]`: values of `series[i - 1]`, `null`
    /// where a series has no value at that x.
    pub data: Vec<Vec<Option<f64>>>,
    /// One line under the chart saying how to read it.
    pub note: String,
    /// Values hold from their x to the next x (rates per interval): x holds
    /// each interval's start and, last, the end of the last interval, where
    /// every series repeats its last value.
    pub steps: bool,
    /// Vertical lines at an x value with a label (a saturation point).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<Mark>,
    /// Category names for x = 0, 1, 2, ... (bar charts: one bar per core).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub x_labels: Vec<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub label: String,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Axis {
    /// Scale name that series refer to.
    pub scale: String,
    pub label: String,
    /// `s`, `pps`, `bit/s`, `%`, `count`: how values are formatted.
    pub unit: String,
    /// Lower end of the axis (0 for rates, so flat lines are not magnified).
    pub min: Option<f64>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub scale: String,
    pub color: String,
    /// `solid` (what arrived), `dashed` (what was asked or offered, the
    /// ideal), `dotted` (loss and retransmits), `points` (no line: trials,
    /// tester-limited samples), `bars` (filled bars; stacked bars come
    /// cumulative, the tallest series first).
    pub line: String,
    /// Connect across x values where this series has none (series measured
    /// at their own x, merged into one x axis).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub span_gaps: bool,
    /// `target`, `offered`, `received`, `ideal`, `loss`, `retransmits`,
    /// `trial`, `limited`.
    pub role: String,
}

/// Received / offered / loss colours of the first and second direction.
const DIR_COLORS: [[&str; 3]; 2] = [
    ["#1f5fa8", "#8fb4e3", "#d62728"],
    ["#c8590f", "#f2b27a", "#8c2d9c"],
];
/// One colour per run in comparisons.
pub const RUN_COLORS: [&str; 8] = [
    "#1f5fa8", "#c8590f", "#2a9d3f", "#8c2d9c", "#b8860b", "#17a2b8", "#e377c2", "#7f7f7f",
];
pub(super) const IDEAL_COLOR: &str = "#444444";

/// Six significant digits: enough for any plot, and the page stays small.
pub(super) fn sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let mag = v.abs().log10().floor() as i32;
    let scale = 10f64.powi(5 - mag);
    (v * scale).round() / scale
}

pub(super) fn axis(scale: &str, label: &str, unit: &str, min: Option<f64>) -> Axis {
    Axis {
        scale: scale.into(),
        label: label.into(),
        unit: unit.into(),
        min,
    }
}

pub(super) fn series(label: String, scale: &str, color: &str, role: &str) -> Series {
    const RETRANSMITS: &str = registry::RETRANSMITS.label;
    let line = match role {
        "received" => "solid",
        "loss" | RETRANSMITS => "dotted",
        "trial" | "limited" => "points",
        _ => "dashed",
    };
    Series {
        label,
        scale: scale.into(),
        color: color.into(),
        line: line.into(),
        span_gaps: false,
        role: role.into(),
    }
}

/// Only intervals both ends reported are plotted: the receiver's drain after
/// the sender stopped would show as a collapse that did not happen. CSV keeps
/// every interval.
fn plotted(t: &TestResult, d: &DirectionResult) -> Vec<IntervalFigures> {
    figures::intervals(t, d)
        .into_iter()
        .filter(|f| f.complete)
        .collect()
}

/// Lines up several interval lists by index for a step chart: x is the
/// start of the first list's interval at each index, then the end of the
/// last interval.
fn align(lists: &[Vec<IntervalFigures>]) -> Vec<Option<f64>> {
    let n = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut xs: Vec<Option<f64>> = (0..n)
        .map(|i| lists.iter().find_map(|l| l.get(i)).map(|f| sig(f.t_start)))
        .collect();
    if n > 0 {
        xs.push(
            lists
                .iter()
                .find_map(|l| l.get(n - 1))
                .map(|f| sig(f.t_end)),
        );
    }
    xs
}

/// One series' values for x from [`align`] (`n` intervals, `n + 1` x
/// values): a list shorter than `n` closes its last step where the next
/// interval starts and has no values after it.
fn column(
    list: &[IntervalFigures],
    n: usize,
    f: impl Fn(&IntervalFigures) -> Option<f64>,
) -> Vec<Option<f64>> {
    (0..=n)
        .map(|i| {
            let at = if i == list.len() {
                i.checked_sub(1)
            } else {
                Some(i)
            };
            at.and_then(|i| list.get(i)).and_then(&f).map(sig)
        })
        .collect()
}

fn test_note(t: &TestResult) -> String {
    let what = if figures::is_tcp(t) {
        "TCP payload goodput per interval (bit/s), sent vs received; retransmitted segments on the right"
    } else {
        "Packets per second per interval, offered vs received; loss (missing by sequence number / expected in the interval) on the right"
    };
    format!("{what}. Intervals both ends reported; drag to zoom, double-click to reset, click a legend entry to hide it.")
}

/// One direction's lines of a test's chart, each with its values: the
/// target (paced UDP), what was offered and received, and what went wrong
/// (retransmits or loss) on its own axis.
fn direction_lines(
    list: &[IntervalFigures],
    n: usize,
    dir: &str,
    [rx_color, tx_color, loss_color]: [&str; 3],
    tcp: bool,
) -> Vec<(Series, Vec<Option<f64>>)> {
    let mut out = Vec::new();
    if !tcp && list.iter().any(|f| f.target_pps.is_some()) {
        out.push((
            series(format!("target {dir}"), "rate", IDEAL_COLOR, "target"),
            column(list, n, |f| f.target_pps),
        ));
    }
    let (offered_label, received_label) = if tcp {
        ("sent", "received")
    } else {
        ("offered", "received")
    };
    out.push((
        series(
            format!("{offered_label} {dir}"),
            "rate",
            tx_color,
            "offered",
        ),
        column(list, n, |f| if tcp { f.tx_l2_bps } else { f.tx_pps }),
    ));
    out.push((
        series(
            format!("{received_label} {dir}"),
            "rate",
            rx_color,
            "received",
        ),
        column(list, n, |f| if tcp { f.rx_l2_bps } else { f.rx_pps }),
    ));
    // What goes wrong, on its own axis: retransmits per interval, or
    // loss in %.
    let (trouble, per) = if tcp {
        (&registry::RETRANSMITS, 1.0)
    } else {
        (&registry::LOSS_RATIO, 100.0)
    };
    out.push((
        series(
            format!("{} {dir}", trouble.label),
            "extra",
            loss_color,
            trouble.label,
        ),
        column(list, n, |f| (trouble.interval)(f, 0.0).map(|r| r * per)),
    ));
    out
}

/// One run's lines of a comparison chart, each with its values: its
/// offered load as the ideal (unless the runs were paced), what it
/// received and, for UDP, its loss.
fn run_lines(
    label: &str,
    color: &str,
    list: &[IntervalFigures],
    n: usize,
    tcp: bool,
    paced: bool,
) -> Vec<(Series, Vec<Option<f64>>)> {
    let mut out = Vec::new();
    if !paced {
        out.push((
            series(format!("{label} ideal (offered)"), "rate", color, "ideal"),
            column(list, n, |f| if tcp { f.tx_l2_bps } else { f.tx_pps }),
        ));
    }
    out.push((
        series(label.to_string(), "rate", color, "received"),
        column(list, n, |f| if tcp { f.rx_l2_bps } else { f.rx_pps }),
    ));
    if !tcp {
        out.push((
            series(format!("{label} loss"), "extra", color, "loss"),
            column(list, n, |f| f.loss_ratio.map(|r| r * 100.0)),
        ));
    }
    out
}

/// The time-series chart of one test of one run: every direction's offered
/// and received rate, and its loss (UDP) or retransmits (TCP).
pub fn test_chart(id: &str, t: &TestResult) -> Option<Chart> {
    if t.status != TestStatus::Ok || t.directions.is_empty() {
        return None;
    }
    let tcp = figures::is_tcp(t);
    let lists: Vec<Vec<IntervalFigures>> = t.directions.iter().map(|d| plotted(t, d)).collect();
    let xs = align(&lists);
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() - 1;
    let mut series_list = Vec::new();
    let mut data = vec![xs];
    for (i, (d, list)) in t.directions.iter().zip(&lists).enumerate() {
        let colors = DIR_COLORS[i % DIR_COLORS.len()];
        let dir = figures::dir_label(&d.direction);
        for (line, col) in direction_lines(list, n, &dir, colors, tcp) {
            series_list.push(line);
            data.push(col);
        }
    }
    let y = if tcp {
        vec![
            axis("rate", "goodput", "bit/s", Some(0.0)),
            axis("extra", "retransmits per interval", "count", Some(0.0)),
        ]
    } else {
        vec![
            axis("rate", "packets per second", "pps", Some(0.0)),
            axis("extra", "loss", "%", Some(0.0)),
        ]
    };
    Some(Chart {
        id: id.into(),
        title: t.name.clone(),
        x: axis("x", "time since the sender started", "s", None),
        y,
        series: series_list,
        data,
        note: test_note(t),
        steps: true,
        marks: Vec::new(),
        x_labels: Vec::new(),
    })
}

/// Charts of one run: one per test that ran.
pub fn run_charts(prefix: &str, r: &RunResults) -> Vec<Chart> {
    r.tests
        .iter()
        .enumerate()
        .filter_map(|(i, t)| test_chart(&format!("{prefix}t{i}"), t))
        .collect()
}

/// One test and direction as runs are compared: matched by what was
/// measured (protocol, IP version, frame, flows, rate, streams; the n-th
/// such test of its run, the i-th direction), not by its generated name,
/// so `udp 64B` of a plan meets `udp 64b one` of an ad-hoc run. The name
/// and direction shown are the first run's.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareKey {
    pub name: String,
    pub direction: String,
    /// The other names the test has in later runs, if any.
    pub aliases: Vec<String>,
    what: String,
    nth: usize,
    dir: usize,
}

impl CompareKey {
    /// The test's name with its other names, for tables.
    pub fn label(&self) -> String {
        if self.aliases.is_empty() {
            self.name.clone()
        } else {
            format!("{} (= {})", self.name, self.aliases.join(", "))
        }
    }
}

/// What a test measured, as comparison matches it.
fn measured(t: &TestResult) -> String {
    let p = &t.params;
    format!(
        "{:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}",
        p.protocol,
        p.ip_version,
        p.direction,
        p.frame,
        p.flow_mode,
        p.flows,
        p.rate_pps.map(|r| r.round() as u64),
        p.rate_profile.is_some(),
        p.streams,
    )
}

/// The ok tests of a run with their comparison identity (what, n-th).
fn identities(r: &RunResults) -> Vec<(&TestResult, String, usize)> {
    let mut seen: Vec<String> = Vec::new();
    r.tests
        .iter()
        .filter(|t| t.status == TestStatus::Ok)
        .map(|t| {
            let what = measured(t);
            let nth = seen.iter().filter(|w| **w == what).count();
            seen.push(what.clone());
            (t, what, nth)
        })
        .collect()
}

/// Every test and direction in the order the runs first show them.
pub fn comparison_keys(runs: &[Run]) -> Vec<CompareKey> {
    let mut keys: Vec<CompareKey> = Vec::new();
    for r in runs {
        for (t, what, nth) in identities(&r.results) {
            for (dir, d) in t.directions.iter().enumerate() {
                match keys
                    .iter_mut()
                    .find(|k| k.what == what && k.nth == nth && k.dir == dir)
                {
                    Some(k) => {
                        if k.name != t.name && !k.aliases.contains(&t.name) {
                            k.aliases.push(t.name.clone());
                        }
                    }
                    None => keys.push(CompareKey {
                        name: t.name.clone(),
                        direction: d.direction.clone(),
                        aliases: Vec::new(),
                        what: what.clone(),
                        nth,
                        dir,
                    }),
                }
            }
        }
    }
    keys
}

/// The test and direction `key` stands for in one run, if it ran there.
pub fn find<'a>(
    r: &'a RunResults,
    key: &CompareKey,
) -> Option<(&'a TestResult, &'a DirectionResult)> {
    identities(r)
        .into_iter()
        .find(|(_, what, nth)| *what == key.what && *nth == key.nth)
        .and_then(|(t, _, _)| t.directions.get(key.dir).map(|d| (t, d)))
}

/// One chart per test and direction across runs: each run's received rate
/// (and loss), and an "ideal" line at the offered load.
pub fn comparison_charts(runs: &[Run]) -> Vec<Chart> {
    let mut out = Vec::new();
    for (k, key) in comparison_keys(runs).iter().enumerate() {
        let found: Vec<Option<(&TestResult, &DirectionResult)>> =
            runs.iter().map(|r| find(&r.results, key)).collect();
        let Some((first_t, _)) = found.iter().flatten().next() else {
            continue;
        };
        let tcp = figures::is_tcp(first_t);
        let lists: Vec<Vec<IntervalFigures>> = found
            .iter()
            .map(|f| f.map(|(t, d)| plotted(t, d)).unwrap_or_default())
            .collect();
        let xs = align(&lists);
        if xs.is_empty() {
            continue;
        }
        let n = xs.len() - 1;
        let mut series_list = Vec::new();
        let mut data = vec![xs];
        // The ideal is everything offered arriving: one line at the rate
        // asked for when the runs were paced, else each run's own offered
        // load (runs sending as fast as they can offer different loads).
        let paced = lists.iter().flatten().any(|f| f.target_pps.is_some());
        if let (true, Some(list)) = (paced, lists.iter().find(|l| !l.is_empty())) {
            series_list.push(series(
                "ideal: target rate".into(),
                "rate",
                IDEAL_COLOR,
                "ideal",
            ));
            data.push(column(list, n, |f| f.target_pps));
        }
        for (i, (run, list)) in runs.iter().zip(&lists).enumerate() {
            if list.is_empty() {
                continue;
            }
            let color = RUN_COLORS[i % RUN_COLORS.len()];
            for (line, col) in run_lines(&run.label, color, list, n, tcp, paced) {
                series_list.push(line);
                data.push(col);
            }
        }
        let mut y = vec![if tcp {
            axis("rate", "received goodput", "bit/s", Some(0.0))
        } else {
            axis("rate", "received packets per second", "pps", Some(0.0))
        }];
        if !tcp {
            y.push(axis("extra", "loss", "%", Some(0.0)));
        }
        out.push(Chart {
            id: format!("cmp{k}"),
            title: format!("{} · {}", key.label(), figures::dir_label(&key.direction)),
            x: axis("x", "time since the sender started", "s", None),
            y,
            series: series_list,
            data,
            note: format!(
                "{} per interval, a solid line per run; dashed: the ideal, everything offered arriving{}. \
                 Drag to zoom, double-click to reset, click a legend entry to hide it.",
                if tcp { "Received goodput" } else { "Received packets per second" },
                if tcp { "" } else { "; dotted: each run's loss, on the right" }
            ),
            steps: true,
            marks: Vec::new(),
            x_labels: Vec::new(),
        });
    }
    out
}

/// The figure a chart is drawn into, with its caption and a message for
/// readers without JavaScript.
pub fn chart_figure(c: &Chart, subtitle: &str) -> String {
    let labels: Vec<&str> = c.series.iter().map(|s| s.label.as_str()).collect();
    format!(
        "<figure class=\"chart\" id=\"{id}\" data-chart=\"{id}\" data-series-expected=\"{n}\">\
<figcaption><span class=\"title\">{title}</span> <span class=\"muted\">{sub}</span></figcaption>\
<div class=\"plot\" data-series-labels=\"{labels}\"></div>\
<noscript><p class=\"muted\">This chart needs JavaScript; the tables hold the figures.</p></noscript>\
<p class=\"legend\">{note}</p></figure>",
        id = esc(&c.id),
        n = c.series.len(),
        title = esc(&c.title),
        sub = esc(subtitle),
        labels = esc(&labels.join("|")),
        note = esc(&c.note),
    )
}

#[cfg(test)]
mod tests;
