//! The agent jobs that run iperf3 conversations (client and server) and
//! the figures they report back, as the controller and the agent exchange
//! them.

use super::*;

/// A test against an iperf3 server that an agent runs as its client
/// (`Job::Iperf3Client`): the controller may be elsewhere (a namespace, an
/// ssh host), the conversation runs where the agent is.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ClientJob {
    pub server: std::net::SocketAddr,
    /// The test as the client will send it; the agent validates it again.
    pub params: WireParams,
    pub cpus: Vec<usize>,
    /// The longest the server may stay silent when an answer is due.
    pub answer_timeout_ms: u64,
    pub allow: Vec<crate::spec::Cidr>,
}

/// One stream's totals after the omitted seconds, as this end counted
/// them (what it sends in the results exchange).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct StreamTotals {
    pub id: u16,
    pub sends: bool,
    /// Payload bytes.
    pub bytes: u64,
    pub retransmits: u64,
    /// UDP: datagrams (sent, or the highest sequence number received).
    pub packets: u64,
    pub lost: u64,
    pub jitter_s: f64,
    pub seconds: f64,
}

/// What an agent's iperf3 client hands back in its job summary, beside
/// the usual counters and intervals.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct ClientReport {
    pub streams: Vec<StreamTotals>,
    /// The server's own figures (none when the test ended before the
    /// results exchange).
    pub far: Option<FarEnd>,
    /// Why the test ended early, when it did: the figures are partial.
    pub lost: Option<String>,
    /// The cookie this client sent (older agents: none): linerate's own
    /// server reports it too, so each client finds the server's count of
    /// its test. Worthless once the test is over; never in results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub cookie: Option<String>,
}

/// linerate's iperf3 server as an agent job (`Job::Iperf3Server`, a plan
/// host with `iperf3_server`): it serves stock or linerate clients until
/// the controller stops it or `duration_ms` ends, whichever is first.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ServerJob {
    /// Where it listens (TCP control and streams; UDP on the same port).
    pub listen: std::net::SocketAddr,
    /// Tests at once; one more client hears iperf3's busy answer.
    pub max_clients: u16,
    /// Longest test (-t plus -O) a client may ask for, seconds.
    pub max_time_s: f64,
    /// Most UDP payload this server sends for one test, bit/s (0: no cap).
    pub max_udp_send_bps: u64,
    /// The longest a client may stay silent when an answer is due.
    pub answer_timeout_ms: u64,
    pub cpus: Vec<usize>,
    /// The longest the server runs, whatever the controller does.
    pub duration_ms: u64,
}

/// One test linerate's iperf3 server served, as its agent counted it:
/// the server's own view of that client, beside the client's figures.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct ServedTest {
    /// The client's control connection, as the server saw it.
    pub peer: String,
    /// The client's cookie (matching only; not kept in results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub cookie: Option<String>,
    pub transport: Transport,
    /// This server's streams: bytes it received from (or sent to) the
    /// client, omitted seconds excluded.
    pub streams: Vec<StreamTotals>,
    /// Why the test failed at the server, when it did (the figures are
    /// what it counted up to then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What an agent's iperf3 server job hands back in its job summary.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ServerReport {
    pub served: Vec<ServedTest>,
    /// Clients refused as busy (every slot taken) while it ran.
    #[serde(default)]
    pub busy: u64,
}

/// The figures the other end's iperf3 reported for one stream.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct FarStream {
    /// iperf3's stream id (1, 3, 4, ...).
    pub id: u32,
    /// True where the far end sent on this stream.
    pub sender: bool,
    /// Bytes the far end sent (sender) or received (receiver), omitted
    /// seconds excluded.
    pub bytes: u64,
    /// TCP: segments the far end retransmitted, when it sent and counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// UDP: datagrams (the highest sequence number seen, at a receiver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    /// UDP receiver: datagrams missing by sequence number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// UDP receiver: RFC 1889 jitter, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    pub seconds: f64,
}

/// The other end's own figures for an iperf3 test (results exchange):
/// stored beside linerate's so a run shows both ends.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct FarEnd {
    /// `server` (linerate was the client of a stock iperf3 server) or
    /// `client` (a stock iperf3 client tested against `linerate serve`).
    pub role: String,
    /// host:port of the far end.
    pub address: String,
    /// The client's iperf3 version, when it said (servers do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub transport: Transport,
    /// Seconds at the start left out of both ends' totals (`-O`).
    pub omit_s: f64,
    /// The far end's CPU use, % of one core (iperf3's cpu_util_*).
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// Bytes the far end sent and received over all its streams.
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// UDP: datagrams the far end's receiving streams counted as lost, and
    /// the datagrams they expected; loss in % of those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    pub streams: Vec<FarStream>,
}

