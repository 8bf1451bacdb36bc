//! Tests of the frame templates, sizes and checksums.

use super::*;
use crate::proto::FrameSpec;

/// RFC 1071 checksum written out independently of the engine's.
fn rfc1071(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        sum += (u32::from(data[i]) << 8) | u32::from(data[i + 1]);
        i += 2;
    }
    if i < data.len() {
        sum += u32::from(data[i]) << 8;
    }
    while sum > 0xffff {
        sum = (sum >> 16) + (sum & 0xffff);
    }
    !(sum as u16)
}

fn path(src: &str, dst: &str) -> FlowPath {
    FlowPath {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        vlan: None,
        dscp: None,
    }
}

const H: Header = Header {
    flow: 7,
    seq: 123_456_789,
    sent_ns: 0x0102_0304_0506_0708,
};

/// Checks a frame as a receiver would and returns its UDP payload.
fn check_v4(f: &[u8], size: u32) -> Vec<u8> {
    assert_eq!(f.len(), size as usize - 4, "frame less FCS");
    assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 2]);
    assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 1]);
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    let ip = &f[14..34];
    assert_eq!(ip[0], 0x45);
    assert_eq!(
        usize::from(u16::from_be_bytes([ip[2], ip[3]])),
        f.len() - 14
    );
    assert_eq!(ip[9], 17);
    assert_eq!(rfc1071(ip), 0, "IPv4 header checksum");
    let udp = &f[34..];
    assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
    assert_ne!(&udp[6..8], &[0, 0], "UDP checksum present");
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ip[12..20]);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(udp);
    assert_eq!(rfc1071(&pseudo), 0, "UDP checksum");
    udp.to_vec()
}

#[test]
fn ipv4_frames_parse_with_right_checksums() {
    let p = path("198.18.0.2:40000", "198.19.0.9:5001");
    for size in [64, 65, 594, 1518] {
        let t = Template::new(&p, size).unwrap();
        let f = t.frame(&H);
        let udp = check_v4(&f, size);
        assert_eq!(&udp[0..2], &40000u16.to_be_bytes());
        assert_eq!(&udp[2..4], &5001u16.to_be_bytes());
        assert_eq!(Header::parse(&udp[8..]), Some(H));
        assert!(udp[8 + HEADER_LEN..].iter().all(|&b| b == FILL));
        assert_eq!(&f[26..30], &[198, 18, 0, 2]);
        assert_eq!(&f[30..34], &[198, 19, 0, 9]);
    }
}

#[test]
fn ipv6_frames_parse_with_right_checksums() {
    let p = path("[2001:2::2]:40000", "[2001:2:0:1::9]:5001");
    for size in [84, 85, 1518] {
        let t = Template::new(&p, size).unwrap();
        let f = t.frame(&H);
        assert_eq!(f.len(), size as usize - 4);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        let ip = &f[14..54];
        assert_eq!(ip[0] >> 4, 6);
        assert_eq!(ip[6], 17);
        let udp = &f[54..];
        assert_eq!(usize::from(u16::from_be_bytes([ip[4], ip[5]])), udp.len());
        assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
        assert_ne!(&udp[6..8], &[0, 0], "IPv6 requires a UDP checksum");
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[8..40]);
        pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(udp);
        assert_eq!(rfc1071(&pseudo), 0, "UDP checksum");
        assert_eq!(Header::parse(&udp[8..]), Some(H));
    }
}

#[test]
fn checksums_follow_every_header() {
    let t = Template::new(&path("198.18.0.2:1", "198.19.0.9:2"), 64).unwrap();
    let mut buf = vec![FILL; 60];
    for seq in [0, 1, 0xffff, (1 << 48) - 1] {
        for sent_ns in [0, u64::MAX, 0xffff_0000_ffff_0000] {
            let h = Header {
                flow: 0xffff,
                seq,
                sent_ns,
            };
            assert_eq!(t.write(&h, &mut buf), 60);
            check_v4(&buf, 64);
        }
    }
}

#[test]
fn imix_sizes_per_frame_sequence() {
    let p = path("198.18.0.2:1", "198.19.0.9:2");
    for size in frame_sequence(FrameSpec::Imix) {
        let f = Template::new(&p, size).unwrap().frame(&H);
        check_v4(&f, size);
    }
    assert!(Template::new(&path("[2001:2::2]:1", "[2001:2::3]:2"), 64).is_err());
}

