//! Tests of the control protocol: frames, every message's round trip, the decoder's limits.

use super::*;
use crate::spec::RatePoint;
use crate::StreamSample;
use std::io::Cursor;

fn round_trip<T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug>(m: T) {
    let frame = encode(&m).unwrap();
    let back: T = read_message(&mut Cursor::new(frame)).unwrap().unwrap();
    assert_eq!(back, m);
}

#[test]
fn requests_round_trip() {
    round_trip(Request::Hello {
        proto_version: PROTO_VERSION,
        linerate_version: "0.1.0".into(),
    });
    round_trip(Request::Configure {
        ops: vec![
            NetOp::Addr {
                dev: "gen0".into(),
                addr: "198.18.0.1".parse().unwrap(),
                prefix: 24,
            },
            NetOp::Neigh {
                dev: "gen0".into(),
                addr: "2001:2::1".parse().unwrap(),
                mac: [2, 0x4c, 0x52, 0, 0, 1],
            },
        ],
    });
    round_trip(Request::Time { seq: 3 });
    round_trip(Request::Stop {
        test: 7,
        sender_totals: vec![FlowTotal {
            id: 3,
            tx_packets: 99,
        }],
    });
}

#[test]
fn udp_starts_round_trip() {
    round_trip(Request::Start {
        test: 7,
        job: Job::UdpSend {
            flows: vec![FlowSpec {
                id: 3,
                src: Some("198.18.1.4".parse().unwrap()),
                src_port: 0,
                dst: "198.19.1.4:9".parse().unwrap(),
            }],
            frame: FrameSpec::Imix,
            rate: Some(RateProfile::constant(1000.0)),
            duration_ms: 1000,
            batch: 64,
            interval_ms: 1000,
            cpus: vec![0],
            allow: vec!["192.0.2.0/24".parse().unwrap()],
            tx_engine: TxEngine::Packet,
            threads: 2,
            vlan: Some(crate::Vlan {
                id: 100,
                inner: Some(200),
            }),
            dscp: crate::Dscp::new(46),
            max_frames: Some(5_000),
            window: Some(1 << 20),
        },
        start_at_unix_ns: Some(1_700_000_000_000_000_000),
    });
    round_trip(Request::Start {
        test: 8,
        job: Job::UdpReceive {
            bind: "::".parse().unwrap(),
            port: 5201,
            flows: 16,
            interval_ms: 1000,
            cpus: vec![1],
            threads: 1,
            rx_engine: RxEngine::Xdp,
            target: Some("2001:2::2".parse().unwrap()),
            vlan: Some(crate::Vlan {
                id: 4094,
                inner: None,
            }),
            dscp: crate::Dscp::new(10),
            window: None,
        },
        start_at_unix_ns: None,
    });
}

#[test]
fn tcp_starts_round_trip() {
    round_trip(Request::Start {
        test: 9,
        job: Job::TcpListen {
            bind: "0.0.0.0".parse().unwrap(),
            port: 5201,
            expect_streams: 2,
            duration_ms: 1000,
            interval_ms: 1000,
            cpus: vec![0],
            congestion: Some("bbr".into()),
            pacing_bytes_per_s: Some(12_500_000),
            window: Some(262_144),
            dscp: crate::Dscp::new(8),
            vlan: Some(crate::Vlan {
                id: 100,
                inner: None,
            }),
            target: Some("198.18.0.2".parse().unwrap()),
        },
        start_at_unix_ns: None,
    });
    round_trip(Request::Start {
        test: 10,
        job: Job::TcpConnect {
            target: "198.18.0.2:5201".parse().unwrap(),
            streams: 2,
            direction: Direction::Both,
            duration_ms: 1000,
            interval_ms: 1000,
            cpus: vec![],
            congestion: None,
            buffer_len: 131072,
            allow: vec![],
            pacing_bytes_per_s: Some(6_250_000),
            window: None,
            dscp: None,
            vlan: Some(crate::Vlan {
                id: 100,
                inner: Some(200),
            }),
        },
        start_at_unix_ns: None,
    });
}

