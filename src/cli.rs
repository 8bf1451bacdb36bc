//! Command-line flags (stage one: close to what the user typed) and their
//! conversion into the validated [`crate::config`] (stage two). Nothing
//! below this module sees a clap type. Plan files reach the same stage two:
//! each `[[test]]` is turned into the flags of its ad-hoc command and parsed
//! here, so a plan accepts exactly what the command line does.

use crate::config::{
    self, Bench, Command as Cmd, LabConfig, Method, Pair, Profile, RampConfig, RunOpts,
    SearchConfig, SearchPlan, Stream, TestSpec,
};
use crate::engine::check_destination;
use crate::lab::{DutMode, LabSpec};
use crate::model::units::Rate;
use crate::proto::{Cidr, Direction, FrameSpec, TxEngine};
use crate::results::FlowMode;
use crate::runner::{TcpTest, UdpTest};
use crate::search;
use crate::topology::ssh::SshOptions;
use crate::topology::Endpoint;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Parser, Subcommand};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "linerate",
    version,
    about = "A network loadtest lab in one binary",
    long_about = "linerate measures what a link, host or router forwards, from 64-byte packets to \
                  bulk TCP, on the ordinary Linux network stack. `linerate lab` builds a throwaway \
                  gen -> DUT -> sink lab of network namespaces and runs the standard suite."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build a namespace lab (gen -> DUT -> sink), run the standard suite, tear it down.
    Lab(LabArgs),
    /// TCP bulk test between two endpoints you name (local, ns:NAME, ssh://host).
    Tcp(TcpArgs),
    /// UDP packet-stream test between two endpoints you name.
    Udp(UdpArgs),
    /// Latency under load: probes idle, during a TCP or UDP load, and idle after (rrul's shape).
    Latency(LatencyArgs),
    /// Monitor latency for hours or days: responders and ICMP echo, smokeping-style windows.
    Monitor(MonitorArgs),
    /// HTTP/HTTPS downloads: N connections against `linerate serve` or any --url; --matrix runs T1/T2/T3.
    Http(crate::cli_http::HttpArgs),
    /// Serve downloads over HTTP/1.1 or HTTPS (sendfile, rustls, kTLS where present) until Ctrl-C.
    Serve(crate::cli_http::ServeArgs),
    /// Load ramp (warmup, linear ramp, hold) with the saturation point, trex-loadtest style.
    Ramp(RampArgs),
    /// Throughput search: MLRsearch NDR/PDR, RFC 2544 throughput and frame loss.
    Search(SearchArgs),
    /// Run a plan file: named hosts (local, netns, ssh) and the tests between them.
    Run(RunArgs),
    /// Explain likely bottlenecks of this host from sysfs/procfs evidence.
    Doctor(linerate_doctor::DoctorArgs),
    /// Run as an agent speaking the control protocol on stdin/stdout (started by the controller).
    Agent(AgentArgs),
    /// Write the HTML report (or CSV / Prometheus exports) of one or more run directories.
    Report(crate::report::ReportArgs),
    /// Print the JSON Schema of results.json.
    Schema,
}

/// How ssh hosts are reached (flags shared by every command that can use them).
#[derive(Args, Debug, Clone)]
pub struct SshArgs {
    /// ssh client configuration file (passed to ssh -F).
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Extra ssh option KEY=VALUE (passed to ssh -o; repeatable).
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    pub ssh_option: Vec<String>,
    /// Accept and remember host keys not seen before (StrictHostKeyChecking=accept-new).
    /// Without it, host-key checking is exactly what your ssh configuration says.
    #[arg(long)]
    pub ssh_accept_new: bool,
    /// Seconds to wait for an ssh connection (ConnectTimeout).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub connect_timeout: u64,
    /// linerate on the remote hosts (default: `linerate` on their PATH).
    #[arg(long, value_name = "PATH")]
    pub remote_binary: Option<String>,
    /// Copy this linerate to hosts that lack the same version (into a per-user cache).
    #[arg(long)]
    pub push: bool,
}

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// L1 line rate that "% of line rate" refers to (e.g. 10G, 25G, 100G).
    #[arg(long, default_value = "10G", value_parser = parse_bps)]
    pub line_rate: f64,
    /// Where run directories go.
    #[arg(long, default_value = "linerate-results")]
    pub results_dir: PathBuf,
    /// Name of the run (part of its directory name).
    #[arg(long)]
    pub name: Option<String>,
    /// Print the results document (results.json) to stdout; the table goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// No live progress line.
    #[arg(long)]
    pub no_progress: bool,
    /// Also allow sending to this prefix (outside loopback, 198.18.0.0/15 and 2001:2::/48). Repeatable.
    #[arg(long = "allow-target", value_name = "CIDR")]
    pub allow_target: Vec<Cidr>,
    /// CPUs to pin to: the first for senders, the second for receivers (e.g. 0,1).
    #[arg(long, value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,
    #[command(flatten)]
    pub ssh: SshArgs,
}

