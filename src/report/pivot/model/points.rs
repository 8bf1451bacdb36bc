//! The points of one run (its tests, ramps and searches) with their sweep
//! coordinates, pseudo-axes and the value each shows in a cell.

use super::{Outcome, Point, Value};
use crate::proto::{Direction, FrameSpec};
use crate::report::pivot::cell::{self, Cell};
use crate::report::registry;
use crate::report::run::Run;
use crate::results::{criteria as measured, Protocol, TestResult, TestStatus};

/// A point's values: its sweep's coordinates, then each of `labels` the
/// sweep did not already set.
fn point_values(
    sweep: Option<&crate::model::sweep::SweepPoint>,
    labels: [(&str, String); 5],
) -> Vec<(String, Value)> {
    let mut values: Vec<(String, Value)> = Vec::new();
    if let Some(s) = sweep {
        for c in &s.coords {
            values.push((
                c.key.clone(),
                Value {
                    text: c.value.clone(),
                    number: c.number,
                },
            ));
        }
    }
    for (k, v) in labels {
        if !values.iter().any(|(x, _)| x == k) {
            values.push((k.to_string(), Value::text(v)));
        }
    }
    values
}

/// Every point of one run, with its sweep coordinates and pseudo-axes.
pub(super) fn collect(run: &Run, asked: Option<Cell>, out: &mut Vec<Point>) {
    let r = &run.results;
    let dut = run.dut_mode().unwrap_or("no DUT").to_string();
    let base = |name: &str,
                sweep: Option<&crate::model::sweep::SweepPoint>,
                profile: String,
                dir: Direction| {
        let test = sweep
            .map(|s| s.sweep.clone())
            .unwrap_or_else(|| name.to_string());
        point_values(
            sweep,
            [
                ("run", run.label.clone()),
                ("dut", dut.clone()),
                ("test", test),
                ("profile", profile),
                ("direction", direction_name(dir).to_string()),
            ],
        )
    };
    let ramp_tests: Vec<usize> = r.ramps.iter().map(|x| x.test).collect();
    for (i, t) in r.tests.iter().enumerate() {
        if ramp_tests.contains(&i) {
            continue;
        }
        let c = asked.unwrap_or_else(|| cell::default_for_test(t));
        let line = asked.is_none().then(|| {
            let l = cell::line_pct();
            (l, test_outcome(t, l, r.line_rate_bps))
        });
        out.push(Point {
            sweep: t.sweep.as_ref().map(|s| s.sweep.clone()),
            values: base(
                &t.name,
                t.sweep.as_ref(),
                test_profile(t),
                t.params.direction,
            ),
            cell: c,
            outcome: test_outcome(t, c, r.line_rate_bps),
            line,
        });
    }
    for ramp in &r.ramps {
        let t = r.tests.get(ramp.test);
        let dir = t.map(|t| t.params.direction).unwrap_or(Direction::Forward);
        let c = asked.unwrap_or_else(cell::default_for_ramp);
        let outcome = match t {
            Some(t) if t.status != TestStatus::Ok => Outcome::Failed(error_of(t)),
            _ => ramp_outcome(ramp, t, c, r.line_rate_bps),
        };
        let line = asked.is_none().then(|| (c, outcome.clone()));
        out.push(Point {
            sweep: ramp.sweep.as_ref().map(|s| s.sweep.clone()),
            values: base(&ramp.name, ramp.sweep.as_ref(), ramp.profile.clone(), dir),
            cell: c,
            outcome,
            line,
        });
    }
    for s in &r.searches {
        let figures = measured::search_figures(s);
        let c = asked.unwrap_or_else(|| cell::default_for_search(&figures));
        let outcome = match figures.get(c.figure.name) {
            Some(v) if c.of_line => of_line(*v, s.line_rate_pps),
            Some(v) => Outcome::Value(*v, false),
            None => Outcome::NotMeasured,
        };
        let line = (asked.is_none() && c.of_line).then(|| (c, outcome.clone()));
        out.push(Point {
            sweep: s.sweep.as_ref().map(|p| p.sweep.clone()),
            values: base(&s.name, s.sweep.as_ref(), s.profile.clone(), s.direction),
            cell: c,
            outcome,
            line,
        });
    }
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Reverse => "reverse",
        Direction::Both => "bidir",
    }
}

