//! sink.bpf.c run by BPF_PROG_RUN in test mode: crafted frames in, its
//! verdicts and per-CPU maps read back. An exact script of gaps,
//! duplicates and reorders must give what the socket receiver's
//! FlowTracker gives; everything that is not a linerate frame to the
//! receiver's port is passed on, truncated frames included.

use super::sink::{Sink, SinkSpec};
use super::tests::load_or_skip;
use crate::engine::frame::{FlowPath, Template};
use crate::engine::udp::FlowTracker;
use crate::model::stderr::errln;
use crate::proto::frame::Header;
use crate::sys::{self, XdpRun};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const PORT: u16 = 5001;

use super::gen_tests::path;

fn v4() -> FlowPath {
    path("198.18.0.1:40000", "198.18.0.2:5001")
}

fn v6() -> FlowPath {
    path("[2001:2::1]:40000", "[2001:2::2]:5001")
}

fn sink(flows: u16) -> Option<Sink> {
    sink_tagged(flows, 0)
}

fn sink_tagged(flows: u16, tag_bytes: u32) -> Option<Sink> {
    // BPF_PROG_RUN counts on the CPU it runs on: one CPU for the whole
    // script, as a flow on one receive queue would be.
    let cpus = sys::allowed_cpus().expect("allowed CPUs");
    sys::pin_thread(&cpus[..1]).expect("pinning the test thread");
    load_or_skip("sink", &[("lr_sink_flows", u32::from(flows))])?;
    Some(
        Sink::load(SinkSpec {
            flows,
            ports: (PORT, PORT),
            clock_offset_ns: 0,
            tag_bytes,
        })
        .expect("the sink loads and verifies"),
    )
}

/// Runs the sink on one frame; its verdict.
fn run(s: &mut Sink, frame: &[u8]) -> u32 {
    let fd = s.obj.prog_fd("lr_sink").expect("program loaded");
    sys::xdp_test_run(
        fd,
        XdpRun {
            data_in: frame,
            meta_len: 0,
            data_out: None,
            repeat: 1,
            ingress_ifindex: 0,
            flags: 0,
            batch_size: 0,
        },
    )
    .expect("BPF_PROG_RUN in test mode")
    .retval
}

fn lr_frame(p: &FlowPath, size: u32, flow: u16, seq: u64) -> Vec<u8> {
    let t = Template::new(p, size).expect("template");
    t.frame(&Header {
        flow,
        seq,
        sent_ns: sys::monotonic_ns(),
    })
}

/// Feeds `script` (flow, seq) to the sink and to FlowTrackers, then
/// checks both count the same, flow by flow and in the totals.
fn script_matches_flow_tracker(p: &FlowPath, size: u32, script: &[(u16, u64)]) {
    let Some(mut s) = sink(4) else {
        return;
    };
    let mut want = vec![FlowTracker::default(); 4];
    for &(flow, seq) in script {
        want[usize::from(flow)].on_seq(seq);
        let verdict = run(&mut s, &lr_frame(p, size, flow, seq));
        assert_eq!(verdict, XDP_DROP, "flow {flow} seq {seq}: counted, dropped");
    }
    let mut unique = 0;
    let mut missing = 0;
    for (id, w) in want.iter().enumerate() {
        let (got, cpus) = s.flow(id as u16).expect("flow state");
        assert!(cpus.len() <= 1, "test runs stay on one CPU");
        assert_eq!(
            (
                got.unique(),
                got.missing(),
                got.reordered(),
                got.duplicates()
            ),
            (w.unique(), w.missing(), w.reordered(), w.duplicates()),
            "flow {id}: (unique, missing, reordered, duplicates)"
        );
        unique += w.unique();
        missing += w.missing();
    }
    let t = s.totals().expect("totals");
    assert_eq!(t.packets, unique);
    assert_eq!(s.merged().expect("flows").missing(), missing);
    assert_eq!(t.bytes, unique * u64::from(size), "bytes with FCS");
    assert_eq!(t.foreign, 0);
    assert_eq!(t.latency_log2_ns.iter().sum::<u64>(), unique);
}

