//! What each fuzz target asserts, one function per decoder of outside input.
//!
//! The libFuzzer targets in `fuzz/fuzz_targets/` call these on nightly, and
//! `tests/fuzz_replay.rs` includes this same file on stable to replay every
//! corpus file and crash input in `cargo test`. So it may use only what
//! both see: the `linerate` crate (its `proto` re-export) and `serde_json`.
//!
//! Each check asserts invariants of the decoder, not only "no panic": what
//! decodes re-encodes to the same message, parsed fields lie within the
//! input, errors point inside the input and name what they refused.

use linerate::proto::{self, control, frame, probe};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::fmt::Debug;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// A check: panics when the decoder breaks one of its rules on `data`.
pub type Check = fn(&[u8]);

/// Every target by its name in `fuzz/Cargo.toml` and `fuzz/corpus/<name>/`.
pub const TARGETS: &[(&str, Check)] = &[
    ("control", control),
    ("plan", plan),
    ("http_head", http_head),
    ("probe", probe),
    ("frame", frame),
    ("units", units),
    ("criteria", criteria),
    ("iperf3", iperf3),
    ("ssh_config", ssh_config),
    ("h2", h2),
    ("chunked", chunked),
];

/// The control protocol: length-prefixed JSON frames from a peer.
///
/// The input is read both as a stream of frames and as one frame's body.
/// A frame never claims more than it holds; a body that decodes as a
/// [`control::Request`] or [`control::Response`] encodes to a frame that
/// decodes to the same message.
pub fn control(data: &[u8]) {
    control_body(data);
    let mut rest = data;
    loop {
        let at = data.len() - rest.len();
        match control::read_frame(&mut rest) {
            Ok(None) => {
                assert!(rest.is_empty(), "clean end with bytes left");
                break;
            }
            Ok(Some(body)) => {
                assert!(!body.is_empty() && body.len() <= control::MAX_MESSAGE);
                assert_eq!(data.len() - rest.len(), at + 4 + body.len());
                assert_eq!(&data[at + 4..at + 4 + body.len()], &body[..]);
                control_body(&body);
            }
            Err(control::DecodeError::Oversize(n)) => {
                assert!(n > control::MAX_MESSAGE);
                break;
            }
            Err(control::DecodeError::Empty) => {
                assert_eq!(&data[at..at + 4], &[0, 0, 0, 0]);
                break;
            }
            Err(control::DecodeError::Truncated) => break,
            Err(e) => panic!("read_frame on a byte slice failed with {e}"),
        }
    }
}

fn control_body(body: &[u8]) {
    if let Ok(m) = serde_json::from_slice::<control::Request>(body) {
        round_trip(&m);
    }
    if let Ok(m) = serde_json::from_slice::<control::Response>(body) {
        round_trip(&m);
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(m: &T) {
    // Re-encoding may be longer than the input (escapes, floats): a body
    // near the limit may grow past it, and the encoder refuses that.
    match serde_json::to_vec(m) {
        Ok(body) if body.len() > control::MAX_MESSAGE => return,
        Ok(_) => {}
        Err(e) => panic!("a decoded message does not serialise: {e}: {m:?}"),
    }
    let frame = match control::encode(m) {
        Ok(f) => f,
        Err(e) => panic!("a decoded message does not encode: {e}: {m:?}"),
    };
    let mut r = &frame[..];
    match control::read_message::<T>(&mut r) {
        Ok(Some(back)) => assert_eq!(&back, m, "decode(encode(m)) != m"),
        Ok(None) => panic!("an encoded message reads as the end of the stream"),
        Err(e) => panic!("an encoded message does not decode: {e}: {m:?}"),
    }
    assert!(r.is_empty(), "an encoded message leaves bytes behind");
}

/// Plan files: TOML text → a validated plan, or an error at a line and
/// column inside the text.
pub fn plan(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let plan = match linerate::plan::parse("fuzz.toml", text) {
        Err(e) => {
            assert_eq!(e.file, "fuzz.toml");
            assert!(!e.message.trim().is_empty(), "an empty error message");
            let lines = text.split('\n').count();
            assert!((1..=lines).contains(&e.line), "line {} of {lines}", e.line);
            let line_chars = text
                .split('\n')
                .nth(e.line - 1)
                .map_or(0, |l| l.chars().count());
            assert!(
                (1..=line_chars + 1).contains(&e.column),
                "column {} of a {line_chars}-character line",
                e.column
            );
            return;
        }
        Ok(p) => p,
    };
    let within = |s: linerate::plan::Span| s.start <= s.end && s.end <= text.len();
    assert!(!plan.hosts.is_empty() && !plan.tests.is_empty());
    let mut names = HashSet::new();
    for h in &plan.hosts {
        assert!(names.insert(h.name.as_str()), "host {} twice", h.name);
        assert!(within(h.span));
    }
    let mut names = HashSet::new();
    for t in &plan.tests {
        assert!(names.insert(t.name.as_str()), "test {} twice", t.name);
        assert!(within(t.span));
        assert!((1..=linerate::plan::MAX_INSTANCES).contains(&t.instances));
        assert!(!t.from.is_empty(), "a test without generators");
        assert!(!t.from.contains(&t.to), "a test from its own sink");
        let mut from = HashSet::new();
        for f in &t.from {
            assert!(from.insert(f), "generator {f} twice");
            assert!(plan.host(f).is_some(), "generator {f} is no host");
        }
        assert!(plan.host(&t.to).is_some(), "sink {} is no host", t.to);
        assert!(
            target_allowed(t.target, &plan.allow_target),
            "target {} outside the safe ranges and allow_target",
            t.target
        );
        for a in &t.args {
            assert!(within(a.span) && within(a.value_span));
            assert!(a.flag.starts_with("--"), "flag {}", a.flag);
        }
    }
}

/// Loopback, the benchmarking ranges, or an allowed prefix (DESIGN §4).
fn target_allowed(ip: IpAddr, allow: &[proto::Cidr]) -> bool {
    let bench: [proto::Cidr; 2] = [
        proto::Cidr {
            addr: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)),
            prefix: 15,
        },
        proto::Cidr {
            addr: IpAddr::V6(std::net::Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0)),
            prefix: 48,
        },
    ];
    ip.is_loopback() || bench.iter().chain(allow).any(|c| c.contains(ip))
}

