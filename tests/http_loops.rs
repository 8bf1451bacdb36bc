//! `linerate http` on event loops (issue 18): many connections share a
//! few loop threads (one per CPU), and every one of them makes progress;
//! the request budget, the rate schedule and TLS hold across loops; a
//! server that closes kept-alive connections (after N requests, or when
//! they idle) costs a reconnect, not a failed request. Two namespaces
//! joined by a veth pair (client 198.18.37.1, server 198.18.37.2).

use crate::util::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = "198.18.37.2";

fn pair(tag: &str) -> NsPair {
    NsPair::new("evc", tag, "evc", "198.18.37")
}

/// `linerate http --client ns:CLIENT ARGS --json`: the one test's document.
fn http(p: &NsPair, args: &[&str]) -> Value {
    let client = format!("ns:{}", p.client);
    let mut v = vec!["http", "--client", &client];
    v.extend_from_slice(args);
    v.extend_from_slice(&["--json", "--no-progress", "--no-results"]);
    let out = run(&v);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("linerate {v:?}: not JSON ({e}); stderr:\n{stderr}"));
    let t = doc["tests"][0].clone();
    assert!(out.status.success(), "linerate {v:?} failed: {t}\n{stderr}");
    t
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every connection answered at least once, the per-connection counts add
/// up to the total, the status counts too, and no request failed.
fn every_connection_progressed(c: &Value, connections: u64) {
    let conns = c["connections"].as_array().unwrap();
    assert_eq!(conns.len() as u64, connections, "{c}");
    let mut ids: Vec<u64> = conns.iter().map(|x| n(&x["id"])).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..connections).collect::<Vec<_>>());
    for x in conns {
        assert!(n(&x["requests"]) > 0, "a connection made no request: {x}");
        assert!(x["error"].is_null(), "{x}");
    }
    let sum: u64 = conns.iter().map(|x| n(&x["requests"])).sum();
    assert_eq!(sum, n(&c["requests"]), "connections vs total: {c}");
    let statuses: u64 = c["status_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| n(&s["count"]))
        .sum();
    assert_eq!(statuses, n(&c["requests"]), "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");
}

#[test]
fn many_connections_on_fewer_loops_all_make_progress() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let p = pair("m");
    let server = format!("ns:{}", p.server);
    let common = ["--server", &server, "--target", SERVER, "--size", "1k"];
    // 64 connections on one loop per CPU: each gets its turn.
    let mut a = common.to_vec();
    a.extend_from_slice(&["-c", "64", "-t", "2"]);
    let t = http(&p, &a);
    let h = &t["http"];
    let c = &h["client"];
    every_connection_progressed(c, 64);
    // Every request the server answered is one the client counted, but
    // for at most one per connection cut by the end.
    let (served, got) = (n(&h["server"]["requests"]), n(&c["requests"]));
    assert!(
        got <= served && served <= got + 64,
        "served {served}, client {got}"
    );
    assert!(n(&c["wire_bytes"]) >= n(&c["body_bytes"]), "{c}");

    // A request budget is shared by the loops: exactly that many answers.
    let mut a = common.to_vec();
    a.extend_from_slice(&["-c", "16", "--requests", "500"]);
    let t = http(&p, &a);
    let c = &t["http"]["client"];
    assert_eq!(n(&c["requests"]), 500, "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");

    // A rate over many connections: each keeps its share of the schedule.
    let mut a = common.to_vec();
    a.extend_from_slice(&["-c", "32", "-t", "2", "--rate", "1600"]);
    let t = http(&p, &a);
    let c = &t["http"]["client"];
    every_connection_progressed(c, 32);
    let rps = t["http"]["requests_per_s"].as_f64().unwrap();
    assert!(
        (1600.0 * 0.7..=1600.0 * 1.05).contains(&rps),
        "asked for 1600 requests/s, got {rps}"
    );
    // 1600/s over 32 connections for 2 s: 100 each on the schedule.
    for x in c["connections"].as_array().unwrap() {
        let r = n(&x["requests"]);
        assert!((50..=102).contains(&r), "a connection's share of 100: {x}");
    }
    assert!(c["latency_uncorrected"]["count"].as_u64().is_some(), "{c}");

    // HTTPS: the handshakes run on the loops too.
    let mut a = common.to_vec();
    a.extend_from_slice(&["-c", "8", "-t", "2", "--tls"]);
    let t = http(&p, &a);
    let c = &t["http"]["client"];
    every_connection_progressed(c, 8);
    assert!(c["tls_version"].as_str().is_some(), "{c}");
    assert!(
        n(&c["wire_bytes"]) > n(&c["body_bytes"]),
        "TLS framing: {c}"
    );
}

