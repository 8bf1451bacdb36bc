//! Flag groups shared by several commands (`Common`, `SshArgs`, `Endpoints`,
//! `ProbeArgs`, the value enums) and the conversions they share. Every
//! command file imports this one; it imports none of them.

use super::parse::{parse_bps, parse_cpu_list, parse_host, CpuList, HostAddr};
use crate::model::flows::FlowMode;
use crate::model::stderr::errln;
use crate::orchestrate::config::DutMode;
use crate::orchestrate::config::Endpoint;
use crate::orchestrate::config::SshOptions;
use crate::orchestrate::config::{Pair, RunOpts, TestSpec};
use crate::orchestrate::summary::SummaryOut;
use crate::orchestrate::values::check_destination;
use crate::proto::{Cidr, Direction};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

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

/// Where a run's results go and what it prints while it runs: one set of
/// flags on every command that produces a result (`OUTPUT_FLAGS` names
/// them, and tests/flags.rs holds every such command to it).
#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Print the results document to stdout; the table goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// Where run directories go.
    #[arg(long, value_name = "DIR", default_value = "linerate-results")]
    pub results_dir: PathBuf,
    /// Name of the run (part of its directory name).
    #[arg(long)]
    pub name: Option<String>,
    /// Do not write a results directory.
    #[arg(long)]
    pub no_results: bool,
    /// No live progress line.
    #[arg(long)]
    pub no_progress: bool,
}

impl OutputArgs {
    /// Where a command whose result is a summary (`monitor`, `serve`)
    /// writes it.
    pub fn summary_out(&self) -> SummaryOut {
        SummaryOut {
            results_dir: self.results_dir.clone(),
            name: self.name.clone(),
            write: !self.no_results,
            json: self.json,
        }
    }
}

/// Benchmark matrices on a test command (issue 21): `--sweep KEY=V1,V2`
/// repeats the command once per value (per point of the product of every
/// `--sweep`), each point parsed as if the flag were given that value.
/// `cli::sweep` expands them; nothing else reads these.
#[derive(Args, Debug, Clone, Default)]
pub struct SweepArgs {
    /// Run the test once per value of one of its own flags: KEY is the long flag without
    /// `--` (frame-size or frame_size), the values are separated by commas
    /// (e.g. --sweep frame-size=64,512,1518). Repeatable: the points are the product,
    /// the first --sweep varying slowest. Each point is a test named "<name> key=value ...".
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Vec<String>,
    /// Swept flags whose values move together instead of multiplying (equal counts),
    /// e.g. --zip frame-size,rate. Repeatable, one group each.
    #[arg(long, value_name = "KEY,KEY", requires = "sweep")]
    pub zip: Vec<String>,
    /// Swept flags the report's pivot table shows as rows (comma-separated).
    #[arg(
        long,
        value_name = "KEY,...",
        value_delimiter = ',',
        requires = "sweep"
    )]
    pub rows: Vec<String>,
    /// Swept flags the report's pivot table shows as columns (comma-separated).
    #[arg(
        long,
        value_name = "KEY,...",
        value_delimiter = ',',
        requires = "sweep"
    )]
    pub cols: Vec<String>,
    /// Stop the sweep at the first point that fails (default: record it failed and go on).
    #[arg(long, requires = "sweep")]
    pub fail_fast: bool,
}

/// The flags of [`SweepArgs`], which a sweep point never takes.
pub const SWEEP_FLAGS: [&str; 5] = ["sweep", "zip", "rows", "cols", "fail-fast"];

/// The flags of [`OutputArgs`], as the user types them.
pub const OUTPUT_FLAGS: [&str; 5] = [
    "--json",
    "--results-dir",
    "--name",
    "--no-results",
    "--no-progress",
];

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// L1 line rate (e.g. 10G, 25G, 100G) that rates given in % (--rate 50%, searches'
    /// --max-rate) refer to, default 10G; and "% of line" where the kernel reports no real
    /// speed of the receiving interface (without it, "% of line" on a veth shows -).
    #[arg(long, value_parser = parse_bps)]
    pub line_rate: Option<f64>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Print a line every SECS seconds of each test (what was offered and received in that
    /// slice of the test's clock), on a terminal or not, like iperf3 -i: on stdout, or on
    /// stderr with --json. Replaces the live line. tcp and udp print one a second unless
    /// given -i 0; other commands only when asked. 0.1..3600, or 0 for none.
    #[arg(long, short = 'i', value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub interval: Option<f64>,
    /// Also allow sending to this prefix (outside loopback, 198.18.0.0/15 and 2001:2::/48). Repeatable.
    #[arg(long = "allow-target", value_name = "CIDR")]
    pub allow_target: Vec<Cidr>,
    /// CPUs to pin to: the first for senders, the second for receivers (e.g. 0,1).
    #[arg(long, value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,
    /// A UDP test where no frame arrives passes (e.g. a firewall meant to drop it); without it, 100 % loss fails the test.
    #[arg(long)]
    pub expect_loss: bool,
    #[command(flatten)]
    pub ssh: SshArgs,
}

