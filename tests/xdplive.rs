//! The live-frames TX engine (issue 16): frames written by gen.bpf.c and
//! sent with BPF_PROG_RUN live frames between namespaces these tests build
//! must all arrive, with checksums the sink's kernel accepts, directly and
//! through a forwarding DUT that rewrites them in place; a veth peer that
//! would drop them silently is refused; auto falls back when BPF is.

use crate::util::*;
use serde_json::Value;
use std::process::Command;

fn sh(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn in_ns(ns: &str, cmd: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .expect("running ip netns exec");
    assert!(
        out.status.success(),
        "{ns}: {}: {}",
        cmd.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mac(ns: &str, dev: &str) -> String {
    let v: Value = serde_json::from_str(&in_ns(ns, &["ip", "-j", "link", "show", dev])).unwrap();
    v[0]["address"].as_str().unwrap().to_string()
}

/// gen ─ veth ─ sink, or gen ─ veth ─ dut ─ veth ─ sink with the DUT
/// routing; static neighbours (the frame-building engines run no ARP).
/// Dropping it deletes the namespaces and with them the veths.
pub(crate) struct Lab {
    pub(crate) gen: String,
    pub(crate) dut: Option<String>,
    pub(crate) sink: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [Some(&self.gen), self.dut.as_ref(), Some(&self.sink)]
            .into_iter()
            .flatten()
        {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn link(a: &str, a_dev: &str, b: &str, b_dev: &str) {
    sh(&[
        "link", "add", a_dev, "netns", a, "type", "veth", "peer", "name", b_dev, "netns", b,
    ]);
    for (ns, dev) in [(a, a_dev), (b, b_dev)] {
        sh(&["-n", ns, "link", "set", dev, "up"]);
    }
}

fn addr(ns: &str, dev: &str, cidr: &str) {
    sh(&["-n", ns, "addr", "add", cidr, "dev", dev, "nodad"]);
}

fn neigh(ns: &str, dev: &str, ip: &str, lladdr: &str) {
    sh(&[
        "-n",
        ns,
        "neigh",
        "replace",
        ip,
        "lladdr",
        lladdr,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
}

impl Lab {
    fn new(tag: &str, routed: bool) -> Lab {
        Lab::with_prefix("lrl", tag, routed)
    }

    /// The lab in namespaces named `{prefix}{pid}{tag}` + g, d, s.
    pub(crate) fn with_prefix(prefix: &str, tag: &str, routed: bool) -> Lab {
        let p = format!("{prefix}{}{tag}", std::process::id() % 100_000);
        let lab = Lab {
            gen: format!("{p}g"),
            dut: routed.then(|| format!("{p}d")),
            sink: format!("{p}s"),
        };
        for ns in [Some(&lab.gen), lab.dut.as_ref(), Some(&lab.sink)]
            .into_iter()
            .flatten()
        {
            sh(&["netns", "add", ns]);
            sh(&["-n", ns, "link", "set", "lo", "up"]);
        }
        let (g, s) = (&lab.gen, &lab.sink);
        match &lab.dut {
            None => {
                link(g, "lrg0", s, "lrs0");
                addr(g, "lrg0", "198.18.0.1/24");
                addr(s, "lrs0", "198.18.0.2/24");
                addr(g, "lrg0", "2001:2::1/64");
                addr(s, "lrs0", "2001:2::2/64");
                let (gm, sm) = (mac(g, "lrg0"), mac(s, "lrs0"));
                for ip in ["198.18.0.2", "2001:2::2"] {
                    neigh(g, "lrg0", ip, &sm);
                }
                for ip in ["198.18.0.1", "2001:2::1"] {
                    neigh(s, "lrs0", ip, &gm);
                }
            }
            Some(d) => {
                link(g, "lrg0", d, "lrd0");
                link(d, "lrd1", s, "lrs0");
                addr(g, "lrg0", "198.18.1.1/24");
                addr(d, "lrd0", "198.18.1.2/24");
                addr(d, "lrd1", "198.19.1.1/24");
                addr(s, "lrs0", "198.19.1.2/24");
                sh(&[
                    "-n",
                    g,
                    "route",
                    "add",
                    "198.19.1.0/24",
                    "via",
                    "198.18.1.2",
                ]);
                sh(&[
                    "-n",
                    s,
                    "route",
                    "add",
                    "198.18.1.0/24",
                    "via",
                    "198.19.1.1",
                ]);
                in_ns(d, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
                neigh(g, "lrg0", "198.18.1.2", &mac(d, "lrd0"));
                neigh(d, "lrd0", "198.18.1.1", &mac(g, "lrg0"));
                neigh(d, "lrd1", "198.19.1.2", &mac(s, "lrs0"));
                neigh(s, "lrs0", "198.19.1.1", &mac(d, "lrd1"));
                // NAPI on the DUT's ingress: without it XDP frames vanish.
                in_ns(d, &["ethtool", "-K", "lrd0", "gro", "on"]);
            }
        }
        lab
    }

    fn gro(&self, on: bool) {
        let ns = self.dut.as_ref().unwrap_or(&self.sink);
        let dev = if self.dut.is_some() { "lrd0" } else { "lrs0" };
        in_ns(
            ns,
            &["ethtool", "-K", dev, "gro", if on { "on" } else { "off" }],
        );
    }

    fn udp(
        &self,
        target: &str,
        engine: &str,
        rate: Option<&str>,
        size: &str,
        secs: &str,
    ) -> std::process::Output {
        let (client, server) = (format!("ns:{}", self.gen), format!("ns:{}", self.sink));
        let mut args = vec![
            "udp",
            "--client",
            &client,
            "--server",
            &server,
            "--target",
            target,
            "--tx-engine",
            engine,
            // These tests are about the sender and the socket receiver's
            // NAPI (GRO); the XDP sink's are in tests/xdprx.rs.
            "--rx-engine",
            "socket",
            "--frame-size",
            size,
            "--duration",
            secs,
            "--no-results",
            "--no-progress",
            "--json",
        ];
        if let Some(r) = rate {
            args.extend(["--rate", r]);
        }
        run(&args)
    }

    fn udp_json(
        &self,
        target: &str,
        engine: &str,
        rate: Option<&str>,
        size: &str,
        secs: &str,
    ) -> Value {
        let out = self.udp(target, engine, rate, size, secs);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    }

    /// UDP InCsumErrors of the sink's namespace (IPv4 and IPv6 summed).
    fn csum_errors(&self) -> u64 {
        let v4 = in_ns(&self.sink, &["cat", "/proc/net/snmp"]);
        let mut lines = v4.lines().filter(|l| l.starts_with("Udp:"));
        let (h, v) = (lines.next().unwrap(), lines.next().unwrap());
        let i = h
            .split_whitespace()
            .position(|w| w == "InCsumErrors")
            .unwrap();
        let n4: u64 = v.split_whitespace().nth(i).unwrap().parse().unwrap();
        let v6 = in_ns(&self.sink, &["cat", "/proc/net/snmp6"]);
        let n6: u64 = v6
            .lines()
            .find(|l| l.starts_with("Udp6InCsumErrors"))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(|n| n.parse().unwrap())
            .unwrap_or(0);
        n4 + n6
    }
}

pub(crate) fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Runs the live engine and checks every frame arrived; returns tx.
fn exact(lab: &Lab, target: &str, rate: Option<&str>, size: &str) -> u64 {
    let doc = lab.udp_json(target, "live", rate, size, "2");
    let t = &doc["tests"][0];
    assert_eq!(
        t["status"], "ok",
        "{target} {size} {rate:?}: {}",
        t["error"]
    );
    let d = &t["directions"][0];
    assert_eq!(d["sender_summary"]["tx_engine"], "live", "{d}");
    let (tx, rx) = (u(&d["tx_packets"]), u(&d["rx_packets"]));
    assert!(tx > 1000, "{target} {size} {rate:?}: only {tx} frames sent");
    let lost = u(&d["lost"]);
    if rate.is_some() {
        assert_eq!(
            rx, tx,
            "{target} {size} {rate:?}: every frame sent must be received"
        );
        assert_eq!(lost, 0, "{d}");
    } else {
        // Unpaced, the generator outruns the sink's socket receiver on
        // two shared cores (the veth ring overflows before the socket), so
        // only the accounting is exact: every frame sent is received or
        // counted lost, none twice. Exact delivery at full speed needs the
        // XDP sink (--rx-engine xdp).
        assert_eq!(rx + lost, tx, "{target} {size}: {d}");
        assert_eq!(u(&d["duplicates"]), 0, "{d}");
    }
    let errors = u(&d["sender_summary"]["tx_errors"]);
    eprintln!("live {target} {size} {rate:?}: {tx} sent, {rx} received, {errors} send errors");
    tx
}

#[test]
fn live_frames_all_arrive_at_several_rates_sizes_and_ip_versions() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let lab = Lab::new("a", false);
    lab.gro(true);
    let before = lab.csum_errors();
    for (target, rate, size) in [
        ("198.18.0.2", Some("50kpps"), "64"),
        ("198.18.0.2", None, "64"),
        ("198.18.0.2", Some("20kpps"), "1518"),
        ("198.18.0.2", None, "imix"),
        ("2001:2::2", Some("50kpps"), "84"),
        ("2001:2::2", None, "1518"),
    ] {
        exact(&lab, target, rate, size);
    }
    assert_eq!(
        lab.csum_errors(),
        before,
        "the sink's kernel found bad UDP checksums"
    );
}

#[test]
fn a_veth_peer_without_napi_is_refused_and_auto_falls_back() {
    let _g = shared();
    if !require_root() {
        return;
    }
    let lab = Lab::new("b", false);
    lab.gro(false);
    let out = lab.udp("198.18.0.2", "live", Some("10kpps"), "64", "0.5");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("lrg0") && text.contains("gro on") && text.contains("silently"),
        "the refusal names the interface and the fix: {text}"
    );
    // Unpaced: auto tries live first (paced runs keep the packet engine).
    let doc = lab.udp_json("198.18.0.2", "auto", None, "64", "0.5");
    let s = &doc["tests"][0]["directions"][0]["sender_summary"];
    assert_eq!(s["tx_engine"], "packet", "{s}");
    let note = s["tx_engine_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("live refused") && note.contains("NAPI"),
        "{note}"
    );
}

#[test]
fn auto_falls_back_to_packet_when_bpf_is_refused() {
    let _g = one_core();
    if !require_root() {
        return;
    }
    let lab = Lab::new("c", false);
    lab.gro(true);
    // LINERATE_XDP_DENY makes the loader refuse as a kernel without BPF
    // permission would; the agents inherit it from the controller.
    let (client, server) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let denied = |engine: &str, rate: &[&str]| {
        Command::new(bin())
            .env("LINERATE_XDP_DENY", "1")
            .args([
                "udp",
                "--client",
                &client,
                "--server",
                &server,
                "--target",
                "198.18.0.2",
                "--tx-engine",
                engine,
                "--duration",
                "0.5",
                "--no-results",
                "--no-progress",
                "--json",
            ])
            .args(rate)
            .output()
            .unwrap()
    };
    // Unpaced, auto tries live first and says why it could not.
    let out = denied("auto", &[]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &doc["tests"][0]["directions"][0];
    assert_eq!(d["sender_summary"]["tx_engine"], "packet", "{d}");
    let note = d["sender_summary"]["tx_engine_note"]
        .as_str()
        .unwrap_or_default();
    assert!(
        note.contains("live refused") && note.contains("LINERATE_XDP_DENY"),
        "{note}"
    );
    assert_eq!(
        u(&d["rx_packets"]) + u(&d["tester_drops"]) + u(&d["dut_lost"]),
        u(&d["tx_packets"]),
        "{d}"
    );
    // Paced, auto keeps the packet engine and says why; every frame arrives.
    let out = denied("auto", &["--rate", "10kpps"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &doc["tests"][0]["directions"][0];
    assert_eq!(d["sender_summary"]["tx_engine"], "packet", "{d}");
    let note = d["sender_summary"]["tx_engine_note"]
        .as_str()
        .unwrap_or_default();
    assert!(note.contains("live is used from 50 kpps"), "{note}");
    assert_eq!(u(&d["rx_packets"]), u(&d["tx_packets"]));
    // Asked for by name, the refusal is an error that says what to do.
    let out = denied("live", &["--rate", "10kpps"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("live engine cannot run here") && text.contains("--tx-engine packet"),
        "{text}"
    );
}

#[test]
fn a_forwarding_dut_gets_correct_frames_for_ten_seconds() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let lab = Lab::new("d", true);
    let before = lab.csum_errors();
    let doc = lab.udp_json("198.19.1.2", "live", Some("50kpps"), "64", "10");
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    assert_eq!(d["sender_summary"]["tx_engine"], "live", "{d}");
    let (tx, rx, lost) = (u(&d["tx_packets"]), u(&d["rx_packets"]), u(&d["lost"]));
    assert!(tx > 100_000, "{tx} frames in 10 s at 50 kpps");
    // The DUT rewrites MACs, TTL and checksum in the recycled pages; a
    // generator that did not rewrite every header would lose nearly all.
    assert_eq!(rx + lost, tx, "{d}");
    // A loaded host's DUT namespace drops some on its own (4 % beside two
    // builds); a bad rewrite loses nearly all.
    assert!(
        lost as f64 <= tx as f64 * 0.1,
        "{lost} of {tx} lost through the DUT"
    );
    assert_eq!(
        lab.csum_errors(),
        before,
        "malformed frames reached the sink"
    );
}

#[test]
fn several_flows_on_two_threads_keep_their_own_sequences() {
    let _g = one_core();
    if !require_root() {
        return;
    }
    let lab = Lab::new("e", false);
    lab.gro(true);
    let (client, server) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let doc = run_json(&[
        "udp",
        "--client",
        &client,
        "--server",
        &server,
        "--target",
        "198.18.0.2",
        "--tx-engine",
        "live",
        "--flow-mode",
        "ports",
        "--flows",
        "16",
        "--threads",
        "2",
        "--rate",
        "20kpps",
        "--duration",
        "2",
        "--no-results",
        "--no-progress",
        "--json",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    let s = &d["sender_summary"];
    assert_eq!(s["tx_engine"], "live", "{s}");
    assert_eq!(s["per_thread"].as_array().map(Vec::len), Some(2), "{s}");
    let (tx, rx) = (u(&d["tx_packets"]), u(&d["rx_packets"]));
    assert!(tx > 1000, "only {tx} frames sent");
    assert_eq!(rx, tx, "{d}");
    // Each flow's sequence is its own: no loss, duplicate or reorder per
    // flow, and every flow of the 16 carried frames.
    let flows = d["receiver_summary"]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 16, "{d}");
    for f in flows {
        assert!(u(&f["rx_packets"]) > 0, "{f}");
        assert_eq!(
            (u(&f["lost"]), u(&f["duplicates"]), u(&f["reordered"])),
            (0, 0, 0),
            "{f}"
        );
    }
}
