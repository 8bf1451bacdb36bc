use super::*;

/// A 1 s trial offered at `pps` that lost `lost`, with the host's
/// steal and the stall watch's count as given.
fn trial(pps: u64, lost: u64, steal_ms: Option<f64>, stall_ms: Option<f64>) -> TrialOutcome {
    TrialOutcome {
        rate_pps: pps as f64,
        offered_pps: pps as f64,
        duration_s: 1.0,
        tx_packets: pps,
        rx_packets: pps - lost,
        lost,
        tester_short: false,
        tester_limited: false,
        dut_counted_lost: None,
        dut: None,
        steal_ms,
        stall_ms,
        host_lost: None,
    }
}

#[test]
fn only_loss_the_stolen_time_explains_is_disturbed() {
    let o = |lost, steal_ms| trial(100_000, lost, steal_ms, None);
    // 30 ms away at 100 kpps: up to 4,000 frames (30 ms + one tick).
    assert!(o(3_000, Some(30.0)).disturbed());
    assert!(o(4_000, Some(30.0)).disturbed());
    assert!(
        !o(4_001, Some(30.0)).disturbed(),
        "more than the steal explains"
    );
    assert!(!o(0, Some(30.0)).disturbed(), "nothing lost");
    assert!(!o(10, Some(0.0)).disturbed(), "no steal");
    assert!(!o(10, None).disturbed(), "no per-CPU times");
}

#[test]
fn the_host_is_charged_with_the_frames_offered_while_it_held_the_cpus() {
    let o = |lost, steal_ms, stall_ms| trial(200_000, lost, steal_ms, stall_ms);
    // 2.5 ms watched at 200 kpps: 500 frames at most.
    assert_eq!(o(300, Some(0.0), Some(2.5)).host_explained(), Some(300));
    assert_eq!(o(500, Some(0.0), Some(2.5)).host_explained(), Some(500));
    assert_eq!(o(501, Some(0.0), Some(2.5)).host_explained(), None);
    // A steal tick the watch did not see: disturbed (run again), but
    // nothing is the host's: the tick is the counter's rounding.
    let tick = o(300, Some(10.0), Some(0.0));
    assert!(tick.disturbed());
    assert_eq!(tick.host_explained(), Some(0));
    // No watch: the steal itself, not the tick's allowance above it.
    assert_eq!(o(1_500, Some(10.0), None).host_explained(), Some(1_500));
    assert_eq!(o(3_000, Some(10.0), None).host_explained(), Some(2_000));
    assert_eq!(
        o(0, Some(10.0), None).host_explained(),
        None,
        "nothing lost"
    );
    let mut charged = o(3_000, Some(10.0), None);
    charged.host_lost = charged.host_explained();
    assert_eq!(charged.charged_lost(), 1_000);
    assert!((charged.loss_ratio() - 0.005).abs() < 1e-12);
}

#[test]
fn only_loss_the_watched_stalls_explain_is_disturbed() {
    // No steal tick: a stall of a few ms that /proc/stat rounds away.
    let o = |lost, stall_ms| trial(200_000, lost, Some(0.0), stall_ms);
    // 2.5 ms of stalled CPUs at 200 kpps: up to 500 frames.
    assert!(o(40, Some(2.5)).disturbed());
    assert!(o(500, Some(2.5)).disturbed());
    assert!(
        !o(501, Some(2.5)).disturbed(),
        "more than the stalls explain"
    );
    assert!(!o(0, Some(2.5)).disturbed(), "nothing lost");
    assert!(!o(40, Some(0.0)).disturbed(), "no stall");
    assert!(!o(40, None).disturbed(), "no watch");
    assert_eq!(
        o(40, Some(2.5)).disturbance().as_deref(),
        Some("the host's CPUs stalled 2.5 ms")
    );
}

#[test]
fn loss_ratio_is_lost_over_sent() {
    let o = TrialOutcome {
        rate_pps: 1000.0,
        offered_pps: 1000.0,
        duration_s: 1.0,
        tx_packets: 1000,
        rx_packets: 990,
        lost: 10,
        tester_short: false,
        tester_limited: false,
        dut_counted_lost: None,
        dut: None,
        steal_ms: None,
        stall_ms: None,
        host_lost: None,
    };
    assert!((o.loss_ratio() - 0.01).abs() < 1e-12);
    let none_sent = TrialOutcome {
        tx_packets: 0,
        rx_packets: 0,
        lost: 0,
        ..o
    };
    assert_eq!(none_sent.loss_ratio(), 0.0);
}

