use super::*;
use crate::report::testdata;

#[test]
fn series_and_data_line_up() {
    let r = testdata::lab();
    let charts = run_charts("", &r);
    assert_eq!(charts.len(), r.tests.len());
    for c in &charts {
        assert_eq!(c.data.len(), c.series.len() + 1, "{}", c.id);
        let n = c.data[0].len();
        assert!(n >= 3, "{}: {n} x values for 2 intervals and the end", c.id);
        let xs: Vec<f64> = c.data[0].iter().flatten().copied().collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "x ascends: {xs:?}");
        for col in &c.data[1..] {
            assert_eq!(col[n - 1], col[n - 2], "the last step closes at its end");
        }
        assert!(c.data.iter().all(|col| col.len() == n), "{}", c.id);
        assert!(c.data[0].iter().all(Option::is_some), "x has no gaps");
        for s in &c.series {
            assert!(c.y.iter().any(|a| a.scale == s.scale), "{}", s.label);
        }
    }
}

#[test]
fn both_directions_get_their_own_series() {
    let r = testdata::lab();
    let udp = r.tests.iter().position(|t| !figures::is_tcp(t)).unwrap();
    let c = test_chart("x", &r.tests[udp]).unwrap();
    let labels: Vec<&str> = c.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "offered gen→sink",
            "received gen→sink",
            "loss gen→sink",
            "offered sink→gen",
            "received sink→gen",
            "loss sink→gen"
        ]
    );
}

#[test]
fn paced_test_shows_its_target() {
    let r = testdata::paced();
    let c = test_chart("x", &r.tests[0]).unwrap();
    assert_eq!(c.series[0].role, "target");
    let target = c.data[1].iter().flatten().next().copied().unwrap();
    assert!((target - 50_000.0).abs() < 500.0, "{target}");
}

#[test]
fn failed_tests_have_no_chart() {
    let mut t = testdata::tcp_test("x");
    t.status = TestStatus::Failed;
    assert!(test_chart("x", &t).is_none());
}

#[test]
fn comparison_has_ideal_and_a_series_per_run() {
    let runs = testdata::three_runs();
    let charts = comparison_charts(&runs);
    assert_eq!(charts.len(), comparison_keys(&runs).len());
    for c in &charts {
        let ideal: Vec<&str> = c
            .series
            .iter()
            .filter(|s| s.role == "ideal")
            .map(|s| s.label.as_str())
            .collect();
        assert_eq!(
            ideal,
            [
                "route ideal (offered)",
                "nat ideal (offered)",
                "fw ideal (offered)"
            ]
        );
        let received: Vec<&str> = c
            .series
            .iter()
            .filter(|s| s.role == "received")
            .map(|s| s.label.as_str())
            .collect();
        assert_eq!(received, ["route", "nat", "fw"], "{}", c.title);
    }
}

#[test]
fn significant_digits() {
    assert_eq!(sig(123_456_789.0), 123_457_000.0);
    assert_eq!(sig(0.001_234_567_8), 0.001_234_57);
    assert_eq!(sig(0.0), 0.0);
}