/// The request head `serve` reads from any client, and the response head
/// the HTTP client reads from any server.
pub fn http_head(data: &[u8]) {
    use linerate::http::wire::{self, Reject};
    match wire::parse_request(data) {
        Ok(h) => {
            assert!(h.len <= data.len() && h.len <= wire::MAX_HEAD);
            let head = &data[..h.len];
            assert!(head.ends_with(b"\n"), "a head that does not end a line");
            assert!(
                contains(head, h.target.as_bytes()),
                "target not in the head"
            );
            if let Some(r) = &h.range {
                assert!(contains(head, r.as_bytes()), "range not in the head");
            }
            // The head alone parses the same: nothing after it counts.
            assert_eq!(wire::parse_request(head), Ok(h.clone()));
            if h.body == wire::RequestBody::Chunked {
                let lower = head.to_ascii_lowercase();
                assert!(contains(&lower, b"transfer-encoding"), "chunked, unasked");
            }
            for len in [0, 1, h.len as u64, u64::MAX] {
                range_within(h.range.as_deref(), len);
            }
        }
        Err(Reject::Partial) => assert!(data.len() < wire::MAX_HEAD),
        Err(Reject::Status(s)) => {
            // Every status the parser may answer with (413: a body over
            // MAX_REQUEST_BODY; 501: a transfer coding it does not take).
            assert!(matches!(s, 400 | 405 | 413 | 431 | 501 | 505), "status {s}");
            assert_ne!(wire::reason(s), "Error");
        }
        Err(Reject::Http2) => assert!(data.starts_with(b"PRI * HTTP/2.0\r\n")),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for len in [0, 1, 100, data.len() as u64, u64::MAX] {
            range_within(Some(text), len);
        }
    }
    match wire::parse_response(data) {
        Ok(Some(r)) => assert!(r.len <= data.len()),
        Ok(None) => assert!(data.len() < wire::MAX_HEAD),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// The chunked transfer coding's decoder (`http::chunked`), which `serve`
/// feeds request bodies and the client responses, in whatever pieces the
/// socket gave.
///
/// The first byte seeds the cuts; the rest is the body. Fed whole, in
/// pieces of random length, and in other pieces with chunk data dropped
/// unseen (`skip`, as the client drops it in the kernel), the decoder
/// agrees on the bytes used, the data decoded, the end and the error; an
/// error is final. Data never exceeds the bytes used, a finished body ends
/// with CRLF, and a limit drawn from the input is never passed.
pub fn chunked(data: &[u8]) {
    use linerate::http::chunked::Decoder;
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let whole = decode_chunked(Decoder::new(), body, &mut |_| usize::MAX, false);
    if let (Ok(used), true) = (whole.used, whole.done) {
        assert!(
            body[..used].ends_with(b"\r\n"),
            "a body that ends without CRLF"
        );
    }
    if let Ok(used) = whole.used {
        assert!(whole.body <= used as u64, "more data than bytes");
        assert!(
            whole.done || used == body.len(),
            "bytes left before the end"
        );
    }
    // xorshift needs a state that is not 0.
    let mut rng = u64::from(seed)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(body.len() as u64)
        | 1;
    let mut next = move |most: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        1 + (rng % most.clamp(1, 64) as u64) as usize
    };
    let pieces = decode_chunked(Decoder::new(), body, &mut next, false);
    assert_eq!(pieces, whole, "fed in pieces");
    let skipped = decode_chunked(Decoder::new(), body, &mut next, true);
    assert_eq!(skipped, whole, "in pieces, data skipped");
    let limit = u64::from(seed) * 3;
    let limited = decode_chunked(Decoder::with_limit(limit), body, &mut next, false);
    assert!(
        limited.body <= limit,
        "{} bytes past a limit of {limit}",
        limited.body
    );
    if whole.done && whole.body <= limit {
        assert_eq!(limited, whole, "a limit the body keeps changed it");
    }
}

/// What a decoder made of a body: bytes used (or the error), data, end.
#[derive(Debug, PartialEq, Eq)]
struct ChunkedRun {
    used: Result<usize, linerate::http::chunked::ChunkError>,
    body: u64,
    done: bool,
}

/// Feeds `body` in pieces of `piece(left)` bytes; with `skip`, data the
/// decoder says is due is taken by `skip` instead of `feed`.
fn decode_chunked(
    mut dec: linerate::http::chunked::Decoder,
    body: &[u8],
    piece: &mut dyn FnMut(usize) -> usize,
    skip: bool,
) -> ChunkedRun {
    let mut at = 0;
    let mut counted = 0u64;
    let used = loop {
        if at == body.len() || dec.is_done() {
            break Ok(at);
        }
        let left = body.len() - at;
        if skip && dec.data_left() > 0 {
            let n = (dec.data_left().min(left as u64) as usize).min(piece(left));
            assert_eq!(dec.skip(n as u64), n as u64);
            at += n;
            counted += n as u64;
            continue;
        }
        let n = piece(left).min(left);
        match dec.feed(&body[at..at + n]) {
            Ok(f) => {
                assert!(f.used <= n && f.body <= f.used as u64);
                assert!(f.used == n || dec.is_done(), "bytes left before the end");
                at += f.used;
                counted += f.body;
            }
            Err(e) => {
                assert_eq!(dec.feed(b"0\r\n\r\n"), Err(e), "an error that passed");
                assert!(!e.to_string().is_empty());
                break Err(e);
            }
        }
    };
    // A feed that fails returns no count: the data before its error is
    // only in `body_bytes` (the message is refused anyway).
    if used.is_ok() {
        assert_eq!(
            counted,
            dec.body_bytes(),
            "data counted twice or not at all"
        );
    } else {
        assert!(counted <= dec.body_bytes(), "data counted twice");
    }
    ChunkedRun {
        used,
        body: dec.body_bytes(),
        done: dec.is_done(),
    }
}

fn range_within(header: Option<&str>, len: u64) {
    use linerate::http::wire::{parse_range, RangeAsk};
    match parse_range(header, len) {
        RangeAsk::Part { start, end } => {
            assert!(start <= end && end < len, "{start}-{end} of {len}")
        }
        RangeAsk::Whole | RangeAsk::Unsatisfiable => {}
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// The session token of the probe target; the fuzzer finds it by its
/// comparisons, as an attacker who learned it would.
const TOKEN: u64 = 0x4c52_0000_f022_0001;

/// Latency probes: the responder's admission and in-place reply, the
/// client's reply matching, and ICMP echo replies. The first byte picks
/// the sender's address, the session's age and the ICMP flavour.
pub fn probe(data: &[u8]) {
    let Some((&flags, dgram)) = data.split_first() else {
        return;
    };
    match probe::Probe::parse(dgram) {
        Ok(p) => {
            let mut out = dgram.to_vec();
            assert!(p.emit(&mut out));
            // Bytes 6 and 7 are reserved: emit writes zeros there.
            out[6] = dgram[6];
            out[7] = dgram[7];
            assert_eq!(out, dgram, "emit(parse(x)) != x");
        }
        Err(probe::ProbeError::Short) => assert!(dgram.len() < probe::HEADER_LEN),
        Err(probe::ProbeError::BadMagic) => assert_ne!(dgram[..4], probe::MAGIC),
        Err(probe::ProbeError::BadVersion(v)) => assert!(v == dgram[4] && v != probe::VERSION),
        Err(probe::ProbeError::BadKind(k)) => assert!(k == dgram[5] && !(1..=2).contains(&k)),
    }
    responder(flags, dgram);
    client(dgram);
    let (v6, raw_v4) = (flags & 4 != 0, flags & 8 != 0);
    if let Some((seq, tx)) = linerate::latency::icmp::parse_reply(v6, raw_v4, dgram, TOKEN) {
        let b = if raw_v4 {
            &dgram[usize::from(dgram[0] & 0x0f) * 4..]
        } else {
            dgram
        };
        assert_eq!(b[8..16], TOKEN.to_be_bytes());
        assert_eq!(b[16..24], tx.to_be_bytes());
        assert_eq!(b[24..28], seq.to_be_bytes());
    }
}

fn responder(flags: u8, dgram: &[u8]) {
    use linerate::latency::responder::{judge, RateCap, Session, Verdict};
    let client = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    let session = Session {
        token: TOKEN,
        client,
        duration: Duration::from_secs(10),
        max_pps: 1000,
    };
    let from_ip = if flags & 1 == 0 {
        client
    } else {
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9))
    };
    let elapsed = if flags & 2 == 0 {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    };
    let mut cap = RateCap::new(session.max_pps);
    let (verdict, p) = judge(
        &session,
        SocketAddr::new(from_ip, 4000),
        dgram,
        elapsed,
        &mut cap,
        Instant::now(),
    );
    let Some(mut p) = p else {
        assert_ne!(verdict, Verdict::Answer);
        return;
    };
    assert_eq!(verdict, Verdict::Answer);
    assert!(p.kind == probe::Kind::Request && p.token == TOKEN);
    assert!(from_ip == client && elapsed < session.duration);
    // The reply as the responder makes it: in place, never longer.
    let mut reply = dgram.to_vec();
    p.kind = probe::Kind::Reply;
    p.rx_count = 1;
    p.responder_rx_ns = 7;
    p.responder_tx_ns = 8;
    assert!(p.emit(&mut reply));
    assert_eq!(reply.len(), dgram.len());
    assert_eq!(reply[probe::HEADER_LEN..], dgram[probe::HEADER_LEN..]);
    // The client takes it for the probe it sent with that sequence.
    let mut t = linerate::latency::client::Tracker::new(TOKEN, 4);
    let sent = p.seq.min(3) + 1;
    for s in 0..sent {
        t.sent(s, 100 + u64::from(s));
    }
    let ours = p.seq < sent;
    assert_eq!(t.reply(&reply, 50), ours);
    assert_eq!(t.reply(&reply, 60), ours);
    if ours {
        let s = t.samples[p.seq as usize];
        assert!(s.answered() && s.duplicates() == 1);
        assert_eq!((s.3, s.4, s.5), (7, 8, 1));
    }
}

fn client(dgram: &[u8]) {
    let mut t = linerate::latency::client::Tracker::new(TOKEN, 4);
    for s in 0..4 {
        t.sent(s, 1);
    }
    let took = t.reply(dgram, 9);
    let want = matches!(probe::Probe::parse(dgram),
        Ok(p) if p.kind == probe::Kind::Reply && p.token == TOKEN && p.seq < 4);
    assert_eq!(took, want);
    let answered = t.samples.iter().filter(|s| s.answered()).count();
    assert_eq!(answered, usize::from(took));
}

/// The linerate frame header at the sink, and the per-flow sequence
/// accounting it feeds. The input is a series of datagrams, each after a
/// length byte (0..63); then read again as 16-bit sequence steps of one
/// flow, so the fuzzer reaches the tracker's window edges cheaply.
pub fn frame(data: &[u8]) {
    let mut flows: std::collections::HashMap<u16, Model> = Default::default();
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n % 64).min(tail.len());
        let (d, tail) = tail.split_at(n);
        rest = tail;
        match frame::Header::parse(d) {
            Some(h) => {
                assert!(d.len() >= frame::HEADER_LEN && d[..2] == frame::MAGIC);
                assert!(h.seq <= frame::SEQ_MASK);
                let mut b = [0u8; frame::HEADER_LEN];
                h.emit(&mut b);
                assert_eq!(b[..], d[..frame::HEADER_LEN], "emit(parse(x)) != x");
                flows.entry(h.flow).or_default().on_seq(h.seq);
            }
            None => assert!(d.len() < frame::HEADER_LEN || d[..2] != frame::MAGIC),
        }
    }
    let mut m = Model::default();
    let mut seq: u64 = 1 << 20;
    for w in data.chunks_exact(2) {
        let step = i64::from(i16::from_be_bytes([w[0], w[1]]));
        seq = seq.saturating_add_signed(step) & frame::SEQ_MASK;
        m.on_seq(seq);
    }
}

