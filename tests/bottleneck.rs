//! The live bottleneck finder on a real lab: the back-to-back self-test with
//! the sender pinned to CPU0 and the receiver to CPU1 must come back with
//! per-core evidence and a verdict that names the core it blames.

use crate::util::{require_root, run_json, serial, tempdir};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn self_test_verdict_names_the_sender_core() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let base = tempdir("bottleneck");
    let doc = run_json(&[
        "lab",
        "--quick",
        "--only",
        "self-test",
        // The sender core's verdict needs a sender that fills its core:
        // the live engine's frames outrun any socket receiver instead.
        "--tx-engine",
        "packet",
        "--cpus",
        "0,1",
        // The receiver thread on CPU1 counts: the socket receiver (the XDP
        // sink counts in softirq wherever its veth is polled).
        "--rx-engine",
        "socket",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    let t = &doc["tests"][0];
    assert!(t["name"].as_str().unwrap().starts_with("self-test"), "{t}");
    assert_eq!(t["status"], "ok", "{t}");
    let b = &t["bottleneck"];
    let verdict = b["verdict"].as_str().expect("a verdict");
    let cpus = b["host_cpus"].as_array().unwrap();
    let core = |n: u64| {
        cpus.iter()
            .find(|c| c["cpu"] == n)
            .unwrap_or_else(|| panic!("no CPU{n} in {b}"))
    };
    for c in cpus {
        let busy = f(&c["busy_pct"]);
        assert!((0.0..=100.0).contains(&busy), "{c}");
        let split =
            f(&c["user_pct"]) + f(&c["system_pct"]) + f(&c["softirq_pct"]) + f(&c["irq_pct"]);
        assert!(split <= busy + 0.5, "the split fits in the busy time: {c}");
    }
    // Pinned threads report the core they were pinned to.
    let cpu0 = core(0);
    let on = |c: &Value, name: &str, role: &str| {
        c["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == name && t["role"] == role)
    };
    assert!(on(cpu0, "lr-udp-send", "gen"), "sender on CPU0: {cpu0}");
    assert!(on(core(1), "lr-udp-recv", "sink"), "receiver on CPU1: {b}");
    let busy0 = f(&cpu0["busy_pct"]);
    // Frames first: drops at the tester's receiver beyond noise name it,
    // whatever the cores show.
    let d = &t["directions"][0];
    let (drops, offered) = (f(&d["tester_drops"]), f(&d["tx_packets"]));
    if drops >= 200.0 && drops >= offered * 0.01 {
        assert_eq!(b["kind"], "tester_receiver", "{b}");
        assert!(
            verdict.contains("the tester's receiving side is the limit"),
            "{verdict}"
        );
    } else if busy0 >= 90.0 {
        assert!(verdict.starts_with("CPU0 "), "{verdict}");
        assert!(verdict.contains("lr-udp-send"), "{verdict}");
        assert_eq!(b["cpu"], 0, "{b}");
        let sender = cpu0["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "lr-udp-send")
            .unwrap();
        if f(&sender["cpu_pct"]) >= 20.0 {
            assert_eq!(b["kind"], "tester_sender", "{b}");
            assert!(
                verdict.contains("the tester's sender core is the limit"),
                "{verdict}"
            );
        }
    } else {
        let busiest = cpus
            .iter()
            .max_by(|x, y| f(&x["busy_pct"]).total_cmp(&f(&y["busy_pct"])))
            .unwrap();
        if f(&busiest["busy_pct"]) < 90.0 {
            // In the lab a core is named with its role: "CPU1 (tester:
            // receiver) 63 %".
            let want = format!("no core saturated (busiest CPU{} ", busiest["cpu"]);
            assert!(verdict.starts_with(&want), "{verdict} (wanted {want})");
            let busy = format!(" {:.0} %: ", f(&busiest["busy_pct"]));
            assert!(verdict.contains(&busy), "{verdict} (wanted {busy})");
        } else {
            // Another core is full (the receiver's, or the DUT's softirq).
            let want = format!("CPU{} ", busiest["cpu"]);
            assert!(verdict.starts_with(&want), "{verdict}");
        }
    }
    // Issue 33: the lab names each core's role, and back to back every
    // role is the tester's: no core is the DUT's.
    assert!(!verdict.contains("(DUT"), "{verdict}");
    if busy0 >= 90.0 && drops < 200.0 {
        assert!(verdict.starts_with("CPU0 (tester: generator"), "{verdict}");
    }
    let _ = std::fs::remove_dir_all(&base);
}
