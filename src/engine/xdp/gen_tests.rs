//! gen.bpf.c run by BPF_PROG_RUN in test mode (one frame in, one out, no
//! live frames): its frames must be byte for byte what the packet engine
//! builds for the same flow, size and sequence number, with valid IPv4 and
//! UDP checksums, whatever a forwarder left in the recycled page.

use super::live::{Cursor, Generator};
use super::tests::{load_or_skip, test_run};
use super::{consts, with_meta};
use crate::engine::frame::{frame_sequence, FlowPath, Template, FILL};
use crate::proto::frame::{Header, HEADER_LEN};
use crate::proto::FrameSpec;
use crate::sys;

/// A flow path between two test addresses (the XDP sink's tests use it too).
pub(super) fn path(src: &str, dst: &str) -> FlowPath {
    FlowPath {
        src_mac: [2, 0x4c, 0x52, 0, 0, 1],
        dst_mac: [2, 0x4c, 0x52, 0, 0, 2],
        src: src.parse().expect("test address"),
        dst: dst.parse().expect("test address"),
        vlan: None,
        dscp: None,
    }
}

/// RFC 1071 over `data`, written out apart from the engine's helpers
/// (the stick DUT's tests use it too).
pub(super) fn rfc1071(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for w in data.chunks(2) {
        sum += (u32::from(w[0]) << 8) | u32::from(*w.get(1).unwrap_or(&0));
    }
    while sum > 0xffff {
        sum = (sum >> 16) + (sum & 0xffff);
    }
    !(sum as u16)
}

/// Bytes of VLAN tags after the MACs (0, 4 or 8).
fn tag_bytes(f: &[u8]) -> usize {
    let mut t = 0;
    while t < 8 && matches!(f[12 + t..14 + t], [0x81, 0x00] | [0x88, 0xa8]) {
        t += 4;
    }
    t
}

/// The UDP checksum of a frame verifies (pseudo-header included).
fn udp_ok(f: &[u8]) -> bool {
    let t = tag_bytes(f);
    let (l4, mut pseudo) = if f[12 + t..14 + t] == [0x86, 0xdd] {
        (54 + t, f[22 + t..54 + t].to_vec())
    } else {
        assert_eq!(rfc1071(&f[14 + t..34 + t]), 0, "IPv4 header checksum");
        (34 + t, f[26 + t..34 + t].to_vec())
    };
    let udp = &f[l4..];
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(udp);
    udp[6..8] != [0, 0] && rfc1071(&pseudo) == 0
}

/// The interface a test-mode run with ingress 0 comes in on: lo.
const LO: u32 = 1;

/// Runs the generator once on `input` as if it came in on `ifindex`;
/// returns the program's verdict and the frame it wrote.
fn run_on(g: &mut Generator, input: &[u8], ifindex: u32) -> (u32, Vec<u8>) {
    run_raw(g, &with_meta(input), ifindex)
}

/// Runs the generator once on `input`, metadata included.
fn run_raw(g: &mut Generator, input: &[u8], ifindex: u32) -> (u32, Vec<u8>) {
    let fd = g.obj.prog_fd("lr_gen").expect("program loaded");
    test_run(fd, input, consts::META_LEN as u32, ifindex)
}

/// Runs the generator once on `input`; returns the frame it wrote.
fn run_once(g: &mut Generator, input: &[u8]) -> Vec<u8> {
    let (retval, mut out) = run_on(g, input, 0);
    assert_eq!(retval, 3, "the generator returns XDP_TX");
    // The output starts with the metadata, as the input did.
    out.split_off(consts::META_LEN as usize)
}

/// Makes the next frame read the clock, the cursor's position kept: what
/// the start of every unpaced run does.
fn restamp(g: &mut Generator) {
    let c = g.cursor().expect("cursor");
    g.set_cursor(&Cursor { stamp_left: 0, ..c })
        .expect("cursor");
}

/// The TX timestamp of the frame a single-frame run of `g` (one flow of
/// 64 B IPv4 frames) writes.
fn stamp_of(g: &mut Generator, input: &[u8]) -> u64 {
    let f = run_once(g, input);
    Header::parse(&f[42..]).expect("a linerate header").sent_ns
}

