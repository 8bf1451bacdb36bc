//! Pass/fail criteria, exit codes, baselines and JUnit (issue 19): a
//! policed DUT whose NDR is known meets one criterion and misses another;
//! a 20 % lower police rate is a regression against the first run and a
//! rerun of the same setup is not; the JUnit file parses as XML with a
//! failure per missed criterion; `% of line` on a veth without
//! `--line-rate` is `-`. Issue 38: a criterion on a figure the command
//! does not measure is a usage error; baselines weigh changes against the
//! runs' noise and compare lower bounds as bounds.

use crate::util::*;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A short search of a lab whose DUT is policed to `police`.
fn search(base: &Path, name: &str, police: &str, extra: &[&str]) -> (Output, Value) {
    let mut args: Vec<&str> = vec![
        "search",
        "--lab",
        "--profile",
        "bench-var2-64b",
        "--dut-police",
        police,
        // 3 %: a third fewer trials than 1 %, and still finer than the
        // 10 % tolerance and the 20 % regression below.
        "--width",
        "3",
        // From 100 kpps, not the line rate: a loaded tester spends most of
        // a search from 14.88 Mpps on trials it falls short of, and the
        // search from the line rate is search_limits.rs's test.
        "--max-rate",
        "100kpps",
        "--final-trial",
        "1",
        "--duration-sum",
        "2",
        "--no-progress",
        "--json",
        "--name",
        name,
        "--results-dir",
    ];
    args.push(base.to_str().unwrap());
    args.extend(extra);
    let out = run(&args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stderr(&out)));
    assert_nothing_left(&lab_pids(&doc));
    (out, doc)
}

fn run_dir(base: &Path, name: &str) -> String {
    let d = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().ends_with(name))
        .unwrap_or_else(|| panic!("no run directory {name} in {}", base.display()));
    d.to_str().unwrap().to_string()
}

fn ndr(doc: &Value) -> f64 {
    doc["searches"][0]["mlr"]["goals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["goal"]["name"] == "ndr")
        .and_then(|g| {
            g["conditional_throughput_pps"]
                .as_f64()
                .or(g["relevant_lower_bound_pps"].as_f64())
        })
        .expect("an NDR")
}

/// Test cases and their failures, read by Python's XML parser.
fn junit_cases(file: &Path) -> Vec<(String, usize)> {
    let script = "import sys, xml.etree.ElementTree as E\n\
                  root = E.parse(sys.argv[1]).getroot()\n\
                  assert root.tag == 'testsuites', root.tag\n\
                  suites = root.findall('testsuite')\n\
                  assert len(suites) == 1\n\
                  for c in suites[0].findall('testcase'):\n\
                  \x20   print(c.get('name') + '\\t' + str(len(c.findall('failure'))))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, file.to_str().unwrap()])
        .output()
        .expect("python3 reads the JUnit file");
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (n, f) = l.rsplit_once('\t').unwrap();
            (n.to_string(), f.parse().unwrap())
        })
        .collect()
}

