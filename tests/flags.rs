//! Issue 19 items 6 and 8: one set of flags on every command that produces
//! a result, `--cc` wherever TCP load runs, no `--client-address` where the
//! agent can learn its source address, and completions and man pages made
//! from the clap definitions that the shells and man(1) accept.

use crate::util::*;
use clap::CommandFactory;
use linerate::cli::common::OUTPUT_FLAGS;
use linerate::cli::Cli;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Commands that produce a result: each takes every flag of OUTPUT_FLAGS.
const RESULT_COMMANDS: [&str; 10] = [
    "lab", "tcp", "udp", "http", "latency", "ramp", "search", "run", "monitor", "serve",
];
/// Commands that produce none (tools around the runs).
const OTHER_COMMANDS: [&str; 7] = [
    "doctor",
    "agent",
    "report",
    "schema",
    "completions",
    "man",
    "check",
];
/// Commands that run TCP load: each takes --cc (http and serve: for the
/// server's sockets, which send the bodies).
const TCP_LOAD_COMMANDS: [&str; 5] = ["tcp", "latency", "lab", "http", "serve"];

fn longs(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter_map(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .collect()
}

/// Walks the clap tree: every command is either a result command (and
/// then has the common output flags) or listed as a tool, so a new command
/// cannot slip past; TCP load commands take --cc; no command requires
/// --client-address.
#[test]
fn issue19_every_result_command_takes_the_common_flags() {
    let _g = crate::util::shared();
    // Clap checks its definitions (ids flattened twice, bad references)
    // only in debug builds: check them here too.
    Cli::command().debug_assert();
    let cli = Cli::command();
    let mut missing = Vec::new();
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        assert!(
            RESULT_COMMANDS.contains(&name) || OTHER_COMMANDS.contains(&name),
            "command '{name}' is in neither RESULT_COMMANDS nor OTHER_COMMANDS of tests/flags.rs: \
             say whether it produces a result"
        );
        let have = longs(sub);
        if RESULT_COMMANDS.contains(&name) {
            for flag in OUTPUT_FLAGS {
                if !have.iter().any(|h| h == flag) {
                    missing.push(format!("{name} {flag}"));
                }
            }
        }
        if TCP_LOAD_COMMANDS.contains(&name) && !have.iter().any(|h| h == "--cc") {
            missing.push(format!("{name} --cc"));
        }
        for a in sub.get_arguments() {
            if a.get_long() == Some("client-address") {
                assert!(!a.is_required_set(), "{name} requires --client-address");
            }
        }
    }
    for name in RESULT_COMMANDS.iter().chain(&OTHER_COMMANDS) {
        assert!(
            cli.find_subcommand(name).is_some(),
            "tests/flags.rs lists '{name}', which linerate does not have"
        );
    }
    assert!(missing.is_empty(), "flags missing: {missing:?}");
}

/// Runs `program` with `args`: (success, stderr), or `None` if it cannot start.
fn check(program: &str, args: &[&str]) -> Option<(bool, String)> {
    let out = Command::new(program).args(args).output().ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs man-db when man is missing (the test runs as root in CI).
fn ensure_man() -> bool {
    if have("man") {
        return true;
    }
    if is_root() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "man-db"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
    }
    have("man")
}