/// Results serialise in snake_case and validate against the JSON Schema
/// their types generate, as they will inside results.json.
#[test]
fn results_validate_against_their_schema() {
    fn check<T: Serialize + JsonSchema>(value: &T) -> serde_json::Value {
        let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
        let v = serde_json::to_value(value).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        v
    }
    let dut = || {
        SimDut::new(SimConfig {
            capacity_pps: 800_000.0,
            tester_max_pps: Some(1_500_000.0),
            ..SimConfig::default()
        })
    };
    let mlr = mlr_search(&mut dut(), &MlrConfig::new(10_000.0, 2_000_000.0)).unwrap();
    let v = check(&mlr);
    assert_eq!(v["end"], "all_goals_done");
    assert_eq!(v["goals"][0]["goal"]["name"], "ndr");
    let rfc = Rfc2544Config {
        trial_duration_s: 1.0,
        ..Rfc2544Config::new(10_000.0, 2_000_000.0)
    };
    let v = check(&rfc2544_throughput(&mut dut(), &rfc).unwrap());
    assert_eq!(v["end"], "found");
    assert_eq!(v["config"]["resolution"]["relative"], 0.005);
    assert_eq!(v["rfc2544_compliant"], false);
    let flr = FrameLossConfig {
        trial_duration_s: 1.0,
        ..FrameLossConfig::new(1_000_000.0)
    };
    check(&frame_loss_rate(&mut dut(), &flr).unwrap());
    let spec = RampSpec {
        warmup_pps: 1000.0,
        warmup_s: 2.0,
        start_pps: 0.0,
        target_pps: 1_000_000.0,
        ramp_s: 10.0,
        hold_s: 2.0,
    };
    let samples = dut().ramp_samples(&spec);
    check(&samples);
    let v = check(&summarize_ramp(
        &samples,
        DEFAULT_SATURATION_LOSS,
        1_000_000.0,
    ));
    assert_eq!(v["saturation"]["phase"], "ramp");
}

#[test]
fn a_ceiling_is_the_same_offer_at_different_asks() {
    let mut s = Shortfalls::default();
    assert!(!s.show_a_ceiling(2_000_000.0, 1_500_000.0, true, true));
    assert!(s.show_a_ceiling(1_600_000.0, 1_490_000.0, true, true));
    // Preempted: short by a share of each ask (the DUT losing).
    let mut s = Shortfalls::default();
    assert!(!s.show_a_ceiling(605_000.0, 580_000.0, true, false));
    assert!(!s.show_a_ceiling(600_000.0, 575_000.0, true, false));
    assert!(!s.show_a_ceiling(900_000.0, 850_000.0, true, false));
    // The same ask twice, the same offer: a ceiling when asks may repeat.
    assert!(s.show_a_ceiling(600_000.0, 577_000.0, false, false));
    // Three loss-free shortfalls show one, whatever they offered.
    let mut s = Shortfalls::default();
    assert!(!s.show_a_ceiling(14_880_000.0, 2_800_000.0, true, true));
    assert!(!s.show_a_ceiling(14_880_000.0, 2_500_000.0, true, true));
    assert!(!s.show_a_ceiling(14_880_000.0, 2_650_000.0, true, false));
    assert!(s.show_a_ceiling(14_880_000.0, 2_300_000.0, true, true));
}

#[test]
fn goal_spread_is_median_and_half_range() {
    let s = GoalSpread::of("search x", "ndr", &[372.0, 651.0, 536.0]).unwrap();
    assert_eq!((s.median_pps, s.min_pps, s.max_pps), (536.0, 372.0, 651.0));
    assert!((s.spread_pct - 139.5 / 536.0 * 100.0).abs() < 1e-9);
    assert!(s
        .line()
        .contains("over 3 runs: median 536 pps, range 372..651"));
    let even = GoalSpread::of("s", "pdr", &[1.0, 3.0, 2.0, 4.0]).unwrap();
    assert_eq!(even.median_pps, 2.5);
    assert!(GoalSpread::of("s", "pdr", &[]).is_none());
}

#[test]
fn waits_shorter_than_rfc_are_named() {
    assert!(TrialWaits::RFC2544.shorter_than_rfc2544().is_empty());
    let notes = TrialWaits::NONE.shorter_than_rfc2544();
    assert_eq!(notes.len(), 4, "{notes:?}");
    assert_eq!(TrialWaits::RFC2544.per_trial_s(), 11.0);
}
