//! Issue 23, the first hour as a user: a closed stdout ends quietly, rates
//! need units, durations and host names are read as people write them,
//! flags never do nothing in silence, iperf3 habits get a hint, and
//! `--interval` prints lines off a terminal.

use crate::util::{bin, one_core, run, run_json, shared};
use std::process::Command;

/// Runs linerate with its stdout a pipe whose reader has already gone
/// (`linerate ... | true`, the writer started after `true` exited), and
/// returns its exit status and stderr.
fn with_closed_stdout(args: &[&str]) -> (i32, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"set -o pipefail; { sleep 0.3; exec "$@"; } | true"#)
        .arg("linerate")
        .arg(bin())
        .args(args)
        .output()
        .expect("running bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_quiet(args: &[&str]) {
    let (code, stderr) = with_closed_stdout(args);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("failed printing"),
        "linerate {args:?} with a closed stdout:\n{stderr}"
    );
    assert_eq!(code, 0, "linerate {args:?} with a closed stdout:\n{stderr}");
}

#[test]
fn issue23_closed_stdout_ends_quietly() {
    assert_quiet(&["--help"]);
    assert_quiet(&["tcp", "--help"]);
    assert_quiet(&["schema"]);
    let _g = shared();
    let base = crate::util::tempdir("pipe");
    let b = base.to_str().unwrap();
    let tcp = [
        "tcp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "--no-progress",
        "--results-dir",
        b,
    ];
    assert_quiet(&tcp);
    assert_quiet(&[&tcp[..], &["--json"]].concat());
    assert_quiet(&[&tcp[..], &["--interval", "0.5"]].concat());
    // The results were written before stdout was found closed.
    let run_dir = std::fs::read_dir(&base)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(run_dir.join("results.json").is_file());
    let r = run_dir.to_str().unwrap();
    assert_quiet(&["report", r, "--format", "csv"]);
    let _ = std::fs::remove_dir_all(&base);
}

/// Stderr of a command that must fail with usage status 2 before any run.
fn usage_error(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "linerate {args:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn issue23_rates_need_units() {
    let _g = crate::util::shared();
    let udp = ["udp", "--target", "127.0.0.1", "--rate"];
    let e = usage_error(&[&udp[..], &["100000"]].concat());
    assert!(
        e.contains("a rate needs a unit: 100000pps, 100kpps or 100kbps?"),
        "{e}"
    );
    let e = usage_error(&[&udp[..], &["1.5mpps"]].concat());
    assert!(e.contains("did you mean 1.5Mpps?"), "{e}");
    let e = usage_error(&[&udp[..], &["0pps"]].concat());
    assert!(e.contains("must be above zero"), "{e}");
    let e = usage_error(&["search", "--target", "127.0.0.1", "--max-rate", "5000"]);
    assert!(e.contains("needs a unit"), "{e}");
    let e = usage_error(&["tcp", "--target", "127.0.0.1", "-t", "10x"]);
    assert!(e.contains("500ms, 10s, 2m"), "{e}");
}

#[test]
fn issue23_no_silent_no_ops() {
    let _g = crate::util::shared();
    let e = usage_error(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--flows",
        "8",
        "--flow-mode",
        "one",
    ]);
    assert!(e.contains("--flow-mode ports"), "{e}");
    let e = usage_error(&["tcp", "--target", "127.0.0.1", "--idle", "2"]);
    assert!(e.contains("add --latency"), "{e}");
    let e = usage_error(&["search", "--target", "127.0.0.1", "--dut-loss", "1"]);
    assert!(e.contains("--lab"), "{e}");
    let e = usage_error(&["lab", "--fw-rules", "10"]);
    assert!(e.contains("--dut fw"), "{e}");
    // --cc is checked before anything starts, against this kernel's list.
    let t0 = std::time::Instant::now();
    let e = usage_error(&["tcp", "--target", "127.0.0.1", "--cc", "nosuchcc"]);
    assert!(t0.elapsed().as_secs() < 5, "took {:?}", t0.elapsed());
    assert!(
        e.contains("available:") && e.contains("modprobe tcp_nosuchcc"),
        "{e}"
    );
}

#[test]
fn issue23_iperf3_flags_get_hints() {
    let _g = crate::util::shared();
    for (args, hint) in [
        (&["tcp", "-c", "127.0.0.1"][..], "--target HOST"),
        (
            &["udp", "--target", "127.0.0.1", "--bitrate", "10M"][..],
            "--rate",
        ),
        (
            &["http", "--target", "127.0.0.1", "-b", "10M"][..],
            "requests per second",
        ),
        (
            &["udp", "--target", "127.0.0.1", "-l", "1400"][..],
            "--frame-size",
        ),
        (
            &["tcp", "--target", "127.0.0.1", "-l", "1400"][..],
            "--buffer",
        ),
        (&["tcp", "--target", "127.0.0.1", "-J"][..], "--json"),
        (&["tcp", "--target", "127.0.0.1", "-u"][..], "linerate udp"),
        (&["http", "--target", "127.0.0.1", "-p", "80"][..], "--port"),
    ] {
        let e = usage_error(args);
        assert!(e.contains("tip:") && e.contains(hint), "{args:?}:\n{e}");
    }
}

