//! Issue 35, item 4: what this host's kernel lacks, exercised in stock
//! Debian guests, each check failing when the feature was not really
//! used. The DUT's netem impairments (`--dut-delay`, `--dut-jitter`,
//! `--dut-reorder`) run in a `--dut-vm` guest and are refused, with the
//! reason and the fix, on a namespace DUT whose kernel has no sch_netem.

use crate::util::*;
use serde_json::Value;
use std::time::Instant;

/// The guest DUT delays 20 ms ± 5 ms each way and sends 10 % at once:
/// each one-way median is at least delay - jitter, the round trip's at
/// least twice that, the jitter spreads the round trips (p90 - p50 ≥
/// 2.5 ms, where a plain delay keeps them within a fraction of a ms),
/// some probes pass one way without the delay (only reorder sends at
/// once: a round trip below 2 × (delay - jitter)), and the one flow
/// arrives reordered.
#[test]
fn netem_delay_jitter_and_reorder_on_a_dut_vm() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _s = serial();
    let dir = tempdir("vm-netem");
    let began = Instant::now();
    let out = run(&[
        "lab",
        "--dut-vm",
        "--dut-kernel",
        "debian:bookworm",
        "--vm-accel",
        "tcg",
        "--dut-delay",
        "20ms",
        "--dut-jitter",
        "5ms",
        "--dut-reorder",
        "10",
        "--quick",
        "--duration",
        "2",
        "--only",
        "latency under load",
        "--only",
        "udp 64B one flow",
        "--results-dir",
        dir.to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lab --dut-vm --dut-delay:\n{stderr}");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(only_run_dir(&dir).join("results.json")).unwrap())
            .unwrap();
    let lab = &doc["labs"][0];
    let netem = lab["dut_netem"].as_str().unwrap_or_default();
    assert!(
        netem.contains("delay 20.0 ms ± 5.0 ms") && netem.contains("10 % reordered"),
        "the lab records the impairment: {lab}"
    );
    let modules = lab["vm"]["modules"].to_string();
    assert!(modules.contains("\"sch_netem\""), "{modules}");

    let l = &test_named(&doc, "latency under load tcp")["latency"];
    let idle = l["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "idle")
        .unwrap_or_else(|| panic!("no idle phase: {l}"));
    let (delay, jitter) = (0.020, 0.005);
    let rtt = &idle["rtt_s"];
    let (min, p50, p90) = (f(&rtt["min"]), f(&rtt["p50"]), f(&rtt["p90"]));
    let (fwd, rev) = (f(&idle["forward_s"]["p50"]), f(&idle["reverse_s"]["p50"]));
    eprintln!(
        "netem DUT: RTT min {:.2} p50 {:.2} p90 {:.2} ms; one-way p50 {:.2} / {:.2} ms",
        min * 1e3,
        p50 * 1e3,
        p90 * 1e3,
        fwd * 1e3,
        rev * 1e3
    );
    assert!(fwd >= delay - jitter, "forward one-way p50 {fwd}: {idle}");
    assert!(rev >= delay - jitter, "reverse one-way p50 {rev}: {idle}");
    assert!(p50 >= 2.0 * (delay - jitter), "RTT p50 {p50}: {idle}");
    assert!(p90 - p50 >= 0.0025, "jitter spreads RTTs: {idle}");
    // Without reorder no round trip is shorter than 2 × (delay - jitter).
    assert!(
        min < 2.0 * (delay - jitter),
        "reorder sends some at once: {idle}"
    );

    let udp = test_named(&doc, "udp 64B one flow");
    assert_eq!(udp["status"], "ok", "{udp}");
    let d = &udp["directions"][0];
    let (rx, reordered) = (
        d["rx_packets"].as_u64().unwrap(),
        d["reordered"].as_u64().unwrap(),
    );
    assert!(
        rx > 1000 && reordered > rx / 100,
        "one flow through netem: {d}"
    );
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("netem on a DUT VM: {:.1} s", began.elapsed().as_secs_f64());
}

/// This host's kernel has no sch_netem: the namespace DUT refuses the
/// delay with the reason and the fix, before any test runs. (On a kernel
/// that has it the lab simply runs; then there is nothing to refuse.)
#[test]
fn netem_is_refused_where_the_kernel_lacks_it() {
    if !require_root() {
        return;
    }
    let _s = serial();
    let has_netem = std::fs::read_to_string("/proc/modules")
        .unwrap_or_default()
        .contains("sch_netem ");
    let out = run(&[
        "lab",
        "--dut-delay",
        "10ms",
        "--quick",
        "--duration",
        "1",
        "--only",
        "tcp 1 stream",
        "--no-results",
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if has_netem || out.status.success() {
        assert!(out.status.success(), "{stderr}");
        eprintln!("this kernel has sch_netem: the namespace DUT delays, nothing to refuse");
        return;
    }
    for want in ["no sch_netem", "--dut-vm", "tc netem"] {
        assert!(stderr.contains(want), "{want}: {stderr}");
    }
    assert!(!stderr.contains("done:"), "no test ran: {stderr}");
    for bad in [
        &["--dut-jitter", "2ms"][..],
        &["--dut-delay", "5ms", "--dut-shape", "20M"],
    ] {
        let mut args = vec!["lab"];
        args.extend_from_slice(bad);
        let out = run(&args);
        assert!(!out.status.success(), "{bad:?}");
    }
}
