//! stick.bpf.c run by BPF_PROG_RUN in test mode: hand-made tagged frames
//! in, the rewritten frame, the verdict and the per-direction counters
//! out.

use super::gen_tests::rfc1071;
use super::stick::{Stick, StickSpec};
use super::tests::{load_or_skip, test_run};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

const DUT: [u8; 6] = [2, 0x4c, 0x52, 0, 0, 0x02];
const GEN: [u8; 6] = [2, 0x4c, 0x52, 0, 0, 0x01];
const SINK: [u8; 6] = [2, 0x4c, 0x52, 0, 0, 0x04];

fn stick() -> Option<Stick> {
    // BPF_PROG_RUN counts on the CPU it runs on; the sums cover all.
    load_or_skip("stick", &[])?;
    Some(
        Stick::load(StickSpec {
            dut_mac: DUT,
            vlan_a: 10,
            mac_a: GEN,
            vlan_b: 20,
            mac_b: SINK,
        })
        .expect("the stick program loads and verifies"),
    )
}

/// Ethernet (to `dst`), one 802.1Q tag (priority 5, `vlan`), IPv4 with
/// `ttl` and a right header checksum, UDP and 32 B of payload.
fn v4_frame(dst: [u8; 6], vlan: u16, ttl: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&GEN);
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&((5u16 << 13) | vlan).to_be_bytes());
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![
        0x45, 0, 0, 60, 0x12, 0x34, 0x40, 0, ttl, 17, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
    ];
    let c = rfc1071(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89, 0, 40, 0, 0]);
    f.extend_from_slice(&[0x5a; 32]);
    f
}

/// The same with IPv6 (hop limit `hops`).
fn v6_frame(dst: [u8; 6], vlan: u16, hops: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&SINK);
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vlan.to_be_bytes());
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 40, 17, hops]);
    f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x20, 0x01, 0, 2, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x13, 0x89, 0x9c, 0x40, 0, 40, 0, 0]);
    f.extend_from_slice(&[0xa5; 32]);
    f
}

/// Runs the program on one frame: its verdict and the frame it left.
fn run(s: &mut Stick, frame: &[u8]) -> (u32, Vec<u8>) {
    let fd = s.obj.prog_fd("lr_stick").expect("program loaded");
    test_run(fd, frame, 0, 0)
}

#[test]
fn vlan_a_to_b_gets_tag_macs_and_ttl_with_a_right_checksum() {
    let Some(mut s) = stick() else { return };
    for ttl in [64u8, 2, 255] {
        let f = v4_frame(DUT, 10, ttl);
        let (verdict, out) = run(&mut s, &f);
        assert_eq!(verdict, XDP_TX, "ttl {ttl}");
        assert_eq!(out.len(), f.len());
        assert_eq!(out[0..6], SINK, "to VLAN B's host");
        assert_eq!(out[6..12], DUT, "from the DUT");
        assert_eq!(out[12..14], [0x81, 0x00]);
        assert_eq!(
            u16::from_be_bytes([out[14], out[15]]),
            (5 << 13) | 20,
            "VLAN 20, priority kept"
        );
        assert_eq!(out[18 + 8], ttl - 1);
        assert_eq!(rfc1071(&out[18..38]), 0, "header checksum verifies");
        assert_eq!(out[38..], f[38..], "UDP and payload untouched");
    }
    let c = s.counters().expect("counters");
    assert_eq!((c.a_to_b_forwarded, c.a_to_b_dropped), (3, 0));
    assert_eq!((c.b_to_a_forwarded, c.passed), (0, 0));
}

#[test]
fn vlan_b_to_a_ipv6_loses_one_hop() {
    let Some(mut s) = stick() else { return };
    let f = v6_frame(DUT, 20, 64);
    let (verdict, out) = run(&mut s, &f);
    assert_eq!(verdict, XDP_TX);
    assert_eq!(out[0..6], GEN);
    assert_eq!(out[6..12], DUT);
    assert_eq!(u16::from_be_bytes([out[14], out[15]]), 10);
    assert_eq!(out[18 + 7], 63);
    assert_eq!(out[26..], f[26..]);
    let c = s.counters().expect("counters");
    assert_eq!((c.b_to_a_forwarded, c.b_to_a_dropped), (1, 0));
    assert_eq!(c.a_to_b_forwarded, 0);
}

#[test]
fn ttl_one_and_zero_are_dropped_and_counted_per_direction() {
    let Some(mut s) = stick() else { return };
    for ttl in [1u8, 0] {
        assert_eq!(run(&mut s, &v4_frame(DUT, 10, ttl)).0, XDP_DROP);
    }
    assert_eq!(run(&mut s, &v6_frame(DUT, 20, 1)).0, XDP_DROP);
    // A cut-short IP header goes the same way.
    let short = v4_frame(DUT, 10, 64);
    assert_eq!(run(&mut s, &short[..30]).0, XDP_DROP);
    let c = s.counters().expect("counters");
    assert_eq!((c.a_to_b_dropped, c.b_to_a_dropped), (3, 1));
    assert_eq!(
        (c.a_to_b_forwarded, c.b_to_a_forwarded, c.passed),
        (0, 0, 0)
    );
}

#[test]
fn everything_else_is_passed_to_the_stack_untouched() {
    let Some(mut s) = stick() else { return };
    let other_mac = v4_frame([2, 0, 0, 0, 0, 9], 10, 64);
    let other_vlan = v4_frame(DUT, 30, 64);
    let mut untagged = v4_frame(DUT, 10, 64);
    untagged.drain(12..16);
    let mut arp = v4_frame(DUT, 10, 64);
    arp[16..18].copy_from_slice(&[0x08, 0x06]);
    let mut qinq = v4_frame(DUT, 10, 64);
    qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
    // Past the 14 B BPF_PROG_RUN wants, short of the tag's 18 B.
    let runt = v4_frame(DUT, 10, 64)[..16].to_vec();
    for f in [&other_mac, &other_vlan, &untagged, &arp, &qinq, &runt] {
        let (verdict, out) = run(&mut s, f);
        assert_eq!(verdict, XDP_PASS);
        assert_eq!(&out, f, "passed frames are not rewritten");
    }
    let c = s.counters().expect("counters");
    assert_eq!(c.passed, 6);
    assert_eq!(c.a_to_b_forwarded + c.a_to_b_dropped, 0);
    assert_eq!((c.vlan_a, c.vlan_b), (10, 20));
}

#[test]
fn bad_vlan_pairs_are_refused_with_the_fix() {
    let spec = StickSpec {
        dut_mac: DUT,
        vlan_a: 10,
        mac_a: GEN,
        vlan_b: 10,
        mac_b: SINK,
    };
    let e = Stick::load(spec).err().map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("two different ids")),
        "{e:?}"
    );
    let e = Stick::load(StickSpec {
        vlan_b: 4095,
        ..spec
    })
    .err()
    .map(|e| e.to_string());
    assert!(e.as_deref().is_some_and(|e| e.contains("1..4094")), "{e:?}");
}
