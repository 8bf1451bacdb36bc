//! Criteria held against a run's results: the figures each test, ramp and
//! search measured (over its repetitions), the PASS/FAIL of every
//! criterion with the measured value, and the record of a comparison with
//! a baseline run. The grammar is `model::criteria`; the noise a baseline
//! comparison weighs changes against is computed in `report::baseline`.

use super::{DirectionResult, Protocol, RunResults, TestResult};
use crate::model::criteria::{self, Criterion, Figure, Stat};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One criterion held against one test (or ramp, search).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct CriterionResult {
    /// The criterion as written (`ndr>=2Mpps`).
    pub expect: String,
    /// The test, ramp or search it was held against; empty when no test
    /// of the run measured the figure.
    pub test: String,
    pub figure: String,
    /// Which repetition's value counts: `median` (default), `min`, `max`.
    pub stat: String,
    /// The bound, in the figure's base unit (pps, bit/s, s, ratio 0..1 for
    /// loss, % for line rate and CPU, counts).
    pub expected: f64,
    /// What was measured, same unit; absent: not measured.
    pub measured: Option<f64>,
    pub passed: bool,
    /// Measured against expected in words: `118.9 kpps >= 150 kpps: FAIL`.
    pub detail: String,
}

/// The criterion that stopped a run (`--abort-on-fail`): held against a
/// test's interval lines while it ran, it had clearly failed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct AbortRecord {
    /// The criterion as written (`loss<=0.1%`).
    pub expect: String,
    /// The test it stopped.
    pub test: String,
    pub figure: String,
    /// The bound, in the figure's base unit (as `CriterionResult`).
    pub expected: f64,
    /// The figure over the test's intervals so far (loss over every frame
    /// sent so far, a rate as their mean), same unit.
    pub measured: f64,
    /// Seconds of the test's intervals the figure covers (after `--omit`).
    pub over_s: f64,
    /// Seconds from the test's start to the decision.
    pub after_s: f64,
    /// In words: `aborted after 4.0 s: loss<=0.1% failed: 5.02 % over 3.0 s`.
    pub detail: String,
}

impl AbortRecord {
    /// The criterion's result in the run's list: failed, measured over
    /// the time the test ran.
    pub fn as_result(&self) -> CriterionResult {
        CriterionResult {
            expect: self.expect.clone(),
            test: self.test.clone(),
            figure: self.figure.clone(),
            stat: Stat::Median.name().to_string(),
            expected: self.expected,
            measured: Some(self.measured),
            passed: false,
            detail: self.detail.clone(),
        }
    }
}

/// How one figure moved against the baseline run.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Worse by more than the figure's threshold (the runs' spread or its
    /// default tolerance).
    Regression,
    /// Better by more than the figure's threshold.
    Improvement,
    /// Within the threshold: the runs' own noise.
    WithinNoise,
    /// A lower bound (≥) on one side leaves the direction of the change
    /// open: e.g. a baseline that was the tester's limit and a lower
    /// value now within noise of it.
    Inconclusive,
}

/// What a change of `change` (in % or pp, signed) beyond `threshold` is,
/// for a figure where `lower_is_better`, when either value is a lower
/// bound (≥: the true value is at least it):
///
/// | baseline | now   | change               | verdict                     |
/// |----------|-------|----------------------|-----------------------------|
/// | exact    | exact | within ±threshold    | within noise                |
/// | exact    | exact | beyond, worse/better | regression / improvement    |
/// | ≥        | exact | below by more        | lower for sure: worse/better|
/// | ≥        | exact | otherwise            | inconclusive                |
/// | exact    | ≥     | above by more        | higher for sure             |
/// | exact    | ≥     | otherwise            | inconclusive                |
/// | ≥        | ≥     | above by more        | higher (the bound moved up) |
/// | ≥        | ≥     | otherwise            | inconclusive                |
pub fn classify(
    change: f64,
    threshold: f64,
    lower_is_better: bool,
    baseline_at_least: bool,
    value_at_least: bool,
) -> Change {
    let up = change > threshold;
    let down = change < -threshold;
    let moved = |higher: bool| {
        if higher != lower_is_better {
            Change::Improvement
        } else {
            Change::Regression
        }
    };
    match (baseline_at_least, value_at_least) {
        (false, false) if up => moved(true),
        (false, false) if down => moved(false),
        (false, false) => Change::WithinNoise,
        (true, false) if down => moved(false),
        (_, true) if up => moved(true),
        _ => Change::Inconclusive,
    }
}

