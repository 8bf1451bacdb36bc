//! `Session` against frames a server could send, byte by byte.

use super::*;
use crate::http::h2::frame::{put_head, Head, HEADER_LEN};
use crate::http::h2::hpack::RequestBlock;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

/// :status 200 and content-length `n`, literals without indexing.
fn ok_block(n: usize) -> Vec<u8> {
    let len = n.to_string();
    let mut b = vec![0x88, 0x0f, 0x0d, len.len() as u8];
    b.extend_from_slice(len.as_bytes());
    b
}

fn feed(s: &mut Session, bytes: &[u8]) -> Result<Progress, ConnError> {
    let room = s.spare();
    room[..bytes.len()].copy_from_slice(bytes);
    s.filled(bytes.len());
    s.process()
}

fn started() -> Session {
    let mut s = Session::new();
    assert!(s.outgoing().starts_with(frame::PREFACE));
    let n = s.outgoing().len();
    s.wrote(n);
    assert!(s.request(&[0x82, 0x86, 0x84]));
    assert!(!s.can_request());
    let h = Head::parse(s.outgoing()[..9].try_into().unwrap());
    assert_eq!((h.kind, h.stream), (frame::HEADERS, 1));
    let n = s.outgoing().len();
    s.wrote(n);
    s
}

#[test]
fn h2_session_takes_a_padded_response_split_anywhere() {
    let mut s = started();
    let mut wire = frame(frame::SETTINGS, 0, 0, &[0, 5, 0, 0, 0x40, 0]);
    wire.extend(frame(frame::HEADERS, frame::END_HEADERS, 1, &ok_block(5)));
    wire.extend(frame(
        frame::DATA,
        frame::PADDED | frame::END_STREAM,
        1,
        &[3, b'h', b'e', b'l', b'l', b'o', 0, 0, 0],
    ));
    // Every split of the bytes gives the same answer.
    for cut in 0..wire.len() {
        let mut s = started();
        let a = feed(&mut s, &wire[..cut]).unwrap();
        let b = feed(&mut s, &wire[cut..]).unwrap();
        assert_eq!(a.body + b.body, 5, "cut at {cut}");
        assert!(a.headers || b.headers);
        assert_eq!(s.answer(), Answer::Done(200));
    }
    let p = feed(&mut s, &wire).unwrap();
    assert_eq!(p.body, 5);
    assert_eq!(s.answer(), Answer::Done(200));
    // The SETTINGS were acknowledged.
    assert_eq!(s.outgoing(), frame(frame::SETTINGS, frame::ACK, 0, &[]));
    s.finish();
    assert!(s.request(&[0x82]));
    let h = Head::parse(s.outgoing()[9..18].try_into().unwrap());
    assert_eq!(h.stream, 3);
}

#[test]
fn h2_session_joins_continuations_and_keeps_the_dynamic_table() {
    let mut s = started();
    // :status 200 indexed into the table, content-length 3 too.
    let block = [0x48, 0x03, b'2', b'0', b'0', 0x5c, 0x01, b'3'];
    let mut wire = frame(frame::HEADERS, 0, 1, &block[..4]);
    wire.extend(frame(frame::CONTINUATION, 0, 1, &block[4..6]));
    wire.extend(frame(
        frame::CONTINUATION,
        frame::END_HEADERS,
        1,
        &block[6..],
    ));
    wire.extend(frame(frame::DATA, frame::END_STREAM, 1, b"abc"));
    assert_eq!(feed(&mut s, &wire).unwrap().body, 3);
    assert_eq!(s.answer(), Answer::Done(200));
    s.finish();
    assert!(s.request(&[0x82]));
    // The second response refers to both entries: 62 content-length, 63 :status.
    let mut wire = frame(frame::HEADERS, frame::END_HEADERS, 3, &[0xbf, 0xbe]);
    wire.extend(frame(frame::DATA, frame::END_STREAM, 3, b"xyz"));
    assert_eq!(feed(&mut s, &wire).unwrap().body, 3);
    assert_eq!(s.answer(), Answer::Done(200));
    assert_eq!(s.response_head().and_then(|h| h.content_length), Some(3));
}

#[test]
fn h2_session_answers_ping_and_skips_interim_responses() {
    let mut s = started();
    let mut wire = frame(frame::PING, 0, 0, b"12345678");
    wire.extend(frame(
        frame::HEADERS,
        frame::END_HEADERS,
        1,
        &[0x08, 0x03, b'1', b'0', b'3'],
    ));
    wire.extend(frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &[0x89],
    ));
    let p = feed(&mut s, &wire).unwrap();
    assert!(p.headers);
    assert_eq!(s.answer(), Answer::Done(204));
    assert_eq!(s.outgoing(), frame(frame::PING, frame::ACK, 0, b"12345678"));
}

#[test]
fn h2_session_goaway_and_resets() {
    let mut s = started();
    feed(
        &mut s,
        &frame(frame::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]),
    )
    .unwrap();
    assert_eq!(s.answer(), Answer::Refused);
    assert!(!s.can_request() && s.goaway_error().is_none());

    let mut s = started();
    let p = [0, 0, 0, 1, 0, 0, 0, frame::HTTP_1_1_REQUIRED as u8];
    feed(&mut s, &frame(frame::GOAWAY, 0, 0, &p)).unwrap();
    assert_eq!(s.answer(), Answer::GoAway(frame::HTTP_1_1_REQUIRED));

    let mut s = started();
    feed(&mut s, &frame(frame::RST_STREAM, 0, 1, &[0, 0, 0, 7])).unwrap();
    assert_eq!(s.answer(), Answer::Refused);
    let mut s = started();
    feed(&mut s, &frame(frame::RST_STREAM, 0, 1, &[0, 0, 0, 2])).unwrap();
    assert_eq!(s.answer(), Answer::Reset(2));
}

