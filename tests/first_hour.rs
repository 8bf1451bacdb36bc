//! Issue 23, the first hour as a user: verdicts that know the asked rate
//! and a sink that sleeps at low rates; Ctrl-C to the whole foreground
//! process group (as a terminal sends it) ends tcp, udp and lab runs
//! interrupted with partial figures and exit 130; a target that is not on
//! the server endpoint fails before the run; 100 % loss fails a test.

use crate::util::*;
use crate::xdplive::{in_ns, Lab};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// gen ─ veth ─ sink: 198.18.0.1 ─ 198.18.0.2.
fn lab(tag: &str) -> Lab {
    Lab::with_prefix("lrf", tag, false)
}

fn udp_json(lab: &Lab, extra: &[&str]) -> Value {
    let (c, s) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let mut args = vec![
        "udp",
        "--client",
        &c,
        "--server",
        &s,
        "--target",
        "198.18.0.2",
        "--no-progress",
        "--no-results",
        "--json",
    ];
    args.extend_from_slice(extra);
    run_json(&args)
}

fn sink_cpu(t: &Value) -> f64 {
    t["cpu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["role"] == "sink")
        .map(|c| f(&c["process_pct"]))
        .expect("the sink's CPU is recorded")
}

/// The verdicts of a paced test: met within noise → "limited by --rate",
/// never the sender; short beyond noise → tester limited, said so.
fn assert_rate_verdict(t: &Value) {
    let d = &t["directions"][0];
    let (sent, asked) = (
        d["tx_packets"].as_u64().unwrap(),
        d["tx_target"].as_u64().unwrap(),
    );
    assert!(asked > 0, "a paced test records what it asked for");
    let short = asked.saturating_sub(sent);
    let beyond_noise = short >= 10 && short as f64 >= asked as f64 * 0.01;
    let b = &t["bottleneck"];
    let verdict = b["verdict"].as_str().unwrap();
    assert_eq!(
        d["tester_limited"], beyond_noise,
        "{sent} of {asked}: {verdict}"
    );
    let lost = d["lost"].as_u64().unwrap();
    if !beyond_noise && (lost < 200 || (lost as f64) < sent as f64 * 0.01) {
        assert_eq!(b["kind"], "rate_limited", "{verdict}");
        assert!(verdict.contains("the asked rate was met"), "{verdict}");
        assert!(!verdict.contains("sender core is the limit"), "{verdict}");
    }
    assert!(!verdict.contains("other than linerate"), "{verdict}");
}

#[test]
fn issue_23_a_met_low_rate_says_so_and_the_sink_sleeps() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let lab = lab("r");
    for rx in ["socket", "auto"] {
        let args = ["-t", "3", "--rate", "1kpps", "--rx-engine", rx];
        let mut doc = udp_json(&lab, &args);
        // A sender held off its core longer than its slack (32 frames,
        // 32 ms at 1 kpps) gives those frames up rather than burst them
        // later, and says it fell short: by design, not a defect. On a VM
        // the hypervisor or a loaded CI host holds a CPU that long now and
        // then (up to 120 ms seen during a lab run here), so a short run is
        // run again, after its verdict has been checked to say it fell
        // short; three in a row fail the test.
        for attempt in 1..3 {
            if doc["tests"][0]["directions"][0]["tester_limited"] != true {
                break;
            }
            assert_rate_verdict(&doc["tests"][0]);
            eprintln!(
                "rx {rx}: the sender fell short (run {attempt}, steal {} ms), running it again",
                doc["tests"][0]["steal_ms"]
            );
            doc = udp_json(&lab, &args);
        }
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{t}");
        let cpu = sink_cpu(t);
        assert!(
            cpu < 10.0,
            "rx {rx}: the sink used {cpu} % of a core at 1 kpps"
        );
        let d = &t["directions"][0];
        assert!(d["rx_packets"].as_u64().unwrap() > 2_900, "{d}");
        // At 1 kpps the sender offers all but the frame still due.
        assert_eq!(d["tester_limited"], false, "{d}");
        assert_rate_verdict(t);
        assert_eq!(t["bottleneck"]["kind"], "rate_limited");
    }
    // 200 kpps: met (or, on a loaded host, honestly short).
    let doc = udp_json(&lab, &["-t", "3", "--rate", "200kpps"]);
    assert_rate_verdict(&doc["tests"][0]);
}

