//! `linerate latency`: its flags and the latency-under-load test they describe.

use super::common::{duration, Common, ProbeArgs};
use super::parse::{parse_frame, parse_rate_arg};
use super::target::TargetArgs;
use crate::model::flows::FlowMode;
use crate::model::units::Rate;
use crate::orchestrate::config::TestSpec;
use crate::orchestrate::config::{TcpTest, UdpTest};
use crate::proto::{Direction, FrameSpec, RxEngine, TxEngine};
use anyhow::{anyhow, bail, Result};
use clap::Args;

/// What loads the path in `linerate latency`'s loaded phase.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadArg {
    /// TCP bulk streams (--streams).
    Tcp,
    /// A UDP packet stream (--rate, --frame-size).
    Udp,
}

/// Flags of `linerate latency`.
#[derive(Args, Debug, Clone)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// The load of the loaded phase.
    #[arg(long, value_enum, default_value = "tcp")]
    pub load: LoadArg,
    /// Seconds of the loaded phase (the idle phases come on top: --idle).
    #[arg(long, short = 't', default_value_t = 10.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration: f64,
    /// TCP streams of a tcp load.
    #[arg(long, short = 'P', default_value_t = 1)]
    pub streams: u16,
    /// TCP congestion control of a tcp load (e.g. cubic, reno, bbr): loss-based ones fill
    /// the queues that BBR keeps short, which is what shows bufferbloat. Default: the
    /// kernel's (net.ipv4.tcp_congestion_control).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Rate of the load: a udp load in pps (800kpps), L1 bit/s (50M) or % of the line rate; a
    /// tcp load in bit/s or % (shared by its streams, as `linerate tcp --rate`). `-b` as in
    /// iperf3. Default: as fast as possible.
    #[arg(long, short = 'b', value_parser = parse_rate_arg)]
    pub rate: Option<Rate>,
    /// Frame size of a udp load (bytes with FCS, or imix).
    #[arg(long, default_value = "1518", value_parser = parse_frame)]
    pub frame_size: FrameSpec,
    /// Mark the load's packets and the probes with this DSCP (as `linerate udp --dscp`).
    #[arg(long, value_name = "DSCP")]
    pub dscp: Option<crate::proto::Dscp>,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: super::common::SweepArgs,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

/// The UDP load: one flow of `--frame-size` frames at `--rate`.
fn udp_load(a: &LatencyArgs, ipv6: bool, cpus: Vec<usize>) -> Result<UdpTest> {
    crate::orchestrate::values::check_frames(a.frame_size, ipv6, None).map_err(|m| anyhow!(m))?;
    Ok(UdpTest {
        name: "latency under udp load".into(),
        ipv6,
        frame: a.frame_size,
        flow_mode: FlowMode::One,
        flows: 1,
        direction: Direction::Forward,
        duration: duration(a.duration)?,
        rate_pps: a.rate.map(|r| {
            r.pps(
                crate::orchestrate::values::average_frame(a.frame_size),
                a.common.line_rate_bps(),
            )
        }),
        rate_profile: None,
        batch: 64,
        cpus,
        allow: a.common.allow_target.clone(),
        tx_engine: TxEngine::Auto,
        rx_engine: RxEngine::Auto,
        threads: 1,
        port: 0,
        interval: a.common.line_interval()?,
        omit: std::time::Duration::ZERO,
        dscp: a.dscp,
        max_frames: None,
        vlan: None,
        window: None,
    })
}

/// `linerate latency`: the load with probes around it.
pub fn latency_cmd(a: &LatencyArgs) -> Result<TestSpec> {
    let ipv6 = a.target.ipv6
        || (a.target.target.as_ref())
            .and_then(|t| t.pick(false).ok())
            .is_some_and(|t| t.is_ipv6());
    let name = |kind: &str| format!("latency under {kind} load");
    let cpus = a.common.cpus.clone().map(|c| c.0).unwrap_or_default();
    if a.target.lab && !a.target.back_to_back && a.target.dut == super::common::DutArg::Stick {
        bail!(
            "--lab --dut stick cannot carry latency probes: {}",
            crate::orchestrate::values::socket_reason()
        );
    }
    if let (Some(cc), LoadArg::Udp) = (&a.cc, a.load) {
        bail!("--cc {cc} sets the congestion control of a TCP load, and --load udp has none: use --load tcp, or drop --cc");
    }
    let load = match a.load {
        LoadArg::Tcp => {
            if a.streams == 0 || a.streams > 1024 {
                bail!("--streams {} is outside 1..=1024", a.streams);
            }
            crate::orchestrate::config::Load::Tcp(TcpTest {
                name: name("tcp"),
                ipv6,
                streams: a.streams,
                direction: Direction::Forward,
                duration: duration(a.duration)?,
                cpus,
                congestion: a.cc.clone(),
                buffer_len: super::tcp::DEFAULT_BUFFER,
                allow: a.common.allow_target.clone(),
                port: 0,
                rate_bps: a
                    .rate
                    .map(|r| super::tcp::tcp_rate_bps(r, a.common.line_rate_bps()))
                    .transpose()?,
                interval: a.common.line_interval()?,
                omit: std::time::Duration::ZERO,
                window: None,
                dscp: a.dscp,
                vlan: None,
            })
        }
        LoadArg::Udp => crate::orchestrate::config::Load::Udp(udp_load(a, ipv6, cpus)?),
    };
    let mut probes = a.probes.opts()?;
    if a.target.lab && !a.target.back_to_back {
        probes.client_seen_as = crate::orchestrate::values::nat_source(Some(a.target.dut.into()));
    }
    Ok(TestSpec::Latency(crate::orchestrate::config::LatencyTest {
        load,
        probes,
    }))
}
