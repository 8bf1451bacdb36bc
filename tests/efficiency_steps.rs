//! Issue 21 item 3: the DUT's CPU time per packet on every step of a lab
//! ramp, and per packet cheaper at high load than at low (NAPI batching:
//! a poll's and a wake-up's fixed cost is shared by more packets).

use crate::util::*;
use serde_json::Value;

#[test]
fn every_ramp_step_has_the_dut_cpu_time_per_packet() {
    if !require_root() {
        return;
    }
    let _g = serial();
    // A measurement on a shared VM: a run that misses is run once more
    // (its failure printed); two misses in a row fail the test.
    if let Err(first) = ramp_and_check() {
        eprintln!("first run: {first}\nrunning the ramp once more");
        if let Err(second) = ramp_and_check() {
            panic!("twice:\nfirst run: {first}\nsecond run: {second}");
        }
    }
}

/// Fails with `Err` (what did not hold) rather than panicking.
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        let held: bool = $cond;
        if !held {
            return Err(format!($($msg)+));
        }
    };
}

fn ramp_and_check() -> Result<(), String> {
    let base = tempdir("eff-steps");
    let out = run(&[
        "ramp",
        "--lab",
        "--profile",
        "bench",
        "--warmup",
        "1",
        "--warmup-rate",
        "5kpps",
        "--ramp",
        "4",
        "--ramp-to",
        "200kpps",
        "--hold",
        "1",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&base);
    let stderr = String::from_utf8_lossy(&out.stderr);
    check!(out.status.success(), "ramp failed:\n{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    assert_nothing_left(&lab_pids(&doc));

    let ramp = &doc["ramps"][0];
    let test = &doc["tests"][ramp["test"].as_u64().unwrap_or(u64::MAX) as usize];
    let eff = &test["dut_efficiency"];
    let counted = eff["counted"].as_str().unwrap_or_default();
    // The lab DUT's own NAPI threads, by pid, and its CPU's softirq.
    check!(counted.contains("napi/dut"), "counted: {counted}");
    check!(counted.contains("softirq"), "counted: {counted}");
    let notes = eff["notes"].as_array().cloned().unwrap_or_default();
    // Cycles exactly where the DUT host shows a clock; else the note says so.
    let has_clock = eff["clock_source"].is_string();
    if !has_clock {
        check!(
            notes.iter().any(|n| n
                .as_str()
                .unwrap_or_default()
                .contains("cycles per packet omitted")),
            "no clock and no note: {eff}"
        );
    }
    let whole = &eff["test"];
    check!(f(&whole["cpu_ns_per_packet"]) > 0.0, "{whole}");
    check!(whole["packets_from"] == "dut_tx", "{whole}");

    // Every second that carried traffic has the DUT's CPU time per packet.
    let samples = ramp["directions"][0]["samples"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check!(samples.len() >= 5, "{} samples", samples.len());
    let mut steps = Vec::new();
    for s in samples.iter().filter(|s| f(&s["received_pps"]) > 0.0) {
        let d = &s["dut"];
        let ns = f(&d["cpu_ns_per_packet"]);
        check!(ns > 0.0, "step at {} pps: {d}", f(&s["offered_pps"]));
        check!(d["packets"].as_u64().unwrap_or(0) > 0, "{d}");
        check!(
            d["cycles_per_packet"].is_number() == has_clock,
            "cycles per packet where the clock is {}: {d}",
            eff["clock_source"]
        );
        steps.push((f(&s["offered_pps"]), ns));
    }
    check!(steps.len() >= 2, "steps: {steps:?}");
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (low, high) = (steps[0], steps[steps.len() - 1]);
    // Seen here (2-core VM, DUT on CPU1): ~40 µs per packet at 5 kpps, ~3
    // µs at 200-300 kpps. Noise from other work on the DUT's CPU only
    // raises the low-load figure; a 20 % margin keeps the check honest
    // without depending on the machine's speed.
    check!(
        high.0 > 4.0 * low.0,
        "the ramp did not span the load: {steps:?}"
    );
    check!(
        high.1 < 0.8 * low.1,
        "per-packet DUT CPU at {} pps ({} ns) is not below {} pps's ({} ns): {steps:?}",
        high.0,
        high.1,
        low.0,
        low.1
    );
    // The terminal line names both ends.
    check!(
        stderr.contains("DUT ") && stderr.contains("(lowest load)"),
        "{stderr}"
    );
    Ok(())
}