/// The sink's tracker beside an exact model (a set of every sequence seen):
/// inside the tracker's window the two agree exactly; a packet older than
/// the window may only be counted as new (too old to tell).
#[derive(Default)]
struct Model {
    t: linerate::engine::udp::FlowTracker,
    seen: HashSet<u64>,
    next: u64,
    fed: u64,
    unique: u64,
    duplicates: u64,
    reordered: u64,
    too_old: bool,
}

impl Model {
    fn on_seq(&mut self, s: u64) {
        let window = linerate::engine::udp::WINDOW;
        self.too_old |= s < self.next && self.next - s > window;
        self.t.on_seq(s);
        self.fed += 1;
        if self.seen.insert(s) {
            self.unique += 1;
            if s < self.next {
                self.reordered += 1;
            }
        } else {
            self.duplicates += 1;
        }
        self.next = self.next.max(s + 1);
        let t = &self.t;
        assert_eq!(t.unique() + t.duplicates(), self.fed);
        assert!(
            t.duplicates() <= self.duplicates,
            "a new packet counted as a duplicate"
        );
        assert!(t.reordered() <= t.unique());
        if !self.too_old {
            assert_eq!(
                (t.unique(), t.duplicates(), t.reordered()),
                (self.unique, self.duplicates, self.reordered),
                "tracker and model disagree inside the window"
            );
            assert_eq!(t.missing(), self.next - self.unique);
        }
    }
}

