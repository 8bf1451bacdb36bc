//! `linerate http` as a many-request load (issue 18): requests/s, latency
//! percentiles, coordinated-omission correction with `--rate`, status
//! codes and failed requests by kind, and the CPU unit. Two namespaces
//! joined by a veth pair (client 198.18.21.1, server 198.18.21.2); the
//! servers are `linerate serve`, nginx and a small Python server that
//! answers after a fixed delay, stalls once, or resets.

use crate::util::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = "198.18.21.2";

type Pair = NsPair;

impl NsPair {
    fn new_requests(tag: &str) -> Self {
        NsPair::new("lrq", tag, "q", "198.18.21")
    }

    /// Starts a command in the server namespace, stopped when the pair goes.
    fn spawn_server(&mut self, args: &[&str]) {
        let server = self.server.clone();
        self.spawn(&server, args);
    }

    /// Waits until something listens on the server's `port`.
    fn wait_port(&self, port: u16) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            let probe = format!("exec 3<>/dev/tcp/{SERVER}/{port}");
            let ok = Command::new("ip")
                .args(["netns", "exec", &self.client, "bash", "-c", &probe])
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("nothing listens on {SERVER}:{port}");
    }

    /// `linerate http --client ns:CLIENT ARGS --json`: the one test's
    /// document, whether the test passed or failed.
    fn http(&self, args: &[&str]) -> (bool, Value) {
        let client = format!("ns:{}", self.client);
        let mut v = vec!["http", "--client", &client];
        v.extend_from_slice(args);
        v.extend_from_slice(&["--json", "--no-progress", "--no-results"]);
        let out = run(&v);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("linerate {v:?}: not JSON ({e}); stderr:\n{stderr}"));
        (out.status.success(), doc["tests"][0].clone())
    }
}

/// A keep-alive HTTP/1.1 server in Python (a thread per connection) that
/// answers every GET with 1 KiB after `delay_ms`; `stall_at`: the request
/// with that number (over all connections, from 1) waits `stall_ms` instead;
/// `reset_every`: every Nth request on a connection gets a TCP reset
/// instead of an answer. Appends one line per request to `log`.
const PY_SERVER: &str = r#"
import socket, struct, sys, threading, time
addr, port, delay, stall_at, stall, reset_every, log = sys.argv[1:8]
delay, stall_at, stall, reset_every = float(delay) / 1e3, int(stall_at), float(stall) / 1e3, int(reset_every)
lock = threading.Lock(); seen = [0]
out = open(log, "a", buffering=1)
body = b"x" * 1024
head = b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\r\n"
def serve(c):
    buf = b""; n = 0
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                c.close(); return
            buf += d
        buf = buf.split(b"\r\n\r\n", 1)[1]
        n += 1
        with lock:
            seen[0] += 1; k = seen[0]
        out.write("%d\n" % k)
        if reset_every and n % reset_every == 0:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close(); return
        time.sleep(stall if k == stall_at else delay)
        c.sendall(head + body)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, int(port))); s.listen(128)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// Starts the Python server on `port`; returns the path of its request log.
