//! The control protocol between the controller and its agents.
//!
//! Every message is a frame: a 4-byte big-endian length followed by that many
//! bytes of JSON. Frames are bounded by [`MAX_MESSAGE`]; the decoder checks the
//! length before it allocates and rejects oversized, empty or malformed frames
//! with an error, never a panic. This module owns the message types, the frame
//! codec and the liveness rules (handshake, heartbeats) with an injected
//! clock; it performs no network or process I/O of its own beyond the
//! `Read`/`Write` it is handed.

use crate::http::{HttpGetJob, HttpServeJob};
use crate::lab::LabPort;
use crate::probe::ProbeSample;
use crate::sample::{EndpointSummary, FlowTotal, IntervalSample, Snapshot};
use crate::spec::{Cidr, Direction, FlowSpec, FrameSpec, RateProfile, RxEngine, TxEngine};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

mod codec;
pub use codec::{encode, read_frame, read_message, write_frame, DecodeError, MAX_MESSAGE};

/// Bumped on any incompatible change of the messages below.
pub const PROTO_VERSION: u16 = 1;
/// Either side sends a heartbeat this often when it has nothing else to say.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// A peer silent for this long is gone (hung ssh session, stopped process).
pub const PEER_TIMEOUT: Duration = Duration::from_secs(15);

/// What the controller asks an agent to do. A few per test, parsed once
/// each: `Start`'s job is the large variant, and boxing it would buy
/// nothing but an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Hello {
        proto_version: u16,
        linerate_version: String,
    },
    Heartbeat {
        seq: u64,
    },
    /// Apply network configuration inside the agent's namespace.
    Configure {
        ops: Vec<NetOp>,
    },
    /// Read kernel counters (interfaces, UDP) and CPU time now.
    Snapshot,
    /// Does the agent's namespace hold `addr`, or route to it other than
    /// by its default route? Asked before traffic is aimed at a server.
    CheckTarget {
        addr: IpAddr,
    },
    /// Which source address the agent's namespace sends from towards
    /// `towards` (its route lookup). Asked of a generator whose address the
    /// user did not give, so replies and reverse traffic can reach it.
    SourceAddress {
        towards: IpAddr,
    },
    /// Describe a physical port in the namespace the agent started in and
    /// check that it may be taken (`force` skips the safety rules), before
    /// a [`NetOp::TakePort`]: the controller cannot see a remote host's ports.
    InspectPort {
        dev: String,
        force: bool,
    },
    Start {
        test: u32,
        job: Job,
        /// Begin the job's traffic at this instant of the agent's realtime
        /// clock (ns since the Unix epoch), so jobs on many hosts start
        /// together; `None` starts at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_at_unix_ns: Option<u64>,
    },
    /// Read the agent's realtime clock (NTP-style offset and RTT sampling).
    Time {
        seq: u64,
    },
    /// Stop a job; receivers get the senders' per-flow totals so that tail
    /// loss (packets after the last one received) is counted.
    Stop {
        test: u32,
        sender_totals: Vec<FlowTotal>,
    },
    Shutdown,
}

/// What an agent answers or reports.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    HelloAck {
        proto_version: u16,
        linerate_version: String,
        pid: u32,
        hostname: String,
        /// Identity of the agent's network namespace (the inode of
        /// /proc/self/ns/net): agents that share one share its counters.
        #[serde(default)]
        netns_id: u64,
    },
    Heartbeat {
        seq: u64,
    },
    /// The agent's realtime clock when it handled [`Request::Time`].
    Time {
        seq: u64,
        unix_ns: u64,
    },
    Configured,
    /// The port as it is now, i.e. the state it will be given back in.
    PortState {
        port: LabPort,
        mac: Option<[u8; 6]>,
    },
    Snapshot {
        snapshot: Snapshot,
    },
    /// The answer to [`Request::CheckTarget`]: `owned` when the address is
    /// local there (assigned, or in a local route), `routed` when a route
    /// more specific than the default leads to it.
    TargetCheck {
        addr: IpAddr,
        owned: bool,
        routed: bool,
    },
    /// The answer to [`Request::SourceAddress`].
    Source {
        towards: IpAddr,
        source: IpAddr,
    },
    /// A job runs; listeners say which data-plane port they opened.
    Started {
        test: u32,
        port: Option<u16>,
    },
    Interval {
        test: u32,
        sample: IntervalSample,
    },
    Finished {
        test: u32,
        summary: EndpointSummary,
    },
    Error {
        test: Option<u32>,
        message: String,
    },
    /// A latency client's probe samples, in chunks, before its Finished.
    LatencyProbes {
        test: u32,
        probes: Vec<ProbeSample>,
    },
}

