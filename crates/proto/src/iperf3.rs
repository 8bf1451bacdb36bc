//! The iperf3 (3.x) control protocol and UDP datagram header, as pure code:
//! state bytes, the 37-byte cookie, 4-byte big-endian length-prefixed JSON
//! for parameters and results, the UDP stream "hello" and the 12/16-byte
//! header in each UDP datagram. No sockets here; `linerate::iperf3` drives
//! the conversation and this module decodes every byte a peer sends, with
//! a bound on every length before anything is allocated.
//!
//! The far end's figures a test collects are carried in [`FarEnd`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod jobs;
pub use jobs::*;

/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
/// The cookie a client sends first on the control connection and on every
/// TCP data connection: 36 characters from [`COOKIE_CHARS`] and a NUL.
pub const COOKIE_LEN: usize = 37;
/// The characters iperf3 makes cookies of.
pub const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// The longest parameter or results JSON accepted. iperf3's results for its
/// 128-stream maximum are ~25 kB; with `--get-server-output` the server's
/// whole text output rides along, so allow generously but bounded.
pub const MAX_JSON_LEN: usize = 4 << 20;
/// iperf3's stream limit (MAX_STREAMS).
pub const MAX_STREAMS: u32 = 128;
/// iperf3's limits on test and omit time (MAX_TIME, MAX_OMIT_TIME), seconds.
pub const MAX_TIME_S: f64 = 86_400.0;
/// The longest string a peer may have kept (versions, congestion control
/// names): longer ones are cut to this many bytes.
pub const MAX_PEER_STRING: usize = 256;

/// A peer's string cut to [`MAX_PEER_STRING`] bytes (at a character
/// boundary); empty ones are none.
pub fn capped(s: &Option<String>) -> Option<String> {
    let s = s.as_ref()?;
    if s.is_empty() {
        return None;
    }
    let mut end = s.len().min(MAX_PEER_STRING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Some(s[..end].to_string())
}
pub const MAX_OMIT_S: f64 = 600.0;
/// The largest UDP payload; the smallest holds the 32-bit header.
pub const MAX_UDP_LEN: u32 = 65_507;
pub const MIN_UDP_LEN: u32 = 16;
/// The largest TCP block (MAX_BLOCKSIZE).
pub const MAX_TCP_LEN: u32 = 1 << 20;
/// The TCP block when the client names none (DEFAULT_TCP_BLKSIZE).
pub const DEFAULT_TCP_LEN: u32 = 128 * 1024;

/// The datagram a UDP stream's client sends first ("9876" on the wire:
/// iperf3 writes 0x36373839 in little-endian host order).
pub const UDP_HELLO: [u8; 4] = *b"9876";
/// The server's answer to it.
pub const UDP_REPLY: [u8; 4] = *b"6789";
/// Servers before 3.12 answer 987654321 in their host order.
const LEGACY_UDP_REPLY: u32 = 987_654_321;
/// Clients before 3.12 say hello with 123456789 in their host order.
const LEGACY_UDP_HELLO: u32 = 123_456_789;

/// Whether a datagram is a UDP stream's hello from an iperf3 client (any
/// version): exactly four bytes, the current or the legacy message.
pub fn is_udp_hello(b: &[u8]) -> bool {
    b == UDP_HELLO || b == LEGACY_UDP_HELLO.to_le_bytes() || b == LEGACY_UDP_HELLO.to_be_bytes()
}

/// iperf3 error numbers (i_errno) a server sends after SERVER_ERROR that
/// linerate names; others are given by number.
pub const IE_DURATION: u32 = 5;
pub const IE_NUMSTREAMS: u32 = 6;
pub const IE_BLOCKSIZE: u32 = 7;
pub const IE_UNIMP: u32 = 13;
pub const IE_TOTALRATE: u32 = 27;
pub const IE_ACCESSDENIED: u32 = 121;
pub const IE_AUTHTEST: u32 = 142;

/// A control-channel state byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfStart,
    IperfDone,
    /// The server is busy with another test (or the cookie was wrong).
    AccessDenied,
    /// Followed by the server's i_errno and errno, 4 bytes each.
    ServerError,
}

impl State {
    /// The byte on the wire (signed in iperf3: -1 and -2 are 0xff, 0xfe).
    pub fn byte(self) -> u8 {
        match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => 0xff,
            State::ServerError => 0xfe,
        }
    }

    pub fn from_byte(b: u8) -> Result<State, Iperf3Error> {
        Ok(match b {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            0xff => State::AccessDenied,
            0xfe => State::ServerError,
            other => return Err(Iperf3Error::UnknownState(other)),
        })
    }
}