#[test]
fn issue_19_a_criterion_that_does_not_parse_is_a_usage_error() {
    let _g = crate::util::shared();
    let out = run(&[
        "udp",
        "--target",
        "198.18.0.2",
        "--no-results",
        "--expect",
        "rx_pps>=1.2Mqps",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), Some(2), "{err}");
    assert!(err.contains("'Mqps' is not a unit of rx_pps"), "{err}");
    assert!(
        err.contains("\n  rx_pps>=1.2Mqps\n             ^^^^"),
        "{err}"
    );
    let out = run(&["tcp", "--target", "198.18.0.2", "--expect", "rx_pp>1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), Some(2), "{err}");
    assert!(
        err.contains("unknown figure 'rx_pp'; figures: rx_pps"),
        "{err}"
    );
    // Issue 38 item 5: a figure the command does not measure is a usage
    // error before anything runs, naming what it does measure.
    let out = run(&[
        "search",
        "--lab",
        "--dut-police",
        "120kpps",
        "--expect",
        "loss<=0.001%",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), Some(2), "{err}");
    assert!(
        err.contains("search does not measure loss") && err.contains("search measures ndr, pdr"),
        "{err}"
    );
    let out = run(&["tcp", "--target", "198.18.0.2", "--expect", "p99<=2ms"]);
    let err = stderr(&out);
    assert_eq!(code(&out), Some(2), "{err}");
    assert!(err.contains("add --latency"), "{err}");
    for (cmd, figure) in [
        ("search", "ndr, pdr"),
        ("ramp", "saturation"),
        ("http", "requests_per_s"),
        ("tcp", "retransmits"),
        ("udp", "dut_loss"),
        ("latency", "added_latency"),
    ] {
        let help = run(&[cmd, "--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(
            text.contains(&format!("Figures {cmd} measures:")) && text.contains(figure),
            "{cmd} --help: {text}"
        );
    }
    // clap's own errors exit 2 too.
    let out = run(&["udp", "--target", "198.18.0.2", "--repeat", "0"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    let out = run(&["check", "/nonexistent/run"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    // The exit codes are in --help.
    let help = run(&["search", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("Exit status:") && text.contains("130"),
        "{text}"
    );
}

#[test]
fn issue_19_policed_dut_criteria_baseline_and_junit() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("criteria");
    // A DUT policed to 40 kpps: below what a loaded 2-core tester offers.
    // Under load the DUT's core loses frames a little below its police
    // rate (35-40 kpps seen): the criteria leave room either side.
    let (out, a) = search(&base, "first", "40kpps", &["--expect", "ndr>=20kpps"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let first = ndr(&a);
    assert!(
        first <= 42_000.0,
        "NDR {first} for a DUT policed to 40 kpps"
    );
    let c = &a["criteria"][0];
    assert_eq!(c["passed"], true, "{c}");
    assert_eq!(c["test"], "search bench-var2-64b", "{c}");
    assert!((c["measured"].as_f64().unwrap() - first).abs() < 1.0, "{c}");
    assert!(
        stderr(&out).contains("PASS  ndr>=20kpps"),
        "{}",
        stderr(&out)
    );
    let first_dir = run_dir(&base, "first");

    // A DUT 20 % slower against the first run: a regression, one criterion
    // met and one missed (exit 1), both in the JUnit file. (A rerun that
    // stays within its noise is no regression: issue_38_a_baseline_… checks
    // that on fixtures, where the noise is known; a real rerun's agreement
    // is a figure of a quiet machine, measured by bench/trust.sh.)
    let junit = base.join("out.xml");
    let (out, c) = search(
        &base,
        "slower",
        "32kpps",
        &[
            "--expect",
            "ndr>=15kpps",
            "--expect",
            "ndr>=60kpps",
            "--baseline",
            &first_dir,
            "--tolerance",
            "10%",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(code(&out), Some(1), "{err}");
    let passed: Vec<bool> = c["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["passed"].as_bool().unwrap())
        .collect();
    assert_eq!(passed, [true, false], "{}", c["criteria"]);
    assert!(err.contains("FAIL  ndr>=60kpps"), "{err}");
    let cases = junit_cases(&junit);
    // The missed criterion and the regressed figures are the case's failures.
    assert!(
        cases
            .iter()
            .any(|(name, failures)| name == "search bench-var2-64b" && *failures >= 2),
        "{cases:?}"
    );
    let bl = &c["baseline"];
    let f = bl["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == "ndr")
        .unwrap_or_else(|| panic!("{bl}"));
    assert_eq!(f["change"], "regression", "{bl}");
    assert!(f["change_pct"].as_f64().unwrap() < -10.0, "{f}");
    assert!(err.contains("WORSE"), "{err}");

    // `linerate check` gives the same verdicts on the stored runs.
    let slower = run_dir(&base, "slower");
    let out = run(&[
        "check",
        &slower,
        "--baseline",
        &first_dir,
        "--tolerance",
        "10%",
    ]);
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    let out = run(&["check", &first_dir, "--baseline", &first_dir]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let out = run(&["check", &slower, "--expect", "ndr>=15kpps"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue_19_percent_of_line_is_a_dash_on_a_veth() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("lineveth");
    let lab = |extra: &[&str]| {
        let mut args = vec![
            "lab",
            "--only",
            "tcp 1 stream",
            "--duration",
            "1",
            "--no-progress",
            "--json",
            "--results-dir",
            base.to_str().unwrap(),
        ];
        args.extend(extra);
        let out = run(&args);
        assert_eq!(code(&out), Some(0), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_nothing_left(&lab_pids(&doc));
        doc
    };
    let doc = lab(&[]);
    let d = &doc["tests"][0]["directions"][0];
    assert!(d["line_rate_pct"].is_null(), "a veth has no line rate: {d}");
    // The report's summary row shows a dash, not a percentage of 10G.
    let dir = only_run_dir(&base);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        !html.contains("data-key=\"line_rate_pct\""),
        "a % of line in the report"
    );
    let _ = std::fs::remove_dir_all(&dir);
    // The user's line rate is used when given.
    let doc = lab(&["--line-rate", "100G"]);
    let pct = doc["tests"][0]["directions"][0]["line_rate_pct"]
        .as_f64()
        .unwrap();
    let gbps = doc["tests"][0]["directions"][0]["rx_l2_bps"]
        .as_f64()
        .unwrap()
        / 1e9;
    assert!(
        (pct - gbps).abs() < 0.01 * gbps.max(1.0),
        "{pct} % of 100G for {gbps} Gbit/s"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// The fixture `lab-both.json` with every received rate of its tests
/// times `k`, as the run directory `dir/name`.
fn scaled_fixture(dir: &Path, name: &str, k: f64) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/lab-both.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let scale = |p: &mut Value| {
        for f in ["rx_pps", "rx_l2_bps", "rx_l1_bps"] {
            if let Some(v) = p[f].as_f64() {
                p[f] = Value::from(v * k);
            }
        }
    };
    for t in doc["tests"].as_array_mut().unwrap() {
        for d in t["directions"].as_array_mut().into_iter().flatten() {
            scale(d);
        }
        if t["aggregate"].is_object() {
            scale(&mut t["aggregate"]);
        }
    }
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("results.json"), doc.to_string()).unwrap();
    run.to_str().unwrap().to_string()
}

/// Issue 38 item 6: a rerun that differs within its own noise is no
/// regression (exit 0); a 30 % drop is (exit 1); a search that ended at
/// the tester's limit keeps its ≥ and is compared as a bound.
#[test]
fn issue_38_a_baseline_weighs_changes_against_noise_and_bounds() {
    let _g = crate::util::shared();
    let base = tempdir("baseline-noise");
    let first = scaled_fixture(&base, "first", 1.0);
    let again = scaled_fixture(&base, "again", 0.97);
    let drop = scaled_fixture(&base, "drop", 0.7);
    let out = run(&["check", &again, "--baseline", &first, "--json"]);
    assert_eq!(code(&out), Some(0), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bl = &doc["baseline"];
    assert_eq!(bl["regressions"], 0, "{bl}");
    assert_eq!(bl["improvements"], 0, "{bl}");
    let n = bl["figures"].as_array().unwrap().len();
    assert!(n >= 4, "{bl}");
    assert_eq!(bl["within_noise"], n, "{bl}");
    for f in bl["figures"].as_array().unwrap() {
        assert!(f["threshold_pct"].as_f64().unwrap() > 0.0, "{f}");
        assert!(f["threshold_from"].is_string(), "{f}");
    }
    let err = stderr(&out);
    assert!(err.contains("0 regressions, 0 improvements"), "{err}");
    assert!(err.contains("within noise, 0 inconclusive"), "{err}");

    let out = run(&["check", &drop, "--baseline", &first]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("WORSE"), "{text}");
    assert!(text.contains("(-30.0 %; threshold"), "{text}");

    // The fixture's first search ended at the tester's limit: ≥ both ways.
    let search = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/search.json");
    let search = search.to_str().unwrap();
    let out = run(&["check", search, "--baseline", search]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("ndr ≥60.4 kpps -> ≥60.4 kpps"), "{text}");
    assert!(text.contains("2 within noise, 2 inconclusive"), "{text}");
    let _ = std::fs::remove_dir_all(&base);
}
