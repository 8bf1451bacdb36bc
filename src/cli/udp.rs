//! `linerate udp`: its flags and the test they describe.

use super::common::{
    direction, duration, flows, pair, Common, Endpoints, FlowModeArg, ModeSource, ProbeArgs,
};
use super::parse::{parse_frame, parse_rate_arg};
use crate::model::flows::FlowMode;
use crate::model::units::Rate;
use crate::orchestrate::config::UdpTest;
use crate::orchestrate::config::{self, Pair, TestSpec};
use crate::proto::{FrameSpec, Vlan};
use crate::proto::{RxEngine, TxEngine};
use anyhow::{anyhow, bail, Result};
use clap::Args;

/// Flags of `linerate udp`.
#[derive(Args, Debug, Clone)]
pub struct UdpArgs {
    #[command(flatten)]
    pub ends: Endpoints,
    /// Frame size in bytes including the 4-byte FCS (64..9000), or `imix` (64/594/1518 at 7:4:1).
    #[arg(long, default_value = "64", value_parser = parse_frame)]
    pub frame_size: FrameSpec,
    /// How flows differ: one (the default), ports (source port varies); var1/var2 need the
    /// lab's flow prefixes.
    #[arg(long, value_enum)]
    pub flow_mode: Option<FlowModeArg>,
    /// Number of flows (default 16 in a multi-flow mode). Without --flow-mode, --flows N
    /// (N > 1) sends N flows with --flow-mode ports.
    #[arg(long, value_name = "N")]
    pub flows: Option<u16>,
    /// Target rate: packets (1.5Mpps, 800kpps), L1 bit/s (5G, 100M) or % of the line rate (50%);
    /// a bit rate or % is said in pps at the frame size when the test starts. `-b` as in
    /// iperf3. Default: as fast as possible.
    #[arg(long, short = 'b', value_parser = parse_rate_arg)]
    pub rate: Option<Rate>,
    /// Datagrams per sendmmsg call.
    #[arg(long, default_value_t = 64)]
    pub batch: u16,
    /// How UDP senders put datagrams on the wire: live (frames written by an XDP program
    /// and sent with BPF live frames; kernel >= 5.18, root, native XDP, a veth peer with
    /// GRO or XDP), packet (frames built by linerate on an AF_PACKET socket bypassing the
    /// qdisc; root, Ethernet next hop), xdp (AF_XDP), socket (UDP sockets), or auto (live,
    /// else packet, else socket, with the reasons in the results).
    #[arg(long, value_parser = super::parse::tx_engine(), default_value = "auto")]
    pub tx_engine: TxEngine,
    /// How UDP receivers count datagrams: xdp (an XDP program on the receiving interface
    /// counts linerate frames per flow and drops them before the stack; root, native XDP,
    /// e.g. veth), socket (UDP sockets with recvmmsg), or auto (xdp where it attaches, else
    /// socket, with the reason in the results).
    #[arg(long, value_parser = super::parse::rx_engine(), default_value = "auto")]
    pub rx_engine: RxEngine,
    /// Worker threads per side for UDP: each sender thread owns a share of the flows and a
    /// core, receivers spread over SO_REUSEPORT sockets. With --cpus, the list is split:
    /// the first N CPUs for the senders, the next N for the receivers. Default: 1 with
    /// --cpus, else half the CPUs of each agent's host; never more than one per flow.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Send for SECS seconds more at the start and leave them out of the totals (iperf3 -O):
    /// their interval lines say "(omitted)"; the test runs -t after them. Against an
    /// iperf3:// server, both ends' totals.
    #[arg(long, short = 'O', value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub omit: Option<f64>,
    /// Tag the test's frames with VLAN ID (1..4094), or QinQ with OUTER.INNER (100.200:
    /// 802.1ad outer, 802.1Q inner) on both ends. Frame-building engines (packet, xdp)
    /// write the tags; socket engines send and receive through a VLAN sub-interface
    /// linerate creates and removes (802.1Q in the kernel). Tags count in --frame-size.
    #[arg(long, value_name = "ID[.INNER]", value_parser = parse_vlan)]
    pub vlan: Option<Vlan>,
    /// SO_SNDBUF/SO_RCVBUF of linerate's UDP sockets (as iperf3 -w; socket engines only: auto
    /// picks them); the results say what the kernel gave.
    #[arg(long, short = 'w', value_name = "SIZE", value_parser = super::parse::parse_window)]
    pub window: Option<u32>,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: super::common::SweepArgs,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

pub(crate) fn parse_vlan(s: &str) -> Result<Vlan, crate::proto::vlan::VlanError> {
    s.parse()
}

/// `linerate udp`: the pair and the test.
pub fn udp_cmd(a: &UdpArgs) -> Result<(Pair, TestSpec)> {
    let mut pair = pair(&a.ends, &a.common)?;
    pair.vlan = a.vlan;
    let ipv6 = pair.target.is_ipv6();
    crate::orchestrate::values::check_frames(a.frame_size, ipv6, a.vlan).map_err(|m| anyhow!(m))?;
    if a.vlan.is_some() && a.ends.server.starts_with("iperf3://") {
        bail!(
            "--vlan applies to linerate's own ends; an iperf3 server sends and receives \
             through its host's own interfaces: put it on a VLAN sub-interface there and \
             leave --vlan out"
        );
    }
    let dir = direction(&a.ends);
    let (tx_engine, rx_engine) =
        crate::orchestrate::values::window_engines(a.window, a.tx_engine, a.rx_engine)
            .map_err(|e| anyhow!(e))?;
    let rate = a.rate.map(|r| {
        r.pps(
            crate::orchestrate::values::average_frame(a.frame_size),
            a.common.line_rate_bps(),
        )
    });
    let (flow_mode, flows) = match a.flow_mode {
        Some(m) => flows(m.into(), ModeSource::Flag, a.flows)?,
        None => flows(FlowMode::One, ModeSource::Default, a.flows)?,
    };
    let t = UdpTest {
        name: format!("udp {} {:?}", config::frame_name(a.frame_size), flow_mode).to_lowercase(),
        ipv6,
        frame: a.frame_size,
        flow_mode,
        flows,
        direction: dir,
        duration: duration(a.ends.duration)?,
        rate_pps: rate,
        rate_profile: None,
        batch: a.batch.clamp(1, 1024),
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        allow: a.common.allow_target.clone(),
        tx_engine,
        rx_engine,
        threads: a.threads.unwrap_or(0),
        port: a.ends.port.unwrap_or(0),
        interval: a.common.line_interval()?,
        omit: std::time::Duration::from_secs_f64(super::parse::omit_secs(a.omit)?),
        dscp: a.ends.dscp,
        max_frames: None,
        vlan: a.vlan,
        window: a.window,
    };
    Ok((
        pair,
        a.probes.wrap(crate::orchestrate::config::Load::Udp(t))?,
    ))
}