/// A test's profile as ramps and searches name theirs: `64b var2`,
/// `imix one`; TCP and HTTP tests: the protocol.
fn test_profile(t: &TestResult) -> String {
    match t.params.protocol {
        Protocol::Tcp => "tcp".into(),
        Protocol::Http => "http".into(),
        Protocol::Udp => {
            let frame = match t.params.frame {
                Some(FrameSpec::Fixed(n)) => format!("{n}b"),
                Some(FrameSpec::Imix) => "imix".into(),
                None => String::new(),
            };
            let mode = t
                .params
                .flow_mode
                .map(|m| format!("{m:?}").to_lowercase())
                .unwrap_or_default();
            format!("{frame} {mode}").trim().to_string()
        }
    }
}

fn error_of(t: &TestResult) -> String {
    t.error.clone().unwrap_or_else(|| match t.status {
        TestStatus::Interrupted => "interrupted".into(),
        TestStatus::Aborted => "aborted".into(),
        _ => "failed".into(),
    })
}

fn of_line(pps: f64, line_rate_pps: f64) -> Outcome {
    if line_rate_pps > 0.0 {
        Outcome::Value(pps / line_rate_pps * 100.0, false)
    } else {
        Outcome::NotMeasured
    }
}

/// A test's cell value: bidirectional tests add their directions' rates
/// and counts (the seed's 192 % of line), and keep the worse loss and
/// latency; other tests as `--expect` measures them.
fn test_outcome(t: &TestResult, c: Cell, line_rate_bps: f64) -> Outcome {
    if t.status != TestStatus::Ok {
        return Outcome::Failed(error_of(t));
    }
    let name = if c.of_line {
        registry::RX_PPS.key
    } else {
        c.figure.name
    };
    let all = measured::test_figures(t);
    let summed = t.params.direction == Direction::Both
        && t.aggregate.is_none()
        && t.directions.len() > 1
        && cell::adds_up(name);
    let v = if summed {
        let per: Vec<f64> = t
            .directions
            .iter()
            .filter_map(|d| measured::direction_test_figures(t, d).get(name).copied())
            .collect();
        (!per.is_empty()).then(|| per.iter().sum())
    } else {
        all.get(name).copied()
    };
    let Some(v) = v else {
        return Outcome::NotMeasured;
    };
    if !c.of_line {
        return Outcome::Value(v, false);
    }
    // Packets per second in % of what the line carries at the test's frames.
    match t.params.average_frame_bytes.filter(|f| *f > 0.0) {
        Some(frame) => of_line(v, line_rate_bps / ((frame + 20.0) * 8.0)),
        None => Outcome::NotMeasured,
    }
}

/// A ramp's cell value: the saturation point (directions summed); a
/// direction that did not saturate counts its peak offered load, and the
/// value is then a lower bound. Other figures: the carrying test's.
fn ramp_outcome(
    ramp: &crate::results::RampResult,
    t: Option<&TestResult>,
    c: Cell,
    line_rate_bps: f64,
) -> Outcome {
    if c.figure.name != "saturation" {
        return match t {
            Some(t) => test_outcome(t, c, line_rate_bps),
            None => Outcome::NotMeasured,
        };
    }
    if ramp.directions.is_empty() {
        return Outcome::NotMeasured;
    }
    let mut sum = 0.0;
    let mut at_least = false;
    for d in &ramp.directions {
        match &d.summary.saturation {
            Some(s) => sum += s.offered_pps,
            None => {
                sum += d.summary.peak_offered_pps;
                at_least = true;
            }
        }
    }
    if c.of_line {
        match of_line(sum, ramp.line_rate_pps) {
            Outcome::Value(v, _) => Outcome::Value(v, at_least),
            o => o,
        }
    } else {
        Outcome::Value(sum, at_least)
    }
}