impl FarEnd {
    /// The far end's results as it sent them; `far_sends(id)` says whether
    /// it sent on stream `id`. Stream entries that are not numbers in
    /// range are rejected, not guessed.
    pub fn from_wire(
        w: &WireResults,
        transport: Transport,
        far_sends: impl Fn(u32) -> Option<bool>,
    ) -> Result<Vec<FarStream>, Iperf3Error> {
        let count = |what: &str, v: f64| -> Result<u64, Iperf3Error> {
            if (0.0..1.9e19).contains(&v) {
                Ok(v as u64)
            } else {
                Err(Iperf3Error::Invalid(format!(
                    "stream {what} {v} is not a count"
                )))
            }
        };
        if w.streams.len() > MAX_STREAMS as usize * 2 {
            return Err(Iperf3Error::Invalid(format!(
                "{} streams in the results, over iperf3's {}",
                w.streams.len(),
                MAX_STREAMS * 2
            )));
        }
        let mut out = Vec::new();
        for s in &w.streams {
            let id = count("id", s.id)? as u32;
            let sender = far_sends(id).ok_or_else(|| {
                Iperf3Error::Invalid(format!(
                    "the results name stream {id}, which this test does not have"
                ))
            })?;
            let udp = transport == Transport::Udp;
            out.push(FarStream {
                id,
                sender,
                bytes: count("bytes", s.bytes)?,
                retransmits: (!udp && sender && w.sender_has_retransmits == 1.0)
                    .then(|| count("retransmits", s.retransmits))
                    .transpose()?,
                packets: udp.then(|| count("packets", s.packets)).transpose()?,
                lost: (udp && !sender)
                    .then(|| count("errors", s.errors))
                    .transpose()?,
                jitter_ms: (udp && !sender && s.jitter.is_finite()).then_some(s.jitter * 1000.0),
                seconds: if s.end_time.is_finite() && s.start_time.is_finite() {
                    (s.end_time - s.start_time).max(0.0)
                } else {
                    0.0
                },
            });
        }
        Ok(out)
    }

    /// Fills the totals from `streams`.
    pub fn total(&mut self) {
        self.sent_bytes = self
            .streams
            .iter()
            .filter(|s| s.sender)
            .map(|s| s.bytes)
            .sum();
        self.received_bytes = self
            .streams
            .iter()
            .filter(|s| !s.sender)
            .map(|s| s.bytes)
            .sum();
        if self.transport == Transport::Udp {
            let rx: Vec<&FarStream> = self.streams.iter().filter(|s| !s.sender).collect();
            if !rx.is_empty() {
                let lost: u64 = rx.iter().filter_map(|s| s.lost).sum();
                let packets: u64 = rx.iter().filter_map(|s| s.packets).sum();
                self.lost = Some(lost);
                self.packets = Some(packets);
                self.loss_pct = Some(if packets == 0 {
                    0.0
                } else {
                    lost as f64 * 100.0 / packets as f64
                });
            }
        }
    }
}

/// The header at the start of each iperf3 UDP datagram: the send time
/// (seconds and microseconds, 32 bits each) and a sequence number from 1,
/// 32 bits or (`--udp-counters-64bit`) 64, all big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    pub sec: u32,
    pub usec: u32,
    pub seq: u64,
}

impl UdpHeader {
    pub fn len(counters_64bit: bool) -> usize {
        if counters_64bit {
            16
        } else {
            12
        }
    }

    /// Writes the header into the start of `buf`; false if it is too short.
    pub fn emit(&self, buf: &mut [u8], counters_64bit: bool) -> bool {
        if buf.len() < Self::len(counters_64bit) {
            return false;
        }
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64bit {
            buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
        true
    }

    pub fn parse(buf: &[u8], counters_64bit: bool) -> Option<UdpHeader> {
        let word = |i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(buf.get(i..i + 4)?.try_into().ok()?))
        };
        let seq = if counters_64bit {
            u64::from_be_bytes(buf.get(8..16)?.try_into().ok()?)
        } else {
            u64::from(word(8)?)
        };
        Some(UdpHeader {
            sec: word(0)?,
            usec: word(4)?,
            seq,
        })
    }
}

/// Whether a 4-byte datagram is a server's answer to [`UDP_HELLO`]
/// (current, or the legacy value in either byte order).
pub fn is_udp_reply(b: &[u8]) -> bool {
    b == UDP_REPLY || b == LEGACY_UDP_REPLY.to_le_bytes() || b == LEGACY_UDP_REPLY.to_be_bytes()
}
