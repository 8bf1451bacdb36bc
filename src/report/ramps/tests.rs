use super::*;
use crate::report::testdata;

#[test]
fn ramp_charts_mark_the_saturation_point() {
    let r = testdata::ramp();
    let c = charts("", &r);
    assert_eq!(c.len(), 2 * r.ramps[0].directions.len());
    let fwd = &c[0];
    assert_eq!(fwd.series[0].role, "ideal");
    assert_eq!(fwd.data[1], fwd.data[0], "the ideal is forwarded = offered");
    let xs: Vec<f64> = fwd.data[0].iter().flatten().copied().collect();
    assert!(xs.windows(2).all(|w| w[0] <= w[1]), "by offered load");
    let sat = r.ramps[0].directions[0]
        .summary
        .saturation
        .as_ref()
        .unwrap();
    assert_eq!(fwd.marks[0].x, sig(sat.offered_pps));
    assert!(c[1].series[1].label.starts_with("threshold"));
}

/// Issue 33 (a): the fixture's short samples all lost frames, so each
/// is lossy (the DUT's evidence) and none is tester-limited, in the
/// table and on the chart; a short sample without loss is the tester's.
#[test]
fn issue_33_a_lossy_samples_are_never_tester_limited() {
    let mut r = testdata::ramp();
    let d = &r.ramps[0].directions[0];
    assert!(
        d.summary.tester_limited_samples > 0,
        "recorded before the rule"
    );
    assert_eq!(tester_limited_samples(d), 0);
    let limited = |r: &RunResults| {
        charts("", r)[0]
            .series
            .iter()
            .any(|s| s.label == "tester-limited samples")
    };
    assert!(!limited(&r));
    let table = ramps_table(&r);
    assert!(
        table.contains("data-key=\"tester_limited_samples\" data-value=\"0\""),
        "{table}"
    );
    let s = r.ramps[0].directions[0]
        .samples
        .iter_mut()
        .find(|s| s.tester_limited && s.phase != RampPhase::Warmup)
        .unwrap();
    s.loss_ratio = 0.0;
    assert_eq!(tester_limited_samples(&r.ramps[0].directions[0]), 1);
    assert!(limited(&r));
}

#[test]
fn search_trials_by_outcome_with_results() {
    let r = testdata::search();
    let c = charts("", &r);
    assert_eq!(c.len(), r.searches.len());
    for chart in &c {
        for col in &chart.data[1..] {
            assert!(
                col.iter().any(Option::is_some),
                "{}: an empty series",
                chart.id
            );
        }
        assert!(chart.series.iter().any(|s| s.label.starts_with("NDR")));
    }
    let t = searches_table(&r);
    assert!(t.contains("data-result=\"NDR (loss ≤ 0.0 %)\""), "{t}");
}
