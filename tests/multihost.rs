//! `linerate tcp|udp|run` between ssh hosts (tests/sshd.rs): each host is a
//! namespace with its own sshd, reached over a management veth from the
//! test's namespace. The data plane never uses that veth: every test adds its
//! own veth pairs between the hosts' namespaces (created directly inside
//! them, so no name shows up in the root namespace), with addresses in
//! 198.18.64.0/18, a /24 per link from a per-process counter (clear of the
//! harness's 198.19.128.0/17, the lab's 198.18.1/198.19.0-1 and adhoc's
//! 198.18.10/198.19.10; inside private namespaces, so other processes cannot
//! collide with them anyway).

use crate::sshd::*;
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// `--connect-timeout` of every run here.
const CONNECT_TIMEOUT: u64 = 5;
/// What a failing run may take in all (connect timeout + slack).
const FAIL_WITHIN: Duration = Duration::from_secs(15);

static LINKS: AtomicUsize = AtomicUsize::new(0);
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Data-plane links between hosts' namespaces, removed on drop.
#[derive(Default)]
struct DataPlane {
    /// (namespace, device) of one end of each veth.
    links: Vec<(String, String)>,
}

/// One data-plane link: the address of each end.
struct Link {
    a: String,
    b: String,
}

impl DataPlane {
    /// A veth between host `a`'s and host `b`'s namespaces, a /24 of its own.
    fn link(&mut self, lab: &SshLab, a: usize, b: usize) -> Link {
        let n = LINKS.fetch_add(1, Ordering::Relaxed);
        assert!(n < 64, "out of data-plane blocks");
        let (na, nb) = (&lab.hosts[a].netns, &lab.hosts[b].netns);
        let (da, db) = (format!("dpa{n}"), format!("dpb{n}"));
        let net = format!("198.18.{}", 64 + n);
        ip(&[
            "link", "add", &da, "netns", na, "type", "veth", "peer", "name", &db, "netns", nb,
        ]);
        self.links.push((na.clone(), da.clone()));
        let (aa, ab) = (format!("{net}.1"), format!("{net}.2"));
        for (ns, dev, addr) in [(na, &da, &aa), (nb, &db, &ab)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        Link { a: aa, b: ab }
    }
}

impl Drop for DataPlane {
    fn drop(&mut self) {
        for (ns, dev) in &self.links {
            let _ = Command::new("ip")
                .args(["-n", ns, "link", "del", dev])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A linerate run in the background, its output in files.
struct Run {
    child: Child,
    dir: PathBuf,
    started: Instant,
}

/// What a finished run left.
struct Done {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let dir = tempdir(&format!("mh-run{}", RUNS.fetch_add(1, Ordering::Relaxed)));
        let out = std::fs::File::create(dir.join("stdout")).unwrap();
        let err = std::fs::File::create(dir.join("stderr")).unwrap();
        eprintln!("linerate {}", args.join(" "));
        let child = Command::new(bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("running linerate");
        Run {
            child,
            dir,
            started: Instant::now(),
        }
    }

    /// Waits at most `limit` (then kills it and fails).
    fn wait(mut self, limit: Duration) -> Done {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let took = self.started.elapsed();
                let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
                let done = Done {
                    status,
                    stdout: read("stdout"),
                    stderr: read("stderr"),
                    took,
                };
                eprintln!(
                    "linerate exited {status} after {took:.2?}; stderr:\n{}",
                    done.stderr
                );
                return done;
            }
            if self.started.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
                panic!(
                    "linerate still running after {limit:?}; stderr:\n{}",
                    read("stderr")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Done {
    fn json(&self) -> Value {
        assert!(
            self.status.success(),
            "linerate failed ({}):\n{}",
            self.status,
            self.stderr
        );
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// The ssh flags every run here takes, with this ssh_config.
fn ssh_flags(config: &Path) -> Vec<String> {
    vec![
        "--ssh-config".into(),
        config.to_string_lossy().into(),
        "--connect-timeout".into(),
        CONNECT_TIMEOUT.to_string(),
        "--no-progress".into(),
    ]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Processes in a namespace (`ip netns pids`).
fn netns_pids(ns: &str) -> Vec<u32> {
    let out = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| pid_alive(p))
        .collect()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

/// Asserts that, with the lab still up, nothing of linerate is left: on
/// every host only the sshd listener runs (no session, no agent), and no ssh
/// client or master of the controller uses the lab's files.
fn assert_hosts_idle(lab: &SshLab) {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let mut left = Vec::new();
        for h in &lab.hosts {
            let listener = h.sshd_pid();
            for p in netns_pids(&h.netns) {
                if Some(p) != listener {
                    left.push(format!("{} in {}: {}", p, h.name, cmdline(p)));
                }
            }
            if let Some(l) = listener {
                for p in descendants(l) {
                    if pid_alive(p) {
                        left.push(format!("{p} under sshd of {}: {}", h.name, cmdline(p)));
                    }
                }
            }
        }
        for (p, c) in processes_mentioning(&lab.dir.to_string_lossy()) {
            // sshd listeners name their config in the lab's directory.
            if !lab.hosts.iter().any(|h| h.sshd_pid() == Some(p)) {
                left.push(format!("{p} using the lab: {c}"));
            }
        }
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < end, "left running:\n{}", left.join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn agent_for<'a>(doc: &'a Value, endpoint: &str) -> &'a Value {
    doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["endpoint"] == endpoint)
        .unwrap_or_else(|| panic!("no agent for {endpoint} in {}", doc["agents"]))
}

/// Every agent is an ssh one, connected, with a sane clock.
fn check_ssh_agents(doc: &Value, n: usize) {
    check_ssh_agents_within(doc, n, CONNECT_TIMEOUT as f64);
}

/// [`check_ssh_agents`] with the agent's start allowed `connect_max` s:
/// with `--push` it includes copying the binary (about 90 MB, 7 s over a
/// loopback ssh in a loaded CI run), which no connect timeout bounds.
fn check_ssh_agents_within(doc: &Value, n: usize, connect_max: f64) {
    let agents = doc["agents"].as_array().unwrap();
    assert_eq!(agents.len(), n, "{}", doc["agents"]);
    for a in agents {
        let ep = a["endpoint"].as_str().unwrap();
        assert!(ep.starts_with("ssh://"), "{a}");
        assert!(a["error"].is_null(), "{a}");
        let ssh = f(&a["ssh_connect_s"]);
        let connect = f(&a["connect_s"]);
        let rtt = f(&a["clock_rtt_s"]);
        let off = f(&a["clock_offset_s"]);
        eprintln!(
            "agent {} ({ep}): ssh {ssh:.3} s, connect {connect:.3} s, clock offset {off:+.6} s, rtt {rtt:.6} s",
            a["role"]
        );
        assert!(ssh > 0.0 && ssh < CONNECT_TIMEOUT as f64, "{a}");
        // connect_s counts from spawning the agent command over the
        // already-open master, so it does not include ssh_connect_s.
        assert!(connect > 0.0 && connect < connect_max, "{a}");
        assert!(rtt > 0.0 && rtt < 1.0, "{a}");
        // Same machine, same clock.
        assert!(off.abs() < 0.05, "{a}");
    }
}

/// `tcp`/`udp` from host 0 to host 1 over a fresh data-plane link.
fn two_host_run(lab: &SshLab, target: &str, kind: &str, extra: &[&str]) -> Done {
    let results = tempdir(&format!(
        "mh-results{}",
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let mut v: Vec<String> = [
        kind,
        "--client",
        &lab.url(0),
        "--server",
        &lab.url(1),
        "--target",
        target,
        "-t",
        "2",
        "--json",
        "--results-dir",
        &results.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(ssh_flags(&lab.ssh_config));
    v.extend(extra.iter().map(|s| s.to_string()));
    let done = Run::start(&args(&v)).wait(Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&results);
    done
}

const REMOTE_BINARY: &str = "--remote-binary";

#[test]
fn tcp_between_two_ssh_hosts() {
    if !require_root() || !require_sshd() {
        return;
    }
    let _g = one_core();
    let lab = SshLab::new(2);
    let trace = lab.trace();
    {
        let mut dp = DataPlane::default();
        let l = dp.link(&lab, 0, 1);
        let done = two_host_run(&lab, &l.b, "tcp", &[REMOTE_BINARY, bin()]);
        let doc = done.json();
        assert_eq!(doc["status"], "complete");
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{}", t["error"]);
        let dirs = t["directions"].as_array().unwrap();
        assert_eq!(dirs.len(), 1);
        let d = &dirs[0];
        let rx = d["receiver_summary"]["rx_bytes"].as_u64().unwrap();
        eprintln!("tcp: {rx} bytes, {:.3e} bit/s", f(&d["rx_l2_bps"]));
        // 2 s over a veth: far more than a megabyte.
        assert!(rx > 1_000_000, "{d}");
        assert!(f(&d["rx_l2_bps"]) > 1e6, "{d}");
        check_ssh_agents(&doc, 2);
        agent_for(&doc, &lab.url(0));
        agent_for(&doc, &lab.url(1));
        drop(dp);
        assert_hosts_idle(&lab);
    }
    drop(lab);
    trace.assert_gone();
}

#[test]
fn udp_between_two_ssh_hosts() {
    if !require_root() || !require_sshd() {
        return;
    }
    let _g = one_core();
    let lab = SshLab::new(2);
    let trace = lab.trace();
    {
        let mut dp = DataPlane::default();
        let l = dp.link(&lab, 0, 1);
        let done = two_host_run(
            &lab,
            &l.b,
            "udp",
            &["--rate", "20kpps", REMOTE_BINARY, bin()],
        );
        let doc = done.json();
        assert_eq!(doc["status"], "complete");
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{}", t["error"]);
        let d = &t["directions"][0];
        let tx = d["tx_packets"].as_u64().unwrap();
        let rx = d["rx_packets"].as_u64().unwrap();
        let lost = d["lost"].as_u64().unwrap();
        eprintln!("udp: tx {tx} rx {rx} lost {lost}");
        // 20 kpps for 2 s asked; a debug build on two busy cores may fall
        // short (and says so: tester_limited), but not by much.
        let target = d["tx_target"].as_u64().unwrap();
        assert!((39_000..=41_000).contains(&target), "tx_target {target}");
        assert!(
            tx as f64 >= target as f64 * 0.8 && tx <= target,
            "tx {tx} of {target}"
        );
        if tx < target * 99 / 100 {
            assert_eq!(d["tester_limited"], true, "{d}");
        }
        assert!(rx as f64 >= tx as f64 * 0.95 && rx <= tx, "tx {tx} rx {rx}");
        // A veth between two idle namespaces loses nothing at 20 kpps.
        assert!(lost <= tx / 1000, "lost {lost} of {tx}");
        assert_eq!(lost + rx, tx);
        let checks = t["cross_checks"].as_array().unwrap();
        assert!(!checks.is_empty(), "no cross checks: {t}");
        for c in checks {
            eprintln!("cross check: {c}");
            assert_eq!(c["flagged"], false, "{c}");
        }
        check_ssh_agents(&doc, 2);
        drop(dp);
        assert_hosts_idle(&lab);
    }
    drop(lab);
    trace.assert_gone();
}

/// A run that must fail at login: fast, naming the host, quoting ssh,
/// leaving nothing. Returns stderr.
fn cli_fails(lab: &SshLab, config: &Path, extra: &[&str]) -> String {
    let mut v: Vec<String> = [
        "udp",
        "--client",
        &lab.url(0),
        "--server",
        &lab.url(1),
        "--target",
        &lab.hosts[1].addr.to_string(),
        "-t",
        "2",
        "--no-results",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(ssh_flags(config));
    v.extend(extra.iter().map(|s| s.to_string()));
    let done = Run::start(&args(&v)).wait(Duration::from_secs(60));
    eprintln!("failed after {:.2?}", done.took);
    assert!(!done.status.success(), "succeeded:\n{}", done.stderr);
    assert!(done.took < FAIL_WITHIN, "took {:?}", done.took);
    let e = done.stderr.clone();
    assert!(
        e.contains(&lab.url(0)) || e.contains(&lab.url(1)),
        "does not name the host: {e}"
    );
    assert_hosts_idle(lab);
    e
}

fn quotes_ssh(e: &str) {
    assert!(e.contains("ssh said: \""), "does not quote ssh: {e}");
}

#[test]
fn cli_expired_certificate_fails_fast() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_root() || !require_sshd() {
        return;
    }
    let lab = SshLab::new(2);
    let trace = lab.trace();
    let cert = lab.user_cert("20200101:20200102", "root");
    let config = lab.ssh_config_with("expired", Some(&cert), true);
    let e = cli_fails(&lab, &config, &[REMOTE_BINARY, bin()]);
    quotes_ssh(&e);
    assert!(e.contains("Permission denied (publickey)"), "{e}");
    assert!(e.contains("expired"), "{e}");
    drop(lab);
    trace.assert_gone();
}

#[test]
fn cli_wrong_principal_fails_fast() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_root() || !require_sshd() {
        return;
    }
    let lab = SshLab::new(2);
    let trace = lab.trace();
    let cert = lab.user_cert("-5m:+1h", "alice");
    let config = lab.ssh_config_with("alice", Some(&cert), true);
    let e = cli_fails(&lab, &config, &[REMOTE_BINARY, bin()]);
    quotes_ssh(&e);
    assert!(e.contains("Permission denied (publickey)"), "{e}");
    assert!(e.contains("principals"), "{e}");
    drop(lab);
    trace.assert_gone();
}

#[test]
fn cli_unknown_host_key_fails_fast() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_root() || !require_sshd() {
        return;
    }
    let lab = SshLab::new(2);
    let trace = lab.trace();
    let config = lab.ssh_config_with("no-ca", None, false);
    let e = cli_fails(&lab, &config, &[REMOTE_BINARY, bin()]);
    quotes_ssh(&e);
    assert!(e.contains("Host key verification failed"), "{e}");
    assert!(e.contains("--ssh-accept-new"), "{e}");
    // Nothing was accepted behind our back.
    let known = std::fs::read_to_string(lab.dir.join("known_hosts-empty")).unwrap();
    assert!(known.trim().is_empty(), "{known}");
    drop(lab);
    trace.assert_gone();
}

#[test]
fn cli_missing_linerate_without_push_fails_fast() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_root() || !require_sshd() {
        return;
    }
    let lab = SshLab::new(2);
    let trace = lab.trace();
    let e = cli_fails(&lab, &lab.ssh_config, &[]);
    assert!(e.contains("no linerate on its PATH"), "{e}");
    assert!(e.contains("--push"), "{e}");
    assert!(e.contains("not found"), "{e}");
    drop(lab);
    trace.assert_gone();
}

/// The one pushed copy in host `i`'s cache.
fn pushed(lab: &SshLab, i: usize) -> PathBuf {
    let cache = lab.cache_dir(i).join("linerate");
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .unwrap_or_else(|e| panic!("{}: {e}", cache.display()))
        .flatten()
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let hash = entries[0].file_name().to_string_lossy().to_string();
    assert!(
        hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "{hash}"
    );
    entries[0].path().join("linerate")
}

#[test]
fn push_to_host_without_linerate() {
    if !require_root() || !require_sshd() {
        return;
    }
    let _g = one_core();
    let lab = SshLab::new(2);
    let trace = lab.trace();
    {
        let mut dp = DataPlane::default();
        let l = dp.link(&lab, 0, 1);
        let done = two_host_run(&lab, &l.b, "udp", &["--rate", "10kpps", "--push"]);
        let doc = done.json();
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{}", t["error"]);
        assert!(t["directions"][0]["rx_packets"].as_u64().unwrap() > 15_000);
        check_ssh_agents_within(&doc, 2, 60.0);
        for i in 0..2 {
            let p = pushed(&lab, i);
            assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(bin()).unwrap());
        }
        drop(dp);
        assert_hosts_idle(&lab);
    }
    drop(lab);
    trace.assert_gone();
}

/// Writes `text` as a plan file in `dir`.
fn write_plan(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn plan_two_generators_with_instances() {
    if !require_root() || !require_sshd() {
        return;
    }
    let _g = one_core();
    let lab = SshLab::new(3);
    let trace = lab.trace();
    let dir = tempdir("mh-plan");
    {
        // gen1 ↔ sink and gen2 ↔ sink on their own subnets; the sink's test
        // address sits on its loopback, routed from both generators.
        let mut dp = DataPlane::default();
        let l1 = dp.link(&lab, 0, 2);
        let l2 = dp.link(&lab, 1, 2);
        let n = LINKS.fetch_add(1, Ordering::Relaxed);
        let sink_addr = format!("198.18.{}.1", 64 + n);
        ip(&[
            "-n",
            &lab.hosts[2].netns,
            "addr",
            "add",
            &format!("{sink_addr}/32"),
            "dev",
            "lo",
        ]);
        for (h, l) in [(0, &l1), (1, &l2)] {
            ip(&[
                "-n",
                &lab.hosts[h].netns,
                "route",
                "add",
                &format!("{sink_addr}/32"),
                "via",
                &l.b,
            ]);
        }
        let host = |name: &str, i: usize, addr: &str| {
            format!(
                "[hosts.{name}]\nssh = \"root@{}\"\nlinerate = \"{}\"\naddress = \"{addr}\"\n",
                lab.hosts[i].addr,
                bin()
            )
        };
        let plan = format!(
            "name = \"two-gens\"\n{}{}{}\
             [[test]]\nname = \"udp4\"\nkind = \"udp\"\nfrom = [\"gen1\", \"gen2\"]\nto = \"sink\"\n\
             target = \"{sink_addr}\"\ninstances = 2\nrate = \"5kpps\"\nduration = 2\n\
             [[test]]\nname = \"tcp2\"\nkind = \"tcp\"\nfrom = [\"gen1\", \"gen2\"]\nto = \"sink\"\n\
             streams = 2\nduration = 2\n",
            host("gen1", 0, &l1.a),
            host("gen2", 1, &l2.a),
            host("sink", 2, &sink_addr),
        );
        let plan = write_plan(&dir, "two-gens.toml", &plan);
        let results = dir.join("results");
        let mut v: Vec<String> = vec![
            "run".into(),
            plan.to_string_lossy().into(),
            "--json".into(),
            "--results-dir".into(),
            results.to_string_lossy().into(),
        ];
        v.extend(ssh_flags(&lab.ssh_config));
        let doc = Run::start(&args(&v)).wait(Duration::from_secs(120)).json();
        assert_eq!(doc["status"], "complete", "{}", doc["error"]);
        check_ssh_agents(&doc, 3);
        for i in 0..3 {
            agent_for(&doc, &lab.url(i));
        }

        let t = test_named(&doc, "udp4");
        assert_eq!(t["status"], "ok", "{}", t["error"]);
        let dirs = t["directions"].as_array().unwrap();
        let mut names: Vec<&str> = dirs
            .iter()
            .map(|d| d["direction"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "gen1#1_to_sink",
                "gen1#2_to_sink",
                "gen2#1_to_sink",
                "gen2#2_to_sink"
            ]
        );
        let offsets: Vec<f64> = dirs.iter().map(|d| f(&d["start_offset_s"])).collect();
        let spread = offsets.iter().cloned().fold(f64::MIN, f64::max)
            - offsets.iter().cloned().fold(f64::MAX, f64::min);
        eprintln!("udp start offsets {offsets:?}: spread {spread:.4} s");
        assert!(spread < 0.25, "{offsets:?}");
        let mut rx_sum = 0;
        for d in dirs {
            let tx = d["tx_packets"].as_u64().unwrap();
            let rx = d["rx_packets"].as_u64().unwrap();
            eprintln!("{}: tx {tx} rx {rx} lost {}", d["direction"], d["lost"]);
            // 5 kpps for 2 s each (a busy debug build may fall a little short).
            let target = d["tx_target"].as_u64().unwrap();
            assert!(
                (9_500..=10_500).contains(&target),
                "{}: tx_target {target}",
                d["direction"]
            );
            // A sender that fell short (four senders and a sink on 2
            // cores beside other work) must say so.
            assert!(
                tx as f64 >= target as f64 * 0.8 || d["tester_limited"] == true,
                "{}: tx {tx} of {target}, unsaid: {d}",
                d["direction"]
            );
            assert!(rx as f64 >= tx as f64 * 0.95, "{}: rx {rx}", d["direction"]);
            assert!(d["instance"].as_u64().is_some(), "{d}");
            rx_sum += rx;
        }
        let agg = &t["aggregate"];
        assert_eq!(agg["rx_packets"].as_u64().unwrap(), rx_sum, "{agg}");
        let mut hosts: Vec<&str> = agg["per_host"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["host"].as_str().unwrap())
            .collect();
        hosts.sort();
        assert_eq!(hosts, ["gen1", "gen2"], "{agg}");
        for h in agg["per_host"].as_array().unwrap() {
            assert_eq!(h["instances"], 2, "{h}");
        }
        let per_host_rx: u64 = agg["per_host"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["rx_packets"].as_u64().unwrap())
            .sum();
        assert_eq!(per_host_rx, rx_sum);
        assert!(!agg["intervals"].as_array().unwrap().is_empty(), "{agg}");

        let t = test_named(&doc, "tcp2");
        assert_eq!(t["status"], "ok", "{}", t["error"]);
        let dirs = t["directions"].as_array().unwrap();
        assert_eq!(dirs.len(), 2, "{t}");
        for d in dirs {
            assert_eq!(
                d["sender_summary"]["streams"].as_array().unwrap().len(),
                2,
                "{d}"
            );
            assert!(
                d["receiver_summary"]["rx_bytes"].as_u64().unwrap() > 1_000_000,
                "{d}"
            );
        }
        drop(dp);
        assert_hosts_idle(&lab);
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);
    trace.assert_gone();
}

#[test]
fn plan_unknown_key_is_placed() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    let dir = tempdir("mh-badplan");
    let plan = write_plan(
        &dir,
        "bad.toml",
        "name = \"bad\"\n[hosts.gen]\nlocal = true\n[hosts.sink]\nnetns = \"nowhere\"\naddress = \"198.18.99.1\"\n[[test]]\nkind = \"udp\"\nfrom = \"gen\"\nto = \"sink\"\n  frobnicate = 3\n",
    );
    let out = run(&["run", &plan.to_string_lossy()]);
    let e = String::from_utf8_lossy(&out.stderr);
    eprintln!("{e}");
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains(&format!("{}:11:3:", plan.display())),
        "not placed at the key: {e}"
    );
    assert!(e.contains("frobnicate"), "{e}");
    let plan = write_plan(&dir, "top.toml", "name = \"bad\"\nnmae = \"x\"\n");
    let out = run(&["run", &plan.to_string_lossy()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains(&format!("{}:2:1:", plan.display())), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plan_ssh_table_login_failure_fails_fast() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_root() || !require_sshd() {
        return;
    }
    let lab = SshLab::new(2);
    let trace = lab.trace();
    let dir = tempdir("mh-planfail");
    {
        // The ssh settings come from the plan's [ssh] table, not the CLI.
        let cert = lab.user_cert("20200101:20200102", "root");
        let config = lab.ssh_config_with("plan-expired", Some(&cert), true);
        let plan = write_plan(
            &dir,
            "expired.toml",
            &format!(
                "[ssh]\nconfig = \"{}\"\nconnect_timeout = {CONNECT_TIMEOUT}\nremote_binary = \"{}\"\n\
                 [hosts.gen1]\nssh = \"root@{}\"\n[hosts.sink]\nssh = \"root@{}\"\naddress = \"{}\"\n\
                 [[test]]\nkind = \"udp\"\nfrom = \"gen1\"\nto = \"sink\"\nduration = 2\n",
                config.display(),
                bin(),
                lab.hosts[0].addr,
                lab.hosts[1].addr,
                lab.hosts[1].addr,
            ),
        );
        let results = dir.join("results");
        let done = Run::start(&[
            "run",
            &plan.to_string_lossy(),
            "--no-progress",
            "--results-dir",
            &results.to_string_lossy(),
        ])
        .wait(Duration::from_secs(60));
        assert!(!done.status.success(), "succeeded:\n{}", done.stderr);
        assert!(done.took < FAIL_WITHIN, "took {:?}", done.took);
        let e = &done.stderr;
        assert!(
            e.contains(&format!("root@{}", lab.hosts[0].addr))
                || e.contains(&format!("root@{}", lab.hosts[1].addr)),
            "does not name the host: {e}"
        );
        quotes_ssh(e);
        assert!(e.contains("expired"), "{e}");
        assert_hosts_idle(&lab);
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);
    trace.assert_gone();
}

#[test]
fn cli_unreachable_host_fails_within_connect_timeout() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_root() || !require_sshd() {
        return;
    }
    let mut lab = SshLab::new(0);
    lab.add_host(HostKind::Blackhole);
    lab.add_host(HostKind::Sshd);
    let trace = lab.trace();
    let start = Instant::now();
    let e = cli_fails(&lab, &lab.ssh_config, &[REMOTE_BINARY, bin()]);
    let took = start.elapsed();
    assert!(e.contains(&lab.url(0)), "{e}");
    assert!(e.contains("timed out"), "{e}");
    // It waited for the timeout, not less.
    assert!(
        took >= Duration::from_millis(CONNECT_TIMEOUT * 1000 - 500),
        "{took:?}"
    );
    drop(lab);
    trace.assert_gone();
}

/// A DUT namespace routing 198.18.0.0/24 ↔ 198.19.0.0/24 (the embedded lab's
/// addressing), cabled by two veths to "ports" in an ssh host's namespace.
/// Dropping it deletes the namespace, which destroys both veths.
struct PortDut {
    ns: String,
    ports: [String; 2],
}

impl PortDut {
    fn new(host_ns: &str) -> PortDut {
        let n = LINKS.fetch_add(1, Ordering::Relaxed);
        let p = std::process::id() % 10_000;
        let ns = format!("lrt-pdut-{}-{n}", std::process::id());
        let d = PortDut {
            ns: ns.clone(),
            ports: [format!("lpg{p}x{n}"), format!("lps{p}x{n}")],
        };
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        for (port, far, a4, a6) in [
            (&d.ports[0], "dg", "198.18.0.254/24", "2001:2:0:10::fe/64"),
            (&d.ports[1], "ds", "198.19.0.254/24", "2001:2:0:20::fe/64"),
        ] {
            ip(&[
                "-n", host_ns, "link", "add", port, "type", "veth", "peer", "name", far, "netns",
                &ns,
            ]);
            ip(&["-n", &ns, "addr", "add", a4, "dev", far]);
            ip(&["-n", &ns, "addr", "add", a6, "dev", far, "nodad"]);
            ip(&["-n", &ns, "link", "set", far, "up"]);
            // The port's own state before the lab: what must come back.
            ip(&["-n", host_ns, "link", "set", port, "mtu", "1400"]);
            let own = format!("198.18.{}.5/24", 200 + n % 50);
            ip(&["-n", host_ns, "addr", "add", &own, "dev", port]);
            ip(&["-n", host_ns, "link", "set", port, "up"]);
        }
        // Flow prefixes behind each port, as the embedded lab's DUT routes them.
        ip(&[
            "-n",
            &ns,
            "route",
            "add",
            "198.18.1.0/24",
            "via",
            "198.18.0.1",
        ]);
        ip(&[
            "-n",
            &ns,
            "route",
            "add",
            "198.19.1.0/24",
            "via",
            "198.19.0.1",
        ]);
        let fwd = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ])
            .status()
            .unwrap();
        assert!(fwd.success());
        d
    }

    fn dut_tx_packets(&self) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "cat"])
            .arg("/sys/class/net/ds/statistics/tx_packets")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    }
}

impl Drop for PortDut {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns])
            .stderr(Stdio::null())
            .status();
    }
}

