//! The validated configuration every command runs from (stage two of
//! argument parsing). Command-line flags and plan files both end here; no
//! type in this module knows where its values came from, and nothing below
//! the CLI sees a flag.

use crate::model::units::Rate;
use crate::proto::{Cidr, Direction, FrameSpec, RxEngine, TxEngine};
use crate::results::FlowMode;
use crate::search;
use std::net::IpAddr;
use std::path::PathBuf;

// The parts of these configurations that the features below own: each is
// a field of a config this module defines, or the config itself of a
// command that runs no tests (`serve`, `monitor`, `agent`). The command
// layer builds them from flags and names them from here, not from the
// feature; their value parsers are in `orchestrate::values`.
pub use crate::http::serve_cmd::ServeConfig;
pub use crate::http::server::{Limits as ServeLimits, ServeSpec};
pub use crate::iperf3::server::{
    ServerConfig as Iperf3ServerConfig, ServerLimits as Iperf3ServerLimits,
};
pub use crate::lab::ports::PortsSpec;
pub use crate::lab::rules::Remark;
pub use crate::lab::{netem::Netem, CpuSet, DutMode, LabSpec, Shape};
pub use crate::latency::monitor::MonitorConfig;
pub use crate::runner::{
    HttpServerSide, HttpTest, HttpUrl, Iperf3Test, LatencyTest, Load, ProbeOpts, TcpTest, UdpTest,
};
pub use crate::search::{MlrGoal, RampSpec};
pub use crate::topology::ssh::SshOptions;
pub use crate::topology::Endpoint;
pub use crate::vm::{Accel, Guest, KernelSource, VmSpec};

/// `linerate agent`: where its data plane lives and what it accepts.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `None`: this namespace; `new`: an anonymous one that dies with the
    /// agent; another name: that existing namespace.
    pub netns: Option<String>,
    /// Longest test the agent accepts.
    pub max_duration: std::time::Duration,
    /// Highest UDP send rate the agent accepts, in pps.
    pub max_rate_pps: Option<f64>,
}

/// What every run shares: where results go, how they are shown, what the
/// generator may send to.
#[derive(Debug, Clone)]
pub struct RunOpts {
    pub name: Option<String>,
    /// L1 line rate that rates in % refer to, bit/s (`--line-rate`, else 10G).
    pub line_rate_bps: f64,
    /// The user gave `--line-rate`: "% of line" may use it where no
    /// interface reports a real speed.
    pub line_rate_given: bool,
    /// Pass/fail criteria, a baseline to compare with, repetitions, JUnit.
    pub criteria: CriteriaOpts,
    pub results_dir: PathBuf,
    /// False for ad-hoc tests run with --no-results.
    pub write_results: bool,
    pub json: bool,
    pub progress: bool,
    /// `--interval`: a line per this many seconds of each test.
    pub interval_s: Option<f64>,
    /// Destinations allowed beyond loopback and the benchmarking ranges.
    pub allow_target: Vec<Cidr>,
    /// CPUs to pin to (first for senders, second for receivers); empty: any.
    pub cpus: Vec<usize>,
    /// A UDP test that receives nothing passes (--expect-loss).
    pub expect_loss: bool,
    /// How ssh hosts are reached.
    pub ssh: SshOptions,
}

/// What decides a run (`--expect`, `--baseline`, `--tolerance`,
/// `--repeat`, `--junit`), validated.
#[derive(Debug, Clone, Default)]
pub struct CriteriaOpts {
    pub expect: Vec<crate::model::criteria::Criterion>,
    /// Each test runs this many times (at least 1).
    pub repeat: u32,
    pub baseline: Option<PathBuf>,
    /// Changes within this many % are never regressions.
    pub tolerance_pct: f64,
    pub junit: Option<PathBuf>,
    /// `--abort-on-fail`: `expect` is held against each test's intervals
    /// as it runs, and the first that has clearly failed stops the run.
    pub abort: Option<AbortOpts>,
}

/// `--abort-on-fail`, validated: criteria are checked while a test runs
/// (see `orchestrate::abort`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AbortOpts {
    /// The grace period (`--abort-after`): how long a test's intervals
    /// (after `--omit`) must cover before a criterion can fail. `None`:
    /// three of the test's intervals.
    pub after: Option<std::time::Duration>,
}