/// The unit parsers of the command line and plans: rates, durations,
/// sizes, frame sizes. Whatever parses is finite and in range; every error
/// quotes the text it refused.
pub fn units(data: &[u8]) {
    use linerate::cli::parse;
    use linerate::model::units::{self, Rate};
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match Rate::parse(s) {
        Ok(Rate::Pps(v) | Rate::L1Bps(v)) => assert!(v.is_finite() && v > 0.0, "{s} → {v}"),
        Ok(Rate::LinePct(p)) => assert!(p > 0.0 && p <= 100.0, "{s} → {p} %"),
        Err(e) => assert!(
            e.to_string().contains(s.trim()),
            "'{e}' does not quote '{s}'"
        ),
    }
    for r in [units::parse_bps(s), units::parse_pps(s)] {
        match r {
            Ok(v) => assert!(v.is_finite() && v > 0.0, "{s} → {v}"),
            Err(e) => assert!(
                e.to_string().contains(s.trim()),
                "'{e}' does not quote '{s}'"
            ),
        }
    }
    match parse::parse_secs(s) {
        Ok(v) => {
            assert!(v.is_finite() && v >= 0.0, "{s} → {v} s");
            // Every duration flag becomes a Duration after its range check.
            assert!(Duration::try_from_secs_f64(v).is_ok(), "{s} → {v} s");
        }
        Err(e) => assert!(e.to_string().contains(s)),
    }
    match parse::parse_size(s) {
        Ok(v) => {
            // What the text says, not a saturated cast of something larger.
            assert!(v < u64::MAX, "{s} → {v} B");
        }
        Err(e) => assert!(e.to_string().contains(s)),
    }
    match parse::parse_frame(s) {
        Ok(proto::FrameSpec::Fixed(n)) => {
            assert!((units::MIN_FRAME..=units::MAX_FRAME).contains(&n))
        }
        Ok(_) => {}
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Pass/fail criteria (`--expect`, a plan test's `expect`):
/// `FIGURE OP NUMBER[UNIT][@STAT]`.
///
/// What parses is a known figure and a finite, non-negative value in its
/// base unit; written back in that base unit it parses to the same
/// criterion. An error quotes the criterion and points inside it (or just
/// past its end, where something is missing).
pub fn criteria(data: &[u8]) {
    use linerate::model::criteria::{self, Kind};
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match criteria::parse(s) {
        Ok(c) => {
            assert!(
                c.value.is_finite() && c.value >= 0.0,
                "{s:?} → value {}",
                c.value
            );
            assert_eq!(c.text, s.trim());
            assert!(std::ptr::eq(
                c.figure,
                criteria::figure(c.figure.name).expect("a figure by its own name")
            ));
            // The same criterion written in base units: Display of an f64
            // is plain digits and a point, which the grammar takes.
            let (number, unit) = match c.figure.kind {
                Kind::Ratio => (c.value * 100.0, "%"),
                Kind::Percent => (c.value, "%"),
                Kind::Seconds => (c.value, "s"),
                Kind::Pps => (c.value, "pps"),
                Kind::Bps => (c.value, "bit/s"),
                Kind::Count => (c.value, ""),
                Kind::PerSecond => (c.value, "/s"),
            };
            let text = format!(
                "{}{}{number}{unit}@{}",
                c.figure.name,
                c.op.symbol(),
                c.stat.name()
            );
            let back = match criteria::parse(&text) {
                Ok(b) => b,
                Err(e) => panic!("{s:?} parses, but its base form does not: {e}"),
            };
            assert!(std::ptr::eq(back.figure, c.figure), "{text}");
            assert_eq!((back.op, back.stat), (c.op, c.stat), "{text}");
            let tolerance = c.value.abs() * 1e-12;
            assert!(
                (back.value - c.value).abs() <= tolerance || back.value == c.value,
                "{s:?} → {} but {text:?} → {}",
                c.value,
                back.value
            );
        }
        Err(e) => {
            let chars = s.chars().count();
            assert_eq!(e.input, s);
            assert!(!e.message.trim().is_empty(), "an empty message for {s:?}");
            assert!(
                e.column + e.len <= chars + 1,
                "{s:?}: column {} length {} past {chars} characters",
                e.column,
                e.len
            );
            assert!(e.to_string().contains(s), "'{e}' does not quote {s:?}");
        }
    }
}

/// The iperf3 control conversation as `linerate serve` reads it from a
/// client, and the client reads it from a server: the input is taken as a
/// cookie, a length-prefixed parameters message, a state byte and a
/// length-prefixed results message, each decoder seeing what is left.
///
/// Every state byte that decodes encodes to itself; a cookie that passes
/// has iperf3's shape; a length is the prefix's and within the limit; a
/// message that decodes re-encodes to one that decodes to the same values;
/// parameters that validate describe a test within iperf3's limits whose
/// wire form validates to the same test; results are taken only for the
/// streams the test has.
pub fn iperf3(data: &[u8]) {
    use linerate::proto::iperf3::{self as ip, WireParams, WireResults};
    for &b in data.iter().take(64) {
        if let Ok(s) = ip::State::from_byte(b) {
            assert_eq!(s.byte(), b);
        }
    }
    for counters_64bit in [false, true] {
        if let Some(h) = ip::UdpHeader::parse(data, counters_64bit) {
            let n = ip::UdpHeader::len(counters_64bit);
            let mut buf = vec![0u8; n];
            assert!(h.emit(&mut buf, counters_64bit));
            assert_eq!(&buf[..], &data[..n], "emit(parse(x)) != x");
        } else {
            assert!(data.len() < ip::UdpHeader::len(counters_64bit));
        }
    }
    let _ = ip::is_udp_reply(data);
    // Whole-buffer decoders, as a client reading one message.
    iperf3_params(ip::decode_json::<WireParams>(data).ok());
    if let Ok(r) = ip::decode_json::<WireResults>(data) {
        iperf3_round_trip(&r);
    }

    let mut rest = data;
    let cookie = &rest[..rest.len().min(ip::COOKIE_LEN)];
    if ip::check_cookie(cookie).is_ok() {
        assert_eq!(cookie[ip::COOKIE_LEN - 1], 0);
        assert!(cookie[..ip::COOKIE_LEN - 1]
            .iter()
            .all(|c| ip::COOKIE_CHARS.contains(c)));
    }
    rest = &rest[cookie.len()..];
    let params = iperf3_params(iperf3_message::<WireParams>(&mut rest));
    let Some((&state, tail)) = rest.split_first() else {
        return;
    };
    rest = tail;
    let _ = ip::State::from_byte(state);
    let Some(results) = iperf3_message::<WireResults>(&mut rest) else {
        return;
    };
    iperf3_round_trip(&results);
    let (transport, connections, client_sends) = match &params {
        Some(p) => (p.transport, p.connections(), Some(p.clone())),
        None => (ip::Transport::Tcp, 1, None),
    };
    let far_sends = |id: u32| {
        let k = ip::stream_index(id)?;
        (k < connections).then(|| client_sends.as_ref().is_some_and(|p| p.client_sends(k)))
    };
    if let Ok(streams) = ip::FarEnd::from_wire(&results, transport, far_sends) {
        assert_eq!(streams.len(), results.streams.len());
        assert!(streams.len() <= 2 * ip::MAX_STREAMS as usize);
        let mut far = ip::FarEnd {
            transport,
            streams,
            ..Default::default()
        };
        for s in &far.streams {
            let k = ip::stream_index(s.id).expect("a stream id the test has");
            assert!(k < connections && ip::stream_id(k) == s.id);
            assert!(s.seconds >= 0.0);
        }
        far.total();
        if let Some(pct) = far.loss_pct {
            assert!(pct.is_finite() && pct >= 0.0, "loss {pct} %");
        }
    }
}

/// One length-prefixed JSON message off the front of `rest`, as the
/// conversation reads it: the prefix, then that many bytes.
fn iperf3_message<T: serde::de::DeserializeOwned>(rest: &mut &[u8]) -> Option<T> {
    use linerate::proto::iperf3 as ip;
    let len = match ip::json_len(rest) {
        Ok(len) => {
            assert!(len <= ip::MAX_JSON_LEN);
            assert_eq!(
                len,
                u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize
            );
            len
        }
        Err(ip::Iperf3Error::Truncated { got, want: 4 }) => {
            assert!(got < 4 && got == rest.len());
            return None;
        }
        Err(ip::Iperf3Error::TooLong { len, max }) => {
            assert!(len > max);
            return None;
        }
        Err(e) => panic!("json_len failed with {e}"),
    };
    let body = rest.get(4..4 + len)?;
    *rest = &rest[4 + len..];
    ip::decode_body(body).ok()
}

/// Parameters a peer sent: what validates is within iperf3's limits, and
/// its wire form validates to the same test.
fn iperf3_params(
    p: Option<linerate::proto::iperf3::WireParams>,
) -> Option<linerate::proto::iperf3::TestParams> {
    use linerate::proto::iperf3 as ip;
    let p = p?;
    iperf3_round_trip(&p);
    let t = p.validate().ok()?;
    assert!((1..=ip::MAX_STREAMS).contains(&t.streams));
    assert!(t.time_s > 0.0 && t.time_s <= ip::MAX_TIME_S);
    assert!((0.0..=ip::MAX_OMIT_S).contains(&t.omit_s));
    let (lo, hi) = match t.transport {
        ip::Transport::Tcp => (1, ip::MAX_TCP_LEN),
        ip::Transport::Udp => (ip::MIN_UDP_LEN, ip::MAX_UDP_LEN),
    };
    assert!((lo..=hi).contains(&t.len), "block size {}", t.len);
    assert!(t.connections() <= 2 * ip::MAX_STREAMS);
    assert_eq!(t.to_wire().validate().as_ref(), Ok(&t), "{p:?}");
    Some(t)
}

/// A decoded iperf3 message encodes to one that decodes to the same
/// values (numbers to within a rounding of the last digit: the stable
/// replay's serde_json parses floats without `float_roundtrip`).
fn iperf3_round_trip<T: Serialize + DeserializeOwned + Debug>(m: &T) {
    use linerate::proto::iperf3 as ip;
    let msg = match ip::encode_json(m) {
        Ok(msg) => msg,
        // Escapes may make a message near the limit longer than it came.
        Err(ip::Iperf3Error::TooLong { .. }) => return,
        Err(e) => panic!("a decoded message does not encode: {e}: {m:?}"),
    };
    let back: T = match ip::decode_json(&msg) {
        Ok(b) => b,
        Err(e) => panic!("an encoded message does not decode: {e}: {m:?}"),
    };
    let (a, b) = (
        serde_json::to_value(m).expect("a value"),
        serde_json::to_value(&back).expect("a value"),
    );
    assert!(same_json(&a, &b), "decode(encode(m)) != m: {a} vs {b}");
}

/// Equal JSON values, numbers within a relative 1e-15.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-15,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// A plan's ssh config as the trust check reads it
/// (`plan::trust::check_config_text`), against OpenSSH's own reading:
/// whatever the check lets through, `ssh -G` must resolve to no proxy, no
/// known-hosts or local command, no PKCS#11 or security-key library of
/// the file's choosing, host keys checked against a file that can hold
/// them, and reading it must run nothing (`Match exec` runs `$SHELL`,
/// here a marker that records any call). Without ssh only the check runs.
pub fn ssh_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return; // the check reads the file as text and refuses other bytes
    };
    if linerate::plan::trust::check_config_text(text).is_err() {
        return;
    }
    let Some((view, ran)) = ssh_view(text) else {
        return;
    };
    assert!(!ran, "reading the accepted config ran a command:\n{text}");
    for line in view.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let v = value.trim().to_ascii_lowercase();
        let bad = match key {
            "proxycommand" | "proxyjump" | "knownhostscommand" | "localcommand" => v != "none",
            "permitlocalcommand" => v != "no",
            "pkcs11provider" => v != "none",
            "securitykeyprovider" => v != "internal",
            "stricthostkeychecking" => v == "false" || v == "no" || v == "off",
            "userknownhostsfile" => v
                .split_whitespace()
                .all(|f| f == "/dev/null" || f == "none"),
            _ => false,
        };
        assert!(!bad, "accepted config resolves to `{line}`:\n{text}");
    }
}

