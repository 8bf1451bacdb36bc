//! Multi-core UDP (`--threads`): sender threads own disjoint shares of the
//! flows and of the rate, receivers share one port through SO_REUSEPORT,
//! and every count adds up exactly across threads and intervals. The lab
//! steers receive work (RPS) away from pinned senders.

use crate::util::*;
use serde_json::Value;
use std::collections::BTreeSet;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn sum(per_thread: &Value, key: &str) -> u64 {
    per_thread
        .as_array()
        .unwrap()
        .iter()
        .map(|p| u(&p[key]))
        .sum()
}

/// The direction's counters equal the sum over its threads, its flows and
/// its intervals, and every flow belongs to exactly one sender thread.
fn check_adds_up(d: &Value, flows: u64, threads: usize) {
    let (tx, rx, lost) = (u(&d["tx_packets"]), u(&d["rx_packets"]), u(&d["lost"]));
    assert!(tx > 0, "nothing sent: {d}");
    assert_eq!(rx + lost, tx, "receiver counts must add up to the sender's");
    let st = &d["sender_summary"]["per_thread"];
    let rt = &d["receiver_summary"]["per_thread"];
    assert_eq!(st.as_array().unwrap().len(), threads, "{st}");
    assert_eq!(rt.as_array().unwrap().len(), threads, "{rt}");
    assert_eq!(sum(st, "tx_packets"), tx, "sender threads vs total");
    assert_eq!(sum(rt, "rx_packets"), rx, "receiver threads vs total");
    let mut owned = BTreeSet::new();
    for p in st.as_array().unwrap() {
        let fl = p["flows"].as_array().unwrap();
        assert!(!fl.is_empty(), "a sender thread without flows: {p}");
        for f in fl {
            assert!(owned.insert(u(f)), "flow {f} sent by two threads: {st}");
        }
        assert!(p["cpu_s"].as_f64().unwrap() > 0.0, "{p}");
    }
    assert_eq!(owned, (0..flows).collect::<BTreeSet<u64>>());
    let flows_tx: u64 = d["sender_summary"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| u(&f["tx_packets"]))
        .sum();
    assert_eq!(flows_tx, tx, "per-flow counts vs total");
    let iv = d["intervals"].as_array().unwrap();
    let side = |who: &str, key: &str| -> u64 {
        iv.iter()
            .filter(|i| !i[who].is_null())
            .map(|i| u(&i[who][key]))
            .sum()
    };
    assert_eq!(
        side("sender", "tx_packets"),
        tx,
        "sender intervals vs total"
    );
    assert_eq!(
        side("receiver", "rx_packets"),
        rx,
        "receiver intervals vs total"
    );
    assert_eq!(side("receiver", "lost"), lost, "interval loss vs total");
}

