//! MLRsearch on simulated DUTs: the trial chain, both goals within their
//! width, irregular bounds, limits and bad goals. Testers that fall short
//! and hosts that stall are in [`tester`].

use super::*;
use crate::search::sim::{SimConfig, SimDut};
use crate::search::TrialWaits;

mod tester;

/// A DUT whose NDR (random loss from 900 kpps on) and PDR (tail drop above
/// 1 Mpps) differ.
fn dut(jitter: f64) -> SimDut {
    SimDut::new(SimConfig {
        seed: 42,
        capacity_pps: 1_000_000.0,
        capacity_jitter: jitter,
        loss_floor_ratio: 0.002,
        loss_floor_onset_pps: 900_000.0,
        ..SimConfig::default()
    })
}

/// [`dut`] on a host that stalls in `chance` of its trials for `stall_s`
/// (and says so with steal).
fn stalling(seed: u64, chance: f64, stall_s: f64) -> SimDut {
    SimDut::new(SimConfig {
        seed,
        stall_chance: chance,
        stall_s,
        ..dut(0.0).config
    })
}

/// The goals with short sums, as a quick search uses: 2 s decide a load.
fn quick(min: f64, max: f64) -> MlrConfig {
    let mut config = MlrConfig::new(min, max);
    for g in &mut config.goals {
        g.duration_sum_s = 2.0;
    }
    config
}

fn result<'a>(r: &'a MlrResult, name: &str) -> &'a MlrGoalResult {
    r.goals.iter().find(|g| g.goal.name == name).unwrap()
}

#[test]
fn target_chain_shortens_trials_and_widens() {
    let g = MlrGoal {
        final_trial_duration_s: 60.0,
        duration_sum_s: 60.0,
        ..MlrGoal::ndr()
    };
    let chain = Target::chain(&g);
    let trials: Vec<f64> = chain
        .iter()
        .map(|t| t.criterion.final_trial_duration_s)
        .collect();
    let sums: Vec<f64> = chain.iter().map(|t| t.criterion.duration_sum_s).collect();
    assert_eq!(trials.len(), 3);
    assert_eq!((trials[0], trials[2]), (1.0, 60.0));
    assert!((trials[1] - 60f64.sqrt()).abs() < 1e-9, "{trials:?}");
    assert_eq!(trials, sums);
    let lw = -(1.0 - 0.005f64).ln();
    let widths: Vec<f64> = chain.iter().map(|t| t.log_width / lw).collect();
    assert!(widths
        .iter()
        .zip([4.0, 2.0, 1.0])
        .all(|(a, b)| (a - b).abs() < 1e-9));

    // CSIT defaults: all trials 1 s, sums 1 s, 4.58 s, 21 s.
    let chain = Target::chain(&MlrGoal::pdr());
    let sums: Vec<f64> = chain.iter().map(|t| t.criterion.duration_sum_s).collect();
    assert!((sums[1] - 21f64.sqrt()).abs() < 1e-9 && sums[0] == 1.0 && sums[2] == 21.0);
    assert!(chain
        .iter()
        .all(|t| t.criterion.final_trial_duration_s == 1.0));
    // No shorter trials to start with: no preceding targets.
    let one = MlrGoal {
        duration_sum_s: 1.0,
        ..MlrGoal::ndr()
    };
    assert_eq!(Target::chain(&one).len(), 1);
}

#[test]
fn finds_ndr_and_pdr_within_their_width() {
    let mut d = dut(0.0);
    let (ndr, pdr) = (d.true_throughput(0.0, 1.0), d.true_throughput(0.005, 1.0));
    let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    assert_eq!(r.end, MlrEnd::AllGoalsDone);
    for (name, truth) in [("ndr", ndr), ("pdr", pdr)] {
        let g = result(&r, name);
        assert!(g.regular, "{g:?}");
        let (lo, hi) = (
            g.relevant_lower_bound_pps.unwrap(),
            g.relevant_upper_bound_pps.unwrap(),
        );
        assert!(lo <= truth && truth < hi, "{name}: {lo} <= {truth} < {hi}");
        assert!((hi - lo) / hi <= 0.005 + 1e-12);
        assert!((truth - lo) / truth <= 0.005, "{name}: {lo} vs {truth}");
        // Conditional throughput: the lower bound less at most the goal's loss.
        let ct = g.conditional_throughput_pps.unwrap();
        assert!(
            ct <= lo && ct >= lo * (1.0 - g.goal.loss_ratio),
            "{ct} vs {lo}"
        );
    }
    assert_eq!(
        result(&r, "ndr").conditional_throughput_pps,
        result(&r, "ndr").relevant_lower_bound_pps
    );
    // Every trial was chosen by one goal; together they account for all.
    let used: usize = r.goals.iter().map(|g| g.trials_used).sum();
    assert_eq!(used, r.trials.len());
    let spent: f64 = r.goals.iter().map(|g| g.time_spent_s).sum();
    assert!((spent - r.time_spent_s).abs() < 1e-9);
    assert!((d.clock_s() - r.time_spent_s).abs() < 1e-9);
}