/// Where the threshold a change is weighed against came from.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NoiseSource {
    /// Twice the spread between the repetitions of the test (`--repeat`).
    Repetitions,
    /// Twice the spread from interval to interval of the test's directions.
    Intervals,
    /// The search's own bracket: the relevant upper bound's distance from
    /// the lower bound (MLRsearch), or the lowest failed rate's from the
    /// throughput (RFC 2544), in % of the lower.
    SearchBracket,
    /// The ramp's step: the offered load one ramp sample adds, in % of the
    /// saturation.
    RampStep,
    /// The figure's default tolerance: `--tolerance` (5 %) for rates,
    /// twice it and at least 50 µs for latency, 0.01 pp (or `--tolerance`
    /// of the loss) for loss.
    Default,
}

impl NoiseSource {
    /// How a table says it: `repetitions`, `intervals`, `search bracket`...
    pub fn words(self) -> &'static str {
        match self {
            NoiseSource::Repetitions => "repetitions",
            NoiseSource::Intervals => "intervals",
            NoiseSource::SearchBracket => "search bracket",
            NoiseSource::RampStep => "ramp step",
            NoiseSource::Default => "default",
        }
    }
}

fn default_source() -> NoiseSource {
    NoiseSource::Default
}

/// One figure of one test in the run and in its baseline.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct FigureChange {
    pub test: String,
    pub figure: String,
    pub baseline: f64,
    pub value: f64,
    /// (value - baseline) / |baseline| in %; loss in percentage points.
    pub change_pct: f64,
    /// The larger spread of the two runs (repetitions, else per-interval
    /// samples, a search's bracket, a ramp's step), in % (loss: pp);
    /// absent when neither run shows one.
    pub noise_pct: Option<f64>,
    /// The change that counts, in % (loss: pp): the larger of twice
    /// `noise_pct` and the figure's default tolerance.
    #[serde(default)]
    pub threshold_pct: f64,
    /// Which of the two set `threshold_pct`.
    #[serde(default = "default_source")]
    pub threshold_from: NoiseSource,
    /// The baseline's value is a lower bound (≥): a search limited by the
    /// tester or by its max load.
    #[serde(default)]
    pub baseline_at_least: bool,
    /// This run's value is a lower bound (≥).
    #[serde(default)]
    pub value_at_least: bool,
    pub change: Change,
}

/// A comparison of this run with a baseline run, figure by figure.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct BaselineComparison {
    /// The baseline's run directory or results file.
    pub baseline: String,
    pub baseline_name: String,
    /// Changes of rates within this many % are never regressions.
    pub tolerance_pct: f64,
    pub figures: Vec<FigureChange>,
    pub regressions: usize,
    pub improvements: usize,
    #[serde(default)]
    pub within_noise: usize,
    #[serde(default)]
    pub inconclusive: usize,
}

/// Where in a results document a group of tests begins (or ends): plan
/// tests hold their own criteria over the results they added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    pub tests: usize,
    pub ramps: usize,
    pub searches: usize,
}

impl Marks {
    /// The end of what `r` holds now.
    pub fn of(r: &RunResults) -> Marks {
        Marks {
            tests: r.tests.len(),
            ramps: r.ramps.len(),
            searches: r.searches.len(),
        }
    }
}