#[test]
fn a_receive_job_from_an_older_controller_counts_with_sockets() {
    let job = Job::UdpReceive {
        bind: "0.0.0.0".parse().unwrap(),
        port: 7000,
        flows: 4,
        interval_ms: 1000,
        cpus: vec![],
        threads: 0,
        rx_engine: RxEngine::Xdp,
        target: Some("198.18.0.2".parse().unwrap()),
        vlan: None,
        dscp: None,
        window: None,
    };
    // What an older controller sends: neither field.
    let mut v = serde_json::to_value(&job).unwrap();
    let fields = v.as_object_mut().unwrap();
    assert_eq!(fields["kind"], "udp_receive");
    assert!(fields.remove("rx_engine").is_some() && fields.remove("target").is_some());
    assert!(fields.remove("port").is_some());
    let Ok(Job::UdpReceive {
        rx_engine,
        target,
        port,
        ..
    }) = serde_json::from_value::<Job>(v)
    else {
        panic!("an older UdpReceive decodes");
    };
    assert_eq!((rx_engine, target, port), (RxEngine::Socket, None, 0));
}

#[test]
fn source_addresses_round_trip() {
    round_trip(Request::SourceAddress {
        towards: "198.18.0.2".parse().unwrap(),
    });
    round_trip(Response::Source {
        towards: "2001:2::2".parse().unwrap(),
        source: "2001:2::1".parse().unwrap(),
    });
}

#[test]
fn target_checks_round_trip() {
    let addr: IpAddr = "198.18.0.2".parse().unwrap();
    round_trip(Request::CheckTarget { addr });
    round_trip(Response::TargetCheck {
        addr: "2001:2::2".parse().unwrap(),
        owned: false,
        routed: true,
    });
}

#[test]
fn responses_round_trip() {
    round_trip(Response::Interval {
        test: 1,
        sample: IntervalSample {
            t_start: 0.0,
            t_end: 1.0,
            rx_packets: 10,
            streams: vec![StreamSample {
                id: 0,
                sender: true,
                bytes: 5,
                retransmits: 1,
                cwnd: 10,
                rtt_us: 40,
            }],
            ..Default::default()
        },
    });
    round_trip(Response::Error {
        test: None,
        message: "no".into(),
    });
}

#[test]
fn clean_eof_between_frames_is_none() {
    let got: Option<Request> = read_message(&mut Cursor::new(Vec::new())).unwrap();
    assert!(got.is_none());
}

#[test]
fn rejects_oversize_before_allocating() {
    let mut bytes = (u32::MAX).to_be_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    match read_frame(&mut Cursor::new(bytes)) {
        Err(DecodeError::Oversize(n)) => assert_eq!(n, u32::MAX as usize),
        other => panic!("expected oversize, got {other:?}"),
    }
    let big = vec![b'x'; MAX_MESSAGE + 1];
    let s = String::from_utf8(big).unwrap();
    assert!(encode(&s).is_err());
}

#[test]
fn rejects_truncated_empty_and_malformed() {
    assert!(matches!(
        read_frame(&mut Cursor::new(vec![0, 0])),
        Err(DecodeError::Truncated)
    ));
    assert!(matches!(
        read_frame(&mut Cursor::new(vec![0, 0, 0, 9, b'{'])),
        Err(DecodeError::Truncated)
    ));
    assert!(matches!(
        read_frame(&mut Cursor::new(vec![0, 0, 0, 0])),
        Err(DecodeError::Empty)
    ));
    let mut bad = 5u32.to_be_bytes().to_vec();
    bad.extend_from_slice(b"{\"ty");
    bad.push(b'}');
    assert!(matches!(
        read_message::<Request>(&mut Cursor::new(bad)),
        Err(DecodeError::Malformed(_))
    ));
    let unknown = encode(&serde_json::json!({"type": "format_disk"})).unwrap();
    assert!(read_message::<Request>(&mut Cursor::new(unknown)).is_err());
}

