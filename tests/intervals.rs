//! Issue 38, item 1: interval lines as iperf3 prints them. tcp and udp
//! print a line per second by default, each covering its slice of the
//! test's clock with every figure filled in (the first line included, both
//! directions); `-i 0.5` gives half-second lines, `-i 0` none; `--omit`
//! shows the first seconds marked and leaves them out of the totals; `-w`
//! sets the streams' socket buffers and the results say what the kernel
//! gave. Loopback only.

use crate::util::{run, serial, shared};
use serde_json::Value;

/// The interval lines of a run's output.
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('['))
        .map(str::to_string)
        .collect()
}

/// `[  0.00-1.00 s]` → (0.0, 1.0).
fn span(line: &str) -> (f64, f64) {
    let inner = &line[1..line.find(" s]").unwrap()];
    let (a, b) = inner.trim().split_once('-').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// The number after `word ` in a line, with its SI prefix applied
/// (`received 2.27 GB` → 2.27e9).
fn figure_after(line: &str, word: &str) -> f64 {
    let rest = &line[line.find(word).unwrap() + word.len()..];
    let mut it = rest.split_whitespace();
    let v: f64 = it.next().unwrap().parse().unwrap();
    let unit = it.next().unwrap();
    let mult = match unit.chars().next().unwrap() {
        'k' => 1e3,
        'M' => 1e6,
        'G' => 1e9,
        'T' => 1e12,
        _ => 1.0,
    };
    v * mult
}

fn ok(args: &[&str]) -> (String, String) {
    let out = run(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "linerate {args:?}:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

fn assert_spans(l: &[String], want: &[(f64, f64)]) {
    let got: Vec<(f64, f64)> = l.iter().map(|l| span(l)).collect();
    assert_eq!(got, want, "{l:#?}");
}

#[test]
fn issue38_tcp_prints_a_line_per_second_by_default_every_figure_filled_in() {
    let _g = serial();
    let (stdout, _) = ok(&["tcp", "--target", "127.0.0.1", "-t", "3", "--no-results"]);
    let l = lines(&stdout);
    assert_spans(&l, &[(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]);
    for line in &l {
        assert!(!line.contains(" -"), "a figure left out: {line}");
        assert!(figure_after(line, "received ") > 0.0, "{line}");
        assert!(figure_after(line, "offered ") > 0.0, "{line}");
    }
}

#[test]
fn issue38_udp_half_second_lines_and_none_with_i_0() {
    let _g = shared();
    let udp = [
        "udp",
        "--target",
        "127.0.0.1",
        "-t",
        "2",
        "-b",
        "5kpps",
        "--rx-engine",
        "socket",
        "--no-results",
    ];
    let (stdout, _) = ok(&[&udp[..], &["-i", "0.5"]].concat());
    let l = lines(&stdout);
    assert_spans(&l, &[(0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, 2.0)]);
    for line in &l {
        assert!(figure_after(line, "received ") > 0.0, "{line}");
        assert!(figure_after(line, "offered ") > 0.0, "{line}");
        assert!(line.contains("lost "), "{line}");
    }
    let (stdout, stderr) = ok(&[&udp[..], &["-i", "0"]].concat());
    assert!(lines(&stdout).is_empty(), "-i 0 printed lines:\n{stdout}");
    assert!(lines(&stderr).is_empty(), "-i 0 printed lines:\n{stderr}");
}

#[test]
fn issue38_reverse_with_four_streams_sums_every_interval() {
    let _g = serial();
    let (stdout, stderr) = ok(&[
        "tcp",
        "--target",
        "127.0.0.1",
        "-P",
        "4",
        "-R",
        "-t",
        "2",
        "--no-results",
        "--json",
    ]);
    // With --json on stdout, the lines go to stderr.
    let l = lines(&stderr);
    assert_spans(&l, &[(0.0, 1.0), (1.0, 2.0)]);
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let d = &doc["tests"][0]["directions"][0];
    assert_eq!(d["direction"], "sink_to_gen", "{d}");
    let total = d["receiver_summary"]["rx_bytes"].as_f64().unwrap();
    let mut sum = 0.0;
    for line in &l {
        let got = figure_after(line, "received ");
        assert!(got > 0.0 && figure_after(line, "offered ") > 0.0, "{line}");
        sum += got;
    }
    // The lines round to 3 digits; the last datagrams may land after the
    // last sample.
    assert!(
        (sum - total).abs() <= total * 0.05,
        "lines sum to {sum} B, the test received {total} B:\n{stderr}"
    );
}

#[test]
fn issue38_omit_shows_the_first_second_and_leaves_it_out_of_the_totals() {
    let _g = serial();
    let (stdout, stderr) = ok(&[
        "tcp",
        "--target",
        "127.0.0.1",
        "-t",
        "2",
        "--omit",
        "1",
        "--no-results",
        "--json",
    ]);
    let l = lines(&stderr);
    // As iperf3 -O: the omitted second comes before the 2 counted ones.
    assert_spans(&l, &[(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]);
    assert!(l[0].contains("(omitted)"), "{}", l[0]);
    assert!(l[1..].iter().all(|x| !x.contains("omitted")), "{l:#?}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let t = &doc["tests"][0];
    assert_eq!(t["params"]["omit_s"], 1.0);
    let d = &t["directions"][0];
    let dur = d["duration_s"].as_f64().unwrap();
    assert!((1.5..2.5).contains(&dur), "totals cover {dur} s");
    assert_eq!(d["intervals"][0]["omitted"], true, "{}", d["intervals"][0]);
    // The goodput is of the counted seconds only: below what the whole
    // run received over those seconds.
    let kept = d["rx_l2_bps"].as_f64().unwrap() * dur / 8.0;
    let whole = d["receiver_summary"]["rx_bytes"].as_f64().unwrap();
    assert!(kept < whole, "kept {kept} B of {whole} B");
    // UDP's omitted lines and totals are tested in memory, on the scripted
    // fleet (`src/runner/harness_tests.rs`).
}

#[test]
fn issue38_window_is_set_and_what_the_kernel_gave_recorded() {
    let _g = shared();
    let (stdout, _) = ok(&[
        "tcp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "-w",
        "256K",
        "-i",
        "0",
        "--no-results",
        "--json",
    ]);
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let t = &doc["tests"][0];
    assert_eq!(t["params"]["window_bytes"], 262144);
    let b = &t["directions"][0]["socket_buffers"];
    assert_eq!(b["requested_bytes"], 262144, "{b}");
    // Linux doubles what it is asked.
    for k in ["sender_sndbuf_bytes", "receiver_rcvbuf_bytes"] {
        assert!(b[k].as_u64().unwrap() >= 262144, "{k}: {b}");
    }
}

#[test]
fn issue38_bad_interval_or_window_is_a_usage_error() {
    let _g = crate::util::shared();
    for args in [
        &["tcp", "--target", "127.0.0.1", "-i", "0.01"][..],
        &["tcp", "--target", "127.0.0.1", "-w", "12"],
        &["udp", "--target", "127.0.0.1", "--omit", "900"],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} wrote to stdout");
    }
}

/// The number just before the last `word` in a line (`44758 req/s` →
/// 44758).
fn figure_before(line: &str, word: &str) -> f64 {
    let head = &line[..line.rfind(word).unwrap()];
    head.split_whitespace().last().unwrap().parse().unwrap()
}

#[test]
fn issue38_http_prints_a_line_per_second_with_its_connections_and_requests() {
    let _g = serial();
    // linerate starts its own server; per-second lines by default.
    let http = [
        "http",
        "--size",
        "1K",
        "--target",
        "127.0.0.1",
        "--no-results",
    ];
    let (stdout, _) = ok(&[&http[..], &["-c", "4", "-t", "3"]].concat());
    let l = lines(&stdout);
    assert_spans(&l, &[(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]);
    for line in &l {
        assert!(!line.contains(" -"), "a figure left out: {line}");
        assert!(line.ends_with(" 4 conn"), "{line}");
        assert!(figure_before(line, " req/s") > 0.0, "{line}");
        assert!(figure_after(line, "goodput ") > 0.0, "{line}");
    }
    // A ramp's stages under -i 0.5: half-second lines, each with the
    // connections that ran in it. The line from 0 to 2 over the first
    // second, rounded down, opens connection 0 at 0.5 s (docs/http.md): the
    // first half-second has at most the one that opens at its end, every
    // later one at least that one, and the last all four.
    let (stdout, _) = ok(&[&http[..], &["--ramp-connections", "1s:2,1s:4", "-i", "0.5"]].concat());
    let l = lines(&stdout);
    assert_spans(&l, &[(0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, 2.0)]);
    let conns: Vec<f64> = l.iter().map(|x| figure_before(x, " conn")).collect();
    assert!(l.iter().all(|x| x.ends_with(" conn")), "{l:#?}");
    assert!(conns[0] <= 1.0, "{l:#?}");
    assert!(
        conns[1..].iter().all(|&c| (1.0..=4.0).contains(&c)),
        "{l:#?}"
    );
    assert!(conns[3] > conns[1], "the ramp does not show: {l:#?}");
    assert!(figure_before(&l[3], " req/s") > 0.0, "{l:#?}");
    // A count of requests ends early: the last line says how wide it is.
    let (stdout, _) = ok(&[&http[..], &["-c", "2", "--requests", "2000"]].concat());
    let l = lines(&stdout);
    let (from, to) = span(l.last().unwrap());
    assert!(from == 0.0 && to > 0.0 && to < 1.0, "{l:#?}");
}

/// Starts a one-off `iperf3 -s -1` on a free loopback port and waits until
/// it listens (checked with `ss`, since a probe connection would be its one
/// client). A port taken between choosing and binding ends that server; the
/// next port is tried.
fn one_off_iperf3_server() -> (std::process::Child, u16) {
    use std::time::{Duration, Instant};
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut server = std::process::Command::new("iperf3")
            .args(["-s", "-1", "-B", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("iperf3 -s starts");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = server.try_wait() {
                break;
            }
            let ss = std::process::Command::new("ss")
                .args(["-Htln", &format!("sport = :{port}")])
                .output()
                .expect("ss runs");
            if !String::from_utf8_lossy(&ss.stdout).trim().is_empty() {
                return (server, port);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = server.kill();
        let _ = server.wait();
    }
    panic!("iperf3 -s did not listen on any of five free loopback ports");
}

#[test]
fn issue38_iperf3_client_prints_this_ends_figures_per_second() {
    if !crate::util::require_root() || !crate::iperf3::have_iperf3() {
        return;
    }
    let _g = serial();
    let (mut server, port) = one_off_iperf3_server();
    let target = format!("iperf3://127.0.0.1:{port}");
    let out = run(&[
        "tcp",
        "--server",
        &target,
        "-t",
        "3",
        "--no-results",
        "--json",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let l = lines(&stderr);
    assert_spans(&l, &[(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &doc["tests"][0]["directions"][0];
    let sent = d["sender_summary"]["tx_bytes"].as_f64().unwrap();
    let mut sum = 0.0;
    for line in &l {
        assert!(!line.contains(" -") && line.contains("retr "), "{line}");
        assert!(figure_after(line, "sent ") > 0.0, "{line}");
        sum += figure_after(line, "sent ");
    }
    assert!(
        (sum - sent).abs() <= sent * 0.05,
        "lines sum to {sum} B, the test sent {sent} B:\n{stderr}"
    );
}