/// Gaps, duplicates, reorders inside the window, a jump past it, late
/// frames inside and beyond it, on two flows.
fn script() -> Vec<(u16, u64)> {
    let mut v: Vec<(u16, u64)> = [0, 1, 3, 2, 4, 4, 5, 1, 9, 7, 7, 8, 20]
        .iter()
        .map(|&s| (0u16, s))
        .collect();
    // A jump past the window, then a frame inside it and one beyond it.
    v.extend([(0, 2000), (0, 1999), (0, 1999), (0, 1000), (0, 2001)]);
    // A gap across word edges, filled from the far end.
    v.extend((0..130).rev().filter(|s| s % 3 != 0).map(|s| (1u16, s)));
    v.extend([
        (1, 600),
        (1, 100),
        (1, 599),
        (1, 87),
        (2, 5),
        (2, 5),
        (3, 0),
    ]);
    v
}

#[test]
fn an_exact_script_of_gaps_duplicates_and_reorders_ipv4() {
    script_matches_flow_tracker(&v4(), 64, &script());
}

#[test]
fn an_exact_script_of_gaps_duplicates_and_reorders_ipv6() {
    script_matches_flow_tracker(&v6(), 128, &script());
}

#[test]
fn in_order_frames_have_no_loss() {
    let s: Vec<(u16, u64)> = (0..3000).map(|i| ((i % 4) as u16, i / 4)).collect();
    script_matches_flow_tracker(&v4(), 1518, &s);
}

#[test]
fn everything_else_is_passed() {
    let Some(mut s) = sink(4) else {
        return;
    };
    let good = lr_frame(&v4(), 64, 1, 0);
    let mut cases: Vec<(&str, Vec<u8>, bool)> = Vec::new();
    // (what, frame, counted as foreign)
    let mut not_lr = good.clone();
    not_lr[42] = b'X';
    cases.push(("UDP to the port without the LR magic", not_lr, true));
    let mut flow_out = good.clone();
    flow_out[44..46].copy_from_slice(&9u16.to_be_bytes());
    cases.push(("a flow id out of range", flow_out, true));
    let mut wrong_port = good.clone();
    wrong_port[36..38].copy_from_slice(&(PORT + 1).to_be_bytes());
    cases.push(("another UDP port", wrong_port, false));
    let mut tcp = good.clone();
    tcp[23] = 6;
    cases.push(("TCP", tcp, false));
    let mut frag = good.clone();
    frag[20] = 0x20; // more fragments
    cases.push(("an IPv4 fragment", frag, false));
    let mut options = good.clone();
    options[14] = 0x46;
    cases.push(("IPv4 with options", options, false));
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    cases.push(("ARP", arp, false));
    let mut vlan = good.clone();
    vlan[12..14].copy_from_slice(&[0x81, 0x00]);
    cases.push(("VLAN-tagged", vlan, false));
    let mut nd = lr_frame(&v6(), 128, 1, 0);
    nd[20] = 58; // ICMPv6 (neighbour discovery)
    cases.push(("IPv6 ND", nd, false));
    let mut ext = lr_frame(&v6(), 128, 1, 0);
    ext[20] = 0; // a hop-by-hop header first
    cases.push(("IPv6 with an extension header", ext, false));
    // Truncated: inside the linerate header, inside UDP, inside IP, bare
    // Ethernet (the verifier must have seen every bound).
    for (cut, foreign) in [
        (59usize, true),
        (45, true),
        (41, false),
        (30, false),
        (14, false),
    ] {
        cases.push(("truncated IPv4", good[..cut].to_vec(), foreign));
    }
    let good6 = lr_frame(&v6(), 128, 2, 0);
    for (cut, foreign) in [(79usize, true), (61, false), (50, false)] {
        cases.push(("truncated IPv6", good6[..cut].to_vec(), foreign));
    }
    let mut foreign = 0;
    for (what, f, counted_foreign) in &cases {
        assert_eq!(run(&mut s, f), XDP_PASS, "{what} ({} bytes)", f.len());
        foreign += u64::from(*counted_foreign);
        assert_eq!(s.totals().expect("totals").foreign, foreign, "{what}");
    }
    let t = s.totals().expect("totals");
    assert_eq!((t.packets, t.bytes, t.duplicates), (0, 0, 0));
    // And the good ones are counted, v4 and v6.
    assert_eq!(run(&mut s, &good), XDP_DROP);
    assert_eq!(run(&mut s, &good6), XDP_DROP);
    let t = s.totals().expect("totals");
    assert_eq!((t.packets, t.bytes), (2, 64 + 128));
}

