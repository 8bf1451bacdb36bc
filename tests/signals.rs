//! Killing the controller: SIGTERM leaves results marked interrupted;
//! SIGKILL leaves no namespace, interface or agent process behind.

use crate::util::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Children of `pid` (its agents).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out
}

fn netns_of(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|p| p.to_string_lossy().to_string())
}

/// Does any process still hold this network namespace?
fn netns_in_use(ns: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .any(|p| netns_of(p).as_deref() == Some(ns))
}

fn start_lab(base: &std::path::Path) -> (std::process::Child, Vec<u32>) {
    let child = Command::new(bin())
        .args([
            "lab",
            "--only",
            "tcp 1 stream",
            "--duration",
            "30",
            "--no-progress",
            "--results-dir",
        ])
        .arg(base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the DUT lab (three agents) is up and a test is running.
    let t = Instant::now();
    let mut agents = Vec::new();
    while t.elapsed() < Duration::from_secs(20) {
        agents = children(child.id());
        if agents.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(agents.len(), 3, "lab agents did not start");
    std::thread::sleep(Duration::from_secs(2));
    (child, agents)
}

#[test]
fn sigkill_of_the_controller_leaves_nothing_behind() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("sigkill");
    let (mut child, agents) = start_lab(&base);
    let namespaces: Vec<String> = agents.iter().filter_map(|&p| netns_of(p)).collect();
    assert_eq!(namespaces.len(), 3);
    let own = netns_of(std::process::id()).unwrap();
    assert!(
        namespaces.iter().all(|n| *n != own),
        "agents must live in their own namespaces"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_nothing_left(&agents);
    for ns in &namespaces {
        assert!(!netns_in_use(ns), "namespace {ns} still held by a process");
    }
    // The interval log stays readable up to its last complete line.
    let dir = only_run_dir(&base);
    let nd = std::fs::read_to_string(dir.join("intervals.ndjson")).unwrap();
    assert!(
        nd.lines().count() >= 1,
        "no intervals logged before the kill"
    );
    for l in nd.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(doc["status"], "partial");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn sigterm_tears_down_and_marks_results_interrupted() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("sigterm");
    let (mut child, agents) = start_lab(&base);
    let t = Instant::now();
    let rc = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(rc.success());
    let status = child.wait().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "teardown took {:?}",
        t.elapsed()
    );
    assert_eq!(status.code(), Some(130));
    assert_nothing_left(&agents);
    let dir = only_run_dir(&base);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(doc["status"], "interrupted");
    let _ = std::fs::remove_dir_all(&base);
}