/// What can be wrong with what an iperf3 peer sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Iperf3Error {
    #[error("the message ended after {got} of {want} bytes")]
    Truncated { got: usize, want: usize },
    #[error("a JSON message of {len} bytes is over the {max}-byte limit")]
    TooLong { len: usize, max: usize },
    #[error("the JSON message does not parse: {0}")]
    BadJson(String),
    #[error("unknown state byte {0}")]
    UnknownState(u8),
    #[error("a cookie must be 36 characters of [a-z2-7] and a NUL")]
    BadCookie,
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Invalid(String),
}

/// A cookie made of 36 random bytes (the caller draws them: no I/O here).
pub fn make_cookie(random: &[u8; 36]) -> [u8; COOKIE_LEN] {
    let mut c = [0u8; COOKIE_LEN];
    for (o, r) in c.iter_mut().zip(random) {
        *o = COOKIE_CHARS[usize::from(r % 32)];
    }
    c
}

/// Checks a cookie's shape (iperf3 compares them byte for byte; this only
/// rejects what no iperf3 sends, so a stray connection is named as such).
pub fn check_cookie(c: &[u8]) -> Result<(), Iperf3Error> {
    if c.len() != COOKIE_LEN {
        return Err(Iperf3Error::Truncated {
            got: c.len(),
            want: COOKIE_LEN,
        });
    }
    let (body, nul) = c.split_at(COOKIE_LEN - 1);
    if nul[0] != 0 || !body.iter().all(|b| COOKIE_CHARS.contains(b)) {
        return Err(Iperf3Error::BadCookie);
    }
    Ok(())
}

/// The length a 4-byte big-endian prefix announces, within [`MAX_JSON_LEN`].
pub fn json_len(prefix: &[u8]) -> Result<usize, Iperf3Error> {
    let p: [u8; 4] =
        prefix
            .get(..4)
            .and_then(|p| p.try_into().ok())
            .ok_or(Iperf3Error::Truncated {
                got: prefix.len(),
                want: 4,
            })?;
    let len = u32::from_be_bytes(p) as usize;
    if len > MAX_JSON_LEN {
        return Err(Iperf3Error::TooLong {
            len,
            max: MAX_JSON_LEN,
        });
    }
    Ok(len)
}

/// A JSON message with its length prefix.
pub fn encode_json<T: Serialize>(v: &T) -> Result<Vec<u8>, Iperf3Error> {
    let body = serde_json::to_vec(v).map_err(|e| Iperf3Error::BadJson(e.to_string()))?;
    if body.len() > MAX_JSON_LEN {
        return Err(Iperf3Error::TooLong {
            len: body.len(),
            max: MAX_JSON_LEN,
        });
    }
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

/// A whole length-prefixed JSON message (prefix and body in one buffer).
pub fn decode_json<T: for<'de> Deserialize<'de>>(msg: &[u8]) -> Result<T, Iperf3Error> {
    let len = json_len(msg)?;
    let body = &msg[4..];
    if body.len() < len {
        return Err(Iperf3Error::Truncated {
            got: body.len(),
            want: len,
        });
    }
    if body.len() > len {
        return Err(Iperf3Error::Invalid(format!(
            "{} bytes follow a {len}-byte JSON message",
            body.len() - len
        )));
    }
    decode_body(body)
}

/// A JSON body whose length was checked with [`json_len`]. iperf3 sends
/// numbers as doubles and may end the text with a NUL.
pub fn decode_body<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Iperf3Error> {
    if body.len() > MAX_JSON_LEN {
        return Err(Iperf3Error::TooLong {
            len: body.len(),
            max: MAX_JSON_LEN,
        });
    }
    let body = body.strip_suffix(&[0]).unwrap_or(body);
    // Every iperf3 message is an object; serde would also take an array
    // for a struct, which no peer means.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Iperf3Error::BadJson(
            "the message is not a JSON object".into(),
        ));
    }
    serde_json::from_slice(body).map_err(|e| Iperf3Error::BadJson(e.to_string()))
}

