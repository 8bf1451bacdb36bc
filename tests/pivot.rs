//! Pivot tables over several runs (issue 21, item 2): three lab runs whose
//! DUT is policed to three known rates, pivoted with `linerate report a b
//! c --pivot --rows test --cols run`; every CSV cell is checked against its
//! run's results.json, and each run's column against its police rate.

use crate::util::*;
use serde_json::Value;
use std::path::PathBuf;

/// One `linerate lab --quick` run of the 64 B tests through a DUT policed
/// to `police` packets per second; returns its directory and results.
fn policed_run(base: &std::path::Path, police: u64) -> (PathBuf, Value) {
    let name = format!("police{}k", police / 1000);
    let out = run(&[
        "lab",
        "--quick",
        "--only",
        "udp 64B var2",
        "--dut-police",
        &police.to_string(),
        "--duration",
        "2",
        "--no-progress",
        "--json",
        "--name",
        &name,
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lab {name}: stdout is not JSON ({e}):\n{stderr}"));
    assert_nothing_left(&lab_pids(&doc));
    let dir = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("results.json").is_file() && p.to_string_lossy().ends_with(&name))
        .unwrap_or_else(|| {
            panic!(
                "no run directory for {name} in {}:\n{stderr}",
                base.display()
            )
        });
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    (dir, doc)
}

/// The CSV's lines as fields (no field of this test holds a comma).
fn rows(csv: &str) -> Vec<Vec<String>> {
    csv.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn pivot_of_three_policed_runs() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("pivot");
    let police = [20_000u64, 40_000, 60_000];
    let runs: Vec<(PathBuf, Value)> = police.iter().map(|p| policed_run(&base, *p)).collect();
    let csv_path = base.join("table.csv");
    let html_path = base.join("table.html");
    let mut args: Vec<&str> = vec!["report"];
    args.extend(runs.iter().map(|(d, _)| d.to_str().unwrap()));
    args.extend([
        "--pivot",
        "--rows",
        "test",
        "--cols",
        "run",
        "--csv",
        csv_path.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
    ]);
    let out = run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "report failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Pivot 'tests' (rows: test; columns: run)"),
        "{stdout}"
    );

    let table = rows(&std::fs::read_to_string(&csv_path).unwrap());
    let head = &table[0];
    assert_eq!(&head[..4], ["pivot", "figure", "unit", "test"]);
    let names: Vec<String> = runs
        .iter()
        .map(|(_, d)| d["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(&head[4..], names.as_slice(), "a column per run, in order");
    // No --line-rate on veth: no % of line, so packets per second.
    let body = &table[1..];
    assert_eq!(body.len(), 2, "the self-test and the test through the DUT");
    for row in body {
        assert_eq!(row[1], "rx_pps");
        let div = match row[2].as_str() {
            "Mpps" => 1e6,
            "kpps" => 1e3,
            "pps" => 1.0,
            u => panic!("unit {u}"),
        };
        for (i, (_, doc)) in runs.iter().enumerate() {
            let t = doc["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == row[3].as_str())
                .unwrap_or_else(|| panic!("{} has no test {}", names[i], row[3]));
            assert_eq!(t["status"], "ok", "{}", names[i]);
            let want: f64 = t["directions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| f(&d["rx_pps"]))
                .sum();
            let got: f64 = row[4 + i].parse::<f64>().unwrap() * div;
            assert!(
                (got - want).abs() <= want * 1e-9 + 1e-6,
                "{} / {}: CSV {got} vs results.json {want}",
                row[3],
                names[i]
            );
            if row[3] == "udp 64B var2" {
                // Through the DUT: what the police let through, per run.
                let p = police[i] as f64;
                assert!(
                    got > 0.5 * p && got < 1.15 * p,
                    "{}: {got} pps through a DUT policed to {p}",
                    names[i]
                );
            }
        }
    }

    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("id=\"pivots\""),
        "the page has the pivot section"
    );
    assert!(html.contains("<table class=\"pivot\" data-pivot=\"tests\">"));
    for n in &names {
        assert!(html.contains(&format!("<th class=\"n\">{n}</th>")), "{n}");
    }

    // A bad axis says which axes there are, and fails.
    let mut bad: Vec<&str> = vec!["report"];
    bad.extend(runs.iter().map(|(d, _)| d.to_str().unwrap()));
    bad.extend([
        "--rows",
        "frame",
        "--csv",
        csv_path.to_str().unwrap(),
        "-o",
        "-",
    ]);
    let out = run(&bad);
    let err = String::from_utf8_lossy(&out.stderr);
    // A usage error (issue 38): exit 2.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--rows names axis 'frame'")
            && err.contains("run, dut, test, profile, direction"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&base);
}