/// Starts linerate in its own process group (as a shell starts a
/// foreground job), waits until its test has logged two intervals in
/// `base`, then signals the whole group with SIGINT the way a terminal's
/// Ctrl-C does, agents included if they shared the group.
fn ctrl_c(args: &[&str], base: &Path) -> (Output, Duration) {
    let child =
        std::os::unix::process::CommandExt::process_group(Command::new(bin()).args(args), 0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let t = Instant::now();
    let logged = || {
        let dir = std::fs::read_dir(base).ok()?.flatten().next()?.path();
        let log = std::fs::read_to_string(dir.join("intervals.ndjson")).ok()?;
        Some(log.lines().count())
    };
    while logged().unwrap_or(0) < 2 {
        assert!(t.elapsed() < Duration::from_secs(40), "no intervals logged");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let rc = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(rc.success());
    let out = child.wait_with_output().unwrap();
    (out, t.elapsed())
}

fn results_of(base: &Path) -> Value {
    let dir = only_run_dir(base);
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// An interrupted run: exit 130, status interrupted, non-zero figures,
/// words that fit.
fn assert_interrupted(out: &Output, took: Duration, doc: &Value, lab_built: bool) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    assert_eq!(doc["status"], "interrupted", "{err}");
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "interrupted", "{t}");
    let d = &t["directions"][0];
    assert!(f(&d["rx_l2_bps"]) > 0.0, "no partial figures: {d}");
    assert!(
        !err.contains("was lost"),
        "an agent died of the signal: {err}"
    );
    assert!(!err.contains("did not report"), "{err}");
    assert_eq!(err.contains("the lab was torn down"), lab_built, "{err}");
    assert!(err.contains("interrupted:"), "{err}");
}

#[test]
fn issue_23_ctrl_c_ends_tcp_and_udp_runs_interrupted_with_figures() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let lab = lab("c");
    let (c, s) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    for kind in ["udp", "tcp"] {
        let base = tempdir(&format!("ctrlc-{kind}"));
        let mut args = vec![
            kind,
            "--client",
            &c,
            "--server",
            &s,
            "--target",
            "198.18.0.2",
            "-t",
            "20",
            "--no-progress",
            "--results-dir",
            base.to_str().unwrap(),
        ];
        if kind == "udp" {
            args.extend(["--rate", "50kpps"]);
        }
        let (out, took) = ctrl_c(&args, &base);
        let doc = results_of(&base);
        assert_interrupted(&out, took, &doc, false);
        if kind == "udp" {
            let d = &doc["tests"][0]["directions"][0];
            assert!(d["tx_packets"].as_u64().unwrap() > 0, "{d}");
            assert!(d["rx_packets"].as_u64().unwrap() > 0, "{d}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}

#[test]
fn issue_23_ctrl_c_ends_a_lab_run_interrupted_with_figures() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("ctrlc-lab");
    let (out, took) = ctrl_c(
        &[
            "lab",
            "--only",
            "tcp 1 stream",
            "--duration",
            "30",
            "--no-progress",
            "--results-dir",
            base.to_str().unwrap(),
        ],
        &base,
    );
    let doc = results_of(&base);
    assert_interrupted(&out, took, &doc, true);
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn issue_23_a_target_not_on_the_server_fails_before_the_run() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let lab = lab("t");
    let c = format!("ns:{}", lab.gen);
    for kind in ["udp", "tcp"] {
        // --server defaults to local, which does not hold 198.18.0.2.
        let t = Instant::now();
        let out = run(&[
            kind,
            "--client",
            &c,
            "--target",
            "198.18.0.2",
            "-t",
            "5",
            "--no-progress",
            "--no-results",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(t.elapsed() < Duration::from_secs(5), "it ran first: {err}");
        let want = "198.18.0.2 is not an address of the server endpoint local (it holds no \
             such address and has no route to it but its default route), so no frame would \
             reach the receiver; did you mean --server ns:";
        assert!(err.contains(want), "{err}");
        // Our sink holds it; another test's namespace may too.
        let hint = err.split("did you mean --server ns:").nth(1).unwrap();
        let ns = hint.split('?').next().unwrap();
        let addrs = in_ns(ns, &["ip", "-j", "addr", "show"]);
        assert!(
            addrs.contains("\"198.18.0.2\""),
            "{ns} does not hold it: {addrs}"
        );
    }
}

#[test]
fn issue_23_a_routed_target_behind_a_dut_still_runs() {
    if !require_root() {
        return;
    }
    let _g = shared();
    // The server is the DUT's far side: it does not hold 198.19.1.2 as
    // the sink does, but routes to it; and the sink itself holds it.
    let lab = Lab::with_prefix("lrf", "d", true);
    let dut = lab.dut.clone().unwrap();
    let c = format!("ns:{}", lab.gen);
    for server in [format!("ns:{}", lab.sink), format!("ns:{dut}")] {
        let out = run(&[
            "udp",
            "--client",
            &c,
            "--server",
            &server,
            "--target",
            "198.19.1.2",
            "-t",
            "1",
            "--rate",
            "1kpps",
            "--no-progress",
            "--no-results",
            "--expect-loss",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("is not an address"), "{server}: {err}");
    }
    // A DUT without the route to the target is refused.
    in_ns(&dut, &["ip", "link", "set", "lrd1", "down"]);
    let out = run(&[
        "udp",
        "--client",
        &c,
        "--server",
        &format!("ns:{dut}"),
        "--target",
        "198.19.1.2",
        "-t",
        "1",
        "--no-progress",
        "--no-results",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "is not an address of the server endpoint ns:{dut}"
        )),
        "{err}"
    );
}

#[test]
fn issue_23_all_frames_lost_fails_the_test_unless_expected() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let lab = lab("l");
    // The sink's namespace drops every UDP datagram before the stack.
    for cmd in [
        vec!["nft", "add", "table", "inet", "lrdrop"],
        vec![
            "nft",
            "add",
            "chain",
            "inet",
            "lrdrop",
            "in",
            "{ type filter hook prerouting priority -300; }",
        ],
        vec![
            "nft", "add", "rule", "inet", "lrdrop", "in", "meta", "l4proto", "udp", "drop",
        ],
    ] {
        in_ns(&lab.sink, &cmd);
    }
    let (c, s) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let args = |extra: &'static [&'static str]| {
        let mut a: Vec<String> = [
            "udp",
            "--client",
            &c,
            "--server",
            &s,
            "--target",
            "198.18.0.2",
            "-t",
            "1",
            "--rate",
            "1kpps",
            "--rx-engine",
            "socket",
            "--no-progress",
            "--no-results",
            "--json",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let out = Command::new(bin()).args(args(&[])).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "failed");
    assert!(
        t["error"]
            .as_str()
            .unwrap()
            .starts_with("100 % loss: no frame arrived"),
        "{t}"
    );
    assert_eq!(t["bottleneck"]["kind"], "nothing_arrived", "{t}");
    let out = Command::new(bin())
        .args(args(&["--expect-loss"]))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