#[test]
fn latency_lands_in_its_log2_bucket() {
    let Some(mut s) = sink(1) else {
        return;
    };
    let t = Template::new(&v4(), 64).expect("template");
    let now = sys::monotonic_ns();
    // Stamped 1 s ago: bucket 29 (2^29 ns ≈ 0.54 s .. 1.07 s); stamped in
    // the future (another host's clock): bucket 0.
    for (seq, sent_ns) in [(0, now - 1_000_000_000), (1, now + 10_000_000_000)] {
        let f = t.frame(&Header {
            flow: 0,
            seq,
            sent_ns,
        });
        assert_eq!(run(&mut s, &f), XDP_DROP);
    }
    let l = s.totals().expect("totals").latency_log2_ns;
    assert_eq!((l[29], l[0], l.iter().sum::<u64>()), (1, 1, 2), "{l:?}");
    // The HDR slots (model::hdr's layout): the future one in slot 0, the
    // second-old one in the slot of 1 s plus the time the run took.
    let h = s.latency_hdr().expect("hdr");
    let later = sys::monotonic_ns() - now;
    let lo = crate::model::hdr::slot(1_000_000_000);
    let hi = crate::model::hdr::slot(1_000_000_000 + later);
    let got: Vec<usize> = (0..h.len()).filter(|&i| h[i] > 0).collect();
    assert_eq!((h[0], h.iter().sum::<u64>()), (1, 2), "{got:?}");
    assert!(got[1] >= lo && got[1] <= hi, "{got:?} not in {lo}..={hi}");
}

#[test]
fn the_hdr_layout_is_the_same_in_c_and_rust() {
    use crate::model::hdr;
    assert_eq!(super::consts::SINK_HDR_SUB_BITS, u64::from(hdr::SUB_BITS));
    assert_eq!(super::consts::SINK_HDR_SLOTS, hdr::SLOTS as u64);
    assert_eq!(super::consts::SINK_HDR_MAX_NS, hdr::MAX_NS);
}

#[test]
fn a_flow_split_over_two_cpus_merges_exactly() {
    // Before sink() pins this thread to one of them.
    let cpus = sys::allowed_cpus().expect("allowed CPUs");
    let Some(mut s) = sink(1) else {
        return;
    };
    if cpus.len() < 2 {
        errln!("skipping: needs two CPUs");
        return;
    }
    // 0..100 on one CPU, 100..200 with 150 lost on another, then 200..300
    // back on the first: what a veth's NAPI does when its sender moves.
    for (cpu, range) in [
        (cpus[0], 0..100u64),
        (cpus[1], 100..200),
        (cpus[0], 200..300),
    ] {
        sys::pin_thread(&[cpu]).expect("pinning");
        for seq in range.filter(|&q| q != 150) {
            assert_eq!(run(&mut s, &lr_frame(&v4(), 64, 0, seq)), XDP_DROP);
        }
    }
    let (t, on) = s.flow(0).expect("flow state");
    assert_eq!(on.len(), 2, "counted on two CPUs");
    assert_eq!((t.unique(), t.missing(), t.duplicates()), (299, 1, 0));
    assert_eq!(s.merged().expect("flows").missing(), 1);
    assert_eq!(s.totals().expect("totals").packets, 299);
}

#[test]
fn batched_reads_agree_with_one_lookup_per_flow() {
    let cpus = sys::allowed_cpus().expect("allowed CPUs");
    let Some(mut s) = sink(3000) else {
        return;
    };
    // Flows on both sides of the 1,024-flow batch edges, some on two CPUs.
    for (i, cpu) in cpus.iter().take(2).enumerate() {
        sys::pin_thread(&[*cpu]).expect("pinning");
        for flow in [0u16, 1023, 1024, 2047, 2048, 2999] {
            for seq in (0..40u64).filter(|q| q % 7 != 3) {
                if i == 0 || flow % 2 == 0 {
                    run(&mut s, &lr_frame(&v4(), 64, flow, seq + 40 * i as u64));
                }
            }
        }
    }
    let t0 = std::time::Instant::now();
    let batched = s
        .read_batched()
        .expect("BPF_MAP_LOOKUP_BATCH (kernel >= 5.6)");
    errln!("3,000 flows read in {:?}", t0.elapsed());
    assert_eq!(batched.len(), 3000);
    for (id, (b, b_cpus)) in batched.iter().enumerate() {
        let (one, one_cpus) = s.flow(id as u16).expect("flow state");
        assert_eq!(b_cpus, &one_cpus, "flow {id}");
        assert_eq!(
            (b.unique(), b.missing(), b.reordered(), b.duplicates()),
            (
                one.unique(),
                one.missing(),
                one.reordered(),
                one.duplicates()
            ),
            "flow {id}"
        );
    }
    assert_eq!(batched[1024].0.unique(), 34 * cpus.len().min(2) as u64);
    assert_eq!(batched[1023].0.unique(), 34);
    assert!(!batched[1].0.seen());
}

