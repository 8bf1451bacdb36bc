//! A run against a baseline run, figure by figure (`--baseline`, `linerate
//! check`). A change counts as a regression or an improvement only beyond
//! the figure's threshold: twice the larger spread the two runs recorded
//! (between repetitions; else a search's bracket, a ramp's step, or the
//! spread from interval to interval), and never less than the figure's
//! default tolerance ([`default_threshold`]). A figure recorded as a lower
//! bound (≥, a search that ended at the tester's limit) is compared as a
//! bound ([`classify`]).

use super::compare::{spread, Noise};
use super::registry;
use crate::model::criteria::{self, Figure, Kind, Stat};
use crate::model::error::Step;
use crate::report::error::Result;
use crate::results::criteria::{
    classify, subjects, BaselineComparison, Change, FigureChange, Marks, NoiseSource, Subject,
};
use crate::results::RunResults;
use crate::search::RampPhase;
use std::collections::BTreeMap;
use std::path::Path;

/// The smallest loss change (pp) that counts, whatever the runs say.
const LOSS_FLOOR_PP: f64 = 0.01;

/// The smallest latency change that counts: below it, a namespace lab's
/// scheduler moves a percentile from run to run.
const LATENCY_FLOOR_S: f64 = 50e-6;

/// Compares `r` with the run at `path` (a run directory or results file).
pub fn compare_with(r: &RunResults, path: &Path, tolerance_pct: f64) -> Result<BaselineComparison> {
    let base = super::load(path, None)
        .map_err(|e| Step::new(format!("reading the baseline {}", path.display()), e))?;
    Ok(compare(
        r,
        &base.results,
        &path.display().to_string(),
        tolerance_pct,
    ))
}

/// A subject with the spread each of its figures recorded, and where from.
struct Noisy {
    subject: Subject,
    spread: BTreeMap<&'static str, (f64, NoiseSource)>,
}

/// The offered load one ramp sample adds, in % of `saturation`.
fn ramp_step_pct(samples: &[crate::search::RampSample], saturation: f64) -> Option<f64> {
    let ramp: Vec<f64> = samples
        .iter()
        .filter(|s| s.phase == RampPhase::Ramp)
        .map(|s| s.intended_pps)
        .collect();
    let steps: Vec<f64> = ramp
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0.0)
        .collect();
    if steps.is_empty() || saturation <= 0.0 {
        return None;
    }
    let mean = steps.iter().sum::<f64>() / steps.len() as f64;
    Some(mean / saturation * 100.0)
}

/// A search's bracket per figure: (upper − lower) / lower in %.
fn search_brackets(s: &crate::results::SearchResult) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    if let Some(m) = &s.mlr {
        for g in &m.goals {
            let Some(name) = crate::results::criteria::goal_figure(&g.goal.name) else {
                continue;
            };
            if let (Some(lo), Some(hi)) = (g.relevant_lower_bound_pps, g.relevant_upper_bound_pps) {
                if lo > 0.0 && hi >= lo {
                    out.push((name, (hi - lo) / lo * 100.0));
                }
            }
        }
    }
    if let Some(r) = &s.rfc2544 {
        if let (Some(lo), Some(hi)) = (r.throughput_pps, r.lowest_failed_pps) {
            if lo > 0.0 && hi >= lo {
                out.push(("throughput", (hi - lo) / lo * 100.0));
            }
        }
    }
    out
}

/// Keeps the larger spread of a figure.
fn widen(
    m: &mut BTreeMap<&'static str, (f64, NoiseSource)>,
    f: &'static str,
    v: f64,
    from: NoiseSource,
) {
    if !v.is_finite() {
        return;
    }
    let e = m.entry(f).or_insert((v, from));
    if v > e.0 {
        *e = (v, from);
    }
}