/// `--flows 8` alone sends 8 flows (ports mode), a host name is resolved
/// and said, `-t 1500ms` is a duration, and `--interval` prints a line
/// per second off a terminal.
#[test]
fn issue23_flows_names_durations_and_intervals() {
    let _g = shared();
    let out = run(&[
        "udp",
        "--target",
        "localhost",
        "-t",
        "2500ms",
        "--rate",
        "5kpps",
        "--flows",
        "8",
        "--rx-engine",
        "socket",
        "--interval",
        "1",
        "--no-results",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("target localhost: using 127.0.0.1"),
        "{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('[')).collect();
    assert!(lines.len() >= 2, "interval lines:\n{stdout}");
    assert!(lines.iter().all(|l| l.contains("received")), "{stdout}");
    let doc = run_json(&[
        "udp",
        "--target",
        "127.0.0.1",
        "-t",
        "1s",
        "--rate",
        "5kpps",
        "--flows",
        "8",
        "--rx-engine",
        "socket",
        "--no-results",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["params"]["flow_mode"], "ports", "{}", t["params"]);
    assert_eq!(t["params"]["flows"], 8, "{}", t["params"]);
    assert_eq!(t["params"]["duration_s"], 1.0, "{}", t["params"]);
    let e = usage_error(&["tcp", "--target", "no-such-host.invalid"]);
    assert!(e.contains("does not resolve"), "{e}");
}

/// `--port` puts the data where asked (the next receiver on the port
/// after it) and results.json says which port each direction used.
#[test]
fn issue23_port_is_used_and_recorded() {
    let _g = shared();
    let doc = run_json(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--client-address",
        "127.0.0.1",
        "--bidir",
        "-t",
        "1",
        "--rate",
        "2kpps",
        "--port",
        "17301",
        "--rx-engine",
        "socket",
        "--no-results",
        "--json",
    ]);
    let dirs = doc["tests"][0]["directions"].as_array().unwrap();
    let ports: Vec<u64> = dirs.iter().map(|d| d["port"].as_u64().unwrap()).collect();
    assert_eq!(ports, vec![17301, 17302], "{doc}");
    assert!(dirs.iter().all(|d| d["rx_packets"].as_u64().unwrap() > 0));
    let doc = run_json(&[
        "tcp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "-p",
        "17311",
        "--no-results",
        "--json",
    ]);
    assert_eq!(doc["tests"][0]["directions"][0]["port"], 17311, "{doc}");
    // A port another program holds is an error that names it.
    let held = std::net::TcpListener::bind("0.0.0.0:17321").unwrap();
    let out = run(&[
        "tcp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "--port",
        "17321",
        "--no-results",
    ]);
    drop(held);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--port 17321"), "{stderr}");
}

/// TCP `--rate` paces each stream in the kernel (SO_MAX_PACING_RATE):
/// 100 Mbit/s over loopback comes out within 10 % of it, with one stream
/// and with the rate shared by four.
#[test]
fn issue23_tcp_rate_paces_goodput() {
    let _g = one_core();
    for streams in ["1", "4"] {
        let doc = run_json(&[
            "tcp",
            "--target",
            "127.0.0.1",
            "-t",
            "3",
            "--rate",
            "100M",
            "-P",
            streams,
            "--no-results",
            "--json",
        ]);
        let t = &doc["tests"][0];
        assert_eq!(t["params"]["rate_bps"], 1e8, "{}", t["params"]);
        let goodput = t["directions"][0]["rx_l2_bps"].as_f64().unwrap();
        assert!(
            (goodput - 100e6).abs() < 10e6,
            "-P {streams}: {:.1} Mbit/s at --rate 100M",
            goodput / 1e6
        );
    }
    let e = usage_error(&["tcp", "--target", "127.0.0.1", "--rate", "10kpps"]);
    assert!(e.contains("paces bytes"), "{e}");
}

/// The table fits COLUMNS (80, 100), says what it left out, and `--wide`
/// prints every column; without a width (a pipe) nothing is cut.
#[test]
fn issue23_tables_fit_the_width_and_wide_shows_all() {
    let _g = shared();
    let table = |columns: Option<&str>, extra: &[&str]| {
        let mut c = Command::new(bin());
        c.args([
            "udp",
            "--target",
            "127.0.0.1",
            "--rate",
            "2kpps",
            "-t",
            "1",
            "--no-results",
            "--no-progress",
        ])
        .args(extra)
        .env_remove("COLUMNS");
        if let Some(w) = columns {
            c.env("COLUMNS", w);
        }
        let out = c.output().expect("running linerate");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let piped = table(None, &[]);
    let widest = piped.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(
        widest > 100,
        "a pipe gets the whole table: {widest}\n{piped}"
    );
    assert!(piped.contains("CPU sink %"), "{piped}");
    for w in [80usize, 100] {
        let out = table(Some(&w.to_string()), &[]);
        for l in out.lines() {
            assert!(l.chars().count() <= w, "COLUMNS={w}: {l:?}\n{out}");
        }
        assert!(out.contains("Received pps"), "{out}");
        assert!(out.contains("Left out to fit"), "{out}");
    }
    let wide = table(Some("80"), &["--wide"]);
    assert!(wide.contains("CPU sink %"), "{wide}");
    assert!(!wide.contains("Left out to fit"), "{wide}");
}
