//! MLRsearch (RFC 9971, FD.io CSIT): several search goals (NDR: zero loss,
//! PDR: 0.5 % loss, …) found in one search, because every trial informs
//! every goal, and short trials come first.
//!
//! Terms as RFC 9971 defines them (see `load_class` for the arithmetic):
//! - a goal has a loss ratio, an exceed ratio (the share of its duration sum
//!   that high-loss trials may take at a lower bound), a final trial
//!   duration, a duration sum (how much full-length trial time decides a
//!   load) and a width (the precision wanted);
//! - a load is a lower bound, upper bound or undecided for a goal, from all
//!   the trials measured at it;
//! - the relevant upper bound is the smallest upper bound, the relevant
//!   lower bound the largest lower bound below it; the result is regular
//!   when both exist within the width apart;
//! - conditional throughput is the relevant lower bound times the
//!   forwarding ratio of the trial at the (1 − exceed ratio) quantile.
//!
//! The controller is our own (CSIT's idea, not its code): each goal gets a
//! chain of targets, the final one plus `preceding_targets` coarser ones
//! with a doubled width, a smaller duration sum and shorter trials each. The
//! coarsest targets of all goals are worked on first. A target narrows its
//! bracket by halving it (in log space, so a 2× wider bracket halves into
//! exactly the width), confirms the bounds a coarser target found with its
//! own longer trials, or extends the bracket up or down by a step that grows
//! by the expansion coefficient. Going down from an upper bound, the rate
//! the DUT forwarded there is tried first when it is lower.

mod types;

pub use types::{Irregular, MlrConfig, MlrEnd, MlrGoal, MlrGoalResult, MlrResult};

use super::load_class::{classify, conditional_throughput, Criterion, LoadClass, LoadTrial};
use super::{SearchError, TrialLog, TrialRunner, TESTER_BACKOFF};

/// Relative slack when comparing loads.
const SAME_LOAD: f64 = 1e-12;

/// A goal's target: the final one or a coarser one before it.
#[derive(Debug, Clone)]
struct Target {
    criterion: Criterion,
    /// ln(upper / lower) at which the target is reached.
    log_width: f64,
    /// Next extension steps, in log space.
    up_step: f64,
    down_step: f64,
}

impl Target {
    /// A goal's targets, coarsest first and the final target last.
    fn chain(g: &MlrGoal) -> Vec<Target> {
        let log_width = -(1.0 - g.relative_width).ln();
        let make = |trial_s: f64, sum_s: f64, log_width: f64| Target {
            criterion: Criterion {
                loss_ratio: g.loss_ratio,
                exceed_ratio: g.exceed_ratio,
                final_trial_duration_s: trial_s,
                duration_sum_s: sum_s,
            },
            log_width,
            up_step: log_width,
            down_step: log_width,
        };
        let mut chain = vec![make(g.final_trial_duration_s, g.duration_sum_s, log_width)];
        let (init, sum) = (g.initial_trial_duration_s, g.duration_sum_s);
        let preceding = if init < sum { g.preceding_targets } else { 0 };
        // Duration sums shrink geometrically from the final sum down to the
        // initial trial duration; trials are as long as the sum allows.
        let m = (init / sum).powf(1.0 / f64::from(preceding.max(1)));
        for k in 1..=preceding {
            let sum_k = if k == preceding {
                init
            } else {
                sum * m.powi(k as i32)
            };
            let trial_k = g.final_trial_duration_s.min(sum_k);
            chain.push(make(trial_k, sum_k, log_width * f64::from(1u32 << k)));
        }
        chain.reverse();
        chain
    }
}

/// Every trial measured at one load.
#[derive(Debug, Clone)]
struct LoadRecord {
    load: f64,
    trials: Vec<LoadTrial>,
}

/// Bounds of one target, as indices into the load records.
#[derive(Debug, Clone, Copy, Default)]
struct Bounds {
    lower: Option<usize>,
    upper: Option<usize>,
}

fn bounds(classes: &[LoadClass]) -> Bounds {
    let upper = classes.iter().position(|c| *c == LoadClass::Upper);
    let lower = (0..upper.unwrap_or(classes.len()))
        .rev()
        .find(|&i| classes[i] == LoadClass::Lower);
    Bounds { lower, upper }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Start,
    Halve,
    ConfirmLower,
    ConfirmUpper,
    ExtendUp,
    ExtendDown,
}

impl Action {
    fn label(self) -> &'static str {
        match self {
            Action::Start => "start at max load",
            Action::Halve => "halve",
            Action::ConfirmLower => "confirm lower bound",
            Action::ConfirmUpper => "confirm upper bound",
            Action::ExtendUp => "extend up",
            Action::ExtendDown => "extend down",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    load: f64,
    duration_s: f64,
    action: Action,
}

enum Step {
    Done,
    Next(Candidate),
}

struct Search<'a> {
    config: &'a MlrConfig,
    targets: Vec<Vec<Target>>,
    loads: Vec<LoadRecord>,
    ceiling: f64,
    tester_limit: Option<f64>,
}

