//! The results schema (serde types; the JSON Schema in `schema/` is generated
//! from them) and the results directory: `results.json` written atomically,
//! `intervals.ndjson` appended while a run goes, agent logs beside them.
//!
//! Bump [`SCHEMA_VERSION`]'s major number on an incompatible change.

pub mod bond;
pub mod bottleneck;
mod checks;
mod cores;
pub mod criteria;
mod dir;
mod direction;
mod host;
mod intervals;
pub mod latency_at;
mod searches;

/// A test setting that is also a field of the schema; it lives in `model`.
pub use crate::model::flows::FlowMode;
pub use checks::{CheckScope, CrossCheck, KernelCounters};
pub use cores::{Bottleneck, BottleneckKind, CpuLoad, CpuUse, ThreadLoad, VcpuLoad};
pub use dir::{ResultsError, RunDir};
pub use direction::{
    Aggregate, AggregateInterval, DirectionBuffers, DirectionResult, HostShare, TCP_DSCP_NOTE,
};
pub use host::host_facts;
pub use intervals::{in_omit, mark_omitted, pair_intervals, IntervalPair};
pub use searches::{RampDirection, RampResult, SearchResult};

use crate::model::lab::LabTopology;

use crate::proto::{Direction, FrameSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// 1.6.0: every CPU figure in % of all its host's CPUs (`cpus` says how many);
/// HTTP request rate, p99.9, status and error kinds, retransmit notes.
/// 1.7.0: criteria, repetitions and baseline comparisons; `far_end` (an
/// iperf3 peer's own figures); `link_events` and intervals' `links_down`;
/// interfaces' `speed_mbps`; `% of line` null without a known line rate.
/// 1.8.0: sweeps (`sweeps`, a test's `sweep` point and coordinates).
/// 1.9.0: HTTP connections' `reorder_events`; `spurious_retransmits` is
/// read from the kernel (it was always 0 before).
/// 1.10.0: `dut_stick`, the lab's router-on-a-stick DUT's counts.
/// 1.11.0: HTTP client's `unread_at_close_bytes`.
/// 1.12.0: search goals' `confidence`, `search_repeats`, trials'
/// `tester_short` (and `tester_limited` only when the DUT lost nothing),
/// the ramp's `start_pps`, saturation `onset_pps` and summary `notes`,
/// the irregular result `tester_limit_in_bracket`.
/// 1.13.0: tests' and trials' `steal_ms`; goals' confidence
/// `disturbed_trials`, `disturbed_counted` (lossy trials while the
/// hypervisor held a CPU are run again).
/// 1.14.0: DUT steps' `steal_ms` (per ramp interval); ramp summaries'
/// `disturbed_samples` (lossy samples the steal explains, left out of the
/// saturation).
/// 1.15.0: baseline figures' `threshold_pct`, `threshold_from`,
/// `baseline_at_least`, `value_at_least`, the change `inconclusive`, and
/// the comparison's `within_noise` and `inconclusive` counts.
/// 1.16.0: the run's and a test's status `aborted` and the run's `abort`
/// (`--abort-on-fail`: the criterion that stopped the run).
/// 1.17.0: RFC 2544 throughput results' `contradicting_trials`.
/// 1.18.0: searches' `latency_at` (one-way latency at load points) and
/// endpoint summaries' `one_way_latency_hdr`.
/// 1.19.0: searches' `back_to_back` (RFC 2544 §26.4, RFC 9004).
/// 1.20.0: HTTP summaries' `method`, `extra_headers`, `request_body_bytes`
/// and `ramp` (`--ramp-connections`); interval samples' `connections` and
/// `requests` (HTTP).
/// 1.21.0: tests' `server_record` (a client of linerate's own iperf3
/// server in a plan: that server's count of its test).
/// 1.22.0: bottlenecks' `vcpus` (a guest's qemu vCPU threads over the
/// test); agents' `vm` (a plan's VM host: accelerator, vCPUs, NIC model,
/// guest kernel).
/// 1.23.0: tests' and trials' `stall_ms` (the stall watch), per-CPU
/// `stalled_ns` and `stalls` in agents' snapshots.
/// 1.24.0: DUT steps' `stall_ms` (ramps watch for stalls too); interface
/// counters' `tun`; labs' `dut_netem` (`--dut-delay`, `--dut-jitter`,
/// `--dut-reorder`).
/// 1.25.0: tests' `vlan` (the tags and each end's VLAN device, TCP
/// `--vlan` too) and `dut_bond` (`lab --dut-bond`: the DUT's bond as
/// /proc/net/bonding shows it, and each port's counters); endpoint
/// summaries' `vlan_device`; snapshots' `bonds`.
/// 1.26.0: search trials' `host_lost` (a trial disturbed on every repeat
/// is charged with the loss its stalls do not explain) and goals'
/// confidence `disturbed_counted_lost`, `host_lost`.
pub const SCHEMA_VERSION: &str = "1.26.0";

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct RunResults {
    /// Semantic version of this document's schema.
    pub schema_version: String,
    pub linerate_version: String,
    /// `complete`, `partial` (still running, or ended early by an error),
    /// `interrupted` (Ctrl-C / SIGTERM) or `aborted` (a criterion had
    /// clearly failed while a test ran, `--abort-on-fail`: see `abort`).
    pub status: RunStatus,
    pub name: String,
    pub command_line: Vec<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub finished_at: Option<String>,
    pub host: HostFacts,
    /// L1 line rate the searches' rates refer to, bit/s (`--line-rate`,
    /// default 10G).
    pub line_rate_bps: f64,
    /// Whether the user gave `--line-rate` (else "% of line" comes from
    /// interface speeds only).
    #[serde(default)]
    pub line_rate_given: bool,
    pub labs: Vec<LabTopology>,
    pub tests: Vec<TestResult>,
    /// Findings of `linerate doctor` for each host the run used.
    #[serde(default)]
    pub doctor: Vec<DoctorEntry>,
    /// Load ramps (warmup, linear ramp, hold) and their saturation points.
    #[serde(default)]
    pub ramps: Vec<RampResult>,
    /// Throughput searches (RFC 2544, MLRsearch NDR/PDR) with every trial.
    #[serde(default)]
    pub searches: Vec<SearchResult>,
    /// With `--repeat N`: each search goal's answer over the repetitions
    /// (median and range), so one number is never taken for the DUT's
    /// when its capacity moves from run to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_repeats: Vec<crate::search::GoalSpread>,
    /// Error that ended the run early, if any.
    pub error: Option<String>,
    /// Every agent the run started: where, how long connecting took, and its
    /// clock against the controller's (interval times are mapped with it).
    #[serde(default)]
    pub agents: Vec<AgentRecord>,
    /// How many times each test ran (`--repeat`); tests, ramps and searches
    /// of the same name are its repetitions.
    #[serde(default = "one")]
    pub repeat: u32,
    /// Every criterion (`--expect`, a plan test's `expect`) with the
    /// measured value and PASS/FAIL.
    #[serde(default)]
    pub criteria: Vec<criteria::CriterionResult>,
    /// The comparison with a baseline run (`--baseline`), figure by figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<criteria::BaselineComparison>,
    /// Sweeps (benchmark matrices) of the run: axes and pivot choices;
    /// their points are the tests whose `sweep` names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<crate::model::sweep::SweepInfo>,
    /// What stopped an aborted run (`--abort-on-fail`): the criterion, the
    /// test, the value measured over its intervals so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<criteria::AbortRecord>,
}

fn one() -> u32 {
    1
}

/// One agent of the run and its host.
#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct AgentRecord {
    /// Its role: `gen`, `sink`, `dut`, or a plan's host name.
    pub role: String,
    /// Where it ran as the user named it: `local`, `ns:NAME`, `ssh://user@host:port`.
    pub endpoint: String,
    /// The host's own name (/proc/sys/kernel/hostname).
    pub hostname: String,
    pub linerate_version: String,
    /// Seconds from starting the agent (ssh included) to a finished handshake.
    pub connect_s: f64,
    /// For ssh hosts: seconds the ssh connection (ControlMaster) took to come up.
    #[serde(default)]
    pub ssh_connect_s: Option<f64>,
    /// Agent realtime clock minus the controller's, seconds (lowest-RTT of
    /// several NTP-style exchanges over the control channel).
    pub clock_offset_s: f64,
    /// Round trip of that exchange; the offset is exact to within half of it.
    pub clock_rtt_s: f64,
    /// Why the agent was lost mid-run, if it was.
    #[serde(default)]
    pub error: Option<String>,
    /// A plan's VM host: the guest linerate booted for this agent (its
    /// accelerator, vCPUs, NIC model, kernel). Absent: not a VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<crate::model::lab::LabVm>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Complete,
    Partial,
    Interrupted,
    /// Stopped by `--abort-on-fail` when a criterion had clearly failed.
    Aborted,
}

