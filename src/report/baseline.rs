//! A run against a baseline run, figure by figure (`--baseline`, `linerate
//! check`): a change counts as a regression or an improvement only beyond
//! both the tolerance and twice the larger spread of the two runs (between
//! repetitions, else from interval to interval, as `compare` colours its Δ).

use super::compare::{spread, Noise};
use crate::model::criteria::{self, Kind, Stat};
use crate::results::criteria::{
    subjects, BaselineComparison, Change, FigureChange, Marks, Subject,
};
use crate::results::RunResults;
use anyhow::Result;
use std::path::Path;

/// Figures a baseline compares: results, not settings or counts of rare
/// events (a count going from 0 to 3 has no meaningful % change).
const COMPARED: [&str; 14] = [
    "rx_pps",
    "l1_bps",
    "l2_bps",
    "goodput",
    "loss",
    "p50",
    "p90",
    "p99",
    "jitter",
    "requests_per_s",
    "ndr",
    "pdr",
    "throughput",
    "saturation",
];

/// The smallest loss change (pp) that counts, whatever the runs say.
const LOSS_FLOOR_PP: f64 = 0.01;

/// Compares `r` with the run at `path` (a run directory or results file).
pub fn compare_with(r: &RunResults, path: &Path, tolerance_pct: f64) -> Result<BaselineComparison> {
    let base = super::load(path, None)
        .map_err(|e| e.context(format!("reading the baseline {}", path.display())))?;
    Ok(compare(
        r,
        &base.results,
        &path.display().to_string(),
        tolerance_pct,
    ))
}

/// Every subject of `r` with its per-interval noise filled in.
fn noisy_subjects(r: &RunResults) -> Vec<Subject> {
    let mut out = subjects(r, Marks::default(), Marks::of(r));
    for s in &mut out {
        let ramp_test = r.ramps.iter().find(|x| x.name == s.name).map(|x| x.test);
        let mut rate = 0.0_f64;
        let mut loss = 0.0_f64;
        let mut seen = false;
        for (i, t) in r.tests.iter().enumerate() {
            if t.name != s.name && Some(i) != ramp_test {
                continue;
            }
            for d in &t.directions {
                let n = Noise::of(t, d);
                if let Some(x) = n.rate {
                    rate = rate.max(x);
                    seen = true;
                }
                if let Some(x) = n.loss {
                    loss = loss.max(x);
                }
            }
        }
        if seen {
            for f in ["rx_pps", "l1_bps", "l2_bps", "goodput"] {
                s.noise.insert(f, rate);
            }
            s.noise.insert("loss", loss);
        }
    }
    out
}

/// A subject's spread of `figure`: between repetitions when it has several
/// (standard deviation in % of the mean; loss in pp), else from interval
/// to interval.
fn noise_of(s: &Subject, figure: &str, in_points: bool) -> Option<f64> {
    let v = s.values(figure);
    if v.len() >= 2 {
        return spread(&v).map(|(sd, mean)| {
            if in_points {
                sd * 100.0
            } else if mean.abs() > 0.0 {
                sd / mean.abs() * 100.0
            } else {
                0.0
            }
        });
    }
    s.noise.get(figure).copied()
}

/// Compares the subjects of `r` with those of the same name in `base`.
pub fn compare(
    r: &RunResults,
    base: &RunResults,
    label: &str,
    tolerance_pct: f64,
) -> BaselineComparison {
    let now = noisy_subjects(r);
    let then = noisy_subjects(base);
    let mut figures = Vec::new();
    for s in &now {
        let Some(b) = then.iter().find(|b| b.name == s.name) else {
            continue;
        };
        for f in s.figures() {
            if !COMPARED.contains(&f.name) {
                continue;
            }
            let (Some(v), Some(bv)) = (s.stat(f.name, Stat::Median), b.stat(f.name, Stat::Median))
            else {
                continue;
            };
            let in_points = f.kind == Kind::Ratio;
            let change_pct = if in_points {
                (v - bv) * 100.0
            } else if bv.abs() > 0.0 {
                (v - bv) / bv.abs() * 100.0
            } else if v == 0.0 {
                0.0
            } else {
                // From nothing to something: a change of the whole value.
                100.0 * v.signum()
            };
            let noise = [
                noise_of(s, f.name, in_points),
                noise_of(b, f.name, in_points),
            ]
            .into_iter()
            .flatten()
            .reduce(f64::max);
            let bound = if in_points {
                (2.0 * noise.unwrap_or(0.0)).max(LOSS_FLOOR_PP)
            } else {
                (2.0 * noise.unwrap_or(0.0)).max(tolerance_pct)
            };
            let worse = if f.lower_is_better {
                change_pct > 0.0
            } else {
                change_pct < 0.0
            };
            let change = if change_pct.abs() <= bound {
                Change::WithinNoise
            } else if worse {
                Change::Regression
            } else {
                Change::Improvement
            };
            figures.push(FigureChange {
                test: s.name.clone(),
                figure: f.name.to_string(),
                baseline: bv,
                value: v,
                change_pct,
                noise_pct: noise,
                change,
            });
        }
    }
    let count = |c: Change| figures.iter().filter(|f| f.change == c).count();
    BaselineComparison {
        baseline: label.to_string(),
        baseline_name: base.name.clone(),
        tolerance_pct,
        regressions: count(Change::Regression),
        improvements: count(Change::Improvement),
        figures,
    }
}

/// One change in words: `ndr 120 kpps -> 96 kpps (-20.0 %, noise 0.4 %): regression`.
pub fn describe(c: &FigureChange) -> String {
    let kind = criteria::figure(&c.figure)
        .map(|f| f.kind)
        .unwrap_or(Kind::Count);
    let unit = if kind == Kind::Ratio { "pp" } else { "%" };
    format!(
        "{} {} -> {} ({:+.1} {unit}{}): {}",
        c.figure,
        criteria::show(kind, c.baseline),
        criteria::show(kind, c.value),
        c.change_pct,
        c.noise_pct
            .map(|n| format!(", spread {n:.1} {unit}"))
            .unwrap_or_default(),
        match c.change {
            Change::Regression => "regression",
            Change::Improvement => "improvement",
            Change::WithinNoise => "within noise",
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    fn scaled(r: &RunResults, k: f64) -> RunResults {
        let mut r = r.clone();
        for t in &mut r.tests {
            for d in &mut t.directions {
                d.rx_pps *= k;
                d.rx_l2_bps *= k;
                if let Some(x) = d.rx_l1_bps.as_mut() {
                    *x *= k;
                }
            }
        }
        r
    }

    #[test]
    fn a_drop_beyond_noise_and_tolerance_is_a_regression() {
        let base = testdata::lab();
        let same = compare(&base, &base, "b", 5.0);
        assert_eq!(same.regressions, 0, "{same:?}");
        assert!(same.figures.iter().all(|f| f.change == Change::WithinNoise));
        assert!(!same.figures.is_empty());
        let worse = compare(&scaled(&base, 0.5), &base, "b", 5.0);
        assert!(worse.regressions > 0, "{worse:?}");
        let better = compare(&scaled(&base, 2.0), &base, "b", 5.0);
        assert!(
            better.improvements > 0 && better.regressions == 0,
            "{better:?}"
        );
        // Within the tolerance: not a regression.
        let slight = compare(&scaled(&base, 0.97), &base, "b", 5.0);
        assert_eq!(slight.regressions, 0, "{slight:?}");
        let text = describe(&worse.figures[0]);
        assert!(text.contains("->"), "{text}");
    }
}
