//! `linerate lab --gen-port --sink-port`: veth pairs made by the test stand in
//! for NICs. Their near ends (the "ports") live in the test's namespace with
//! an MTU of 1400, an alias and benchmarking addresses; their far ends sit in
//! a test-made DUT namespace that routes between 198.18.0.254/24 and
//! 198.19.0.254/24. The lab must send its traffic through that DUT and give
//! the ports back as they were, on every way a run can end.
//!
//! Only interfaces and namespaces made here are touched; names carry the
//! test process id and a counter, and a Drop guard removes them even when a
//! test panics.

use crate::util::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ip_json(args: &[&str]) -> Value {
    let out = Command::new("ip").args(args).output().expect("running ip");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// Two stand-in ports, and the DUT namespace behind them (if any).
struct Rig {
    gen: String,
    sink: String,
    /// Far ends in the DUT namespace.
    dut_gen: String,
    dut_sink: String,
    ns: Option<String>,
    /// The ports' addresses before the lab (the state to get back).
    gen_addrs: Vec<String>,
    sink_addrs: Vec<String>,
}

impl Rig {
    fn names() -> (u32, [String; 4]) {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::process::id() % 100_000;
        (
            n,
            ["pg", "ps", "dg", "ds"].map(|k| format!("lrt{k}{p}x{n}")),
        )
    }

    /// Ports cabled to a routing DUT namespace.
    fn with_dut() -> Rig {
        let (n, [gen, sink, dut_gen, dut_sink]) = Self::names();
        let ns = format!("lrt-ports-{}-{n}", std::process::id());
        let rig = Rig {
            gen_addrs: vec![
                format!("198.18.{}.1/24", 100 + n),
                format!("2001:2:0:f{n:03}::1/64"),
            ],
            sink_addrs: vec![format!("198.18.{}.1/24", 150 + n)],
            gen,
            sink,
            dut_gen,
            dut_sink,
            ns: Some(ns.clone()),
        };
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        for (port, far, a4, a6) in [
            (
                &rig.gen,
                &rig.dut_gen,
                "198.18.0.254/24",
                "2001:2:0:10::fe/64",
            ),
            (
                &rig.sink,
                &rig.dut_sink,
                "198.19.0.254/24",
                "2001:2:0:20::fe/64",
            ),
        ] {
            ip(&[
                "link", "add", port, "type", "veth", "peer", "name", far, "netns", &ns,
            ]);
            ip(&["-n", &ns, "addr", "add", a4, "dev", far]);
            ip(&["-n", &ns, "addr", "add", a6, "dev", far, "nodad"]);
            ip(&["-n", &ns, "link", "set", far, "up"]);
        }
        // The DUT routes like the embedded lab's: flow prefixes behind each port.
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
        for kv in [
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
            "net.ipv4.conf.all.rp_filter=0",
        ] {
            let ok = Command::new("ip")
                .args(["netns", "exec", &ns, "sysctl", "-qw", kv])
                .status()
                .unwrap();
            assert!(ok.success(), "sysctl {kv} in {ns}");
        }
        rig.dress_ports();
        rig
    }

    /// Two ports cabled to each other (one veth pair, both ends here).
    fn back_to_back() -> Rig {
        let (n, [gen, sink, _, _]) = Self::names();
        let rig = Rig {
            gen_addrs: vec![format!("198.18.{}.1/24", 100 + n)],
            sink_addrs: vec![format!("198.18.{}.1/24", 150 + n)],
            dut_gen: sink.clone(),
            dut_sink: gen.clone(),
            gen,
            sink,
            ns: None,
        };
        ip(&[
            "link", "add", &rig.gen, "type", "veth", "peer", "name", &rig.sink,
        ]);
        rig.dress_ports();
        rig
    }

    /// The state the lab must give back: MTU 1400, an alias, addresses, up.
    fn dress_ports(&self) {
        for (port, addrs) in [(&self.gen, &self.gen_addrs), (&self.sink, &self.sink_addrs)] {
            ip(&["link", "set", "dev", port, "mtu", "1400"]);
            ip(&["link", "set", "dev", port, "alias", "linerate test port"]);
            for a in addrs {
                ip(&["addr", "add", a, "dev", port, "nodad"]);
            }
            ip(&["link", "set", "dev", port, "up"]);
        }
    }

    fn args<'a>(&'a self, base: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec![
            "lab",
            "--gen-port",
            &self.gen,
            "--sink-port",
            &self.sink,
            "--only",
            "udp 64B one flow",
            "--no-progress",
            "--results-dir",
            base,
        ];
        v.extend_from_slice(extra);
        v
    }

    fn here(&self, port: &str) -> bool {
        root_interfaces().iter().any(|i| i == port)
    }

    /// Waits until both ports are back here (a give-back finishes shortly
    /// after the controller exits when it is the agents that restore).
    fn wait_back(&self) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10)
            && !(self.here(&self.gen) && self.here(&self.sink))
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Addresses and up come right after the move; give them a moment.
        std::thread::sleep(Duration::from_millis(300));
    }

    /// Both ports are here with MTU, alias, addresses and up state as before.
    fn assert_restored(&self) {
        self.wait_back();
        for (port, addrs) in [(&self.gen, &self.gen_addrs), (&self.sink, &self.sink_addrs)] {
            assert!(
                self.here(port),
                "port {port} is not back in the test's namespace"
            );
            let link = ip_json(&["-j", "link", "show", "dev", port]);
            let l = &link[0];
            assert_eq!(l["mtu"], 1400, "{port}: {l}");
            assert_eq!(l["ifalias"], "linerate test port", "{port}: {l}");
            assert!(
                l["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
                "{port} is down: {l}"
            );
            let got: Vec<String> = ip_json(&["-j", "addr", "show", "dev", port])[0]["addr_info"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
                .collect();
            for a in addrs {
                assert!(got.contains(a), "{port}: {a} missing, has {got:?}");
            }
            for a in &got {
                assert!(
                    addrs.contains(a) || a.starts_with("fe80:"),
                    "{port}: lab address {a} left behind"
                );
            }
        }
    }

    /// Packets the DUT namespace received on its gen-side port.
    fn dut_rx_packets(&self) -> u64 {
        let ns = self.ns.as_deref().unwrap();
        ip_json(&["-n", ns, "-j", "-s", "link", "show", "dev", &self.dut_gen])[0]["stats64"]["rx"]
            ["packets"]
            .as_u64()
            .unwrap_or(0)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for p in [&self.gen, &self.sink] {
            let _ = Command::new("ip").args(["link", "del", p]).output();
        }
        if let Some(ns) = &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn results(base: &std::path::Path) -> Value {
    let dir = only_run_dir(base);
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

fn check_topology(doc: &Value, rig: &Rig, kind: &str) {
    let lab = doc["labs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["links"][0]["kind"] == "physical")
        .unwrap_or_else(|| panic!("no physical lab in {}", doc["labs"]));
    assert_eq!(lab["kind"], kind);
    let ports: Vec<&Value> = lab["links"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["ports"].as_array().unwrap().iter())
        .collect();
    assert_eq!(ports.len(), 2, "{lab}");
    assert_eq!(ports[0]["name"], rig.gen.as_str());
    assert_eq!(ports[0]["previous_mtu"], 1400);
    assert_eq!(ports[0]["previous_up"], true);
    assert_eq!(ports[0]["previous_alias"], "linerate test port");
    let prev = ports[0]["previous_addresses"].as_array().unwrap();
    assert!(
        prev.iter().any(|a| a == rig.gen_addrs[0].as_str()),
        "{prev:?}"
    );
}

#[test]
fn ports_carry_traffic_through_the_dut_and_are_given_back() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let rig = Rig::with_dut();
    let base = tempdir(&format!("ports-clean-{}", rig.gen));
    let b = base.to_str().unwrap();
    let doc = run_json(&rig.args(b, &["--duration", "1", "--json"]));
    assert_eq!(doc["status"], "complete");
    let t = test_named(&doc, "udp 64B one flow");
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    let rx = d["rx_packets"].as_u64().unwrap();
    assert!(rx > 1000, "rx_packets {rx}");
    // The traffic went through the test's DUT, not around it.
    assert!(
        rig.dut_rx_packets() >= rx,
        "DUT saw {} < {rx}",
        rig.dut_rx_packets()
    );
    check_topology(&doc, &rig, "dut");
    assert_eq!(doc["labs"][0]["dut_mode"], "external");
    rig.assert_restored();
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn back_to_back_ports() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let rig = Rig::back_to_back();
    let base = tempdir(&format!("ports-b2b-{}", rig.gen));
    let b = base.to_str().unwrap();
    let doc = run_json(&rig.args(b, &["--back-to-back", "--duration", "1", "--json"]));
    let t = test_named(&doc, "udp 64B one flow");
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    assert!(t["directions"][0]["rx_packets"].as_u64().unwrap() > 1000);
    check_topology(&doc, &rig, "back_to_back");
    rig.assert_restored();
    let _ = std::fs::remove_dir_all(&base);
}

/// Children of `pid` (its agents).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out
}

/// Starts a 30 s run and returns once both ports are in the lab and traffic
/// flows, with the agents' pids.
fn start(rig: &Rig, base: &std::path::Path) -> (Child, Vec<u32>) {
    let b = base.to_str().unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(rig.args(b, &["--duration", "30"]))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own process group, so "kill everything" reaches the controller
    // and anything else it started in its group.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().unwrap();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) && (rig.here(&rig.gen) || rig.here(&rig.sink)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !rig.here(&rig.gen) && !rig.here(&rig.sink),
        "the lab did not take the ports"
    );
    std::thread::sleep(Duration::from_millis(2500));
    let agents = children(child.id());
    assert_eq!(agents.len(), 2, "gen and sink agents");
    (child, agents)
}

fn kill(sig: &str, target: &str) {
    let ok = Command::new("kill")
        .args([sig, "--", target])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig} {target}");
}

/// `sig` goes to the controller alone, or with `group` to its whole process
/// group as a terminal's Ctrl-C does (the agents, in process groups of
/// their own, do not get it).
fn interrupted_run_gives_ports_back(sig: &str, group: bool) {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let rig = Rig::with_dut();
    let base = tempdir(&format!("ports-{}-{}", &sig[1..], rig.gen));
    let (mut child, agents) = start(&rig, &base);
    assert!(
        rig.dut_rx_packets() > 1000,
        "no traffic through the DUT yet"
    );
    let target = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    kill(sig, &target);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{sig}");
    rig.assert_restored();
    let doc = results(&base);
    assert_eq!(doc["status"], "interrupted");
    check_topology(&doc, &rig, "dut");
    assert_nothing_left(&agents);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn sigint_to_the_controller_gives_ports_back() {
    // interrupted_run_gives_ports_back takes the exclusive lock.
    interrupted_run_gives_ports_back("-INT", false);
}

#[test]
fn ctrl_c_to_the_process_group_gives_ports_back() {
    // interrupted_run_gives_ports_back takes the exclusive lock.
    interrupted_run_gives_ports_back("-INT", true);
}

#[test]
fn sigterm_to_the_controller_gives_ports_back() {
    // interrupted_run_gives_ports_back takes the exclusive lock.
    interrupted_run_gives_ports_back("-TERM", false);
}

/// SIGKILL of the controller alone: its agents get SIGTERM as their
/// parent-death signal and still give the ports back.
#[test]
fn sigkill_of_the_controller_alone_still_gives_ports_back() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let rig = Rig::with_dut();
    let base = tempdir(&format!("ports-kill1-{}", rig.gen));
    let (mut child, agents) = start(&rig, &base);
    kill("-KILL", &child.id().to_string());
    child.wait().unwrap();
    rig.assert_restored();
    assert_nothing_left(&agents);
    let _ = std::fs::remove_dir_all(&base);
}

/// SIGKILL of controller and agents at once: nothing can restore. The
/// namespaces die with the agents; the kernel destroys veth stand-ins (and
/// their peers in the DUT namespace) with them, where a real NIC would come
/// back to the initial namespace down and without addresses.
#[test]
fn sigkill_of_everything_leaves_no_lab_and_destroys_veth_stand_ins() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let rig = Rig::with_dut();
    let base = tempdir(&format!("ports-killall-{}", rig.gen));
    let (mut child, agents) = start(&rig, &base);
    // Everything: the agents, which run in process groups of their own (a
    // terminal's Ctrl-C reaches the controller alone), then the
    // controller's group. Agents first: an agent that outlives its
    // controller gives the ports back (see the controller-alone test).
    for a in &agents {
        kill("-KILL", &a.to_string());
    }
    kill("-KILL", &format!("-{}", child.id()));
    child.wait().unwrap();
    let ns = rig.ns.as_deref().unwrap();
    let t = Instant::now();
    let far_ends = || {
        let v = ip_json(&["-n", ns, "-j", "link", "show"]);
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter(|l| {
                        l["ifname"] == rig.dut_gen.as_str() || l["ifname"] == rig.dut_sink.as_str()
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    while t.elapsed() < Duration::from_secs(10) && far_ends() > 0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(far_ends(), 0, "the DUT namespace's peer ends survived");
    assert!(
        !rig.here(&rig.gen) && !rig.here(&rig.sink),
        "a veth stand-in came back"
    );
    assert_nothing_left(&agents);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_port_in_use_is_refused_without_force() {
    let _g = crate::util::shared();
    if !require_root() {
        return;
    }
    let rig = Rig::back_to_back();
    ip(&["addr", "add", "203.0.113.77/32", "dev", &rig.gen]);
    let base = tempdir(&format!("ports-refuse-{}", rig.gen));
    let out = run(&rig.args(base.to_str().unwrap(), &["--back-to-back"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("port {} has address 203.0.113.77/32", rig.gen))
            && err.contains("--force-port"),
        "{err}"
    );
    // Nothing was taken.
    assert!(rig.here(&rig.gen) && rig.here(&rig.sink));
    let out = run(&[
        "lab",
        "--gen-port",
        &rig.gen,
        "--sink-port",
        &rig.gen,
        "--back-to-back",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("both"),
        "same port twice"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_dut_that_does_not_answer_arp_is_named_and_the_ports_come_back() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let rig = Rig::with_dut();
    let base = tempdir(&format!("ports-noarp-{}", rig.gen));
    let out = run(&rig.args(
        base.to_str().unwrap(),
        &["--dut-gen-addr", "198.18.0.253", "--duration", "1"],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("198.18.0.253 on port {}", rig.gen)) && err.contains("--dut-gen-mac"),
        "{err}"
    );
    rig.assert_restored();
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_missing_port_is_refused() {
    let _g = crate::util::shared();
    let out = run(&[
        "lab",
        "--gen-port",
        "lrtnosuch0",
        "--sink-port",
        "lrtnosuch1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    if is_root() {
        assert!(err.contains("port lrtnosuch0: no such interface"), "{err}");
    }
}
