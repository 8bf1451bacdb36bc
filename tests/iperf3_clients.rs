//! Many stock iperf3 clients against one `linerate serve --iperf3
//! --max-clients N` (issue 37): they test at once, each client's bytes
//! agree with its own results, one client too many hears iperf3's "busy",
//! and a client that stalls holds up no other. On the loopback of a
//! namespace of the test's own.

use super::iperf3::{close, dir, have_iperf3, json, num};
use crate::util::{bin, ip, require_root, serial, tempdir};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A namespace with only its loopback up, and what runs in it.
struct Lo {
    ns: String,
    children: Vec<Child>,
}

impl Drop for Lo {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

impl Lo {
    fn new(tag: &str) -> Lo {
        let ns = format!("hmc{}{tag}", std::process::id());
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        Lo {
            ns,
            children: vec![],
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns]).args(args);
        c
    }

    /// `linerate serve --iperf3` on 127.0.0.1:`port` with `args`, its
    /// stderr to `log`; returns once it listens.
    fn serve(&mut self, port: u16, args: &[&str], log: &Path) {
        let listen = format!("127.0.0.1:{port}");
        let mut v = vec![bin(), "serve", "--iperf3", "--listen", &listen];
        v.extend_from_slice(args);
        let child = self
            .command(&v)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .expect("starting linerate serve --iperf3");
        self.children.push(child);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            let out = self
                .command(&["ss", "-Htln", &format!("sport = :{port}")])
                .output()
                .unwrap();
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "linerate serve --iperf3 does not listen on {listen}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    /// `iperf3 -c 127.0.0.1 -p PORT -J ARGS`, started; its -J on stdout.
    fn client(&self, port: u16, args: &[&str]) -> Child {
        let port = port.to_string();
        let mut v = vec!["iperf3", "-c", "127.0.0.1", "-p", &port, "-J"];
        v.extend_from_slice(args);
        self.command(&v)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting iperf3 -c")
    }
}

/// The finished runs in `base` (none `partial`), once there are `want`.
fn runs(base: &Path, want: usize) -> Vec<(PathBuf, Value)> {
    let t0 = Instant::now();
    loop {
        let mut done = vec![];
        for d in std::fs::read_dir(base).unwrap().flatten() {
            let Ok(text) = std::fs::read_to_string(d.path().join("results.json")) else {
                continue;
            };
            let doc: Value = serde_json::from_str(&text).unwrap();
            if doc["status"] != "partial" {
                done.push((d.path(), doc));
            }
        }
        if done.len() >= want {
            return done;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{} of {want} runs finished in {}",
            done.len(),
            base.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What tells the cases of one round apart in linerate's results: the
/// transport, the directions and the client's stream count.
fn shape(doc: &Value) -> String {
    let t = &doc["tests"][0];
    let mut dirs: Vec<&str> = t["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["direction"].as_str().unwrap())
        .collect();
    dirs.sort();
    format!(
        "{} {} {}",
        t["far_end"]["transport"].as_str().unwrap(),
        dirs.join("+"),
        t["far_end"]["streams"].as_array().unwrap().len()
    )
}

/// One client's `iperf3 -J` against its own test in linerate's results,
/// by the rules of `iperf3::stock_iperf3_client_against_linerate_server`.
fn cross_check(name: &str, cli: &Value, doc: &Value) {
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{name}: {t}");
    assert_eq!(t["far_end"]["role"], "client", "{name}");
    let end = &cli["end"];
    match name {
        "udp" => {
            let d = dir(doc, "client_to_server");
            let sent = num(&end["sum"]["packets"]);
            let ours = num(&d["rx_packets"]) + num(&d["lost"]);
            close(sent, ours, 0.05, "udp: client sent vs received + lost here");
            let client_loss = num(&end["sum"]["lost_percent"]);
            assert!(
                (client_loss - num(&d["loss_ratio"]) * 100.0).abs() <= 0.1,
                "udp loss: {client_loss} % vs {}",
                d["loss_ratio"]
            );
        }
        "udp-reverse" => {
            close(
                num(&dir(doc, "server_to_client")["tx_packets"]),
                num(&end["sum"]["packets"]),
                0.05,
                "udp -R: sent here vs the client's count",
            );
            let far_loss = num(&doc["tests"][0]["far_end"]["loss_pct"]);
            let loss = num(&end["sum"]["lost_percent"]);
            assert!(
                (far_loss - loss).abs() <= 0.1,
                "udp -R loss: {far_loss} vs {loss}"
            );
        }
        "reverse" => close(
            num(&dir(doc, "server_to_client")["sender_summary"]["tx_bytes"]),
            num(&end["sum_received"]["bytes"]),
            0.05,
            "-R: sent here vs the client's received",
        ),
        "bidir" => {
            close(
                num(&dir(doc, "client_to_server")["receiver_summary"]["rx_bytes"]),
                num(&end["sum_sent"]["bytes"]),
                0.05,
                "bidir up",
            );
            close(
                num(&dir(doc, "server_to_client")["sender_summary"]["tx_bytes"]),
                num(&end["sum_received_bidir_reverse"]["bytes"]),
                0.05,
                "bidir down",
            );
        }
        _ => {
            let d = dir(doc, "client_to_server");
            let rx = num(&d["receiver_summary"]["rx_bytes"]);
            close(rx, num(&end["sum_sent"]["bytes"]), 0.05, name);
            // iperf3's receiver figure is linerate's, from the exchange.
            close(rx, num(&end["sum_received"]["bytes"]), 0.01, name);
            let n = cli["start"]["test_start"]["num_streams"].as_u64().unwrap();
            assert_eq!(
                d["receiver_summary"]["streams"].as_array().unwrap().len() as u64,
                n,
                "{name}"
            );
        }
    }
}

/// Starts `cases` at once, waits for them, and checks each client's
/// figures against the one run in `base` (not in `seen`) of its shape.
fn round(lo: &Lo, port: u16, base: &Path, seen: &mut Vec<PathBuf>, cases: &[Case]) {
    let started: Vec<Child> = cases.iter().map(|c| lo.client(port, c.args)).collect();
    let outs: Vec<_> = started
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let all = runs(base, seen.len() + cases.len());
    let fresh: Vec<&(PathBuf, Value)> = all.iter().filter(|r| !seen.contains(&r.0)).collect();
    assert_eq!(
        fresh.len(),
        cases.len(),
        "one run per client: {:?}",
        fresh.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    for (c, out) in cases.iter().zip(&outs) {
        let cli = json(out, c.name);
        assert!(
            cli.get("error").is_none(),
            "{}: iperf3 -c says {}",
            c.name,
            cli["error"]
        );
        let mine: Vec<_> = fresh.iter().filter(|r| shape(&r.1) == c.shape).collect();
        assert_eq!(
            mine.len(),
            1,
            "{}: runs of shape {:?}: {:?}",
            c.name,
            c.shape,
            fresh.iter().map(|r| shape(&r.1)).collect::<Vec<_>>()
        );
        cross_check(c.name, &cli, &mine[0].1);
    }
    seen.extend(fresh.iter().map(|r| r.0.clone()));
}

/// Seconds since 1970, to set beside the server's log.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    /// Its test in linerate's results (see [`shape`]).
    shape: &'static str,
}

#[test]
fn many_stock_iperf3_clients_test_at_once_each_with_its_own_results() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _s = serial();
    let mut lo = Lo::new("m");
    let base = tempdir("iperf3-clients");
    let base_s = base.display().to_string();
    let log = base.with_extension("log");
    let port = 5211;
    lo.serve(
        port,
        &["--max-clients", "4", "--results-dir", &base_s],
        &log,
    );
    let mut seen = vec![];
    round(
        &lo,
        port,
        &base,
        &mut seen,
        &[
            Case {
                name: "reverse",
                args: &["-t", "2", "-R", "-P", "2"],
                shape: "tcp server_to_client 2",
            },
            Case {
                name: "udp",
                args: &["-t", "2", "-u", "-b", "20M", "-l", "1400", "-P", "2"],
                shape: "udp client_to_server 2",
            },
        ],
    );
    // Four at once, and a fifth while they run: busy, as from iperf3. The
    // fifth is started beforehand and let go a second into the round: on
    // two busy cores starting `ip netns exec iperf3` took over a second.
    let p = port.to_string();
    let mut fifth = lo
        .command(&["bash", "-c", "read go && exec \"$@\"", "fifth"])
        .args(["iperf3", "-c", "127.0.0.1", "-p", &p, "-t", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut go = fifth.stdin.take().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        let at = unix_now();
        go.write_all(b"go\n").unwrap();
        at
    });
    round(
        &lo,
        port,
        &base,
        &mut seen,
        &[
            Case {
                name: "tcp",
                args: &["-t", "4", "-P", "2", "-b", "2G"],
                shape: "tcp client_to_server 2",
            },
            // Two UDP tests from one address: each takes its own streams.
            Case {
                name: "udp-reverse",
                args: &["-t", "4", "-u", "-R", "-b", "10M", "-l", "1200", "-P", "2"],
                shape: "udp server_to_client 2",
            },
            Case {
                name: "bidir",
                args: &["-t", "4", "--bidir", "-b", "2G"],
                shape: "tcp client_to_server+server_to_client 2",
            },
            Case {
                name: "udp",
                args: &["-t", "4", "-u", "-b", "20M", "-l", "1400"],
                shape: "udp client_to_server 1",
            },
        ],
    );
    let let_go = release.join().unwrap();
    let out = fifth.wait_with_output().unwrap();
    let ended = unix_now();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success() && said.contains("the server is busy running a test"),
        "the fifth client (let go at {let_go:.1}, ended {ended:.1}): {said}"
    );
    // The busy client left no run behind.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(runs(&base, 6).len(), 6);
}

/// A client that connects and says nothing, and one that sends its cookie
/// and then nothing: neither holds up another client's test (the first
/// holds no slot; the second holds its own, for at most 10 s).
#[test]
fn a_stalled_iperf3_client_holds_up_no_other_test() {
    if !require_root() || !have_iperf3() {
        return;
    }
    let _s = crate::util::one_core();
    let mut lo = Lo::new("s");
    let base = tempdir("iperf3-stalled");
    let base_s = base.display().to_string();
    let log = base.with_extension("log");
    let port = 5212;
    lo.serve(
        port,
        &["--max-clients", "2", "--results-dir", &base_s],
        &log,
    );
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    // A valid cookie: 36 of iperf3's characters and a NUL.
    for said in [
        "true",
        "printf 'abcdefghijklmnopqrstuvwxyz2345672345\\0' >&3",
    ] {
        let staller = lo
            .command(&["bash", "-c", &format!("{connect}; {said}; exec sleep 12")])
            .spawn()
            .unwrap();
        lo.children.push(staller);
    }
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let out = lo.client(port, &["-t", "2"]).wait_with_output().unwrap();
    let took = t0.elapsed();
    let cli = json(&out, "the client after the stalled ones");
    assert!(
        cli.get("error").is_none(),
        "iperf3 -c says {}; the server: {}",
        cli["error"],
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // Behind the stalled ones it would have waited their 2 s and 10 s.
    assert!(took < Duration::from_secs(8), "the test took {took:?}");
    let done = runs(&base, 1);
    assert_eq!(done.len(), 1);
    cross_check("tcp", &cli, &done[0].1);
}
