//! Issue 37 part 4, `--abort-on-fail`: a lab DUT that drops 5 % against
//! `loss<=0.1%` stops a 60 s test once the grace period is covered (one
//! interval later, when its interval line is complete), exits 1, and
//! leaves a results file marked aborted with the criterion and the
//! intervals that ran; a flag that could never stop a run is a usage
//! error. When the decision is made, what it records and that a criterion
//! that holds lets the test run to its end are tested in memory, on the
//! scripted fleet (`src/orchestrate/run/tests.rs`).

use crate::util::*;
use serde_json::Value;
use std::process::Output;
use std::time::Instant;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `linerate lab` with a DUT that drops 5 %, its 1518 B UDP row only.
fn lossy_lab(base: &std::path::Path, extra: &[&str]) -> (Output, Value) {
    let junit = base.join("junit.xml");
    let mut args = vec![
        "lab",
        "--dut-loss",
        "5",
        "--only",
        "udp 1518B var2",
        // Below the DUT's capacity, so the loss is the DUT's 5 % (lab.rs).
        "--tx-engine",
        "packet",
        "--no-progress",
        "--json",
        "--junit",
        junit.to_str().unwrap(),
        "--results-dir",
        base.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = run(&args);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stderr(&out)));
    assert_nothing_left(&lab_pids(&doc));
    (out, doc)
}

#[test]
fn issue37_a_lossy_dut_aborts_a_long_run_after_the_grace_period() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let base = tempdir("abort");
    let started = Instant::now();
    let (out, doc) = lossy_lab(
        &base,
        &[
            "--duration",
            "60",
            "--expect",
            "loss<=0.1%",
            "--abort-on-fail",
            "--abort-after",
            "2",
        ],
    );
    let wall = started.elapsed().as_secs_f64();
    let err = stderr(&out);
    eprintln!("{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Lab set-up and teardown included, far from the 60 s asked for.
    assert!(wall < 20.0, "the run took {wall:.1} s");
    let line = err
        .lines()
        .find(|l| l.starts_with("aborted after "))
        .unwrap_or_else(|| panic!("no abort line:\n{err}"));
    assert!(line.contains(": loss<=0.1% failed: "), "{line}");
    assert!(line.contains(" % over "), "{line}");

    // The document on stdout and the file are the same, readable, aborted.
    let dir = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a run directory");
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    for d in [&doc, &file] {
        assert_eq!(d["status"], "aborted", "{}", d["abort"]);
        let a = &d["abort"];
        assert_eq!(a["expect"], "loss<=0.1%");
        assert_eq!(a["figure"], "loss");
        assert_eq!(a["test"], "udp 1518B var2");
        assert_eq!(f(&a["expected"]), 0.001);
        let measured = f(&a["measured"]);
        assert!((0.03..=0.07).contains(&measured), "{a}");
        // The figure covers at least the grace period, measured from the
        // test's first interval.
        assert!(f(&a["over_s"]) >= 2.0, "{a}");
        assert_eq!(a["detail"].as_str().unwrap(), line);
    }
    let t = test_named(&file, "udp 1518B var2");
    assert_eq!(t["status"], "aborted", "{}", t["error"]);
    // Stopped within the grace period plus one interval (the line that
    // covers the grace period is complete one interval later), plus the
    // stop's own time: a fraction of a second, which on a host with a
    // load average of 6.6 came to 0.61 s (3.61 s). The exact moment is
    // checked on a virtual clock
    // (`orchestrate::run::tests::a_lossy_test_is_aborted_once_its_grace_period_is_covered`).
    let d = &t["directions"][0];
    let ran = f(&d["duration_s"]);
    assert!((2.0..=4.5).contains(&ran), "the senders ran {ran} s");
    // The partial intervals are there, with what the sides counted in them.
    let intervals = d["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 2, "{} intervals", intervals.len());
    let sum = |side: &str, k: &str| -> u64 {
        intervals
            .iter()
            .map(|i| i[side][k].as_u64().unwrap_or(0))
            .sum()
    };
    assert!(sum("sender", "tx_packets") > 0, "{d}");
    assert!(sum("receiver", "lost") > 0, "{d}");
    assert!(sum("receiver", "rx_packets") <= d["rx_packets"].as_u64().unwrap());
    let loss = f(&d["loss_ratio"]);
    assert!((0.03..=0.07).contains(&loss), "loss ratio {loss}");
    // The criterion fails with what was measured, not "not measured".
    let c = &file["criteria"][0];
    assert_eq!(
        (c["expect"].as_str(), c["passed"].as_bool()),
        (Some("loss<=0.1%"), Some(false))
    );
    assert_eq!(f(&c["measured"]), f(&file["abort"]["measured"]));
    // JUnit marks the failure on the test's case.
    let xml = std::fs::read_to_string(base.join("junit.xml")).unwrap();
    assert!(xml.contains("<failure"), "{xml}");
    assert!(xml.contains("loss&lt;=0.1%: aborted after"), "{xml}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue37_abort_on_fail_that_could_never_stop_a_run_is_a_usage_error() {
    let _g = crate::util::shared();
    let code = |out: &Output| out.status.code();
    // No criterion at all.
    let out = run(&["udp", "--target", "198.18.0.2", "--abort-on-fail"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("add one with --expect"),
        "{}",
        stderr(&out)
    );
    // Only criteria known at the end of a test; the error names those
    // that can be checked.
    let out = run(&[
        "udp",
        "--target",
        "198.18.0.2",
        "--latency",
        "--expect",
        "p99<=2ms",
        "--abort-on-fail",
    ]);
    let e = stderr(&out);
    assert_eq!(code(&out), Some(2), "{e}");
    assert!(e.contains("none of the criteria can be checked"), "{e}");
    assert!(
        e.contains("p99<=2ms: p99 is not in the interval lines"),
        "{e}"
    );
    assert!(e.contains("loss, lost, rx_pps"), "{e}");
    // A count from below may still be reached: not a verdict mid-run.
    let out = run(&[
        "tcp",
        "--target",
        "198.18.0.2",
        "--expect",
        "retransmits>=1",
        "--abort-on-fail",
    ]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("retransmits<="), "{}", stderr(&out));
    // Commands whose tests have no interval lines.
    let out = run(&["ramp", "--lab", "--expect", "loss<=1%", "--abort-on-fail"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not work with ramp"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "search",
        "--lab",
        "--expect",
        "ndr>=1Mpps",
        "--abort-on-fail",
    ]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ndr is not in the interval lines"),
        "{}",
        stderr(&out)
    );
    // The grace period needs the flag it belongs to.
    let out = run(&[
        "udp",
        "--target",
        "198.18.0.2",
        "--expect",
        "loss<=1%",
        "--abort-after",
        "5",
    ]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--abort-on-fail"), "{}", stderr(&out));
}