/// Two endpoints the user names, with no DUT that linerate knows of.
#[derive(Debug, Clone)]
pub struct Pair {
    pub client: Endpoint,
    pub server: Endpoint,
    /// The server's address, where the client sends.
    pub target: IpAddr,
    /// The client's address (needed for traffic towards it).
    pub client_address: Option<IpAddr>,
    /// VLAN tags on both ends' UDP frames (`linerate udp --vlan`).
    pub vlan: Option<crate::proto::Vlan>,
    /// Where an agent watches the device under test (`--dut-host`).
    pub dut: Option<Endpoint>,
}

/// Where ramps and searches send: a lab built for the run, or a pair.
#[derive(Debug, Clone)]
pub enum Bench {
    Lab { spec: LabSpec, ipv6: bool },
    Pair(Pair),
}

/// A profile resolved to frames and flows.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub frame: FrameSpec,
    pub flow_mode: FlowMode,
}

pub const SEED_PROFILES: [&str; 4] = [
    "bench-var2-1514b",
    "bench-var2-imix",
    "bench-var2-64b",
    "bench",
];

/// A profile name that is none of [`SEED_PROFILES`].
#[derive(Debug, thiserror::Error)]
#[error("unknown profile '{0}': choose one of {list}", list = SEED_PROFILES.join(", "))]
pub struct UnknownProfile(pub String);

/// The seed write-ups' named profiles (trex-loadtest's bench-var2-*).
pub fn seed_profile(name: &str) -> Result<Profile, UnknownProfile> {
    let (frame, flow_mode) = match name {
        "bench-var2-1514b" => (FrameSpec::Fixed(1518), FlowMode::Var2),
        "bench-var2-imix" => (FrameSpec::Imix, FlowMode::Var2),
        "bench-var2-64b" => (FrameSpec::Fixed(64), FlowMode::Var2),
        "bench" => (FrameSpec::Fixed(64), FlowMode::One),
        other => return Err(UnknownProfile(other.into())),
    };
    Ok(Profile {
        name: name.into(),
        frame,
        flow_mode,
    })
}

pub fn frame_name(f: FrameSpec) -> String {
    match f {
        FrameSpec::Fixed(n) => format!("{n}B"),
        FrameSpec::Imix => "imix".into(),
    }
}

impl Profile {
    /// A profile named after its frame size and flow mode.
    pub fn custom(frame: FrameSpec, flow_mode: FlowMode) -> Profile {
        Profile {
            name: format!("{} {:?}", frame_name(frame), flow_mode).to_lowercase(),
            frame,
            flow_mode,
        }
    }
}

/// The UDP stream a ramp or search repeats (frames come from the profile).
#[derive(Debug, Clone)]
pub struct Stream {
    pub flows: u16,
    pub bidir: bool,
    pub ipv6: bool,
    pub cpus: Vec<usize>,
    pub allow: Vec<Cidr>,
    pub tx_engine: TxEngine,
    /// How the receivers count them.
    pub rx_engine: RxEngine,
    /// UDP worker threads per side (0: each agent chooses).
    pub threads: u16,
}

#[derive(Debug, Clone)]
pub struct RampConfig {
    pub profile: Profile,
    pub stream: Stream,
    pub spec: search::RampSpec,
    /// Size the ramp to the DUT first (`--ramp-to auto`): a short unpaced
    /// probe measures what the DUT forwards when overloaded, and the ramp
    /// climbs to twice that (at most what the tester offered).
    pub probe: bool,
    /// Loss ratio (0..1) above which a one-second sample is lossy.
    pub loss_threshold: f64,
    /// Also write trex-loadtest-viz vars/stats to this file.
    pub export_viz: Option<PathBuf>,
    /// L1 line rate the ramp's "% of line rate" refers to, bit/s.
    pub line_rate_bps: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// MLRsearch: NDR and PDR (and any --goal) in one search.
    Mlr,
    /// RFC 2544 throughput: binary search for the highest zero-loss rate.
    Rfc2544,
    /// Both, one after the other.
    Both,
    /// RFC 2544 §26.4 / RFC 9004 back-to-back frames: the longest burst
    /// the DUT forwards whole.
    BackToBack,
}

/// A back-to-back search's own settings (`search --method back-to-back`).
#[derive(Debug, Clone, PartialEq)]
pub struct B2bPlan {
    /// Repetitions of the burst search (RFC 2544: at least 50).
    pub trials: usize,
    /// The longest burst, frames; `None`: 2 s at the burst rate.
    pub max_burst: Option<u64>,
    /// The DUT's throughput for RFC 9004's corrected buffer time; `None`:
    /// its forwarding rate under overload, measured.
    pub throughput: Option<Rate>,
}