#[test]
fn h2_session_refuses_bad_frames() {
    let code = |wire: &[u8]| match feed(&mut started(), wire) {
        Err(ConnError::Frame(e)) => e.code,
        other => panic!("{other:?}"),
    };
    let mut big = Vec::new();
    put_head(&mut big, 16_385, frame::DATA, 0, 1);
    assert_eq!(code(&big), frame::FRAME_SIZE_ERROR);
    assert_eq!(
        code(&frame(frame::PING, 0, 0, b"1234")),
        frame::FRAME_SIZE_ERROR
    );
    assert_eq!(code(&frame(frame::DATA, 0, 0, b"x")), frame::PROTOCOL_ERROR);
    assert_eq!(
        code(&frame(frame::DATA, frame::PADDED, 1, &[5, 0])),
        frame::PROTOCOL_ERROR
    );
    assert_eq!(
        code(&frame(frame::PUSH_PROMISE, 0, 1, &[0; 4])),
        frame::PROTOCOL_ERROR
    );
    let mut cut = frame(frame::HEADERS, 0, 1, &[0x88]);
    cut.extend(frame(frame::PING, 0, 0, &[0; 8]));
    assert_eq!(code(&cut), frame::PROTOCOL_ERROR);
    assert_eq!(
        feed(&mut started(), b"HTTP/1.1 400 Bad Request\r\n"),
        Err(ConnError::Http1)
    );
    let block = frame(frame::HEADERS, frame::END_HEADERS, 1, &[0xc0]);
    assert!(matches!(
        feed(&mut started(), &block),
        Err(ConnError::Hpack(_))
    ));
    let mut short = frame(frame::HEADERS, frame::END_HEADERS, 1, &ok_block(4));
    short.extend(frame(frame::DATA, frame::END_STREAM, 1, b"abc"));
    assert!(matches!(
        feed(&mut started(), &short),
        Err(ConnError::Malformed(_))
    ));
}

#[test]
fn h2_session_gives_windows_back_in_large_steps() {
    let mut s = started();
    feed(
        &mut s,
        &frame(frame::HEADERS, frame::END_HEADERS, 1, &[0x88]),
    )
    .unwrap();
    let chunk = frame(frame::DATA, 0, 1, &[0u8; 16_384]);
    let mut sent = 0u64;
    while s.outgoing().is_empty() {
        sent += feed(&mut s, &chunk).unwrap().body;
    }
    assert_eq!(sent, u64::from(REFILL));
    // One update for the connection, one for the stream.
    assert_eq!(s.outgoing().len(), 2 * 13);
}

/// DATA frames of a request body: (stream, payload bytes, END_STREAM) of
/// each, from what the session wrote.
fn data_frames(mut out: &[u8]) -> Vec<(u32, usize, bool)> {
    let mut v = Vec::new();
    while let Some(hb) = out.first_chunk::<HEADER_LEN>() {
        let h = Head::parse(hb);
        if h.kind == frame::DATA {
            v.push((h.stream, h.len as usize, h.has(frame::END_STREAM)));
        }
        out = &out[HEADER_LEN + h.len as usize..];
    }
    v
}

#[test]
fn h2_request_body_stays_within_the_send_windows() {
    let mut s = Session::new();
    let n = s.outgoing().len();
    s.wrote(n);
    // The server's stream window is 20000 bytes; the connection's 65535.
    feed(
        &mut s,
        &frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 0, 0x4e, 0x20]),
    )
    .unwrap();
    let n = s.outgoing().len();
    s.wrote(n);
    let body: Arc<[u8]> = Arc::from(vec![b'x'; 70_000]);
    assert!(s.request_with(&RequestBlock::fixed(&[0x83, 0x86, 0x84]), &body, false));
    let h = Head::parse(s.outgoing()[..9].try_into().unwrap());
    assert_eq!(h.kind, frame::HEADERS);
    assert!(!h.has(frame::END_STREAM), "a body follows the HEADERS");
    let sent: usize = data_frames(s.outgoing()).iter().map(|d| d.1).sum();
    assert_eq!(sent, 20_000, "the stream's window");
    assert!(data_frames(s.outgoing())
        .iter()
        .all(|d| d.1 <= 16_384 && !d.2));
    assert!(!s.body_sent());
    let n = s.outgoing().len();
    s.wrote(n);
    // More stream window: the connection's 65535 is the limit now.
    feed(
        &mut s,
        &frame(frame::WINDOW_UPDATE, 0, 1, &100_000u32.to_be_bytes()),
    )
    .unwrap();
    let sent: usize = data_frames(s.outgoing()).iter().map(|d| d.1).sum();
    assert_eq!(sent, 65_535 - 20_000);
    let n = s.outgoing().len();
    s.wrote(n);
    feed(
        &mut s,
        &frame(frame::WINDOW_UPDATE, 0, 0, &10_000u32.to_be_bytes()),
    )
    .unwrap();
    let last = data_frames(s.outgoing());
    assert_eq!(last.iter().map(|d| d.1).sum::<usize>(), 70_000 - 65_535);
    assert!(
        last.last().is_some_and(|d| d.2),
        "END_STREAM on the last DATA"
    );
    assert!(s.body_sent());
    // A HEAD response's content-length is not a body to wait for.
    let n = s.outgoing().len();
    s.wrote(n);
    s.finish();
    assert!(s.request_with(&RequestBlock::fixed(&[0x82]), &Arc::from(&[][..]), true));
    let p = feed(
        &mut s,
        &frame(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            3,
            &ok_block(1000),
        ),
    )
    .unwrap();
    assert!(p.headers);
    assert_eq!(s.answer(), Answer::Done(200));
}
