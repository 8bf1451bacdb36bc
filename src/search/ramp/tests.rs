use super::*;

fn spec() -> RampSpec {
    RampSpec {
        warmup_pps: 1000.0,
        warmup_s: 5.0,
        start_pps: 0.0,
        target_pps: 100_000.0,
        ramp_s: 10.0,
        hold_s: 5.0,
    }
}

#[test]
fn rate_at_follows_warmup_ramp_hold() {
    let s = spec();
    assert_eq!(s.total_s(), 20.0);
    assert_eq!(s.rate_at(-0.1), 0.0);
    assert_eq!(s.rate_at(0.0), 1000.0);
    assert_eq!(s.rate_at(4.999), 1000.0);
    // The ramp starts from zero, not from the warmup rate.
    assert_eq!(s.rate_at(5.0), 0.0);
    assert_eq!(s.rate_at(7.5), 25_000.0);
    assert_eq!(s.rate_at(14.999), 100_000.0 * 9.999 / 10.0);
    assert_eq!(s.rate_at(15.0), 100_000.0);
    assert_eq!(s.rate_at(19.999), 100_000.0);
    assert_eq!(s.rate_at(20.0), 0.0);
    assert_eq!(s.phase_at(4.0), Some(RampPhase::Warmup));
    assert_eq!(s.phase_at(5.0), Some(RampPhase::Ramp));
    assert_eq!(s.phase_at(15.0), Some(RampPhase::Hold));
    assert_eq!(s.phase_at(20.0), None);
}

#[test]
fn rate_at_without_warmup_or_ramp() {
    let no_warmup = RampSpec {
        warmup_s: 0.0,
        ..spec()
    };
    assert_eq!(no_warmup.rate_at(0.0), 0.0);
    assert_eq!(no_warmup.rate_at(5.0), 50_000.0);
    let hold_only = RampSpec {
        ramp_s: 0.0,
        ..spec()
    };
    assert_eq!(hold_only.rate_at(5.0), 100_000.0);
    assert_eq!(hold_only.phase_at(5.0), Some(RampPhase::Hold));
    assert!(RampSpec {
        ramp_s: 0.0,
        hold_s: 0.0,
        ..spec()
    }
    .validate()
    .is_err());
    assert!(RampSpec {
        target_pps: f64::NAN,
        ..spec()
    }
    .validate()
    .is_err());
    assert!(spec().validate().is_ok());
}

#[test]
fn breakpoints_match_rate_at() {
    let s = spec();
    let p = s.breakpoints();
    assert_eq!(
        p,
        vec![
            (0.0, 1000.0),
            (5.0, 1000.0),
            (5.0, 0.0),
            (15.0, 100_000.0),
            (20.0, 100_000.0)
        ]
    );
    // Interpolating the points (the later point of a step wins) gives rate_at.
    for i in 0..200 {
        let t = i as f64 * 0.1;
        let i = p.iter().rposition(|q| q.0 <= t).unwrap_or(0);
        let want = match p.get(i + 1) {
            Some(b) if b.0 > p[i].0 => p[i].1 + (b.1 - p[i].1) * (t - p[i].0) / (b.0 - p[i].0),
            _ => p[i].1,
        };
        assert!((s.rate_at(t) - want).abs() < 1e-6, "t {t}");
    }
}

/// Samples from (phase, offered, loss ratio); received = offered × (1 − loss).
fn samples(rows: &[(RampPhase, f64, f64)]) -> Vec<RampSample> {
    rows.iter()
        .enumerate()
        .map(|(i, &(phase, offered, loss))| RampSample {
            t_s: i as f64,
            phase,
            intended_pps: offered,
            offered_pps: offered,
            received_pps: offered * (1.0 - loss),
            loss_ratio: loss,
            tester_limited: false,
            dut: None,
            rerun: false,
        })
        .collect()
}

use RampPhase::{Hold, Ramp, Warmup};
const LINE: f64 = 1000.0;

#[test]
fn never_saturated() {
    let s = samples(&[
        (Warmup, 10.0, 0.0),
        (Ramp, 100.0, 0.0),
        (Ramp, 500.0, 0.0005), // below 0.1 %
        (Hold, 900.0, 0.0),
    ]);
    assert_eq!(saturation(&s, DEFAULT_SATURATION_LOSS, LINE), None);
    let sum = summarize_ramp(&s, DEFAULT_SATURATION_LOSS, LINE);
    assert!(!sum.saturated);
    assert_eq!(sum.verdict, "not saturated");
    assert_eq!(sum.peak_received_pps, 900.0);
    assert!((sum.peak_received_line_rate_pct - 90.0).abs() < 1e-9);
    assert_eq!(sum.samples, 3);
    assert_eq!(saturation(&[], DEFAULT_SATURATION_LOSS, LINE), None);
}