/// A test, ramp or search with its figures, one map per repetition.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    pub name: String,
    pub reps: Vec<BTreeMap<&'static str, f64>>,
    /// Each repetition's per-interval spread of its rate and loss (for
    /// baselines), filled by the report layer.
    pub noise: BTreeMap<&'static str, f64>,
    /// Figures some repetition recorded as a lower bound (≥): a search
    /// goal that ended at the tester's limit or its max load. The median
    /// of values one of which is a lower bound is a lower bound too.
    pub at_least: BTreeSet<&'static str>,
}

impl Subject {
    /// The values of `figure` over the repetitions that measured it.
    pub fn values(&self, figure: &str) -> Vec<f64> {
        self.reps
            .iter()
            .filter_map(|m| m.get(figure).copied())
            .collect()
    }

    /// `stat` of the figure's repetitions, if any measured it.
    pub fn stat(&self, figure: &str, stat: Stat) -> Option<f64> {
        let mut v = self.values(figure);
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(match stat {
            Stat::Min => v[0],
            Stat::Max => v[v.len() - 1],
            Stat::Median if v.len() % 2 == 1 => v[v.len() / 2],
            Stat::Median => (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0,
        })
    }

    /// The figures any repetition measured, in [`criteria::FIGURES`] order.
    pub fn figures(&self) -> Vec<&'static Figure> {
        criteria::FIGURES
            .iter()
            .filter(|f| self.reps.iter().any(|m| m.contains_key(f.name)))
            .collect()
    }
}

/// Inserts `v` for `f`, keeping the worse of two directions.
fn put(m: &mut BTreeMap<&'static str, f64>, f: &'static str, v: f64) {
    if !v.is_finite() {
        return;
    }
    let lower_better = criteria::figure(f).is_some_and(|x| x.lower_is_better);
    m.entry(f)
        .and_modify(|old| *old = if lower_better { old.max(v) } else { old.min(v) })
        .or_insert(v);
}

fn direction_figures(m: &mut BTreeMap<&'static str, f64>, t: &TestResult, d: &DirectionResult) {
    let stream = t.params.protocol != Protocol::Udp;
    if stream {
        put(m, "goodput", d.rx_l2_bps);
        put(m, "l2_bps", d.rx_l2_bps);
        if let Some(r) = d.retransmits {
            put(m, "retransmits", r as f64);
        }
    } else {
        put(m, "rx_pps", d.rx_pps);
        put(m, "tx_pps", d.tx_pps);
        put(m, "l2_bps", d.rx_l2_bps);
        if let Some(l1) = d.rx_l1_bps {
            put(m, "l1_bps", l1);
        }
        put(m, "loss", d.loss_ratio);
        if d.tx_packets > 0 {
            put(m, "dut_loss", d.dut_lost as f64 / d.tx_packets as f64);
        }
        put(m, "lost", d.lost as f64);
        put(m, "reordered", d.reordered as f64);
        put(m, "duplicates", d.duplicates as f64);
        put(m, "tx_errors", d.tx_errors as f64);
    }
    if let Some(p) = d.line_rate_pct {
        put(m, "line_pct", p);
    }
}

