//! Issue 38, the first hour again: `-b` is `--rate` on every command with a
//! rate, and a bit rate is said in pps; a closed stderr (`2>&1 | head`)
//! ends the messages, never the run; a bad argument found before anything
//! starts exits 2 and writes nothing.

use crate::util::{bin, one_core, require_root, run, shared, tempdir};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs linerate with stdout and stderr on one pipe whose reader stops
/// after `lines` lines (`linerate ... 2>&1 | head -N`); returns linerate's
/// own exit status and what the reader saw.
fn through_head(args: &[&str], lines: u32) -> (i32, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            r#""$@" 2>&1 | head -{lines}; exit "${{PIPESTATUS[0]}}""#
        ))
        .arg("linerate")
        .arg(bin())
        .args(args)
        .output()
        .expect("running bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The one run directory under `base` and its results document.
fn results(base: &Path) -> Value {
    let dir = crate::util::only_run_dir(base);
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn issue38_a_closed_stderr_ends_the_messages_not_the_run() {
    let _g = shared();
    let base = tempdir("i38-tcp");
    let b = base.to_str().unwrap();
    // Interval lines on stdout, "done:" and the results path on stderr:
    // the reader goes after the first line, the writes that follow meet
    // a closed pipe on both streams.
    let args = [
        "tcp",
        "--target",
        "127.0.0.1",
        "-t",
        "2",
        "-i",
        "0.5",
        "--results-dir",
        b,
    ];
    let (code, seen) = through_head(&args, 1);
    assert_eq!(code, 0, "linerate {args:?} | head -1 (it saw: {seen})");
    let doc = results(&base);
    assert_eq!(doc["status"], "complete", "{doc:#}");
    assert_eq!(doc["tests"].as_array().map(Vec::len), Some(1));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue38_a_search_under_head_finishes_and_writes_its_results() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("i38-search");
    let b = base.to_str().unwrap();
    let args = [
        "search",
        "--lab",
        "--profile",
        "bench",
        "--final-trial",
        "1",
        "--duration-sum",
        "1",
        // A coarse search of a policed DUT below a low ceiling: fewer
        // trials (8 s, not 30 s of a search from the line rate), and still
        // many lines after the two head reads, which is what the test is
        // about.
        "--width",
        "10",
        "--dut-police",
        "50000",
        "--max-rate",
        "100kpps",
        "--results-dir",
        b,
    ];
    let (code, seen) = through_head(&args, 2);
    assert_ne!(code, 101, "a panic: {seen}");
    assert_eq!(code, 0, "linerate {args:?} | head -2 (it saw: {seen})");
    let doc = results(&base);
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    assert_eq!(doc["searches"].as_array().map(Vec::len), Some(1));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue38_dash_b_is_rate_and_a_bit_rate_is_said_in_pps() {
    let _g = shared();
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "-b",
        "1G",
        "-t",
        "0.5",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = "rate 1 Gbit/s (L1) at 64 B frames (84 B on the wire) = 1488095 pps (1.49 Mpps)";
    assert_eq!(stderr.matches(said).count(), 1, "said once:\n{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pps = doc["tests"][0]["params"]["rate_pps"].as_f64().unwrap();
    assert!((pps - 1e9 / 672.0).abs() < 1e-6, "{pps}");
}

/// A usage error: status 2, no run directory, a message naming the flag.
fn refused_before_the_run(args: &[&str], base: &Path) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "linerate {args:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let written = std::fs::read_dir(base).map(|d| d.count()).unwrap_or(0);
    assert_eq!(written, 0, "linerate {args:?} wrote a run directory");
    stderr
}

#[test]
fn issue38_a_namespace_that_does_not_exist_is_a_usage_error() {
    let _g = crate::util::shared();
    let base = tempdir("i38-ns");
    let b = base.to_str().unwrap();
    for (flag, args) in [
        (
            "--client",
            vec!["udp", "--client", "ns:lr-nosuch", "--target", "198.19.0.1"],
        ),
        (
            "--server",
            vec!["tcp", "--server", "ns:lr-nosuch", "--target", "198.18.0.2"],
        ),
        (
            "--dut-host",
            vec!["udp", "--dut-host", "ns:lr-nosuch", "--target", "127.0.0.1"],
        ),
    ] {
        let all = [&args[..], &["--results-dir", b, "-t", "1"]].concat();
        let e = refused_before_the_run(&all, &base);
        assert!(
            e.contains(&format!("{flag} ns:lr-nosuch"))
                && e.contains("does not exist")
                && e.contains("ip netns"),
            "{e}"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue38_report_of_a_path_that_does_not_exist_is_a_usage_error() {
    let _g = crate::util::shared();
    for cmd in ["report", "check"] {
        let out = run(&[cmd, "/nonexistent-lr-run"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "linerate {cmd}:\n{stderr}");
        assert!(
            stderr.contains("/nonexistent-lr-run") && stderr.contains("give a run directory"),
            "{cmd}: {stderr}"
        );
    }
}

#[test]
fn issue38_a_plan_host_in_a_missing_namespace_is_refused_before_anything_runs() {
    let _g = crate::util::shared();
    let base = tempdir("i38-nons");
    let plan = base.join("plan.toml");
    // A name no test makes: the check must find it missing.
    let ns = format!("lrnone{}", std::process::id() % 100_000);
    std::fs::write(
        &plan,
        format!(
            "name = \"missing namespace\"\n[hosts.gen]\nnetns = \"{ns}\"\n[hosts.sink]\n\
             netns = \"{ns}\"\naddress = \"198.18.0.2\"\n[[test]]\nname = \"u\"\nkind = \"udp\"\n\
             from = \"gen\"\nto = \"sink\"\n"
        ),
    )
    .unwrap();
    let results = base.join("results");
    let out = run(&[
        "run",
        plan.to_str().unwrap(),
        "--no-progress",
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    // A usage error (2), not a run that failed (3), naming the host and
    // the namespace, and no results directory.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("host gen") && err.contains(&format!("'{ns}' does not exist")),
        "{err}"
    );
    assert!(!results.exists(), "a results directory was made");
    let _ = std::fs::remove_dir_all(&base);
}