/// Frames with one 802.1Q tag or QinQ (802.1ad outside) are counted with
/// their tags in the frame size, as the senders count them; a third tag
/// is more than the parser looks through and goes to the stack.
#[test]
fn tagged_frames_are_counted_with_their_tags() {
    let Some(mut s) = sink(1) else {
        return;
    };
    let tagged = |vlan: &str| FlowPath {
        vlan: Some(vlan.parse().expect("test VLAN")),
        ..v4()
    };
    let one = lr_frame(&tagged("100"), 128, 0, 0);
    assert_eq!(&one[12..14], &[0x81, 0x00]);
    assert_eq!(run(&mut s, &one), XDP_DROP);
    let qinq = lr_frame(&tagged("100.200"), 1518, 0, 1);
    assert_eq!(run(&mut s, &qinq), XDP_DROP);
    let v6 = FlowPath {
        vlan: Some("4094".parse().expect("test VLAN")),
        ..path("[2001:2::1]:40000", "[2001:2::2]:5001")
    };
    assert_eq!(run(&mut s, &lr_frame(&v6, 256, 0, 2)), XDP_DROP);
    let t = s.totals().expect("totals");
    assert_eq!((t.packets, t.bytes), (3, 128 + 1518 + 256));
    // Three tags: not parsed, passed on, not counted.
    let mut three = qinq[..12].to_vec();
    three.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    three.extend_from_slice(&qinq[12..]);
    assert_eq!(run(&mut s, &three), XDP_PASS);
    // A tag cut short.
    assert_eq!(run(&mut s, &one[..15]), XDP_PASS);
    let t = s.totals().expect("totals");
    assert_eq!((t.packets, t.bytes, t.reordered), (3, 1902, 0));
}

/// A tag the sender wrote but the receive path kept in metadata is not
/// in the frame XDP sees: the sink counts the bytes the job's tags add.
#[test]
fn tags_held_in_metadata_still_count_in_the_frame_size() {
    let Some(mut s) = sink_tagged(1, 4) else {
        return;
    };
    // As XDP sees it: the 128 B tagged frame without its tag.
    assert_eq!(run(&mut s, &lr_frame(&v4(), 124, 0, 0)), XDP_DROP);
    // With the tag in the frame it is not counted twice.
    let tagged = FlowPath {
        vlan: Some("7".parse().expect("test VLAN")),
        ..v4()
    };
    assert_eq!(run(&mut s, &lr_frame(&tagged, 128, 0, 1)), XDP_DROP);
    let t = s.totals().expect("totals");
    assert_eq!((t.packets, t.bytes), (2, 256));
}

/// Frames are counted per DSCP value they arrive with, IPv4 (TOS byte)
/// and IPv6 (traffic class across two bytes), tagged or not; ECN bits do
/// not change the value, duplicates and foreign frames are not counted.
#[test]
fn frames_are_counted_per_dscp_they_arrive_with() {
    let Some(mut s) = sink(1) else {
        return;
    };
    let marked = |p: FlowPath, d: &str| FlowPath {
        dscp: Some(d.parse().expect("test DSCP")),
        ..p
    };
    let mut seq = 0;
    let mut send = |s: &mut Sink, p: &FlowPath, n: u64| {
        for _ in 0..n {
            assert_eq!(run(s, &lr_frame(p, 128, 0, seq)), XDP_DROP);
            seq += 1;
        }
    };
    send(&mut s, &v4(), 2);
    send(&mut s, &marked(v4(), "ef"), 3);
    send(&mut s, &marked(v6(), "af11"), 4);
    let tagged = FlowPath {
        vlan: Some("100".parse().expect("test VLAN")),
        ..marked(v4(), "cs7")
    };
    send(&mut s, &tagged, 1);
    // ECN CE (0b11) beside EF: still EF.
    let mut ce = lr_frame(&marked(v4(), "ef"), 128, 0, seq);
    ce[15] |= 0b11;
    assert_eq!(run(&mut s, &ce), XDP_DROP);
    // A duplicate is not counted again.
    assert_eq!(run(&mut s, &ce), XDP_DROP);
    let t = s.totals().expect("totals");
    let counts = crate::engine::udp::dscp_counts(&t.dscp);
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        vec![(0, 2), (10, 4), (46, 4), (56, 1)]
    );
    assert_eq!(t.dscp.iter().sum::<u64>(), t.packets);
}
