//! VLAN-tagged UDP tests (`--vlan`): client and server namespaces joined
//! through a third that bridges them (a Linux bridge without VLAN
//! filtering forwards tagged frames as they are), a capture there with
//! `tcpdump -e` shows each frame's tags, and the sink counts every frame
//! with its tags in the frame size.

use crate::util::{ip, one_core, require_root, run, skip};
use serde_json::Value;
use std::process::{Child, Command, Stdio};

/// c ↔ m (br0) ↔ s: 198.18.40.1 and .2, one /24 through the bridge.
struct Bridged {
    c: String,
    m: String,
    s: String,
}

impl Bridged {
    fn new(tag: &str) -> Bridged {
        let p = format!("hvl{}{tag}", std::process::id());
        let b = Bridged {
            c: format!("{p}-c"),
            m: format!("{p}-m"),
            s: format!("{p}-s"),
        };
        for n in [&b.c, &b.m, &b.s] {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        for (a, an, bn, bd) in [(&b.c, "vlc0", &b.m, "vlm0"), (&b.s, "vls0", &b.m, "vlm1")] {
            ip(&[
                "link", "add", an, "netns", a, "type", "veth", "peer", "name", bd, "netns", bn,
            ]);
        }
        ip(&["-n", &b.m, "link", "add", "br0", "type", "bridge"]);
        for d in ["vlm0", "vlm1"] {
            ip(&["-n", &b.m, "link", "set", d, "master", "br0"]);
            ip(&["-n", &b.m, "link", "set", d, "up"]);
            // The bridge keeps a received tag in the skb's metadata; with
            // tx VLAN offload off the egress veth writes it back into the
            // frame, where the server's XDP sink reads it.
            let out = b.exec(
                &b.m,
                &[
                    "ethtool",
                    "-K",
                    d,
                    "txvlan",
                    "off",
                    "tx-vlan-stag-hw-insert",
                    "off",
                ],
            );
            assert!(
                out.status.success(),
                "ethtool: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        ip(&["-n", &b.m, "link", "set", "br0", "up"]);
        for (n, d, h) in [(&b.c, "vlc0", 1), (&b.s, "vls0", 2)] {
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("198.18.40.{h}/24"),
                "dev",
                d,
            ]);
            ip(&["-n", n, "link", "set", d, "up"]);
        }
        b
    }

    fn exec(&self, ns: &str, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// `tcpdump -e` on the bridge's port towards the server, until `n`
    /// UDP frames were seen.
    fn capture(&self, n: usize) -> Child {
        let c = Command::new("ip")
            .args([
                "netns", "exec", &self.m, "timeout", "30", "tcpdump", "-e", "-n", "-l", "-i",
                "vlm1",
            ])
            .args(["-c", &n.to_string(), "vlan or udp"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump");
        // tcpdump prints "listening on" once the capture is open.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        c
    }
}

impl Drop for Bridged {
    fn drop(&mut self) {
        for n in [&self.c, &self.m, &self.s] {
            let _ = Command::new("ip").args(["netns", "delete", n]).status();
        }
    }
}

fn have_tcpdump() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether this kernel makes VLAN devices (CONFIG_VLAN_8021Q).
fn kernel_has_8021q(b: &Bridged) -> bool {
    let ok = b
        .exec(
            &b.c,
            &[
                "ip", "link", "add", "link", "vlc0", "name", "vlprobe", "type", "vlan", "id", "9",
            ],
        )
        .status
        .success();
    if ok {
        let _ = b.exec(&b.c, &["ip", "link", "del", "vlprobe"]);
    }
    ok
}

fn udp(b: &Bridged, extra: &[&str]) -> (Value, std::process::Output) {
    let (c, s) = (format!("ns:{}", b.c), format!("ns:{}", b.s));
    let mut args = vec![
        "udp",
        "--client",
        &c,
        "--server",
        &s,
        "--target",
        "198.18.40.2",
        "-t",
        "2",
        "--rate",
        "2kpps",
        "--flows",
        "4",
        "--no-results",
        "--no-progress",
        "--json",
    ];
    args.extend(extra);
    let out = run(&args);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (doc, out)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Sent = counted, and the bytes are the frame size per frame, tags in it.
fn exact(doc: &Value, frame: u64, what: &str) {
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{what}: {}", t["error"]);
    let d = &t["directions"][0];
    let (tx, rx) = (u(&d["tx_packets"]), u(&d["rx_packets"]));
    assert!(tx >= 2000, "{what}: {tx} sent at 2 kpps for 2 s");
    assert_eq!((rx, u(&d["lost"])), (tx, 0), "{what}: {d}");
    let bytes = u(&d["receiver_summary"]["rx_bytes"]);
    assert_eq!(
        bytes,
        rx * frame,
        "{what}: {frame} B per frame, tags included"
    );
}

/// The captured test frames: to the receiver, not the packet engine's
/// one untagged datagram to the discard port that starts ARP.
fn test_frames(seen: &str) -> Vec<&str> {
    seen.lines()
        .filter(|l| l.contains("> 198.18.40.2.") && !l.contains("> 198.18.40.2.9:"))
        .collect()
}

fn finish(cap: Child) -> String {
    let out = cap.wait_with_output().expect("tcpdump ends");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A tagged test of `frame`-byte frames run under a capture on the
/// bridge: it must succeed with exact counts; returns its document and the
/// captured lines of its frames (at least 10), for their tags to be read.
fn captured(b: &Bridged, frame: u64, args: &[&str], what: &str) -> (Value, Vec<String>) {
    let cap = b.capture(20);
    let size = frame.to_string();
    let mut v = vec!["--frame-size", &size];
    v.extend_from_slice(args);
    let (doc, out) = udp(b, &v);
    let seen = finish(cap);
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exact(&doc, frame, what);
    let lines: Vec<String> = test_frames(&seen).into_iter().map(str::to_string).collect();
    assert!(lines.len() >= 10, "{what}: captured:\n{seen}");
    (doc, lines)
}

#[test]
fn vlan_tags_on_the_wire_and_counted_exactly() {
    if !require_root() {
        return;
    }
    if !have_tcpdump() {
        skip("tcpdump is not installed (apt-get install tcpdump): no capture to check tags in");
        return;
    }
    let _g = one_core();
    let b = Bridged::new("t");
    // The packet engine writes one 802.1Q tag; the XDP sink skips it.
    let (doc, lines) = captured(
        &b,
        128,
        &[
            "--vlan",
            "100",
            "--tx-engine",
            "packet",
            "--rx-engine",
            "xdp",
        ],
        "packet, vlan 100",
    );
    let d = &doc["tests"][0]["directions"][0];
    assert_eq!(d["sender_summary"]["tx_engine"], "packet", "{d}");
    assert_eq!(d["receiver_summary"]["rx_engine"], "xdp", "{d}");
    for l in &lines {
        assert!(
            l.contains("ethertype 802.1Q (0x8100), length 124: vlan 100,"),
            "{l}"
        );
    }

    // QinQ from AF_XDP: 802.1ad outer 100, 802.1Q inner 200.
    let qinq = |l: &String| {
        l.contains("ethertype 802.1Q-QinQ (0x88a8), length 252: vlan 100,")
            && l.contains("ethertype 802.1Q (0x8100), vlan 200,")
    };
    let (_, lines) = captured(
        &b,
        256,
        &[
            "--vlan",
            "100.200",
            "--tx-engine",
            "xdp",
            "--threads",
            "1",
            "--rx-engine",
            "xdp",
        ],
        "xdp, QinQ 100.200",
    );
    for l in &lines {
        assert!(qinq(l), "{l}");
    }

    // QinQ from the live engine (XDP live frames): gen.bpf.c writes the
    // same tagged heads as the packet engine. Its XDP_TX frames need NAPI
    // on the veth's peer, here a bridge port: GRO on gives it.
    let out = b.exec(&b.m, &["ethtool", "-K", "vlm0", "gro", "on"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (doc, lines) = captured(
        &b,
        256,
        &[
            "--vlan",
            "100.200",
            "--tx-engine",
            "live",
            "--rx-engine",
            "xdp",
        ],
        "live, QinQ 100.200",
    );
    let d = &doc["tests"][0]["directions"][0];
    assert_eq!(d["sender_summary"]["tx_engine"], "live", "{d}");
    for l in &lines {
        assert!(qinq(l), "{l}");
    }

    // With tx VLAN offload on at the bridge's egress the tag stays in the
    // skb's metadata and XDP sees the frame without it: the sink still
    // counts the test's tag in each frame's size.
    let out = b.exec(&b.m, &["ethtool", "-K", "vlm1", "txvlan", "on"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (doc, _) = udp(
        &b,
        &[
            "--vlan",
            "100",
            "--frame-size",
            "128",
            "--tx-engine",
            "packet",
            "--rx-engine",
            "xdp",
        ],
    );
    exact(&doc, 128, "packet, vlan 100, tag in metadata at the sink");

    // The socket engine needs a VLAN sub-interface, made by the kernel's
    // 802.1Q driver: where there is one, its frames carry the tag and its
    // addresses come back afterwards; where not, the error says so.
    let (doc, _) = udp(
        &b,
        &[
            "--vlan",
            "300",
            "--frame-size",
            "128",
            "--tx-engine",
            "socket",
            "--rx-engine",
            "socket",
        ],
    );
    if kernel_has_8021q(&b) {
        exact(&doc, 128, "socket, vlan 300");
    } else {
        let e = doc["tests"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            e.contains("CONFIG_VLAN_8021Q") && e.contains("--tx-engine packet"),
            "{doc}"
        );
    }
    for (ns, dev, addr) in [
        (&b.c, "vlc0", "198.18.40.1/24"),
        (&b.s, "vls0", "198.18.40.2/24"),
    ] {
        let a = b.exec(ns, &["ip", "-br", "addr", "show", "dev", dev]);
        let a = String::from_utf8_lossy(&a.stdout);
        assert!(a.contains(addr), "{dev} has its address back: {a}");
        let l = b.exec(ns, &["ip", "-br", "link"]);
        let l = String::from_utf8_lossy(&l.stdout);
        assert!(!l.contains(".300"), "no sub-interface left: {l}");
    }
}

#[test]
fn vlan_errors_say_what_to_do() {
    let _g = crate::util::shared();
    for (args, want) in [
        (vec!["--vlan", "0"], "1..4094"),
        (vec!["--vlan", "4095"], "out of range"),
        (vec!["--vlan", "10.x"], "QinQ"),
        (
            vec!["--vlan", "100", "--frame-size", "64"],
            "smallest IPv4 frame with a VLAN tag (4 B) is 68 B",
        ),
        (vec!["--vlan", "1.2", "--frame-size", "68"], "72 B"),
    ] {
        let mut a = vec!["udp", "--target", "198.18.0.2", "--no-results"];
        a.extend(args.iter().copied());
        let out = run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{args:?}: {err}"
        );
    }
}