/// Checks `frames` runs of a generator over `paths` with sequence `sizes`.
fn check(paths: &[FlowPath], spec: FrameSpec, frames: usize, scribble: bool) {
    let sizes = frame_sequence(spec);
    let ids: Vec<u16> = (0..paths.len() as u16).map(|i| 100 + i).collect();
    let templates: Vec<Vec<Template>> = paths
        .iter()
        .map(|p| {
            sizes
                .iter()
                .map(|&s| Template::new(p, s).expect("template"))
                .collect()
        })
        .collect();
    let flows: Vec<(u16, &[Template])> = ids
        .iter()
        .zip(&templates)
        .map(|(&id, t)| (id, t.as_slice()))
        .collect();
    let Some(_) = load_or_skip("gen", &[("lr_templates", 16), ("lr_seq", 4)]) else {
        return;
    };
    let mut g = Generator::load(&flows, &sizes, LO).expect("generator loads");
    let max = *sizes.iter().max().expect("sizes") as usize - 4;
    let mut input = vec![FILL; max];
    let mut seqs = vec![0u64; paths.len()];
    for i in 0..frames {
        if scribble {
            // What a forwarder leaves in a recycled page: other MACs, a
            // lower TTL, another checksum, a stale linerate header.
            // The fill after them is never touched by forwarding.
            let tags = paths[0].vlan.map_or(0, |v| v.len());
            let head = tags + if paths[0].dst.is_ipv6() { 62 } else { 42 };
            input[..head + HEADER_LEN]
                .iter_mut()
                .for_each(|b| *b = b.wrapping_add(0x33));
        }
        // Each run here is one frame: a new run reads the clock afresh
        // (live.rs writes the cursor so before every run).
        restamp(&mut g);
        let before = sys::monotonic_ns();
        let f = run_once(&mut g, &input);
        let after = sys::monotonic_ns();
        let flow = i % paths.len();
        let slot = i % sizes.len();
        assert_eq!(
            f.len(),
            sizes[slot] as usize - 4,
            "frame {i}: size of slot {slot}"
        );
        let l4 = tag_bytes(&f) + if paths[flow].dst.is_ipv6() { 54 } else { 34 };
        let h = Header::parse(&f[l4 + 8..]).expect("a linerate header");
        assert_eq!((h.flow, h.seq), (ids[flow], seqs[flow]), "frame {i}");
        assert!(
            (before..=after).contains(&h.sent_ns),
            "TX timestamp on the monotonic clock"
        );
        assert_eq!(
            f,
            templates[flow][slot].frame(&h),
            "frame {i} as the packet engine builds it"
        );
        assert!(udp_ok(&f), "frame {i}: UDP checksum");
        seqs[flow] += 1;
    }
}

#[test]
fn ipv4_frames_match_the_packet_engine() {
    let p = [path("198.18.0.2:40000", "198.19.0.9:5001")];
    check(&p, FrameSpec::Fixed(64), 5, false);
    check(&p, FrameSpec::Fixed(1518), 3, false);
}

/// One tag and QinQ, IPv4 and IPv6: the heads of all six lengths the
/// program copies (42 + 4, 42 + 8, 62 + 4, 62 + 8 here), with the tags
/// counted in the frame size as the packet engine counts them.
#[test]
fn tagged_frames_match_the_packet_engine() {
    let tagged = |src: &str, dst: &str, vlan: &str| FlowPath {
        vlan: Some(vlan.parse().expect("test VLAN")),
        ..path(src, dst)
    };
    for vlan in ["100", "300.42"] {
        let p4 = [tagged("198.18.0.2:40000", "198.19.0.9:5001", vlan)];
        check(&p4, FrameSpec::Fixed(72), 4, true);
        check(&p4, FrameSpec::Fixed(1518), 2, false);
        let p6 = [tagged("[2001:2::2]:40000", "[2001:2:0:1::9]:5001", vlan)];
        check(&p6, FrameSpec::Fixed(92), 4, true);
        check(&p6, FrameSpec::Fixed(1518), 2, false);
    }
}

/// The live engine writes the DSCP the packet engine's templates carry:
/// IPv4 TOS under a checksum that covers it, the IPv6 traffic class.
#[test]
fn marked_frames_match_the_packet_engine() {
    let marked = |src: &str, dst: &str| FlowPath {
        dscp: Some("af41".parse().expect("test DSCP")),
        ..path(src, dst)
    };
    let p4 = [marked("198.18.0.2:40000", "198.19.0.9:5001")];
    check(&p4, FrameSpec::Fixed(64), 3, true);
    let p6 = [marked("[2001:2::2]:40000", "[2001:2:0:1::9]:5001")];
    check(&p6, FrameSpec::Fixed(84), 3, true);
}

