//! iperf3 interop (issue 20), in two namespaces joined by a veth pair:
//! linerate's client against a stock `iperf3 -s`, and stock `iperf3 -c -J`
//! against `linerate serve --iperf3`. Both ends' figures must agree; a busy
//! server, a refused port and a server killed mid-test give clear errors.

use crate::util::{bin, ip, require_root, serial, shared, tempdir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = "198.18.120.2";

struct Ns {
    client: String,
    server: String,
    children: Vec<Child>,
}

impl Drop for Ns {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in [&self.client, &self.server] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// iperf3 from the distribution, installed like the other interop tests'
/// peers; None (skip, said) when it cannot be had.
pub(crate) fn have_iperf3() -> bool {
    if Command::new("iperf3").arg("--version").output().is_ok() {
        return true;
    }
    let ok = Command::new("apt-get")
        .args(["install", "-y", "-qq", "iperf3"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: iperf3 is not installed and apt-get could not install it");
    }
    ok
}

impl Ns {
    fn new(tag: &str) -> Self {
        let p = format!("hip{}{tag}", std::process::id());
        let ns = Ns {
            client: format!("{p}-c"),
            server: format!("{p}-s"),
            children: vec![],
        };
        for n in [&ns.client, &ns.server] {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", "hipc0", "netns", &ns.client, "type", "veth", "peer", "name", "hips0",
            "netns", &ns.server,
        ]);
        for (n, dev, addr) in [
            (&ns.client, "hipc0", "198.18.120.1/24"),
            (&ns.server, "hips0", SERVER),
        ] {
            let cidr = if addr.contains('/') {
                addr.to_string()
            } else {
                format!("{addr}/24")
            };
            ip(&["-n", n, "addr", "add", &cidr, "dev", dev]);
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        ns
    }

    fn exec(&self, ns: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// Starts a command in a namespace (ip netns exec execs it: the pid is
    /// the command's), stdout to `out` if given.
    fn spawn(&mut self, ns: &str, args: &[&str], out: Option<&Path>) -> u32 {
        let stdout = match out {
            Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
            None => Stdio::null(),
        };
        let c = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning in a namespace");
        let pid = c.id();
        self.children.push(c);
        pid
    }

    /// Starts `linerate serve --iperf3 ARGS` in the server namespace.
    fn serve_iperf3(&mut self, args: &[&str]) -> u32 {
        let mut v = vec![bin(), "serve", "--iperf3"];
        v.extend_from_slice(args);
        self.spawn(&self.server.clone(), &v, None)
    }

    /// Waits until something listens on the server's TCP `port`.
    fn wait_listening(&self, port: u16) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            let out = self.exec(
                &self.server.clone(),
                &["ss", "-Htln", &format!("sport = :{port}")],
            );
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nothing listens on port {port} in {}", self.server);
    }

    /// Waits for the child with `pid` to end (after a one-off iperf3 -s -1).
    fn wait_child(&mut self, pid: u32) {
        if let Some(c) = self.children.iter_mut().find(|c| c.id() == pid) {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(20) {
                if c.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            panic!("pid {pid} did not end");
        }
    }

    /// `linerate ARGS --json` in the client namespace.
    fn linerate(&self, args: &[&str]) -> Output {
        let mut v = vec![bin()];
        v.extend_from_slice(args);
        self.exec(&self.client.clone(), &v)
    }
}

pub(crate) fn json(out: &Output, what: &str) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: no JSON on stdout ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub(crate) fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub(crate) fn close(a: f64, b: f64, tol: f64, what: &str) {
    let d = (a - b).abs() / a.abs().max(b.abs()).max(1.0);
    assert!(d <= tol, "{what}: {a} vs {b} differ by {:.2} %", d * 100.0);
}

/// The direction named `name` of the run's only test.
pub(crate) fn dir<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["tests"][0]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["direction"] == name)
        .unwrap_or_else(|| panic!("no direction {name} in {}", doc["tests"][0]))
}

#[test]
fn linerate_client_against_stock_iperf3_server() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = serial();
    let mut ns = Ns::new("a");
    let tmp = tempdir("iperf3-client");
    let target = format!("iperf3://{SERVER}");
    let cases: &[(&str, &[&str])] = &[
        ("tcp1", &["tcp", "-P", "1"]),
        ("tcp4", &["tcp", "-P", "4"]),
        ("reverse", &["tcp", "-P", "2", "--reverse"]),
        ("bidir", &["tcp", "--bidir"]),
        // From this namespace, the client an agent in the client's.
        ("tcp2-ns", &["tcp", "-P", "2"]),
        (
            "udp",
            &[
                "udp",
                "--frame-size",
                "1446",
                "--rate",
                "50M",
                "--flows",
                "2",
            ],
        ),
    ];
    for (name, args) in cases {
        let server_json = tmp.join(format!("{name}.json"));
        let pid = ns.spawn(
            &ns.server.clone(),
            &["iperf3", "-s", "-1", "-J", "-B", SERVER],
            Some(&server_json),
        );
        ns.wait_listening(5201);
        let mut v: Vec<&str> = args.to_vec();
        v.extend(["--server", &target, "-t", "2", "--json", "--no-results"]);
        let client_ns = format!("ns:{}", ns.client);
        let out = if name.ends_with("-ns") {
            v.extend(["--client", &client_ns]);
            Command::new(bin())
                .args(&v)
                .output()
                .expect("linerate runs")
        } else {
            ns.linerate(&v)
        };
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc = json(&out, name);
        ns.wait_child(pid);
        let srv: Value = serde_json::from_str(&std::fs::read_to_string(&server_json).unwrap())
            .unwrap_or_else(|e| panic!("{name}: iperf3 -s -J output: {e}"));
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{name}: {t}");
        assert_eq!(t["far_end"]["role"], "server", "{name}");
        // This end's host as for every test: CPU, kernel counters of the
        // client's interface, the bottleneck verdict.
        assert!(t["bottleneck"].is_object(), "{name}: verdict: {t}");
        let ifaces: Vec<&str> = t["kernel_counters"]
            .as_array()
            .map(|v| v.iter().filter_map(|k| k["interface"].as_str()).collect())
            .unwrap_or_default();
        assert!(
            ifaces.contains(&"hipc0"),
            "{name}: kernel counters of {ifaces:?}"
        );
        for c in t["cross_checks"].as_array().unwrap() {
            // In --bidir a stock server stops reading at TEST_END, so what
            // was still in its receive buffer and in flight is missing
            // from its count: on a loaded host (CI with the fuzzers beside
            // it) that was 1.6 % and 2.6 % of what linerate wrote. The
            // cross-check does not yet subtract the bytes still queued at
            // the stop; until it does, this one may differ by 5 % there.
            let far_end_count = c["what"]
                .as_str()
                .is_some_and(|w| w.contains("received (iperf3 server"));
            if *name == "bidir" && far_end_count {
                assert!(
                    c["difference_ratio"].as_f64().unwrap_or(1.0) < 0.05,
                    "{name}: {c}"
                );
                continue;
            }
            assert_eq!(c["flagged"], false, "{name}: {c}");
        }
        let end = &srv["end"];
        match *name {
            "udp" => {
                let d = dir(&doc, "client_to_server");
                // The server's own report (-J) and what linerate sent and stored.
                let sent = num(&d["tx_packets"]);
                close(
                    sent,
                    num(&end["sum"]["packets"]),
                    0.05,
                    "udp datagrams sent vs server's count",
                );
                let kernel = t["cross_checks"].as_array().unwrap().iter().any(|c| {
                    c["what"]
                        .as_str()
                        .unwrap_or("")
                        .contains("packets sent by its interfaces")
                });
                assert!(kernel, "udp: no kernel cross-check: {}", t["cross_checks"]);
                let server_loss = num(&end["sum"]["lost_percent"]);
                let ours = num(&d["loss_ratio"]) * 100.0;
                assert!(
                    (server_loss - ours).abs() <= 0.1,
                    "udp loss {ours} % vs server's {server_loss} %"
                );
                close(
                    num(&t["far_end"]["loss_pct"]),
                    server_loss,
                    0.001,
                    "far_end loss_pct",
                );
                assert!(
                    sent > 2.0 * 4000.0 * 0.5,
                    "udp: only {sent} datagrams at 50 Mbit/s"
                );
            }
            "reverse" => {
                let d = dir(&doc, "server_to_client");
                let got = num(&d["receiver_summary"]["rx_bytes"]);
                close(
                    got,
                    num(&end["sum_sent"]["bytes"]),
                    0.05,
                    "reverse: received vs server sent",
                );
                assert!(
                    d["intervals"].as_array().unwrap().len() >= 2,
                    "{name}: intervals"
                );
            }
            "bidir" => {
                let up = dir(&doc, "client_to_server");
                let down = dir(&doc, "server_to_client");
                close(
                    num(&up["sender_summary"]["tx_bytes"]),
                    num(&end["sum_received"]["bytes"]),
                    0.05,
                    "bidir up",
                );
                close(
                    num(&down["receiver_summary"]["rx_bytes"]),
                    num(&end["sum_sent_bidir_reverse"]["bytes"]),
                    0.05,
                    "bidir down",
                );
            }
            _ => {
                let d = dir(&doc, "client_to_server");
                let sent = num(&d["sender_summary"]["tx_bytes"]);
                close(
                    sent,
                    num(&end["sum_received"]["bytes"]),
                    0.05,
                    "sent vs server received",
                );
                // Goodput: the server's bytes over the 2 s this end sent,
                // not over the server's clock, which runs on while this
                // end waits for it to read the last bytes.
                let secs = num(&d["duration_s"]);
                assert!(
                    (secs - 2.0).abs() < 0.05,
                    "{name}: goodput over {secs} s, not the 2 s sent"
                );
                close(
                    num(&d["rx_l2_bps"]),
                    num(&end["sum_received"]["bytes"]) * 8.0 / secs,
                    0.01,
                    "goodput",
                );
                // The stored far-end figures are the server's.
                close(
                    num(&t["far_end"]["received_bytes"]),
                    num(&end["sum_received"]["bytes"]),
                    0.01,
                    "far_end",
                );
                let streams = d["sender_summary"]["streams"].as_array().unwrap().len();
                let want = match *name {
                    "tcp4" => 4,
                    "tcp2-ns" => 2,
                    _ => 1,
                };
                assert_eq!(streams, want, "{name}");
                // This end's own measurement: intervals with TCP_INFO.
                let iv = d["intervals"].as_array().unwrap();
                assert!(iv.len() >= 2, "{name}: {} intervals", iv.len());
                assert!(
                    iv[1]["sender"]["streams"][0]["rtt_us"]
                        .as_u64()
                        .unwrap_or(0)
                        > 0,
                    "{name}: TCP_INFO"
                );
                // The summary keeps each stream's last TCP_INFO, so the
                // table shows RTT and cwnd as for linerate's own far end.
                for st in d["sender_summary"]["streams"].as_array().unwrap() {
                    assert!(
                        st["rtt_us"].as_u64().unwrap_or(0) > 0
                            && st["cwnd"].as_u64().unwrap_or(0) > 0,
                        "{name}: summary without TCP_INFO: {st}"
                    );
                }
            }
        }
    }
}

/// The newest run directory under `base` that is not in `seen`.
fn new_run(base: &Path, seen: &mut Vec<PathBuf>) -> Value {
    let t0 = Instant::now();
    loop {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(base)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        dirs.retain(|d| !seen.contains(d) && d.join("results.json").is_file());
        if let Some(d) = dirs.pop() {
            let doc: Value =
                serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap())
                    .unwrap();
            if doc["status"] != "partial" || t0.elapsed() > Duration::from_secs(5) {
                seen.push(d);
                return doc;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no new run directory in {}",
            base.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn stock_iperf3_client_against_linerate_server() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = serial();
    let mut ns = Ns::new("b");
    let base = tempdir("iperf3-serve");
    let listen = format!("{SERVER}:5201");
    let base_s = base.display().to_string();
    // Limits an anonymous client must keep (issue 34): every case below
    // fits them, the refusals after the cases do not.
    ns.serve_iperf3(&[
        "--listen",
        &listen,
        "--results-dir",
        &base_s,
        "--max-test-time",
        "4",
        "--max-udp-send-rate",
        "40M",
    ]);
    ns.wait_listening(5201);
    let mut seen = vec![];
    let cases: &[(&str, &[&str])] = &[
        ("tcp1", &[]),
        ("tcp4", &["-P", "4"]),
        ("reverse", &["-R", "-P", "2"]),
        ("bidir", &["--bidir"]),
        ("udp", &["-u", "-b", "50M", "-l", "1400"]),
        ("udp-reverse", &["-u", "-b", "30M", "-l", "1200", "-R"]),
    ];
    for (name, args) in cases {
        let mut v = vec!["iperf3", "-c", SERVER, "-t", "2", "-J"];
        v.extend_from_slice(args);
        let out = ns.exec(&ns.client.clone(), &v);
        let cli = json(&out, name);
        assert!(
            cli.get("error").is_none(),
            "{name}: iperf3 -c says {}",
            cli["error"]
        );
        let doc = new_run(&base, &mut seen);
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{name}: {t}");
        assert_eq!(t["far_end"]["role"], "client", "{name}");
        let end = &cli["end"];
        match *name {
            "udp" => {
                let d = dir(&doc, "client_to_server");
                let sent = num(&end["sum"]["packets"]);
                let ours = num(&d["rx_packets"]) + num(&d["lost"]);
                close(sent, ours, 0.05, "udp: client sent vs received + lost here");
                let client_loss = num(&end["sum"]["lost_percent"]);
                assert!(
                    (client_loss - num(&d["loss_ratio"]) * 100.0).abs() <= 0.1,
                    "udp loss"
                );
            }
            "udp-reverse" => {
                let d = dir(&doc, "server_to_client");
                let sent = num(&d["tx_packets"]);
                close(
                    sent,
                    num(&end["sum"]["packets"]),
                    0.05,
                    "udp -R: sent here vs client's count",
                );
                let far_loss = num(&t["far_end"]["loss_pct"]);
                assert!(
                    (far_loss - num(&end["sum"]["lost_percent"])).abs() <= 0.1,
                    "udp -R loss"
                );
            }
            "reverse" => {
                let d = dir(&doc, "server_to_client");
                close(
                    num(&d["sender_summary"]["tx_bytes"]),
                    num(&end["sum_received"]["bytes"]),
                    0.05,
                    "-R",
                );
            }
            "bidir" => {
                let up = dir(&doc, "client_to_server");
                let down = dir(&doc, "server_to_client");
                close(
                    num(&up["receiver_summary"]["rx_bytes"]),
                    num(&end["sum_sent"]["bytes"]),
                    0.05,
                    "bidir up",
                );
                close(
                    num(&down["sender_summary"]["tx_bytes"]),
                    num(&end["sum_received_bidir_reverse"]["bytes"]),
                    0.05,
                    "bidir down",
                );
            }
            _ => {
                let d = dir(&doc, "client_to_server");
                close(
                    num(&d["receiver_summary"]["rx_bytes"]),
                    num(&end["sum_sent"]["bytes"]),
                    0.05,
                    name,
                );
                // iperf3's receiver figure is linerate's, from the exchange.
                close(
                    num(&d["receiver_summary"]["rx_bytes"]),
                    num(&end["sum_received"]["bytes"]),
                    0.01,
                    name,
                );
                let n = cli["start"]["test_start"]["num_streams"].as_u64().unwrap();
                assert_eq!(
                    d["receiver_summary"]["streams"].as_array().unwrap().len() as u64,
                    n
                );
            }
        }
    }
    // Over the limits: refused with iperf3's own errors, nothing recorded,
    // and the server goes on serving.
    let refusals: &[(&[&str], &str)] = &[
        (&["-t", "5"], "duration too long"),
        (&["-t", "2", "-O", "3"], "duration too long"),
        (
            &["-t", "2", "-u", "-R", "-b", "50M"],
            "larger than server limit",
        ),
        (
            &["-t", "2", "-u", "--bidir", "-P", "2", "-b", "25M"],
            "larger than server limit",
        ),
        (
            &["-t", "2", "-u", "-R", "-b", "0"],
            "larger than server limit",
        ),
    ];
    for (args, says) in refusals {
        let mut v = vec!["iperf3", "-c", SERVER, "-J"];
        v.extend_from_slice(args);
        let out = ns.exec(&ns.client.clone(), &v);
        let cli = json(&out, "a refused test");
        let err = cli["error"].as_str().unwrap_or_default();
        assert!(err.contains(says), "{args:?}: iperf3 -c says {err:?}");
    }
    let out = ns.exec(
        &ns.client.clone(),
        &["iperf3", "-c", SERVER, "-t", "1", "-J"],
    );
    assert!(json(&out, "after refusals").get("error").is_none());
    new_run(&base, &mut seen);
    let runs = std::fs::read_dir(&base).unwrap().count();
    assert_eq!(runs, seen.len(), "refused tests leave no results directory");
}

/// Stock servers that refuse a test for their own reasons: a rate over
/// `--server-bitrate-limit` (iperf3 error 27) and authentication required
/// (RSA keys and an authorized users file, error 142). Each is named, with
/// what to do, and exits 3.
#[test]
fn stock_server_refusals_are_named() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = shared();
    let mut ns = Ns::new("r");
    let target = format!("iperf3://{SERVER}");
    let srv = ns.spawn(
        &ns.server.clone(),
        &["iperf3", "-s", "-B", SERVER, "--server-bitrate-limit", "5M"],
        None,
    );
    ns.wait_listening(5201);
    let out = ns.linerate(&[
        "tcp",
        "--server",
        &target,
        "-t",
        "2",
        "--rate",
        "50M",
        "--no-results",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // iperf3 3.12 closes the connection without an error number here.
    assert!(
        (err.contains("iperf3 error 27") || err.contains("closed the control connection"))
            && err.contains("server-bitrate-limit"),
        "{err}"
    );
    let _ = Command::new("kill").arg(srv.to_string()).status();
    ns.wait_child(srv);

    // Authentication: only when this iperf3 was built with it (OpenSSL).
    let tmp = tempdir("iperf3-auth");
    let key = tmp.join("private.pem");
    let users = tmp.join("users.csv");
    let made = Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipping the authentication case: openssl could not make a key");
        return;
    }
    // user "lr", password "pw": sha256 of "{lr}pw", as iperf3 expects.
    let hash = Command::new("sh")
        .args(["-c", "printf '{lr}pw' | sha256sum | cut -d' ' -f1"])
        .output()
        .expect("sha256sum");
    std::fs::write(
        &users,
        format!("lr,{}\n", String::from_utf8_lossy(&hash.stdout).trim()),
    )
    .unwrap();
    let srv = ns.spawn(
        &ns.server.clone(),
        &[
            "iperf3",
            "-s",
            "-B",
            SERVER,
            "--rsa-private-key-path",
            key.to_str().unwrap(),
            "--authorized-users-path",
            users.to_str().unwrap(),
        ],
        None,
    );
    ns.wait_listening(5201);
    let out = ns.linerate(&["tcp", "--server", &target, "-t", "2", "--no-results"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("requires authentication") && err.contains("does not support"),
        "{err}"
    );
    let _ = Command::new("kill").arg(srv.to_string()).status();
}

#[test]
fn busy_refused_and_killed_servers_give_clear_errors() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = shared();
    let mut ns = Ns::new("c");
    let target = format!("iperf3://{SERVER}");
    // Nothing listens: refused, with what to do.
    let out = ns.linerate(&[
        "tcp",
        "--server",
        &format!("{target}:5999"),
        "-t",
        "1",
        "--no-results",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("connection refused") && err.contains("iperf3 -s"),
        "{err}"
    );

    // A stock server busy with another client answers ACCESS_DENIED.
    let srv = ns.spawn(&ns.server.clone(), &["iperf3", "-s", "-B", SERVER], None);
    ns.wait_listening(5201);
    ns.spawn(
        &ns.client.clone(),
        &["iperf3", "-c", SERVER, "-t", "9"],
        None,
    );
    std::thread::sleep(Duration::from_millis(1500));
    // linerate asks a busy server again for 3 s, then says so.
    let out = ns.linerate(&["tcp", "--server", &target, "-t", "1", "--no-results"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("busy")
            && err.contains("ACCESS_DENIED")
            && err.contains("asked again"),
        "{err}"
    );

    // linerate's server answers a second client the way iperf3 does.
    let lr = ns.serve_iperf3(&["--port", "5301", "--no-results"]);
    ns.wait_listening(5301);
    ns.spawn(
        &ns.client.clone(),
        &["iperf3", "-c", SERVER, "-p", "5301", "-t", "5"],
        None,
    );
    std::thread::sleep(Duration::from_millis(1500));
    let out = ns.exec(
        &ns.client.clone(),
        &["iperf3", "-c", SERVER, "-p", "5301", "-t", "1"],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success() && said.contains("busy"), "{said}");
    let _ = Command::new("kill")
        .args(["-INT", &lr.to_string()])
        .status();

    // A server killed mid-test: a clear error, this end's figures kept.
    std::thread::sleep(Duration::from_secs(5));
    let dir = tempdir("iperf3-killed");
    let dir_s = dir.display().to_string();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        let _ = Command::new("kill")
            .args(["-KILL", &srv.to_string()])
            .status();
    });
    let t0 = Instant::now();
    let out = ns.linerate(&[
        "tcp",
        "--server",
        &target,
        "-t",
        "8",
        "--results-dir",
        &dir_s,
    ]);
    killer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("closed the control connection") && err.contains("kept"),
        "{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t0.elapsed()
    );
    let run = crate::util::only_run_dir(&dir);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    // The run went through its one test; the test failed, with its
    // figures up to the server's end kept (and exit status 3).
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(doc["status"], "complete");
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "failed");
    assert!(
        t["error"]
            .as_str()
            .unwrap_or("")
            .contains("closed the control connection"),
        "{t}"
    );
    assert!(
        num(&t["directions"][0]["sender_summary"]["tx_bytes"]) > 0.0,
        "partial figures kept: {t}"
    );
}

/// A plan names a stock iperf3 server as a host (`iperf3 = "..."`) and
/// runs tcp and udp tests against it from a namespace host; a plan that
/// sends from it, or runs a ramp against it, is refused at its line.
#[test]
fn plan_files_name_iperf3_servers() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = crate::util::one_core();
    let mut ns = Ns::new("p");
    let tmp = tempdir("iperf3-plan-files");
    ns.spawn(&ns.server.clone(), &["iperf3", "-s", "-B", SERVER], None);
    ns.wait_listening(5201);
    let plan = tmp.join("plan.toml");
    let hosts = format!(
        "name = \"iperf3-plan\"\n\
         [hosts.client]\nnetns = \"{}\"\n\
         [hosts.nas]\niperf3 = \"{SERVER}:5201\"\n",
        ns.client
    );
    std::fs::write(
        &plan,
        format!(
            "{hosts}\
             [[test]]\nname = \"up\"\nkind = \"tcp\"\nfrom = \"client\"\nto = \"nas\"\nstreams = 2\nduration = 2\n\
             [[test]]\nname = \"udp\"\nkind = \"udp\"\nfrom = \"client\"\nto = \"nas\"\nframe_size = 1000\nrate = \"20M\"\nduration = 2\n"
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["run", plan.to_str().unwrap(), "--json", "--no-results"])
        .output()
        .expect("linerate runs");
    let doc = json(&out, "plan");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2, "{doc}");
    for t in tests {
        assert_eq!(t["status"], "ok", "{t}");
        assert_eq!(t["far_end"]["role"], "server", "{t}");
        assert!(t["bottleneck"].is_object(), "{t}");
    }
    let up = &tests[0]["directions"][0];
    assert_eq!(up["receiver"], "iperf3 server (far end)", "{up}");
    close(
        num(&up["sender_summary"]["tx_bytes"]),
        num(&tests[0]["far_end"]["received_bytes"]),
        0.05,
        "plan tcp: sent vs the server's count",
    );
    assert!(num(&tests[1]["directions"][0]["rx_packets"]) > 2.0 * 2000.0 * 0.5);

    // The server cannot send, nor take a ramp.
    for (bad, want) in [
        (
            "kind = \"tcp\"\nfrom = \"nas\"\nto = \"client\"\n",
            "is an iperf3 server",
        ),
        (
            "kind = \"ramp\"\nfrom = \"client\"\nto = \"nas\"\n",
            "only tcp and udp",
        ),
    ] {
        std::fs::write(&plan, format!("{hosts}[[test]]\n{bad}")).unwrap();
        let out = Command::new(bin())
            .args(["run", plan.to_str().unwrap(), "--no-results"])
            .output()
            .expect("linerate runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want) && err.contains("plan.toml:"), "{err}");
    }
}

/// The client's intervals reach the controller while the test runs, not at
/// its end: with `--interval 1`, the first per-second line is printed well
/// before linerate exits, and it shows data moving.
#[test]
fn iperf3_client_intervals_arrive_while_the_test_runs() {
    use std::io::BufRead;
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = serial();
    let mut ns = Ns::new("l");
    ns.spawn(&ns.server.clone(), &["iperf3", "-s", "-B", SERVER], None);
    ns.wait_listening(5201);
    let target = format!("iperf3://{SERVER}");
    let t0 = Instant::now();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.client])
        .arg(bin())
        .args([
            "tcp",
            "--server",
            &target,
            "-t",
            "4",
            "--interval",
            "1",
            "--no-results",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("linerate runs");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines: Vec<(Duration, String)> = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.expect("a line of output");
        lines.push((t0.elapsed(), line));
    }
    let status = child.wait().expect("linerate ends");
    let ended = t0.elapsed();
    assert!(status.success(), "{lines:?}");
    let per_second: Vec<&(Duration, String)> =
        lines.iter().filter(|(_, l)| l.starts_with('[')).collect();
    assert!(per_second.len() >= 3, "interval lines: {lines:?}");
    let (first_at, first) = per_second[0];
    assert!(
        ended.saturating_sub(*first_at) >= Duration::from_millis(1500),
        "the first interval line came {first_at:?} after the start and the run ended at {ended:?}: {lines:?}"
    );
    // This end's figures only, as iperf3 prints them: what it sent.
    assert!(
        first.contains("sent") && first.contains("bit/s") && !first.contains(" -"),
        "{first}"
    );
}