/// Deterministic garbage: the decoder must return, never panic.
#[test]
fn garbage_never_panics() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..5000 {
        let len = (next() % 64) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if next() % 2 == 0 && bytes.len() >= 4 {
            // A plausible length prefix makes the JSON parser see the rest.
            let body = (bytes.len() - 4) as u32;
            bytes[..4].copy_from_slice(&body.to_be_bytes());
        }
        let mut cur = Cursor::new(bytes);
        while let Ok(Some(_)) = read_message::<Request>(&mut cur) {}
    }
}

#[test]
fn version_check() {
    assert!(check_version(PROTO_VERSION).is_ok());
    let e = check_version(PROTO_VERSION + 1).unwrap_err();
    assert_eq!(e.peer, PROTO_VERSION + 1);
    assert!(e.to_string().contains("same linerate version"), "{e}");
}

#[test]
fn liveness_with_injected_clock() {
    let t0 = Instant::now();
    let mut l = Liveness::new(t0);
    assert!(!l.heartbeat_due(t0));
    assert!(l.heartbeat_due(t0 + HEARTBEAT_EVERY));
    l.sent(t0 + HEARTBEAT_EVERY);
    assert!(!l.heartbeat_due(t0 + HEARTBEAT_EVERY));
    assert!(!l.peer_gone(t0 + PEER_TIMEOUT - Duration::from_millis(1)));
    assert!(l.peer_gone(t0 + PEER_TIMEOUT));
    l.heard(t0 + PEER_TIMEOUT);
    assert!(!l.peer_gone(t0 + PEER_TIMEOUT));
}

#[test]
fn rate_profile_integral() {
    let c = RateProfile::constant(1000.0);
    assert_eq!(c.due(2.5), 2500.0);
    assert_eq!(c.rate_at(7.0), 1000.0);
    // Warmup 100 pps for 2 s, ramp 0 -> 1000 over 10 s, hold.
    let r = RateProfile {
        points: vec![
            RatePoint {
                t_s: 0.0,
                pps: 100.0,
            },
            RatePoint {
                t_s: 2.0,
                pps: 100.0,
            },
            RatePoint { t_s: 2.0, pps: 0.0 },
            RatePoint {
                t_s: 12.0,
                pps: 1000.0,
            },
        ],
    };
    assert!(r.validate().is_ok());
    assert_eq!(r.due(2.0), 200.0);
    assert!((r.due(12.0) - (200.0 + 5000.0)).abs() < 1e-9);
    assert!((r.due(13.0) - 6200.0).abs() < 1e-9);
    assert!((r.rate_at(7.0) - 500.0).abs() < 1e-9);
    assert!((r.due(7.0) - (200.0 + 1250.0)).abs() < 1e-9);
    assert!(RateProfile { points: vec![] }.validate().is_err());
    let back = RateProfile {
        points: vec![
            RatePoint { t_s: 2.0, pps: 1.0 },
            RatePoint { t_s: 1.0, pps: 1.0 },
        ],
    };
    assert!(back.validate().is_err());
}

#[test]
fn cidr_contains() {
    let c: Cidr = "198.18.0.0/15".parse().unwrap();
    assert!(c.contains("198.19.255.1".parse().unwrap()));
    assert!(!c.contains("198.20.0.1".parse().unwrap()));
    assert!(!c.contains("2001:2::1".parse().unwrap()));
    let v6: Cidr = "2001:2::/48".parse().unwrap();
    assert!(v6.contains("2001:2:0:ffff::1".parse().unwrap()));
    assert!(!v6.contains("2001:3::1".parse().unwrap()));
    let all: Cidr = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains("8.8.8.8".parse().unwrap()));
    assert!("1.2.3.4/33".parse::<Cidr>().is_err());
    assert!("nonsense".parse::<Cidr>().is_err());
}
