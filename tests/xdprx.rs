//! The XDP receiver (`--rx-engine xdp`, issue 16 part 2): every frame the
//! live engine sends is counted by the sink, exactly; random loss at a DUT
//! is measured to within ±0.05 pp; auto falls back to the socket receiver
//! when BPF is refused and says why; no run, failed or not, leaves an XDP
//! program on an interface.

use crate::util::*;
use crate::xdplive::{in_ns, u, Lab};
use serde_json::Value;
use std::process::{Command, Output};

fn lab(tag: &str, routed: bool) -> Lab {
    Lab::with_prefix("lrxrx", tag, routed)
}

/// `linerate udp` from the lab's generator to its sink.
fn udp(lab: &Lab, deny: bool, target: &str, extra: &[&str]) -> Output {
    let (client, server) = (format!("ns:{}", lab.gen), format!("ns:{}", lab.sink));
    let mut cmd = Command::new(bin());
    if deny {
        // The loader refuses as a kernel without BPF permission would;
        // the agents inherit it from the controller.
        cmd.env("LINERATE_XDP_DENY", "1");
    }
    cmd.args([
        "udp",
        "--client",
        &client,
        "--server",
        &server,
        "--target",
        target,
        "--no-results",
        "--no-progress",
        "--json",
    ])
    .args(extra)
    .output()
    .expect("running linerate")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// No interface of the lab's namespaces carries an XDP program.
fn no_xdp_left(lab: &Lab) {
    for ns in [Some(&lab.gen), lab.dut.as_ref(), Some(&lab.sink)]
        .into_iter()
        .flatten()
    {
        let links: Value = serde_json::from_str(&in_ns(ns, &["ip", "-j", "link", "show"])).unwrap();
        for l in links.as_array().unwrap() {
            assert!(
                l.get("xdp").is_none(),
                "{ns}: {} still has an XDP program: {l}",
                l["ifname"]
            );
        }
    }
}

#[test]
fn every_frame_the_live_engine_sends_is_counted_by_the_xdp_sink() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let lab = lab("a", false);
    // No GRO on the sink's veth: the sink's XDP program alone gives it the
    // NAPI the live engine's XDP_TX frames need (issue 16, trap 1).
    for target in ["198.18.0.2", "2001:2::2"] {
        for rate in [Some("100kpps"), None] {
            let small = if target.contains(':') { "84" } else { "64" };
            for size in [small, "1518"] {
                let mut args = vec![
                    "--tx-engine",
                    "live",
                    "--rx-engine",
                    "xdp",
                    "--frame-size",
                    size,
                    "--duration",
                    "1",
                ];
                if let Some(r) = rate {
                    args.extend(["--rate", r]);
                }
                let doc = json(&udp(&lab, false, target, &args));
                let t = &doc["tests"][0];
                let what = format!("{target} {size} B {rate:?}");
                assert_eq!(t["status"], "ok", "{what}: {}", t["error"]);
                let d = &t["directions"][0];
                assert_eq!(d["sender_summary"]["tx_engine"], "live", "{what}: {d}");
                assert_eq!(d["receiver_summary"]["rx_engine"], "xdp", "{what}: {d}");
                let (tx, rx) = (u(&d["tx_packets"]), u(&d["rx_packets"]));
                assert!(tx > 10_000, "{what}: only {tx} frames sent");
                // Paced, every frame is counted. Unpaced, the generator can
                // outrun the sink veth's 256-frame ring for a moment; the
                // kernel counts those frames as the sender's tx_dropped, and
                // they must be exactly the frames missing.
                let ring = if rate.is_some() {
                    0
                } else {
                    t["kernel_counters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|k| k["role"] == "gen")
                        .map(|k| u(&k["after"]["tx_dropped"]) - u(&k["before"]["tx_dropped"]))
                        .sum()
                };
                assert_eq!(rx + ring, tx, "{what}: every frame sent is counted: {d}");
                assert_eq!(u(&d["lost"]), ring, "{what}: {d}");
                assert_eq!(u(&d["duplicates"]), 0, "{what}: {d}");
                let per_flow: u64 = d["receiver_summary"]["flows"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| u(&f["rx_packets"]))
                    .sum();
                assert_eq!(per_flow, rx, "{what}: flows add up");
                let iv: u64 = d["intervals"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| u(&i["receiver"]["rx_packets"]))
                    .sum();
                assert_eq!(iv, rx, "{what}: intervals add up");
                eprintln!("xdp sink {what}: {tx} sent, {rx} counted");
                no_xdp_left(&lab);
            }
        }
    }
}

/// Paced, the live engine spaces frames in the kernel: it offers exactly
/// what the profile asks, evenly over the run, at rates the packet engine
/// cannot reach on a 2-core host, and the sink counts every frame.
#[test]
fn paced_live_offers_the_asked_rate_evenly_and_every_frame_is_counted() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let lab = lab("p", false);
    for (target, rate, pps, size) in [
        ("198.18.0.2", "1.2Mpps", 1_200_000.0, "64"),
        ("198.18.0.2", "70kpps", 70_000.0, "1518"),
        ("198.18.0.2", "333333pps", 333_333.0, "imix"),
        ("2001:2::2", "450kpps", 450_000.0, "84"),
    ] {
        let what = format!("{target} {size} B at {rate}");
        let doc = json(&udp(
            &lab,
            false,
            target,
            &[
                "--tx-engine",
                "live",
                "--rx-engine",
                "xdp",
                "--rate",
                rate,
                "--frame-size",
                size,
                "--duration",
                "3",
            ],
        ));
        let t = &doc["tests"][0];
        assert_eq!(t["status"], "ok", "{what}: {}", t["error"]);
        let d = &t["directions"][0];
        assert_eq!(d["sender_summary"]["tx_engine"], "live", "{what}: {d}");
        let (tx, rx, target_n) = (u(&d["tx_packets"]), u(&d["rx_packets"]), u(&d["tx_target"]));
        let want = (pps * 3.0) as u64;
        assert!(
            target_n.abs_diff(want) <= want / 1000 + 1,
            "{what}: target {target_n}, expected {want}"
        );
        // What was asked, never more; a frame the sender could only have
        // sent more than 100 µs late (preempted on a busy 2-core host) is
        // given up rather than sent in a burst, so some may be missing: at
        // most the 2 % a search backs off by (0.87 % went missing at 1.2
        // Mpps beside a compile), and past 1 % the result says the tester
        // fell short (no loss: tester-limited).
        // Past the 2 % (2.2 % at 1.2 Mpps while a build ran on both
        // cores) the frames given up were the host's doing: at most 5 %.
        // Beside other work (two builds: 71 % of 1.2 Mpps) the host decides
        // what is sent; the test holds the sender to saying so, and the
        // figure on a quiet host is bench/run.sh's. Not limited, the rate
        // holds to 1 %; limited, a pacer off by half is still a bug.
        let limited = d["tester_limited"] == true;
        let floor = if limited { 0.5 } else { 0.95 };
        assert!(
            tx <= target_n + 1 && tx as f64 >= target_n as f64 * floor,
            "{what}: {tx} sent of {target_n} asked: {d}"
        );
        if (tx as f64) < target_n as f64 * 0.99 - 10.0 {
            assert!(limited, "{what}: short, unsaid: {d}");
        }
        assert_eq!(rx, tx, "{what}: every frame counted: {d}");
        assert_eq!(u(&d["lost"]), 0, "{what}: {d}");
        // Evenly: no whole interval carries more than its share + 2 % (the
        // packet engine's batches and live's old 1 ms slices did not; a
        // sender that bunched its frames into the run's end would). One
        // may fall short by more (frames given up while another process
        // held the core: 3.3 % in one second beside `stress-ng --cpu 1`),
        // bounded by the whole run's 2 % above.
        let ivs = d["intervals"].as_array().unwrap();
        assert!(ivs.len() >= 3, "{what}: {} intervals", ivs.len());
        for iv in ivs {
            // Intervals only the receiver reported have no sender part.
            let s = &iv["sender"];
            let (Some(a), Some(b)) = (s["t_start"].as_f64(), s["t_end"].as_f64()) else {
                continue;
            };
            if b - a < 0.5 {
                continue;
            }
            let got = u(&s["tx_packets"]) as f64;
            let asked = u(&s["tx_target"]) as f64;
            assert!(
                got <= asked * 1.02 + 64.0 && (limited || got >= asked * 0.9),
                "{what}: {got} sent in an interval that asked {asked}: {iv}"
            );
        }
        eprintln!("paced live {what}: {tx} sent of {target_n}, {rx} counted");
    }
    no_xdp_left(&lab);
}