fn python_server(
    p: &mut Pair,
    dir: &Path,
    port: u16,
    delay_ms: u32,
    stall: Option<(u32, u32)>,
    reset_every: u32,
) -> std::path::PathBuf {
    let script = dir.join("server.py");
    std::fs::write(&script, PY_SERVER).unwrap();
    let log = dir.join(format!("requests-{port}.log"));
    let (at, ms) = stall.unwrap_or((0, 0));
    let args: Vec<String> = vec![
        "python3".into(),
        script.to_str().unwrap().into(),
        SERVER.into(),
        port.to_string(),
        delay_ms.to_string(),
        at.to_string(),
        ms.to_string(),
        reset_every.to_string(),
        log.to_str().unwrap().into(),
    ];
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    p.spawn_server(&refs);
    p.wait_port(port);
    log
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The client's responses and failed requests against what the server saw:
/// every request the server received is a response or a failure on the
/// client, except at most one per connection cut by the end of the test.
fn counts_add_up(c: &Value, served: u64, connections: u64) {
    let responses = n(&c["requests"]);
    let kinds = &c["error_kinds"];
    let errors = n(&c["errors"]);
    let by_kind: u64 = ["connect", "timeout", "reset", "tls", "protocol"]
        .iter()
        .map(|k| n(&kinds[*k]))
        .sum();
    assert_eq!(errors, by_kind, "errors vs their kinds: {c}");
    let reached = responses + errors - n(&kinds["connect"]);
    assert!(
        reached <= served && served <= reached + connections,
        "server saw {served} requests; client: {responses} responses + {errors} errors ({kinds})"
    );
    let statuses: u64 = c["status_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| n(&s["count"]))
        .sum();
    assert_eq!(statuses, responses, "status counts vs responses: {c}");
}

fn percentiles_ordered(l: &Value) {
    let p: Vec<u64> = ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"]
        .iter()
        .map(|k| n(&l[*k]))
        .collect();
    assert!(p.windows(2).all(|w| w[0] <= w[1]), "percentiles: {l}");
    assert!(p[0] > 0, "{l}");
}

#[test]
fn request_rate_against_linerate_serve_and_nginx() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = tempdir("http-requests");
    let mut p = Pair::new_requests("a");
    let server = format!("ns:{}", p.server);
    // linerate's own server, started by the test on the server side.
    let (ok, t) = p.http(&[
        "--server", &server, "--target", SERVER, "--size", "1k", "-c", "16", "-t", "2",
    ]);
    assert!(ok, "{t}");
    let h = &t["http"];
    let c = &h["client"];
    assert!(h["requests_per_s"].as_f64().unwrap() > 0.0, "{h}");
    percentiles_ordered(&c["latency"]);
    assert_eq!(n(&c["errors"]), 0, "{c}");
    // --size 1k: 1000 bytes (k = 1000, Ki = 1024).
    assert!((1000..=1024).contains(&n(&c["object_bytes"])), "{c}");
    counts_add_up(c, n(&h["server"]["requests"]), 16);

    // nginx, its requests counted in its access log.
    if Command::new("nginx").arg("-v").output().is_err() {
        eprintln!("skipping the nginx half: nginx is not installed");
        return;
    }
    let conf = nginx_site(
        &dir,
        2,
        &format!("{SERVER}:8088"),
        "keepalive_requests 1000000;",
    );
    p.spawn_server(&["nginx", "-c", conf.to_str().unwrap()]);
    p.wait_port(8088);
    let url = format!("http://{SERVER}:8088/1k.bin");
    let (ok, t) = p.http(&["--url", &url, "-c", "16", "-t", "2"]);
    assert!(ok, "{t}");
    let c = &t["http"]["client"];
    percentiles_ordered(&c["latency"]);
    assert_eq!(n(&c["errors"]), 0, "{c}");
    // nginx writes its log lines as it answers; give it a moment.
    std::thread::sleep(Duration::from_millis(300));
    counts_add_up(c, log_lines(&dir.join("access.log")), 16);
}

#[test]
fn percentiles_from_a_fixed_delay() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = tempdir("http-requests-delay");
    let mut p = Pair::new_requests("d");
    let log = python_server(&mut p, &dir, 8090, 50, None, 0);
    let url = format!("http://{SERVER}:8090/");
    let (ok, t) = p.http(&["--url", &url, "-c", "4", "-t", "3"]);
    assert!(ok, "{t}");
    let c = &t["http"]["client"];
    let p50 = n(&c["latency"]["p50_us"]) as f64;
    assert!(
        (45_000.0..=55_000.0).contains(&p50),
        "a server answering after 50 ms: p50 {p50} µs (±10 %): {c}"
    );
    percentiles_ordered(&c["latency"]);
    // 4 connections × 3 s / 50 ms: about 240 requests (fewer on a busy host).
    assert!(n(&c["requests"]) >= 100, "{c}");
    counts_add_up(c, log_lines(&log), 4);
}