#[test]
fn issue19_completions_parse_and_man_pages_render() {
    let _g = crate::util::shared();
    let dir = tempdir("completions");
    // bash must parse the script; zsh and fish where installed.
    for (shell, checker) in [("bash", "bash"), ("zsh", "zsh"), ("fish", "fish")] {
        let out = run(&["completions", shell]);
        assert!(out.status.success(), "completions {shell} failed");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("linerate") && text.contains("results-dir") && text.contains("cc"),
            "the {shell} script names the commands and flags"
        );
        let file = dir.join(format!("linerate.{shell}"));
        std::fs::write(&file, &out.stdout).unwrap();
        if !have(checker) {
            assert_ne!(shell, "bash", "bash is needed to check the bash script");
            eprintln!("skipping the {shell} syntax check: {checker} is not installed");
            continue;
        }
        let (ok, err) = check(checker, &["-n", file.to_str().unwrap()]).unwrap();
        assert!(ok, "{checker} -n rejects the {shell} completions:\n{err}");
    }
    // bash completes a command's flags from the script.
    let file = dir.join("linerate.bash");
    let probe = format!(
        "source {}; COMP_WORDS=(linerate latency --c); COMP_CWORD=2; COMP_LINE='linerate latency --c'; \
         COMP_POINT=${{#COMP_LINE}}; _linerate linerate --c latency; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let words = String::from_utf8_lossy(&out.stdout);
    assert!(
        words.lines().any(|w| w == "--cc") && words.lines().any(|w| w == "--client"),
        "bash completes `linerate latency --c` to its flags: {words:?}"
    );

    // Every visible command has a page; the pages render.
    let man_dir = dir.join("man1");
    let out = run(&["man", "--dir", man_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "man --dir: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut pages = vec!["linerate.1".to_string()];
    for sub in Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
    {
        pages.push(format!("linerate-{}.1", sub.get_name()));
    }
    for p in &pages {
        assert!(man_dir.join(p).is_file(), "no page {p}");
    }
    let stdout_page = run(&["man", "tcp"]);
    assert!(stdout_page.status.success());
    assert_eq!(
        stdout_page.stdout,
        std::fs::read(man_dir.join("linerate-tcp.1")).unwrap(),
        "`linerate man tcp` prints the page --dir writes"
    );
    let bad = run(&["man", "no-such-command"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("pages exist for: lab, tcp"));

    let render = |page: &str| -> Option<(bool, String, String)> {
        let path = man_dir.join(page);
        let out = if ensure_man() {
            Command::new("man")
                .args(["--warnings", "-l"])
                .arg(&path)
                .env("MANPAGER", "cat")
                .env("MANWIDTH", "100")
                .env("LC_ALL", "C")
                .output()
                .ok()?
        } else if have("groff") {
            Command::new("groff")
                .args(["-man", "-Tascii", "-ww"])
                .arg(&path)
                .output()
                .ok()?
        } else {
            return None;
        };
        Some((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    for (page, wants) in [
        ("linerate.1", &["completions", "latency"][..]),
        (
            "linerate-latency.1",
            &["--cc", "--results-dir", "--no-results"][..],
        ),
        ("linerate-serve.1", &["--json", "--listen"][..]),
    ] {
        let Some((ok, text, err)) = render(page) else {
            eprintln!("skipping the man page rendering: neither man (man-db) nor groff is installed, and man-db could not be installed");
            return;
        };
        assert!(ok, "{page} does not render:\n{err}");
        assert!(
            err.trim().is_empty(),
            "{page} renders with warnings:\n{err}"
        );
        for w in wants {
            assert!(text.contains(w), "{page} lacks {w}:\n{text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two namespaces joined by a veth, removed on drop.
struct Pair {
    names: [String; 2],
}

impl Pair {
    fn new() -> Self {
        let p = format!("hfl{}", std::process::id());
        let names = [format!("{p}-c"), format!("{p}-s")];
        let pair = Pair {
            names: names.clone(),
        };
        for n in &names {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", "hc0", "netns", &names[0], "type", "veth", "peer", "name", "hs0",
            "netns", &names[1],
        ]);
        for (n, dev, addr) in [
            (&names[0], "hc0", "198.18.31.1/24"),
            (&names[1], "hs0", "198.18.31.2/24"),
        ] {
            ip(&["-n", n, "addr", "add", addr, "dev", dev]);
            ip(&["-n", n, "link", "set", dev, "up"]);
        }
        pair
    }
    fn ns(&self, i: usize) -> String {
        format!("ns:{}", self.names[i])
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// `latency` between a client and a server namespace, no --client-address:
/// the client's agent learns 198.18.31.1 by its own route lookup and the
/// responder answers there; the TCP load runs with the --cc asked for.
/// A reverse UDP test needs no --client-address either.
#[test]
fn issue19_latency_between_namespaces_learns_the_client_address() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let pair = Pair::new();
    let (client, server) = (pair.ns(0), pair.ns(1));
    let doc = run_json(&[
        "latency",
        "--client",
        &client,
        "--server",
        &server,
        "--target",
        "198.18.31.2",
        "--cc",
        "reno",
        "-t",
        "2",
        "--idle",
        "1",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    assert_eq!(t["params"]["congestion"], "reno", "{}", t["params"]);
    let phases = t["latency"]["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3, "{phases:?}");
    for p in phases {
        let (sent, answered) = (f(&p["sent"]), f(&p["answered"]));
        // 10 ms probes: 100 per idle second; answers all but a few.
        assert!(sent >= 50.0, "phase {}: {sent} probes sent", p["name"]);
        assert!(
            answered >= sent * 0.9,
            "phase {}: {answered} of {sent} answered",
            p["name"]
        );
    }

    let doc = run_json(&[
        "udp",
        "--client",
        &client,
        "--server",
        &server,
        "--target",
        "198.18.31.2",
        "--reverse",
        "--rate",
        "2kpps",
        "-t",
        "1",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    assert!(f(&d["rx_packets"]) >= 1000.0, "reverse UDP arrived: {d}");
}

/// A free TCP port on loopback (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `monitor` and `serve` end with a summary: summary.json in a results
/// directory and the same document on stdout with --json.
#[test]
fn issue19_monitor_and_serve_write_their_summaries() {
    let _g = crate::util::shared();
    let base = tempdir("summaries");
    let results = base.join("results");
    let r = results.to_str().unwrap();
    let out = run(&[
        "monitor",
        "--responder",
        "local=127.0.0.1",
        "--window",
        "1",
        "--probes",
        "10",
        "--duration",
        "3",
        "--out",
        base.join("journal").to_str().unwrap(),
        "--json",
        "--results-dir",
        r,
        "--name",
        "mon",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "monitor failed:\n{err}");
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("monitor --json: stdout is not JSON ({e}); stderr:\n{err}"));
    let t = &doc["targets"][0];
    assert!(t["target"].as_str().unwrap().contains("127.0.0.1"), "{doc}");
    // 10 probes per 1 s window for 3 s over loopback: all but one or two
    // at the run's edges answered, and no probe counted twice.
    let (sent, received, lost) = (f(&t["sent"]), f(&t["received"]), f(&t["lost"]));
    assert!(sent >= 20.0, "{t}");
    assert!(received >= sent - 2.0 && received + lost <= sent, "{t}");
    let dir = only_run_dir(&results);
    assert!(dir.to_string_lossy().ends_with("-mon"), "{}", dir.display());
    let saved: Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(saved, doc, "summary.json is what --json printed");
    std::fs::remove_dir_all(&results).unwrap();

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(bin())
        .args([
            "serve",
            "--listen",
            &listen,
            "--size",
            "100000",
            "--duration",
            "3",
        ])
        .args(["--json", "--no-progress", "--results-dir", r])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        if let Ok(mut s) = std::net::TcpStream::connect(&listen) {
            s.write_all(b"GET /x HTTP/1.1\r\nHost: l\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut b = Vec::new();
            s.read_to_end(&mut b).unwrap();
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "serve did not listen on {listen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        body.len() > 100_000,
        "one 100k download: {} bytes",
        body.len()
    );
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "serve failed:\n{err}");
    assert!(
        err.contains("listening on http://"),
        "the lines go to stderr with --json:\n{err}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("serve --json: stdout is not JSON ({e}); stderr:\n{err}"));
    assert_eq!(doc["summary"]["requests"], 1, "{doc}");
    assert_eq!(doc["summary"]["body_bytes"], 100_000, "{doc}");
    let saved: Value = serde_json::from_slice(
        &std::fs::read(only_run_dir(&results).join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved, doc);

    // --no-results: nothing written.
    std::fs::remove_dir_all(&results).unwrap();
    let out = run(&[
        "monitor",
        "--responder",
        "local=127.0.0.1",
        "--window",
        "1",
        "--duration",
        "1",
        "--out",
        base.join("journal").to_str().unwrap(),
        "--no-results",
        "--results-dir",
        r,
    ]);
    assert!(out.status.success());
    assert!(
        !results.exists(),
        "--no-results wrote {}",
        results.display()
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// The loaded phase's median RTT (s) of `latency --lab` through a DUT
/// shaped to 20 Mbit/s with a 50 ms queue, TCP load with `--cc cc`.
fn shaped_loaded_p50(cc: &str) -> f64 {
    let doc = run_json(&[
        "latency",
        "--lab",
        "--dut-shape",
        "20M,50ms",
        "--load",
        "tcp",
        "--cc",
        cc,
        "-t",
        "4",
        "--idle",
        "1",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    assert_eq!(t["params"]["congestion"], cc, "{}", t["params"]);
    let loaded = t["latency"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "loaded")
        .unwrap();
    f(&loaded["rtt_s"]["p50"])
}

/// `latency --cc`: a loss-based congestion control (reno, built into every
/// kernel) fills the shaped DUT's 50 ms queue, which is what shows
/// bufferbloat; BBR, where the kernel has it, keeps the queue short.
/// Seen here: cubic 41 ms, bbr 7 ms.
#[test]
fn issue19_latency_cc_shows_bufferbloat() {
    if !require_root() {
        return;
    }
    // Shared: a 20 Mbit/s shaper's 50 ms queue fills or not whatever else
    // runs; the lab's namespaces are its own.
    let _g = crate::util::shared();
    let reno = shaped_loaded_p50("reno");
    assert!(
        reno >= 0.020,
        "reno should fill the 50 ms queue: loaded p50 {:.1} ms",
        reno * 1e3
    );
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "bbr") {
        eprintln!("skipping the bbr comparison: bbr is not loaded ({available})");
        return;
    }
    let bbr = shaped_loaded_p50("bbr");
    assert!(
        bbr < reno / 2.0,
        "bbr keeps the queue shorter than reno: {:.1} ms vs {:.1} ms",
        bbr * 1e3,
        reno * 1e3
    );
}

/// `serve --cc` sets the congestion control of the connections it sends
/// bodies on: `ss` shows it on an open download.
#[test]
fn issue19_serve_cc_sets_the_servers_sockets() {
    let _g = crate::util::shared();
    if !require_root() {
        return;
    }
    let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !avail.split_whitespace().any(|c| c == "reno") {
        skip("reno is not among this kernel's congestion controls");
        return;
    }
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut server = Command::new(bin())
        .args([
            "serve",
            "--listen",
            &listen,
            "--size",
            "2G",
            "--cc",
            "reno",
            "--no-results",
            "--no-progress",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A slow download keeps one connection open while ss looks at it.
    let url = format!("http://{listen}/x");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while Instant::now() < deadline {
        let c = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "--limit-rate", "1M", &url])
            .spawn();
        std::thread::sleep(Duration::from_millis(500));
        let ss = Command::new("ss")
            .args([
                "-tinH",
                "state",
                "established",
                "sport",
                "=",
                &format!(":{port}"),
            ])
            .output()
            .unwrap();
        seen = String::from_utf8_lossy(&ss.stdout).to_string();
        if let Ok(mut c) = c {
            let _ = c.kill();
            let _ = c.wait();
        }
        if seen.contains("reno") {
            break;
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(seen.contains("reno"), "ss shows no reno socket: {seen}");
    // The same flag is refused for a server that is not linerate's.
    let out = Command::new(bin())
        .args(["http", "--url", "http://127.0.0.1:1/x", "--cc", "reno"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
