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
mod tests;