/// The parameters a client sends (PARAM_EXCHANGE), as on the wire: iperf3
/// writes flags as `true` when set and leaves them out otherwise, and every
/// number as a double. Unknown keys are ignored, as iperf3 does.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct WireParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sctp: Option<bool>,
    pub omit: f64,
    pub time: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockcount: Option<f64>,
    pub parallel: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    pub len: f64,
    pub bandwidth: f64,
    pub pacing_timer: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_counters_64bit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
}

/// Which protocol a test's data streams use.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    #[default]
    Tcp,
    Udp,
}

/// Who sends on the data streams, from the client's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The client sends (iperf3's default).
    ClientSends,
    /// `-R`: the server sends.
    Reverse,
    /// `--bidir`: N streams each way, the client's sending ones first.
    Bidir,
}

/// A test both ends agreed on: the parameters, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TestParams {
    pub transport: Transport,
    pub streams: u32,
    pub mode: Mode,
    pub time_s: f64,
    pub omit_s: f64,
    /// Bytes per write (TCP) or per datagram (UDP payload).
    pub len: u32,
    /// The sender's target rate per stream, payload bit/s; 0: unlimited.
    pub bandwidth_bps: u64,
    pub counters_64bit: bool,
    pub congestion: Option<String>,
    pub client_version: Option<String>,
}

impl TestParams {
    /// Connections the client opens.
    pub fn connections(&self) -> u32 {
        if self.mode == Mode::Bidir {
            self.streams * 2
        } else {
            self.streams
        }
    }

    /// Whether the client sends on its `k`-th connection (0-based), in the
    /// order both ends create them.
    pub fn client_sends(&self, k: u32) -> bool {
        match self.mode {
            Mode::ClientSends => true,
            Mode::Reverse => false,
            Mode::Bidir => k < self.streams,
        }
    }

    /// The wire form a client sends.
    pub fn to_wire(&self) -> WireParams {
        WireParams {
            tcp: (self.transport == Transport::Tcp).then_some(true),
            udp: (self.transport == Transport::Udp).then_some(true),
            sctp: None,
            omit: self.omit_s,
            time: self.time_s,
            num: None,
            blockcount: None,
            parallel: f64::from(self.streams),
            reverse: (self.mode == Mode::Reverse).then_some(true),
            bidirectional: (self.mode == Mode::Bidir).then_some(true),
            len: f64::from(self.len),
            bandwidth: self.bandwidth_bps as f64,
            pacing_timer: 1000.0,
            congestion: self.congestion.clone(),
            udp_counters_64bit: self.counters_64bit.then_some(1.0),
            authtoken: None,
            client_version: self.client_version.clone(),
        }
    }
}

/// iperf3's number for an error a server answers with (i_errno), and the
/// message for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub errno: u32,
    pub message: String,
}

impl WireParams {
    /// The block size the test asks for (0: the transport's default),
    /// refused outside the transport's bounds.
    fn block_len(&self, transport: Transport) -> Result<u32, Refusal> {
        let (lo, hi) = match transport {
            Transport::Tcp => (1, MAX_TCP_LEN),
            Transport::Udp => (MIN_UDP_LEN, MAX_UDP_LEN),
        };
        let int = self.len.is_finite() && self.len >= 0.0 && self.len.fract() == 0.0;
        if self.len == 0.0 {
            Ok(match transport {
                Transport::Tcp => DEFAULT_TCP_LEN,
                Transport::Udp => 1448,
            })
        } else if int && self.len >= f64::from(lo) && self.len <= f64::from(hi) {
            Ok(self.len as u32)
        } else {
            Err(Refusal {
                errno: IE_BLOCKSIZE,
                message: format!("block size {} is outside {lo}..={hi} bytes", self.len),
            })
        }
    }