/// Every subject of `r` with the spread its results hold: per-interval
/// samples of its tests' directions, a search's bracket, a ramp's step.
fn noisy_subjects(r: &RunResults) -> Vec<Noisy> {
    let mut out = Vec::new();
    for s in subjects(r, Marks::default(), Marks::of(r)) {
        let mut spread = BTreeMap::new();
        let ramp = r.ramps.iter().find(|x| x.name == s.name);
        let ramp_test = ramp.map(|x| x.test);
        for (i, t) in r.tests.iter().enumerate() {
            if t.name != s.name && Some(i) != ramp_test {
                continue;
            }
            for d in &t.directions {
                let n = Noise::of(t, d);
                // A direction's rates share its rate's spread; loss has its own.
                for f in registry::ALL {
                    let x = match f.kind() {
                        Kind::Pps | Kind::Bps => n.rate,
                        Kind::Ratio => n.loss,
                        _ => None,
                    };
                    if let Some(x) = x {
                        for c in f.criteria {
                            if let Some(c) = criteria::figure(c) {
                                widen(&mut spread, c.name, x, NoiseSource::Intervals);
                            }
                        }
                    }
                }
            }
        }
        for x in r.ramps.iter().filter(|x| x.name == s.name) {
            for d in &x.directions {
                if let Some(sat) = &d.summary.saturation {
                    if let Some(step) = ramp_step_pct(&d.samples, sat.offered_pps) {
                        widen(&mut spread, "saturation", step, NoiseSource::RampStep);
                    }
                }
            }
        }
        for x in r.searches.iter().filter(|x| x.name == s.name) {
            for (f, w) in search_brackets(x) {
                widen(&mut spread, f, w, NoiseSource::SearchBracket);
            }
        }
        out.push(Noisy { subject: s, spread });
    }
    out
}

/// A subject's spread of `figure` and where it came from: between
/// repetitions when it has several (standard deviation in % of the mean;
/// loss in pp), else what its results hold.
fn noise_of(n: &Noisy, figure: &str, in_points: bool) -> Option<(f64, NoiseSource)> {
    let v = n.subject.values(figure);
    if v.len() >= 2 {
        return spread(&v).map(|(sd, mean)| {
            let pct = if in_points {
                sd * 100.0
            } else if mean.abs() > 0.0 {
                sd / mean.abs() * 100.0
            } else {
                0.0
            };
            (pct, NoiseSource::Repetitions)
        });
    }
    n.spread.get(figure).copied()
}

/// The change a figure needs before it counts when the runs say nothing
/// of their noise, in % (loss: pp): `tolerance_pct` for rates and counts;
/// for latency twice it and at least 50 µs; for loss 0.01 pp or
/// `tolerance_pct` of the larger loss.
pub fn default_threshold(f: &Figure, tolerance_pct: f64, baseline: f64, value: f64) -> f64 {
    match f.kind {
        Kind::Ratio => {
            (tolerance_pct / 100.0 * baseline.abs().max(value.abs()) * 100.0).max(LOSS_FLOOR_PP)
        }
        Kind::Seconds => {
            let floor = if baseline.abs() > 0.0 {
                LATENCY_FLOOR_S / baseline.abs() * 100.0
            } else {
                f64::INFINITY
            };
            (2.0 * tolerance_pct).max(floor)
        }
        _ => tolerance_pct,
    }
}