/// The scratch directory of [`ssh_view`] (its config and marker), made
/// once per process in the temp directory.
static SSH_DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

/// Removes [`ssh_view`]'s scratch directory (the replay test's end; a
/// fuzzing run's lives in the run's own temp directory).
pub fn ssh_view_cleanup() {
    if let Some(Some(d)) = SSH_DIR.get() {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `ssh -G` on `text` as a config file (for a host named like a lab's),
/// with a marker as the shell: its output, and whether the marker ran.
/// None without ssh or when ssh refuses the file.
pub fn ssh_view(text: &str) -> Option<(String, bool)> {
    use std::os::unix::fs::PermissionsExt;
    let dir = SSH_DIR
        .get_or_init(|| {
            let d = std::env::temp_dir().join(format!("lr-fuzz-ssh-{}", std::process::id()));
            std::fs::create_dir_all(&d).ok()?;
            let marker = d.join("sh");
            std::fs::write(
                &marker,
                format!("#!/bin/sh\ntouch '{}'\n", d.join("ran").display()),
            )
            .ok()?;
            std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o755)).ok()?;
            Some(d)
        })
        .as_ref()?;
    let cfg = dir.join("config");
    let ran = dir.join("ran");
    let _ = std::fs::remove_file(&ran);
    std::fs::write(&cfg, text).ok()?;
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).ok()?;
    let out = std::process::Command::new("ssh")
        .args(["-G", "-F"])
        .arg(&cfg)
        .arg("r1.lab")
        .env_clear()
        .env("SHELL", dir.join("sh"))
        .env("HOME", dir)
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let ran = ran.exists();
    (out.status.success() || ran).then(|| (String::from_utf8_lossy(&out.stdout).into_owned(), ran))
}

