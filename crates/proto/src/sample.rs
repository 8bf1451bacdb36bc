//! What agents measure and report: per-interval samples, per-job endpoint
//! summaries, per-flow totals and the kernel counters of a namespace. The
//! results schema carries these as they are.

use crate::http::HttpSummary;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Per-flow packets a sender sent, handed to the receiver at the end.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
pub struct FlowTotal {
    pub id: u16,
    pub tx_packets: u64,
}

/// Counters of one interval at one endpoint. A sender fills the tx fields, a
/// receiver the rx fields; TCP endpoints also fill `streams`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct IntervalSample {
    /// Seconds since the job started.
    pub t_start: f64,
    pub t_end: f64,
    pub tx_packets: u64,
    /// Bytes at L2 with FCS for UDP; payload bytes for TCP.
    pub tx_bytes: u64,
    /// Failed send calls (ENOBUFS, EAGAIN): the tester could not keep up.
    pub tx_errors: u64,
    /// Packets the rate profile asked for in this interval (0 when unpaced).
    #[serde(default)]
    pub tx_target: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Packets missing by sequence number in this interval.
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamSample>,
    /// Interfaces of the endpoint's namespace that lost their link (carrier
    /// off, operstate not up, or a carrier change) at some point in this
    /// interval or the one before (a receiver counts what was lost while a
    /// link was down when the first frame after the gap arrives): loss here
    /// may be the link's, not the device's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links_down: Vec<String>,
    /// HTTP client: connections open at the interval's end (a ramp's
    /// `--ramp-connections` shows here how many were running).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub connections: u32,
    /// HTTP: responses completed (client) or requests answered (server)
    /// in the interval.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub requests: u64,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// One TCP stream in one interval.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct StreamSample {
    pub id: u16,
    /// True where this endpoint sends on the stream.
    pub sender: bool,
    pub bytes: u64,
    /// Segments retransmitted in the interval (TCP_INFO total_retrans delta).
    pub retransmits: u64,
    pub cwnd: u32,
    pub rtt_us: u32,
}

/// What one endpoint saw over a whole job.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct EndpointSummary {
    pub elapsed_s: f64,
    /// When the job's traffic began, on the agent's realtime clock (ns since
    /// the Unix epoch); the controller maps it onto its own timebase.
    #[serde(default)]
    pub started_unix_ns: u64,
    /// CPU seconds (user + system) of the agent process during the job.
    pub cpu_s: f64,
    /// Peak resident memory of the agent process (VmHWM), bytes.
    #[serde(default)]
    pub max_rss_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    /// Packets the rate profile asked for (0 when unpaced).
    #[serde(default)]
    pub tx_target: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Datagrams on the test port that carried no linerate header.
    pub foreign: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowCounters>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamSample>,
    /// The UDP send engine that ran: "socket" or "packet" (senders only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tx_engine: String,
    /// Why auto did not run the packet engine, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_engine_note: Option<String>,
    /// Frames the sender put on the wire before the test's that are not
    /// the test's: the live engine's egress check (non-IP frames to its
    /// own MAC, which the next hop counts as received and drops).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub check_frames: u64,
    /// The UDP receive engine that counted: "socket" or "xdp" (receivers
    /// only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rx_engine: String,
    /// Why auto did not count in XDP, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_engine_note: Option<String>,
    /// One-way latency of the frames counted (XDP receiver): frames per
    /// log2 bucket of (arrival − TX stamp) in ns, bucket i holding
    /// [2^i, 2^(i+1)) ns (bucket 0 also stamps ahead of arrival). Only
    /// meaningful when sender and receiver share a clock (one host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_way_latency_log2_ns: Vec<u64>,
    /// The same frames' one-way latency in hdrhistogram's layout for 2
    /// significant digits at 1 ns (linerate's `model::hdr`: slot i is the
    /// histogram's counts index i): `[slot, frames]` of each slot that
    /// counted any (XDP receiver). Same clock caveat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_way_latency_hdr: Vec<(u32, u64)>,
    /// Frames counted per DSCP value they arrived with (UDP receivers of
    /// a test that marks its packets; a DUT may have remarked them).
    #[serde(
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        with = "crate::dscp::counts"
    )]
    #[schemars(with = "std::collections::BTreeMap<u8, u64>")]
    pub dscp_received: std::collections::BTreeMap<u8, u64>,
    /// Each worker thread's own figures (UDP jobs); they add up to the
    /// job's counters above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_thread: Vec<ThreadFigures>,
    /// HTTP jobs: requests, latency, TLS and kTLS, per connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Box<HttpSummary>>,
    /// iperf3 client jobs: stream totals and the server's own figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iperf3: Option<Box<crate::iperf3::ClientReport>>,
    /// iperf3 server jobs: each served test as the server counted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub iperf3_served: Option<Box<crate::iperf3::ServerReport>>,
    /// TCP jobs given a window (iperf3 -w): what was asked and what the
    /// kernel gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_buffers: Option<SocketBuffers>,
    /// The VLAN device this end's traffic went through (`--vlan` under
    /// socket engines: the sub-interface the agent made, e.g. `nic0.100`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_device: Option<String>,
}