/// What `ip -j addr show` says of a device in a namespace.
fn link_json(ns: &str, dev: &str) -> Value {
    let out = Command::new("ip")
        .args(["-n", ns, "-j", "addr", "show", "dev", dev])
        .output()
        .unwrap();
    assert!(out.status.success(), "{dev} is not back in {ns}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0].clone()
}

#[test]
fn plan_ports_on_an_ssh_host_through_an_external_dut() {
    if !require_root() || !require_sshd() {
        return;
    }
    let _g = one_core();
    let lab = SshLab::new(1);
    let trace = lab.trace();
    let dir = tempdir("mh-plan-ports");
    {
        let host_ns = lab.hosts[0].netns.clone();
        let dut = PortDut::new(&host_ns);
        let before: Vec<Value> = dut.ports.iter().map(|p| link_json(&host_ns, p)).collect();
        // One tester machine with two ports, named twice: a port per host.
        let host = |name: &str, port: &str, extra: &str| {
            format!(
                "[hosts.{name}]\nssh = \"root@{}\"\nlinerate = \"{}\"\nports = [\"{port}\"]\n{extra}",
                lab.hosts[0].addr,
                bin()
            )
        };
        let plan = format!(
            "name = \"ports\"\n{}{}[[test]]\nname = \"udp ports\"\nkind = \"udp\"\nfrom = \"gen\"\n\
             to = \"sink\"\nflow_mode = \"var2\"\nflows = 8\nrate = \"5kpps\"\nduration = 2\n",
            host("gen", &dut.ports[0], ""),
            host("sink", &dut.ports[1], "address = \"198.19.0.1\"\n"),
        );
        let plan = write_plan(&dir, "ports.toml", &plan);
        let results = dir.join("results");
        let mut v: Vec<String> = vec![
            "run".into(),
            plan.to_string_lossy().into(),
            "--json".into(),
            "--results-dir".into(),
            results.to_string_lossy().into(),
        ];
        v.extend(ssh_flags(&lab.ssh_config));
        let doc = Run::start(&args(&v)).wait(Duration::from_secs(120)).json();
        assert_eq!(doc["status"], "complete", "{}", doc["error"]);
        let t = test_named(&doc, "udp ports");
        assert_eq!(t["status"], "ok", "{}", t["error"]);
        let d = &t["directions"][0];
        let rx = d["rx_packets"].as_u64().unwrap();
        assert!(rx > 5_000, "{d}");
        assert_eq!(d["lost"], 0, "{d}");
        // Every packet crossed the DUT's sink-side port.
        assert!(
            dut.dut_tx_packets() >= rx,
            "DUT forwarded {}",
            dut.dut_tx_packets()
        );
        let links = doc["labs"][0]["links"].as_array().unwrap();
        assert_eq!(doc["labs"][0]["dut_mode"], "external");
        assert!(links.iter().all(|l| l["kind"] == "physical"), "{links:?}");
        let recorded: Vec<&str> = links
            .iter()
            .flat_map(|l| l["ports"].as_array().unwrap())
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(recorded, [&dut.ports[0], &dut.ports[1]]);
        assert_eq!(links[0]["ports"][0]["previous_mtu"], 1400);
        // Given back on the remote host, as they were.
        for (p, b) in dut.ports.iter().zip(&before) {
            let now = link_json(&host_ns, p);
            assert_eq!(now["mtu"], 1400, "{p}: {now}");
            assert_eq!(now["mtu"], b["mtu"]);
            let addrs = |v: &Value| -> Vec<String> {
                v["addr_info"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|a| a["scope"] != "link")
                    .map(|a| format!("{}/{}", a["local"], a["prefixlen"]))
                    .collect()
            };
            assert_eq!(addrs(&now), addrs(b), "{p}");
            assert!(now["flags"].to_string().contains("UP"), "{p}: {now}");
        }
        assert_hosts_idle(&lab);
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);
    trace.assert_gone();
}