/// HTTP/2 from a server (`http::h2`): HPACK header blocks and a client
/// connection's frames.
///
/// The input is read as HPACK blocks (split at 0xfe) by two decoders, one
/// that reuses an identical block's result and one that always decodes:
/// they agree on every block. Then as the bytes a connection reads, in
/// pieces of the first byte's size, after one request: body bytes never
/// exceed the input, a whole response has a head and a final status, and
/// what the client queues to send stays in proportion to what it read.
pub fn h2(data: &[u8]) {
    use linerate::http::h2::conn::{Answer, Session};
    use linerate::http::h2::hpack::Decoder;
    let (mut reuse, mut fresh) = (Decoder::default(), Decoder::default());
    for block in data.split(|&b| b == 0xfe) {
        let a = reuse.head(block);
        assert_eq!(a, fresh.head_without_reuse(block), "reuse changed a result");
        if a.is_err() {
            break;
        }
    }
    let mut s = Session::new();
    let preface = s.outgoing().len();
    s.wrote(preface);
    assert!(s.request(&[0x82, 0x86, 0x84]));
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut body = 0u64;
    for piece in data.chunks(step) {
        let room = s.spare();
        assert!(room.len() >= piece.len(), "no room for a read");
        room[..piece.len()].copy_from_slice(piece);
        s.filled(piece.len());
        match s.process() {
            Ok(p) => body += p.body,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                break;
            }
        }
        if let Answer::Done(status) = s.answer() {
            assert!(status >= 200, "a final status of {status}");
            assert!(s.response_head().is_some());
        }
    }
    assert!(body <= data.len() as u64);
    assert!(
        s.outgoing().len() <= 64 + data.len(),
        "queued more than it read"
    );
}