/// A socket buffer request (iperf3 -w) and what the kernel made of it,
/// read back with getsockopt from the job's first stream. Linux reports
/// twice what it was asked (half is its own bookkeeping), capped by
/// net.core.wmem_max / rmem_max unless the agent may pass those (root).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, JsonSchema)]
pub struct SocketBuffers {
    /// The size asked for SO_SNDBUF and SO_RCVBUF, bytes.
    pub requested_bytes: u32,
    /// SO_SNDBUF as getsockopt reads it back, bytes.
    pub sndbuf_bytes: u32,
    /// SO_RCVBUF as getsockopt reads it back, bytes.
    pub rcvbuf_bytes: u32,
}

/// What one worker thread of a UDP job did.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct ThreadFigures {
    /// Index of the worker within its job, from 0.
    pub thread: u16,
    /// The core the worker was pinned to, if it was.
    pub cpu: Option<usize>,
    /// Flow ids the worker sent (senders) or received (receivers).
    pub flows: Vec<u16>,
    /// CPU seconds (user + system) of this thread.
    pub cpu_s: f64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub reordered: u64,
    pub duplicates: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct FlowCounters {
    pub id: u16,
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
}

/// Kernel counters and CPU time read inside one namespace.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct Snapshot {
    pub interfaces: Vec<IfCounters>,
    pub udp: UdpCounters,
    /// CPU seconds used by the agent process so far.
    pub process_cpu_s: f64,
    /// System-wide CPU seconds (all cores) by kind, from /proc/stat.
    pub system_cpu: SystemCpu,
    /// Per-core CPU ticks and network softirq counts (/proc/stat `cpuN`
    /// lines, /proc/softirqs): which core did the work, not just how much.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuTicks>,
    /// The agent process's own threads (/proc/self/task/*/stat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadTicks>,
    /// Threaded-NAPI kernel threads this agent turned on and pinned for the
    /// interfaces of its namespace (the lab's core layout): the CPU time of
    /// a lab DUT's receive and forwarding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub napi: Vec<NapiTime>,
    /// Each CPU's current clock, kHz, as [`Snapshot::clock_source`] reads it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clocks: Vec<CpuClock>,
    /// Where `clocks` came from: `scaling_cur_freq` (cpufreq) or `cpuinfo`
    /// (/proc/cpuinfo "cpu MHz"); empty when the host shows neither.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub clock_source: String,
    /// RAPL package energy counter (powercap intel-rapl:0), µJ, and the
    /// value it wraps at; absent without RAPL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_uj: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_range_uj: Option<u64>,
    /// The lab's router-on-a-stick DUT program's counters, when this
    /// agent runs it (totals since it attached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stick: Option<StickCounters>,
    /// A guest agent's vCPUs: qemu's vCPU threads (`CPU 0/TCG`, `CPU
    /// 0/KVM`) as the host that runs qemu sees them. Filled by the
    /// controller, never by an agent: inside the guest, its own /proc/stat
    /// is not the truth (under TCG a vCPU is a host thread emulating it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpus: Vec<ThreadTicks>,
    /// The namespace's bonds as /proc/net/bonding shows them (none where
    /// the kernel has no bonding driver loaded or no bond exists).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bonds: Vec<BondState>,
}

/// A bond as its driver reports it (/proc/net/bonding/NAME).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct BondState {
    /// The bond's own lines.
    #[serde(flatten)]
    pub head: BondHead,
    pub ports: Vec<BondPortState>,
}

/// A bond's own lines of /proc/net/bonding (its ports are apart).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct BondHead {
    pub name: String,
    /// "Bonding Mode", e.g. "IEEE 802.3ad Dynamic link aggregation".
    pub mode: String,
    /// The bond's MII status ("up", "down").
    pub mii_status: String,
    /// MII link monitoring interval, ms (0: not monitored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miimon_ms: Option<u32>,
    /// 802.3ad: the LACP rate ("slow", "fast").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacp_rate: Option<String>,
    /// 802.3ad: the aggregator that carries the bond's traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_aggregator: Option<u32>,
    /// 802.3ad: the LACP partner's system MAC of the active aggregator;
    /// 00:00:00:00:00:00 when no partner answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner_mac: Option<String>,
}

