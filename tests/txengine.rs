//! The packet send engine (issue "A faster send path"): frames linerate
//! builds itself must arrive as the socket engine's datagrams do, with
//! checksums the receiving kernel accepts; auto falls back where the packet
//! socket cannot run.

use crate::util::*;
use serde_json::Value;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn packet_engine_frames_pass_the_lab_with_kernel_checked_checksums() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let dir = tempdir("txengine-packet");
    let doc = run_json(&[
        "lab",
        "--quick",
        "--only",
        "udp 64B var2",
        "--tx-engine",
        "packet",
        // The sink's kernel checks every UDP checksum only when the
        // datagrams reach its stack: the socket receiver, not XDP.
        "--rx-engine",
        "socket",
        "--no-progress",
        "--json",
        "--results-dir",
        dir.to_str().unwrap(),
    ]);
    let tests = doc["tests"].as_array().unwrap();
    let t = tests
        .iter()
        .find(|t| t["name"] == "udp 64B var2")
        .unwrap_or_else(|| panic!("no udp 64B var2 test: {doc}"));
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    let (tx, rx, lost) = (u(&d["tx_packets"]), u(&d["rx_packets"]), u(&d["lost"]));
    assert!(tx > 1000, "the packet engine sent {tx} frames");
    assert!(
        lost as f64 <= tx as f64 * 1e-3,
        "loss {lost} of {tx} through an unloaded lab"
    );
    assert_eq!(rx + lost, tx, "receiver counts must add up to the sender's");
    assert_eq!(d["sender_summary"]["tx_engine"], "packet");
    assert!(d["sender_summary"]["tx_engine_note"].is_null());
    for c in t["cross_checks"].as_array().unwrap() {
        assert_eq!(c["flagged"], false, "{c}");
    }
    // The sink's kernel verified every UDP checksum and found none wrong.
    let sink: Vec<&Value> = t["kernel_counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["role"] == "sink")
        .collect();
    assert!(!sink.is_empty(), "no sink kernel counters");
    for k in &sink {
        assert_eq!(k["udp_delta"]["in_csum_errors"], 0, "{k}");
        assert_eq!(k["udp_delta"]["in_errors"], 0, "{k}");
    }
    assert!(
        sink.iter()
            .any(|k| u(&k["udp_delta"]["in_datagrams"]) >= rx),
        "the sink's kernel delivered fewer datagrams than the receiver counted"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn auto_falls_back_to_sockets_on_loopback_and_says_why() {
    let _g = shared();
    let doc = run_json(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--duration",
        "0.5",
        "--rate",
        "10kpps",
        "--tx-engine",
        "auto",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let s = &t["directions"][0]["sender_summary"];
    assert_eq!(s["tx_engine"], "socket");
    let note = s["tx_engine_note"].as_str().unwrap_or_default();
    assert!(note.contains("packet refused"), "{s}");
    assert!(note.contains("loopback"), "{note}");
}

#[test]
fn packet_engine_refuses_loopback_with_a_reason() {
    let _g = shared();
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--duration",
        "0.5",
        "--tx-engine",
        "packet",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("packet engine cannot run here") && text.contains("loopback"),
        "{text}"
    );
}

#[test]
fn xdp_engine_frames_pass_the_lab_or_it_says_why_not() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let dir = tempdir("txengine-xdp");
    let out = run(&[
        "lab",
        "--quick",
        "--only",
        "udp 64B var2",
        "--tx-engine",
        "xdp",
        "--no-progress",
        "--json",
        "--results-dir",
        dir.to_str().unwrap(),
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let t = test_named(&doc, "udp 64B var2");
    if t["status"] != "ok" {
        // A kernel without AF_XDP: the refusal names the engine and the fix.
        let e = t["error"].as_str().unwrap_or_default();
        assert!(e.contains("xdp engine cannot run here"), "{t}");
        assert!(e.contains("--tx-engine"), "{e}");
        eprintln!("skipped: {e}");
        return;
    }
    let d = &t["directions"][0];
    let (tx, rx, lost) = (u(&d["tx_packets"]), u(&d["rx_packets"]), u(&d["lost"]));
    assert!(tx > 1000, "the xdp engine sent {tx} frames");
    assert_eq!(rx + lost, tx, "receiver counts must add up to the sender's");
    assert_eq!(d["sender_summary"]["tx_engine"], "xdp");
    for c in t["cross_checks"].as_array().unwrap() {
        assert_eq!(c["flagged"], false, "{c}");
    }
    for k in t["kernel_counters"].as_array().unwrap() {
        if k["role"] == "sink" {
            assert_eq!(k["udp_delta"]["in_csum_errors"], 0, "{k}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
