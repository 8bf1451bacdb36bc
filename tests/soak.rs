//! The soak (issue 22, item 3) in the suite: `bench/soak.sh --seconds 30`
//! (its shortest) runs UDP at the tester's full rate, TCP alongside and a
//! monitor through a gen ─ dut ─ sink lab, and fails unless memory and
//! descriptors stay flat after the first sample (10 s) and the UDP counters
//! add up exactly. Twenty seconds at full rate after the first sample show a
//! per-packet or per-interval leak as surely as fifty do (millions of
//! frames, twenty intervals).
//! The 60-minute soak is a benchmark, run by hand (bench/README.md).

use crate::faults::{HostState, PREFIX};
use crate::util::*;
use std::process::Command;

#[test]
fn half_minute_soak_keeps_memory_flat_and_counters_exact() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let before = HostState::capture();
    let prefix = format!("{PREFIX}{}soak", std::process::id() % 100_000);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/soak.sh");
    let out = Command::new(script)
        .args(["--seconds", "30"])
        .env("BIN", bin())
        .env("PREFIX", &prefix)
        .output()
        .expect("running bench/soak.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "soak failed ({})", out.status);
    // The table has every controller and agent, and the counters line.
    for role in [
        "udp ",
        "udp-agent-gen",
        "udp-agent-sink",
        "tcp-agent-sink",
        "monitor ",
    ] {
        assert!(stdout.contains(role), "no row for {role}");
    }
    assert!(stdout.contains("(exact)"), "no exact UDP accounting");
    assert!(stdout.trim_end().ends_with("soak: ok"));
    let names = [
        format!("{prefix}g"),
        format!("{prefix}d"),
        format!("{prefix}s"),
    ];
    before.assert_clean(&[&names[0], &names[1], &names[2]]);
}