#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// What the DUT namespace does with the traffic.
    #[arg(long, value_enum, default_value = "route")]
    pub dut: DutArg,
    /// Rules in the DUT's forward chain in fw mode (the last one matches).
    #[arg(long, default_value_t = 100)]
    pub fw_rules: u32,
    /// Short suite (about 20 s): no ramps or NDR/PDR searches.
    #[arg(long)]
    pub quick: bool,
    /// Skip the per-profile ramps and NDR/PDR searches of the full suite.
    #[arg(long)]
    pub no_search: bool,
    /// Seconds per test (overrides the suite's default).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Add an IPv6 pass (2001:2::/48). IPv6 cannot carry a 64 B test frame; that pass uses 84 B.
    #[arg(long)]
    pub ipv6: bool,
    /// UDP tests in one direction (default) or both at once.
    #[arg(long, value_enum, default_value = "forward")]
    pub direction: DirectionArg,
    /// MTU of every lab link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Remove leftovers of earlier runs (namespaces named lr-*) and exit.
    #[arg(long)]
    pub cleanup: bool,
    /// Make the DUT drop this % of forwarded packets at random (nftables numgen),
    /// e.g. to check that the tester reports loss right.
    #[arg(long, value_name = "PERCENT")]
    pub dut_loss: Option<f64>,
    /// Police the DUT's forwarding to this many packets per second (nftables limit):
    /// a DUT of known capacity.
    #[arg(long, value_name = "PPS", value_parser = parse_pps_u64)]
    pub dut_police: Option<u64>,
    /// Shape the DUT's egress towards the sink with tc tbf: RATE (20M, 1G) and an optional
    /// QUEUE in bytes (125000, 64k) or time at the rate (50ms; default 100ms). A load above
    /// RATE fills the queue: a bufferbloated DUT, for latency under load.
    #[arg(long, value_name = "RATE[,QUEUE]", value_parser = crate::lab::Shape::parse)]
    pub dut_shape: Option<crate::lab::Shape>,
    /// Run only the suite's tests whose names contain this text (case-insensitive; repeatable),
    /// e.g. --only "udp 64B" --only "tcp 1".
    #[arg(long, value_name = "TEXT")]
    pub only: Vec<String>,
    /// How the UDP tests' senders put datagrams on the wire: packet (AF_PACKET frames,
    /// qdisc bypass), socket (UDP sockets) or auto (packet where it can run, else socket).
    #[arg(long, value_enum, default_value = "auto")]
    pub tx_engine: TxEngineArg,
    /// Worker threads per side for UDP: each sender thread owns a share of the flows and a
    /// core, receivers spread over SO_REUSEPORT sockets. With --cpus, the list is split:
    /// the first N CPUs for the senders, the next N for the receivers. Default: 1 with
    /// --cpus, else half the CPUs of each agent's host; never more than one per flow.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Physical port for the generator: moved into the gen namespace for the run and given
    /// back in its old state after. The DUT is then the external box the ports are cabled to
    /// (so --dut and its impairments do not apply).
    #[arg(long, value_name = "IF", requires = "sink_port",
          conflicts_with_all = ["dut", "fw_rules", "dut_loss", "dut_police", "dut_shape"])]
    pub gen_port: Option<String>,
    /// Physical port for the sink (see --gen-port).
    #[arg(long, value_name = "IF", requires = "gen_port")]
    pub sink_port: Option<String>,
    /// Take ports even if they carry a default route, addresses outside the benchmarking
    /// ranges or a bridge/bond membership.
    #[arg(long, requires = "gen_port")]
    pub force_port: bool,
    /// The two ports are cabled to each other (no DUT): one subnet, as the back-to-back lab.
    #[arg(long, requires = "gen_port")]
    pub back_to_back: bool,
    /// The external DUT's address on the gen side (default 198.18.0.254 and 2001:2:0:10::fe;
    /// give an IPv4 and/or an IPv6 one). The gen port takes host 1 of its subnet (2 if the DUT is 1).
    #[arg(long, value_name = "ADDR", requires = "gen_port")]
    pub dut_gen_addr: Vec<std::net::IpAddr>,
    /// The external DUT's address on the sink side (default 198.19.0.254 and 2001:2:0:20::fe).
    #[arg(long, value_name = "ADDR", requires = "gen_port")]
    pub dut_sink_addr: Vec<std::net::IpAddr>,
    /// The DUT's MAC on the gen side; without it, found by ARP once before the tests.
    #[arg(long, value_name = "MAC", requires = "gen_port")]
    pub dut_gen_mac: Option<String>,
    /// The DUT's MAC on the sink side; without it, found by ARP once before the tests.
    #[arg(long, value_name = "MAC", requires = "gen_port")]
    pub dut_sink_mac: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// The DUT modes of the lab.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DutArg {
    /// Linux routes between two subnets.
    Route,
    /// Linux bridges the two links.
    Bridge,
    /// Routes and masquerades (nftables) towards the sink.
    Nat,
    /// Routes through an nftables forward chain of N rules, the last matching.
    Fw,
}

impl From<DutArg> for DutMode {
    fn from(d: DutArg) -> Self {
        match d {
            DutArg::Route => DutMode::Route,
            DutArg::Bridge => DutMode::Bridge,
            DutArg::Nat => DutMode::Nat,
            DutArg::Fw => DutMode::Fw,
        }
    }
}

