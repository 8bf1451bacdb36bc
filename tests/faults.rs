//! Faults in the middle of a run (issue 22, item 2): an agent killed with
//! SIGKILL (the run fails with exit status 3 naming the host and role, the
//! intervals so far stay readable, the other agents stop, and no XDP
//! program stays on any interface: the kernel detaches BPF links with their
//! owner), the DUT's link down for 2 s (the run goes on, the intervals and
//! the report say so), and an ssh transport that stalls (the controller
//! gives up after the liveness timeout, names the host, leaves nothing).
//! After each, [`HostState`] checks that nothing was left behind.

use crate::sshd::{descendants, processes_mentioning, require_sshd, SshLab};
use crate::util::*;
use crate::xdplive::{in_ns, Lab};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Namespace prefix of these tests (and the soak's, tests/soak.rs).
pub(crate) const PREFIX: &str = "hfa";

/// Host sysctls linerate could change (it changes them only inside the
/// namespaces it makes); they must read the same after every fault.
const SYSCTLS: &[&str] = &[
    "net/ipv4/ip_forward",
    "net/ipv6/conf/all/forwarding",
    "net/ipv4/conf/all/rp_filter",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/netdev_max_backlog",
];

/// What the host looked like before a fault test; [`HostState::assert_clean`]
/// compares it with after.
pub(crate) struct HostState {
    xdp: Vec<String>,
    qdiscs: Vec<(String, String)>,
    sysctls: Vec<(String, String)>,
}

fn text(cmd: &mut Command) -> String {
    let out = cmd.output().expect("running a command");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `ip -j link show` of a namespace (None: the caller's): every interface
/// as JSON.
fn links(ns: Option<&str>) -> Vec<Value> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = text(cmd.args(["-j", "-d", "link", "show"]));
    serde_json::from_str::<Value>(&out)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// Interfaces of a namespace carrying an XDP program, with the program.
pub(crate) fn xdp_attached(ns: Option<&str>) -> Vec<String> {
    links(ns)
        .iter()
        .filter(|l| l.get("xdp").is_some())
        .map(|l| format!("{}: {}", l["ifname"], l["xdp"]))
        .collect()
}

/// Every named network namespace.
fn namespaces() -> Vec<String> {
    text(Command::new("ip").args(["netns", "list"]))
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

impl HostState {
    pub(crate) fn capture() -> HostState {
        let qdiscs = links(None)
            .iter()
            .filter_map(|l| Some((l["ifname"].as_str()?.to_string(), qdisc_of(l))))
            .collect();
        let sysctls = SYSCTLS
            .iter()
            .map(|k| {
                let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default();
                (k.to_string(), v.trim().to_string())
            })
            .collect();
        HostState {
            xdp: xdp_attached(None),
            qdiscs,
            sysctls,
        }
    }

    /// Nothing of a run is left: no namespace of ours, no process that
    /// names one, no new XDP program on a host interface, host qdiscs and
    /// sysctls as they were. Other tests on the machine come and go, so
    /// only interfaces present before and after are compared.
    pub(crate) fn assert_clean(&self, namespaces: &[&str]) {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let mut left = Vec::new();
            for ns in self::namespaces() {
                if namespaces.iter().any(|n| *n == ns) {
                    left.push(format!("namespace {ns}"));
                }
            }
            for ns in namespaces {
                for (pid, cmd) in processes_mentioning(&format!("--netns {ns}")) {
                    left.push(format!("process {pid}: {cmd}"));
                }
            }
            let now = HostState::capture();
            for x in &now.xdp {
                if !self.xdp.contains(x) {
                    left.push(format!("XDP on a host interface: {x}"));
                }
            }
            for (dev, q) in &now.qdiscs {
                if let Some((_, was)) = self.qdiscs.iter().find(|(d, _)| d == dev) {
                    if was != q {
                        left.push(format!("qdisc of {dev}: {was} → {q}"));
                    }
                }
            }
            for ((k, was), (_, v)) in self.sysctls.iter().zip(&now.sysctls) {
                if was != v {
                    left.push(format!("sysctl {k}: {was} → {v}"));
                }
            }
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < end, "left behind:\n{}", left.join("\n"));
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn qdisc_of(link: &Value) -> String {
    link["qdisc"].as_str().unwrap_or("").to_string()
}

/// A linerate run in the background, its output in files.
pub(crate) struct Bg {
    pub(crate) child: Child,
    dir: PathBuf,
}

/// A background run's end.
pub(crate) struct Ended {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Bg {
    pub(crate) fn start(tag: &str, args: &[&str]) -> Bg {
        let dir = tempdir(&format!("faults-{tag}"));
        eprintln!("linerate {}", args.join(" "));
        let child = Command::new(bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .expect("running linerate");
        Bg { child, dir }
    }

    /// Waits at most `limit` for the run to end (then kills it and fails).
    pub(crate) fn wait(mut self, limit: Duration) -> Ended {
        let began = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
                let e = Ended {
                    status,
                    stdout: read("stdout"),
                    stderr: read("stderr"),
                };
                eprintln!("linerate exited {status}; stderr:\n{}", e.stderr);
                return e;
            }
            if began.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let err = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
                panic!("linerate still running after {limit:?}; stderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

/// The pid of the controller's agent in namespace `ns`.
fn agent_in(controller: u32, ns: &str) -> u32 {
    let want = format!("agent --stdio --netns {ns}");
    descendants(controller)
        .into_iter()
        .find(|&p| cmdline(p).contains(&want))
        .unwrap_or_else(|| panic!("no agent in {ns} under {controller}"))
}

fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Waits until `cond` holds, for at most `limit`.
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Complete lines of the run's interval log so far, each checked to be
/// JSON (the log is appended while the run goes).
fn interval_lines(results: &Path) -> Vec<Value> {
    let Ok(mut dirs) = std::fs::read_dir(results) else {
        return vec![];
    };
    let Some(Ok(run)) = dirs.next() else {
        return vec![];
    };
    let text = std::fs::read_to_string(run.path().join("intervals.ndjson")).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..i],
        None => "",
    };
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Kills one agent of a live-engine → XDP-sink run with SIGKILL and checks
/// what the brief asks of that: no XDP left, exit 3 naming the agent, the
/// intervals so far readable, every other agent gone.
fn kill_agent_mid_run(tag: &str, victim: &str) {
    let before = HostState::capture();
    let lab = Lab::with_prefix(PREFIX, tag, false);
    let results = tempdir(&format!("faults-res-{tag}"));
    let (client, server) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let run = Bg::start(
        tag,
        &[
            "udp",
            "--client",
            &client,
            "--server",
            &server,
            "--target",
            "198.18.0.2",
            "-t",
            "30",
            "--rate",
            "20kpps",
            "--tx-engine",
            "live",
            "--rx-engine",
            "xdp",
            "--no-progress",
            "--results-dir",
            &results.to_string_lossy(),
        ],
    );
    // Mid-run: the sink's program attached and intervals arriving.
    wait_for("the XDP sink attached", Duration::from_secs(30), || {
        !xdp_attached(Some(&lab.sink)).is_empty()
    });
    wait_for("two intervals logged", Duration::from_secs(30), || {
        interval_lines(&results).len() >= 4
    });
    eprintln!("sink: {:?}", xdp_attached(Some(&lab.sink)));
    eprintln!("gen: {:?}", xdp_attached(Some(&lab.gen)));
    let (victim_ns, other_ns) = match victim {
        "sink" => (&lab.sink, &lab.gen),
        _ => (&lab.gen, &lab.sink),
    };
    let pid = agent_in(run.child.id(), victim_ns);
    let other = agent_in(run.child.id(), other_ns);
    signal("-KILL", pid);
    let killed = Instant::now();
    // The kernel detached the dead agent's programs with its links.
    wait_for(
        "the killed agent's XDP programs detached",
        Duration::from_secs(2),
        || xdp_attached(Some(victim_ns)).is_empty(),
    );
    eprintln!("{victim}'s XDP gone {:?} after SIGKILL", killed.elapsed());
    let done = run.wait(Duration::from_secs(60));
    eprintln!(
        "controller exited {:?} after the {victim} agent was killed",
        killed.elapsed()
    );
    assert_eq!(done.status.code(), Some(3), "{}", done.stderr);
    let err = done.stderr.lines().last().unwrap_or_default();
    assert!(
        err.contains(&format!("the {victim} agent on ns:{victim_ns} was lost")),
        "the error names neither role nor host: {err}"
    );
    assert!(!pid_alive(other), "the other agent ({other}) still runs");
    // Both namespaces still exist: nothing the agents attached remains.
    assert!(xdp_attached(Some(&lab.gen)).is_empty());
    assert!(xdp_attached(Some(&lab.sink)).is_empty());
    // Partial results: every interval line so far parses, results.json
    // says partial and the test says why.
    let lines = interval_lines(&results);
    assert!(lines.len() >= 4, "{} interval lines", lines.len());
    let dir = only_run_dir(&results);
    let doc: Value = serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap())
        .expect("results.json parses");
    assert_eq!(doc["status"], "partial", "{}", doc["error"]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["error"].as_str().unwrap_or("").contains("was lost"),
        "{t}"
    );
    let names = [lab.gen.clone(), lab.sink.clone()];
    drop(lab);
    let _ = std::fs::remove_dir_all(&results);
    before.assert_clean(&[&names[0], &names[1]]);
}

#[test]
fn sink_agent_killed_mid_run_ends_the_run_with_status_3_and_no_xdp_left() {
    let _g = serial();
    if !require_root() {
        return;
    }
    kill_agent_mid_run("k", "sink");
}

#[test]
fn live_generator_killed_mid_run_leaves_no_xdp_program() {
    let _g = serial();
    if !require_root() {
        return;
    }
    kill_agent_mid_run("j", "gen");
}

#[test]
fn dut_link_down_for_two_seconds_marks_the_intervals_and_the_run_goes_on() {
    // Shared: 20 kpps through its own lab, mostly waiting for the link.
    let _g = shared();
    if !require_root() {
        return;
    }
    let before = HostState::capture();
    let lab = Lab::with_prefix(PREFIX, "l", true);
    let dut = lab.dut.clone().unwrap();
    let results = tempdir("faults-res-l");
    let (client, server) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let run = Bg::start(
        "l",
        &[
            "udp",
            "--client",
            &client,
            "--server",
            &server,
            "--target",
            "198.19.1.2",
            "-t",
            "9",
            "--rate",
            "20kpps",
            "--no-progress",
            "--results-dir",
            &results.to_string_lossy(),
        ],
    );
    // Three seconds of traffic, then the DUT's port toward the sink goes
    // down for two.
    wait_for("three intervals logged", Duration::from_secs(30), || {
        interval_lines(&results).len() >= 6
    });
    in_ns(&dut, &["ip", "link", "set", "lrd1", "down"]);
    std::thread::sleep(Duration::from_secs(2));
    in_ns(&dut, &["ip", "link", "set", "lrd1", "up"]);
    let done = run.wait(Duration::from_secs(60));
    assert_eq!(done.status.code(), Some(0), "{}", done.stderr);
    let doc: Value = serde_json::from_slice(
        &std::fs::read(only_run_dir(&results).join("results.json")).unwrap(),
    )
    .unwrap();
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{t}");
    let d = &t["directions"][0];
    let (tx, rx, lost) = (
        d["tx_packets"].as_u64().unwrap(),
        d["rx_packets"].as_u64().unwrap(),
        d["lost"].as_u64().unwrap(),
    );
    eprintln!("sent {tx}, received {rx}, lost {lost}");
    assert_eq!(tx, rx + lost, "sequence accounting is exact");
    let rx_iv: Vec<&Value> = d["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("receiver").filter(|r| !r.is_null()))
        .collect();
    let marked = |s: &Value| {
        s["links_down"]
            .as_array()
            .is_some_and(|l| l.iter().any(|n| n == "lrs0"))
    };
    for s in &rx_iv {
        eprintln!(
            "{:>5.1} s: {:>6} received, {:>6} lost {}",
            f(&s["t_start"]),
            s["rx_packets"],
            s["lost"],
            s["links_down"]
        );
    }
    let down: Vec<&&Value> = rx_iv.iter().filter(|s| marked(s)).collect();
    let up: Vec<&&Value> = rx_iv.iter().filter(|s| !marked(s)).collect();
    // Two seconds down: two to four one-second intervals, and the one
    // after them, marked; at least one with (next to) nothing received.
    assert!(
        (3..=5).contains(&down.len()),
        "{} marked intervals",
        down.len()
    );
    let best = up
        .iter()
        .map(|s| s["rx_packets"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(
        down.iter()
            .any(|s| s["rx_packets"].as_u64().unwrap() < best / 10),
        "no marked interval without traffic"
    );
    // The loss is counted: at least half a second of what arrived in the
    // best interval, and it lies in the marked intervals.
    assert!(lost >= best / 2, "lost {lost}, best interval {best}");
    let lost_marked: u64 = down.iter().map(|s| s["lost"].as_u64().unwrap()).sum();
    assert!(
        lost_marked >= lost / 2,
        "{lost_marked} of {lost} in marked intervals"
    );
    // The run went on: traffic after the link came back.
    let last_marked = rx_iv.iter().rposition(|s| marked(s)).unwrap();
    let after: u64 = rx_iv[last_marked + 1..]
        .iter()
        .map(|s| s["rx_packets"].as_u64().unwrap())
        .sum();
    assert!(after >= best / 2, "{after} frames after the link came back");
    // The report says so.
    let events = t["link_events"].as_array().expect("link_events");
    assert!(
        events
            .iter()
            .any(|e| e.as_str().unwrap().contains("link down on lrs0")),
        "{events:?}"
    );
    assert!(done.stdout.contains("link down on lrs0"), "{}", done.stdout);
    // The verdict blames the link, not the DUT's forwarding or the tester.
    let b = &t["bottleneck"];
    assert_eq!(b["kind"], "link_down", "{b}");
    assert!(
        b["verdict"].as_str().unwrap().contains("lrs0 at the sink"),
        "{b}"
    );
    let names = [lab.gen.clone(), dut.clone(), lab.sink.clone()];
    drop(lab);
    let _ = std::fs::remove_dir_all(&results);
    before.assert_clean(&[&names[0], &names[1], &names[2]]);
}

/// A data-plane veth between two ssh hosts' namespaces, made inside them.
struct Veth(String);

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["-n", &self.0, "link", "del", "hfav0"])
            .stderr(Stdio::null())
            .status();
    }
}

fn veth(lab: &SshLab) -> Veth {
    let (a, b) = (&lab.hosts[0].netns, &lab.hosts[1].netns);
    let ip = |args: &[&str]| {
        let ok = Command::new("ip").args(args).status().unwrap().success();
        assert!(ok, "ip {}", args.join(" "));
    };
    ip(&[
        "link", "add", "hfav0", "netns", a, "type", "veth", "peer", "name", "hfav1", "netns", b,
    ]);
    ip(&["-n", a, "addr", "add", "198.18.96.1/24", "dev", "hfav0"]);
    ip(&["-n", b, "addr", "add", "198.18.96.2/24", "dev", "hfav1"]);
    ip(&["-n", a, "link", "set", "hfav0", "up"]);
    ip(&["-n", b, "link", "set", "hfav1", "up"]);
    Veth(a.clone())
}

/// Processes in a namespace (`ip netns pids`).
fn netns_pids(ns: &str) -> Vec<u32> {
    text(Command::new("ip").args(["netns", "pids", ns]))
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| pid_alive(p))
        .collect()
}

#[test]
fn stalled_ssh_transport_times_out_naming_the_host_and_leaves_nothing() {
    if !require_root() || !require_sshd() {
        return;
    }
    // Shared: 15 s of waiting for the liveness timeout, in its own hosts.
    let _g = shared();
    let before = HostState::capture();
    let lab = SshLab::new(2);
    let trace = lab.trace();
    let results = tempdir("faults-res-ssh");
    {
        let dp = veth(&lab);
        let config = lab.ssh_config.to_string_lossy().to_string();
        let run = Bg::start(
            "ssh",
            &[
                "udp",
                "--client",
                &lab.url(0),
                "--server",
                &lab.url(1),
                "--target",
                "198.18.96.2",
                "-t",
                "60",
                "--rate",
                "10kpps",
                "--results-dir",
                &results.to_string_lossy(),
                "--remote-binary",
                bin(),
                "--ssh-config",
                &config,
                "--connect-timeout",
                "5",
                "--no-progress",
            ],
        );
        wait_for("two intervals logged", Duration::from_secs(30), || {
            interval_lines(&results).len() >= 4
        });
        // The sink's agent stops dead: its transport carries nothing more,
        // yet nothing closes.
        let sink_ns = &lab.hosts[1].netns;
        let agent = netns_pids(sink_ns)
            .into_iter()
            .find(|&p| cmdline(p).contains("agent --stdio"))
            .expect("the sink host's agent");
        signal("-STOP", agent);
        let stopped = Instant::now();
        let done = run.wait(Duration::from_secs(60));
        let took = stopped.elapsed();
        eprintln!("controller gave up {took:?} after the agent stopped");
        // The liveness timeout is 15 s; the run must not end before it,
        // and not long after.
        assert!(took >= Duration::from_secs(14), "{took:?}");
        assert!(took < Duration::from_secs(40), "{took:?}");
        assert_eq!(done.status.code(), Some(3), "{}", done.stderr);
        let err = done.stderr.lines().last().unwrap_or_default();
        let host = lab.hosts[1].addr.to_string();
        assert!(err.contains(&host), "does not name {host}: {err}");
        assert!(err.contains("silent"), "does not say why: {err}");
        // The stopped agent dies with its ssh session (SIGKILL, which a
        // stopped process takes).
        wait_for("the stopped agent gone", Duration::from_secs(10), || {
            !pid_alive(agent)
        });
        for h in &lab.hosts {
            let listener = h.sshd_pid();
            wait_for("the host idle", Duration::from_secs(10), || {
                netns_pids(&h.netns).iter().all(|&p| Some(p) == listener)
            });
        }
        drop(dp);
    }
    let _ = std::fs::remove_dir_all(&results);
    let names: Vec<String> = lab.hosts.iter().map(|h| h.netns.clone()).collect();
    drop(lab);
    trace.assert_gone();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    before.assert_clean(&names);
}
