//! `linerate http --method/--header/--body` and `--ramp-connections`
//! (issue 38, item 11) against `linerate serve` on loopback (the server
//! reads and counts request bodies, so its results check the client's),
//! HEAD over HTTP/2 against nginx in a namespace pair, and bad headers
//! refused before anything runs.

use crate::util::*;
use serde_json::Value;
use std::process::Command;

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `linerate http ARGS --json --no-progress --no-results` on loopback:
/// the one test's document, which must have passed.
fn http_ok(args: &[&str]) -> Value {
    let mut v = vec!["http", "--target", "127.0.0.1"];
    v.extend_from_slice(args);
    v.extend_from_slice(&["--json", "--no-progress", "--no-results"]);
    let doc = run_json(&v);
    let t = doc["tests"][0].clone();
    assert_eq!(t["status"], "ok", "{t}");
    t
}

#[test]
fn post_with_a_body_and_headers_is_counted_by_both_ends() {
    let _g = shared();
    let t = http_ok(&[
        "--size",
        "1k",
        "--method",
        "POST",
        "--body",
        "0123456789abcdef",
        "-H",
        "X-Token: s3cret",
        "--header",
        "X-Run: methods",
        "--requests",
        "60",
        "-c",
        "3",
    ]);
    assert_eq!(t["name"], "http POST 3 connections", "{t}");
    let c = &t["http"]["client"];
    let s = &t["http"]["server"];
    assert_eq!(c["method"], "POST", "{c}");
    assert_eq!(n(&c["extra_headers"]), 2, "{c}");
    assert!(
        !c.to_string().contains("s3cret"),
        "header values stay out of the results"
    );
    assert_eq!(n(&c["requests"]), 60, "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");
    assert_eq!(n(&c["body_bytes"]), 60 * 1000, "{c}");
    assert_eq!(n(&c["request_body_bytes"]), 60 * 16, "{c}");
    // The server read every body and answered every request.
    assert_eq!(n(&s["requests"]), 60, "{s}");
    assert_eq!(n(&s["request_body_bytes"]), 60 * 16, "{s}");
}

#[test]
fn head_has_no_body_over_http1() {
    let _g = shared();
    let t = http_ok(&["--size", "1M", "--method", "HEAD", "-t", "1", "-c", "2"]);
    let c = &t["http"]["client"];
    assert_eq!(c["method"], "HEAD", "{c}");
    assert!(
        n(&c["requests"]) > 100,
        "HEAD requests do not wait for a body: {c}"
    );
    assert_eq!(n(&c["body_bytes"]), 0, "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");
    assert_eq!(
        n(&c["object_bytes"]),
        1_000_000,
        "the Content-Length of the GET: {c}"
    );
}