/// Every figure a test measured (several directions: the worse one; several
/// generators: their sum).
pub fn test_figures(t: &TestResult) -> BTreeMap<&'static str, f64> {
    let mut m = BTreeMap::new();
    if t.status != super::TestStatus::Ok {
        return m;
    }
    if t.http.is_none() {
        for d in &t.directions {
            direction_figures(&mut m, t, d);
        }
    }
    if let Some(a) = &t.aggregate {
        let udp = t.params.protocol == Protocol::Udp;
        for k in [
            "rx_pps",
            "l2_bps",
            "l1_bps",
            "goodput",
            "loss",
            "lost",
            "retransmits",
        ] {
            m.remove(k);
        }
        if udp {
            m.insert("rx_pps", a.rx_pps);
            m.insert("loss", a.loss_ratio);
            m.insert("lost", a.lost as f64);
            if let Some(l1) = a.rx_l1_bps {
                m.insert("l1_bps", l1);
            }
        } else {
            m.insert("goodput", a.rx_l2_bps);
        }
        m.insert("l2_bps", a.rx_l2_bps);
        if let Some(r) = a.retransmits {
            m.insert("retransmits", r as f64);
        }
    }
    if let Some(l) = &t.latency {
        let phase = l
            .phases
            .iter()
            .find(|p| p.name == "loaded")
            .or_else(|| l.phases.iter().rev().find(|p| p.rtt_s.is_some()));
        if let Some(rtt) = phase.and_then(|p| p.rtt_s) {
            m.insert("p50", rtt.p50);
            m.insert("p90", rtt.p90);
            m.insert("p99", rtt.p99);
            m.insert("latency_max", rtt.max);
        }
        if let Some(ipdv) = phase.and_then(|p| p.ipdv_s) {
            m.insert("jitter", ipdv.mean);
        }
        if let Some(a) = l.added_latency_s {
            m.insert("added_latency", a);
        }
    }
    if let Some(h) = &t.http {
        m.insert("goodput", h.goodput_bps);
        m.insert("requests_per_s", h.requests_per_s);
        m.insert("errors", h.client.errors as f64);
        if let Some(l) = &h.client.latency {
            m.insert("p50", l.p50_us as f64 / 1e6);
            m.insert("p90", l.p90_us as f64 / 1e6);
            m.insert("p99", l.p99_us as f64 / 1e6);
            m.insert("latency_max", l.max_us as f64 / 1e6);
        }
    }
    if let Some(cpu) = t.cpu.iter().map(|c| c.process_pct).reduce(f64::max) {
        m.insert("cpu", cpu);
    }
    m
}

/// The figures one direction of a test measured (a pivot of a bidirectional
/// test adds its directions' rates instead of keeping the worse one).
pub fn direction_test_figures(t: &TestResult, d: &DirectionResult) -> BTreeMap<&'static str, f64> {
    let mut m = BTreeMap::new();
    direction_figures(&mut m, t, d);
    m
}

/// The figure an MLRsearch goal's answer is (`ndr`, `pdr`), by the goal's
/// name in any case; none for other goals.
pub fn goal_figure(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "ndr" => Some("ndr"),
        "pdr" => Some("pdr"),
        _ => None,
    }
}

/// The figures a search measured: `ndr`, `pdr` (MLRsearch), `throughput`
/// (RFC 2544), in packets per second.
pub fn search_figures(s: &super::SearchResult) -> BTreeMap<&'static str, f64> {
    let mut m = BTreeMap::new();
    if let Some(r) = &s.mlr {
        for g in &r.goals {
            let Some(name) = goal_figure(&g.goal.name) else {
                continue;
            };
            if let Some(v) = g.conditional_throughput_pps.or(g.relevant_lower_bound_pps) {
                m.insert(name, v);
            }
        }
    }
    if let Some(v) = s.rfc2544.as_ref().and_then(|r| r.throughput_pps) {
        m.insert("throughput", v);
    }
    m
}

/// The figures of a search recorded as lower bounds: an MLRsearch goal
/// whose answer is the tester's limit or the max load (the DUT does at
/// least that), an RFC 2544 throughput at the max rate or the tester's
/// limit.
pub fn search_bounds(s: &super::SearchResult) -> BTreeSet<&'static str> {
    use crate::search::{Irregular, ThroughputEnd};
    let mut out = BTreeSet::new();
    if let Some(r) = &s.mlr {
        for g in &r.goals {
            let Some(name) = goal_figure(&g.goal.name) else {
                continue;
            };
            if matches!(
                g.irregular,
                Some(
                    Irregular::MaxLoadIsLowerBound
                        | Irregular::TesterLimitIsLowerBound
                        | Irregular::TesterLimitInBracket
                )
            ) {
                out.insert(name);
            }
        }
    }
    if let Some(r) = &s.rfc2544 {
        if matches!(
            r.end,
            ThroughputEnd::MaxRatePassed | ThroughputEnd::TesterLimit
        ) {
            out.insert("throughput");
        }
    }
    out
}