#[test]
fn ipv6_frames_match_the_packet_engine() {
    let p = [
        path("[2001:2::2]:40000", "[2001:2:0:1::9]:5001"),
        path("[2001:2::2]:40001", "[2001:2:0:1::9]:5001"),
    ];
    check(&p, FrameSpec::Fixed(84), 6, false);
    check(&p, FrameSpec::Fixed(1518), 4, true);
}

#[test]
fn imix_flows_round_robin_with_sequences_per_flow() {
    let p = [
        path("198.18.0.2:40000", "198.19.0.9:5001"),
        path("198.18.0.2:40001", "198.19.0.9:5001"),
        path("198.18.0.3:40000", "198.19.0.10:5002"),
    ];
    // 36 frames: every flow meets every slot of the 12-frame imix.
    check(&p, FrameSpec::Imix, 36, false);
}

#[test]
fn headers_are_rewritten_over_what_a_forwarder_left() {
    let p = [path("198.18.0.2:40000", "198.19.0.9:5001")];
    check(&p, FrameSpec::Fixed(128), 4, true);
}

#[test]
fn the_gate_is_the_ingress_interface_not_bytes_in_the_page() {
    let p = [path("198.18.0.2:40000", "198.19.0.9:5001")];
    let sizes = frame_sequence(FrameSpec::Fixed(64));
    let t: Vec<Template> = sizes
        .iter()
        .map(|&s| Template::new(&p[0], s).expect("template"))
        .collect();
    let Some(_) = load_or_skip("gen", &[("lr_templates", 16), ("lr_seq", 4)]) else {
        return;
    };
    let input = vec![FILL; 60];
    // Real traffic on lo, where the program sits only to stay loaded (a
    // generator for another egress; test runs come in on lo).
    let mut g = Generator::load(&[(7, t.as_slice())], &sizes, 1000).expect("generator loads");
    let (retval, out) = run_on(&mut g, &input, 0);
    assert_eq!(retval, 2, "XDP_PASS on lo");
    assert_eq!(&out[consts::META_LEN as usize..], &input[..], "untouched");
    let mut g = Generator::load(&[(7, t.as_slice())], &sizes, LO).expect("generator loads");
    // A recycled page whose bytes in front of the frame a forwarder's
    // neighbour cache overwrote: still a frame to send.
    let mut scribbled = vec![0xaa; consts::META_LEN as usize];
    scribbled.extend_from_slice(&input);
    let (retval, out) = run_raw(&mut g, &scribbled, 0);
    assert_eq!(retval, 3, "XDP_TX whatever the metadata holds");
    let f = &out[consts::META_LEN as usize..];
    assert_eq!(Header::parse(&f[42..]).map(|h| h.flow), Some(7), "{f:x?}");
}

/// A generator of one flow (id 7) of 64 B frames whose runs come in on lo;
/// None where BPF cannot load here (the test reports itself skipped).
fn one_flow_generator() -> Option<Generator> {
    let p = path("198.18.0.2:40000", "198.19.0.9:5001");
    let sizes = frame_sequence(FrameSpec::Fixed(64));
    let t: Vec<Template> = sizes
        .iter()
        .map(|&s| Template::new(&p, s).expect("template"))
        .collect();
    load_or_skip("gen", &[("lr_templates", 16), ("lr_seq", 4)])?;
    Some(Generator::load(&[(7, t.as_slice())], &sizes, LO).expect("generator loads"))
}

