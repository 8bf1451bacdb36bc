//! Issue 35, item 4: what this host's kernel lacks, exercised in stock
//! Debian guests, each check failing when the feature was not really
//! used. The DUT's netem impairments (`--dut-delay`, `--dut-jitter`,
//! `--dut-reorder`) run in a `--dut-vm` guest and are refused, with the
//! reason and the fix, on a namespace DUT whose kernel has no sch_netem.

use crate::util::*;
use serde_json::Value;
use std::time::Instant;

/// The guest DUT delays 20 ms ± 5 ms each way and sends 10 % at once:
/// each one-way median is at least delay - jitter, the round trip's at
/// least twice that, the jitter spreads the round trips (p90 - p50 ≥
/// 2.5 ms, where a plain delay keeps them within a fraction of a ms),
/// some probes pass one way without the delay (only reorder sends at
/// once: a round trip below 2 × (delay - jitter)), and the one flow
/// arrives reordered.
#[test]
fn netem_delay_jitter_and_reorder_on_a_dut_vm() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _s = one_core();
    let dir = tempdir("vm-netem");
    let began = Instant::now();
    let out = run(&[
        "lab",
        "--dut-vm",
        "--dut-kernel",
        "debian:bookworm",
        "--vm-accel",
        "tcg",
        "--dut-delay",
        "20ms",
        "--dut-jitter",
        "5ms",
        "--dut-reorder",
        "10",
        "--quick",
        "--duration",
        "2",
        "--only",
        "latency under load",
        "--only",
        "udp 64B one flow",
        "--results-dir",
        dir.to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lab --dut-vm --dut-delay:\n{stderr}");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(only_run_dir(&dir).join("results.json")).unwrap())
            .unwrap();
    let lab = &doc["labs"][0];
    let netem = lab["dut_netem"].as_str().unwrap_or_default();
    assert!(
        netem.contains("delay 20.0 ms ± 5.0 ms") && netem.contains("10 % reordered"),
        "the lab records the impairment: {lab}"
    );
    let modules = lab["vm"]["modules"].to_string();
    assert!(modules.contains("\"sch_netem\""), "{modules}");

    let l = &test_named(&doc, "latency under load tcp")["latency"];
    let idle = l["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "idle")
        .unwrap_or_else(|| panic!("no idle phase: {l}"));
    let (delay, jitter) = (0.020, 0.005);
    let rtt = &idle["rtt_s"];
    let (min, p50, p90) = (f(&rtt["min"]), f(&rtt["p50"]), f(&rtt["p90"]));
    let (fwd, rev) = (f(&idle["forward_s"]["p50"]), f(&idle["reverse_s"]["p50"]));
    eprintln!(
        "netem DUT: RTT min {:.2} p50 {:.2} p90 {:.2} ms; one-way p50 {:.2} / {:.2} ms",
        min * 1e3,
        p50 * 1e3,
        p90 * 1e3,
        fwd * 1e3,
        rev * 1e3
    );
    assert!(fwd >= delay - jitter, "forward one-way p50 {fwd}: {idle}");
    assert!(rev >= delay - jitter, "reverse one-way p50 {rev}: {idle}");
    assert!(p50 >= 2.0 * (delay - jitter), "RTT p50 {p50}: {idle}");
    assert!(p90 - p50 >= 0.0025, "jitter spreads RTTs: {idle}");
    // Without reorder no round trip is shorter than 2 × (delay - jitter).
    assert!(
        min < 2.0 * (delay - jitter),
        "reorder sends some at once: {idle}"
    );

    let udp = test_named(&doc, "udp 64B one flow");
    assert_eq!(udp["status"], "ok", "{udp}");
    let d = &udp["directions"][0];
    let (rx, reordered) = (
        d["rx_packets"].as_u64().unwrap(),
        d["reordered"].as_u64().unwrap(),
    );
    assert!(
        rx > 1000 && reordered > rx / 100,
        "one flow through netem: {d}"
    );
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("netem on a DUT VM: {:.1} s", began.elapsed().as_secs_f64());
}

/// This host's kernel has no sch_netem: the namespace DUT refuses the
/// delay with the reason and the fix, before any test runs. (On a kernel
/// that has it the lab simply runs; then there is nothing to refuse.)
#[test]
fn netem_is_refused_where_the_kernel_lacks_it() {
    if !require_root() {
        return;
    }
    let _s = one_core();
    let has_netem = std::fs::read_to_string("/proc/modules")
        .unwrap_or_default()
        .contains("sch_netem ");
    let out = run(&[
        "lab",
        "--dut-delay",
        "10ms",
        "--quick",
        "--duration",
        "1",
        "--only",
        "tcp 1 stream",
        "--no-results",
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if has_netem || out.status.success() {
        assert!(out.status.success(), "{stderr}");
        eprintln!("this kernel has sch_netem: the namespace DUT delays, nothing to refuse");
        return;
    }
    for want in ["no sch_netem", "--dut-vm", "tc netem"] {
        assert!(stderr.contains(want), "{want}: {stderr}");
    }
    assert!(!stderr.contains("done:"), "no test ran: {stderr}");
    for bad in [
        &["--dut-jitter", "2ms"][..],
        &["--dut-delay", "5ms", "--dut-shape", "20M"],
    ] {
        let mut args = vec!["lab"];
        args.extend_from_slice(bad);
        let out = run(&args);
        assert!(!out.status.success(), "{bad:?}");
    }
}

/// A namespace of the test's, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

/// Two guests `r1` and `r2` (bookworm, TCG) on a bridge `br0` in the
/// namespace `gen`, which holds 198.18.5.2 on it: HTTPS with kTLS served
/// in `r1` and fetched by it, UDP to a VLAN sub-interface `r1`'s socket
/// receiver gets, and TCP between the guests over VLAN 100 (this host's
/// kernel has no 802.1Q, so a TCP end here cannot tag; the bridge passes
/// tagged frames as they are).
fn guest_plan(ns: &str) -> String {
    format!(
        r#"name = "guest features"
[hosts.gen]
netns = "{ns}"
address = "198.18.5.2"
[hosts.r1.vm]
kernel = "debian:bookworm"
cpus = 1
memory = 512
accel = "tcg"
nics = [{{ netns = "{ns}", bridge = "br0", address = "198.18.5.1/24" }}]
[hosts.r2.vm]
kernel = "debian:bookworm"
cpus = 1
memory = 384
accel = "tcg"
nics = [{{ netns = "{ns}", bridge = "br0", address = "198.18.5.3/24" }}]
[[test]]
name = "ktls served by the guest"
kind = "http"
from = "gen"
to = "r1"
ktls = true
duration = 2
connections = 1
size = "1M"
[[test]]
name = "ktls fetched by the guest"
kind = "http"
from = "r1"
to = "gen"
ktls = true
duration = 2
connections = 1
size = "1M"
[[test]]
name = "vlan 100 to the guest's socket"
kind = "udp"
from = "gen"
to = "r1"
vlan = 100
frame_size = 128
rate = "2kpps"
duration = 2
tx_engine = "packet"
rx_engine = "socket"
[[test]]
name = "tcp over vlan 100"
kind = "tcp"
from = "r2"
to = "r1"
vlan = 100
duration = 2
"#
    )
}

/// In a stock Debian guest: kTLS in use on the guest's side of both HTTPS
/// tests (the server's `ktls.in_use`, then the client's; this host's
/// kernel has no tls ULP, so its side must say so, which shows the figure
/// is read per end), and UDP frames tagged 100 by this host's packet
/// engine received by a UDP socket in the guest: its kernel hands them to
/// the socket only through the VLAN sub-interface linerate made there
/// (802.1Q), so every frame counted is a tagged frame the guest untagged.
#[test]
fn ktls_and_a_vlan_sub_interface_in_a_guest() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _s = one_core();
    let began = Instant::now();
    let dir = tempdir("vm-guest-features");
    let ns = Netns(format!("lrf{}", std::process::id() % 100_000));
    ip(&["netns", "add", &ns.0]);
    ip(&["-n", &ns.0, "link", "add", "br0", "type", "bridge"]);
    ip(&["-n", &ns.0, "addr", "add", "198.18.5.2/24", "dev", "br0"]);
    ip(&["-n", &ns.0, "link", "set", "br0", "up"]);
    let file = dir.join("plan.toml");
    std::fs::write(&file, guest_plan(&ns.0)).unwrap();
    let res = dir.join("results");
    let out = run(&[
        "run",
        file.to_str().unwrap(),
        "--results-dir",
        res.to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc: Value = serde_json::from_slice(
        &std::fs::read(only_run_dir(&res).join("results.json")).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("no results ({e}):\n{stderr}"));
    let host_ulp = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .unwrap_or_default()
        .split_whitespace()
        .any(|u| u == "tls");

    let served = test_named(&doc, "ktls served by the guest");
    assert_eq!(served["status"], "ok", "{served}\n{stderr}");
    let h = &served["http"];
    assert!(h["server"]["requests"].as_u64().unwrap_or(0) >= 1, "{h}");
    assert_eq!(h["server"]["ktls"]["requested"], true, "{h}");
    assert_eq!(
        h["server"]["ktls"]["in_use"], true,
        "the guest's server: {h}"
    );
    assert_eq!(
        h["client"]["ktls"]["in_use"], host_ulp,
        "this host's client: {h}"
    );

    let fetched = test_named(&doc, "ktls fetched by the guest");
    assert_eq!(fetched["status"], "ok", "{fetched}\n{stderr}");
    let h = &fetched["http"];
    assert!(h["client"]["requests"].as_u64().unwrap_or(0) >= 1, "{h}");
    assert_eq!(h["client"]["ktls"]["requested"], true, "{h}");
    assert_eq!(
        h["client"]["ktls"]["in_use"], true,
        "the guest's client: {h}"
    );
    assert_eq!(
        h["server"]["ktls"]["in_use"], host_ulp,
        "this host's server: {h}"
    );

    let vlan = test_named(&doc, "vlan 100 to the guest's socket");
    assert_eq!(vlan["status"], "ok", "{vlan}\n{stderr}");
    let d = &vlan["directions"][0];
    assert_eq!(d["receiver_summary"]["rx_engine"], "socket", "{d}");
    let (tx, rx) = (
        d["tx_packets"].as_u64().unwrap(),
        d["rx_packets"].as_u64().unwrap(),
    );
    assert!(
        tx >= 3_000 && rx * 100 >= tx * 99,
        "2 kpps for 2 s, tagged: {d}"
    );
    assert_eq!(vlan["vlan"]["id"], 100, "the test records its VLAN: {vlan}");

    // TCP between the guests: each end on a sub-interface nic0.100 its
    // agent made, every byte sent received.
    let tcp = test_named(&doc, "tcp over vlan 100");
    assert_eq!(tcp["status"], "ok", "{tcp}\n{stderr}");
    assert_eq!(tcp["vlan"]["id"], 100, "{tcp}");
    let devices = tcp["vlan"]["devices"].to_string();
    for want in ["r1: nic0.100", "r2: nic0.100"] {
        assert!(devices.contains(want), "{want}: {devices}");
    }
    let d = &tcp["directions"][0];
    let (sent, got) = (
        d["sender_summary"]["tx_bytes"].as_u64().unwrap_or(0),
        d["receiver_summary"]["rx_bytes"].as_u64().unwrap_or(0),
    );
    assert!(
        sent > 1_000_000 && sent == got,
        "bytes sent {sent}, received {got}: {d}"
    );
    assert_eq!(d["receiver_summary"]["vlan_device"], "nic0.100", "{d}");
    eprintln!(
        "TCP over VLAN 100 between two guests: {:.3} Gbit/s, {sent} bytes sent and received",
        f(&d["rx_l2_bps"]) / 1e9
    );
    assert!(out.status.success(), "{stderr}");
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "kTLS and VLAN in a guest: {:.1} s",
        began.elapsed().as_secs_f64()
    );
}

/// Issue 35: `--dut-bond` makes the VM DUT's gen side `dut0`, an 802.3ad
/// bond of two virtio NICs whose taps share the gen side's bridge. No LACP
/// partner answers there, so one port is the active aggregator and
/// carries everything: its counters account for what the tests moved (TCP
/// goodput's bytes, every UDP datagram the sink counted), the other port
/// next to nothing, and the terminal says it is not load sharing.
#[test]
fn an_802_3ad_bond_on_a_dut_vm_carries_the_tests() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _s = one_core();
    let dir = tempdir("vm-bond");
    let began = Instant::now();
    let out = run(&[
        "lab",
        "--dut-vm",
        "--dut-kernel",
        "debian:bookworm",
        "--vm-accel",
        "tcg",
        "--dut-bond",
        "--quick",
        "--duration",
        "2",
        "--only",
        "tcp 1 stream",
        "--only",
        "udp 64B one flow",
        "--results-dir",
        dir.to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lab --dut-vm --dut-bond:\n{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("dut0: 802.3ad without an LACP partner")
            && stdout.contains("not load sharing"),
        "the terminal's note on the bond:\n{stdout}"
    );
    let doc: Value =
        serde_json::from_slice(&std::fs::read(only_run_dir(&dir).join("results.json")).unwrap())
            .unwrap();
    let lab = &doc["labs"][0];
    assert!(
        lab["vm"]["modules"].to_string().contains("\"bonding\""),
        "{lab}"
    );

    let tcp = test_named(&doc, "tcp 1 stream");
    let (active, other) = bond_ports(tcp);
    let d = &tcp["directions"][0];
    let goodput_bytes = f(&d["rx_l2_bps"]) * f(&d["duration_s"]) / 8.0;
    assert!(goodput_bytes > 1e6, "TCP moved something: {d}");
    assert!(f(&active["rx_bytes"]) >= goodput_bytes, "{active} vs {d}");
    eprintln!(
        "bond, tcp: {:.3} Gbit/s; {} rx {} pkts {} B, {} rx {} pkts",
        f(&d["rx_l2_bps"]) / 1e9,
        active["name"],
        active["rx_packets"],
        active["rx_bytes"],
        other["name"],
        other["rx_packets"]
    );

    let udp = test_named(&doc, "udp 64B one flow");
    let (active, other) = bond_ports(udp);
    let rx = udp["directions"][0]["rx_packets"].as_u64().unwrap();
    let (a_rx, o_rx) = (
        active["rx_packets"].as_u64().unwrap(),
        other["rx_packets"].as_u64().unwrap(),
    );
    assert!(rx > 1000 && a_rx >= rx, "sink {rx}, {active}");
    assert!(
        o_rx * 100 <= a_rx,
        "the other port carries next to nothing: {other}"
    );
    eprintln!(
        "bond, udp: sink {rx} packets; {} rx {a_rx}, {} rx {o_rx}",
        active["name"], other["name"]
    );
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "802.3ad bond on a DUT VM: {:.1} s",
        began.elapsed().as_secs_f64()
    );
}

/// A test through the bond: ok, its `dut_bond` an 802.3ad bond `dut0` of
/// two ports up, without a partner, exactly one port active; (the active
/// port, the other).
fn bond_ports(t: &Value) -> (&Value, &Value) {
    assert_eq!(t["status"], "ok", "{t}");
    let b = &t["dut_bond"];
    assert_eq!(b["name"], "dut0", "{b}");
    assert!(
        b["mode"].as_str().unwrap_or_default().contains("802.3ad"),
        "{b}"
    );
    assert_eq!(
        (&b["mii_status"], &b["lacp_partner"]),
        (&"up".into(), &false.into()),
        "{b}"
    );
    let ports = b["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2, "{b}");
    assert!(ports.iter().all(|p| p["mii_status"] == "up"), "{b}");
    let active: Vec<&Value> = ports.iter().filter(|p| p["active"] == true).collect();
    assert_eq!(active.len(), 1, "one active aggregator: {b}");
    let other = ports.iter().find(|p| p["active"] != true).unwrap();
    (active[0], other)
}

/// `--dut-bond` configures linerate's DUT VM: without `--dut-vm`, or with
/// the user's own router, it is a usage error before anything is built.
#[test]
fn dut_bond_needs_the_dut_vm() {
    let _s = shared();
    for args in [
        &["lab", "--dut-bond", "--quick", "--no-results"][..],
        &[
            "lab",
            "--dut-bond",
            "--dut-image",
            "/nonexistent.qcow2",
            "--no-results",
        ],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--dut-vm"), "{args:?}: {stderr}");
        assert!(!stderr.contains("lab:"), "nothing was built: {stderr}");
    }
}
