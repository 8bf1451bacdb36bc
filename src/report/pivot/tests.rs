//! Pivots of hand-built sweeps and of the committed fixtures.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::model::sweep::{Coord, SweepInfo, SweepPoint};
use crate::proto::Direction;
use crate::report::testdata;
use crate::results::{TestResult, TestStatus};
use std::path::PathBuf;

/// A UDP test at a sweep point whose received rate is `pct` % of line.
fn point(sweep: &str, index: usize, coords: &[(&str, &str)], pct: f64) -> TestResult {
    let mut t = testdata::udp_test(&format!("{sweep} #{index}"), 64);
    t.params.direction = Direction::Forward;
    t.directions[0].line_rate_pct = Some(pct);
    t.sweep = Some(SweepPoint {
        sweep: sweep.into(),
        index,
        coords: coords
            .iter()
            .map(|(k, v)| Coord {
                key: k.to_string(),
                value: v.to_string(),
                number: v.parse().ok(),
            })
            .collect(),
    });
    t
}

fn run_of(label: &str, tests: Vec<TestResult>) -> Run {
    let mut r = testdata::lab();
    r.name = label.into();
    r.tests = tests;
    Run {
        label: label.into(),
        dir: PathBuf::from("/x"),
        results: r,
    }
}

/// 2 frame sizes × 2 DUT modes, cell value = 10 × frame index + mode index.
fn two_by_two() -> Run {
    let mut tests = Vec::new();
    for (i, f) in ["64", "512"].iter().enumerate() {
        for (j, d) in ["route", "nat"].iter().enumerate() {
            let v = (10 * i + j) as f64 + 1.0;
            tests.push(point("m", tests.len(), &[("frame_size", f), ("dut", d)], v));
        }
    }
    run_of("sweep", tests)
}

fn value(c: &CellValue) -> f64 {
    match c {
        CellValue::Value { median, .. } => *median,
        other => panic!("not a value: {other:?}"),
    }
}

fn opts(rows: &[&str], cols: &[&str]) -> PivotOpts {
    PivotOpts {
        all: false,
        rows: rows.iter().map(|s| s.to_string()).collect(),
        cols: cols.iter().map(|s| s.to_string()).collect(),
        cell: None,
    }
}

#[test]
fn each_cell_is_its_points_figure() {
    let p = build(&[two_by_two()], &PivotOpts::default()).unwrap();
    assert_eq!(p.len(), 1);
    let p = &p[0];
    assert_eq!(p.name, "m");
    // Both axes have two values: the first is the columns, the other rows.
    assert_eq!(p.cols, ["frame_size"]);
    assert_eq!(p.rows, ["dut"]);
    assert_eq!(p.figures[0].name(), "line_pct");
    for (r, d) in ["route", "nat"].iter().enumerate() {
        assert_eq!(p.row_keys[r][0].text, *d);
        for (c, f) in ["64", "512"].iter().enumerate() {
            assert_eq!(p.col_keys[c][0].text, *f);
            assert_eq!(p.col_keys[c][0].number, f.parse().ok());
            assert_eq!(value(&p.cells[r][c]), (10 * c + r) as f64 + 1.0);
        }
    }
}

#[test]
fn sweep_info_and_flags_choose_the_sides() {
    let mut run = two_by_two();
    run.results.sweeps.push(SweepInfo {
        name: "m".into(),
        axes: vec!["frame_size".into(), "dut".into()],
        rows: vec!["frame_size".into()],
        cols: vec!["dut".into()],
        cell: None,
        points: 4,
    });
    let p = &build(std::slice::from_ref(&run), &PivotOpts::default()).unwrap()[0];
    assert_eq!(
        (p.rows.as_slice(), p.cols.as_slice()),
        (&["frame_size".to_string()][..], &["dut".to_string()][..])
    );
    assert_eq!(value(&p.cells[1][0]), 11.0, "512 B through route");
    // Flags win over the plan; one side given, the other takes the rest.
    let p = &build(&[run], &opts(&["dut"], &[])).unwrap()[0];
    assert_eq!(p.cols, ["frame_size"]);
}