impl Default for B2bPlan {
    fn default() -> Self {
        B2bPlan {
            trials: search::b2b::RFC_B2B_TRIALS,
            max_burst: None,
            throughput: None,
        }
    }
}

/// Resolved settings of one search, shared by `linerate search`, plans and
/// the lab.
#[derive(Debug, Clone)]
pub struct SearchPlan {
    pub method: Method,
    /// Lowest load to try; `None`: 1 % of the highest.
    pub min_rate: Option<Rate>,
    pub max_rate: Rate,
    pub goals: Vec<search::MlrGoal>,
    pub rfc_trial_s: f64,
    pub rfc_waits: bool,
    /// Loss ratio (0..1) an RFC 2544 trial may have and still pass.
    pub rfc_acceptable_loss: f64,
    /// RFC 2544 binary search resolution, relative (0..1).
    pub rfc_resolution: f64,
    pub frame_loss: bool,
    /// Upper bound from elsewhere (e.g. the tester's self-test), pps.
    pub cap_pps: Option<f64>,
    /// `--latency-at`: after the search, a latency trial at each of these
    /// % (0 < x <= 100) of the throughput found (`orchestrate::latency_at`).
    pub latency_at: Vec<f64>,
    pub b2b: B2bPlan,
    /// `-v`: a line per trial besides the live line.
    pub verbose: bool,
}

#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// One search per profile, in order (`--sizes`).
    pub profiles: Vec<Profile>,
    pub stream: Stream,
    pub plan: SearchPlan,
    /// L1 line rate the searches' rates refer to, bit/s.
    pub line_rate_bps: f64,
}

/// What `linerate lab` runs.
#[derive(Debug, Clone)]
pub struct LabConfig {
    pub spec: LabSpec,
    /// Real interfaces in place of the gen and sink veth ends (external DUT).
    pub ports: Option<crate::lab::ports::PortsSpec>,
    pub quick: bool,
    pub no_search: bool,
    pub duration_s: Option<f64>,
    pub ipv6: bool,
    pub direction: Direction,
    /// Run only tests whose names contain one of these (lower case).
    pub only: Vec<String>,
    /// How the UDP tests' senders put datagrams on the wire.
    pub tx_engine: TxEngine,
    /// How the receivers count them.
    pub rx_engine: RxEngine,
    /// UDP worker threads per side (0: each agent chooses).
    pub threads: u16,
    /// Congestion control of the TCP tests (`None`: the kernel's default).
    pub congestion: Option<String>,
}

/// One kind of test with its settings, as ad-hoc commands and plans give it.
/// A few of these exist per run: the size of the largest variant costs
/// nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum TestSpec {
    Tcp(TcpTest),
    Udp(UdpTest),
    Ramp(RampConfig),
    Search(SearchConfig),
    /// A TCP or UDP test with latency probes before, during and after it.
    Latency(crate::runner::LatencyTest),
    /// HTTP downloads: one test, or the T1/T2/T3 matrix's rows in order.
    Http(Vec<crate::runner::HttpTest>),
    /// A TCP or UDP test against a stock iperf3 server.
    Iperf3(crate::runner::Iperf3Test),
}

impl TestSpec {
    /// The spec as one test of a single-result kind, which
    /// [`crate::orchestrate::run::Run::test`] runs; `None` for what runs
    /// several: a ramp's and a search's trials (of a `UdpTest`), the HTTP
    /// matrix's rows, and an iperf3 test against linerate's own server (a
    /// result per client). A new variant is a compile error here until it
    /// says which it is.
    pub fn as_kind(&self) -> Option<&dyn crate::runner::TestKind> {
        match self {
            TestSpec::Tcp(t) => Some(t),
            TestSpec::Udp(t) => Some(t),
            TestSpec::Latency(t) => Some(t),
            TestSpec::Iperf3(t) if t.serve.is_none() => Some(t),
            TestSpec::Iperf3(_) => None,
            TestSpec::Ramp(_) | TestSpec::Search(_) | TestSpec::Http(_) => None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            TestSpec::Tcp(_) => "tcp",
            TestSpec::Udp(_) => "udp",
            TestSpec::Ramp(_) => "ramp",
            TestSpec::Search(_) => "search",
            TestSpec::Latency(_) => "latency",
            TestSpec::Http(_) => "http",
            TestSpec::Iperf3(t) => match t.params.transport {
                crate::proto::iperf3::Transport::Tcp => "tcp",
                crate::proto::iperf3::Transport::Udp => "udp",
            },
        }
    }
}