#[test]
fn a_paced_run_drops_early_invocations_and_stops_at_its_quota() {
    let Some(mut g) = one_flow_generator() else {
        return;
    };
    let input = vec![FILL; 60];
    // Unpaced as loaded: every invocation sends.
    assert_eq!(g.cursor().expect("cursor"), Cursor::unpaced(0, 0));
    assert_eq!(run_on(&mut g, &input, 0).0, 3, "XDP_TX unpaced");
    // The first frame is due an hour from now: nothing leaves, nothing
    // of the flow's sequence is used up.
    let hour = 3_600_000_000_000;
    let paced = |t0_ns: u64, quota: u64| Cursor {
        t0_ns,
        gap_fp: Cursor::gap_fp(1000.0),
        quota,
        ..Cursor::unpaced(0, 0)
    };
    g.set_cursor(&paced(sys::monotonic_ns() + hour, 5))
        .expect("cursor");
    for _ in 0..3 {
        assert_eq!(run_on(&mut g, &input, 0).0, 1, "XDP_DROP before due");
    }
    assert_eq!(g.cursor().expect("cursor").sent, 0);
    // Due since a moment ago, 1 µs apart, at most 2: two frames, with the
    // flow's next sequence numbers, then drops.
    g.set_cursor(&paced(sys::monotonic_ns() - 10_000, 2))
        .expect("cursor");
    let mut seqs = Vec::new();
    for i in 0..4 {
        let (v, out) = run_on(&mut g, &input, 0);
        if i < 2 {
            assert_eq!(v, 3, "frame {i} is due: XDP_TX");
            let f = &out[consts::META_LEN as usize..];
            seqs.push(Header::parse(&f[42..]).expect("header").seq);
        } else {
            assert_eq!(v, 1, "past the quota: XDP_DROP");
        }
    }
    assert_eq!(
        seqs,
        [1, 2],
        "sequence numbers go on from the unpaced frame"
    );
    assert_eq!(g.cursor().expect("cursor").sent, 2);
    // Frame i waits for t0 + i × gap: with the first due now and a gap of
    // an hour, the second is not sent.
    g.set_cursor(&Cursor {
        gap_fp: Cursor::gap_fp(hour as f64),
        ..paced(sys::monotonic_ns(), 10)
    })
    .expect("cursor");
    assert_eq!(run_on(&mut g, &input, 0).0, 3, "the first frame is due");
    assert_eq!(run_on(&mut g, &input, 0).0, 1, "the second is an hour away");
    assert_eq!(g.cursor().expect("cursor").sent, 1);
}

/// Unpaced, one clock reading serves LR_STAMP_EVERY frames, never a
/// frame of a later run; paced, every frame reads the clock.
#[test]
fn unpaced_frames_share_a_clock_reading_within_a_run_only() {
    let Some(mut g) = one_flow_generator() else {
        return;
    };
    let input = vec![FILL; 60];
    let every = consts::STAMP_EVERY as usize;
    assert!(every > 1 && consts::BATCH as usize % every == 0);
    // Single-frame runs with no reset between them stand for the frames
    // of one run: gaps of 200 µs between them tell a fresh reading from a
    // reused one.
    let gap = std::time::Duration::from_micros(200);
    let mut stamps = Vec::new();
    let mut befores = Vec::new();
    for _ in 0..2 * every + 1 {
        befores.push(sys::monotonic_ns());
        stamps.push(stamp_of(&mut g, &input));
        std::thread::sleep(gap);
    }
    for (i, (&s, &b)) in stamps.iter().zip(&befores).enumerate() {
        let first = i - i % every;
        assert_eq!(s, stamps[first], "frame {i} takes frame {first}'s reading");
        if i % every == 0 {
            assert!(s >= b, "frame {i} reads the clock: {s} < {b}");
        }
    }
    assert!(stamps[every] >= stamps[0] + 200_000 * every as u64);
    // A new run (the cursor written) reads the clock at its first frame,
    // whatever is left of the last reading.
    std::thread::sleep(gap);
    let c = g.cursor().expect("cursor");
    assert_eq!(c.stamp_left, every as u64 - 1, "{c:?}");
    g.set_cursor(&Cursor::unpaced(c.flow, c.slot))
        .expect("cursor");
    let before = sys::monotonic_ns();
    let s = stamp_of(&mut g, &input);
    assert!(s >= before, "a run's first frame reads the clock");
    // Paced, every frame reads it.
    g.set_cursor(&Cursor {
        t0_ns: sys::monotonic_ns() - 1_000,
        gap_fp: Cursor::gap_fp(1.0),
        ..Cursor::unpaced(c.flow, c.slot)
    })
    .expect("cursor");
    let mut last = 0;
    for i in 0..3 {
        std::thread::sleep(gap);
        let before = sys::monotonic_ns();
        let s = stamp_of(&mut g, &input);
        assert!(s >= before && s > last, "paced frame {i} reads the clock");
        last = s;
    }
}