/// Packets the DUT's nftables rule dropped.
fn nft_dropped(ns: &str) -> u64 {
    let v: Value =
        serde_json::from_str(&in_ns(ns, &["nft", "-j", "list", "table", "inet", "lrxrx"])).unwrap();
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["rule"]["expr"].as_array())
        .flatten()
        .filter_map(|e| e["counter"]["packets"].as_u64())
        .sum()
}

#[test]
fn one_percent_random_loss_at_the_dut_is_measured_to_five_hundredths_of_a_point() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let lab = lab("b", true);
    let dut = lab.dut.clone().unwrap();
    in_ns(&dut, &["nft", "add", "table", "inet", "lrxrx"]);
    in_ns(
        &dut,
        &[
            "nft",
            "add",
            "chain",
            "inet",
            "lrxrx",
            "lossy",
            "{ type filter hook forward priority 0; policy accept; }",
        ],
    );
    in_ns(
        &dut,
        &[
            "nft", "add", "rule", "inet", "lrxrx", "lossy", "numgen", "random", "mod", "100", "<",
            "1", "counter", "drop",
        ],
    );
    // 1 M frames: the binomial spread of a 1 % loss is then ±0.01 pp (1σ).
    let doc = json(&udp(
        &lab,
        false,
        "198.19.1.2",
        &[
            "--tx-engine",
            "live",
            "--rx-engine",
            "xdp",
            "--rate",
            "250kpps",
            "--duration",
            "4",
        ],
    ));
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    assert_eq!(d["receiver_summary"]["rx_engine"], "xdp", "{d}");
    let (tx, rx, lost) = (u(&d["tx_packets"]), u(&d["rx_packets"]), u(&d["lost"]));
    let dropped = nft_dropped(&dut);
    let ratio = lost as f64 / tx as f64;
    eprintln!(
        "1 % DUT loss: {tx} sent, {rx} counted, {lost} lost ({:.4} %), nft dropped {dropped}",
        ratio * 100.0
    );
    // A loaded machine may send fewer (209 k beside stress-ng and two
    // builds): the bound is 3.5σ of the binomial spread for what was sent,
    // 0.05 pp from 500 k frames, 0.11 pp from 100 k; the counts below stay
    // exact whatever was sent.
    assert!(tx > 100_000, "{tx} frames");
    assert_eq!(rx + lost, tx, "{d}");
    let bound = (3.5 * (0.01 * 0.99 / tx as f64).sqrt()).max(0.0005);
    assert!((ratio - 0.01).abs() <= bound, "loss {:.4} %", ratio * 100.0);
    // What the sequence numbers found missing is what the rule dropped
    // (give or take frames the DUT itself could not forward).
    assert!(
        lost >= dropped && lost - dropped <= tx / 10_000,
        "{lost} lost, {dropped} dropped by the rule"
    );
    no_xdp_left(&lab);
}