#[test]
fn noisy_dut_stays_within_width_plus_noise() {
    for seed in 1..=20 {
        let mut d = SimDut::new(SimConfig {
            seed,
            ..dut(0.001).config
        });
        let (ndr, pdr) = (d.true_throughput(0.0, 1.0), d.true_throughput(0.005, 1.0));
        let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
        assert_eq!(r.end, MlrEnd::AllGoalsDone, "seed {seed}");
        for (name, truth) in [("ndr", ndr), ("pdr", pdr)] {
            let lo = result(&r, name).relevant_lower_bound_pps.unwrap();
            assert!(
                (truth - lo).abs() / truth <= 0.005 + 0.001,
                "seed {seed} {name}: {lo} vs {truth}"
            );
        }
    }
}

#[test]
fn short_trials_come_first_and_final_trials_last() {
    let goal = |g: MlrGoal| MlrGoal {
        final_trial_duration_s: 30.0,
        duration_sum_s: 30.0,
        ..g
    };
    let cfg = MlrConfig {
        goals: vec![goal(MlrGoal::ndr()), goal(MlrGoal::pdr())],
        ..MlrConfig::new(10_000.0, 2_000_000.0)
    };
    let mut d = dut(0.0);
    let r = mlr_search(&mut d, &cfg).unwrap();
    let durations: Vec<f64> = r.trials.iter().map(|t| t.duration_s).collect();
    assert_eq!(durations[0], 1.0);
    assert_eq!(r.trials[0].rate_pps, 2_000_000.0, "first trial at max load");
    assert_eq!(*durations.last().unwrap(), 30.0);
    // Phases run in order: once a longer trial ran, no 1 s trial follows.
    let first_long = durations.iter().position(|&d| d > 1.0).unwrap();
    assert!(
        durations[first_long..].iter().all(|&d| d > 1.0),
        "{durations:?}"
    );
    let full = durations.iter().filter(|&&d| d == 30.0).count();
    assert!(full <= 6, "{full} full-length trials: {durations:?}");
    assert!(r.goals.iter().all(|g| g.regular));
}

#[test]
fn one_search_for_two_goals_beats_two_searches() {
    let both = mlr_search(&mut dut(0.0), &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    let alone = |g: MlrGoal| {
        let cfg = MlrConfig {
            goals: vec![g],
            ..MlrConfig::new(10_000.0, 2_000_000.0)
        };
        mlr_search(&mut dut(0.0), &cfg).unwrap().trial_time_s
    };
    let separate = alone(MlrGoal::ndr()) + alone(MlrGoal::pdr());
    assert!(
        both.trial_time_s < separate,
        "{} vs {separate}",
        both.trial_time_s
    );
}

#[test]
fn max_load_passing_is_an_irregular_lower_bound() {
    let mut d = dut(0.0);
    let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 500_000.0)).unwrap();
    for g in &r.goals {
        assert!(!g.regular);
        assert_eq!(g.irregular, Some(Irregular::MaxLoadIsLowerBound));
        assert_eq!(g.relevant_lower_bound_pps, Some(500_000.0));
        assert_eq!(g.relevant_upper_bound_pps, None);
    }
    // Eleven 1 s trials at max load decide a 21 s sum at exceed ratio 0.5,
    // for both goals at once.
    assert_eq!(r.trials.len(), 11);
    assert!(r.trials.iter().all(|t| t.rate_pps == 500_000.0));
}

#[test]
fn min_load_failing_is_an_irregular_upper_bound() {
    let mut d = SimDut::new(SimConfig {
        capacity_pps: 5_000.0,
        ..SimConfig::default()
    });
    let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    assert_eq!(r.end, MlrEnd::AllGoalsDone);
    for g in &r.goals {
        assert_eq!(g.irregular, Some(Irregular::MinLoadIsUpperBound), "{g:?}");
        assert_eq!(g.relevant_upper_bound_pps, Some(10_000.0));
        assert_eq!(g.relevant_lower_bound_pps, None);
        assert_eq!(g.conditional_throughput_pps, None);
    }
}