#[test]
fn frame_checks() {
    assert!(check_frames(FrameSpec::Fixed(64), false, None).is_ok());
    let e = check_frames(FrameSpec::Fixed(64), true, None).unwrap_err();
    assert!(matches!(e, EngineError::Invalid(_)));
    assert!(e.to_string().contains("84 B"), "{e}");
    assert!(check_frames(FrameSpec::Fixed(63), false, None).is_err());
    assert!(check_frames(FrameSpec::Fixed(9001), false, None).is_err());
    assert!(check_frames(FrameSpec::Imix, false, None).is_ok());
    assert!(check_frames(FrameSpec::Imix, true, None).is_err());
}

#[test]
fn imix_sequence_matches_ratio() {
    let seq = frame_sequence(FrameSpec::Imix);
    let count = |n| seq.iter().filter(|&&s| s == n).count();
    assert_eq!((count(64), count(594), count(1518)), (7, 4, 1));
    let avg = seq.iter().map(|&s| f64::from(s)).sum::<f64>() / seq.len() as f64;
    assert!((avg - average_frame(FrameSpec::Imix)).abs() < 1e-9);
}

#[test]
fn frame_bytes() {
    assert_eq!(frame_of_payload(18, false, None), 64);
    assert_eq!(frame_of_payload(18, true, None), 84);
}

fn tagged(p: FlowPath, vlan: &str) -> FlowPath {
    FlowPath {
        vlan: Some(vlan.parse().unwrap()),
        ..p
    }
}

/// A tagged frame is the untagged frame of 4 (or 8) bytes less
/// payload with the tags after the MACs: same size on the wire, the
/// IP and UDP checksums right for the shorter datagram.
#[test]
fn vlan_tags_sit_after_the_macs_and_count_in_the_size() {
    let p = path("198.18.0.2:40000", "198.19.0.9:5001");
    for size in [68, 128, 1518] {
        let f = Template::new(&tagged(p.clone(), "100"), size)
            .unwrap()
            .frame(&H);
        assert_eq!(
            f.len(),
            size as usize - 4,
            "the tag is inside the frame size"
        );
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 100]);
        // Without the tag it is a valid untagged frame 4 B shorter.
        let mut untagged = f[..12].to_vec();
        untagged.extend_from_slice(&f[16..]);
        let udp = check_v4(&untagged, size - 4);
        assert_eq!(Header::parse(&udp[8..]), Some(H));
        assert_eq!(
            frame_of_payload(udp.len() - 8, false, p.vlan),
            u64::from(size) - 4
        );
        let v = Some("100".parse().unwrap());
        assert_eq!(frame_of_payload(udp.len() - 8, false, v), u64::from(size));
        assert_eq!(
            payload_for_frame(size, false, v),
            Some(udp.len() as u32 - 8)
        );
    }
    let q = Template::new(&tagged(p.clone(), "100.4094"), 1518)
        .unwrap()
        .frame(&H);
    assert_eq!(q.len(), 1514);
    assert_eq!(&q[12..20], &[0x88, 0xa8, 0x00, 100, 0x81, 0x00, 0x0f, 0xfe]);
    assert_eq!(&q[20..22], &[0x08, 0x00]);
    let mut untagged = q[..12].to_vec();
    untagged.extend_from_slice(&q[20..]);
    check_v4(&untagged, 1510);
    // IPv6 behind QinQ: the longest head the template holds.
    let p6 = tagged(path("[2001:2::2]:1", "[2001:2:0:1::9]:2"), "7.8");
    let f = Template::new(&p6, 92).unwrap().frame(&H);
    assert_eq!((f.len(), &f[20..22]), (88, &[0x86u8, 0xdd][..]));
    assert_eq!(Header::parse(&f[70..]), Some(H));
    // The checksum follows every header with tags too.
    let t = Template::new(&tagged(p, "4094"), 68).unwrap();
    let mut buf = vec![FILL; 64];
    for seq in [0, 1, (1 << 48) - 1] {
        let h = Header { seq, ..H };
        assert_eq!(t.write(&h, &mut buf), 64);
        let mut u = buf[..12].to_vec();
        u.extend_from_slice(&buf[16..]);
        check_v4(&u, 64);
    }
}

fn marked(p: FlowPath, dscp: &str) -> FlowPath {
    FlowPath {
        dscp: Some(dscp.parse().unwrap()),
        ..p
    }
}

