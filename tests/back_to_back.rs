//! Issue 37 part 2: back-to-back frames (`search --method back-to-back`,
//! RFC 2544 §26.4 / RFC 9004). The longest burst a lab DUT shaped with tc
//! tbf forwards whole follows its queue: twice the queue, about twice the
//! burst. One DUT is searched from the command line (its CSV row checked),
//! the other from a plan (`method = "back-to-back"`). A bad flag is a usage
//! error that writes nothing.

use crate::util::*;
use serde_json::Value;

/// The back-to-back result of a run's only search.
fn b2b(doc: &Value) -> &Value {
    let s = &doc["searches"][0];
    assert_eq!(s["frame"]["fixed"], 1518, "{s}");
    &s["back_to_back"]
}

/// The average longest burst, after the checks every result must pass.
fn frames(b: &Value, trials: usize) -> f64 {
    assert_eq!(b["end"], "found", "{b}");
    assert_eq!(b["trials"].as_array().unwrap().len(), trials, "{b}");
    let avg = f(&b["frames_avg"]);
    assert!(avg >= 4.0, "a shaper's queue holds more than {avg} frames");
    // Every passing burst arrived whole: sent = received, nothing lost.
    for burst in b["bursts"].as_array().unwrap() {
        let o = &burst["outcome"];
        if burst["passed"] == true {
            assert_eq!(o["tx_packets"], o["frames"], "{burst}");
            assert_eq!(o["rx_packets"], o["frames"], "{burst}");
        }
    }
    // RFC 9004 §3.4: the implied buffer time is the burst at its rate,
    // and the corrected one subtracts what the shaper forwarded meanwhile.
    let rate = f(&b["config"]["burst_pps"]);
    assert!((f(&b["implied_buffer_time_s"]) - avg / rate).abs() < 1e-9);
    let thr = f(&b["config"]["throughput_pps"]);
    assert!(
        thr > 1000.0 && thr < 2500.0,
        "20 Mbit/s at 1518 B: {thr} pps"
    );
    let corrected = f(&b["corrected_buffer_time_s"]);
    assert!((corrected - avg / rate * (1.0 - thr / rate)).abs() < 1e-9);
    // 2 repetitions, no waits, a measured (not RFC 2544) throughput.
    assert_eq!(b["rfc_compliant"], false);
    let notes = b["compliance_notes"].to_string();
    assert!(
        notes.contains(&format!("{trials} repetition(s)")),
        "{notes}"
    );
    assert!(notes.contains("0 s between bursts"), "{notes}");
    assert!(notes.contains("forwarding rate under overload"), "{notes}");
    avg
}

#[test]
fn back_to_back_follows_the_shapers_queue() {
    let _s = one_core();
    if !require_root() {
        return;
    }
    // 20 Mbit/s: far below what the generator sends at 1518 B, with a
    // token bucket of 4 frames, so the queue (30k: 20 frames) dominates.
    let base = tempdir("b2b-cli");
    let doc = run_json(&[
        "search",
        "--lab",
        "--dut-shape",
        "20M,30k",
        "--method",
        "back-to-back",
        "--sizes",
        "1518",
        "--b2b-trials",
        "2",
        "--no-waits",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    assert_nothing_left(&lab_pids(&doc));
    let small = frames(b2b(&doc), 2);
    // The results document's CSV has the search's row.
    let results = only_run_dir(&base).join("results.json");
    let out = run(&["report", "--format", "csv", results.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8_lossy(&out.stdout);
    let row = csv
        .lines()
        .find(|l| l.contains(",back_to_back,"))
        .unwrap_or_else(|| panic!("no back_to_back row in\n{csv}"));
    assert!(row.contains(&format!(",{small},")), "{row}");
    let _ = std::fs::remove_dir_all(&base);

    // The same search from a plan, against twice the queue.
    let dir = tempdir("b2b-plan");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "name = \"b2b\"\n[lab]\ndut = \"route\"\ndut_shape = \"20M,60k\"\n\
         [[test]]\nname = \"b2b\"\nkind = \"search\"\nmethod = \"back-to-back\"\n\
         sizes = \"1518\"\nb2b_trials = 2\nno_waits = true\n",
    )
    .unwrap();
    let doc = run_json(&[
        "run",
        plan.to_str().unwrap(),
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    assert_nothing_left(&lab_pids(&doc));
    let large = frames(b2b(&doc), 2);
    let _ = std::fs::remove_dir_all(&dir);
    // Twice the queue, twice the burst within ±30 % (the bucket's 4
    // frames, passed at once, make it about 1.8).
    let ratio = large / small;
    assert!(
        (1.4..=2.6).contains(&ratio),
        "30k queue: {small} frames, 60k: {large} frames, ratio {ratio:.2}"
    );
}

#[test]
fn a_zero_trial_back_to_back_is_a_usage_error_that_writes_nothing() {
    let _g = crate::util::shared();
    let base = tempdir("b2b-usage");
    let out = run(&[
        "search",
        "--lab",
        "--method",
        "back-to-back",
        "--b2b-trials",
        "0",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--b2b-trials"), "{stderr}");
    assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&base);
}