#[test]
fn auto_falls_back_to_socket_when_bpf_is_refused_and_no_program_is_left() {
    let _g = one_core();
    if !require_root() {
        return;
    }
    let lab = lab("c", false);
    let paced = ["--rate", "20kpps", "--duration", "0.5"];
    // Auto with BPF allowed counts in XDP.
    let doc = json(&udp(&lab, false, "198.18.0.2", &paced));
    let d = &doc["tests"][0]["directions"][0];
    assert_eq!(d["receiver_summary"]["rx_engine"], "xdp", "{d}");
    assert_eq!(u(&d["rx_packets"]), u(&d["tx_packets"]), "{d}");
    no_xdp_left(&lab);
    // Refused, it counts with sockets and says why.
    in_ns(&lab.sink, &["ethtool", "-K", "lrs0", "gro", "on"]);
    let doc = json(&udp(&lab, true, "198.18.0.2", &paced));
    let d = &doc["tests"][0]["directions"][0];
    let s = &d["receiver_summary"];
    assert_eq!(s["rx_engine"], "socket", "{s}");
    let note = s["rx_engine_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("xdp refused") && note.contains("LINERATE_XDP_DENY"),
        "{note}"
    );
    assert_eq!(u(&d["rx_packets"]), u(&d["tx_packets"]), "{d}");
    // Asked for by name, the refusal says what to do.
    let out = udp(
        &lab,
        true,
        "198.18.0.2",
        &[&["--rx-engine", "xdp"][..], &paced].concat(),
    );
    let t = text(&out);
    assert!(
        t.contains("xdp receiver cannot run here") && t.contains("--rx-engine socket"),
        "{t}"
    );
    // A test that fails after the sink attached (the sender refuses)
    // still detaches it.
    let out = udp(
        &lab,
        false,
        "198.18.0.2",
        &[
            &[
                "--rx-engine",
                "xdp",
                "--tx-engine",
                "xdp",
                "--threads",
                "2",
                "--flow-mode",
                "ports",
                "--flows",
                "2",
            ][..],
            &paced,
        ]
        .concat(),
    );
    let t = text(&out);
    assert!(t.contains("one sender thread"), "the sender refused: {t}");
    no_xdp_left(&lab);
}

#[test]
fn the_lab_self_test_counts_in_xdp_and_records_it() {
    let _g = serial();
    if !require_root() {
        return;
    }
    let base = tempdir("xdprx-lab");
    let doc = run_json(&[
        "lab",
        "--quick",
        "--only",
        "self-test",
        "--rx-engine",
        "xdp",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    assert_eq!(doc["status"], "complete", "{doc}");
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{}", t["error"]);
    let d = &t["directions"][0];
    let s = &d["receiver_summary"];
    assert_eq!(s["rx_engine"], "xdp", "{s}");
    assert!(s.get("rx_engine_note").is_none(), "{s}");
    let (tx, rx) = (u(&d["tx_packets"]), u(&d["rx_packets"]));
    assert!(tx > 10_000, "{tx} frames");
    assert_eq!(rx + u(&d["lost"]), tx, "{d}");
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
}
