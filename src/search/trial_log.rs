//! The books a search keeps: every trial with its waits and time spent
//! ([`TrialLog`]), and the shortfalls that tell a tester's ceiling from a
//! preemption ([`Shortfalls`]).

use super::{
    SearchError, SearchTrial, TrialError, TrialOutcome, TrialRunner, TrialWaits, WaitPhase,
    DISTURBED_REPEATS, TESTER_BACKOFF,
};
use std::time::Duration;

/// The trials a tester fell short in by more than [`TESTER_BACKOFF`], to
/// tell its ceiling from a preemption: a tester at its limit offers about
/// the same whatever it is asked (two shortfalls whose offered rates are
/// within the backoff of each other while the rates asked differ by more
/// than twice it); a tester preempted now and then falls short by a share
/// of what it was asked.
#[derive(Debug, Default)]
pub(crate) struct Shortfalls {
    /// (asked, offered, whether the DUT lost nothing) of each such trial,
    /// packets/s.
    seen: Vec<(f64, f64, bool)>,
}

/// Loss-free shortfalls that show a ceiling even when their offers differ
/// by more than the backoff: a tester that wanders at its limit (an
/// unpaced generator far below the rate asked) never offers the same twice,
/// and a preemption that happens to hit three trials in a row while the DUT
/// loses nothing still leaves the search nothing above to measure.
const CLEAN_SHORTFALLS: usize = 3;

impl Shortfalls {
    /// Records a shortfall; true when it and an earlier one show a ceiling,
    /// or when it is the [`CLEAN_SHORTFALLS`]th in which the DUT lost
    /// nothing (`clean`). `distinct_asks` false lets the same rate asked
    /// twice show it (a search that does not repeat a load but to probe
    /// the ceiling, or an ask at the ceiling itself).
    pub fn show_a_ceiling(
        &mut self,
        asked: f64,
        offered: f64,
        distinct_asks: bool,
        clean: bool,
    ) -> bool {
        let limit = self.seen.iter().any(|&(a, o, _)| {
            (o - offered).abs() <= TESTER_BACKOFF * o.max(offered)
                && (!distinct_asks || (a - asked).abs() > 2.0 * TESTER_BACKOFF * a.max(asked))
        });
        self.seen.push((asked, offered, clean));
        let clean_seen = self.seen.iter().filter(|s| s.2).count();
        limit || (clean && clean_seen >= CLEAN_SHORTFALLS)
    }

    /// The most any shortfall offered, packets/s (0 before the first). A
    /// ceiling is put just below it, not below the last offer: a sender
    /// preempted on a loaded host falls short by a different share each
    /// trial, and a ceiling that followed each offer would ratchet down
    /// trial after trial (seen: to the search's minimum load).
    /// How many shortfalls were seen at the load `asked` (the same ask,
    /// to 1e-9).
    pub fn at_ask(&self, asked: f64) -> usize {
        self.seen
            .iter()
            .filter(|s| (s.0 - asked).abs() <= 1e-9 * s.0.max(asked))
            .count()
    }

    pub fn best_offered(&self) -> f64 {
        self.seen.iter().map(|s| s.1).fold(0.0, f64::max)
    }
}

/// Runs trials with their waits and keeps the books every search reports.
#[derive(Debug, Default)]
pub(crate) struct TrialLog {
    pub trials: Vec<SearchTrial>,
    pub trial_time_s: f64,
    pub wait_time_s: f64,
    /// Trials run again because they were disturbed.
    pub disturbed: usize,
}

impl TrialLog {
    pub fn time_spent_s(&self) -> f64 {
        self.trial_time_s + self.wait_time_s
    }

    /// One trial with the §23 waits around it. Returns the recorded trial.
    pub fn run(
        &mut self,
        runner: &mut dyn TrialRunner,
        rate_pps: f64,
        duration_s: f64,
        waits: &TrialWaits,
        purpose: String,
        goal: Option<String>,
    ) -> Result<&SearchTrial, SearchError> {
        let duration = secs(duration_s)
            .map_err(|e| self.failed(self.trials.len(), rate_pps, duration_s, e))?;
        let mut repeats = 0;
        loop {
            let index = self.trials.len();
            let mut outcome = self.one(runner, rate_pps, duration, waits, index)?;
            let wait_s = waits.per_trial_s();
            self.trial_time_s += duration_s;
            self.wait_time_s += wait_s;
            let elapsed_s = self.time_spent_s();
            // A disturbed trial is kept, not counted, and run again; the
            // last repeat counts, charged to the DUT with the loss its
            // disturbance does not explain.
            let disturbance = outcome.disturbance();
            let again = disturbance.is_some() && repeats < DISTURBED_REPEATS;
            let purpose = match disturbance {
                Some(d) if again => {
                    self.disturbed += 1;
                    format!("{purpose} (disturbed: {d}; run again)")
                }
                Some(d) => {
                    let host = outcome.host_explained().unwrap_or(0);
                    outcome.host_lost = Some(host);
                    format!(
                        "{purpose} (disturbed on every repeat: {d}; {host} of its {} lost frames charged to the host)",
                        outcome.lost
                    )
                }
                None => purpose.clone(),
            };
            self.trials.push(SearchTrial {
                index,
                rate_pps,
                duration_s,
                outcome,
                purpose,
                goal: goal.clone(),
                // Every undisturbed trial is evidence; a tester-limited one
                // at the load offered.
                counted: !again,
                wait_s,
                elapsed_s,
            });
            if !again {
                return Ok(&self.trials[index]);
            }
            repeats += 1;
        }
    }

    /// Trial `index` failed: the error, with the trials completed before.
    fn failed(&self, index: usize, rate_pps: f64, duration_s: f64, e: TrialError) -> SearchError {
        SearchError::Trial {
            index,
            rate_pps,
            duration_s,
            message: e.to_string(),
            completed: self.trials.clone(),
        }
    }

    /// One trial and its waits.
    fn one(
        &self,
        runner: &mut dyn TrialRunner,
        rate_pps: f64,
        duration: Duration,
        waits: &TrialWaits,
        index: usize,
    ) -> Result<TrialOutcome, SearchError> {
        let duration_s = duration.as_secs_f64();
        let fail = |log: &TrialLog, e: TrialError| log.failed(index, rate_pps, duration_s, e);
        for (phase, s) in [
            (WaitPhase::RoutingUpdate, waits.routing_update_s),
            (WaitPhase::Learning, waits.learning_s),
        ] {
            if s > 0.0 {
                let d = secs(s).map_err(|e| fail(self, e))?;
                runner.wait(phase, d).map_err(|e| fail(self, e))?;
            }
        }
        let outcome = runner
            .trial(rate_pps, duration)
            .map_err(|e| fail(self, e))?;
        if waits.restabilize_s > 0.0 {
            let d = secs(waits.restabilize_s).map_err(|e| fail(self, e))?;
            runner
                .wait(WaitPhase::Restabilize, d)
                .map_err(|e| fail(self, e))?;
        }
        Ok(outcome)
    }
}

fn secs(s: f64) -> Result<Duration, TrialError> {
    Duration::try_from_secs_f64(s).map_err(|_| TrialError::BadDuration(s))
}