#[test]
fn repetitions_give_median_with_min_and_max() {
    let mut tests = Vec::new();
    for v in [1.0, 5.0, 3.0] {
        tests.push(point("r", 0, &[("flows", "1")], v));
    }
    tests.push(point("r", 1, &[("flows", "16")], 7.0));
    let p = &build(&[run_of("x", tests)], &PivotOpts::default()).unwrap()[0];
    assert_eq!(p.cols, ["flows"]);
    match &p.cells[0][0] {
        CellValue::Value {
            median,
            min,
            max,
            n,
            ..
        } => {
            assert_eq!((*median, *min, *max, *n), (3.0, 1.0, 5.0, 3));
        }
        c => panic!("{c:?}"),
    }
    let t = tables(std::slice::from_ref(p), None);
    assert!(t.contains("3.00 (1.00–5.00)"), "{t}");
    assert!(t.contains("repetitions: median (min–max)"), "{t}");
}

#[test]
fn missing_and_failed_cells() {
    let mut run = two_by_two();
    run.results.tests.remove(3); // 512 B through nat never ran
    run.results.tests[0].status = TestStatus::Failed;
    run.results.tests[0].error = Some("agent gen lost: <eof>".into());
    let p = &build(std::slice::from_ref(&run), &PivotOpts::default()).unwrap()[0];
    assert_eq!(
        p.cells[0][0],
        CellValue::Failed("agent gen lost: <eof>".into())
    );
    assert_eq!(p.cells[1][1], CellValue::Missing);
    let t = tables(std::slice::from_ref(p), None);
    assert!(t.contains("FAIL") && t.contains('–'), "{t}");
    assert!(
        t.contains("FAIL dut=route, frame_size=64: agent gen lost"),
        "{t}"
    );
    let (html, _) = html_section(std::slice::from_ref(p), "");
    assert!(
        html.contains("title=\"dut=route, frame_size=64: failed: agent gen lost: &lt;eof&gt;\""),
        "{html}"
    );
    let csv = csv(std::slice::from_ref(p));
    assert_eq!(
        csv,
        "pivot,figure,unit,dut,64,512\nm,line_pct,%,route,FAIL,11\nm,line_pct,%,nat,2,\n"
    );
}

#[test]
fn several_axes_per_side() {
    let mut tests = Vec::new();
    for a in ["1", "2"] {
        for b in ["x", "y"] {
            for c in ["64", "1518"] {
                let v = a.parse::<f64>().unwrap() * 100.0
                    + if b == "x" { 10.0 } else { 20.0 }
                    + if c == "64" { 1.0 } else { 2.0 };
                tests.push(point(
                    "cube",
                    tests.len(),
                    &[("a", a), ("b", b), ("c", c)],
                    v,
                ));
            }
        }
    }
    let p = &build(&[run_of("x", tests)], &opts(&["a", "c"], &["b"])).unwrap()[0];
    assert_eq!(p.row_keys.len(), 4);
    assert_eq!(p.col_keys.len(), 2);
    for (r, k) in p.row_keys.iter().enumerate() {
        for (c, ck) in p.col_keys.iter().enumerate() {
            let want = k[0].text.parse::<f64>().unwrap() * 100.0
                + if ck[0].text == "x" { 10.0 } else { 20.0 }
                + if k[1].text == "64" { 1.0 } else { 2.0 };
            assert_eq!(value(&p.cells[r][c]), want, "{k:?} {ck:?}");
        }
    }
    // Two column axes: a header line per axis.
    let p = &build(&[run_of("x", p_tests())], &opts(&["a"], &["b", "c"])).unwrap()[0];
    assert_eq!(p.col_keys.len(), 4);
    let t = tables(std::slice::from_ref(p), None);
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with('b') && l.contains('x') && l.contains('y')),
        "{t}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with('c') && l.contains("1518")),
        "{t}"
    );
    assert_eq!(
        csv(std::slice::from_ref(p)).lines().next().unwrap(),
        "pivot,figure,unit,a,b=x c=64,b=x c=1518,b=y c=64,b=y c=1518"
    );
}