/// How far a figure moved from the baseline's `bv` to `v`: in points for
/// a ratio, else in per cent of the baseline.
fn change_pct(bv: f64, v: f64, in_points: bool) -> f64 {
    if in_points {
        (v - bv) * 100.0
    } else if bv.abs() > 0.0 {
        (v - bv) / bv.abs() * 100.0
    } else if v == 0.0 {
        0.0
    } else {
        // From nothing to something: a change of the whole value.
        100.0 * v.signum()
    }
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
    for n in &now {
        let s = &n.subject;
        let Some(b) = then.iter().find(|b| b.subject.name == s.name) else {
            continue;
        };
        for f in s.figures() {
            if !f.compared {
                continue;
            }
            let (Some(v), Some(bv)) = (
                s.stat(f.name, Stat::Median),
                b.subject.stat(f.name, Stat::Median),
            ) else {
                continue;
            };
            let in_points = f.kind == Kind::Ratio;
            let change_pct = change_pct(bv, v, in_points);
            let noise = [
                noise_of(n, f.name, in_points),
                noise_of(b, f.name, in_points),
            ]
            .into_iter()
            .flatten()
            .reduce(|a, b| if b.0 > a.0 { b } else { a });
            let default = default_threshold(f, tolerance_pct, bv, v);
            let (threshold_pct, threshold_from) = match noise {
                Some((x, from)) if 2.0 * x > default => (2.0 * x, from),
                _ => (default, NoiseSource::Default),
            };
            let baseline_at_least = b.subject.at_least.contains(f.name);
            let value_at_least = s.at_least.contains(f.name);
            figures.push(FigureChange {
                test: s.name.clone(),
                figure: f.name.to_string(),
                baseline: bv,
                value: v,
                change_pct,
                noise_pct: noise.map(|x| x.0),
                threshold_pct,
                threshold_from,
                baseline_at_least,
                value_at_least,
                change: classify(
                    change_pct,
                    threshold_pct,
                    f.lower_is_better,
                    baseline_at_least,
                    value_at_least,
                ),
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
        within_noise: count(Change::WithinNoise),
        inconclusive: count(Change::Inconclusive),
        figures,
    }
}

/// A verdict's word in tables: `WORSE`, `BETTER`, `same`, `open`.
pub fn verdict_word(c: Change) -> &'static str {
    match c {
        Change::Regression => "WORSE",
        Change::Improvement => "BETTER",
        Change::WithinNoise => "same",
        Change::Inconclusive => "open",
    }
}

/// A verdict's name in CSV and words: `regression`, `within noise`...
pub fn verdict_name(c: Change) -> &'static str {
    match c {
        Change::Regression => "regression",
        Change::Improvement => "improvement",
        Change::WithinNoise => "within noise",
        Change::Inconclusive => "inconclusive",
    }
}

/// One change in words: `ndr ≥120 kpps -> 96 kpps (-20.0 %; threshold
/// 5.0 %, default): regression`.
pub fn describe(c: &FigureChange) -> String {
    let kind = criteria::figure(&c.figure)
        .map(|f| f.kind)
        .unwrap_or(Kind::Count);
    let (unit, digits) = if kind == Kind::Ratio {
        ("pp", 2)
    } else {
        ("%", 1)
    };
    let ge = |b: bool| if b { "≥" } else { "" };
    format!(
        "{} {}{} -> {}{} ({:+.digits$} {unit}; threshold {:.digits$} {unit}, {}): {}",
        c.figure,
        ge(c.baseline_at_least),
        criteria::show(kind, c.baseline),
        ge(c.value_at_least),
        criteria::show(kind, c.value),
        c.change_pct,
        c.threshold_pct,
        c.threshold_from.words(),
        verdict_name(c.change)
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
        assert_eq!(
            same.within_noise,
            same.figures.len(),
            "every figure counted: {same:?}"
        );
    }

    /// The rule table: exact or bound (≥) on either side, better or worse,
    /// within or beyond the threshold, for a higher-is-better figure and a
    /// lower-is-better one.
    #[test]
    fn bounds_and_noise_rule_table() {
        use Change::*;
        let th = 5.0;
        // (change %, baseline ≥, now ≥) → verdict, higher is better.
        let table = [
            (0.0, false, false, WithinNoise),
            (4.9, false, false, WithinNoise),
            (-4.9, false, false, WithinNoise),
            (30.0, false, false, Improvement),
            (-30.0, false, false, Regression),
            // Baseline ≥X, now exact Y: a regression only below beyond noise.
            (-30.0, true, false, Regression),
            (-4.9, true, false, Inconclusive),
            (0.0, true, false, Inconclusive),
            (30.0, true, false, Inconclusive),
            // Baseline exact X, now ≥Y: below is inconclusive, never worse.
            (-30.0, false, true, Inconclusive),
            (-4.9, false, true, Inconclusive),
            (30.0, false, true, Improvement),
            // Both bounds: inconclusive unless the new bound is above.
            (-30.0, true, true, Inconclusive),
            (2.0, true, true, Inconclusive),
            (30.0, true, true, Improvement),
        ];
        for (d, b, v, want) in table {
            assert_eq!(classify(d, th, false, b, v), want, "{d} % ≥{b} ≥{v}");
        }
        // Lower is better (loss, latency): the signs turn round.
        assert_eq!(classify(30.0, th, true, false, false), Regression);
        assert_eq!(classify(-30.0, th, true, false, false), Improvement);
        assert_eq!(classify(3.0, th, true, false, false), WithinNoise);
        assert_eq!(classify(-30.0, th, true, true, false), Improvement);
        assert_eq!(classify(30.0, th, true, false, true), Regression);
        assert_eq!(classify(-30.0, th, true, false, true), Inconclusive);
    }

    #[test]
    fn default_thresholds_per_figure() {
        let f = |n: &str| criteria::figure(n).unwrap();
        assert_eq!(default_threshold(f("rx_pps"), 5.0, 1e6, 9e5), 5.0);
        assert_eq!(default_threshold(f("ndr"), 3.0, 1e6, 9e5), 3.0);
        // Latency: twice the tolerance, and at least 50 µs.
        assert_eq!(default_threshold(f("p99"), 5.0, 0.01, 0.011), 10.0);
        let small = default_threshold(f("p50"), 5.0, 100e-6, 120e-6);
        assert!((small - 50.0).abs() < 1e-9, "{small}");
        // Loss in pp: 0.01 pp, or the tolerance's share of a large loss.
        assert_eq!(default_threshold(f("loss"), 5.0, 0.0, 0.0), 0.01);
        let big = default_threshold(f("loss"), 5.0, 0.70, 0.74);
        assert!((big - 3.7).abs() < 1e-9, "{big}");
    }

    /// A search bound to the tester's limit: its ≥ is kept and weighed.
    #[test]
    fn a_search_at_the_testers_limit_is_compared_as_a_bound() {
        use crate::search::Irregular;
        // The fixture's second search is regular: NDR bracketed.
        let base = testdata::search();
        let test = base.searches[1].name.clone();
        let set = |r: &mut RunResults, bound: bool, k: f64| {
            for g in r.searches[1].mlr.iter_mut().flat_map(|m| &mut m.goals) {
                if g.goal.name.eq_ignore_ascii_case("ndr") {
                    g.irregular = bound.then_some(Irregular::TesterLimitIsLowerBound);
                    g.regular = !bound;
                    for v in [
                        &mut g.conditional_throughput_pps,
                        &mut g.relevant_lower_bound_pps,
                        &mut g.relevant_upper_bound_pps,
                    ] {
                        if let Some(x) = v.as_mut() {
                            *x *= k;
                        }
                    }
                    if bound {
                        g.relevant_upper_bound_pps = None;
                    }
                }
            }
        };
        let ndr = |c: &BaselineComparison| {
            c.figures
                .iter()
                .find(|f| f.figure == "ndr" && f.test == test)
                .cloned()
                .unwrap_or_else(|| panic!("{c:?}"))
        };
        // Baseline exact, now a bound 40 % below it: open, not a regression.
        let mut lower_bound = base.clone();
        set(&mut lower_bound, true, 0.6);
        let c = compare(&lower_bound, &base, "b", 5.0);
        let f = ndr(&c);
        assert!(f.value_at_least && !f.baseline_at_least, "{f:?}");
        assert_eq!(f.change, Change::Inconclusive, "{f:?}");
        assert!(describe(&f).contains("-> ≥"), "{}", describe(&f));
        // The bracket (0.5 %) is the search's noise; the default is more.
        let g = base.searches[1].mlr.as_ref().unwrap().goals[0].clone();
        assert_eq!(
            search_brackets(&base.searches[1])[0].1,
            (g.relevant_upper_bound_pps.unwrap() - g.relevant_lower_bound_pps.unwrap())
                / g.relevant_lower_bound_pps.unwrap()
                * 100.0
        );
        // Baseline a bound, now exact and 40 % below it: a regression.
        let mut exact_lower = base.clone();
        set(&mut exact_lower, false, 0.6);
        let mut bound = base.clone();
        set(&mut bound, true, 1.0);
        let c = compare(&exact_lower, &bound, "b", 5.0);
        let f = ndr(&c);
        assert!(f.baseline_at_least && !f.value_at_least, "{f:?}");
        assert_eq!(f.change, Change::Regression, "{f:?}");
        assert!(describe(&f).contains("ndr ≥"), "{}", describe(&f));
        // The same, 2 % below: inconclusive, not within noise.
        let mut close = base.clone();
        set(&mut close, false, 0.98);
        assert_eq!(
            ndr(&compare(&close, &bound, "b", 5.0)).change,
            Change::Inconclusive
        );
        // Both bounds, the new one 30 % above: an improvement.
        let mut higher = base.clone();
        set(&mut higher, true, 1.3);
        assert_eq!(
            ndr(&compare(&higher, &bound, "b", 5.0)).change,
            Change::Improvement
        );
    }
}
