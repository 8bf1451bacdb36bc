//! Tests of the iperf3 protocol code: states, cookie, parameters, results and UDP headers.

use super::*;

#[test]
fn hellos_and_peer_strings() {
    assert!(is_udp_hello(b"9876"));
    assert!(is_udp_hello(&123_456_789u32.to_le_bytes()));
    assert!(is_udp_hello(&123_456_789u32.to_be_bytes()));
    assert!(!is_udp_hello(b"98765") && !is_udp_hello(b"6789") && !is_udp_hello(b""));
    let long = Some("é".repeat(300));
    let c = capped(&long).unwrap();
    assert!(c.len() <= MAX_PEER_STRING && c.len() >= MAX_PEER_STRING - 1);
    assert_eq!(capped(&Some(String::new())), None);
    assert_eq!(capped(&Some("cubic".into())).as_deref(), Some("cubic"));
}

fn params() -> TestParams {
    TestParams {
        transport: Transport::Udp,
        streams: 4,
        mode: Mode::Bidir,
        time_s: 5.0,
        omit_s: 1.0,
        len: 1200,
        bandwidth_bps: 10_000_000,
        counters_64bit: false,
        congestion: None,
        client_version: Some("linerate".into()),
    }
}

#[test]
fn states_round_trip_and_unknown_bytes_are_errors() {
    for b in 0..=255u8 {
        if let Ok(s) = State::from_byte(b) {
            assert_eq!(s.byte(), b);
        }
    }
    assert_eq!(State::from_byte(0xff), Ok(State::AccessDenied));
    assert_eq!(State::from_byte(0xfe), Ok(State::ServerError));
    assert_eq!(State::from_byte(3), Err(Iperf3Error::UnknownState(3)));
}

#[test]
fn cookies() {
    let c = make_cookie(&[200; 36]);
    assert!(check_cookie(&c).is_ok());
    assert_eq!(c[36], 0);
    assert!(check_cookie(&c[..36]).is_err());
    let mut bad = c;
    bad[3] = b'A';
    assert_eq!(check_cookie(&bad), Err(Iperf3Error::BadCookie));
    bad = c;
    bad[36] = b'a';
    assert_eq!(check_cookie(&bad), Err(Iperf3Error::BadCookie));
}

#[test]
fn params_round_trip() {
    let p = params();
    let msg = encode_json(&p.to_wire()).unwrap();
    assert_eq!(json_len(&msg).unwrap(), msg.len() - 4);
    let w: WireParams = decode_json(&msg).unwrap();
    assert_eq!(w.validate().unwrap(), p);
    assert_eq!(p.connections(), 8);
    assert!(p.client_sends(3) && !p.client_sends(4));
}

#[test]
fn what_iperf3_sends_decodes() {
    // iperf3 3.12's parameters for `-c X -u -b 10M -P 2 -R -t 3`.
    let text = br#"{"udp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":1448,"bandwidth":10000000,"pacing_timer":1000,"client_version":"3.12"}"#;
    let p = decode_body::<WireParams>(text).unwrap().validate().unwrap();
    assert_eq!(p.transport, Transport::Udp);
    assert_eq!(p.mode, Mode::Reverse);
    assert_eq!((p.streams, p.len, p.bandwidth_bps), (2, 1448, 10_000_000));
    // A trailing NUL is allowed.
    let mut t = text.to_vec();
    t.push(0);
    assert!(decode_body::<WireParams>(&t).is_ok());
}

#[test]
fn params_a_server_refuses() {
    let ok = params().to_wire();
    // The good parameters with one change.
    let with = |change: fn(&mut WireParams)| {
        let mut w = ok.clone();
        change(&mut w);
        w
    };
    let cases: Vec<(WireParams, u32)> = vec![
        (with(|w| w.parallel = 500.0), IE_NUMSTREAMS),
        (with(|w| w.parallel = 0.0), IE_NUMSTREAMS),
        (with(|w| w.len = 70_000.0), IE_BLOCKSIZE),
        (with(|w| w.len = 3.0), IE_BLOCKSIZE),
        (with(|w| w.time = 0.0), IE_UNIMP),
        (with(|w| w.time = f64::NAN), IE_UNIMP),
        (with(|w| w.omit = -1.0), IE_UNIMP),
        (with(|w| w.num = Some(1e6)), IE_UNIMP),
        (
            with(|w| {
                w.sctp = Some(true);
                w.udp = None;
            }),
            IE_UNIMP,
        ),
        (with(|w| w.bandwidth = f64::INFINITY), IE_UNIMP),
    ];
    for (w, errno) in cases {
        let e = w.validate().unwrap_err();
        assert_eq!(e.errno, errno, "{w:?}: {}", e.message);
        assert!(!e.message.is_empty());
    }
}

