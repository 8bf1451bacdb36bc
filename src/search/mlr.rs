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

use crate::model::stderr::errln;
mod answer;
mod types;

pub use types::{
    BoundEvidence, Irregular, MlrConfidence, MlrConfig, MlrEnd, MlrGoal, MlrGoalResult, MlrResult,
};

use super::load_class::{classify, Criterion, Evidence, LoadClass, LoadTrial};
use super::{SearchError, TrialLog, TrialRunner, TESTER_BACKOFF};

/// Trials in a row at one load after which a search stops, at the least
/// (see the loop: longer duration sums allow more).
const SAME_LOAD_MAX: usize = 24;

/// Relative slack when comparing loads.
const SAME_LOAD: f64 = 1e-12;

/// Trials at one load that the tester fell short of (by more than
/// [`TESTER_BACKOFF`]), after which the load counts as out of its reach
/// (unless it was offered in full before) and the ceiling comes below it. A sender preempted on a loaded host
/// falls short by a different share each trial: without this, a bracket
/// the tester could not narrow asked the same load until the same-load
/// guard stopped the search (24 trials at 30,707 pps, 29.6 k offered).
const SHORT_AT_ONE_LOAD: usize = 6;

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
    /// The least the DUT forwarded in a trial here, packets/s: the offered
    /// rate times the forwarding ratio (a short trial offered less).
    forwarded_pps: f64,
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
    /// The highest load the tester has offered in full so far: a later
    /// short trial does not put the ceiling below what it has shown.
    demonstrated: f64,
    /// The trials the tester fell short in by more than the backoff: one
    /// may be a preemption; two that offered the same at different asks
    /// show the tester's ceiling.
    shortfalls: super::Shortfalls,
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

    /// Whether any trial at a load above `load` lost more than the goal
    /// allows: DUT evidence above a lower bound that must be settled before
    /// the lower bound can be called the tester's limit.
    fn high_loss_above(&self, load: f64, c: &Criterion) -> bool {
        self.first_loss_above(load, c).is_some()
    }

    /// The lowest load above `load` at which a trial lost more than the
    /// goal allows.
    fn first_loss_above(&self, load: f64, c: &Criterion) -> Option<f64> {
        self.loads
            .iter()
            .find(|r| {
                r.load > load * (1.0 + SAME_LOAD)
                    && r.trials
                        .iter()
                        .any(|t| t.applies(c) && t.loss_ratio > c.loss_ratio)
            })
            .map(|r| r.load)
    }

    /// The lower bound sits at the tester's ceiling and the bracket above it
    /// is wider than the target: the tester cannot offer the loads between.
    fn tester_bounds_bracket(&self, lower: f64) -> bool {
        self.tester_limit.is_some() && self.at_ceiling(lower)
    }

    /// Is the target reached (regularly or not), from its own classes only.
    fn reached(&self, t: &Target, own: Bounds) -> bool {
        match (own.lower, own.upper) {
            (Some(lo), Some(hi)) => {
                (self.loads[hi].load / self.loads[lo].load).ln() <= t.log_width * (1.0 + 1e-9)
                    || self.tester_bounds_bracket(self.loads[lo].load)
            }
            // At the ceiling with loss above: the tester cannot offer the
            // loads between to confirm an upper bound of this target's own.
            (Some(lo), None) => {
                self.at_ceiling(self.loads[lo].load)
                    && (self.tester_limit.is_some()
                        || !self.high_loss_above(self.loads[lo].load, &t.criterion))
            }
            (None, Some(hi)) => self.at_min(self.loads[hi].load),
            (None, None) => false,
        }
    }

    /// The coarsest unreached target over all goals (most levels before
    /// its goal's final target), first goal on ties: its goal, its level
    /// and the trial it asks for.
    fn pick(&self) -> Option<(usize, usize, Candidate)> {
        let mut pick: Option<(usize, usize, usize, Candidate)> = None;
        for g in 0..self.targets.len() {
            let n = self.targets[g].len();
            for k in 0..n {
                if let Step::Next(c) = self.step(g, k) {
                    let to_final = n - 1 - k;
                    if pick.is_none_or(|(best, ..)| to_final > best) {
                        pick = Some((to_final, g, k, c));
                    }
                    break;
                }
            }
        }
        pick.map(|(_, g, k, c)| (g, k, c))
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
        // Nothing above the tester's ceiling can be measured: a bracket
        // whose lower bound is the ceiling is not halved (the tester would
        // offer less than asked again and again), and a halving above the
        // ceiling asks the ceiling, the nearest load it can offer.
        if let (Some(lo), Some(hi)) = (tb.lower, tb.upper) {
            if (load(hi) / load(lo)).ln() > t.log_width * (1.0 + 1e-9)
                && !self.tester_bounds_bracket(load(lo))
            {
                return at(
                    (load(lo) * load(hi)).sqrt().min(self.ceiling),
                    Action::Halve,
                );
            }
        }
        if let Some(lo) = tb.lower.filter(|&i| own[i] == LoadClass::Undecided) {
            return at(load(lo).min(self.ceiling), Action::ConfirmLower);
        }
        if let Some(hi) = tb.upper.filter(|&i| own[i] == LoadClass::Undecided) {
            // An upper bound above the tester's ceiling cannot be confirmed
            // (the tester offers less than it is asked there): a lower
            // bound at the ceiling ends the target instead.
            if self.tester_limit.is_some() && load(hi) > self.ceiling * (1.0 + 1e-9) {
                return at(self.ceiling, Action::ConfirmLower);
            }
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
                let forwarded = self.loads[hi].forwarded_pps;
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

    fn record(&mut self, load: f64, trial: LoadTrial, forwarded_pps: f64) {
        match self
            .loads
            .iter()
            .position(|r| (r.load - load).abs() <= SAME_LOAD * load)
        {
            Some(i) => {
                let r = &mut self.loads[i];
                r.trials.push(trial);
                r.forwarded_pps = r.forwarded_pps.min(forwarded_pps);
            }
            None => {
                let at = self.loads.partition_point(|r| r.load < load);
                self.loads.insert(
                    at,
                    LoadRecord {
                        load,
                        trials: vec![trial],
                        forwarded_pps,
                    },
                );
            }
        }
    }

    /// Records a trial as what it proves. In full at the load asked when
    /// the tester offered it; otherwise its loss above a goal at the load
    /// asked (the DUT lost at less, so it loses there too), and its passes
    /// at the load offered. When two shortfalls of more than
    /// [`TESTER_BACKOFF`] show a ceiling ([`super::Shortfalls`]), it comes
    /// down to just below what was offered, unless the tester has offered
    /// more in full before.
    fn record_outcome(&mut self, asked: f64, o: &super::TrialOutcome, duration_s: f64) {
        let trial = LoadTrial::full(duration_s, o.loss_ratio());
        let offered = o.offered_pps.min(asked);
        let forwarded = offered * (1.0 - o.loss_ratio());
        if !(o.tester_short || o.tester_limited) || offered >= asked {
            self.demonstrated = self.demonstrated.max(asked);
            self.record(asked, trial, forwarded);
            return;
        }
        self.record(
            asked,
            LoadTrial {
                evidence: Evidence::HighLossOnly,
                ..trial
            },
            forwarded,
        );
        // Short by more than the backoff: the tester cannot offer this load,
        // so it is not asked for again, unless it has offered more in full.
        if o.short_of_asked() {
            // Asked again and again and never offered: out of the tester's
            // reach, so the ceiling comes down to just below it.
            let beyond = self.shortfalls.at_ask(asked) + 1 >= SHORT_AT_ONE_LOAD;
            // Asks below the ceiling repeat to confirm a bound: only
            // different asks that offered the same show the tester's limit.
            // An ask at the ceiling repeats because nothing above it may
            // be asked: the same offer twice there shows it.
            let distinct = !self.at_ceiling(asked);
            let again = self
                .shortfalls
                .show_a_ceiling(asked, offered, distinct, o.lost == 0);
            let best = self.shortfalls.best_offered().max(offered);
            let most = (best * (1.0 - TESTER_BACKOFF)).max(self.demonstrated);
            let most = if beyond {
                most.min(asked * (1.0 - TESTER_BACKOFF))
                    .max(self.demonstrated)
            } else {
                most
            };
            if (again || beyond) && most < self.ceiling {
                self.ceiling = most;
                self.tester_limit = Some(most);
            }
        }
        // A pass at the load offered holds at any load below it: at the
        // ceiling, where it can be confirmed. Below the min load it says
        // nothing the search may use (a tester that sent nothing offered
        // 0 pps: a "pass" there would make every next ask 0 pps).
        let passed_at = offered.min(self.ceiling);
        if passed_at < self.config.min_load_pps * (1.0 - 1e-9) {
            return;
        }
        self.record(
            passed_at,
            LoadTrial {
                evidence: Evidence::LowLossOnly,
                ..trial
            },
            passed_at * (1.0 - o.loss_ratio()),
        );
    }
}

/// How many trials in a row at one load end the search: every goal's
/// duration sum in its shortest trials, each run again when disturbed,
/// twice over (more than any goal needs), and at least [`SAME_LOAD_MAX`].
fn same_load_max(config: &MlrConfig) -> usize {
    config
        .goals
        .iter()
        .map(|g| {
            let n = (g.duration_sum_s
                / g.initial_trial_duration_s
                    .min(g.final_trial_duration_s)
                    .max(1e-3))
            .ceil();
            (n.min(1e6) as usize) * (1 + super::DISTURBED_REPEATS) * 2
        })
        .max()
        .unwrap_or(0)
        .max(SAME_LOAD_MAX)
}

/// Says why the search stops after `same` trials in a row at `load`: the
/// tester fell short of it, or (without a short trial) a bug.
fn warn_stuck(log: &TrialLog, same: usize, load: f64) {
    let short = log
        .trials
        .iter()
        .rev()
        .take(same)
        .filter(|t| t.outcome.short_of_asked())
        .count();
    if short > 0 {
        errln!(
            "search: {same} trials in a row at {:.0} pps without an answer; the tester fell short of it in {short}: this host could not offer that load steadily (other work on its cores?); stopping",
            load
        );
    } else {
        errln!(
            "search: {same} trials in a row at {:.0} pps without an answer; stopping (a bug: please report it with results.json)",
            load
        );
    }
}

/// Runs an MLRsearch: one trial at a time, always for the coarsest target
/// not reached yet among all goals (ties: goal order), until every goal's
/// final target is reached or a limit stops it.
///
/// A trial the tester could not offer in full ran at the load it offered,
/// not the one asked for: loss above a goal there holds at the load asked
/// too (an upper bound: DUT evidence, whatever was asked); loss within a
/// goal holds only at what was offered (a lower bound just below it). The
/// search never again extends up beyond [`TESTER_BACKOFF`] below what the
/// tester offered. A goal whose highest lower bound is that ceiling ends
/// [`Irregular::TesterLimitIsLowerBound`] only when no trial lost more than
/// the goal allows above it: the tester, not the DUT, stopped the search.
/// With DUT loss above the ceiling and a bracket the tester cannot narrow,
/// it ends [`Irregular::TesterLimitInBracket`] with both bounds.
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
        demonstrated: 0.0,
        shortfalls: super::Shortfalls::default(),
    };
    let same_load_max = same_load_max(config);
    let mut log = TrialLog::default();
    let end = loop {
        if s.ceiling < config.min_load_pps {
            break MlrEnd::TesterBelowMinLoad;
        }
        let Some((g, k, c)) = s.pick() else {
            break MlrEnd::AllGoalsDone;
        };
        if log.trials.len() >= config.max_trials {
            break MlrEnd::TrialLimit;
        }
        // A search that asks for one load over and over learns nothing
        // more: seen once (back to back, tester-limited at the line rate,
        // 350 trials in 9 minutes), bounded here whatever the cause.
        let same = log
            .trials
            .iter()
            .rev()
            .take_while(|t| t.rate_pps == c.load)
            .count();
        if same >= same_load_max {
            warn_stuck(&log, same, c.load);
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
        let o = t.outcome.clone();
        s.record_outcome(c.load, &o, c.duration_s);
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