/// Issue 34, hole 2: the server gives a UDP stream only to the test's own
/// client. A stranger (another address) that keeps sending iperf3's hello
/// to the port during a reverse UDP test gets nothing, and the client's
/// test runs as usual.
#[test]
fn udp_hellos_from_strangers_get_no_stream() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _g = shared();
    let mut ns = Ns::new("u");
    let stranger = "198.18.120.3";
    ip(&[
        "-n",
        &ns.client,
        "addr",
        "add",
        &format!("{stranger}/24"),
        "dev",
        "hipc0",
    ]);
    let listen = format!("{SERVER}:5209");
    ns.serve_iperf3(&["--listen", &listen, "--no-results"]);
    ns.wait_listening(5209);
    // The stranger says hello every 5 ms for 5 s and counts what comes back.
    let script = format!(
        "import socket,time\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.bind(('{stranger}',0)); s.setblocking(False)\n\
         got=0; end=time.time()+5\n\
         while time.time()<end:\n\
         \x20 s.sendto(b'9876',('{SERVER}',5209))\n\
         \x20 time.sleep(0.005)\n\
         \x20 try:\n\
         \x20\x20 while True: got+=len(s.recv(65536))\n\
         \x20 except BlockingIOError: pass\n\
         print(got)\n"
    );
    let client = ns.client.clone();
    let stranger_run = std::thread::spawn(move || {
        Command::new("ip")
            .args(["netns", "exec", &client, "python3", "-c", &script])
            .output()
            .expect("python3")
    });
    std::thread::sleep(Duration::from_millis(300));
    let out = ns.exec(
        &ns.client.clone(),
        &[
            "iperf3", "-c", SERVER, "-p", "5209", "-u", "-R", "-b", "20M", "-t", "3", "-J",
        ],
    );
    let cli = json(&out, "udp reverse beside a stranger");
    assert!(cli.get("error").is_none(), "{cli}");
    let got = stranger_run.join().unwrap();
    let got = String::from_utf8_lossy(&got.stdout).trim().to_string();
    assert_eq!(got, "0", "the stranger was sent {got} bytes");
    let rx = num(&cli["end"]["sum"]["packets"]);
    assert!(
        rx > 1000.0,
        "the client's own stream carried {rx} packets: {cli}"
    );
}
