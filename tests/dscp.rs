//! DSCP marking (`--dscp`, `dscp = "..."` in a plan) and the sink's counts
//! per DSCP: every engine writes the asked value (a capture on the
//! server's link reads the IPv4 TOS byte and IPv6 traffic class of what
//! arrived), the receivers count what arrived per value, and a lab DUT
//! that remarks (`dut_remark`) is counted as remarked.

use crate::util::{ip, one_core, require_root, run, shared, skip, tempdir, NsPair};
use serde_json::Value;
use std::process::{Command, Stdio};

fn have_tcpdump() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the plan `toml` (written to a file) with `--json`; the document
/// and linerate's stderr. The plan must succeed.
fn run_plan(name: &str, toml: &str) -> (Value, String) {
    let dir = tempdir(name);
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, toml).unwrap();
    let out = run(&[
        "run",
        plan.to_str().unwrap(),
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "linerate run failed:\n{stderr}");
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let _ = std::fs::remove_dir_all(dir);
    (doc, stderr)
}

fn test_named<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let t = crate::util::test_named(doc, name);
    assert_eq!(t["status"], "ok", "{name}: {}", t["error"]);
    t
}

/// A direction's `dscp_received` as (value, frames), and its frames.
fn received(d: &Value) -> (Vec<(u8, u64)>, u64) {
    let got = d["dscp_received"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    (got, d["rx_packets"].as_u64().unwrap())
}

/// One captured packet as `tcpdump -v -n` prints it: the IP header's
/// summary and the addresses line (one line for IPv6, two for IPv4).
#[derive(Debug)]
struct Seen {
    /// "tos 0xb8" (IPv4) or "class 0xb8" (IPv6).
    mark: String,
    proto: &'static str,
    v6: bool,
    /// "198.18.50.1.40000 > 198.18.50.2.5201: ..."
    what: String,
}

fn parse_capture(text: &str) -> Vec<Seen> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let field = |key: &str| {
            l.split(key)
                .nth(1)
                .and_then(|r| r.split([',', ' ', ')']).next())
                .map(|v| format!("{key}{v}"))
        };
        let proto = if l.contains("UDP (17)") {
            "udp"
        } else if l.contains("TCP (6)") {
            "tcp"
        } else {
            continue;
        };
        if l.starts_with("IP6 ") {
            out.push(Seen {
                // tcpdump leaves a zero traffic class out.
                mark: field("class ").unwrap_or_else(|| "class 0x0".into()),
                proto,
                v6: true,
                what: l.split(") ").skip(1).collect::<Vec<_>>().join(") "),
            });
        } else if l.starts_with("IP ") {
            let what = lines.next().unwrap_or_default().trim().to_string();
            out.push(Seen {
                mark: field("tos ").unwrap_or_default(),
                proto,
                v6: false,
                what,
            });
        }
    }
    out
}