/// Adds `figures` as the next repetition of the subject called `name`.
fn add(
    out: &mut Vec<Subject>,
    name: &str,
    figures: BTreeMap<&'static str, f64>,
    at_least: BTreeSet<&'static str>,
) {
    match out.iter_mut().find(|s| s.name == name) {
        Some(s) => {
            s.reps.push(figures);
            s.at_least.extend(at_least);
        }
        None => out.push(Subject {
            name: name.to_string(),
            reps: vec![figures],
            noise: BTreeMap::new(),
            at_least,
        }),
    }
}

/// The subjects of `r` between `from` and `to`: each test (a ramp's test
/// under the ramp's name, with its saturation point) and each search.
/// Results of the same name are repetitions of one subject.
pub fn subjects(r: &RunResults, from: Marks, to: Marks) -> Vec<Subject> {
    let mut out = Vec::new();
    let ramp_tests: Vec<usize> = r.ramps.iter().map(|x| x.test).collect();
    for (i, t) in r.tests.iter().enumerate().take(to.tests).skip(from.tests) {
        if !ramp_tests.contains(&i) {
            add(&mut out, &t.name, test_figures(t), BTreeSet::new());
        }
    }
    for ramp in r.ramps.iter().take(to.ramps).skip(from.ramps) {
        let mut m = r.tests.get(ramp.test).map(test_figures).unwrap_or_default();
        for d in &ramp.directions {
            if let Some(s) = &d.summary.saturation {
                put(&mut m, "saturation", s.offered_pps);
            }
        }
        add(&mut out, &ramp.name, m, BTreeSet::new());
    }
    for s in r.searches.iter().take(to.searches).skip(from.searches) {
        add(&mut out, &s.name, search_figures(s), search_bounds(s));
    }
    out
}

/// Holds each criterion against every subject that measured its figure;
/// a criterion no subject measured fails as "not measured".
pub fn evaluate(list: &[Criterion], subjects: &[Subject]) -> Vec<CriterionResult> {
    let mut out = Vec::new();
    for c in list {
        let kind = c.figure.kind;
        let base =
            |test: &str, measured: Option<f64>, passed: bool, detail: String| CriterionResult {
                expect: c.text.clone(),
                test: test.to_string(),
                figure: c.figure.name.to_string(),
                stat: c.stat.name().to_string(),
                expected: c.value,
                measured,
                passed,
                detail,
            };
        let mut any = false;
        for s in subjects {
            let Some(v) = s.stat(c.figure.name, c.stat) else {
                continue;
            };
            any = true;
            let passed = c.op.holds(v, c.value);
            let of = if s.reps.len() > 1 {
                format!(" ({} of {} runs)", c.stat.name(), s.reps.len())
            } else {
                String::new()
            };
            // A lower bound keeps its ≥: the DUT did at least that.
            let ge = if s.at_least.contains(c.figure.name) {
                "≥"
            } else {
                ""
            };
            out.push(base(
                &s.name,
                Some(v),
                passed,
                format!(
                    "{ge}{} {} {}{of}",
                    criteria::show(kind, v),
                    c.op.symbol(),
                    criteria::show(kind, c.value)
                ),
            ));
        }
        if !any {
            let names: Vec<&str> = subjects.iter().map(|s| s.name.as_str()).collect();
            out.push(base(
                "",
                None,
                false,
                format!(
                    "not measured: no test here measures {} ({}); its tests: {}",
                    c.figure.name,
                    c.figure.about,
                    if names.is_empty() {
                        "none completed".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
