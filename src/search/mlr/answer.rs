//! What a search answers for each goal: its bounds, conditional
//! throughput and end, and how sure the answer is ([`MlrConfidence`]).

use super::{bounds, Bounds, Search, SAME_LOAD};
use super::{BoundEvidence, Irregular, MlrConfidence, MlrGoalResult};
use crate::search::load_class::{conditional_throughput, Criterion, LoadTrial};
use crate::search::TrialLog;

impl Search<'_> {
    pub(super) fn goal_result(&self, g: usize, log: &TrialLog) -> MlrGoalResult {
        let goal = &self.config.goals[g];
        let chain = &self.targets[g];
        let t = &chain[chain.len() - 1];
        let own = bounds(&self.classes(&t.criterion));
        let load = |i: Option<usize>| i.map(|i| self.loads[i].load);
        let (lower, own_upper) = (load(own.lower), load(own.upper));
        let regular = match (lower, own_upper) {
            (Some(lo), Some(hi)) => (hi / lo).ln() <= t.log_width * (1.0 + 1e-9),
            _ => false,
        };
        let irregular = match (regular, lower, own_upper) {
            (true, ..) => None,
            (false, Some(lo), None)
                if self.at_ceiling(lo) && !self.high_loss_above(lo, &t.criterion) =>
            {
                Some(if self.tester_limit.is_some() {
                    Irregular::TesterLimitIsLowerBound
                } else {
                    Irregular::MaxLoadIsLowerBound
                })
            }
            (false, Some(lo), _) if self.tester_bounds_bracket(lo) => {
                Some(Irregular::TesterLimitInBracket)
            }
            (false, None, Some(hi)) if self.at_min(hi) => Some(Irregular::MinLoadIsUpperBound),
            _ => Some(Irregular::Unfinished),
        };
        // A bracket the tester bounds without an upper bound of the
        // target's own: the lowest load where the DUT lost is its top.
        let upper = match (irregular, lower) {
            (Some(Irregular::TesterLimitInBracket), Some(lo)) => {
                own_upper.or_else(|| self.first_loss_above(lo, &t.criterion))
            }
            _ => own_upper,
        };
        // An unfinished goal has no conditional throughput: its lower bound
        // may lack the trials the quantile needs, which would count as
        // loss and print as 0 pps (seen once after a stopped search).
        let conditional = own
            .lower
            .filter(|_| irregular != Some(Irregular::Unfinished))
            .map(|i| {
                let r = &self.loads[i];
                conditional_throughput(r.load, &r.trials, &t.criterion)
            });
        let mine = log
            .trials
            .iter()
            .filter(|s| s.goal.as_deref() == Some(&goal.name));
        let (trials_used, time_spent_s) =
            mine.fold((0, 0.0), |(n, s), t| (n + 1, s + t.duration_s + t.wait_s));
        MlrGoalResult {
            goal: goal.clone(),
            regular,
            irregular,
            relevant_lower_bound_pps: lower,
            relevant_upper_bound_pps: upper,
            conditional_throughput_pps: conditional,
            width_reached: lower.zip(upper).map(|(lo, hi)| (hi - lo) / hi),
            trials_used,
            time_spent_s,
            confidence: Some(self.confidence(&t.criterion, own, log)),
        }
    }

    /// How sure a goal's result is: what the trials at its two bounds
    /// showed, and how many trials disagree with the bracket.
    fn confidence(&self, c: &Criterion, own: Bounds, log: &TrialLog) -> MlrConfidence {
        let evidence = |i: usize| {
            let r = &self.loads[i];
            let applying: Vec<&LoadTrial> = r.trials.iter().filter(|t| t.applies(c)).collect();
            let losses = applying.iter().map(|t| t.loss_ratio);
            BoundEvidence {
                load_pps: r.load,
                trials: applying.len(),
                duration_s: applying.iter().fold(0.0, |s, t| s + t.duration_s),
                high_loss_duration_s: applying
                    .iter()
                    .filter(|t| t.loss_ratio > c.loss_ratio)
                    .fold(0.0, |s, t| s + t.duration_s),
                min_loss_ratio: losses.clone().fold(f64::INFINITY, f64::min).min(1.0),
                max_loss_ratio: losses.fold(0.0, f64::max),
            }
        };
        let lower = own.lower.map(|i| self.loads[i].load);
        let upper = own.upper.map(|i| self.loads[i].load);
        let full = |t: &&LoadTrial| t.applies(c) && t.duration_s >= c.final_trial_duration_s - 1e-9;
        let mut contradicting = 0;
        for r in &self.loads {
            let trials = r.trials.iter().filter(full);
            if lower.is_some_and(|lo| r.load < lo * (1.0 - SAME_LOAD)) {
                contradicting += trials.filter(|t| t.loss_ratio > c.loss_ratio).count();
            } else if upper.is_some_and(|hi| r.load > hi * (1.0 + SAME_LOAD)) {
                contradicting += trials.filter(|t| t.loss_ratio <= c.loss_ratio).count();
            }
        }
        let disturbed_counted = log
            .trials
            .iter()
            .filter(|t| t.counted && t.outcome.disturbed());
        MlrConfidence {
            exceed_ratio: c.exceed_ratio,
            final_trial_duration_s: c.final_trial_duration_s,
            duration_sum_s: c.duration_sum_s,
            lower: own.lower.map(evidence),
            upper: own.upper.map(evidence),
            contradicting_trials: contradicting,
            tester_short_trials: log
                .trials
                .iter()
                .filter(|t| t.counted && t.outcome.short_of_asked())
                .count(),
            disturbed_trials: log.disturbed,
            disturbed_counted: disturbed_counted.clone().count(),
            disturbed_counted_lost: disturbed_counted.clone().map(|t| t.outcome.lost).sum(),
            host_lost: disturbed_counted.filter_map(|t| t.outcome.host_lost).sum(),
        }
    }
}
