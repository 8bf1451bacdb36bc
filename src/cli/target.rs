//! Where ramps, searches and latency runs send (`TargetArgs`: a lab built
//! for the run, or endpoints you name) and what they send (`ProfileArgs`),
//! and the bench command built from them.

use super::common::{Common, DutArg, FlowModeArg, ModeSource, DEFAULT_FW_RULES};
use super::parse::{parse_frame, parse_host, parse_pps_u64, HostAddr};
use crate::model::flows::FlowMode;
use crate::orchestrate::config::LabSpec;
use crate::orchestrate::config::{self, Bench, Command as Cmd, Pair, Profile, Stream, TestSpec};
use crate::orchestrate::values::check_destination;
use crate::proto::FrameSpec;
use crate::proto::{RxEngine, TxEngine};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::net::IpAddr;

/// Where ramps and searches send: a lab built for the run, or endpoints you name.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Tag the UDP frames with VLAN ID (1..4094) or QinQ OUTER.INNER on both ends of a
    /// --target pair, as `linerate udp --vlan` does.
    #[arg(long, value_name = "ID[.INNER]", value_parser = super::udp::parse_vlan, conflicts_with = "lab")]
    pub vlan: Option<crate::proto::Vlan>,
    /// Build a lab (gen -> DUT -> sink) and test its DUT.
    #[arg(long)]
    pub lab: bool,
    /// With --lab: no DUT, generator and sink back to back (measures the tester).
    #[arg(long, requires = "lab")]
    pub back_to_back: bool,
    /// With --lab: what the DUT does.
    #[arg(long, value_enum, default_value = "route", requires = "lab")]
    pub dut: DutArg,
    /// With --lab --dut fw: rules in the forward chain (default 100).
    #[arg(long, value_name = "N", requires = "lab")]
    pub fw_rules: Option<u32>,
    /// With --lab: random loss the DUT applies, in %.
    #[arg(long, value_name = "PERCENT", requires = "lab")]
    pub dut_loss: Option<f64>,
    /// With --lab: police the DUT to this many packets per second (a DUT of known capacity).
    #[arg(long, value_name = "PPS", value_parser = parse_pps_u64, requires = "lab")]
    pub dut_police: Option<u64>,
    /// With --lab: shape the DUT's egress towards the sink with tc tbf, RATE[,QUEUE]
    /// (e.g. 20M,50ms): a bufferbloated DUT (see `linerate lab --dut-shape`).
    #[arg(long, value_name = "RATE[,QUEUE]", value_parser = crate::orchestrate::config::Shape::parse, requires = "lab")]
    pub dut_shape: Option<crate::orchestrate::config::Shape>,
    /// With --lab: test over IPv6. Without: use the IPv6 address of a --target host name.
    #[arg(long)]
    pub ipv6: bool,
    /// Without --lab: where the generator runs (`local`, `ns:NAME` or `ssh://host`).
    #[arg(long, default_value = "local", conflicts_with = "lab")]
    pub client: String,
    /// Without --lab: where the sink runs (`local`, `ns:NAME` or `ssh://host`).
    #[arg(long, default_value = "local", conflicts_with = "lab")]
    pub server: String,
    /// Without --lab: the sink's address, or a host name (resolved once, IPv4 first).
    #[arg(long, value_parser = parse_host)]
    pub target: Option<HostAddr>,
    /// Without --lab: where an agent watches the device under test (`ns:NAME` or
    /// `ssh://host`): its counters with each step, and its CPU time per load step.
    #[arg(long, value_name = "ENDPOINT", conflicts_with = "lab")]
    pub dut_host: Option<String>,
    /// Without --lab: the generator's address, where reverse traffic and latency replies go
    /// (default: the source address its agent finds towards --target by a route lookup).
    #[arg(long, conflicts_with = "lab")]
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
    /// Number of flows (default 16 in a multi-flow mode). With the default mode of one flow
    /// (no --profile, no --flow-mode, no --lab), --flows N (N > 1) means --flow-mode ports.
    #[arg(long, value_name = "N")]
    pub flows: Option<u16>,
    /// Send both directions at once (loss and results per direction).
    #[arg(long)]
    pub bidir: bool,
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
}