/// nginx in the server namespace with `extra` in its http block, serving
/// a 1 KiB file at /1k.bin on `port`; requests counted in its access log.
fn nginx(p: &mut NsPair, dir: &Path, port: u16, extra: &str) -> Option<std::path::PathBuf> {
    if Command::new("nginx").arg("-v").output().is_err() {
        eprintln!("skipping: nginx is not installed");
        return None;
    }
    let conf = nginx_site(dir, 1, &format!("{SERVER}:{port}"), extra);
    let server = p.server.clone();
    p.spawn(&server, &["nginx", "-c", conf.to_str().unwrap()]);
    let t0 = Instant::now();
    loop {
        let probe = format!("exec 3<>/dev/tcp/{SERVER}/{port}");
        let ok = Command::new("ip")
            .args(["netns", "exec", &p.client, "bash", "-c", &probe])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(dir.join("access.log"));
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nginx did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn server_closing_kept_alive_connections_costs_a_reconnect_not_an_error() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = tempdir("http-loops-close");
    let mut p = pair("k");
    // Every 10th answer says `Connection: close`; idle connections are
    // closed after 200 ms.
    let Some(log) = nginx(
        &mut p,
        &dir,
        8097,
        "keepalive_requests 10;\n keepalive_timeout 200ms;",
    ) else {
        return;
    };
    let url = format!("http://{SERVER}:8097/1k.bin");
    let t = http(&p, &["--url", &url, "-c", "8", "-t", "2"]);
    let c = &t["http"]["client"];
    every_connection_progressed(c, 8);
    assert!(
        n(&c["requests"]) > 8 * 10,
        "more than one connection's worth: {c}"
    );
    let first = n(&c["requests"]);
    // At 4 requests/s per connection each request finds its connection
    // idle for 250 ms: closed by the server, reopened by the client.
    let t = http(&p, &["--url", &url, "-c", "4", "-t", "2", "--rate", "16"]);
    let c = &t["http"]["client"];
    every_connection_progressed(c, 4);
    assert!(n(&c["requests"]) >= 24, "{c}");
    // nginx writes its log lines as it answers; give it a moment. What it
    // answered, the client counted (but for one per connection at the end).
    std::thread::sleep(Duration::from_millis(300));
    let (served, got) = (log_lines(&log), first + n(&c["requests"]));
    assert!(
        got <= served && served <= got + 8 + 4,
        "nginx answered {served}, the client counted {got}"
    );
}

/// A body that trickles (about 90 KiB/s, so the client's 1 MiB receive
/// low-water mark would not be reached for 11 s, past the 10 s stall
/// limit) is slow, not stalled: it arrives whole, with no error.
#[test]
fn a_trickling_body_is_slow_not_stalled() {
    if !require_root() {
        return;
    }
    // Shared: the server sleeps between chunks, the client waits; its
    // namespaces and port are its own.
    let _g = shared();
    let p = pair("t");
    let body: usize = (1 << 20) + (32 << 10);
    let script = format!(
        "import socket, time\n\
         s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.bind(('{SERVER}', 8089)); s.listen(1)\n\
         c, _ = s.accept(); c.recv(4096)\n\
         c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: {body}\\r\\nConnection: close\\r\\n\\r\\n')\n\
         for _ in range({body} // 32768):\n\
         \x20   c.sendall(b'x' * 32768); time.sleep(0.35)\n\
         time.sleep(1); c.close()\n"
    );
    let mut srv = Command::new("ip")
        .args(["netns", "exec", &p.server, "python3", "-c", &script])
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let t0 = Instant::now();
    while !String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "exec", &p.server, "ss", "-Htln", "sport = :8089"])
            .output()
            .expect("ss")
            .stdout,
    )
    .contains("8089")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the trickle server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{SERVER}:8089/slow");
    let t = http(
        &p,
        &["--url", &url, "-c", "1", "--requests", "1", "-t", "40"],
    );
    let _ = srv.kill();
    let _ = srv.wait();
    let c = &t["http"]["client"];
    assert_eq!(n(&c["requests"]), 1, "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");
    assert_eq!(n(&c["body_bytes"]), body as u64, "{c}");
}
