//! `linerate lab` in real namespaces: every DUT mode builds, forwards, agrees
//! with the kernel's counters and leaves nothing behind.

use crate::util::*;
use serde_json::Value;

fn check_udp(t: &Value) {
    assert_eq!(t["status"], "ok", "{}: {}", t["name"], t["error"]);
    let d = &t["directions"][0];
    assert!(
        f(&d["rx_pps"]) > 1000.0,
        "{}: rx_pps {}",
        t["name"],
        d["rx_pps"]
    );
    assert!(d["tx_packets"].as_u64().unwrap() > 0);
    assert_eq!(d["duplicates"], 0);
    // L1 = L2 + 20 B per frame.
    let frame = f(&t["params"]["average_frame_bytes"]);
    let ratio = f(&d["rx_l1_bps"]) / f(&d["rx_l2_bps"]);
    assert!((ratio - (frame + 20.0) / frame).abs() < 1e-9);
    let checks = t["cross_checks"].as_array().unwrap();
    // The sender's and receiver's counts against their kernels', and through
    // a DUT namespace its own count of what it dropped.
    let ends = checks
        .iter()
        .filter(|c| !c["what"].as_str().unwrap().starts_with("dut:"))
        .count();
    assert_eq!(ends, 2, "{}", t["cross_checks"]);
    assert!(checks.len() <= 3, "{}", t["cross_checks"]);
    for c in checks {
        assert_eq!(c["flagged"], false, "{}: {c}", t["name"]);
        assert!(f(&c["difference_ratio"]) <= 0.01, "{c}");
    }
    assert!(!t["kernel_counters"].as_array().unwrap().is_empty());
}

fn check_tcp(t: &Value) {
    assert_eq!(t["status"], "ok", "{}: {}", t["name"], t["error"]);
    let d = &t["directions"][0];
    assert!(
        f(&d["rx_l2_bps"]) > 1e8,
        "{}: goodput {}",
        t["name"],
        d["rx_l2_bps"]
    );
    let streams = d["sender_summary"]["streams"].as_array().unwrap();
    assert!(!streams.is_empty());
    assert!(
        streams.iter().all(|s| s["rtt_us"].as_u64().unwrap() > 0),
        "TCP_INFO rtt: {streams:?}"
    );
    for c in t["cross_checks"].as_array().unwrap() {
        assert!(f(&c["difference_ratio"]) <= 0.01, "{}: {c}", t["name"]);
    }
}

/// HTTP downloads through the DUT (issue 10): goodput, completed requests,
/// cross-checks with the kernel within 1 %.
fn check_http(t: &Value) {
    assert_eq!(t["status"], "ok", "{}: {}", t["name"], t["error"]);
    let h = &t["http"];
    assert!(f(&h["goodput_bps"]) > 1e8, "{}: {h}", t["name"]);
    assert!(h["client"]["requests"].as_u64().unwrap() >= 1, "{h}");
    let checks = t["cross_checks"].as_array().unwrap();
    assert!(checks.len() >= 2, "{}", t["cross_checks"]);
    for c in checks {
        assert!(f(&c["difference_ratio"]) <= 0.01, "{}: {c}", t["name"]);
    }
}

fn schema_validate(doc: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../schema/results.schema.json")).expect("schema parses");
    let v = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "results.json does not match the schema:\n{}",
        errors.join("\n")
    );
}

#[test]
fn every_dut_mode_builds_forwards_and_tears_down() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    for mode in ["route", "bridge", "nat", "fw"] {
        let base = tempdir(&format!("mode-{mode}"));
        let doc = run_json(&[
            "lab",
            "--dut",
            mode,
            "--only",
            "udp 64B one flow",
            "--only",
            "udp imix",
            "--only",
            "tcp 1 stream",
            "--duration",
            "1",
            "--no-progress",
            "--json",
            "--results-dir",
            base.to_str().unwrap(),
        ]);
        assert_eq!(doc["status"], "complete", "{mode}");
        assert_eq!(doc["labs"][0]["dut_mode"], mode);
        if mode == "fw" {
            assert_eq!(doc["labs"][0]["fw_rules"], 100);
        }
        check_udp(test_named(&doc, "udp 64B one flow"));
        check_udp(test_named(&doc, "udp imix var2"));
        check_tcp(test_named(&doc, "tcp 1 stream"));
        // The document on stdout is the one on disk, and it matches the schema.
        let dir = only_run_dir(&base);
        let on_disk: Value =
            serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(on_disk, doc);
        schema_validate(&on_disk);
        let nd = std::fs::read_to_string(dir.join("intervals.ndjson")).unwrap();
        assert!(nd.lines().count() >= 4, "interval log too short");
        for l in nd.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            assert!(v["sample"]["t_end"].as_f64().is_some());
        }
        assert!(dir.join("agents/dut.log").exists());
        assert_nothing_left(&lab_pids(&doc));
        let _ = std::fs::remove_dir_all(&base);
    }
}