#[test]
fn bad_headers_and_bodies_are_usage_errors() {
    let _g = crate::util::shared();
    let dir = tempdir("http-methods-usage");
    let results = dir.join("results");
    let big = dir.join("big.bin");
    std::fs::write(&big, vec![b'x'; 65 << 10]).unwrap();
    for (args, says) in [
        (vec!["-H", "Host: evil"], "Host cannot be set with --header"),
        (
            vec!["-H", "Content-Length: 5"],
            "Content-Length cannot be set",
        ),
        (
            vec!["-H", "Transfer-Encoding: chunked"],
            "Transfer-Encoding cannot be set",
        ),
        (vec!["-H", "Connection: close"], "Connection cannot be set"),
        (vec!["-H", "X-A: 1\r\nEvil: 2"], "CR, LF or NUL"),
        (vec!["-H", "Bad Name: 1"], "not a header name"),
        (vec!["-H", "NoColon"], "'Name: value'"),
        (vec!["--method", "TRACE"], "not a method"),
        (vec!["--method", "GET", "--body", "x"], "has no body"),
        (
            vec!["--method", "PUT", "--body-file", big.to_str().unwrap()],
            "up to 64 KiB",
        ),
        (vec!["--ramp-connections", "10s"], "DURATION:CONNECTIONS"),
        (
            vec!["--ramp-connections", "1s:2", "-c", "4"],
            "cannot be used with",
        ),
    ] {
        let mut v = vec!["http", "--target", "127.0.0.1", "--results-dir"];
        v.push(results.to_str().unwrap());
        v.extend_from_slice(&args);
        let out = run(&v);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
        assert!(!results.exists(), "{args:?} wrote a results directory");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_connection_ramp_rises_then_falls() {
    let _g = serial();
    let t = http_ok(&["--size", "100k", "--ramp-connections", "2s:1,2s:8,1s:0"]);
    assert_eq!(t["name"], "http ramp to 8 connections", "{t}");
    let c = &t["http"]["client"];
    let stages: Vec<(u64, u64)> = c["ramp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (n(&s["duration_ms"]), n(&s["connections"])))
        .collect();
    assert_eq!(stages, [(2000, 1), (2000, 8), (1000, 0)]);
    assert_eq!(n(&c["errors"]), 0, "{c}");
    let open: Vec<u64> = t["directions"][0]["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["receiver"].as_object())
        .map(|r| r.get("connections").and_then(Value::as_u64).unwrap_or(0))
        .collect();
    let peak = open.iter().copied().max().unwrap_or(0);
    let at = open.iter().position(|&k| k == peak).unwrap_or(0);
    assert!(open[0] <= 1, "the first second runs at most 1: {open:?}");
    assert!((6..=8).contains(&peak), "near 8 at the top: {open:?}");
    assert!(at > 0 && at + 1 < open.len(), "rises, then falls: {open:?}");
    assert_eq!(*open.last().unwrap(), 0, "all closed at the end: {open:?}");
    assert!(
        open[..at].windows(2).all(|w| w[0] <= w[1]),
        "rising: {open:?}"
    );
    let duration = t["directions"][0]["duration_s"].as_f64().unwrap();
    assert!(
        (4.5..7.5).contains(&duration),
        "the stages' 5 s: {duration}"
    );
}

/// HEAD over HTTP/2 (h2c) against nginx: the response's HEADERS end the
/// stream with a content-length and no DATA. A POST of a 64 KiB body,
/// one byte over HTTP/2's default window, waits for nginx's WINDOW_UPDATE
/// (nginx answers POST on a static file with 405).
#[test]
fn head_and_post_over_http2() {
    if !require_root() {
        return;
    }
    if Command::new("nginx").arg("-v").output().is_err() {
        crate::util::skip("nginx is not installed");
        return;
    }
    let _g = one_core();
    let dir = tempdir("http-methods-h2");
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.bin"), vec![7u8; 1 << 20]).unwrap();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\ndaemon off;\n\
             events {{ worker_connections 64; }}\nhttp {{\n access_log off;\n \
             client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d}; \
             uwsgi_temp_path {d}; scgi_temp_path {d};\n \
             server {{ listen 198.18.22.2:8095 http2; root {r}; }}\n}}\n",
            d = dir.display(),
            r = root.display(),
        ),
    )
    .unwrap();
    let mut p = NsPair::new("lrhm", "h", "hm", "198.18.22");
    let server = p.server.clone();
    p.spawn(&server, &["nginx", "-c", conf.to_str().unwrap()]);
    p.wait_listening(8095);
    let client = format!("ns:{}", p.client);
    let url = "http://198.18.22.2:8095/big.bin";
    let mut doc = Value::Null;
    for _ in 0..50 {
        let out = run(&[
            "http",
            "--client",
            &client,
            "--url",
            url,
            "--http2",
            "--method",
            "HEAD",
            "-t",
            "1",
            "-c",
            "2",
            "--json",
            "--no-progress",
            "--no-results",
        ]);
        doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if out.status.success() {
            break;
        }
        // nginx may still be starting.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let c = &doc["tests"][0]["http"]["client"];
    assert_eq!(doc["tests"][0]["status"], "ok", "{doc}");
    assert_eq!(c["http2"], true, "{c}");
    assert_eq!(c["method"], "HEAD", "{c}");
    assert!(n(&c["requests"]) > 50, "{c}");
    assert_eq!(n(&c["body_bytes"]), 0, "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");

    let body = dir.join("body.bin");
    std::fs::write(&body, vec![b'b'; 64 << 10]).unwrap();
    let out = run(&[
        "http",
        "--client",
        &client,
        "--url",
        url,
        "--http2",
        "--method",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "-H",
        "X-Test: h2",
        "--requests",
        "20",
        "-c",
        "2",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let c = &doc["tests"][0]["http"]["client"];
    assert_eq!(n(&c["requests"]), 20, "{doc}");
    assert_eq!(n(&c["errors"]), 0, "{c}");
    assert_eq!(c["status_counts"][0]["status"], 405, "{c}");
    assert_eq!(n(&c["request_body_bytes"]), 20 * (64 << 10), "{c}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `udp -w` (issue 38 item 11, with the HTTP flags above): the socket
/// engines' buffers, and what the kernel made of them (twice the request).
#[test]
fn udp_window_reports_the_effective_buffers() {
    let _g = shared();
    let doc = run_json(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--rate",
        "10kpps",
        "-t",
        "1",
        "-w",
        "256K",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{t}");
    assert_eq!(n(&t["params"]["window_bytes"]), 256 << 10, "{t}");
    let d = &t["directions"][0];
    assert_eq!(
        d["sender_summary"]["tx_engine"], "socket",
        "auto picks sockets with -w"
    );
    assert_eq!(d["receiver_summary"]["rx_engine"], "socket");
    let b = &d["socket_buffers"];
    assert_eq!(n(&b["requested_bytes"]), 256 << 10, "{b}");
    for k in ["sender_sndbuf_bytes", "receiver_rcvbuf_bytes"] {
        // Linux doubles it; without root it may be capped lower.
        let got = n(&b[k]);
        assert!(got > 0 && got <= 512 << 10, "{k}: {b}");
        if is_root() {
            assert_eq!(got, 512 << 10, "{k}: {b}");
        }
    }
    for engine in [["--tx-engine", "packet"], ["--rx-engine", "xdp"]] {
        let mut v = vec!["udp", "--target", "127.0.0.1", "-w", "256K"];
        v.extend_from_slice(&engine);
        let out = run(&v);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine:?}: {stderr}");
        assert!(stderr.contains("-w/--window with"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}