/// The DSCP sits in the IPv4 TOS byte (ECN bits 0) under a header
/// checksum that covers it, and across the IPv6 version/traffic class
/// nibbles; nothing else of the frame changes.
#[test]
fn dscp_in_the_tos_byte_and_traffic_class_with_right_checksums() {
    let p = path("198.18.0.2:40000", "198.19.0.9:5001");
    let plain = Template::new(&p, 64).unwrap().frame(&H);
    assert_eq!(plain[15], 0, "unmarked: TOS 0");
    for (name, tos) in [("ef", 0xb8), ("af11", 0x28), ("cs7", 0xe0), ("63", 0xfc)] {
        for size in [64, 1518] {
            let f = Template::new(&marked(p.clone(), name), size)
                .unwrap()
                .frame(&H);
            assert_eq!(f[15], tos, "{name}: IPv4 TOS byte");
            check_v4(&f, size);
        }
        let f = Template::new(&marked(p.clone(), name), 64)
            .unwrap()
            .frame(&H);
        // Only the TOS byte and the header checksum differ.
        let diff: Vec<usize> = (0..f.len()).filter(|&i| f[i] != plain[i]).collect();
        assert!(diff.iter().all(|i| [15, 24, 25].contains(i)), "{diff:?}");
    }
    // Tagged: the TOS byte moves with the IP header.
    let t = FlowPath {
        vlan: Some("100".parse().unwrap()),
        ..marked(p, "ef")
    };
    let f = Template::new(&t, 68).unwrap().frame(&H);
    assert_eq!(f[19], 0xb8);
    let mut untagged = f[..12].to_vec();
    untagged.extend_from_slice(&f[16..]);
    check_v4(&untagged, 64);
    // IPv6: version 6, traffic class 0xb8 across bytes 0 and 1, flow
    // label 0; the UDP checksum does not cover it.
    let p6 = marked(path("[2001:2::2]:40000", "[2001:2:0:1::9]:5001"), "ef");
    let f = Template::new(&p6, 84).unwrap().frame(&H);
    assert_eq!(&f[14..18], &[0x6b, 0x80, 0x00, 0x00]);
    let plain6 = Template::new(&path("[2001:2::2]:40000", "[2001:2:0:1::9]:5001"), 84)
        .unwrap()
        .frame(&H);
    assert_eq!(&f[16..], &plain6[16..]);
}

#[test]
fn tagged_frames_must_hold_the_linerate_header() {
    let one = Some("100".parse().unwrap());
    let two = Some("100.200".parse().unwrap());
    let e = check_frames(FrameSpec::Fixed(64), false, one).unwrap_err();
    assert!(
        e.to_string()
            .contains("smallest IPv4 frame with a VLAN tag (4 B) is 68 B"),
        "{e}"
    );
    assert!(check_frames(FrameSpec::Fixed(68), false, one).is_ok());
    let e = check_frames(FrameSpec::Fixed(68), false, two).unwrap_err();
    assert!(e.to_string().contains("72 B"), "{e}");
    assert!(check_frames(FrameSpec::Fixed(92), true, two).is_ok());
    assert!(
        check_frames(FrameSpec::Imix, false, one).is_err(),
        "imix has 64 B frames"
    );
    assert!(Template::new(&tagged(path("198.18.0.2:1", "198.19.0.9:2"), "5"), 64).is_err());
    assert_eq!(payload_for_frame(64, false, one), Some(14));
    assert_eq!(payload_for_frame(4, false, two), None);
}

#[test]
fn a_run_that_would_give_up_every_frame_starts_now_at_its_spacing() {
    let p = Pacing {
        first_due_ns: 1_000_000,
        gap_ns: 100.0,
        late_ns: 50_000,
        catch_gap_ns: 0,
    };
    // 1,000 frames: the last is due at 1,099,900 ns, given up after
    // 1,149,900.
    for now in [0, 1_000_000, 1_100_000, 1_149_900] {
        assert_eq!(p.starting_at(1_000, now).first_due_ns, 1_000_000, "{now}");
    }
    // Later, every frame would be given up: they go from now instead,
    // with the same spacing and bounds.
    let q = p.starting_at(1_000, 1_149_901);
    assert_eq!(q.first_due_ns, 1_149_901);
    assert_eq!((q.gap_ns, q.late_ns, q.catch_gap_ns), (100.0, 50_000, 0));
    assert_eq!(p.starting_at(1, 1_050_001).first_due_ns, 1_050_001);
    assert_eq!(p.starting_at(0, 1_050_000).first_due_ns, 1_000_000);
    // No overflow at the clock's end.
    let far = Pacing {
        first_due_ns: u64::MAX - 10,
        ..p
    };
    assert_eq!(far.starting_at(1_000, u64::MAX).first_due_ns, u64::MAX - 10);
}