#[test]
fn saturated_to_the_end_from_the_first_sample() {
    // Lossy from the first sample after the warmup; the lossy warmup
    // itself does not count.
    let s = samples(&[
        (Warmup, 10.0, 0.5),
        (Ramp, 100.0, 0.2),
        (Ramp, 200.0, 0.5),
        (Hold, 300.0, 0.6),
    ]);
    let sat = saturation(&s, DEFAULT_SATURATION_LOSS, LINE).unwrap();
    assert_eq!(sat.sample_index, 1);
    assert_eq!(sat.offered_pps, 100.0);
    assert_eq!(sat.last_good_offered_pps, None);
    assert_eq!(sat.lossy_samples, 3);
    // 300 pps at 60 % loss: 120 pps, the most that came back.
    assert!((sat.peak_received_pps - 120.0).abs() < 1e-9);
}

/// A DUT step of one second with `steal_ms` of the hypervisor's.
fn stolen(steal_ms: f64) -> Option<crate::host::efficiency::DutStep> {
    Some(crate::host::efficiency::DutStep {
        duration_s: 1.0,
        cpu_ns: 0.0,
        packets: 0,
        packets_from: crate::host::efficiency::PacketsFrom::DutTx,
        cpu_ns_per_packet: None,
        clock_hz: None,
        cycles_per_packet: None,
        energy_uj_per_packet: None,
        steal_ms: Some(steal_ms),
        stall_ms: None,
    })
}

#[test]
fn lossy_samples_the_stall_watch_explains_do_not_saturate() {
    // A policer at 500 kpps; at 300 kpps a second lost 400 frames while
    // the watch saw the host's CPUs held 2 ms in all (at most 600
    // frames' worth), with no steal tick: the host's, not the DUT's.
    let mut s = samples(&[
        (Ramp, 100_000.0, 0.0),
        (Ramp, 200_000.0, 0.0),
        (Ramp, 300_000.0, 400.0 / 300_000.0),
        (Ramp, 400_000.0, 0.0),
        (Ramp, 500_000.0, 0.0),
        (Ramp, 600_000.0, 0.15),
        (Hold, 700_000.0, 0.3),
    ]);
    let watched = |steal: f64, stall: f64| {
        stolen(steal).map(|d| crate::host::efficiency::DutStep {
            stall_ms: Some(stall),
            ..d
        })
    };
    // Two more such seconds before the limit: without the watch they
    // decide the ramp, at 300 kpps.
    s[3].loss_ratio = 0.002;
    s[4].loss_ratio = 0.002;
    assert_eq!(
        saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
            .unwrap()
            .sample_index,
        2,
        "without the watch the ramp saturates at 300 kpps"
    );
    // Left out, the saturation is the policer's.
    s[2].dut = watched(0.0, 2.0);
    assert!(s[2].disturbed());
    s[3].dut = watched(0.0, 2.5);
    s[4].dut = watched(0.0, 2.5);
    let sat = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
    assert_eq!(sat.sample_index, 5, "{sat:?}");
    assert_eq!(
        summarize_ramp(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).disturbed_samples,
        3
    );
    // More loss than the stalled time holds is the DUT's.
    s[4].dut = watched(0.0, 0.5);
    assert!(!s[4].disturbed());
    assert_eq!(
        saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
            .unwrap()
            .sample_index,
        4
    );
    // No watch (absent), no steal: nothing is explained.
    s[2].dut = stolen(0.0);
    assert!(!s[2].disturbed());
}