impl RunResults {
    /// The last line of an interrupted run, in words that fit it: a lab
    /// was torn down only when one was built; results were kept only when
    /// they were written.
    pub fn interrupted_note(&self, saved: bool) -> String {
        let stopped = if self.labs.is_empty() {
            "the agents' jobs were stopped"
        } else {
            "the lab was torn down"
        };
        let kept = if saved {
            "the figures of the time that ran are kept in results.json (status interrupted)"
        } else {
            "the table above covers the time that ran"
        };
        format!("interrupted: {stopped}; {kept}")
    }

    /// The last line of an aborted run (`--abort-on-fail`): later tests did
    /// not start, and what ran is kept.
    pub fn aborted_note(&self, saved: bool) -> String {
        let stopped = if self.labs.is_empty() {
            "the agents' jobs were stopped"
        } else {
            "the lab was torn down"
        };
        let kept = if saved {
            "the figures of the time that ran are kept in results.json (status aborted)"
        } else {
            "the table above covers the time that ran"
        };
        format!("aborted: {stopped} and later tests did not start; {kept}")
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct DoctorEntry {
    pub host: String,
    pub report: linerate_doctor::Report,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    /// Sysctls that shape results: congestion control, socket buffers, backlog.
    pub sysctls: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    Tcp,
    Udp,
    /// HTTP/HTTPS downloads (server to client over TCP).
    Http,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct TestParams {
    pub protocol: Protocol,
    pub ip_version: u8,
    pub direction: Direction,
    pub duration_s: f64,
    /// UDP frame sizes (FCS included).
    pub frame: Option<FrameSpec>,
    pub average_frame_bytes: Option<f64>,
    pub flow_mode: Option<FlowMode>,
    pub flows: Option<u16>,
    /// Target rate in pps; absent = as fast as possible.
    pub rate_pps: Option<f64>,
    /// Target rate over time, for ramps.
    #[serde(default)]
    pub rate_profile: Option<crate::proto::RateProfile>,
    pub streams: Option<u16>,
    pub congestion: Option<String>,
    /// TCP: each direction's --rate in bit/s (paced per stream with
    /// SO_MAX_PACING_RATE); absent: unpaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<f64>,
    pub cpus: Vec<usize>,
    /// Which lab topology the test ran in (index into `labs`), if any.
    pub lab: Option<usize>,
    /// Seconds at the start that were sent and shown but left out of the
    /// totals (`--omit`, iperf3 -O); the test ran `duration_s` after them.
    /// The directions' figures cover `duration_s`; their sender and
    /// receiver summaries are the jobs' own counts, omitted seconds
    /// included.
    #[serde(default)]
    pub omit_s: f64,
    /// TCP: the socket buffer size asked for every stream (`--window`,
    /// iperf3 -w), bytes; what the kernel gave is in each direction's
    /// `socket_buffers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_bytes: Option<u32>,
    /// The DSCP the test marked its packets with (`--dscp`): the IPv4 TOS
    /// byte's and IPv6 traffic class's upper six bits; absent: not marked
    /// (0, the kernel's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<crate::proto::Dscp>,
}

impl TestParams {
    /// What every test has: its protocol, IPv4 or (`ipv6`) IPv6, direction
    /// and duration; the rest absent or empty (no frames, flows, rates,
    /// streams, CPUs, lab, omitted seconds, window or DSCP) for each kind
    /// to set what it has.
    pub fn new(protocol: Protocol, ipv6: bool, direction: Direction, duration_s: f64) -> Self {
        TestParams {
            protocol,
            ip_version: if ipv6 { 6 } else { 4 },
            direction,
            duration_s,
            frame: None,
            average_frame_bytes: None,
            flow_mode: None,
            flows: None,
            rate_pps: None,
            rate_profile: None,
            streams: None,
            congestion: None,
            rate_bps: None,
            cpus: vec![],
            lab: None,
            omit_s: 0.0,
            window_bytes: None,
            dscp: None,
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TestStatus {
    Ok,
    Failed,
    Interrupted,
    /// Stopped by `--abort-on-fail`: a criterion had clearly failed over
    /// its intervals so far; the figures cover the time it ran.
    Aborted,
}

impl TestStatus {
    /// A test cut short (Ctrl-C, or an abort) whose figures cover the
    /// time it ran.
    pub fn cut_short(self) -> bool {
        matches!(self, TestStatus::Interrupted | TestStatus::Aborted)
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct TestResult {
    pub name: String,
    pub status: TestStatus,
    pub error: Option<String>,
    pub started_at: String,
    pub params: TestParams,
    /// One entry per direction traffic flowed in.
    pub directions: Vec<DirectionResult>,
    /// CPU use of each endpoint, in % of all its host's CPUs over the test.
    pub cpu: Vec<CpuUse>,
    /// Kernel interface counters on every lab interface, before → after.
    pub kernel_counters: Vec<KernelCounters>,
    /// Application counters against kernel counters; over 1 % is flagged.
    pub cross_checks: Vec<CrossCheck>,
    /// Cycles and energy per packet (UDP tests).
    #[serde(default)]
    pub efficiency: Option<crate::host::efficiency::Efficiency>,
    /// The DUT's CPU time per packet over the sending phase (UDP tests with
    /// a watched DUT: the lab's), what it counts and what its host hides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_efficiency: Option<crate::host::efficiency::DutEfficiency>,
    /// With several generators or instances: their sum, per host and per
    /// interval on the controller's timebase.
    #[serde(default)]
    pub aggregate: Option<Aggregate>,
    /// In a lab with a DUT namespace: packets its interfaces received and
    /// did not send on (its own counters), less the frames of linerate's
    /// own known to have reached it (the live engine's egress check),
    /// beside the sequence-number loss.
    #[serde(default)]
    pub dut_counted_lost: Option<u64>,
    /// The most CPU time the hypervisor took from one CPU of a host taking
    /// part while the test ran (steal, /proc/stat, in 10 ms ticks), ms.
    /// Absent where no host reported per-CPU times. On a virtual machine a
    /// DUT or tester whose CPU is taken away drops or stalls for that long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ms: Option<f64>,
    /// How long the CPUs of the hosts taking part were kept from running a
    /// real-time thread while the test ran, ms, summed over CPUs and hosts
    /// (the stall watch, [`crate::host::stalls`]: the lateness of its 1 ms
    /// wakes that were 0.3 ms or more late). Sees the short stalls
    /// `steal_ms` rounds away. Absent where no host watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<f64>,
    /// With the lab's router-on-a-stick DUT: what its XDP program
    /// forwarded and dropped per direction over the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_stick: Option<crate::proto::StickCounters>,
    /// The VLAN the test's traffic crossed (`--vlan`, a plan test's
    /// `vlan`), and the VLAN devices its ends used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<TestVlan>,
    /// A bond of the DUT's (`lab --dut-bond`): its state after the test
    /// and what each of its ports carried during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_bond: Option<crate::results::bond::BondRecord>,
    /// Which core (if any) was full during the test and whose work filled
    /// it, from per-core CPU time and the agents' own threads.
    #[serde(default)]
    pub bottleneck: Option<Bottleneck>,
    /// Latency probes before, during and after the load (`--latency`,
    /// `linerate latency`, the lab's latency-under-load row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<crate::latency::stats::LatencyResult>,
    /// HTTP/HTTPS download tests: requests, latency, TLS/kTLS, CPU split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpResult>,
    /// Links an endpoint saw go down during the test, with the intervals
    /// they mark (each interval names them in `links_down`): loss in those
    /// intervals is the link's, not the DUT's forwarding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_events: Vec<String>,
    /// Tests with a stock iperf3 at the far end (issue 20): its own
    /// figures from the results exchange, beside this end's measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_end: Option<crate::proto::iperf3::FarEnd>,
    /// A client of linerate's own iperf3 server (a plan's `iperf3_server`
    /// host): that server's count of this client's test, from its own
    /// agent; `cross_checks` hold the client's figures against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_record: Option<crate::proto::iperf3::ServedTest>,
    /// The sweep point this test is (issue 21): sweep name and coordinates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::model::sweep::SweepPoint>,
    /// When the interface counters of `cross_checks` were read (before,
    /// after), controller realtime ns: what the runner needs to count its
    /// own packets in that span; not part of the results.
    #[serde(skip)]
    #[schemars(skip)]
    pub counters_span_ns: Option<(u64, u64)>,
}

/// One HTTP download test (issue 10): the client's and (when linerate
/// started it) the server's figures, totals, and what bound the run.
#[derive(Serialize, Deserialize, Debug, Clone, Default, JsonSchema)]
pub struct HttpResult {
    /// The matrix row (`T1.1` … `T3.2`) when the test is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
    pub url: String,
    pub tls: bool,
    pub connections: u16,
    /// Body bytes received × 8 / the client's run time.
    pub goodput_bps: f64,
    pub requests_per_s: f64,
    pub client: crate::proto::http::HttpSummary,
    /// Absent for servers linerate did not start (`--url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::proto::http::HttpSummary>,
    /// What limited the run: `disk`, `cpu` or `network`, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_reason: Option<String>,
    /// Why the sender retransmitted, with the evidence (TCP_INFO
    /// total_retrans and D-SACK'd duplicates), when it did more than 10 times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmit_note: Option<String>,
}

impl TestResult {
    /// A result about to be filled in by a running test.
    pub fn new(name: &str, started_at: String, params: TestParams) -> Self {
        TestResult {
            name: name.into(),
            status: TestStatus::Ok,
            error: None,
            started_at,
            params,
            directions: vec![],
            cpu: vec![],
            kernel_counters: vec![],
            cross_checks: vec![],
            efficiency: None,
            dut_efficiency: None,
            aggregate: None,
            dut_counted_lost: None,
            steal_ms: None,
            stall_ms: None,
            dut_stick: None,
            vlan: None,
            dut_bond: None,
            bottleneck: None,
            latency: None,
            http: None,
            link_events: vec![],
            far_end: None,
            server_record: None,
            sweep: None,
            counters_span_ns: None,
        }
    }

    /// Fills [`TestResult::link_events`] from the intervals' `links_down`:
    /// one line per direction, endpoint and interface, with the span of
    /// the intervals it marks.
    pub fn note_links_down(&mut self) {
        let mut events = Vec::new();
        for d in &self.directions {
            // One span per (role, interface): first start, last end, count.
            struct Span {
                role: String,
                ifname: String,
                first: f64,
                last: f64,
                n: usize,
            }
            let mut seen: Vec<Span> = Vec::new();
            for p in &d.intervals {
                let sides = [(&p.sender, &d.sender), (&p.receiver, &d.receiver)];
                for (sample, role) in sides {
                    let Some(s) = sample else { continue };
                    for ifname in &s.links_down {
                        match seen
                            .iter_mut()
                            .find(|x| x.role == *role && x.ifname == *ifname)
                        {
                            Some(x) => {
                                x.first = x.first.min(s.t_start);
                                x.last = x.last.max(s.t_end);
                                x.n += 1;
                            }
                            None => seen.push(Span {
                                role: role.clone(),
                                ifname: ifname.clone(),
                                first: s.t_start,
                                last: s.t_end,
                                n: 1,
                            }),
                        }
                    }
                }
            }
            for x in seen {
                events.push(format!(
                    "{}: link down on {} at the {} in {} interval{} ({:.1}–{:.1} s); \
                     loss there is the link's, not the DUT's forwarding",
                    d.direction,
                    x.ifname,
                    x.role,
                    x.n,
                    if x.n == 1 { "" } else { "s" },
                    x.first,
                    x.last
                ));
            }
        }
        self.link_events = events;
    }
}

/// The VLAN a test ran over.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct TestVlan {
    /// The tags: `id`, and `inner` for QinQ.
    #[serde(flatten)]
    pub tags: crate::proto::Vlan,
    /// `role: device` of each end whose agent reported the VLAN device its
    /// traffic went through (socket engines: the sub-interface it made,
    /// e.g. `r1: nic0.100`); frame-building engines write the tags
    /// themselves and name none.
    pub devices: Vec<String>,
}

/// The JSON Schema of [`RunResults`], as committed in `schema/`.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RunResults)).unwrap_or_default()
}

#[cfg(test)]
mod tests;