/// One port (slave) of a bond.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct BondPortState {
    pub name: String,
    pub mii_status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u32>,
    /// 802.3ad: the aggregator this port is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregator: Option<u32>,
    /// 802.3ad: the partner's system MAC this port heard in LACPDUs
    /// (00:00:00:00:00:00: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner_mac: Option<String>,
}

/// What the router-on-a-stick DUT's XDP program did with the frames it
/// saw, per direction: VLAN A to B (the generator's to the sink's) and
/// back. `dropped` is a TTL or hop limit of 1 or less or a short IP
/// header; `passed` went on to the stack (not for the DUT's MAC,
/// untagged, another VLAN, not IP).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
pub struct StickCounters {
    pub vlan_a: u16,
    pub vlan_b: u16,
    pub a_to_b_forwarded: u64,
    pub a_to_b_dropped: u64,
    pub b_to_a_forwarded: u64,
    pub b_to_a_dropped: u64,
    pub passed: u64,
}

impl StickCounters {
    /// The counts from `before` to `self` (the same program: ids kept).
    pub fn since(&self, before: &StickCounters) -> StickCounters {
        StickCounters {
            vlan_a: self.vlan_a,
            vlan_b: self.vlan_b,
            a_to_b_forwarded: self
                .a_to_b_forwarded
                .saturating_sub(before.a_to_b_forwarded),
            a_to_b_dropped: self.a_to_b_dropped.saturating_sub(before.a_to_b_dropped),
            b_to_a_forwarded: self
                .b_to_a_forwarded
                .saturating_sub(before.b_to_a_forwarded),
            b_to_a_dropped: self.b_to_a_dropped.saturating_sub(before.b_to_a_dropped),
            passed: self.passed.saturating_sub(before.passed),
        }
    }
}

/// One `napi/DEV-ID` kernel thread: its CPU time so far.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct NapiTime {
    pub dev: String,
    pub pid: u32,
    /// The CPUs it is pinned to.
    pub cpus: Vec<u32>,
    /// Time on CPU, ns (/proc/PID/schedstat, first field); absent where the
    /// kernel has no schedstat.
    pub run_ns: Option<u64>,
    /// utime + stime, USER_HZ ticks (/proc/PID/stat), the coarse fallback.
    pub ticks: u64,
}

/// One CPU's clock at the moment of a snapshot.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct CpuClock {
    pub cpu: u32,
    pub khz: u64,
}

/// One core's time by kind since boot, in USER_HZ ticks (100 per second),
/// and its NET_RX / NET_TX softirq counts.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct CpuTicks {
    pub cpu: u32,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    #[serde(default)]
    pub net_rx: u64,
    #[serde(default)]
    pub net_tx: u64,
    /// The stall watch's count of how long this core was kept from running
    /// a real-time thread since the watch began, ns: the lateness of its
    /// wakes that were 0.3 ms or more late, summed. Absent where this agent
    /// does not watch (another process of its host does, or it has no
    /// root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_ns: Option<u64>,
    /// The stalls behind [`CpuTicks::stalled_ns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls: Option<u64>,
}

impl CpuTicks {
    /// Every tick the core counted (busy and idle).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// One thread of an agent: its name (`lr-udp-send` for engine threads), CPU
/// ticks used so far and the core it last ran on.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct ThreadTicks {
    pub tid: u32,
    pub name: String,
    pub utime: u64,
    pub stime: u64,
    /// The CPU the thread last ran on (field 39 of its stat line).
    pub cpu: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct IfCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
    /// Link speed in Mbit/s where the kernel reports a real one: physical
    /// interfaces only (a veth's 10000 is made up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    /// A tun/tap device (a VM's NIC on the host side). Frames its native
    /// XDP program ends (dropped or redirected) are in none of its
    /// counters, unlike veth's and NIC drivers'.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tun: bool,
    /// Frames the driver's XDP transmit path refused (virtio-net's
    /// `tx_xdp_tx_drops` of `ethtool -S`, or its queues' summed on kernels
    /// that list only `tx_queue_N_xdp_tx_drops`):
    /// XDP frames from BPF_PROG_RUN or a redirect that never left, counted
    /// in neither tx_packets nor tx_dropped. Zero where the driver keeps
    /// no such count.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub xdp_tx_drops: u64,
}

/// The UDP lines of /proc/net/snmp: receive overruns show up here.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct UdpCounters {
    pub in_datagrams: u64,
    pub no_ports: u64,
    pub in_errors: u64,
    pub out_datagrams: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
    /// Datagrams whose UDP checksum the kernel found wrong.
    #[serde(default)]
    pub in_csum_errors: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct SystemCpu {
    pub user_s: f64,
    pub system_s: f64,
    pub softirq_s: f64,
    pub irq_s: f64,
    pub idle_s: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