#[test]
fn coordinated_omission_is_corrected_with_a_rate() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = tempdir("http-requests-stall");
    let mut p = Pair::new_requests("s");
    // Answers at once, except the 100th request, held for 1 s.
    let log = python_server(&mut p, &dir, 8091, 0, Some((100, 1000)), 0);
    let url = format!("http://{SERVER}:8091/");
    let (ok, t) = p.http(&["--url", &url, "-c", "2", "-t", "4", "--rate", "200"]);
    assert!(ok, "{t}");
    let c = &t["http"]["client"];
    assert_eq!(c["rate_per_s"].as_f64(), Some(200.0), "{c}");
    let corrected = n(&c["latency"]["p99_us"]);
    let raw = n(&c["latency_uncorrected"]["p99_us"]);
    // One request of ~800 took 1 s: without the correction it is under
    // the p99; with it, the ~100 requests due on that connection during
    // the stall waited up to 1 s each (12 % of all).
    assert!(
        corrected >= 300_000 && corrected >= 10 * raw,
        "corrected p99 {corrected} µs vs from actual send times {raw} µs: {c}"
    );
    let rps = t["http"]["requests_per_s"].as_f64().unwrap();
    assert!(rps <= 200.0 * 1.1, "a fixed rate of 200/s, got {rps}");
    counts_add_up(c, log_lines(&log), 2);
}

#[test]
fn failed_requests_by_kind() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let dir = tempdir("http-requests-errors");
    let mut p = Pair::new_requests("e");
    // Every second request on a connection is answered with a reset.
    let log = python_server(&mut p, &dir, 8092, 0, None, 2);
    let url = format!("http://{SERVER}:8092/");
    let (ok, t) = p.http(&["--url", &url, "-c", "2", "-t", "2"]);
    assert!(ok, "{t}");
    let c = &t["http"]["client"];
    let k = &c["error_kinds"];
    assert!(n(&k["reset"]) > 0, "{c}");
    assert_eq!(
        n(&k["connect"]) + n(&k["timeout"]) + n(&k["protocol"]),
        0,
        "{c}"
    );
    // One reset per two requests, give or take the last of each connection.
    let (ok_n, reset) = (n(&c["requests"]), n(&k["reset"]));
    assert!(ok_n.abs_diff(reset) <= 2, "{ok_n} answered, {reset} reset");
    counts_add_up(c, log_lines(&log), 2);

    // A port nobody listens on: every attempt is a connect error.
    let url = format!("http://{SERVER}:8093/");
    let (ok, t) = p.http(&["--url", &url, "-c", "2", "-t", "1"]);
    assert!(!ok, "downloads from a refusing port passed: {t}");
    let c = &t["http"]["client"];
    let k = &c["error_kinds"];
    assert!(n(&k["connect"]) > 0, "{t}");
    assert_eq!(n(&c["requests"]), 0);
    assert_eq!(n(&c["errors"]), n(&k["connect"]), "{c}");
    let why = t["error"].as_str().unwrap_or("");
    assert!(why.contains("connecting to"), "{why}");
}

/// The host's CPUs, as the kernel lists them.
fn host_cpus() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count() as u64
}

#[test]
fn cpu_is_a_share_of_the_host_on_a_four_stream_row() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let p = Pair::new_requests("u");
    let server = format!("ns:{}", p.server);
    let (ok, t) = p.http(&[
        "--server", &server, "--target", SERVER, "--tls", "-c", "4", "-t", "2", "--size", "10M",
    ]);
    assert!(ok, "{t}");
    let cpus = host_cpus();
    for c in t["cpu"].as_array().unwrap() {
        assert_eq!(n(&c["cpus"]), cpus, "{c}");
        let pct = c["process_pct"].as_f64().unwrap();
        assert!((0.0..=100.0 + 1.0).contains(&pct), "{c}");
    }
    let h = &t["http"];
    for side in ["client", "server"] {
        let cpu = &h[side]["cpu"];
        assert_eq!(n(&cpu["cpus"]), cpus, "{side}: {cpu}");
        let used = cpu["user_pct"].as_f64().unwrap() + cpu["system_pct"].as_f64().unwrap();
        assert!((0.0..=100.0 + 1.0).contains(&used), "{side}: {cpu}");
        assert!(used > 0.0, "{side} measured no CPU: {cpu}");
    }
    // The agent's figure and the HTTP side's agree in unit: the client's
    // process is the gen agent (the agent's own work adds a little).
    let gen = t["cpu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["role"] == "gen")
        .unwrap();
    let agent = gen["process_pct"].as_f64().unwrap();
    let cpu = &h["client"]["cpu"];
    let client = cpu["user_pct"].as_f64().unwrap() + cpu["system_pct"].as_f64().unwrap();
    assert!(
        (agent - client).abs() <= 0.3 * client.max(agent) + 3.0,
        "gen agent {agent} % vs HTTP client {client} % of the host"
    );
}