#[test]
fn lossy_samples_the_hypervisors_steal_explains_do_not_saturate() {
    // 100 kpps steps; the DUT's real limit is 500 kpps. At 200 and 300
    // kpps the hypervisor held a CPU 60 ms and 1.5 % / 2 % were lost:
    // at most 70 ms of frames (7 %), all the host's.
    let rows = [
        (Ramp, 100_000.0, 0.0),
        (Ramp, 200_000.0, 0.015),
        (Ramp, 300_000.0, 0.02),
        (Ramp, 400_000.0, 0.0),
        (Ramp, 500_000.0, 0.0),
        (Ramp, 600_000.0, 0.15),
        (Hold, 700_000.0, 0.3),
    ];
    let mut s = samples(&rows);
    let plain = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
    assert_eq!(plain.sample_index, 5, "two clean seconds end the early run");
    // The same stalls right before the real limit: without the steal the
    // ramp saturates at 300 kpps, 200 kpps early.
    s[3].loss_ratio = 0.01;
    s[4].loss_ratio = 0.012;
    let early = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
    assert_eq!(early.sample_index, 1);
    for x in &mut s[1..5] {
        x.dut = stolen(60.0);
    }
    let sat = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
    assert_eq!(sat.sample_index, 5, "{sat:?}");
    assert_eq!(sat.last_good_offered_pps, Some(100_000.0));
    let sum = summarize_ramp(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0);
    assert_eq!(sum.disturbed_samples, 4);
    assert!(
        sum.verdict.contains("4 lossy samples left out"),
        "{}",
        sum.verdict
    );
    // Loss beyond what the stolen time holds is the DUT's: 15 % at
    // 600 kpps with 60 ms stolen still saturates there.
    s[5].dut = stolen(60.0);
    assert_eq!(
        saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
            .unwrap()
            .sample_index,
        5
    );
    // Stalls through the end: nothing decides whether it saturated.
    let mut top = s.clone();
    top[5].loss_ratio = 0.05;
    top[6].loss_ratio = 0.05;
    top[6].dut = stolen(60.0);
    let sum = summarize_ramp(&top, DEFAULT_SATURATION_LOSS, 14_880_952.0);
    assert!(!sum.saturated && sum.undecided, "{sum:?}");
    assert!(
        sum.verdict
            .starts_with("saturation unknown: the last 6 samples"),
        "{}",
        sum.verdict
    );
    // Less than a tick of steal explains nothing.
    for x in &mut s[1..5] {
        x.dut = stolen(0.0);
    }
    assert_eq!(
        saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
            .unwrap()
            .sample_index,
        1
    );
}

#[test]
fn blip_then_recovery_is_not_saturation() {
    let s = samples(&[
        (Ramp, 100.0, 0.0),
        (Ramp, 200.0, 0.05), // blip
        (Ramp, 300.0, 0.0),
        (Hold, 400.0, 0.0),
    ]);
    assert_eq!(saturation(&s, DEFAULT_SATURATION_LOSS, LINE), None);
    assert_eq!(
        summarize_ramp(&s, DEFAULT_SATURATION_LOSS, LINE).lossy_samples,
        1
    );
    // A blip earlier, then a final lossy run: the run counts, the blip does not.
    let s = samples(&[
        (Ramp, 100.0, 0.0),
        (Ramp, 200.0, 0.05),
        (Ramp, 300.0, 0.0),
        (Ramp, 400.0, 0.01),
        (Hold, 500.0, 0.2),
    ]);
    let sat = saturation(&s, DEFAULT_SATURATION_LOSS, LINE).unwrap();
    assert_eq!(sat.sample_index, 3);
    assert_eq!(sat.offered_pps, 400.0);
    assert_eq!(sat.last_good_offered_pps, Some(300.0));
}

#[test]
fn saturation_starting_in_the_ramp_reports_its_rate() {
    let s = samples(&[
        (Warmup, 10.0, 0.0),
        (Ramp, 100.0, 0.0),
        (Ramp, 200.0, 0.0),
        (Ramp, 300.0, 0.002),
        (Ramp, 400.0, 0.25),
        (Hold, 500.0, 0.4),
        (Hold, 500.0, 0.4),
    ]);
    let sat = saturation(&s, DEFAULT_SATURATION_LOSS, LINE).unwrap();
    assert_eq!(sat.phase, Ramp);
    assert_eq!(sat.sample_index, 3);
    assert_eq!(sat.offered_pps, 300.0);
    assert!((sat.offered_line_rate_pct - 30.0).abs() < 1e-9);
    assert_eq!(sat.lossy_samples, 4);
    // Peak received is 400 × 0.75 = 300 pps, 30 % of the line.
    assert!((sat.peak_received_pps - 300.0).abs() < 1e-9);
    assert!((sat.peak_received_line_rate_pct - 30.0).abs() < 1e-9);
    let sum = summarize_ramp(&s, DEFAULT_SATURATION_LOSS, LINE);
    assert!(sum.saturated);
    assert!(
        sum.verdict.starts_with("saturated at 300 pps"),
        "{}",
        sum.verdict
    );
}

#[test]
fn threshold_is_strictly_above() {
    let s = samples(&[(Ramp, 100.0, 0.0), (Hold, 100.0, 0.001)]);
    assert_eq!(saturation(&s, 0.001, LINE), None);
    assert!(saturation(&s, 0.0005, LINE).is_some());
}