#[test]
fn two_threads_on_loopback_split_flows_and_add_up() {
    let _g = serial();
    let doc = run_json(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--duration",
        "1",
        "--rate",
        "20kpps",
        "--flow-mode",
        "ports",
        "--flows",
        "5",
        "--threads",
        "2",
        // Receiver threads are the socket receiver's (SO_REUSEPORT).
        "--rx-engine",
        "socket",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    check_adds_up(d, 5, 2);
    // Flows split 3 + 2, and each thread paces its flows' share of the
    // rate: every flow asked for the same rate (a thread that fell short
    // under load, e.g. sharing its core, still sends its own flows evenly).
    let st = d["sender_summary"]["per_thread"].as_array().unwrap();
    let sizes: Vec<usize> = st
        .iter()
        .map(|p| p["flows"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![3, 2], "{st:?}");
    let flows = d["sender_summary"]["flows"].as_array().unwrap();
    for p in st {
        let mine: Vec<u64> = flows
            .iter()
            .filter(|f| p["flows"].as_array().unwrap().contains(&f["id"]))
            .map(|f| u(&f["tx_packets"]))
            .collect();
        let (lo, hi) = (mine.iter().min().unwrap(), mine.iter().max().unwrap());
        // A thread sends whole batches (64 here) to the group of flows
        // furthest behind, so its flows never drift more than a batch apart.
        assert!(hi - lo <= 64, "one thread's flows sent unevenly: {mine:?}");
    }
    // The target is the whole job's, not one thread's.
    let target = u(&d["tx_target"]);
    assert!(
        (19_000..=21_000).contains(&target),
        "target {target} for 20 kpps over 1 s"
    );
}

#[test]
fn lab_with_two_threads_adds_up_and_cross_checks() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let dir = tempdir("threads-lab");
    let doc = run_json(&[
        "lab",
        "--quick",
        "--only",
        "udp 64B var2",
        "--threads",
        "2",
        // Receiver threads are the socket receiver's (SO_REUSEPORT).
        "--rx-engine",
        "socket",
        "--no-progress",
        "--json",
        "--results-dir",
        dir.to_str().unwrap(),
    ]);
    let t = test_named(&doc, "udp 64B var2");
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    check_adds_up(&t["directions"][0], 16, 2);
    for c in t["cross_checks"].as_array().unwrap() {
        assert_eq!(c["flagged"], false, "{c}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lab_lays_out_cores_away_from_pinned_senders() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: a core layout needs at least 2 CPUs, this machine has {cpus}");
        return;
    }
    let dir = tempdir("threads-cores");
    let doc = run_json(&[
        "lab",
        "--quick",
        "--only",
        "udp 64B var2",
        "--cpus",
        "0,1",
        "--threads",
        "1",
        // Receiver threads are the socket receiver's (SO_REUSEPORT).
        "--rx-engine",
        "socket",
        "--no-progress",
        "--json",
        "--results-dir",
        dir.to_str().unwrap(),
    ]);
    let mut tester_receive = None;
    for lab in doc["labs"].as_array().unwrap() {
        let c = &lab["cores"];
        assert_eq!(c["generator"], serde_json::json!([0]), "{lab}");
        for n in c["napi"].as_array().unwrap() {
            assert!(n.get("error").is_none(), "laid out: {n}");
        }
        let ifaces: Vec<&str> = c["napi"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["dev"].as_str().unwrap())
            .collect();
        assert!(ifaces.contains(&"gen0") && ifaces.contains(&"sink0"), "{c}");
        if lab["kind"] == "dut" {
            // Two cores: the DUT gets the other one, the tester's receive
            // work stays beside the generator.
            assert_eq!(c["dut"], serde_json::json!([1]), "{c}");
            assert_eq!(c["tester_receive"], serde_json::json!([0]), "{c}");
            assert!(ifaces.contains(&"dut0") && ifaces.contains(&"dut1"), "{c}");
            tester_receive = Some(0);
            assert!(
                lab["steering"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("RPS left off"),
                "{lab}"
            );
        } else {
            // Back to back: unthreaded NAPI, the stack's work steered by RPS.
            assert_eq!(c["tester_receive"], serde_json::json!([]), "{c}");
            let s = lab["steering"].as_str().unwrap_or_default();
            assert!(s.contains("steered to CPUs [1]"), "{lab}");
        }
        assert!(
            c["summary"]
                .as_str()
                .unwrap()
                .starts_with("generator on CPU0"),
            "{c}"
        );
    }
    let t = test_named(&doc, "udp 64B var2");
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    assert_eq!(d["sender_summary"]["per_thread"][0]["cpu"], 0, "{d}");
    // The socket receiver busy-polls: beside the paced senders it would
    // delay their wake-ups, so it keeps the CPU after theirs.
    assert_eq!(d["receiver_summary"]["per_thread"][0]["cpu"], 1, "{d}");
    assert_eq!(tester_receive, Some(0), "a DUT lab");
    // Whatever the shared core drops is told apart: drops at the sink's
    // backlog and socket are the tester's, and the DUT's own counters agree
    // with the DUT loss the sequence numbers leave.
    assert_eq!(
        u(&d["tester_drops"]) + u(&d["dut_lost"]),
        u(&d["lost"]),
        "{d}"
    );
    for c in t["cross_checks"].as_array().unwrap() {
        assert_eq!(c["flagged"], false, "{c}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