impl Search<'_> {
    fn classes(&self, c: &Criterion) -> Vec<LoadClass> {
        self.loads.iter().map(|r| classify(&r.trials, c)).collect()
    }

    fn at_ceiling(&self, load: f64) -> bool {
        load >= self.ceiling * (1.0 - 1e-9)
    }

    fn at_min(&self, load: f64) -> bool {
        load <= self.config.min_load_pps * (1.0 + 1e-9)
    }

    /// Is the target reached (regularly or not), from its own classes only.
    fn reached(&self, t: &Target, own: Bounds) -> bool {
        match (own.lower, own.upper) {
            (Some(lo), Some(hi)) => {
                (self.loads[hi].load / self.loads[lo].load).ln() <= t.log_width * (1.0 + 1e-9)
            }
            (Some(lo), None) => self.at_ceiling(self.loads[lo].load),
            (None, Some(hi)) => self.at_min(self.loads[hi].load),
            (None, None) => false,
        }
    }

    /// What target `k` of goal `g` wants measured next, if anything.
    fn step(&self, g: usize, k: usize) -> Step {
        let chain = &self.targets[g];
        let t = &chain[k];
        let own = self.classes(&t.criterion);
        let own_bounds = bounds(&own);
        if self.reached(t, own_bounds) {
            return Step::Done;
        }
        // Tentative classes: own where decided, else the coarser target's.
        let tentative: Vec<LoadClass> = match k.checked_sub(1).map(|c| &chain[c]) {
            Some(coarser) => {
                let theirs = self.classes(&coarser.criterion);
                own.iter()
                    .zip(theirs)
                    .map(|(&o, c)| if o == LoadClass::Undecided { c } else { o })
                    .collect()
            }
            None => own.clone(),
        };
        let tb = bounds(&tentative);
        let load = |i: usize| self.loads[i].load;
        let at = |load: f64, action| {
            Step::Next(Candidate {
                load,
                duration_s: t.criterion.final_trial_duration_s,
                action,
            })
        };
        if let (Some(lo), Some(hi)) = (tb.lower, tb.upper) {
            if (load(hi) / load(lo)).ln() > t.log_width * (1.0 + 1e-9) {
                return at((load(lo) * load(hi)).sqrt(), Action::Halve);
            }
        }
        if let Some(lo) = tb.lower.filter(|&i| own[i] == LoadClass::Undecided) {
            return at(load(lo), Action::ConfirmLower);
        }
        if let Some(hi) = tb.upper.filter(|&i| own[i] == LoadClass::Undecided) {
            return at(load(hi), Action::ConfirmUpper);
        }
        match (tb.lower, tb.upper) {
            (Some(lo), None) => at(
                (load(lo) * t.up_step.exp()).min(self.ceiling),
                Action::ExtendUp,
            ),
            (None, Some(hi)) => {
                // The rate the DUT forwarded at the upper bound is a good
                // guess for where loss stops, when it is below the step.
                let worst = self.loads[hi]
                    .trials
                    .iter()
                    .map(|t| t.loss_ratio)
                    .fold(0.0, f64::max);
                let forwarded = load(hi) * (1.0 - worst);
                let stepped = load(hi) * (-t.down_step).exp();
                let next = stepped.min(forwarded).max(self.config.min_load_pps);
                at(next, Action::ExtendDown)
            }
            // Both tentative bounds are own bounds within the width: `reached`
            // said no only because one is not its own yet; unreachable in
            // practice, but measuring the ceiling is always progress.
            _ => at(self.ceiling, Action::Start),
        }
    }

    fn record(&mut self, load: f64, trial: LoadTrial) {
        match self
            .loads
            .iter()
            .position(|r| (r.load - load).abs() <= SAME_LOAD * load)
        {
            Some(i) => self.loads[i].trials.push(trial),
            None => {
                let at = self.loads.partition_point(|r| r.load < load);
                self.loads.insert(
                    at,
                    LoadRecord {
                        load,
                        trials: vec![trial],
                    },
                );
            }
        }
    }

    fn goal_result(&self, g: usize, log: &TrialLog) -> MlrGoalResult {
        let goal = &self.config.goals[g];
        let chain = &self.targets[g];
        let t = &chain[chain.len() - 1];
        let own = bounds(&self.classes(&t.criterion));
        let load = |i: Option<usize>| i.map(|i| self.loads[i].load);
        let (lower, upper) = (load(own.lower), load(own.upper));
        let regular = match (lower, upper) {
            (Some(lo), Some(hi)) => (hi / lo).ln() <= t.log_width * (1.0 + 1e-9),
            _ => false,
        };
        let irregular = match (regular, lower, upper) {
            (true, ..) => None,
            (false, Some(lo), None) if self.at_ceiling(lo) => {
                Some(if self.tester_limit.is_some() {
                    Irregular::TesterLimitIsLowerBound
                } else {
                    Irregular::MaxLoadIsLowerBound
                })
            }
            (false, None, Some(hi)) if self.at_min(hi) => Some(Irregular::MinLoadIsUpperBound),
            _ => Some(Irregular::Unfinished),
        };
        let conditional = own.lower.map(|i| {
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
        }
    }
}