pub fn bench(t: &TargetArgs, common: &Common) -> Result<Bench> {
    if t.lab {
        if t.target.is_some() {
            bail!("--lab builds its own endpoints; drop --target (or drop --lab to test endpoints you name)");
        }
        if let Some(n) = t.fw_rules {
            if t.dut != DutArg::Fw || t.back_to_back {
                bail!(
                    "--fw-rules {n} sets the rules of the fw DUT: add --dut fw, or drop --fw-rules"
                );
            }
        }
        return Ok(Bench::Lab {
            spec: LabSpec {
                dut: (!t.back_to_back).then_some(t.dut.into()),
                fw_rules: t.fw_rules.unwrap_or(DEFAULT_FW_RULES),
                mtu: 1500,
                queues: 1,
                dut_loss_pct: t.dut_loss,
                dut_police_pps: t.dut_police,
                // Set from the test's stream by `bench_command`.
                rps: Default::default(),
                senders: Default::default(),
                dut_shape: t.dut_shape,
                dut_netem: None,
                dut_remark: None,
                stick_vlans: crate::orchestrate::values::DEFAULT_STICK_VLANS,
                dut_vm: None,
                dut_bond: false,
            },
            ipv6: t.ipv6,
        });
    }
    let target = t.target.as_ref().ok_or_else(|| {
        anyhow!("say where to send: --target ADDR (with --client/--server), or --lab")
    })?;
    let target = super::common::resolve_target(target, t.ipv6)?;
    check_destination(target, &common.allow_target).map_err(|m| anyhow!(m))?;
    Ok(Bench::Pair(Pair {
        client: super::common::endpoint("--client", &t.client)?,
        server: super::common::endpoint("--server", &t.server)?,
        target,
        client_address: t.client_address,
        vlan: t.vlan,
        dut: super::common::dut_endpoint(t.dut_host.as_deref())?,
    }))
}

pub fn bench_command(t: &TargetArgs, spec: TestSpec, common: &Common) -> Result<Cmd> {
    let opts = common.run_opts()?;
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
                lab.rps = crate::orchestrate::config::CpuSet::receive_side(&s.cpus, s.threads);
                lab.senders = crate::orchestrate::config::CpuSet::senders(&s.cpus, s.threads);
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
                crate::orchestrate::config::Load::Tcp(t) => t.ipv6 = ipv6,
                crate::orchestrate::config::Load::Udp(t) => t.ipv6 = ipv6,
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
        let source = match (self.flow_mode, &self.profile) {
            (Some(m), _) => {
                p.flow_mode = m.into();
                ModeSource::Flag
            }
            (None, Some(_)) => ModeSource::Profile,
            (None, None) => ModeSource::Default,
        };
        let mode = super::common::flows(p.flow_mode, source, self.flows)?.0;
        if mode != p.flow_mode {
            p.flow_mode = mode;
            p.name = String::new();
        }
        if p.name.is_empty() || self.frame_size.is_some() || self.flow_mode.is_some() {
            p = Profile::custom(p.frame, p.flow_mode);
        }
        Ok(p)
    }
    /// The stream these flags describe. In the lab, senders are pinned to
    /// the first CPUs even without `--cpus` ([`crate::lab::cores`]).
    pub fn stream(&self, common: &Common, lab: bool) -> Stream {
        let flows = self.flows.unwrap_or(super::common::DEFAULT_FLOWS);
        let mut cpus = common.cpus.clone().map(|c| c.0).unwrap_or_default();
        if lab && cpus.is_empty() {
            cpus = crate::orchestrate::values::default_cpus();
        }
        Stream {
            flows: flows.max(1),
            bidir: self.bidir,
            ipv6: false,
            cpus,
            allow: common.allow_target.clone(),
            tx_engine: self.tx_engine,
            rx_engine: self.rx_engine,
            threads: self.threads.unwrap_or(0),
        }
    }
}