/// Issue 33: a ramp through a policed DUT whose first lossy sample is
/// coarse still places the saturation within a few percent of the
/// policer, from the frames that sample lost.
#[test]
fn onset_inside_a_coarse_sample_finds_the_policer() {
    use crate::search::sim::{SimConfig, SimDut};
    for capacity in [61_000.0, 333_333.0, 1_234_567.0] {
        let spec = RampSpec {
            warmup_pps: capacity * 0.05,
            warmup_s: 1.0,
            start_pps: 0.0,
            target_pps: capacity * 4.3,
            ramp_s: 8.0,
            hold_s: 1.0,
        };
        let samples = SimDut::new(SimConfig {
            capacity_pps: capacity,
            ..SimConfig::default()
        })
        .ramp_samples(&spec);
        let sat = saturation(&samples, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
        let onset = sat.onset_pps.unwrap();
        assert!(
            (onset - capacity).abs() <= 0.03 * capacity,
            "{capacity}: {sat:?}"
        );
        // The sample's own rate is a step away: the onset is the finer figure.
        assert!(
            (sat.offered_pps - capacity).abs() > 0.03 * capacity,
            "{sat:?}"
        );
    }
    assert_eq!(loss_onset_pps(100.0, 0.0, 0.1), None);
    assert_eq!(loss_onset_pps(100.0, 10.0, 0.0), None);
    // Entirely above C: the mean less what was lost.
    assert_eq!(loss_onset_pps(100.0, 10.0, 0.5), Some(50.0));
}

#[test]
fn contradictions_are_named_with_their_reason() {
    assert!(contradictions(Some(100.0), Some(120.0), Some(110.0), None, None).is_empty());
    assert!(contradictions(None, None, Some(1.0), None, None).is_empty());
    let n = contradictions(Some(100.0), Some(99.0), Some(80.0), None, None);
    assert_eq!(n.len(), 2, "{n:?}");
    assert!(n[0].contains("PDR 99 pps is below NDR 100"), "{n:?}");
    assert!(
        n[1].contains("loss from 80 pps, below the NDR 100"),
        "{n:?}"
    );
}

#[test]
fn a_ramp_that_held_past_the_pdrs_upper_bound_is_a_contradiction() {
    let up = PdrUpper {
        load_pps: 364_841.0,
        loss_ratio: 0.005,
    };
    let held = |to_pps: f64, saturated: bool| RampHeld {
        to_pps,
        saturated,
        loss_threshold: 0.001,
    };
    // Not saturated up to 541 k, the search failed 0.5 % at 365 k.
    let n = contradictions(
        Some(360_500.0),
        Some(360_500.0),
        None,
        Some(up),
        Some(held(541_441.0, false)),
    );
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(n[0].contains("upper bound 364841 pps"), "{n:?}");
    assert!(n[0].contains("more than 0.5 %"), "{n:?}");
    assert!(n[0].contains("did not saturate up to 541441 pps"), "{n:?}");
    // Saturated above it: the same contradiction, said so.
    let n = contradictions(None, None, None, Some(up), Some(held(400_000.0, true)));
    assert!(n[0].contains("began only at 400000 pps"), "{n:?}");
    // Saturated at or below the bound: they agree.
    assert!(contradictions(None, None, None, Some(up), Some(held(364_841.0, true))).is_empty());
    assert!(contradictions(None, None, None, Some(up), Some(held(300_000.0, false))).is_empty());
    // A ramp threshold looser than the PDR's proves nothing about it.
    let loose = RampHeld {
        loss_threshold: 0.01,
        ..held(541_441.0, false)
    };
    assert!(contradictions(None, None, None, Some(up), Some(loose)).is_empty());
}

#[test]
fn one_clean_second_in_a_lossy_run_does_not_end_it() {
    let f = |v: &[u8]| final_lossy_run(&v.iter().map(|&b| b == 1).collect::<Vec<_>>());
    assert_eq!(f(&[0, 0, 1, 1, 1, 0, 1, 1, 1]), Some(2));
    // Clean at the end, or two clean in a row, end it.
    assert_eq!(f(&[0, 1, 1, 1, 0]), None);
    assert_eq!(f(&[1, 1, 1, 0, 0, 1, 1]), Some(5));
    // More than one in four clean ends it.
    assert_eq!(f(&[1, 0, 1, 0, 1]), Some(4));
    assert_eq!(f(&[]), None);
}