/// Runs an MLRsearch: one trial at a time, always for the coarsest target
/// not reached yet among all goals (ties: goal order), until every goal's
/// final target is reached or a limit stops it.
///
/// A tester-limited trial is a trial at the load the tester offered, not
/// the one asked for: loss above a goal there makes the offered load an
/// upper bound; no loss makes it a lower bound. The search never again asks
/// for more than [`TESTER_BACKOFF`] below what the tester offered, and a goal
/// whose highest lower bound is that ceiling, with no upper bound, ends
/// [`Irregular::TesterLimitIsLowerBound`]: the tester stopped the search.
pub fn mlr_search(
    runner: &mut dyn TrialRunner,
    config: &MlrConfig,
) -> Result<MlrResult, SearchError> {
    config.validate()?;
    let mut s = Search {
        config,
        targets: config.goals.iter().map(Target::chain).collect(),
        loads: Vec::new(),
        ceiling: config.max_load_pps,
        tester_limit: None,
    };
    let mut log = TrialLog::default();
    let end = loop {
        if s.ceiling < config.min_load_pps {
            break MlrEnd::TesterBelowMinLoad;
        }
        // The coarsest unreached target over all goals (most levels before
        // its goal's final target), first goal on ties.
        let mut pick: Option<(usize, usize, usize, Candidate)> = None;
        for g in 0..s.targets.len() {
            let n = s.targets[g].len();
            for k in 0..n {
                if let Step::Next(c) = s.step(g, k) {
                    let to_final = n - 1 - k;
                    if pick.is_none_or(|(best, ..)| to_final > best) {
                        pick = Some((to_final, g, k, c));
                    }
                    break;
                }
            }
        }
        let Some((_, g, k, c)) = pick else {
            break MlrEnd::AllGoalsDone;
        };
        if log.trials.len() >= config.max_trials {
            break MlrEnd::TrialLimit;
        }
        if let Some(max) = config.max_search_s {
            if log.time_spent_s() + c.duration_s + config.waits.per_trial_s() > max {
                break MlrEnd::TimeLimit;
            }
        }
        match c.action {
            Action::ExtendUp => s.targets[g][k].up_step *= config.goals[g].expansion_coefficient,
            Action::ExtendDown => {
                s.targets[g][k].down_step *= config.goals[g].expansion_coefficient
            }
            _ => {}
        }
        let n = s.targets[g].len();
        let goal = &config.goals[g].name;
        let purpose = format!("{goal} {}/{n}: {}", k + 1, c.action.label());
        let t = log.run(
            runner,
            c.load,
            c.duration_s,
            &config.waits,
            purpose,
            Some(goal.clone()),
        )?;
        let o = &t.outcome;
        let trial = LoadTrial {
            duration_s: c.duration_s,
            loss_ratio: o.loss_ratio(),
        };
        if o.tester_limited {
            // The tester fell short: the trial measured the DUT at the load
            // it offered, not the one asked (loss there makes it an upper
            // bound, none a lower one). It counts at the new ceiling, just
            // below that load, where later confirmations can be asked for.
            // Short by less than the backoff is the tester's jitter at its
            // ceiling, not a lower one: it counts at the load asked.
            let offered = o.offered_pps.min(c.load);
            if offered >= c.load * (1.0 - TESTER_BACKOFF) {
                s.record(c.load, trial);
            } else {
                s.ceiling = s.ceiling.min(offered * (1.0 - TESTER_BACKOFF));
                s.tester_limit = Some(s.ceiling);
                s.record(s.ceiling, trial);
            }
        } else {
            s.record(c.load, trial);
        }
    };
    let goals = (0..config.goals.len())
        .map(|g| s.goal_result(g, &log))
        .collect();
    Ok(MlrResult {
        config: config.clone(),
        goals,
        end,
        tester_limit_pps: s.tester_limit,
        trial_time_s: log.trial_time_s,
        wait_time_s: log.wait_time_s,
        time_spent_s: log.time_spent_s(),
        trials: log.trials,
    })
}

#[cfg(test)]
mod tests;