impl LabArgs {
    /// The port flags, for [`crate::lab::ports::PortsSpec::from_flags`].
    pub fn port_flags(&self) -> crate::lab::ports::PortFlags<'_> {
        crate::lab::ports::PortFlags {
            gen_port: self.gen_port.as_deref(),
            sink_port: self.sink_port.as_deref(),
            force: self.force_port,
            back_to_back: self.back_to_back,
            dut_gen_addr: &self.dut_gen_addr,
            dut_sink_addr: &self.dut_sink_addr,
            dut_gen_mac: self.dut_gen_mac.as_deref(),
            dut_sink_mac: self.dut_sink_mac.as_deref(),
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectionArg {
    Forward,
    Reverse,
    Both,
}

impl From<DirectionArg> for Direction {
    fn from(d: DirectionArg) -> Self {
        match d {
            DirectionArg::Forward => Direction::Forward,
            DirectionArg::Reverse => Direction::Reverse,
            DirectionArg::Both => Direction::Both,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct Endpoints {
    /// Where the client/generator runs: `local` (this namespace), `ns:NAME` (an existing
    /// `ip netns`) or `ssh://[user@]host[:port]` (another host, over your ssh configuration).
    #[arg(long, default_value = "local")]
    pub client: String,
    /// Where the server/sink runs: `local`, `ns:NAME` or `ssh://[user@]host[:port]`.
    #[arg(long, default_value = "local")]
    pub server: String,
    /// Address of the server the client sends to (e.g. 198.18.0.2 or 127.0.0.1).
    #[arg(long)]
    pub target: IpAddr,
    /// Address of the client, needed as the target of reverse UDP traffic.
    #[arg(long)]
    pub client_address: Option<IpAddr>,
    /// Seconds to run.
    #[arg(long, short = 't', default_value_t = 10.0)]
    pub duration: f64,
    /// Send from the server to the client instead.
    #[arg(long, short = 'R', conflicts_with = "bidir")]
    pub reverse: bool,
    /// Send both ways at once.
    #[arg(long)]
    pub bidir: bool,
    /// Do not write a results directory.
    #[arg(long)]
    pub no_results: bool,
}

#[derive(Args, Debug, Clone)]
pub struct TcpArgs {
    #[command(flatten)]
    pub ends: Endpoints,
    /// Parallel streams (per direction).
    #[arg(long, short = 'P', default_value_t = 1)]
    pub streams: u16,
    /// TCP congestion control (e.g. cubic, bbr).
    #[arg(long)]
    pub cc: Option<String>,
    /// Bytes per write.
    #[arg(long, default_value_t = 131072)]
    pub buffer: u32,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
}

/// Latency probes beside a test.
#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Measure latency under this test's load: probes idle before, during and idle after it.
    #[arg(long)]
    pub latency: bool,
    /// Milliseconds between latency probes.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    pub probe_interval: f64,
    /// UDP payload bytes per latency probe (48..=1452).
    #[arg(long, value_name = "BYTES", default_value_t = crate::proto::probe::DEFAULT_PAYLOAD)]
    pub probe_size: u16,
    /// Seconds of the idle phases before and after the load.
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub idle: f64,
}

impl ProbeArgs {
    pub fn opts(&self) -> Result<crate::runner::ProbeOpts> {
        if !(1.0..=10_000.0).contains(&self.probe_interval) {
            bail!(
                "--probe-interval {} is outside 1..=10000 ms",
                self.probe_interval
            );
        }
        let (lo, hi) = (
            crate::proto::probe::HEADER_LEN as u16,
            crate::proto::probe::MAX_PAYLOAD,
        );
        if !(lo..=hi).contains(&self.probe_size) {
            bail!(
                "--probe-size {} is outside {lo}..={hi} bytes (a probe's header is {lo})",
                self.probe_size
            );
        }
        if !(0.0..=600.0).contains(&self.idle) {
            bail!("--idle {} is outside 0..=600 s", self.idle);
        }
        Ok(crate::runner::ProbeOpts {
            interval: Duration::from_secs_f64(self.probe_interval / 1000.0),
            payload: self.probe_size,
            idle: Duration::from_secs_f64(self.idle),
            ..Default::default()
        })
    }

    /// The test itself, or with probes around it when --latency asks.
    fn wrap(&self, load: crate::runner::Load) -> Result<TestSpec> {
        if !self.latency {
            return Ok(match load {
                crate::runner::Load::Tcp(t) => TestSpec::Tcp(t),
                crate::runner::Load::Udp(t) => TestSpec::Udp(t),
            });
        }
        Ok(TestSpec::Latency(crate::runner::LatencyTest {
            load,
            probes: self.opts()?,
        }))
    }
}

#[derive(Args, Debug, Clone)]
pub struct MonitorArgs {
    /// A latency responder to probe, ENDPOINT=ADDR: linerate starts an agent at ENDPOINT
    /// (`local`, `ns:NAME`, `ssh://[user@]host[:port]`) and probes ADDR. Repeatable.
    #[arg(long = "responder", value_name = "ENDPOINT=ADDR")]
    pub responders: Vec<String>,
    /// A host to probe with ICMP echo (no responder needed). Repeatable.
    #[arg(long = "icmp", value_name = "ADDR")]
    pub icmp: Vec<IpAddr>,
    /// Seconds per window: one NDJSON line per window and target.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub window: f64,
    /// Probes per window, spread evenly over it.
    #[arg(long, default_value_t = 20)]
    pub probes: u32,
    /// Stop after this many seconds (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Directory of the journal (monitor.ndjson, rotated to .1, .2, ...).
    #[arg(long, short = 'o', default_value = "linerate-monitor")]
    pub out: PathBuf,
    /// Write an annotation event at the start (e.g. "firmware 1.2 installed"). Repeatable.
    #[arg(long, value_name = "TEXT")]
    pub annotate: Vec<String>,
    /// Watch this file for annotations: each new line `TEXT` or `UNIX_SECONDS TEXT`.
    #[arg(long, value_name = "FILE")]
    pub annotations: Option<PathBuf>,
    /// Serve Prometheus metrics on ADDR:PORT (or PORT, on 127.0.0.1) at /metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
    /// Write Prometheus metrics to this file (atomically) after every window, for
    /// node_exporter's textfile collector.
    #[arg(long, value_name = "PATH")]
    pub metrics_textfile: Option<PathBuf>,
    /// Rotate the journal when it reaches this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 16.0)]
    pub max_file_mib: f64,
    /// Journal files kept (the current one included).
    #[arg(long, default_value_t = 8)]
    pub max_files: u32,
    /// UDP payload bytes of responder probes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::proto::probe::DEFAULT_PAYLOAD)]
    pub probe_size: u16,
    /// Also allow probing this prefix (outside loopback, 198.18.0.0/15 and 2001:2::/48). Repeatable.
    #[arg(long = "allow-target", value_name = "CIDR")]
    pub allow_target: Vec<Cidr>,
    #[command(flatten)]
    pub ssh: SshArgs,
}

/// `linerate monitor`'s flags, validated.
pub fn monitor_config(a: &MonitorArgs) -> Result<crate::latency::monitor::MonitorConfig> {
    let responders = a
        .responders
        .iter()
        .map(|r| crate::latency::monitor::parse_responder(r))
        .collect::<Result<Vec<_>>>()?;
    if responders.is_empty() && a.icmp.is_empty() {
        bail!("nothing to monitor: give --responder ENDPOINT=ADDR and/or --icmp ADDR");
    }
    for ip in responders.iter().map(|r| r.1).chain(a.icmp.iter().copied()) {
        check_destination(ip, &a.allow_target).map_err(|m| anyhow!(m))?;
    }
    if !(0.1..=86_400.0).contains(&a.window) {
        bail!("--window {} is outside 0.1..=86400 s", a.window);
    }
    if !(1..=10_000).contains(&a.probes) || f64::from(a.probes) / a.window > 100.0 {
        bail!(
            "--probes {}: give 1..=10000 probes per window, at most 100 per second",
            a.probes
        );
    }
    let duration = match a.duration {
        Some(d) if d > 0.0 && d.is_finite() => Some(Duration::from_secs_f64(d)),
        Some(d) => bail!("--duration {d} must be a positive number of seconds"),
        None => None,
    };
    let metrics_listen = match &a.metrics_listen {
        None => None,
        Some(s) => {
            Some(match s.parse::<std::net::SocketAddr>() {
                Ok(a) => a,
                Err(_) => {
                    let port: u16 = s.parse().map_err(|_| {
                    anyhow!("--metrics-listen '{s}': write ADDR:PORT (e.g. 127.0.0.1:9109) or a port")
                })?;
                    std::net::SocketAddr::from(([127, 0, 0, 1], port))
                }
            })
        }
    };
    let (lo, hi) = (
        crate::proto::probe::HEADER_LEN as u16,
        crate::proto::probe::MAX_PAYLOAD,
    );
    if !(lo..=hi).contains(&a.probe_size) {
        bail!("--probe-size {} is outside {lo}..={hi} bytes", a.probe_size);
    }
    if !(0.01..=4096.0).contains(&a.max_file_mib) || !(1..=1000).contains(&a.max_files) {
        bail!("--max-file-mib must be 0.01..=4096 and --max-files 1..=1000");
    }
    Ok(crate::latency::monitor::MonitorConfig {
        responders,
        icmp: a.icmp.clone(),
        window: Duration::from_secs_f64(a.window),
        probes: a.probes,
        duration,
        out: a.out.clone(),
        annotate: a.annotate.clone(),
        annotations: a.annotations.clone(),
        metrics_listen,
        metrics_textfile: a.metrics_textfile.clone(),
        max_file_bytes: (a.max_file_mib * 1048576.0) as u64,
        max_files: a.max_files,
        probe_size: a.probe_size,
        ssh: a.ssh.options()?,
    })
}

/// What loads the path in `linerate latency`'s loaded phase.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadArg {
    /// TCP bulk streams (--streams).
    Tcp,
    /// A UDP packet stream (--rate, --frame-size).
    Udp,
}

#[derive(Args, Debug, Clone)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// The load of the loaded phase.
    #[arg(long, value_enum, default_value = "tcp")]
    pub load: LoadArg,
    /// Seconds of the loaded phase (the idle phases come on top: --idle).
    #[arg(long, short = 't', default_value_t = 10.0)]
    pub duration: f64,
    /// TCP streams of a tcp load.
    #[arg(long, short = 'P', default_value_t = 1)]
    pub streams: u16,
    /// Rate of a udp load: pps (800kpps), L1 bit/s (50M) or % of the line rate. Default: as fast as possible.
    #[arg(long, value_parser = parse_rate_arg)]
    pub rate: Option<Rate>,
    /// Frame size of a udp load (bytes with FCS, or imix).
    #[arg(long, default_value = "1518", value_parser = parse_frame)]
    pub frame_size: FrameSpec,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct UdpArgs {
    #[command(flatten)]
    pub ends: Endpoints,
    /// Frame size in bytes including the 4-byte FCS (64..9000), or `imix` (64/594/1518 at 7:4:1).
    #[arg(long, default_value = "64", value_parser = parse_frame)]
    pub frame_size: FrameSpec,
    /// How flows differ: one, ports (source port varies); var1/var2 need the lab.
    #[arg(long, value_enum, default_value = "one")]
    pub flow_mode: FlowModeArg,
    /// Number of flows.
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// Target rate: packets (1.5Mpps, 800kpps), L1 bit/s (5G, 100M) or % of the line rate (50%).
    /// Default: as fast as possible.
    #[arg(long, value_parser = parse_rate_arg)]
    pub rate: Option<Rate>,
    /// Datagrams per sendmmsg call.
    #[arg(long, default_value_t = 64)]
    pub batch: u16,
    /// How UDP senders put datagrams on the wire: packet (frames built by linerate on an
    /// AF_PACKET socket bypassing the qdisc; root, Ethernet next hop), socket (UDP sockets),
    /// or auto (packet where it can run, else socket, with the reason in the results).
    #[arg(long, value_enum, default_value = "auto")]
    pub tx_engine: TxEngineArg,
    /// Worker threads per side for UDP: each sender thread owns a share of the flows and a
    /// core, receivers spread over SO_REUSEPORT sockets. With --cpus, the list is split:
    /// the first N CPUs for the senders, the next N for the receivers. Default: 1 with
    /// --cpus, else half the CPUs of each agent's host; never more than one per flow.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxEngineArg {
    Auto,
    Socket,
    Packet,
    Xdp,
}

impl From<TxEngineArg> for TxEngine {
    fn from(e: TxEngineArg) -> Self {
        match e {
            TxEngineArg::Auto => TxEngine::Auto,
            TxEngineArg::Socket => TxEngine::Socket,
            TxEngineArg::Packet => TxEngine::Packet,
            TxEngineArg::Xdp => TxEngine::Xdp,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowModeArg {
    One,
    Var1,
    Var2,
    Ports,
}

impl From<FlowModeArg> for FlowMode {
    fn from(f: FlowModeArg) -> Self {
        match f {
            FlowModeArg::One => FlowMode::One,
            FlowModeArg::Var1 => FlowMode::Var1,
            FlowModeArg::Var2 => FlowMode::Var2,
            FlowModeArg::Ports => FlowMode::Ports,
        }
    }
}

/// Where ramps and searches send: a lab built for the run, or endpoints you name.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Build a lab (gen -> DUT -> sink) and test its DUT.
    #[arg(long)]
    pub lab: bool,
    /// With --lab: no DUT, generator and sink back to back (measures the tester).
    #[arg(long)]
    pub back_to_back: bool,
    /// With --lab: what the DUT does.
    #[arg(long, value_enum, default_value = "route")]
    pub dut: DutArg,
    /// With --lab --dut fw: rules in the forward chain.
    #[arg(long, default_value_t = 100)]
    pub fw_rules: u32,
    /// With --lab: random loss the DUT applies, in %.
    #[arg(long, value_name = "PERCENT")]
    pub dut_loss: Option<f64>,
    /// With --lab: police the DUT to this many packets per second (a DUT of known capacity).
    #[arg(long, value_name = "PPS", value_parser = parse_pps_u64)]
    pub dut_police: Option<u64>,
    /// With --lab: shape the DUT's egress towards the sink with tc tbf, RATE[,QUEUE]
    /// (e.g. 20M,50ms): a bufferbloated DUT (see `linerate lab --dut-shape`).
    #[arg(long, value_name = "RATE[,QUEUE]", value_parser = crate::lab::Shape::parse)]
    pub dut_shape: Option<crate::lab::Shape>,
    /// With --lab: test over IPv6.
    #[arg(long)]
    pub ipv6: bool,
    /// Without --lab: where the generator runs (`local`, `ns:NAME` or `ssh://host`).
    #[arg(long, default_value = "local")]
    pub client: String,
    /// Without --lab: where the sink runs (`local`, `ns:NAME` or `ssh://host`).
    #[arg(long, default_value = "local")]
    pub server: String,
    /// Without --lab: the sink's address.
    #[arg(long)]
    pub target: Option<IpAddr>,
    /// Without --lab: the generator's address (needed for --bidir).
    #[arg(long)]
    pub client_address: Option<IpAddr>,
}

/// What to send.
#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// A seed profile: bench-var2-1514b (1518 B frames with FCS), bench-var2-imix,
    /// bench-var2-64b (var2 = source and destination vary), bench (64 B, one flow).
    #[arg(long)]
    pub profile: Option<String>,
    /// Frame size with FCS, or imix (overrides the profile's).
    #[arg(long, value_parser = parse_frame)]
    pub frame_size: Option<FrameSpec>,
    /// How flows differ (overrides the profile's); var1/var2 need --lab.
    #[arg(long, value_enum)]
    pub flow_mode: Option<FlowModeArg>,
    /// Number of flows.
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// Send both directions at once (loss and results per direction).
    #[arg(long)]
    pub bidir: bool,
    /// How UDP senders put datagrams on the wire: packet (frames built by linerate on an
    /// AF_PACKET socket bypassing the qdisc; root, Ethernet next hop), socket (UDP sockets),
    /// or auto (packet where it can run, else socket, with the reason in the results).
    #[arg(long, value_enum, default_value = "auto")]
    pub tx_engine: TxEngineArg,
    /// Worker threads per side for UDP: each sender thread owns a share of the flows and a
    /// core, receivers spread over SO_REUSEPORT sockets. With --cpus, the list is split:
    /// the first N CPUs for the senders, the next N for the receivers. Default: 1 with
    /// --cpus, else half the CPUs of each agent's host; never more than one per flow.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
}

/// Flags of `linerate ramp`.
#[derive(Args, Debug, Clone)]
pub struct RampArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Warmup rate: pps (10kpps), L1 bit/s (100M) or % of the line rate (1%).
    #[arg(long, default_value = "1%", value_parser = parse_rate_arg)]
    pub warmup_rate: Rate,
    /// Warmup seconds.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Rate the ramp ends at: pps, L1 bit/s or % of the line rate.
    #[arg(long, default_value = "100%", value_parser = parse_rate_arg)]
    pub ramp_to: Rate,
    /// Ramp seconds (linear from 0 to --ramp-to).
    #[arg(long, default_value_t = 30.0)]
    pub ramp: f64,
    /// Seconds to hold --ramp-to after the ramp.
    #[arg(long, default_value_t = 5.0)]
    pub hold: f64,
    /// Loss (%) above which a one-second sample counts as lossy.
    #[arg(long, default_value_t = 0.1)]
    pub loss_threshold: f64,
    /// Also write the samples for another tool: `--export trex-loadtest-viz FILE`.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"])]
    pub export: Option<Vec<String>>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodArg {
    /// MLRsearch: NDR and PDR (and any --goal) in one search.
    Mlr,
    /// RFC 2544 throughput: binary search for the highest zero-loss rate.
    Rfc2544,
    /// Both, one after the other.
    Both,
}

/// Flags of `linerate search`.
#[derive(Args, Debug, Clone)]
pub struct SearchArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Frame sizes to search one after the other, e.g. 64,128,256,512,1024,1280,1518,imix.
    #[arg(long, value_delimiter = ',', value_parser = parse_frame)]
    pub sizes: Vec<FrameSpec>,
    #[arg(long, value_enum, default_value = "mlr")]
    pub method: MethodArg,
    /// Lowest rate to try: pps, L1 bit/s or % of the line rate (default 1 kpps, or half of
    /// --max-rate if that is lower).
    #[arg(long, value_parser = parse_rate_arg)]
    pub min_rate: Option<Rate>,
    /// Highest rate to try: pps, L1 bit/s or % of the line rate.
    #[arg(long, default_value = "100%", value_parser = parse_rate_arg)]
    pub max_rate: Rate,
    /// RFC 2544 trial seconds (the RFC asks for 60; shorter is labelled non-compliant).
    #[arg(long, default_value_t = 60.0)]
    pub trial: f64,
    /// RFC 2544: skip the §23 waits around trials (labelled non-compliant).
    #[arg(long)]
    pub no_waits: bool,
    /// RFC 2544 method: loss (%) a trial may have and still pass (RFC 2544 itself
    /// allows none; above 0 the result is a partial drop rate, labelled so).
    #[arg(long, default_value_t = 0.0)]
    pub acceptable_loss: f64,
    /// RFC 2544: also measure the frame loss rate at 100 %, 90 % … of --max-rate.
    #[arg(long)]
    pub frame_loss: bool,
    /// MLRsearch goal NAME=LOSS% (repeatable; default ndr=0 and pdr=0.5).
    #[arg(long = "goal", value_name = "NAME=LOSS%")]
    pub goals: Vec<String>,
    /// MLRsearch: final trial seconds.
    #[arg(long, default_value_t = 1.0)]
    pub final_trial: f64,
    /// MLRsearch: trial seconds summed at a load before it is decided.
    #[arg(long, default_value_t = 21.0)]
    pub duration_sum: f64,
    /// Relative width of the answer, % (MLRsearch goals; RFC 2544 resolution).
    #[arg(long, default_value_t = 0.5)]
    pub width: f64,
    /// MLRsearch: share of trial time allowed to exceed the loss ratio.
    #[arg(long, default_value_t = 0.5)]
    pub exceed_ratio: f64,
    #[command(flatten)]
    pub common: Common,
}

/// Flags of `linerate run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The plan file (TOML): hosts, and the tests between them.
    pub plan: PathBuf,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// Speak the control protocol on stdin/stdout (the only transport).
    #[arg(long, required = true)]
    pub stdio: bool,
    /// Network namespace: `new` (anonymous, dies with the agent) or the name of an existing one.
    #[arg(long)]
    pub netns: Option<String>,
    /// Longest test this agent accepts, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub max_duration: u64,
    /// Highest UDP send rate this agent accepts, in pps (default: no cap).
    #[arg(long)]
    pub max_rate: Option<f64>,
}

// ---------------------------------------------------------------------------
// Stage two: flags → validated configuration.

/// Converts a controller command into its validated configuration.
pub fn to_config(command: Command) -> Result<Cmd> {
    match command {
        Command::Lab(a) => lab_config(&a),
        Command::Tcp(a) => {
            let (pair, spec) = tcp(&a)?;
            Ok(Cmd::Pair(
                pair,
                spec,
                a.common.run_opts(!a.ends.no_results)?,
            ))
        }
        Command::Udp(a) => {
            let (pair, spec) = udp_cmd(&a)?;
            Ok(Cmd::Pair(
                pair,
                spec,
                a.common.run_opts(!a.ends.no_results)?,
            ))
        }
        Command::Latency(a) => {
            let spec = latency_cmd(&a)?;
            bench_command(&a.target, spec, &a.common)
        }
        Command::Ramp(a) => {
            let spec = TestSpec::Ramp(ramp(&a)?);
            bench_command(&a.target, spec, &a.common)
        }
        Command::Search(a) => {
            let spec = TestSpec::Search(search_cfg(&a)?);
            bench_command(&a.target, spec, &a.common)
        }
        Command::Http(a) => {
            let (pair, spec) = crate::cli_http::http_tests(&a)?;
            let opts = a.common.run_opts(!a.no_results)?;
            if a.lab {
                let lab = LabSpec {
                    dut: Some(DutMode::Route),
                    fw_rules: 0,
                    mtu: 1500,
                    dut_loss_pct: None,
                    dut_police_pps: None,
                    rps: Default::default(),
                    dut_shape: None,
                };
                return Ok(Cmd::LabBench(lab, spec, opts));
            }
            Ok(Cmd::Pair(pair, spec, opts))
        }
        Command::Run(_)
        | Command::Serve(_)
        | Command::Doctor(_)
        | Command::Agent(_)
        | Command::Report(_)
        | Command::Monitor(_)
        | Command::Schema => {
            bail!("not a command with a configuration of its own")
        }
    }
}

impl SshArgs {
    pub fn options(&self) -> Result<SshOptions> {
        let options = self
            .ssh_option
            .iter()
            .map(|o| {
                o.split_once('=')
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .filter(|(k, _)| !k.is_empty())
                    .ok_or_else(|| {
                        anyhow!("--ssh-option '{o}': write KEY=VALUE, e.g. --ssh-option Port=2222")
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        if !(1..=300).contains(&self.connect_timeout) {
            bail!(
                "--connect-timeout {} is outside 1..=300 seconds",
                self.connect_timeout
            );
        }
        Ok(SshOptions {
            config: self.ssh_config.clone(),
            options,
            accept_new: self.ssh_accept_new,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            remote_binary: self.remote_binary.clone(),
            push: self.push,
            local_binary: None,
        })
    }
}

impl Common {
    pub fn run_opts(&self, write_results: bool) -> Result<RunOpts> {
        if let Some(cfg) = &self.ssh.ssh_config {
            if !cfg.is_file() {
                bail!(
                    "--ssh-config {}: no such file; name your ssh client configuration file",
                    cfg.display()
                );
            }
        }
        Ok(RunOpts {
            name: self.name.clone(),
            line_rate_bps: self.line_rate,
            results_dir: self.results_dir.clone(),
            write_results,
            json: self.json,
            progress: !self.no_progress,
            allow_target: self.allow_target.clone(),
            cpus: self.cpus.clone().map(|c| c.0).unwrap_or_default(),
            ssh: self.ssh.options()?,
        })
    }
}

fn lab_config(a: &LabArgs) -> Result<Cmd> {
    if a.cleanup {
        return Ok(Cmd::LabCleanup);
    }
    let spec = LabSpec {
        dut: Some(a.dut.into()),
        fw_rules: a.fw_rules,
        mtu: a.mtu,
        dut_loss_pct: a.dut_loss,
        dut_police_pps: a.dut_police,
        rps: crate::lab::CpuSet::receive_side(
            &a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
            a.threads.unwrap_or(0),
        ),
        dut_shape: a.dut_shape,
    };
    let cfg = LabConfig {
        spec,
        ports: crate::lab::ports::PortsSpec::from_flags(&a.port_flags())?,
        quick: a.quick,
        no_search: a.no_search,
        duration_s: a.duration,
        ipv6: a.ipv6,
        direction: a.direction.into(),
        only: a.only.iter().map(|o| o.to_lowercase()).collect(),
        tx_engine: a.tx_engine.into(),
        threads: a.threads.unwrap_or(0),
    };
    Ok(Cmd::Lab(cfg, a.common.run_opts(true)?))
}

fn direction(e: &Endpoints) -> Direction {
    if e.bidir {
        Direction::Both
    } else if e.reverse {
        Direction::Reverse
    } else {
        Direction::Forward
    }
}

fn pair(e: &Endpoints, common: &Common) -> Result<Pair> {
    check_destination(e.target, &common.allow_target).map_err(|m| anyhow!(m))?;
    if let Some(c) = e.client_address {
        check_destination(c, &common.allow_target).map_err(|m| anyhow!(m))?;
    }
    Ok(Pair {
        client: Endpoint::parse(&e.client).map_err(|m| anyhow!("--client: {m:#}"))?,
        server: Endpoint::parse(&e.server).map_err(|m| anyhow!("--server: {m:#}"))?,
        target: e.target,
        client_address: e.client_address,
    })
}

fn duration(s: f64) -> Result<Duration> {
    if !(0.1..=3600.0).contains(&s) {
        bail!("--duration {s} is outside 0.1..=3600 s");
    }
    Ok(Duration::from_secs_f64(s))
}

/// `linerate tcp`: the pair and the test.
pub fn tcp(a: &TcpArgs) -> Result<(Pair, TestSpec)> {
    let pair = pair(&a.ends, &a.common)?;
    if a.streams == 0 || a.streams > 1024 {
        bail!("--streams {} is outside 1..=1024", a.streams);
    }
    let t = TcpTest {
        name: format!(
            "tcp {} stream{}",
            a.streams,
            if a.streams == 1 { "" } else { "s" }
        ),
        ipv6: a.ends.target.is_ipv6(),
        streams: a.streams,
        direction: direction(&a.ends),
        duration: duration(a.ends.duration)?,
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        congestion: a.cc.clone(),
        buffer_len: a.buffer,
        allow: a.common.allow_target.clone(),
    };
    Ok((pair, a.probes.wrap(crate::runner::Load::Tcp(t))?))
}

/// `linerate latency`: the load with probes around it.
pub fn latency_cmd(a: &LatencyArgs) -> Result<TestSpec> {
    let ipv6 = a.target.ipv6 || a.target.target.is_some_and(|t| t.is_ipv6());
    let name = |kind: &str| format!("latency under {kind} load");
    let cpus = a.common.cpus.clone().map(|c| c.0).unwrap_or_default();
    let load = match a.load {
        LoadArg::Tcp => {
            if a.streams == 0 || a.streams > 1024 {
                bail!("--streams {} is outside 1..=1024", a.streams);
            }
            crate::runner::Load::Tcp(TcpTest {
                name: name("tcp"),
                ipv6,
                streams: a.streams,
                direction: Direction::Forward,
                duration: duration(a.duration)?,
                cpus,
                congestion: None,
                buffer_len: 128 * 1024,
                allow: a.common.allow_target.clone(),
            })
        }
        LoadArg::Udp => {
            crate::engine::frame::check_frames(a.frame_size, ipv6).map_err(|m| anyhow!(m))?;
            crate::runner::Load::Udp(UdpTest {
                name: name("udp"),
                ipv6,
                frame: a.frame_size,
                flow_mode: FlowMode::One,
                flows: 1,
                direction: Direction::Forward,
                duration: duration(a.duration)?,
                rate_pps: a.rate.map(|r| {
                    r.pps(
                        crate::engine::frame::average_frame(a.frame_size),
                        a.common.line_rate,
                    )
                }),
                rate_profile: None,
                batch: 64,
                cpus,
                allow: a.common.allow_target.clone(),
                tx_engine: TxEngine::Auto,
                threads: 1,
            })
        }
    };
    let mut probes = a.probes.opts()?;
    if a.target.lab && !a.target.back_to_back {
        probes.client_seen_as = crate::lab::nat_source(Some(a.target.dut.into()));
    }
    Ok(TestSpec::Latency(crate::runner::LatencyTest {
        load,
        probes,
    }))
}

/// `linerate udp`: the pair and the test.
pub fn udp_cmd(a: &UdpArgs) -> Result<(Pair, TestSpec)> {
    let pair = pair(&a.ends, &a.common)?;
    let ipv6 = a.ends.target.is_ipv6();
    crate::engine::frame::check_frames(a.frame_size, ipv6).map_err(|m| anyhow!(m))?;
    let dir = direction(&a.ends);
    if dir != Direction::Forward && a.ends.client_address.is_none() {
        bail!("UDP traffic towards the client needs its address: add --client-address ADDR");
    }
    let rate = a.rate.map(|r| {
        r.pps(
            crate::engine::frame::average_frame(a.frame_size),
            a.common.line_rate,
        )
    });
    let t = UdpTest {
        name: format!("udp {} {:?}", config::frame_name(a.frame_size), a.flow_mode).to_lowercase(),
        ipv6,
        frame: a.frame_size,
        flow_mode: a.flow_mode.into(),
        flows: a.flows.max(1),
        direction: dir,
        duration: duration(a.ends.duration)?,
        rate_pps: rate,
        rate_profile: None,
        batch: a.batch.clamp(1, 1024),
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        allow: a.common.allow_target.clone(),
        tx_engine: a.tx_engine.into(),
        threads: a.threads.unwrap_or(0),
    };
    Ok((pair, a.probes.wrap(crate::runner::Load::Udp(t))?))
}

fn bench(t: &TargetArgs, common: &Common) -> Result<Bench> {
    if t.lab {
        if t.target.is_some() {
            bail!("--lab builds its own endpoints; drop --target (or drop --lab to test endpoints you name)");
        }
        return Ok(Bench::Lab {
            spec: LabSpec {
                dut: (!t.back_to_back).then_some(t.dut.into()),
                fw_rules: t.fw_rules,
                mtu: 1500,
                dut_loss_pct: t.dut_loss,
                dut_police_pps: t.dut_police,
                // Set from the test's stream by `bench_command`.
                rps: Default::default(),
                dut_shape: t.dut_shape,
            },
            ipv6: t.ipv6,
        });
    }
    let target = t.target.ok_or_else(|| {
        anyhow!("say where to send: --target ADDR (with --client/--server), or --lab")
    })?;
    check_destination(target, &common.allow_target).map_err(|m| anyhow!(m))?;
    Ok(Bench::Pair(Pair {
        client: Endpoint::parse(&t.client).map_err(|m| anyhow!("--client: {m:#}"))?,
        server: Endpoint::parse(&t.server).map_err(|m| anyhow!("--server: {m:#}"))?,
        target,
        client_address: t.client_address,
    }))
}

fn bench_command(t: &TargetArgs, spec: TestSpec, common: &Common) -> Result<Cmd> {
    let opts = common.run_opts(true)?;
    Ok(match bench(t, common)? {
        Bench::Lab {
            spec: mut lab,
            ipv6,
        } => {
            let stream = match &spec {
                TestSpec::Ramp(r) => Some(&r.stream),
                TestSpec::Search(s) => Some(&s.stream),
                _ => None,
            };
            if let Some(s) = stream {
                lab.rps = crate::lab::CpuSet::receive_side(&s.cpus, s.threads);
            }
            Cmd::LabBench(lab, with_ipv6(spec, ipv6), opts)
        }
        Bench::Pair(p) => {
            let ipv6 = p.target.is_ipv6();
            Cmd::Pair(p, with_ipv6(spec, ipv6), opts)
        }
    })
}

fn with_ipv6(spec: TestSpec, ipv6: bool) -> TestSpec {
    match spec {
        TestSpec::Ramp(mut r) => {
            r.stream.ipv6 = ipv6;
            TestSpec::Ramp(r)
        }
        TestSpec::Search(mut s) => {
            s.stream.ipv6 = ipv6;
            TestSpec::Search(s)
        }
        TestSpec::Latency(mut l) => {
            match &mut l.load {
                crate::runner::Load::Tcp(t) => t.ipv6 = ipv6,
                crate::runner::Load::Udp(t) => t.ipv6 = ipv6,
            }
            TestSpec::Latency(l)
        }
        other => other,
    }
}

impl ProfileArgs {
    /// The profile these flags describe; `lab` picks the default flow mode.
    pub fn resolve(&self, lab: bool) -> Result<Profile> {
        let mut p = match &self.profile {
            Some(n) => config::seed_profile(n)?,
            None => Profile {
                name: String::new(),
                frame: FrameSpec::Fixed(64),
                flow_mode: if lab { FlowMode::Var2 } else { FlowMode::One },
            },
        };
        if let Some(f) = self.frame_size {
            p.frame = f;
        }
        if let Some(m) = self.flow_mode {
            p.flow_mode = m.into();
        }
        if p.name.is_empty() || self.frame_size.is_some() || self.flow_mode.is_some() {
            p = Profile::custom(p.frame, p.flow_mode);
        }
        Ok(p)
    }
    fn stream(&self, common: &Common) -> Stream {
        Stream {
            flows: self.flows.max(1),
            bidir: self.bidir,
            ipv6: false,
            cpus: common.cpus.clone().map(|c| c.0).unwrap_or_default(),
            allow: common.allow_target.clone(),
            tx_engine: self.tx_engine.into(),
            threads: self.threads.unwrap_or(0),
        }
    }
}

pub fn ramp(a: &RampArgs) -> Result<RampConfig> {
    let p = a.profile.resolve(a.target.lab)?;
    let frame = crate::engine::frame::average_frame(p.frame);
    let spec = search::RampSpec {
        warmup_pps: a.warmup_rate.pps(frame, a.common.line_rate),
        warmup_s: a.warmup,
        target_pps: a.ramp_to.pps(frame, a.common.line_rate),
        ramp_s: a.ramp,
        hold_s: a.hold,
    };
    spec.validate().map_err(|e| anyhow!("{e}"))?;
    if !(0.0..100.0).contains(&a.loss_threshold) {
        bail!(
            "--loss-threshold {} must be a percentage in 0..100",
            a.loss_threshold
        );
    }
    let export_viz = match &a.export {
        None => None,
        Some(ex) => {
            if ex.first().map(String::as_str) != Some("trex-loadtest-viz") {
                bail!("--export knows one format: trex-loadtest-viz (e.g. --export trex-loadtest-viz ramp.json)");
            }
            Some(PathBuf::from(
                ex.get(1).ok_or_else(|| anyhow!("--export needs a file"))?,
            ))
        }
    };
    Ok(RampConfig {
        profile: p,
        stream: a.profile.stream(&a.common),
        spec,
        loss_threshold: a.loss_threshold / 100.0,
        export_viz,
        line_rate_bps: a.common.line_rate,
    })
}

pub fn parse_goal(s: &str, base: &search::MlrGoal) -> Result<search::MlrGoal> {
    let (name, loss) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("--goal '{s}': write NAME=LOSS%, e.g. ndr=0 or pdr=0.5"))?;
    let loss: f64 = loss
        .trim_end_matches('%')
        .parse()
        .map_err(|_| anyhow!("--goal '{s}': the loss must be a percentage, e.g. 0.5"))?;
    Ok(search::MlrGoal {
        name: name.trim().into(),
        loss_ratio: loss / 100.0,
        ..base.clone()
    })
}

pub fn search_cfg(a: &SearchArgs) -> Result<SearchConfig> {
    let p = a.profile.resolve(a.target.lab)?;
    let base = search::MlrGoal {
        final_trial_duration_s: a.final_trial,
        initial_trial_duration_s: a.final_trial.min(1.0),
        duration_sum_s: a.duration_sum,
        relative_width: a.width / 100.0,
        exceed_ratio: a.exceed_ratio,
        ..search::MlrGoal::ndr()
    };
    let goals = if a.goals.is_empty() {
        vec![
            base.clone(),
            search::MlrGoal {
                name: "pdr".into(),
                loss_ratio: 0.005,
                ..base.clone()
            },
        ]
    } else {
        a.goals
            .iter()
            .map(|g| parse_goal(g, &base))
            .collect::<Result<_>>()?
    };
    let profiles = if a.sizes.is_empty() {
        vec![p]
    } else {
        a.sizes
            .iter()
            .map(|&frame| Profile::custom(frame, p.flow_mode))
            .collect()
    };
    Ok(SearchConfig {
        profiles,
        stream: a.profile.stream(&a.common),
        plan: SearchPlan {
            method: match a.method {
                MethodArg::Mlr => Method::Mlr,
                MethodArg::Rfc2544 => Method::Rfc2544,
                MethodArg::Both => Method::Both,
            },
            min_rate: a.min_rate,
            max_rate: a.max_rate,
            goals,
            rfc_trial_s: a.trial,
            rfc_waits: !a.no_waits,
            rfc_acceptable_loss: a.acceptable_loss / 100.0,
            rfc_resolution: a.width / 100.0,
            frame_loss: a.frame_loss,
            cap_pps: None,
        },
        line_rate_bps: a.common.line_rate,
    })
}

pub fn parse_pps_u64(s: &str) -> Result<u64, String> {
    crate::model::units::parse_pps(s).map(|v| v.round() as u64)
}

pub fn parse_bps(s: &str) -> Result<f64, String> {
    crate::model::units::parse_bps(s)
}

fn parse_rate_arg(s: &str) -> Result<Rate, String> {
    Rate::parse(s)
}

pub fn parse_frame(s: &str) -> Result<FrameSpec, String> {
    if s.eq_ignore_ascii_case("imix") {
        return Ok(FrameSpec::Imix);
    }
    let n: u32 = s
        .trim_end_matches('B')
        .trim_end_matches('b')
        .parse()
        .map_err(|_| {
            format!("'{s}' is not a frame size: give bytes (64..9000, FCS included) or imix")
        })?;
    if !(crate::model::units::MIN_FRAME..=crate::model::units::MAX_FRAME).contains(&n) {
        return Err(format!(
            "frame size {n} is outside 64..9000 bytes (FCS included)"
        ));
    }
    Ok(FrameSpec::Fixed(n))
}

/// A validated CPU list (a newtype so clap treats it as one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    parse_cpus(s).map(CpuList)
}

/// Parses `0-3,8,10-11` into CPU numbers.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("'{s}' is not a CPU list: use numbers and ranges like 0,2 or 0-3");
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(&c) = out.iter().find(|&&c| c >= n) {
        return Err(format!(
            "CPU {c} does not exist: this host has CPUs 0-{}",
            n - 1
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus() {
        assert_eq!(parse_cpus("0").unwrap(), vec![0]);
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("100000").unwrap_err().contains("does not exist"));
    }

    #[test]
    fn frames() {
        assert_eq!(parse_frame("64").unwrap(), FrameSpec::Fixed(64));
        assert_eq!(parse_frame("1518B").unwrap(), FrameSpec::Fixed(1518));
        assert_eq!(parse_frame("IMIX").unwrap(), FrameSpec::Imix);
        assert!(parse_frame("63").is_err());
        assert!(parse_frame("jumbo").is_err());
    }

    #[test]
    fn rates() {
        let pps = |s: &str| Rate::parse(s).unwrap().pps(64.0, 10e9);
        assert_eq!(pps("1Mpps"), 1e6);
        assert!((pps("50%") - 7_440_476.19).abs() < 1.0);
        assert!((pps("10G") - 14_880_952.38).abs() < 1.0);
        assert!(Rate::parse("150%").is_err());
        assert!(Rate::parse("lots").is_err());
    }

    #[test]
    fn ssh_options() {
        let cli = Cli::try_parse_from([
            "linerate",
            "tcp",
            "--target",
            "198.18.0.2",
            "--client",
            "ssh://root@198.18.0.1:2222",
            "--ssh-option",
            "Compression=no",
        ])
        .unwrap();
        let Command::Tcp(a) = cli.command else {
            panic!()
        };
        let o = a.common.ssh.options().unwrap();
        assert_eq!(o.options, vec![("Compression".into(), "no".into())]);
        assert!(!o.accept_new && !o.push);
        let (p, _) = tcp(&a).unwrap();
        assert!(matches!(p.client, Endpoint::Ssh(_)));
        let mut bad = a.common.ssh.clone();
        bad.ssh_option = vec!["novalue".into()];
        assert!(bad.options().unwrap_err().to_string().contains("KEY=VALUE"));
    }
}
