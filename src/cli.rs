//! Command-line flags (stage one: close to what the user typed) and their
//! conversion into validated settings (stage two).

use crate::lab::DutMode;
use crate::proto::{Cidr, Direction, FrameSpec};
use crate::results::FlowMode;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

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
    /// TCP bulk test between two endpoints you name.
    Tcp(TcpArgs),
    /// UDP packet-stream test between two endpoints you name.
    Udp(UdpArgs),
    /// Load ramp (warmup, linear ramp, hold) with the saturation point, trex-loadtest style.
    Ramp(crate::loadtest::RampArgs),
    /// Throughput search: MLRsearch NDR/PDR, RFC 2544 throughput and frame loss.
    Search(crate::loadtest::SearchArgs),
    /// Explain likely bottlenecks of this host from sysfs/procfs evidence.
    Doctor(linerate_doctor::DoctorArgs),
    /// Run as an agent speaking the control protocol on stdin/stdout (started by the controller).
    Agent(AgentArgs),
    /// Write the HTML report (or CSV / Prometheus exports) of one or more run directories.
    Report(crate::report::ReportArgs),
    /// Print the JSON Schema of results.json.
    Schema,
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
}

#[derive(Args, Debug, Clone)]
pub struct LabArgs {
    /// What the DUT namespace does with the traffic.
    #[arg(long, value_enum, default_value = "route")]
    pub dut: DutMode,
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
    /// Run only the suite's tests whose names contain this text (case-insensitive; repeatable),
    /// e.g. --only "udp 64B" --only "tcp 1".
    #[arg(long, value_name = "TEXT")]
    pub only: Vec<String>,
    /// Physical port for the generator: moved into the gen namespace for the run and given
    /// back in its old state after. The DUT is then the external box the ports are cabled to
    /// (so --dut and its impairments do not apply).
    #[arg(long, value_name = "IF", requires = "sink_port",
          conflicts_with_all = ["dut", "fw_rules", "dut_loss", "dut_police"])]
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
    /// Where the client/generator runs: `local` (this namespace) or `ns:NAME` (an existing `ip netns`).
    #[arg(long, default_value = "local")]
    pub client: String,
    /// Where the server/sink runs: `local` or `ns:NAME`.
    #[arg(long, default_value = "local")]
    pub server: String,
    /// Address of the server the client sends to (e.g. 198.18.0.2 or 127.0.0.1).
    #[arg(long)]
    pub target: std::net::IpAddr,
    /// Address of the client, needed as the target of reverse UDP traffic.
    #[arg(long)]
    pub client_address: Option<std::net::IpAddr>,
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
    #[arg(long)]
    pub rate: Option<String>,
    /// Datagrams per sendmmsg call.
    #[arg(long, default_value_t = 64)]
    pub batch: u16,
    #[command(flatten)]
    pub common: Common,
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

pub fn parse_pps_u64(s: &str) -> Result<u64, String> {
    crate::units::parse_pps(s).map(|v| v.round() as u64)
}

pub fn parse_bps(s: &str) -> Result<f64, String> {
    crate::units::parse_bps(s)
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
    if !(crate::units::MIN_FRAME..=crate::units::MAX_FRAME).contains(&n) {
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

/// Resolves `--rate` into pps for frames of `avg_frame` bytes.
pub fn parse_rate(s: &str, avg_frame: f64, line_rate_bps: f64) -> Result<f64, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let pct: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a percentage"))?;
        if !(pct > 0.0 && pct <= 100.0) {
            return Err(format!(
                "'{s}': a share of the line rate must be in (0, 100] %"
            ));
        }
        return Ok(crate::units::line_rate_pps(line_rate_bps, avg_frame) * pct / 100.0);
    }
    if t.to_ascii_lowercase().ends_with("pps") {
        return crate::units::parse_pps(t);
    }
    crate::units::parse_bps(t)
        .map(|bps| bps / ((avg_frame + f64::from(crate::units::L1_OVERHEAD)) * 8.0))
        .map_err(|_| format!("'{s}' is not a rate: use 1.5Mpps, 5G (L1 bit/s) or 50%"))
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
        assert_eq!(parse_rate("1Mpps", 64.0, 10e9).unwrap(), 1e6);
        let half = parse_rate("50%", 64.0, 10e9).unwrap();
        assert!((half - 7_440_476.19).abs() < 1.0);
        let g = parse_rate("10G", 64.0, 10e9).unwrap();
        assert!((g - 14_880_952.38).abs() < 1.0);
        assert!(parse_rate("150%", 64.0, 10e9).is_err());
        assert!(parse_rate("lots", 64.0, 10e9).is_err());
    }
}