impl SshArgs {
    pub fn options(&self) -> Result<SshOptions> {
        let options = self
            .ssh_option
            .iter()
            .map(|o| {
                crate::orchestrate::values::option_pair(o).ok_or_else(|| {
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
        let opts = SshOptions {
            config: self.ssh_config.clone(),
            options,
            accept_new: self.ssh_accept_new,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            remote_binary: self.remote_binary.clone(),
            push: self.push,
            local_binary: None,
            untrusted: false,
        };
        opts.check()?;
        Ok(opts)
    }
}

/// The line rate rates in % refer to when `--line-rate` is not given.
pub const DEFAULT_LINE_RATE_BPS: f64 = 10e9;

impl Common {
    /// `--line-rate`, or 10G.
    pub fn line_rate_bps(&self) -> f64 {
        self.line_rate.unwrap_or(DEFAULT_LINE_RATE_BPS)
    }

    /// `--interval`: seconds between interval lines; `None` for none
    /// (`-i 0`, or not given).
    fn lines(&self) -> Result<Option<f64>> {
        match self.interval {
            Some(0.0) => Ok(None),
            Some(s) if !(0.1..=3600.0).contains(&s) => {
                bail!("--interval {s} is outside 0.1..=3600 s; give 0 for no interval lines")
            }
            s => Ok(s),
        }
    }

    /// The width of a tcp or udp test's interval lines, which its agents'
    /// samples divide: `--interval`, else 1 s (also under `-i 0`, where
    /// the samples still make the results' intervals).
    pub fn line_interval(&self) -> Result<Duration> {
        Ok(Duration::from_secs_f64(self.lines()?.unwrap_or(1.0)))
    }

    /// [`Common::run_opts`] for tcp and udp, which print a line per second
    /// unless told otherwise (iperf3's default).
    pub fn run_opts_with_lines(&self) -> Result<RunOpts> {
        let mut o = self.run_opts()?;
        if self.interval.is_none() {
            o.interval_s = Some(1.0);
        }
        Ok(o)
    }

    pub fn run_opts(&self) -> Result<RunOpts> {
        if let Some(cfg) = &self.ssh.ssh_config {
            if !cfg.is_file() {
                bail!(
                    "--ssh-config {}: no such file; name your ssh client configuration file",
                    cfg.display()
                );
            }
        }
        let out = &self.output;
        Ok(RunOpts {
            name: out.name.clone(),
            line_rate_bps: self.line_rate_bps(),
            line_rate_given: self.line_rate.is_some(),
            results_dir: out.results_dir.clone(),
            write_results: !out.no_results,
            json: out.json,
            progress: !out.no_progress,
            interval_s: self.lines()?,
            allow_target: self.allow_target.clone(),
            cpus: self.cpus.clone().map(|c| c.0).unwrap_or_default(),
            expect_loss: self.expect_loss,
            ssh: self.ssh.options()?,
            criteria: Default::default(),
        })
    }
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
    /// Router on a stick: one trunk link, two VLANs (--stick-vlans), routed in XDP.
    Stick,
}

impl From<DutArg> for DutMode {
    fn from(d: DutArg) -> Self {
        match d {
            DutArg::Route => DutMode::Route,
            DutArg::Bridge => DutMode::Bridge,
            DutArg::Nat => DutMode::Nat,
            DutArg::Fw => DutMode::Fw,
            DutArg::Stick => DutMode::Stick,
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
    /// Address of the server the client sends to (e.g. 198.18.0.2, 127.0.0.1), or a host
    /// name (resolved once on this host: IPv4 first, --ipv6 for its IPv6 address).
    /// Not used with `--server iperf3://HOST`, which names the target itself.
    #[arg(long, value_parser = parse_host)]
    pub target: Option<HostAddr>,
    /// With a host name as --target: use its IPv6 address.
    #[arg(long)]
    pub ipv6: bool,
    /// Address of the client, where reverse traffic and latency replies go (default: the
    /// source address the client's agent finds towards --target by a route lookup).
    #[arg(long)]
    pub client_address: Option<IpAddr>,
    /// Where an agent watches the device under test between client and server (`ns:NAME`
    /// or `ssh://[user@]host`): its interface counters are recorded with each test, and UDP
    /// tests read its CPU time per load step (cycles per packet).
    #[arg(long, value_name = "ENDPOINT")]
    pub dut_host: Option<String>,
    /// Seconds to run.
    #[arg(long, short = 't', default_value_t = 10.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration: f64,
    /// The data port: the UDP receiver's or the TCP server's (default: a free one). A test
    /// with several receivers (--bidir, plans with several generators) gives the next ones
    /// PORT+1, PORT+2, ...
    #[arg(long, short = 'p', value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Send from the server to the client instead.
    #[arg(long, short = 'R', conflicts_with = "bidir")]
    pub reverse: bool,
    /// Send both ways at once.
    #[arg(long)]
    pub bidir: bool,
    /// Mark the test's packets with this DSCP (0..63, or cs0..cs7, af11..af43, ef, va, le)
    /// in the IPv4 TOS byte or IPv6 traffic class. UDP receivers count what arrived per DSCP.
    #[arg(long, value_name = "DSCP")]
    pub dscp: Option<crate::proto::Dscp>,
}

/// Latency probes beside a test.
#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Measure latency under this test's load: probes idle before, during and idle after it.
    #[arg(long)]
    pub latency: bool,
    /// Milliseconds between latency probes (default 10).
    #[arg(long, value_name = "MS")]
    pub probe_interval: Option<f64>,
    /// UDP payload bytes per latency probe (48..=1452; default 64).
    #[arg(long, value_name = "BYTES")]
    pub probe_size: Option<u16>,
    /// Seconds of the idle phases before and after the load (default 3).
    #[arg(long, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub idle: Option<f64>,
}

/// The probe flags' defaults.
const PROBE_INTERVAL_MS: f64 = 10.0;
const PROBE_IDLE_S: f64 = 3.0;

impl ProbeArgs {
    /// The probe flags given, by name: on `tcp`/`udp` they need `--latency`.
    fn given(&self) -> Option<&'static str> {
        [
            (self.probe_interval.is_some(), "--probe-interval"),
            (self.probe_size.is_some(), "--probe-size"),
            (self.idle.is_some(), "--idle"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }

    pub fn opts(&self) -> Result<crate::orchestrate::config::ProbeOpts> {
        let probe_interval = self.probe_interval.unwrap_or(PROBE_INTERVAL_MS);
        let probe_size = self
            .probe_size
            .unwrap_or(crate::proto::probe::DEFAULT_PAYLOAD);
        let idle = self.idle.unwrap_or(PROBE_IDLE_S);
        if !(1.0..=10_000.0).contains(&probe_interval) {
            bail!("--probe-interval {probe_interval} is outside 1..=10000 ms");
        }
        let (lo, hi) = (
            crate::proto::probe::HEADER_LEN as u16,
            crate::proto::probe::MAX_PAYLOAD,
        );
        if !(lo..=hi).contains(&probe_size) {
            bail!(
                "--probe-size {probe_size} is outside {lo}..={hi} bytes (a probe's header is {lo})"
            );
        }
        if !(0.0..=600.0).contains(&idle) {
            bail!("--idle {idle} is outside 0..=600 s");
        }
        Ok(crate::orchestrate::config::ProbeOpts {
            interval: Duration::from_secs_f64(probe_interval / 1000.0),
            payload: probe_size,
            idle: Duration::from_secs_f64(idle),
            ..Default::default()
        })
    }

    /// The test itself, or with probes around it when --latency asks.
    pub fn wrap(&self, load: crate::orchestrate::config::Load) -> Result<TestSpec> {
        if !self.latency {
            if let Some(flag) = self.given() {
                bail!("{flag} sets the latency probes, which only --latency sends: add --latency, or drop {flag}");
            }
            return Ok(match load {
                crate::orchestrate::config::Load::Tcp(t) => TestSpec::Tcp(t),
                crate::orchestrate::config::Load::Udp(t) => TestSpec::Udp(t),
            });
        }
        Ok(TestSpec::Latency(crate::orchestrate::config::LatencyTest {
            load,
            probes: self.opts()?,
        }))
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

/// Rules of the fw DUT's forward chain unless `--fw-rules` says.
pub const DEFAULT_FW_RULES: u32 = 100;

/// Flows when a multi-flow mode is chosen and `--flows` is not given.
pub const DEFAULT_FLOWS: u16 = 16;

/// Where a flow mode came from, for the error that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeSource {
    /// `--flow-mode`.
    Flag,
    /// A named profile (`--profile bench` is one flow).
    Profile,
    /// Nobody chose: the command's default.
    Default,
}

/// The flow mode and flow count. `--flows N` with N > 1 is never dropped
/// in silence: with the default mode (one flow) it picks `ports` (the
/// source port varies, which works between any two hosts), and with a
/// one-flow mode that the user chose it is an error naming the flag.
pub fn flows(mode: FlowMode, source: ModeSource, flows: Option<u16>) -> Result<(FlowMode, u16)> {
    match (mode, flows) {
        (_, Some(0)) => bail!("--flows 0: give at least 1 flow"),
        (FlowMode::One, Some(n)) if n > 1 => match source {
            ModeSource::Default => Ok((FlowMode::Ports, n)),
            ModeSource::Flag => bail!(
                "--flows {n} with --flow-mode one: that mode sends a single flow; use \
                 --flow-mode ports (source ports vary; var1/var2 in a lab) or drop --flows"
            ),
            ModeSource::Profile => bail!(
                "--flows {n}: this profile sends a single flow; add --flow-mode ports \
                 (source ports vary; var1/var2 in a lab) or drop --flows"
            ),
        },
        (FlowMode::One, _) => Ok((FlowMode::One, 1)),
        (m, n) => Ok((m, n.unwrap_or(DEFAULT_FLOWS))),
    }
}

pub fn direction(e: &Endpoints) -> Direction {
    if e.bidir {
        Direction::Both
    } else if e.reverse {
        Direction::Reverse
    } else {
        Direction::Forward
    }
}

/// The address a `--target` stands for: the address given, or the one its
/// name resolved to (said on stderr, so the run shows what it used).
pub fn resolve_target(t: &HostAddr, ipv6: bool) -> Result<IpAddr> {
    let a = t.pick(ipv6)?;
    if let Some(name) = &t.name {
        errln!("target {name}: using {a}");
    }
    Ok(a)
}

pub fn pair(e: &Endpoints, common: &Common) -> Result<Pair> {
    let target = e.target.as_ref().ok_or_else(|| {
        anyhow!("--target is required: the address the client sends to (e.g. --target 198.18.0.2)")
    })?;
    let target = resolve_target(target, e.ipv6)?;
    check_destination(target, &common.allow_target).map_err(|m| anyhow!(m))?;
    if let Some(c) = e.client_address {
        check_destination(c, &common.allow_target).map_err(|m| anyhow!(m))?;
    }
    Ok(Pair {
        client: endpoint("--client", &e.client)?,
        server: endpoint("--server", &e.server)?,
        target,
        client_address: e.client_address,
        vlan: None,
        dut: dut_endpoint(e.dut_host.as_deref())?,
    })
}

/// `--dut-host`: the DUT's endpoint, if one is named.
pub fn dut_endpoint(s: Option<&str>) -> Result<Option<Endpoint>> {
    s.map(|s| endpoint("--dut-host", s)).transpose()
}

/// The endpoint `flag` names, checked as far as it can be before anything
/// starts (a named namespace exists, and root to enter it): a mistyped
/// `ns:NAME` is a usage error (exit 2, no results directory), not a run
/// that failed (exit 3).
pub fn endpoint(flag: &str, spec: &str) -> Result<Endpoint> {
    let e = Endpoint::parse(spec).map_err(|m| anyhow!("{flag}: {m:#}"))?;
    e.preflight().map_err(|m| anyhow!("{flag} {spec}: {m:#}"))?;
    Ok(e)
}

pub fn duration(s: f64) -> Result<Duration> {
    if !(0.1..=3600.0).contains(&s) {
        bail!("--duration {s} is outside 0.1..=3600 s");
    }
    Ok(Duration::from_secs_f64(s))
}

/// A number of seconds given to `flag`, within 0.1..=3600.
pub fn secs(flag: &str, s: f64) -> Result<Duration> {
    if !(0.1..=3600.0).contains(&s) {
        bail!("{flag} {s} is outside 0.1..=3600 s");
    }
    Ok(Duration::from_secs_f64(s))
}