#[test]
fn truncated_oversized_and_malformed_messages_are_errors() {
    let good = encode_json(&params().to_wire()).unwrap();
    // Every truncation of a good message is an error, never a panic.
    for n in 0..good.len() {
        assert!(decode_json::<WireParams>(&good[..n]).is_err(), "{n}");
    }
    // A length over the cap is refused before anything is read.
    let huge = ((MAX_JSON_LEN + 1) as u32).to_be_bytes();
    assert!(matches!(json_len(&huge), Err(Iperf3Error::TooLong { .. })));
    assert!(matches!(
        json_len(&u32::MAX.to_be_bytes()),
        Err(Iperf3Error::TooLong { .. })
    ));
    // Trailing bytes, bad JSON, wrong types.
    let mut long = good.clone();
    long.push(b'x');
    assert!(decode_json::<WireParams>(&long).is_err());
    // (body, parses as parameters, parses as results): unknown keys are
    // ignored, as iperf3 does; wrong types and non-objects are not.
    for (body, as_params, as_results) in [
        (&b"{"[..], false, false),
        (b"[]", false, false),
        (b"null", false, false),
        (b"\xff\xfe", false, false),
        (b"{\"parallel\":\"two\"}", false, true),
        (b"{\"streams\":[{\"id\":\"x\"}]}", true, false),
        (b"{\"streams\":7}", true, false),
    ] {
        let mut m = (body.len() as u32).to_be_bytes().to_vec();
        m.extend_from_slice(body);
        assert_eq!(decode_json::<WireParams>(&m).is_ok(), as_params, "{body:?}");
        assert_eq!(
            decode_json::<WireResults>(&m).is_ok(),
            as_results,
            "{body:?}"
        );
    }
    // Garbage of every length and byte never panics.
    let mut seed = 0x9e37_79b9_u32;
    for n in 0..400 {
        let buf: Vec<u8> = (0..n % 64)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as u8
            })
            .collect();
        let _ = decode_json::<WireParams>(&buf);
        let _ = decode_json::<WireResults>(&buf);
        let _ = UdpHeader::parse(&buf, n % 2 == 0);
        let _ = check_cookie(&buf);
        let _ = buf.first().map(|b| State::from_byte(*b));
    }
}

#[test]
fn results_become_far_end_figures() {
    let text = br#"{"cpu_util_total":12.5,"cpu_util_user":2,"cpu_util_system":10.5,"sender_has_retransmits":-1,"streams":[{"id":1,"bytes":1200000,"retransmits":-1,"jitter":0.0002,"errors":10,"packets":1000,"start_time":0,"end_time":5.0}]}"#;
    let w: WireResults = decode_body(text).unwrap();
    let streams = FarEnd::from_wire(&w, Transport::Udp, |id| (id == 1).then_some(false)).unwrap();
    let mut f = FarEnd {
        transport: Transport::Udp,
        streams,
        ..Default::default()
    };
    f.total();
    assert_eq!(
        (f.received_bytes, f.lost, f.packets),
        (1_200_000, Some(10), Some(1000))
    );
    assert!((f.loss_pct.unwrap() - 1.0).abs() < 1e-9);
    assert!((f.streams[0].jitter_ms.unwrap() - 0.2).abs() < 1e-9);
    // A stream the test does not have, or a negative count, is an error.
    assert!(FarEnd::from_wire(&w, Transport::Udp, |_| None).is_err());
    let neg = WireResults {
        streams: vec![WireStream {
            id: 1.0,
            bytes: -5.0,
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(FarEnd::from_wire(&neg, Transport::Tcp, |_| Some(true)).is_err());
}

#[test]
fn stream_ids_skip_two() {
    let ids: Vec<u32> = (0..4).map(stream_id).collect();
    assert_eq!(ids, [1, 3, 4, 5]);
    for k in 0..300 {
        assert_eq!(stream_index(stream_id(k)), Some(k));
    }
    assert_eq!(stream_index(2), None);
    assert_eq!(stream_index(0), None);
}

#[test]
fn udp_header_and_hello() {
    let h = UdpHeader {
        sec: 1_700_000_000,
        usec: 999_999,
        seq: 7,
    };
    let mut b = [0u8; 1448];
    assert!(h.emit(&mut b, false));
    assert_eq!(&b[8..12], &[0, 0, 0, 7]);
    assert_eq!(UdpHeader::parse(&b, false), Some(h));
    let big = UdpHeader { seq: 1 << 40, ..h };
    assert!(big.emit(&mut b, true));
    assert_eq!(UdpHeader::parse(&b, true), Some(big));
    assert!(!h.emit(&mut b[..11], false));
    assert_eq!(UdpHeader::parse(&b[..15], true), None);
    assert!(is_udp_reply(&UDP_REPLY));
    assert!(is_udp_reply(&987_654_321u32.to_le_bytes()));
    assert!(!is_udp_reply(&UDP_HELLO));
}