/// Every engine marks what it sends, in a capture on the server's link:
/// the socket engine (IP_TOS and IPV6_TCLASS), the packet engine (its
/// templates' TOS byte) and the live engine (the same templates written by
/// gen.bpf.c) for UDP, and TCP from the SYN on at both ends; the UDP
/// socket receiver counts what arrived per DSCP (IP_RECVTOS,
/// IPV6_RECVTCLASS) and the terminal stays quiet since all arrived as
/// sent. Run as one plan, so `dscp = "..."` in a `[[test]]` is what marks.
#[test]
fn every_engine_marks_its_packets_and_the_socket_receiver_counts_them() {
    let _s = one_core();
    if !require_root() {
        return;
    }
    if !have_tcpdump() {
        skip("tcpdump is not installed");
        return;
    }
    let p = NsPair::new("hdscp", "e", "dq", "198.18.50");
    for (n, dev, h) in [(&p.client, "dqc0", 1), (&p.server, "dqs0", 2)] {
        ip(&[
            "-n",
            n,
            "addr",
            "add",
            &format!("2001:2:0:50::{h}/64"),
            "dev",
            dev,
            "nodad",
        ]);
    }
    // The live engine's XDP_TX frames need NAPI on the peer: GRO on.
    let gro = p.exec(&p.server, &["ethtool", "-K", "dqs0", "gro", "on"]);
    assert!(
        gro.status.success(),
        "{}",
        String::from_utf8_lossy(&gro.stderr)
    );
    // Into a file (headers only), read back after: a pipe read only at
    // the end would fill, and the kernel would drop what tcpdump misses.
    let dir = tempdir("dscp-capture");
    let pcap = dir.join("server.pcap");
    let pcap_s = pcap.to_str().unwrap();
    let cap = Command::new("ip")
        .args(["netns", "exec", &p.server, "timeout", "60"])
        .args(["tcpdump", "-n", "-s", "128", "-i", "dqs0", "-w", pcap_s])
        .arg("udp or tcp")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump");
    // tcpdump prints "listening on" once the capture is open.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let udp = |name: &str, engine: &str, target: &str, dscp: &str| {
        format!(
            "[[test]]\nname = \"{name}\"\nkind = \"udp\"\nfrom = \"c\"\nto = \"s\"\n\
             target = \"{target}\"\nduration = 1\nrate = \"500pps\"\nframe_size = 128\n\
             tx_engine = \"{engine}\"\nrx_engine = \"socket\"\ndscp = \"{dscp}\"\n"
        )
    };
    let plan = format!(
        "name = \"dscp\"\n[hosts.c]\nnetns = \"{}\"\n\
         [hosts.s]\nnetns = \"{}\"\n{}{}{}{}\
         [[test]]\nname = \"tcp\"\nkind = \"tcp\"\nfrom = \"c\"\nto = \"s\"\n\
         target = \"198.18.50.2\"\nduration = 1\nrate = \"20M\"\ndscp = \"CS1\"\n",
        p.client,
        p.server,
        udp("socket4", "socket", "198.18.50.2", "ef"),
        udp("packet4", "packet", "198.18.50.2", "af11"),
        udp("live6", "live", "2001:2:0:50::2", "af41"),
        udp("socket6", "socket", "2001:2:0:50::2", "46"),
    );
    let (doc, stderr) = run_plan("dscp-engines", &plan);
    let _ = Command::new("kill")
        .args(["-INT", &cap.id().to_string()])
        .status();
    let out = cap.wait_with_output().expect("tcpdump ends");
    let tcpdump_err = String::from_utf8_lossy(&out.stderr);
    let read = Command::new("tcpdump")
        .args(["-r", pcap_s, "-v", "-n", "-t"])
        .output()
        .expect("tcpdump -r");
    let seen = parse_capture(&String::from_utf8_lossy(&read.stdout));
    let _ = std::fs::remove_dir_all(&dir);

    for (name, dscp) in [
        ("socket4", 46u8),
        ("packet4", 10),
        ("live6", 34),
        ("socket6", 46),
    ] {
        let t = test_named(&doc, name);
        assert_eq!(t["params"]["dscp"], u64::from(dscp), "{name}");
        let engine = t["directions"][0]["sender_summary"]["tx_engine"].clone();
        let want = &name[..name.len() - 1];
        assert_eq!(engine, want, "{name} ran on the engine asked");
        let (got, rx) = received(&t["directions"][0]);
        assert!(rx >= 400, "{name}: {rx} frames at 500 pps for 1 s");
        assert_eq!(got, [(dscp, rx)], "{name}: counted at the receiver");
    }
    let tcp = test_named(&doc, "tcp");
    assert_eq!(tcp["params"]["dscp"], 8);
    let note = tcp["directions"][0]["dscp_note"].as_str().unwrap_or("");
    assert!(note.contains("TCP"), "TCP says it cannot count: {note}");
    assert!(
        !stderr.contains(", arrived "),
        "all arrived as sent: quiet\n{stderr}"
    );

    // The capture: each test's packets carry its value, none go unmarked.
    let count = |proto: &str, v6: bool, port_filter: &dyn Fn(&str) -> bool, mark: &str| {
        seen.iter()
            .filter(|s| s.proto == proto && s.v6 == v6 && port_filter(&s.what))
            .filter(|s| s.mark == mark)
            .count()
    };
    let all = |_: &str| true;
    // The packet engine starts ARP with one empty datagram to port 9,
    // from an ordinary socket: not a test frame.
    let test_frames = |w: &str| !w.contains(".9: ");
    let ctx = || format!("tcpdump: {tcpdump_err}\nseen: {seen:#?}");
    assert!(
        count("udp", false, &all, "tos 0xb8") >= 400,
        "socket engine, EF: {}",
        ctx()
    );
    assert!(
        count("udp", false, &all, "tos 0x28") >= 400,
        "packet engine, AF11: {}",
        ctx()
    );
    assert!(
        count("udp", true, &all, "class 0x88") >= 400,
        "live engine, AF41: {}",
        ctx()
    );
    assert!(
        count("udp", true, &all, "class 0xb8") >= 400,
        "socket engine v6, EF: {}",
        ctx()
    );
    assert_eq!(count("udp", false, &test_frames, "tos 0x0"), 0, "{}", ctx());
    assert_eq!(
        count("udp", true, &test_frames, "class 0x0"),
        0,
        "{}",
        ctx()
    );
    // TCP: the SYN, the SYN-ACK and every segment both ways carry CS1.
    let tcp_seen: Vec<&Seen> = seen.iter().filter(|s| s.proto == "tcp").collect();
    assert!(tcp_seen.len() > 10, "{}", ctx());
    assert!(
        tcp_seen.iter().all(|s| s.mark == "tos 0x20"),
        "every TCP segment marked CS1: {}",
        ctx()
    );
    assert!(
        tcp_seen.iter().any(|s| s.what.contains("Flags [S]")),
        "{}",
        ctx()
    );
    assert!(
        tcp_seen.iter().any(|s| s.what.contains("Flags [S.]")),
        "{}",
        ctx()
    );
}

