//! One direction of a test (its rates, loss, counters and what the kernel
//! gave its `--window`), and the sum of a test's directions.

use super::{bottleneck, IntervalPair};
use crate::proto::EndpointSummary;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The sum of a test's directions (many generators, many instances).
#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct Aggregate {
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub lost: u64,
    pub dut_lost: u64,
    /// lost / tx_packets, 0..1.
    pub loss_ratio: f64,
    pub rx_pps: f64,
    /// Sum of the directions' received L2 bit/s (TCP: goodput).
    pub rx_l2_bps: f64,
    /// Sum of received L1 bit/s (UDP only).
    pub rx_l1_bps: Option<f64>,
    /// TCP: retransmitted segments over all streams.
    pub retransmits: Option<u64>,
    /// Per sending host: its instances summed.
    pub per_host: Vec<HostShare>,
    /// Received bit/s summed over every direction, per interval of the
    /// common timebase (interval i covers [i, i+1) s after the agreed start).
    pub intervals: Vec<AggregateInterval>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct HostShare {
    pub host: String,
    pub instances: u16,
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub lost: u64,
    pub rx_l2_bps: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct AggregateInterval {
    pub t_start: f64,
    pub t_end: f64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_l2_bps: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct DirectionResult {
    /// e.g. `gen_to_sink`, or `gen1#2_to_sink` for a generator's second instance.
    pub direction: String,
    pub sender: String,
    pub receiver: String,
    /// Which parallel instance of its generator this is (1-based), when a
    /// test runs several.
    #[serde(default)]
    pub instance: Option<u16>,
    /// When the sender began, seconds after the test's agreed start, on the
    /// controller's clock (the sender's clock offset applied).
    #[serde(default)]
    pub start_offset_s: Option<f64>,
    /// TCP with `--window`: the socket buffers asked for and what the
    /// kernel gave the sending and the receiving end's sockets
    /// (getsockopt; Linux reports twice what it was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_buffers: Option<DirectionBuffers>,
    /// Seconds the sender ran.
    pub duration_s: f64,
    pub tx_packets: u64,
    pub rx_packets: u64,
    /// Missing by sequence number, including what the tester itself dropped.
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// lost / tx_packets, 0..1.
    pub loss_ratio: f64,
    pub tx_pps: f64,
    pub rx_pps: f64,
    /// Received L2 bit/s (frames with FCS; TCP: payload goodput).
    pub rx_l2_bps: f64,
    /// Received L1 bit/s (+20 B per frame); TCP: absent.
    pub rx_l1_bps: Option<f64>,
    /// Received L1 rate as % of the line rate (TCP: goodput as %): the
    /// receiving interface's speed where the kernel reports a real one
    /// (not a veth's), else `--line-rate`; absent when neither is known.
    #[serde(default)]
    pub line_rate_pct: Option<f64>,
    /// Send calls that failed (ENOBUFS, EAGAIN): the tester could not keep up.
    pub tx_errors: u64,
    /// Packets the rate asked for (0 when sending as fast as possible).
    #[serde(default)]
    pub tx_target: u64,
    /// The tester was the limit: the sender could not offer the asked rate
    /// (short by more than counting noise: at least 10 packets and 1 % of
    /// those asked, see `bottleneck::sender_short`) *and* the DUT lost
    /// nothing of what it was offered; the figures measure the tester, not
    /// the DUT. A short sender with DUT loss is DUT evidence at the rate
    /// offered ([`DirectionResult::tester_short`]). Always false for
    /// unpaced tests.
    #[serde(default)]
    pub tester_limited: bool,
    /// Packets the tester dropped itself (socket overruns, drops on its own
    /// interfaces), not the DUT.
    pub tester_drops: u64,
    /// Loss left after the tester's own drops: what the DUT dropped.
    pub dut_lost: u64,
    /// TCP only: retransmitted segments.
    pub retransmits: Option<u64>,
    pub sender_summary: EndpointSummary,
    pub receiver_summary: EndpointSummary,
    /// Sender and receiver interval samples, paired by index.
    pub intervals: Vec<IntervalPair>,
    /// The data port the traffic went to (the UDP receiver's or the TCP
    /// server's), for ACLs and capture filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// With `--dscp` (UDP): frames the receiver counted per DSCP value
    /// they arrived with, e.g. `{"46": 1000}`; a DUT that remarks shows as
    /// other values than the test's `params.dscp`.
    #[serde(
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        with = "crate::proto::dscp::counts"
    )]
    #[schemars(with = "std::collections::BTreeMap<u8, u64>")]
    pub dscp_received: std::collections::BTreeMap<u8, u64>,
    /// Why `dscp_received` is absent where `--dscp` was given: TCP and
    /// HTTP receivers read a byte stream, in which the kernel keeps no
    /// segment's TOS or traffic class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp_note: Option<String>,
}

/// A direction's `dscp_note` where the receiver reads a TCP byte stream.
pub const TCP_DSCP_NOTE: &str = "not counted at the receiver: TCP hands it a byte stream, and \
     the kernel keeps no segment's TOS or traffic class for it to read; a capture on the \
     receiving link (tcpdump -v) shows them";

impl DirectionResult {
    /// The sender fell short of what the rate asked for by more than
    /// counting noise, whether or not the DUT lost frames meanwhile.
    pub fn tester_short(&self) -> bool {
        bottleneck::sender_short(self.tx_packets, self.tx_target)
    }
}

/// What the kernel gave one direction's `--window` request at each end.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, JsonSchema)]
pub struct DirectionBuffers {
    /// Asked for SO_SNDBUF and SO_RCVBUF on every stream's socket, bytes.
    pub requested_bytes: u32,
    /// SO_SNDBUF of the sending end's socket as the kernel reports it.
    pub sender_sndbuf_bytes: u32,
    /// SO_RCVBUF of the receiving end's socket as the kernel reports it.
    pub receiver_rcvbuf_bytes: u32,
}

impl DirectionBuffers {
    /// From what the sending and the receiving end reported (`-w`).
    pub fn of(
        tx: Option<crate::proto::SocketBuffers>,
        rx: Option<crate::proto::SocketBuffers>,
    ) -> Option<DirectionBuffers> {
        if tx.is_none() && rx.is_none() {
            return None;
        }
        Some(DirectionBuffers {
            requested_bytes: tx.or(rx).map(|x| x.requested_bytes).unwrap_or(0),
            sender_sndbuf_bytes: tx.map(|x| x.sndbuf_bytes).unwrap_or(0),
            receiver_rcvbuf_bytes: rx.map(|x| x.rcvbuf_bytes).unwrap_or(0),
        })
    }
}
