//! MLRsearch's vocabulary: goals and configuration in, goal results out
//! (RFC 9971 "Search Goal", "Controller Input", "Goal Result"), with their
//! validation. The controller is in the parent module.

use crate::search::{positive, ratio, SearchError, SearchTrial, TrialWaits};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One search goal (RFC 9971 "Search Goal") plus this implementation's
/// two speed knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MlrGoal {
    /// Name in reports, e.g. `ndr`, `pdr`.
    pub name: String,
    /// Goal Loss Ratio: a trial losing more is high-loss.
    pub loss_ratio: f64,
    /// Goal Exceed Ratio: share of the duration sum that high-loss trials
    /// may take at a lower bound (0.5 recommended).
    pub exceed_ratio: f64,
    /// Goal Width, relative: (upper − lower) / upper the result must reach.
    pub relative_width: f64,
    /// Goal Initial Trial Duration: the shortest trials, seconds.
    pub initial_trial_duration_s: f64,
    /// Goal Final Trial Duration, seconds.
    pub final_trial_duration_s: f64,
    /// Goal Duration Sum, seconds.
    pub duration_sum_s: f64,
    /// Coarser targets searched before the final one (CSIT: 2).
    pub preceding_targets: u32,
    /// Growth of the step when extending a bracket up or down (CSIT: 4).
    pub expansion_coefficient: f64,
}

impl MlrGoal {
    /// Non-drop rate with CSIT's defaults: zero loss, exceed ratio 0.5,
    /// width 0.5 %, 1 s trials, 21 s duration sum.
    pub fn ndr() -> Self {
        MlrGoal {
            name: "ndr".into(),
            loss_ratio: 0.0,
            exceed_ratio: 0.5,
            relative_width: 0.005,
            initial_trial_duration_s: 1.0,
            final_trial_duration_s: 1.0,
            duration_sum_s: 21.0,
            preceding_targets: 2,
            expansion_coefficient: 4.0,
        }
    }

    /// Partial drop rate: as [`MlrGoal::ndr`] with 0.5 % loss.
    pub fn pdr() -> Self {
        MlrGoal {
            name: "pdr".into(),
            loss_ratio: 0.005,
            ..MlrGoal::ndr()
        }
    }

    pub(super) fn validate(&self) -> Result<(), SearchError> {
        let name = &self.name;
        if name.is_empty() {
            return Err(SearchError::Config(
                "every goal needs a name (e.g. ndr, pdr)".into(),
            ));
        }
        ratio(&format!("goal {name} loss ratio"), self.loss_ratio)?;
        ratio(&format!("goal {name} exceed ratio"), self.exceed_ratio)?;
        ratio(&format!("goal {name} relative width"), self.relative_width)?;
        if self.relative_width < 1e-6 {
            return Err(SearchError::Config(format!(
                "goal {name} relative width {} is below 1e-6: no tester holds a rate that precisely",
                self.relative_width
            )));
        }
        positive(
            &format!("goal {name} initial trial duration (s)"),
            self.initial_trial_duration_s,
        )?;
        positive(
            &format!("goal {name} final trial duration (s)"),
            self.final_trial_duration_s,
        )?;
        positive(
            &format!("goal {name} duration sum (s)"),
            self.duration_sum_s,
        )?;
        if self.initial_trial_duration_s > self.final_trial_duration_s {
            return Err(SearchError::Config(format!(
                "goal {name}: initial trial duration {} s is longer than the final {} s",
                self.initial_trial_duration_s, self.final_trial_duration_s
            )));
        }
        if self.duration_sum_s < self.final_trial_duration_s {
            return Err(SearchError::Config(format!(
                "goal {name}: duration sum {} s is shorter than the final trial duration {} s; use at least one final trial",
                self.duration_sum_s, self.final_trial_duration_s
            )));
        }
        if self.preceding_targets > 10 {
            return Err(SearchError::Config(format!(
                "goal {name}: {} preceding targets is too many; 2 is usual",
                self.preceding_targets
            )));
        }
        if !(self.expansion_coefficient.is_finite() && self.expansion_coefficient > 1.0) {
            return Err(SearchError::Config(format!(
                "goal {name}: expansion coefficient must be above 1, got {}",
                self.expansion_coefficient
            )));
        }
        Ok(())
    }
}