#[test]
fn default_suite_quick_with_self_test_and_ipv6() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let base = tempdir("quick");
    let doc = run_json(&[
        "lab",
        "--quick",
        "--ipv6",
        "--duration",
        "1",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    let names: Vec<&str> = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in [
        "self-test udp 64B var2",
        "tcp 1 stream",
        "tcp 4 streams",
        "udp 64B var2",
        "udp imix var2",
        "udp 1518B var2",
        "udp 64B one flow",
        "tcp 1 stream ipv6",
        "udp 84B var2 ipv6",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert_eq!(doc["labs"][0]["kind"], "back_to_back");
    assert_eq!(doc["labs"][1]["kind"], "dut");
    for t in doc["tests"].as_array().unwrap() {
        match t["params"]["protocol"].as_str() {
            Some("udp") => check_udp(t),
            Some("http") => check_http(t),
            _ => check_tcp(t),
        }
    }
    for want in ["http 1 connection", "https 4 connections"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let v6 = test_named(&doc, "udp 84B var2 ipv6");
    assert_eq!(v6["params"]["ip_version"], 6);
    // var2: 16 flows, every one of them seen at the receiver.
    let flows = v6["directions"][0]["receiver_summary"]["flows"]
        .as_array()
        .unwrap();
    assert_eq!(flows.len(), 16);
    assert!(flows
        .iter()
        .all(|fl| fl["rx_packets"].as_u64().unwrap() > 0));
    assert!(doc["host"]["kernel"].as_str().unwrap().len() > 1);
    assert!(doc["doctor"].as_array().is_some());
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
}

/// The DUT drops 5 % at random (nftables numgen); the tester must report
/// that loss, from sequence numbers, and not call it its own.
#[test]
fn lab_dut_loss_is_reported_as_dut_loss() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("loss");
    let doc = run_json(&[
        "lab",
        "--dut-loss",
        "5",
        "--only",
        "udp 1518B var2",
        // Unpaced, the live engine saturates the DUT and its own loss adds
        // to the 5 %: the packet engine stays below the DUT's capacity.
        "--tx-engine",
        "packet",
        "--duration",
        "2",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    let d = &test_named(&doc, "udp 1518B var2")["directions"][0];
    let loss = f(&d["loss_ratio"]);
    // ~100k+ packets: the binomial spread is under 0.1 percentage points.
    assert!(
        (0.045..=0.055).contains(&loss),
        "loss ratio {loss}, expected 5 %"
    );
    assert_eq!(d["dut_lost"], d["lost"]);
    assert_eq!(d["tester_drops"], 0);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn bad_input_gets_a_clear_error() {
    let _g = crate::util::shared();
    let out = run(&[
        "lab",
        "--only",
        "no such test",
        "--duration",
        "1",
        "--results-dir",
        "/tmp/lr-never",
    ]);
    if is_root() {
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("matches no test"), "{e}");
    }
    let out = run(&["udp", "--target", "198.18.0.2", "--frame-size", "63"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside 64..9000"));
    let out = run(&[
        "udp",
        "--target",
        "2001:2::1",
        "--frame-size",
        "64",
        "--no-results",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("smallest IPv6 frame is 84 B"));
    let out = run(&["lab", "--cpus", "0-x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a CPU list"));
}

#[test]
fn lab_without_root_says_why() {
    let _g = crate::util::shared();
    if !require_root() {
        return;
    }
    // Run as nobody; the binary lives under a path nobody may not read.
    let copy = std::env::temp_dir().join(format!("linerate-nobody-{}", std::process::id()));
    std::fs::copy(bin(), &copy).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy)
        .args(["lab", "--results-dir", "/tmp/lr-nobody"])
        .output();
    let _ = std::fs::remove_file(&copy);
    let Ok(out) = out else {
        crate::util::skip("setpriv not available");
        return;
    };
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("needs root") && e.contains("sudo"), "{e}");
}