/// Access-log lines of requests that came over HTTP/2, and all lines.
fn h2_lines(log: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all = text.lines().count() as u64;
    let h2 = text.lines().filter(|l| l.contains(" HTTP/2.0\"")).count() as u64;
    (h2, all)
}

/// `--http2` against nginx: h2c with prior knowledge on one port, h2 over
/// TLS (ALPN) on another. nginx logs every request's protocol, so the
/// test sees that each one really went over HTTP/2. It ends kept-alive
/// connections after 50 requests (GOAWAY): that costs a new connection,
/// not a failed request. A large object checks flow control (the body is
/// far over HTTP/2's default 64 KiB window).
#[test]
fn http2_against_nginx_in_clear_text_and_over_tls() {
    if !require_root() {
        return;
    }
    if Command::new("nginx").arg("-v").output().is_err() {
        crate::util::skip("nginx is not installed");
        return;
    }
    let _g = serial();
    let dir = tempdir("http-requests-h2");
    let (key, cert) = leaf_cert(&dir, SERVER);
    let conf = nginx_site(
        &dir,
        2,
        &format!("{SERVER}:8092 http2; listen {SERVER}:8493 ssl http2"),
        &format!(
            "keepalive_requests 50; ssl_certificate {}; ssl_certificate_key {};",
            cert.display(),
            key.display()
        ),
    );
    std::fs::write(dir.join("root").join("big.bin"), vec![7u8; 8 << 20]).unwrap();
    let mut p = Pair::new_requests("h");
    p.spawn_server(&["nginx", "-c", conf.to_str().unwrap()]);
    p.wait_port(8092);
    p.wait_port(8493);
    let log = dir.join("access.log");

    let url = format!("http://{SERVER}:8092/1k.bin");
    let (ok, t) = p.http(&["--url", &url, "--http2", "-c", "8", "-t", "2"]);
    assert!(ok, "{t}");
    assert_eq!(t["name"], "h2c 8 connections", "{t}");
    let c = &t["http"]["client"];
    assert_eq!(c["http2"], true, "{c}");
    assert_eq!(
        n(&c["errors"]),
        0,
        "GOAWAY after 50 requests must not fail any: {c}"
    );
    let responses = n(&c["requests"]);
    assert!(
        responses > 8 * 50,
        "more requests than one connection each may carry: {c}"
    );
    percentiles_ordered(&c["latency"]);
    std::thread::sleep(Duration::from_millis(300));
    let (h2, all) = h2_lines(&log);
    assert_eq!(h2, all, "every request nginx logged came over HTTP/2");
    counts_add_up(c, h2, 8);
    let body = n(&c["body_bytes"]);
    assert!(
        body >= responses * 1024 && body <= (responses + 8) * 1024,
        "{responses} responses of 1 KiB, {body} body bytes"
    );
    for x in t["cross_checks"].as_array().unwrap() {
        assert_eq!(x["flagged"], false, "{x}");
    }

    let before = all;
    let url = format!("https://{SERVER}:8493/big.bin");
    let ca = cert.to_str().unwrap();
    let (ok, t) = p.http(&[
        "--url", &url, "--http2", "--cacert", ca, "-c", "2", "-t", "2",
    ]);
    assert!(ok, "{t}");
    assert_eq!(t["name"], "h2 2 connections", "{t}");
    let c = &t["http"]["client"];
    assert_eq!(
        (c["http2"].as_bool(), c["tls"].as_bool()),
        (Some(true), Some(true)),
        "{c}"
    );
    assert_eq!(n(&c["errors"]), 0, "{c}");
    let responses = n(&c["requests"]);
    assert!(responses >= 2, "{c}");
    let body = n(&c["body_bytes"]);
    assert!(
        body >= responses << 23 && body <= (responses + 2) << 23,
        "{responses} responses of 8 MiB, {body} body bytes"
    );
    assert!(t["http"]["goodput_bps"].as_f64().unwrap() > 1e8, "{t}");
    std::thread::sleep(Duration::from_millis(300));
    let (h2, all) = h2_lines(&log);
    assert_eq!(h2, all, "every request nginx logged came over HTTP/2");
    counts_add_up(c, all - before, 2);
}