/// An MLRsearch run (RFC 9971 "Controller Input" plus limits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MlrConfig {
    pub goals: Vec<MlrGoal>,
    /// Min Load: the lowest rate tried, packets/s.
    pub min_load_pps: f64,
    /// Max Load: the highest rate tried and the first one, packets/s.
    pub max_load_pps: f64,
    /// Waits around every trial. RFC 9971 allows shorter waits than RFC
    /// 2544's if the report says so; the default is none, as CSIT does.
    pub waits: TrialWaits,
    /// Stop after this many trials.
    pub max_trials: usize,
    /// Stop before a trial would take the search past this time, seconds.
    pub max_search_s: Option<f64>,
}

impl MlrConfig {
    /// NDR and PDR with CSIT's defaults between two loads, no waits, at
    /// most 1000 trials.
    pub fn new(min_load_pps: f64, max_load_pps: f64) -> Self {
        MlrConfig {
            goals: vec![MlrGoal::ndr(), MlrGoal::pdr()],
            min_load_pps,
            max_load_pps,
            waits: TrialWaits::NONE,
            max_trials: 1000,
            max_search_s: None,
        }
    }

    pub(super) fn validate(&self) -> Result<(), SearchError> {
        if self.goals.is_empty() {
            return Err(SearchError::Config(
                "MLRsearch needs at least one goal (e.g. ndr, pdr)".into(),
            ));
        }
        for (i, g) in self.goals.iter().enumerate() {
            g.validate()?;
            if self.goals[..i].iter().any(|o| o.name == g.name) {
                return Err(SearchError::Config(format!(
                    "two goals are named {}: names must be unique",
                    g.name
                )));
            }
        }
        positive("min load (pps)", self.min_load_pps)?;
        positive("max load (pps)", self.max_load_pps)?;
        if self.min_load_pps > self.max_load_pps {
            return Err(SearchError::Config(format!(
                "min load {} pps is above max load {} pps: swap them",
                self.min_load_pps, self.max_load_pps
            )));
        }
        if self.max_trials == 0 {
            return Err(SearchError::Config("max_trials must be at least 1".into()));
        }
        if let Some(s) = self.max_search_s {
            positive("max search time (s)", s)?;
        }
        self.waits.validate()
    }
}

/// Why a goal's result is irregular (RFC 9971: no relevant upper bound, or
/// bounds farther apart than the width).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Irregular {
    /// Max load is a lower bound: the DUT does at least that.
    MaxLoadIsLowerBound,
    /// The tester could not go higher and its highest rate is a lower
    /// bound: the answer is the tester's limit, not the DUT's.
    TesterLimitIsLowerBound,
    /// Min load is an upper bound: the DUT fails the goal even there.
    MinLoadIsUpperBound,
    /// The DUT lost more than the goal allows at the upper bound, and the
    /// lower bound is the tester's ceiling: the answer lies between them,
    /// and the tester could not offer the loads in between to narrow it.
    TesterLimitInBracket,
    /// The search stopped (trial or time limit) before the width was reached.
    Unfinished,
}

/// One goal's result (RFC 9971 "Goal Result").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MlrGoalResult {
    pub goal: MlrGoal,
    /// Both relevant bounds exist and are within the goal's width.
    pub regular: bool,
    pub irregular: Option<Irregular>,
    /// Relevant Lower Bound, packets/s. For an irregular result without an
    /// upper bound, the highest lower bound (e.g. max load).
    pub relevant_lower_bound_pps: Option<f64>,
    /// Relevant Upper Bound, packets/s.
    pub relevant_upper_bound_pps: Option<f64>,
    /// Conditional Throughput at the relevant lower bound, packets/s.
    pub conditional_throughput_pps: Option<f64>,
    /// (upper − lower) / upper of the relevant bounds.
    pub width_reached: Option<f64>,
    /// Trials this goal's targets chose (every trial informs every goal).
    pub trials_used: usize,
    /// Duration and waits of those trials, seconds.
    pub time_spent_s: f64,
    /// How sure the result is (absent in results older than schema 1.12).
    #[serde(default)]
    pub confidence: Option<MlrConfidence>,
}

/// What the trials at one relevant bound showed for a goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BoundEvidence {
    pub load_pps: f64,
    /// Trials that count for this goal at this load.
    pub trials: usize,
    /// Their durations, seconds.
    pub duration_s: f64,
    /// Of that, seconds of trials that lost more than the goal allows. At a
    /// lower bound at most the exceed ratio of the duration sum; at an
    /// upper bound more than it.
    pub high_loss_duration_s: f64,
    /// The spread of the loss ratios of these trials.
    pub min_loss_ratio: f64,
    pub max_loss_ratio: f64,
}