/// A command, validated.
#[derive(Debug, Clone)]
pub enum Command {
    Lab(LabConfig, RunOpts),
    LabCleanup,
    /// An ad-hoc test between two named endpoints.
    Pair(Pair, TestSpec, RunOpts),
    /// A ramp or search against a lab built for it.
    LabBench(LabSpec, TestSpec, RunOpts),
    /// A plan file's hosts and tests.
    Plan(PlanConfig, RunOpts),
    /// A test against a stock iperf3 server (`--server iperf3://HOST`).
    /// A test against a stock iperf3 server, from the client endpoint.
    Iperf3(
        crate::topology::Endpoint,
        crate::runner::Iperf3Test,
        RunOpts,
    ),
    /// A test command with `--sweep`: one command per point.
    Sweep(SweepConfig, RunOpts),
}

/// A validated `--sweep`: every point's command, in expansion order.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub info: crate::model::sweep::SweepInfo,
    pub points: Vec<(crate::model::sweep::Point, Command)>,
    /// Stop at the first failed point.
    pub fail_fast: bool,
}

impl Command {
    /// Sets what decides the run (criteria, repetitions, baseline, JUnit).
    pub fn set_criteria(&mut self, c: CriteriaOpts) {
        match self {
            Command::Lab(_, o) | Command::Pair(_, _, o) | Command::LabBench(_, _, o) => {
                o.criteria = c
            }
            Command::Plan(_, o) | Command::Iperf3(_, _, o) => {
                o.criteria = c;
            }
            Command::Sweep(s, o) => {
                for (_, p) in &mut s.points {
                    p.set_criteria(c.clone());
                }
                o.criteria = c;
            }
            Command::LabCleanup => {}
        }
    }
}

/// A host of a plan.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub name: String,
    pub endpoint: Endpoint,
    /// linerate's path on this host (ssh hosts), overriding --remote-binary.
    pub binary: Option<String>,
    /// Physical ports of this host for a lab.
    pub ports: Vec<String>,
    /// The host's test address (default target and client address).
    pub address: Option<IpAddr>,
    /// A stock iperf3 server (`iperf3 = "..."`): no agent is started
    /// there; tests against it are iperf3 tests.
    pub iperf3: Option<std::net::SocketAddr>,
    /// linerate's own iperf3 server runs here for the tests sent to this
    /// host (a plan's `iperf3_server`): its settings, listening on the
    /// test's target address at `listen`'s port.
    pub iperf3_server: Option<crate::proto::iperf3::ServerJob>,
    /// A guest linerate boots as this host (`vm = { ... }`): its agent is
    /// reached through qemu, not `endpoint`.
    pub vm: Option<crate::vm::host::VmHost>,
}

/// A test of a plan: what runs, from which generators to which sink.
#[derive(Debug, Clone)]
pub struct PlanTest {
    pub name: String,
    pub spec: TestSpec,
    /// Generator hosts (indexes into `PlanConfig::hosts`).
    pub from: Vec<usize>,
    pub to: usize,
    /// The host watching the DUT (plan `dut`), if any.
    pub dut: Option<usize>,
    /// Parallel instances per generator.
    pub instances: u16,
    /// Where the traffic goes.
    pub target: IpAddr,
    /// The test's own criteria (`expect = [...]`).
    pub expect: Vec<crate::model::criteria::Criterion>,
    /// Its criteria stop the run when they clearly fail while it runs
    /// (`abort_on_fail = true`).
    pub abort: Option<AbortOpts>,
    /// The sweep point this test is.
    pub sweep: Option<crate::model::sweep::Point>,
    /// The lab it runs in (plans with `[lab]`).
    pub lab: Option<LabSpec>,
}

#[derive(Debug, Clone)]
pub struct PlanConfig {
    pub name: String,
    pub file: PathBuf,
    pub hosts: Vec<HostConfig>,
    pub tests: Vec<PlanTest>,
    /// Hosts whose physical ports form a lab around an external DUT.
    pub port_lab: Option<PortLabConfig>,
    /// The plan's sweeps, their points among `tests`.
    pub sweeps: Vec<crate::model::sweep::SweepInfo>,
    /// Stop at the first failed sweep point (`--fail-fast`).
    pub fail_fast: bool,
}

/// A lab of physical ports across plan hosts: the generator host's port
/// and the sink host's port, cabled to the DUT (the embedded lab's
/// addressing; the DUT's MACs found by ARP).
#[derive(Debug, Clone)]
pub struct PortLabConfig {
    pub gen_host: usize,
    pub sink_host: usize,
    pub ports: crate::lab::ports::PortsSpec,
}