fn p_tests() -> Vec<TestResult> {
    let mut tests = Vec::new();
    for a in ["1", "2"] {
        for b in ["x", "y"] {
            for c in ["64", "1518"] {
                tests.push(point(
                    "cube",
                    tests.len(),
                    &[("a", a), ("b", b), ("c", c)],
                    1.0,
                ));
            }
        }
    }
    tests
}

#[test]
fn a_bad_axis_names_the_good_ones() {
    let e = build(&[two_by_two()], &opts(&["frame"], &[]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--rows names axis 'frame'"), "{e}");
    assert!(
        e.contains("frame_size, dut, run, test, profile, direction"),
        "{e}"
    );
    let e = build(&[two_by_two()], &opts(&["dut"], &["dut"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("both --rows and --cols"), "{e}");
    // An axis left out that varies joins the rows, so no cell mixes two
    // measurements.
    let p = &build(&[two_by_two()], &opts(&["dut"], &["run"])).unwrap()[0];
    assert_eq!(p.rows, ["dut", "frame_size"]);
    let o = PivotOpts {
        cell: Some("speed".into()),
        ..PivotOpts::default()
    };
    let e = build(&[two_by_two()], &o).unwrap_err().to_string();
    assert!(e.contains("rx_pps, tx_pps"), "{e}");
}

#[test]
fn three_runs_pivot_on_pseudo_axes() {
    let runs = testdata::three_runs();
    let mut o = opts(&["test"], &["dut"]);
    o.all = true;
    let p = &build(&runs, &o).unwrap()[0];
    assert_eq!(p.name, "tests");
    let duts: Vec<&str> = p.col_keys.iter().map(|k| k[0].text.as_str()).collect();
    assert_eq!(duts, ["route", "nat", "fw"]);
    // TCP in Gbit/s and UDP in % of line do not share a unit: both in % of line.
    assert_eq!(p.figures.len(), 1);
    assert_eq!(p.figures[0].name(), "line_pct");
    assert!(p.summed_directions);
    for (r, k) in p.row_keys.iter().enumerate() {
        for (c, run) in runs.iter().enumerate() {
            let t = run
                .results
                .tests
                .iter()
                .find(|t| t.name == k[0].text)
                .unwrap();
            // Bidirectional: the directions' shares summed.
            let want: f64 = t.directions.iter().filter_map(|d| d.line_rate_pct).sum();
            assert!(
                (value(&p.cells[r][c]) - want).abs() < 1e-9,
                "{} {}",
                k[0].text,
                run.label
            );
        }
    }
    // Without --pivot, runs without sweeps have no pivot.
    assert!(build(&runs, &PivotOpts::default()).unwrap().is_empty());
    // The default across runs: the run (or its DUT) and the test vary.
    o.rows.clear();
    o.cols.clear();
    let p = &build(&runs, &o).unwrap()[0];
    let mut sides = p.rows.clone();
    sides.extend(p.cols.clone());
    sides.sort();
    assert_eq!(sides, ["run", "test"]);
}

#[test]
fn cell_flag_picks_an_expect_figure() {
    let runs = testdata::three_runs();
    let mut o = opts(&["test"], &["run"]);
    o.all = true;
    o.cell = Some("rx_pps".into());
    let p = &build(&runs, &o).unwrap()[0];
    let udp = p
        .row_keys
        .iter()
        .position(|k| k[0].text == "udp imix var2")
        .unwrap();
    let tcp = 1 - udp;
    let t = runs[1]
        .results
        .tests
        .iter()
        .find(|t| t.name == "udp imix var2")
        .unwrap();
    let want: f64 = t.directions.iter().map(|d| d.rx_pps).sum();
    assert!((value(&p.cells[udp][1]) - want).abs() < 1e-6);
    assert_eq!(
        p.cells[tcp][0],
        CellValue::NotMeasured,
        "TCP has no packet rate"
    );
}

#[test]
fn ramps_and_searches_in_percent_of_line() {
    let mut r = testdata::ramp();
    r.ramps[0].sweep = Some(SweepPoint {
        sweep: "ramps".into(),
        index: 0,
        coords: vec![],
    });
    let ramp = r.ramps[0].clone();
    let run = Run {
        label: "r".into(),
        dir: PathBuf::from("/x"),
        results: r,
    };
    let p = &build(&[run], &PivotOpts::default()).unwrap()[0];
    assert_eq!(p.figures[0].name(), "saturation%");
    let sat = ramp.directions[0]
        .summary
        .saturation
        .as_ref()
        .unwrap()
        .offered_pps;
    assert!((value(&p.cells[0][0]) - sat / ramp.line_rate_pps * 100.0).abs() < 1e-9);

    let mut s = testdata::search();
    for (i, x) in s.searches.iter_mut().enumerate() {
        let f = if i == 0 { "64" } else { "512" };
        x.sweep = Some(SweepPoint {
            sweep: "ndr".into(),
            index: i,
            coords: vec![Coord {
                key: "frame_size".into(),
                value: f.into(),
                number: f.parse().ok(),
            }],
        });
    }
    let searches = s.searches.clone();
    let run = Run {
        label: "s".into(),
        dir: PathBuf::from("/x"),
        results: s,
    };
    let p = &build(&[run], &PivotOpts::default()).unwrap()[0];
    assert_eq!(p.figures[0].name(), "ndr%");
    for (c, x) in searches.iter().enumerate() {
        let ndr = crate::results::criteria::search_figures(x)["ndr"];
        assert!((value(&p.cells[0][c]) - ndr / x.line_rate_pps * 100.0).abs() < 1e-9);
    }
}

#[test]
fn tables_fit_the_width() {
    let mut tests = Vec::new();
    for (i, f) in ["64", "128", "256", "512", "1024", "1280", "1518", "9000"]
        .iter()
        .enumerate()
    {
        tests.push(point(
            "wide sweep of frame sizes",
            i,
            &[("frame_size", f)],
            12.5 * i as f64,
        ));
    }
    let p = build(&[run_of("x", tests)], &PivotOpts::default()).unwrap();
    let t = tables(&p, Some(40));
    for l in t.lines() {
        assert!(l.chars().count() <= 40, "{l:?}\n{t}");
    }
    // Every value is still there, in a further block.
    for v in ["12.5", "87.5"] {
        assert!(t.contains(v), "{t}");
    }
}

#[test]
fn numeric_axis_gets_a_line_chart() {
    let (html, charts) = html_section(&build(&[two_by_two()], &PivotOpts::default()).unwrap(), "");
    assert!(html.contains("<table class=\"pivot\""));
    let [c] = charts.as_slice() else {
        panic!("{charts:?}")
    };
    assert_eq!(c.x.label, "frame_size");
    let labels: Vec<&str> = c.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["route", "nat"]);
    assert_eq!(c.data[0], [Some(64.0), Some(512.0)]);
    assert_eq!(c.data[1], [Some(1.0), Some(11.0)]);
    assert_eq!(c.data[2], [Some(2.0), Some(12.0)]);
    assert_eq!(c.y[0].unit, "%");
}

#[test]
fn the_run_report_shows_its_sweeps() {
    let page = crate::report::html::single(&two_by_two());
    assert!(page.contains("id=\"pivots\""));
    assert!(page.contains("data-pivot=\"m\""));
    let page = crate::report::html::single(&run_of("plain", testdata::lab().tests));
    assert!(!page.contains("id=\"pivots\""));
}