/// How sure a goal's result is, as CSIT reads an MLRsearch result: the
/// exceed ratio and trial durations that decided the bounds, the evidence
/// at each bound, and the trials that disagree with the bracket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MlrConfidence {
    /// Share of the duration sum high-loss trials may take at a lower bound.
    pub exceed_ratio: f64,
    pub final_trial_duration_s: f64,
    pub duration_sum_s: f64,
    pub lower: Option<BoundEvidence>,
    pub upper: Option<BoundEvidence>,
    /// Full-length trials that lost more than the goal below the relevant
    /// lower bound, or no more than it above the relevant upper bound: the
    /// DUT's capacity moved during the search (0 for a steady DUT).
    pub contradicting_trials: usize,
    /// Trials of the whole search the tester could not offer in full.
    pub tester_short_trials: usize,
    /// Trials of the whole search that lost frames while the hypervisor
    /// held a CPU of the test's hosts, kept but not counted and run again
    /// ([`crate::search::TrialOutcome::disturbed`]).
    #[serde(default)]
    pub disturbed_trials: usize,
    /// Disturbed trials counted all the same: their load was disturbed
    /// again on every repeat. Each is charged with the loss its
    /// disturbance does not explain.
    #[serde(default)]
    pub disturbed_counted: usize,
    /// Frames those trials lost, and how many of them were charged to the
    /// host's stalls rather than to the DUT
    /// ([`crate::search::TrialOutcome::host_lost`]).
    #[serde(default)]
    pub disturbed_counted_lost: u64,
    #[serde(default)]
    pub host_lost: u64,
}

impl MlrConfidence {
    /// One line for a terminal: the evidence behind the bounds.
    pub fn summary(&self) -> String {
        let side = |b: &Option<BoundEvidence>, what: &str| match b {
            Some(b) => format!(
                "{what} {:.0}: {}, {:.1} of {:.1} s lossy",
                b.load_pps,
                trials(b.trials),
                b.high_loss_duration_s,
                b.duration_s
            ),
            None => format!("no {what} bound"),
        };
        let mut s = format!(
            "{}; {}; exceed ratio {}, {} s trials, {} s sum",
            side(&self.lower, "lower"),
            side(&self.upper, "upper"),
            self.exceed_ratio,
            self.final_trial_duration_s,
            self.duration_sum_s
        );
        let n = self.contradicting_trials;
        if n > 0 {
            let verb = if n == 1 { "contradicts" } else { "contradict" };
            s.push_str(&format!(
                "; {} {verb} the bounds (the DUT's capacity moved)",
                trials(n)
            ));
        }
        if self.tester_short_trials > 0 {
            s.push_str(&format!(
                "; the tester fell short in {}",
                trials(self.tester_short_trials)
            ));
        }
        if self.disturbed_trials > 0 {
            s.push_str(&format!(
                "; {} run again (lossy while the host's CPUs stalled: the hypervisor's steal or the stall watch)",
                trials(self.disturbed_trials)
            ));
        }
        if self.disturbed_counted > 0 {
            let frames = if self.host_lost == self.disturbed_counted_lost {
                format!("their {} lost frames", self.disturbed_counted_lost)
            } else {
                format!(
                    "{} of their {} lost frames",
                    self.host_lost, self.disturbed_counted_lost
                )
            };
            s.push_str(&format!(
                "; {} counted although disturbed on every repeat (the host kept taking \
                 CPU time): {frames}, no more than the stalls explain, charged to the \
                 host, not the DUT",
                trials(self.disturbed_counted)
            ));
        }
        s
    }
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MlrEnd {
    /// Every goal has its result (regular or irregular).
    AllGoalsDone,
    TrialLimit,
    TimeLimit,
    /// The tester cannot offer even the min load.
    TesterBelowMinLoad,
}

/// An MLRsearch result, as it goes into results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MlrResult {
    pub config: MlrConfig,
    pub goals: Vec<MlrGoalResult>,
    pub end: MlrEnd,
    /// Highest rate the search allowed itself after tester-limited trials.
    pub tester_limit_pps: Option<f64>,
    pub trials: Vec<SearchTrial>,
    pub trial_time_s: f64,
    pub wait_time_s: f64,
    pub time_spent_s: f64,
}

/// "1 trial", "N trials".
fn trials(n: usize) -> String {
    format!("{n} trial{}", if n == 1 { "" } else { "s" })
}