/// A tester-limited trial is a trial at the load offered: with no loss it is
/// a lower bound there, the search stays below what the tester offered, and
/// says the answer is the tester's limit.
#[test]
fn tester_limit_caps_the_search_and_is_reported() {
    let mut d = SimDut::new(SimConfig {
        capacity_pps: 5_000_000.0,
        tester_max_pps: Some(1_500_000.0),
        ..SimConfig::default()
    });
    let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    let limit = 1_500_000.0 * (1.0 - TESTER_BACKOFF);
    assert_eq!(r.tester_limit_pps, Some(limit));
    assert!(r.trials[0].counted && r.trials[0].outcome.tester_limited);
    // A second short trial shows the limit; nothing above what the tester
    // offered is asked after it.
    let second = r.trials[1..]
        .iter()
        .position(|t| t.outcome.short_of_asked())
        .unwrap()
        + 1;
    assert!(second <= 3, "{:?}", r.trials);
    assert!(
        r.trials[second + 1..]
            .iter()
            .all(|t| t.rate_pps <= 1_500_000.0),
        "{:?}",
        r.trials
            .iter()
            .map(|t| (t.rate_pps as u64, t.outcome.offered_pps as u64, &t.purpose))
            .collect::<Vec<_>>()
    );
    for g in &r.goals {
        assert_eq!(g.irregular, Some(Irregular::TesterLimitIsLowerBound));
        // What the tester reached, measured loss-free: its ceiling, or
        // the most it offered in full.
        let lo = g.relevant_lower_bound_pps.unwrap();
        assert!((limit..=1_500_000.0).contains(&lo), "{lo}");
        assert_eq!(g.relevant_upper_bound_pps, None);
    }

    // A DUT slower than the tester still gets its own regular result.
    let mut d = SimDut::new(SimConfig {
        capacity_pps: 1_000_000.0,
        tester_max_pps: Some(1_500_000.0),
        ..SimConfig::default()
    });
    let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    assert!(r.goals.iter().all(|g| g.regular), "{:?}", r.goals);

    // A tester that cannot even reach the min load ends the search.
    let mut d = SimDut::new(SimConfig {
        tester_max_pps: Some(5_000.0),
        ..SimConfig::default()
    });
    let r = mlr_search(&mut d, &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    assert_eq!(r.end, MlrEnd::TesterBelowMinLoad);
    assert!(r.trials.iter().all(|t| t.outcome.tester_limited));
}

#[test]
fn limits_stop_the_search_and_mark_goals_unfinished() {
    let cfg = MlrConfig {
        max_trials: 5,
        ..MlrConfig::new(10_000.0, 2_000_000.0)
    };
    let r = mlr_search(&mut dut(0.0), &cfg).unwrap();
    assert_eq!(r.end, MlrEnd::TrialLimit);
    assert_eq!(r.trials.len(), 5);
    assert!(r
        .goals
        .iter()
        .all(|g| g.irregular == Some(Irregular::Unfinished)));
    // An unfinished goal gives no conditional throughput (its lower bound
    // may lack the trials the quantile needs: it would read 0 pps).
    assert!(r
        .goals
        .iter()
        .all(|g| g.conditional_throughput_pps.is_none()));

    let cfg = MlrConfig {
        max_search_s: Some(12.5),
        waits: TrialWaits {
            restabilize_s: 1.5,
            ..TrialWaits::NONE
        },
        ..MlrConfig::new(10_000.0, 2_000_000.0)
    };
    let mut d = dut(0.0);
    let r = mlr_search(&mut d, &cfg).unwrap();
    assert_eq!(r.end, MlrEnd::TimeLimit);
    assert_eq!(r.trials.len(), 5, "5 × 2.5 s fit in 12.5 s");
    assert_eq!(r.wait_time_s, 7.5);
    assert_eq!(d.clock_s(), 12.5);
}

#[test]
fn bad_goals_say_what_is_wrong() {
    let mut d = dut(0.0);
    let bad = |g: MlrGoal| {
        let cfg = MlrConfig {
            goals: vec![g],
            ..MlrConfig::new(10_000.0, 2_000_000.0)
        };
        mlr_search(&mut d.clone(), &cfg).unwrap_err().to_string()
    };
    assert!(bad(MlrGoal {
        loss_ratio: 1.0,
        ..MlrGoal::ndr()
    })
    .contains("loss ratio"));
    assert!(bad(MlrGoal {
        duration_sum_s: 0.5,
        ..MlrGoal::ndr()
    })
    .contains("duration sum"));
    assert!(bad(MlrGoal {
        initial_trial_duration_s: 2.0,
        ..MlrGoal::ndr()
    })
    .contains("initial"));
    assert!(bad(MlrGoal {
        expansion_coefficient: 1.0,
        ..MlrGoal::ndr()
    })
    .contains("expansion"));
    let twice = MlrConfig {
        goals: vec![MlrGoal::ndr(), MlrGoal::ndr()],
        ..MlrConfig::new(10_000.0, 2_000_000.0)
    };
    assert!(mlr_search(&mut d, &twice)
        .unwrap_err()
        .to_string()
        .contains("unique"));
    assert_eq!(d.trials(), 0);
}

#[test]
fn runner_failure_keeps_completed_trials() {
    struct Flaky(SimDut);
    impl TrialRunner for Flaky {
        fn trial(
            &mut self,
            rate_pps: f64,
            d: std::time::Duration,
        ) -> Result<crate::search::TrialOutcome, crate::search::TrialError> {
            if self.0.trials() == 3 {
                return Err(crate::search::TrialError::Failed(
                    "agent gen went away".into(),
                ));
            }
            self.0.trial(rate_pps, d)
        }
    }
    let err = mlr_search(&mut Flaky(dut(0.0)), &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap_err();
    match err {
        SearchError::Trial {
            index,
            completed,
            message,
            ..
        } => {
            assert_eq!((index, completed.len()), (3, 3));
            assert!(message.contains("went away"));
        }
        e => panic!("{e}"),
    }
}
