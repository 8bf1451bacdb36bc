//! Issue 21 item 1: the queue count of the lab's veths (`--queues`, and
//! `queues` in a plan's `[lab]`, as a sweep axis). The veths really have
//! the queues (`ip -d link` inside the lab's namespaces while it runs),
//! every NAPI thread is laid out, counts stay exact, and a sweep builds
//! one lab per count with the count recorded in each.

use crate::util::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Children of `pid` (its agents).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `ip -d link show dev` in the network namespace of `pid`, if it has one.
fn link_in(pid: u32, dev: &str) -> Option<String> {
    let out = Command::new("nsenter")
        .args([
            "-t",
            &pid.to_string(),
            "-n",
            "ip",
            "-d",
            "link",
            "show",
            dev,
        ])
        .output()
        .expect("nsenter");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits until the children of `controller` hold every one of `devs` (the
/// DUT lab is built after the back-to-back self-test): each device's
/// `ip -d link` text.
fn lab_links(controller: u32, devs: &[&str], within: Duration) -> Vec<(String, String)> {
    let t0 = Instant::now();
    loop {
        let kids = children(controller);
        let found: Vec<(String, String)> = devs
            .iter()
            .filter_map(|d| {
                kids.iter()
                    .find_map(|&c| link_in(c, d))
                    .map(|t| (d.to_string(), t))
            })
            .collect();
        if found.len() == devs.len() {
            return found;
        }
        assert!(
            t0.elapsed() < within,
            "the lab's {devs:?} did not all appear within {within:?} (found {:?})",
            found.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Packets each rx queue of `dev` (in the namespace of `pid`) took in
/// through its NAPI, from the veth's `ethtool -S`; `None` without ethtool
/// or the device.
fn rx_queue_packets(pid: u32, dev: &str) -> Option<Vec<u64>> {
    let out = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-n", "ethtool", "-S", dev])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut per_queue: Vec<(usize, u64)> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            let q = k.strip_prefix("rx_queue_")?.strip_suffix("_xdp_packets")?;
            Some((q.parse().ok()?, v.trim().parse().ok()?))
        })
        .collect();
    per_queue.sort_unstable();
    Some(per_queue.into_iter().map(|(_, n)| n).collect())
}

/// Every interface of a lab laid out: GRO on and, where a role has CPUs,
/// all its NAPI threads (one per rx queue) pinned and read back.
fn check_laid_out(lab: &Value) {
    if let Some(cores) = lab.get("cores") {
        for n in cores["napi"].as_array().unwrap() {
            assert!(n.get("error").is_none(), "not laid out: {n}");
        }
    }
}

#[test]
fn issue21_lab_veths_get_the_queues_asked_for() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let base = tempdir("lab-queues");
    let child = Command::new(bin())
        .args([
            "lab",
            "--queues",
            "2",
            "--quick",
            "--only",
            "udp 64B var2",
            "--duration",
            "3",
            "--no-progress",
            "--json",
            "--results-dir",
            base.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("linerate lab");
    let links = lab_links(
        child.id(),
        &["gen0", "dut0", "dut1", "sink0"],
        Duration::from_secs(90),
    );
    // The DUT forwards to the sink by flow hash: var2's 16 flows reach both
    // of sink0's rx queues (each with its own NAPI). The sink's namespace
    // is the one holding sink0 now; read it while the test runs.
    let sink = children(child.id())
        .into_iter()
        .find(|&c| link_in(c, "sink0").is_some());
    let t0 = Instant::now();
    let mut spread = None;
    while let Some(pid) = sink {
        match rx_queue_packets(pid, "sink0") {
            Some(q) if q.iter().sum::<u64>() >= 100_000 => {
                spread = Some(q);
                break;
            }
            Some(_) if t0.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Some(q) => panic!("sink0 received too little to judge: {q:?}"),
            None => {
                skip("ethtool -S not readable: the queues' use is not checked");
                break;
            }
        }
    }
    if let Some(q) = &spread {
        assert_eq!(q.len(), 2, "sink0's rx queues: {q:?}");
        assert!(q.iter().all(|&n| n > 0), "one rx queue took nothing: {q:?}");
    }
    let out = child.wait_with_output().expect("linerate lab");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for (dev, text) in &links {
        assert!(
            text.contains("numtxqueues 2 numrxqueues 2"),
            "{dev} has other queues:\n{text}"
        );
    }
    let doc: Value = serde_json::from_slice(&out.stdout).expect("results JSON on stdout");
    assert_eq!(doc["status"], "complete");
    let labs = doc["labs"].as_array().unwrap();
    assert_eq!(labs.len(), 2, "self-test and DUT lab");
    for lab in labs {
        assert_eq!(lab["queues"], 2, "{lab}");
        check_laid_out(lab);
    }
    for t in doc["tests"].as_array().unwrap() {
        assert_eq!(t["status"], "ok", "{}: {}", t["name"], t["error"]);
        let d = &t["directions"][0];
        let (tx, rx, lost) = (
            d["tx_packets"].as_u64().unwrap(),
            d["rx_packets"].as_u64().unwrap(),
            d["lost"].as_u64().unwrap(),
        );
        assert!(rx > 10_000, "{}: {rx} frames arrived", t["name"]);
        // Every frame sent is received or counted lost, none twice.
        assert_eq!(rx + lost, tx, "{}: {d}", t["name"]);
        assert_eq!(d["duplicates"], 0);
        for c in t["cross_checks"].as_array().unwrap() {
            assert_eq!(c["flagged"], false, "{}: {c}", t["name"]);
        }
    }
    // At full speed on a shared machine the tester may drop a few frames
    // itself (its ring overflows); the plan test below checks received =
    // sent at a rate the lab keeps up with.
    test_named(&doc, "self-test udp 64B var2");
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue21_plan_sweeps_the_lab_queues() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let dir = tempdir("sweep-queues");
    let plan = dir.join("queues.toml");
    std::fs::write(
        &plan,
        "name = \"queues\"\n[lab]\ndut = \"route\"\n[[test]]\nname = \"q\"\nkind = \"udp\"\n\
         duration = 2\nrate = \"20kpps\"\nflows = 16\nflow_mode = \"var2\"\n\
         sweep = { queues = [1, 2] }\n",
    )
    .unwrap();
    let res = dir.join("res");
    let out = run(&[
        "run",
        plan.to_str().unwrap(),
        "--no-progress",
        "--results-dir",
        res.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(only_run_dir(&res).join("results.json")).unwrap(),
    )
    .unwrap();
    let labs = r["labs"].as_array().unwrap();
    assert_eq!(labs.len(), 2, "one lab per queue count: {stderr}");
    let tests = r["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2);
    for (t, q) in tests.iter().zip([1u64, 2]) {
        assert_eq!(t["name"], format!("q queues={q}"));
        assert_eq!(t["status"], "ok", "{t}");
        let c = &t["sweep"]["coords"][0];
        assert_eq!(
            (c["key"].as_str(), c["value"].as_str()),
            (Some("queues"), Some(q.to_string().as_str()))
        );
        let lab = &labs[t["params"]["lab"].as_u64().unwrap() as usize];
        assert_eq!(lab["queues"], q, "point queues={q} ran in {lab}");
        check_laid_out(lab);
        // Well below what the DUT forwards: every frame arrives, exactly.
        let d = &t["directions"][0];
        let sent = d["tx_packets"].as_u64().unwrap();
        assert!(
            sent > 20_000,
            "queues={q}: a 2 s test at 20 kpps sent {sent}"
        );
        assert_eq!(d["rx_packets"].as_u64(), Some(sent), "queues={q}: {d}");
        assert_eq!(d["lost"], 0);
    }
    assert_eq!(r["sweeps"][0]["axes"], serde_json::json!(["queues"]));
    assert!(stderr.contains("2 queues per veth"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