/// `--http2` against nghttpd, whose responses put their headers in the
/// HPACK dynamic table and refer to them later (nginx's never do): every
/// response is read, none fails, and the body bytes add up.
#[test]
fn http2_against_nghttpd_that_indexes_its_headers() {
    if !require_root() {
        return;
    }
    let have = Command::new("nghttpd").arg("--version").output().is_ok()
        || Command::new("apt-get")
            .args(["install", "-y", "-qq", "nghttp2-server"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
    if !have {
        crate::util::skip("nghttp2-server is not installed and apt-get could not install it");
        return;
    }
    let _g = shared();
    let dir = tempdir("http-requests-nghttpd");
    std::fs::write(dir.join("1k.bin"), vec![5u8; 1024]).unwrap();
    let mut p = Pair::new_requests("n");
    let address = format!("--address={SERVER}");
    let root = dir.to_str().unwrap();
    p.spawn_server(&["nghttpd", "--no-tls", "-d", root, &address, "8096"]);
    p.wait_port(8096);
    let url = format!("http://{SERVER}:8096/1k.bin");
    let (ok, t) = p.http(&["--url", &url, "--http2", "-c", "4", "-t", "2"]);
    assert!(ok, "{t}");
    let c = &t["http"]["client"];
    assert_eq!(n(&c["errors"]), 0, "{c}");
    let responses = n(&c["requests"]);
    assert!(responses > 100, "{c}");
    let body = n(&c["body_bytes"]);
    assert!(
        body >= responses * 1024 && body <= (responses + 4) * 1024,
        "{responses} responses of 1 KiB, {body} body bytes"
    );
}

/// `--http2` against a server that speaks only HTTP/1.1 (`linerate serve`)
/// fails every request as a protocol error with a message that says what
/// to do; `--http2` without `--url` is refused before anything runs.
#[test]
fn http2_against_an_http1_server_says_so() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let mut p = Pair::new_requests("g");
    let listen = format!("{SERVER}:8094");
    p.spawn_server(&[
        bin(),
        "serve",
        "--no-results",
        "--listen",
        &listen,
        "--size",
        "1k",
    ]);
    p.wait_port(8094);
    let url = format!("http://{SERVER}:8094/");
    let (ok, t) = p.http(&["--url", &url, "--http2", "-c", "1", "-t", "1"]);
    assert!(!ok, "{t}");
    let c = &t["http"]["client"];
    assert_eq!(n(&c["requests"]), 0, "{c}");
    assert!(n(&c["error_kinds"]["protocol"]) >= 1, "{c}");
    let text = t.to_string();
    assert!(
        text.contains("HTTP_1_1_REQUIRED") && text.contains("leave out --http2"),
        "{text}"
    );
    // A stock HTTP/2 client sees the same refusal, frame by frame.
    let have_nghttp = Command::new("nghttp").arg("--version").output().is_ok()
        || Command::new("apt-get")
            .args(["install", "-y", "-qq", "nghttp2-client"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
    if have_nghttp {
        let out = Command::new("ip")
            .args(["netns", "exec", &p.client, "nghttp", "-nv", &url])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains("GOAWAY")
                && said.contains("HTTP_1_1_REQUIRED")
                && said.contains("HTTP/1.1 only"),
            "{said}"
        );
    } else {
        crate::util::skip("nghttp2-client is not installed and apt-get could not install it");
    }

    let out = run(&["http", "--target", SERVER, "--http2"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--url"), "{stderr}");
}