#[test]
fn a_stalled_paced_run_gives_up_late_slots_instead_of_bursting() {
    let Some(mut g) = one_flow_generator() else {
        return;
    };
    let input = vec![FILL; 60];
    // The run's first slot was due 1 ms ago, slots 1 µs apart, and a slot
    // may be 10 µs late: ~990 slots are given up, the frame due now goes.
    let stalled = |quota: u64| Cursor {
        t0_ns: sys::monotonic_ns() - 1_000_000,
        gap_fp: Cursor::gap_fp(1000.0),
        quota,
        late_ns: 10_000,
        ..Cursor::unpaced(0, 0)
    };
    let first = stalled(5000);
    g.set_cursor(&first).expect("cursor");
    assert_eq!(
        run_on(&mut g, &input, 0).0,
        3,
        "XDP_TX for the slot due now"
    );
    // Slots due by now: more than 1,000 when this thread was held off its
    // core before the run (a busy host); the run gives those up too.
    let due = (sys::monotonic_ns() - first.t0_ns) / 1_000;
    let c = g.cursor().expect("cursor");
    assert_eq!(c.sent, 1);
    assert!(
        (985..=due.max(1100)).contains(&c.skipped),
        "{c:?}, {due} due"
    );
    // Never more than the quota, sent and given up together.
    g.set_cursor(&stalled(100)).expect("cursor");
    assert_eq!(run_on(&mut g, &input, 0).0, 1, "every slot is too late");
    let c = g.cursor().expect("cursor");
    assert_eq!((c.sent, c.skipped), (0, 100), "{c:?}");
    assert_eq!(run_on(&mut g, &input, 0).0, 1, "the quota is used up");
    // A first slot due absurdly long ago gives everything up at once.
    g.set_cursor(&Cursor {
        t0_ns: 1,
        ..stalled(7)
    })
    .expect("cursor");
    assert_eq!(run_on(&mut g, &input, 0).0, 1);
    assert_eq!(g.cursor().expect("cursor").skipped, 7);
}

/// Issue 33: a paced run that is late catches up at a bounded overspeed
/// (one frame per `catch_gap_ns` at most), not at the core's speed.
#[test]
fn a_late_paced_run_catches_up_no_faster_than_its_catch_gap() {
    let Some(mut g) = one_flow_generator() else {
        return;
    };
    let input = vec![FILL; 60];
    // Slots 10 µs apart, the first due 1 ms ago (100 slots late, none
    // given up: a slot may be a second late, so a loop held off its core
    // by a busy host gives up nothing either), catching up at one frame
    // per 8 µs.
    let start = sys::monotonic_ns();
    g.set_cursor(&Cursor {
        t0_ns: start - 1_000_000,
        gap_fp: Cursor::gap_fp(10_000.0),
        quota: 100_000,
        late_ns: 1_000_000_000,
        catch_gap_ns: 8_000,
        ..Cursor::unpaced(0, 0)
    })
    .expect("cursor");
    let (mut sent, mut calls) = (0u64, 0u64);
    // The 8 µs windows a call ran in: a preempted loop has fewer of them
    // than its elapsed time holds.
    let (mut windows, mut last) = (0u64, u64::MAX);
    while sys::monotonic_ns() - start < 2_000_000 {
        calls += 1;
        let w = (sys::monotonic_ns() - start) / 8_000;
        if w != last {
            (windows, last) = (windows + 1, w);
        }
        if run_on(&mut g, &input, 0).0 == 3 {
            sent += 1;
        }
    }
    let elapsed = (sys::monotonic_ns() - start) as f64;
    let c = g.cursor().expect("cursor");
    assert_eq!((c.sent, c.skipped), (sent, 0), "{c:?}");
    // At most one frame per 8 µs and a burst of LR_CATCH_BURST. And still
    // catching up: at least a quarter of the 8 µs windows a call ran in
    // (on a busy machine the loop is preempted, and the elapsed time holds
    // windows no call saw: 216 frames in 9.5 ms over 887 calls beside
    // CI's fuzzing and a second fuzz run).
    let most = (elapsed / 8_000.0).ceil() as u64 + 33;
    assert!(
        sent <= most && sent >= windows / 4,
        "{sent} frames in {elapsed} ns over {calls} calls in {windows} windows of 8 µs"
    );
}