    /// The test these parameters ask for, or why a server refuses it (with
    /// the i_errno to answer).
    pub fn validate(&self) -> Result<TestParams, Refusal> {
        let refuse = |errno: u32, message: String| Refusal { errno, message };
        let transport = match (self.tcp, self.udp, self.sctp) {
            (_, Some(true), _) => Transport::Udp,
            (_, _, Some(true)) => {
                return Err(refuse(
                    IE_UNIMP,
                    "SCTP tests are not supported by linerate".into(),
                ))
            }
            _ => Transport::Tcp,
        };
        if self.num.is_some_and(|n| n > 0.0) || self.blockcount.is_some_and(|n| n > 0.0) {
            return Err(refuse(
                IE_UNIMP,
                "tests bounded by bytes (-n) or blocks (-k) are not supported by linerate; use a time (-t)".into(),
            ));
        }
        let int = |v: f64| v.is_finite() && v >= 0.0 && v.fract() == 0.0;
        if !int(self.parallel) || self.parallel < 1.0 || self.parallel > f64::from(MAX_STREAMS) {
            return Err(refuse(
                IE_NUMSTREAMS,
                format!(
                    "{} parallel streams is outside 1..={MAX_STREAMS}",
                    self.parallel
                ),
            ));
        }
        if !(self.time.is_finite() && self.time > 0.0 && self.time <= MAX_TIME_S) {
            return Err(refuse(
                IE_UNIMP,
                format!(
                    "test time {} s is outside (0, {MAX_TIME_S}] (linerate needs a timed test)",
                    self.time
                ),
            ));
        }
        if !(self.omit.is_finite() && (0.0..=MAX_OMIT_S).contains(&self.omit)) {
            return Err(refuse(
                IE_UNIMP,
                format!("omit time {} s is outside 0..={MAX_OMIT_S}", self.omit),
            ));
        }
        let len = self.block_len(transport)?;
        if !(self.bandwidth.is_finite() && self.bandwidth >= 0.0 && self.bandwidth < 1e15) {
            return Err(refuse(
                IE_UNIMP,
                format!("bandwidth {} bit/s is not a rate", self.bandwidth),
            ));
        }
        let mode = match (self.reverse, self.bidirectional) {
            (_, Some(true)) => Mode::Bidir,
            (Some(true), _) => Mode::Reverse,
            _ => Mode::ClientSends,
        };
        Ok(TestParams {
            transport,
            streams: self.parallel as u32,
            mode,
            time_s: self.time,
            omit_s: self.omit,
            len,
            bandwidth_bps: self.bandwidth as u64,
            counters_64bit: self.udp_counters_64bit.is_some_and(|v| v != 0.0),
            congestion: capped(&self.congestion),
            client_version: capped(&self.client_version),
        })
    }
}

/// One stream in a results message.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct WireStream {
    pub id: f64,
    pub bytes: f64,
    pub retransmits: f64,
    pub jitter: f64,
    pub errors: f64,
    pub packets: f64,
    pub start_time: f64,
    pub end_time: f64,
}

/// The results each end sends at EXCHANGE_RESULTS.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct WireResults {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    pub sender_has_retransmits: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    pub streams: Vec<WireStream>,
}

/// The stream ids iperf3 gives its streams in creation order: 1, then 3,
/// 4, 5... (id 2 is skipped, and kept skipped for compatibility).
pub fn stream_id(k: u32) -> u32 {
    if k == 0 {
        1
    } else {
        k + 2
    }
}

/// The position of stream `id` in creation order.
pub fn stream_index(id: u32) -> Option<u32> {
    match id {
        1 => Some(0),
        0 | 2 => None,
        n => Some(n - 2),
    }
}

#[cfg(test)]
mod tests {
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
        let cases: Vec<(WireParams, u32)> = vec![
            (
                WireParams {
                    parallel: 500.0,
                    ..ok.clone()
                },
                IE_NUMSTREAMS,
            ),
            (
                WireParams {
                    parallel: 0.0,
                    ..ok.clone()
                },
                IE_NUMSTREAMS,
            ),
            (
                WireParams {
                    len: 70_000.0,
                    ..ok.clone()
                },
                IE_BLOCKSIZE,
            ),
            (
                WireParams {
                    len: 3.0,
                    ..ok.clone()
                },
                IE_BLOCKSIZE,
            ),
            (
                WireParams {
                    time: 0.0,
                    ..ok.clone()
                },
                IE_UNIMP,
            ),
            (
                WireParams {
                    time: f64::NAN,
                    ..ok.clone()
                },
                IE_UNIMP,
            ),
            (
                WireParams {
                    omit: -1.0,
                    ..ok.clone()
                },
                IE_UNIMP,
            ),
            (
                WireParams {
                    num: Some(1e6),
                    ..ok.clone()
                },
                IE_UNIMP,
            ),
            (
                WireParams {
                    sctp: Some(true),
                    udp: None,
                    ..ok.clone()
                },
                IE_UNIMP,
            ),
            (
                WireParams {
                    bandwidth: f64::INFINITY,
                    ..ok.clone()
                },
                IE_UNIMP,
            ),
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
        let streams =
            FarEnd::from_wire(&w, Transport::Udp, |id| (id == 1).then_some(false)).unwrap();
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
}
