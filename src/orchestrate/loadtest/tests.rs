use super::ramp::rerun_sample;
use super::*;

#[test]
fn a_single_test_spec_is_a_kind_and_the_loops_are_not() {
    let tcp = runner::TcpTest {
        name: "tcp 1 stream".into(),
        ipv6: false,
        streams: 1,
        direction: Direction::Forward,
        duration: Duration::from_secs(1),
        cpus: vec![],
        congestion: None,
        buffer_len: 128 * 1024,
        allow: vec![],
        port: 0,
        rate_bps: None,
        interval: Duration::from_secs(1),
        omit: Duration::ZERO,
        window: None,
        dscp: None,
        vlan: None,
    };
    let spec = TestSpec::Tcp(tcp);
    let kind = spec.as_kind().map(|k| (k.name().to_string(), k.interval()));
    assert_eq!(
        kind,
        Some(("tcp 1 stream".into(), Some(Duration::from_secs(1))))
    );
    // The HTTP matrix runs its rows one by one, each a kind of its own.
    assert!(TestSpec::Http(vec![]).as_kind().is_none());
}

#[test]
fn the_live_line_folds_trials_into_a_bracket() {
    let mut f = TrialFold::new("search 64b NDR/PDR".into(), 0.0, false);
    f.trials = 1;
    assert_eq!(
        f.label(1e6),
        "search 64b NDR/PDR: trial 1 at 1.00 Mpps, bracket ? .. ?"
    );
    f.record(1e6, 0.01);
    f.record(5e5, 0.0);
    f.record(8e5, 0.02);
    f.record(6e5, 0.0);
    f.trials = 5;
    assert_eq!(
        f.label(7e5),
        "search 64b NDR/PDR: trial 5 at 700.00 kpps, bracket 600.00 kpps .. 800.00 kpps"
    );
}

#[test]
fn a_rerun_replaces_a_ramp_second_with_its_own_counts() {
    let spec = search::RampSpec {
        warmup_s: 1.0,
        warmup_pps: 1_000.0,
        start_pps: 0.0,
        ramp_s: 4.0,
        target_pps: 100_000.0,
        hold_s: 1.0,
    };
    let old = search::RampSample {
        t_s: 3.0,
        phase: search::RampPhase::Ramp,
        intended_pps: 50_000.0,
        offered_pps: 50_000.0,
        received_pps: 40_000.0,
        loss_ratio: 0.2,
        tester_limited: false,
        dut: None,
        rerun: false,
    };
    let d = crate::results::DirectionResult {
        direction: "gen_to_sink".into(),
        duration_s: 1.0,
        tx_packets: 50_000,
        rx_packets: 49_990,
        lost: 10,
        tx_target: 50_000,
        ..Default::default()
    };
    let new = rerun_sample(&d, &spec, &old).unwrap();
    assert!(new.rerun);
    assert_eq!(
        (new.t_s, new.phase, new.intended_pps),
        (3.0, search::RampPhase::Ramp, 50_000.0)
    );
    assert_eq!(new.offered_pps, 50_000.0);
    assert_eq!(new.received_pps, 49_990.0);
    assert!((new.loss_ratio - 10.0 / 50_000.0).abs() < 1e-12);
    assert!(!new.tester_limited);
    // A trial that sent a fifth less with no loss measures the tester.
    let short = crate::results::DirectionResult {
        tx_packets: 40_000,
        rx_packets: 40_000,
        lost: 0,
        ..d.clone()
    };
    assert!(rerun_sample(&short, &spec, &old).unwrap().tester_limited);
    // A trial that never ran gives nothing to put in its place.
    let none = crate::results::DirectionResult {
        duration_s: 0.0,
        ..d
    };
    assert!(rerun_sample(&none, &spec, &old).is_none());
}