/// A lab whose DUT remarks EF to AF11 (`dut_remark` in `[lab]`, nftables
/// in the DUT namespace): the XDP sink counts the frames as AF11, over
/// IPv4 and IPv6, and the terminal says what became of the marking; a
/// test marked otherwise passes unchanged and stays quiet.
#[test]
fn a_remarking_lab_dut_is_counted_as_remarked_at_the_sink() {
    let _s = shared();
    if !require_root() {
        return;
    }
    let test = |name: &str, target: &str, dscp: &str, frame: u32| {
        format!(
            "[[test]]\nname = \"{name}\"\nkind = \"udp\"\ntarget = \"{target}\"\nduration = 1\n\
             rate = \"2kpps\"\nframe_size = {frame}\ndscp = \"{dscp}\"\n"
        )
    };
    let plan = format!(
        "name = \"remark\"\n[lab]\ndut = \"route\"\ndut_remark = \"ef=af11\"\n{}{}{}",
        test("ef4", "198.19.0.1", "ef", 64),
        test("ef6", "2001:2:0:20::1", "EF", 84),
        test("af21", "198.19.0.1", "af21", 64),
    );
    let (doc, stderr) = run_plan("dscp-remark", &plan);
    let lab = &doc["labs"][0];
    assert_eq!(lab["dut_remark"], "DSCP ef (46) remarked to af11 (10)");
    for name in ["ef4", "ef6"] {
        let d = &test_named(&doc, name)["directions"][0];
        assert_eq!(d["receiver_summary"]["rx_engine"], "xdp", "{name}");
        let (got, rx) = received(d);
        assert!(rx >= 1500, "{name}: {rx} frames at 2 kpps for 1 s");
        assert_eq!(got, [(10, rx)], "{name}: every frame arrived as AF11");
        assert!(
            stderr.contains(&format!(
                "{name}: gen_to_sink: sent ef (46), arrived af11 (10): 100 %"
            )),
            "{name}: the terminal says so:\n{stderr}"
        );
    }
    let d = &test_named(&doc, "af21")["directions"][0];
    let (got, rx) = received(d);
    assert_eq!(got, [(18, rx)], "not EF: not remarked");
    assert!(!stderr.contains("af21: gen_to_sink: sent"), "{stderr}");
}