/// One network configuration step inside a namespace. Fields are typed so an
/// agent never passes a controller's string to a shell.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum NetOp {
    /// Watch this host's CPUs for stalls (on) or stop counting (off): a
    /// real-time thread per CPU, only one process of a host at a time.
    StallWatch {
        on: bool,
    },
    LinkUp {
        dev: String,
    },
    Mtu {
        dev: String,
        mtu: u32,
    },
    Bridge {
        name: String,
        ports: Vec<String>,
    },
    /// An 802.3ad bond `name` (miimon 100) of `ports`, each taken down
    /// and enslaved, the first one's MAC the bond's; the bond is left
    /// down (its addresses and link come after).
    Bond {
        name: String,
        ports: Vec<String>,
    },
    Addr {
        dev: String,
        addr: IpAddr,
        prefix: u8,
    },
    Route {
        dst: IpAddr,
        prefix: u8,
        via: IpAddr,
    },
    /// Accept a whole prefix locally (AnyIP), so flows may vary destinations.
    LocalRoute {
        dst: IpAddr,
        prefix: u8,
    },
    Neigh {
        dev: String,
        addr: IpAddr,
        mac: [u8; 6],
    },
    Sysctl {
        key: String,
        value: String,
    },
    /// Turn a named offload (gro, gso, tso, ...) on or off with ethtool.
    Offload {
        dev: String,
        feature: String,
        on: bool,
    },
    Nft {
        ruleset: String,
    },
    /// Receive packet steering: softirq receive work of every rx queue of
    /// `dev` runs on these CPUs (written to the namespace's own sysfs and
    /// read back).
    Rps {
        dev: String,
        cpus: Vec<usize>,
    },
    /// Threaded NAPI on `dev` (its receive work in `napi/DEV-ID` kernel
    /// threads instead of softirq on whichever CPU raised it), those
    /// threads pinned to these CPUs. A veth gets NAPI only with GRO on or
    /// an XDP program; turn GRO on first.
    NapiThreads {
        dev: String,
        cpus: Vec<usize>,
        /// SCHED_FIFO 1 for them: they share a core with a busy sender
        /// and must not wait out its time slice while their ring fills.
        #[serde(default)]
        realtime: bool,
        /// After a poll finds the ring empty, keep polling from a timer on
        /// the thread's own CPU `gro_flush_timeout_ns` apart, up to
        /// `defer_hard_irqs` times, before sleeping until the next frame
        /// wakes it (the device's `napi_defer_hard_irqs` and
        /// `gro_flush_timeout`); 0: the kernel's (wake on every frame
        /// after an empty poll).
        #[serde(default)]
        defer_hard_irqs: u32,
        #[serde(default)]
        gro_flush_timeout_ns: u64,
    },
    /// Move a physical port from the agent's original namespace into its own,
    /// after checking it is safe to take (unless `force`); the agent records
    /// the port's state and gives it back when it exits.
    TakePort {
        dev: String,
        force: bool,
    },
    /// Shape `dev`'s egress with a token bucket filter (tc tbf): `rate_bps`
    /// bit/s, bursts of `burst_bytes`, a queue of `limit_bytes` (its delay
    /// when full is limit_bytes * 8 / rate_bps).
    Shape {
        dev: String,
        rate_bps: u64,
        burst_bytes: u32,
        limit_bytes: u32,
    },
    /// Delay (and jitter, and reorder) what leaves `dev` with tc netem:
    /// `delay_us` ± `jitter_us` on every packet, `reorder_pct` % of them
    /// sent at once instead (ahead of the delayed ones), at most
    /// `limit_packets` waiting.
    Netem {
        dev: String,
        delay_us: u32,
        jitter_us: u32,
        reorder_pct: Option<f64>,
        limit_packets: u32,
    },
    /// Route between two VLANs on one trunk link `dev` in XDP (the lab's
    /// router-on-a-stick DUT): frames to `dut_mac` tagged `vlan_a` leave
    /// tagged `vlan_b` towards `mac_b`, and back. The agent holds the
    /// program's BPF link: it goes when the agent does.
    Stick {
        dev: String,
        dut_mac: [u8; 6],
        vlan_a: u16,
        mac_a: [u8; 6],
        vlan_b: u16,
        mac_b: [u8; 6],
    },
    /// Hold a pass-all XDP program on `dev` for as long as the agent lives,
    /// so frames its veth peer sends by XDP_TX are received.
    XdpPass {
        dev: String,
    },
    /// A static entry in a bridge's forwarding table: frames to `mac` leave
    /// by the bridge port `dev` (no flooding before the bridge learns it).
    Fdb {
        dev: String,
        mac: [u8; 6],
    },
    /// Find the MAC of `addr` on `dev` by ARP/ND and pin it as a permanent
    /// neighbour, for `addr` and for each of `also` (the same box's other
    /// addresses on that port, e.g. its IPv6 one).
    ResolveNeigh {
        dev: String,
        addr: IpAddr,
        also: Vec<IpAddr>,
    },
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    TcpListen {
        bind: IpAddr,
        /// The port to listen on; 0 (and older controllers) any free one.
        #[serde(default)]
        port: u16,
        /// Connections to expect (streams × directions).
        expect_streams: u16,
        duration_ms: u64,
        interval_ms: u64,
        cpus: Vec<usize>,
        congestion: Option<String>,
        /// The highest rate each stream this end sends may have, bytes/s
        /// (SO_MAX_PACING_RATE); none: unpaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pacing_bytes_per_s: Option<u64>,
        /// SO_SNDBUF and SO_RCVBUF of each stream's socket, bytes
        /// (iperf3 -w); none: the kernel's defaults (autotuning).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
        /// The DSCP this end's packets carry (IP_TOS, IPV6_TCLASS on its
        /// sockets; older controllers: none, the kernel's default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dscp: Option<crate::Dscp>,
        /// The tags the streams carry (`--vlan`; older controllers: none):
        /// the listener's end receives and answers through a VLAN
        /// sub-interface of the interface holding `target`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<crate::Vlan>,
        /// The address the client connects to (with `vlan`: where the
        /// sub-interface goes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<IpAddr>,
    },
    TcpConnect {
        target: SocketAddr,
        streams: u16,
        direction: Direction,
        duration_ms: u64,
        interval_ms: u64,
        cpus: Vec<usize>,
        congestion: Option<String>,
        buffer_len: u32,
        allow: Vec<Cidr>,
        /// As for `TcpListen`: each sending stream's highest rate, bytes/s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pacing_bytes_per_s: Option<u64>,
        /// As for `TcpListen`: each stream's socket buffers, bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
        /// The DSCP this end's packets carry (IP_TOS, IPV6_TCLASS on its
        /// sockets; older controllers: none, the kernel's default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dscp: Option<crate::Dscp>,
        /// The tags the streams carry (`--vlan`; older controllers: none):
        /// this end connects through a VLAN sub-interface of the
        /// interface its route to `target` leaves by.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<crate::Vlan>,
    },
    UdpReceive {
        bind: IpAddr,
        /// The port to receive on; 0 (and older controllers) any free one.
        #[serde(default)]
        port: u16,
        flows: u16,
        interval_ms: u64,
        cpus: Vec<usize>,
        /// Receiver threads, one SO_REUSEPORT socket each (0: the agent
        /// chooses; older controllers send none).
        #[serde(default)]
        threads: u16,
        /// How the receiver counts; older controllers send none (socket).
        #[serde(default)]
        rx_engine: RxEngine,
        /// The address the senders aim at: the XDP sink attaches to the
        /// interface that holds it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<IpAddr>,
        /// The tags this side's frames carry (older controllers: none):
        /// counted in frame bytes; a socket receiver listens on a VLAN
        /// sub-interface.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<crate::Vlan>,
        /// The DSCP the senders mark with: the receiver then counts the
        /// frames that arrived per DSCP value (`dscp_received`); none
        /// (older controllers too): not counted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dscp: Option<crate::Dscp>,
        /// SO_RCVBUF of each receiver socket, bytes (`udp -w`; socket
        /// receivers only); none: linerate's default (32 MiB).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
    },
    UdpSend {
        flows: Vec<FlowSpec>,
        frame: FrameSpec,
        /// Target rate over time; `None` is as fast as possible.
        rate: Option<RateProfile>,
        duration_ms: u64,
        /// Datagrams per sendmmsg call: also the largest burst when paced.
        batch: u16,
        interval_ms: u64,
        cpus: Vec<usize>,
        /// Destinations beyond the benchmarking ranges the user allowed.
        allow: Vec<Cidr>,
        /// How datagrams leave the agent; older controllers send none (auto).
        #[serde(default)]
        tx_engine: TxEngine,
        /// Sender threads, each with its share of the flows and of the rate
        /// (0: the agent chooses; older controllers send none).
        #[serde(default)]
        threads: u16,
        /// VLAN tags on the frames (older controllers: none): frame-building
        /// engines write them, socket engines send through a VLAN
        /// sub-interface.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vlan: Option<crate::Vlan>,
        /// The DSCP written into every frame's IPv4 TOS or IPv6 traffic
        /// class (frame-building engines) or set on the sockets (IP_TOS,
        /// IPV6_TCLASS); older controllers: none, 0.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dscp: Option<crate::Dscp>,
        /// Stop after this many frames (a back-to-back burst), or at the
        /// duration's end if that comes first; none (older controllers
        /// too): until the duration ends.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_frames: Option<u64>,
        /// SO_SNDBUF of each sender socket, bytes (`udp -w`; the socket
        /// engine only); none: linerate's default (4 MiB).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u32>,
    },
    /// Answer latency probes of one session: only `token`, only from
    /// `client`, for `duration_ms` at most, at most `max_pps`.
    LatencyRespond {
        bind: IpAddr,
        token: u64,
        client: IpAddr,
        duration_ms: u64,
        max_pps: u32,
        /// The DSCP of the answers (older controllers: none, 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dscp: Option<crate::Dscp>,
    },
    /// Send isochronous latency probes to a responder's session.
    LatencyProbe {
        target: SocketAddr,
        token: u64,
        interval_us: u64,
        payload: u16,
        duration_ms: u64,
        allow: Vec<Cidr>,
        /// The DSCP of the probes (older controllers: none, 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dscp: Option<crate::Dscp>,
    },
    HttpServe(HttpServeJob),
    HttpGet(HttpGetJob),
    /// Be the client of a stock iperf3 server.
    Iperf3Client(Box<crate::iperf3::ClientJob>),
    /// Be an iperf3 server for many clients at once (a plan's
    /// `iperf3_server` host); older agents do not know it and say so.
    Iperf3Server(Box<crate::iperf3::ServerJob>),
}

/// The peers of a control channel speak different protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "control protocol version mismatch: this side speaks {PROTO_VERSION}, the peer {peer}; \
     run the same linerate version on both ends"
)]
pub struct VersionMismatch {
    pub peer: u16,
}

/// The handshake rule: both sides must speak the same protocol version.
pub fn check_version(peer: u16) -> Result<(), VersionMismatch> {
    if peer == PROTO_VERSION {
        Ok(())
    } else {
        Err(VersionMismatch { peer })
    }
}

/// Liveness of the peer at the other end of a control channel, with the clock
/// passed in so the rules are testable without sleeping.
#[derive(Debug, Clone)]
pub struct Liveness {
    last_heard: Instant,
    last_sent: Instant,
}

impl Liveness {
    pub fn new(now: Instant) -> Self {
        Liveness {
            last_heard: now,
            last_sent: now,
        }
    }
    pub fn heard(&mut self, now: Instant) {
        self.last_heard = now;
    }
    pub fn sent(&mut self, now: Instant) {
        self.last_sent = now;
    }
    pub fn heartbeat_due(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_sent) >= HEARTBEAT_EVERY
    }
    pub fn peer_gone(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_heard) >= PEER_TIMEOUT
    }
}

#[cfg(test)]
mod tests;
