//! The throwaway lab: generator, DUT and sink network namespaces joined by
//! veth pairs, addressed from the benchmarking ranges, the DUT forwarding as a
//! router, bridge, NAT or firewall, or as a router on a stick between two
//! VLANs on one trunk ([`stick`], with a switch namespace of its own).
//!
//! Each namespace is anonymous and held only by its agent process, so the lab
//! cannot outlive its agents: when they exit (clean stop, Ctrl-C, or the
//! controller killed with SIGKILL) the kernel removes the namespaces and every
//! veth in them. Nothing is ever created in the caller's own namespace.

pub mod bond;
pub mod cores;
mod error;
pub mod netem;
pub mod ports;
pub mod rules;
pub mod stick;
mod veth;
pub mod vmdut;

use crate::model::error::Context;
use crate::model::lab::{LabInterface, LabLink, LabNode, LabTopology};
use crate::netops::{self, mac_string};
use crate::proto::{NetOp, Request, Response};
pub use crate::topology::Addressing;
use crate::topology::Fleet;
pub use error::LabError;
use error::{fail, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;
pub use veth::build;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DutMode {
    /// Linux routes between two subnets.
    Route,
    /// Linux bridges the two links.
    Bridge,
    /// Routes and masquerades (nftables) towards the sink.
    Nat,
    /// Routes through an nftables forward chain of N rules, the last matching.
    Fw,
    /// Router on a stick: one trunk link into a switch, two VLANs, routed
    /// by an XDP program ([`stick`]).
    Stick,
}

impl DutMode {
    pub fn name(self) -> &'static str {
        match self {
            DutMode::Route => "route",
            DutMode::Bridge => "bridge",
            DutMode::Nat => "nat",
            DutMode::Fw => "fw",
            DutMode::Stick => "stick",
        }
    }
}

/// What to build: `dut: None` is the back-to-back tester self-test.
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    pub dut: Option<DutMode>,
    pub fw_rules: u32,
    pub mtu: u32,
    /// Tx and rx queues of every veth the lab creates ([`QUEUES`]); each
    /// rx queue has a NAPI of its own.
    pub queues: u32,
    /// Random loss the DUT applies to forwarded packets, in %.
    pub dut_loss_pct: Option<f64>,
    /// Forwarding capacity the DUT is policed to, packets per second.
    pub dut_police_pps: Option<u64>,
    /// CPUs the lab steers receive work to (RPS on its interfaces), so it
    /// lands on other cores than the pinned senders; empty: left alone.
    pub rps: CpuSet,
    /// CPUs the tests pin their senders to (empty: not pinned); with `rps`
    /// it decides the core layout ([`cores`]).
    pub senders: CpuSet,
    /// A token bucket on the DUT's egress towards the sink (a bottleneck
    /// with a queue: a bufferbloated DUT on purpose).
    pub dut_shape: Option<Shape>,
    /// The DUT rewrites the DSCP of what it forwards (`--dut-remark`).
    pub dut_remark: Option<rules::Remark>,
    /// Delay, jitter and reordering on both of the DUT's egresses
    /// (`--dut-delay`, `--dut-jitter`, `--dut-reorder`: tc netem).
    pub dut_netem: Option<netem::Netem>,
    /// The stick DUT's VLANs: A (the generator's), B (the sink's).
    pub stick_vlans: (u16, u16),
    /// Run the DUT in a VM with its own kernel ([`vmdut`]), not in a
    /// namespace of this host's.
    pub dut_vm: Option<Box<crate::vm::VmSpec>>,
    /// The VM DUT's gen side is an 802.3ad bond of two NICs
    /// (`--dut-bond`, [`bond`]).
    pub dut_bond: bool,
}

/// How many tx and rx queues a lab veth may have (`--queues`).
pub const QUEUES: std::ops::RangeInclusive<u32> = 1..=16;

/// Why `--queues N` cannot be built, or `None`: the message names the
/// range and the reason for its cap.
pub fn queues_error(n: u32) -> Option<String> {
    if QUEUES.contains(&n) {
        return None;
    }
    Some(format!(
        "--queues {n}: a lab veth takes {}..={} tx and rx queues. Every veth has at least one \
         queue, and each rx queue adds a NAPI kernel thread on the lab's few cores, so more \
         than {} spread nothing further; give a count in that range",
        QUEUES.start(),
        QUEUES.end(),
        QUEUES.end()
    ))
}

/// The stick DUT's VLANs unless `--stick-vlans` says otherwise.
pub const DEFAULT_STICK_VLANS: (u16, u16) = (10, 20);

/// A set of CPUs (0..1024) as plain data, so a [`LabSpec`] stays `Copy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuSet([u64; 16]);

impl CpuSet {
    pub fn of(cpus: &[usize]) -> CpuSet {
        let mut s = CpuSet::default();
        for &c in cpus.iter().filter(|&&c| c < 1024) {
            s.0[c / 64] |= 1 << (c % 64);
        }
        s
    }
    pub fn cpus(&self) -> Vec<usize> {
        (0..1024)
            .filter(|&c| self.0[c / 64] & (1 << (c % 64)) != 0)
            .collect()
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// The CPUs the senders are pinned to when UDP senders run `threads`
    /// workers on `cpus`: the first N given (empty: not pinned).
    pub fn senders(cpus: &[usize], threads: u16) -> CpuSet {
        let n = usize::from(threads.max(1)).min(cpus.len());
        CpuSet::of(&cpus[..n])
    }

    /// Where receive work should go when UDP senders run `threads` workers
    /// (0: each agent's choice) on `cpus` (empty: none given): the CPUs of
    /// this host the senders are not pinned to. Empty when the senders are
    /// not pinned (one unpinned worker) or no CPU is left over.
    pub fn receive_side(cpus: &[usize], threads: u16) -> CpuSet {
        let Ok(allowed) = crate::sys::allowed_cpus() else {
            return CpuSet::default();
        };
        let senders: Vec<usize> = if !cpus.is_empty() {
            let n = usize::from(threads.max(1)).min(cpus.len());
            cpus[..n].to_vec()
        } else {
            let n = if threads > 0 {
                usize::from(threads)
            } else {
                allowed.len() / 2
            };
            if n <= 1 {
                return CpuSet::default();
            }
            allowed.iter().copied().take(n).collect()
        };
        let rest: Vec<usize> = allowed
            .into_iter()
            .filter(|c| !senders.contains(c))
            .collect();
        CpuSet::of(&rest)
    }
}

/// Where the NAT DUT masquerades the generator's traffic to (its sink-side
/// addresses, IPv4 and IPv6): the source a latency responder on the sink
/// sees. `None` for other modes.
pub fn nat_source(mode: Option<DutMode>) -> Option<(IpAddr, IpAddr)> {
    (mode == Some(DutMode::Nat)).then(|| routed().gw_sink)
}

/// `--dut-shape RATE[,QUEUE]`: tc tbf on the DUT's sink-side egress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub rate_bps: u64,
    /// The queue (tbf limit), bytes.
    pub queue_bytes: u32,
}

/// Why `--dut-shape` could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    #[error(transparent)]
    NotRate(#[from] crate::model::units::RateError),
    #[error("--dut-shape rate {0}: give 8k..400G bit/s")]
    Rate(String),
    #[error("--dut-shape queue '{0}': give bytes (125000, 64k, 1M) or a time (50ms)")]
    Queue(String),
    #[error("--dut-shape queue of {0} B: give at least one frame (1514 B) and at most 1 GiB")]
    QueueSize(u64),
}

impl Shape {
    /// The token bucket: 1 ms at the rate, at least four full frames
    /// (tbf needs at least one MTU, and a little slack keeps the rate).
    pub fn burst_bytes(&self) -> u32 {
        ((self.rate_bps / 8 / 1000) as u32).max(4 * 1514)
    }
    /// How long a full queue takes to drain: the delay it adds, seconds.
    pub fn queue_delay_s(&self) -> f64 {
        f64::from(self.queue_bytes) * 8.0 / self.rate_bps as f64
    }
    pub fn describe(&self) -> String {
        format!(
            "tbf {:.1} Mbit/s, queue {} B ({:.1} ms when full), burst {} B",
            self.rate_bps as f64 / 1e6,
            self.queue_bytes,
            self.queue_delay_s() * 1e3,
            self.burst_bytes()
        )
    }

    /// Parses `RATE[,QUEUE]`: RATE in bit/s (20M, 1G), QUEUE in bytes
    /// (125000, 64k, 1M) or as a time at the rate (50ms). The default
    /// queue holds 100 ms.
    pub fn parse(s: &str) -> std::result::Result<Shape, ShapeError> {
        let (rate, queue) = match s.split_once(',') {
            Some((r, q)) => (r, Some(q.trim())),
            None => (s, None),
        };
        let rate_bps = crate::model::units::parse_bps(rate.trim())? as u64;
        if !(8_000..=400_000_000_000).contains(&rate_bps) {
            return Err(ShapeError::Rate(rate.to_string()));
        }
        let bytes_at = |secs: f64| (rate_bps as f64 / 8.0 * secs) as u64;
        let queue = match queue {
            None => bytes_at(0.1),
            Some(q) => {
                let lower = q.to_ascii_lowercase();
                let num = |t: &str| {
                    t.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite() && *v > 0.0)
                        .ok_or_else(|| ShapeError::Queue(q.to_string()))
                };
                if let Some(ms) = lower.strip_suffix("ms") {
                    bytes_at(num(ms)? / 1000.0)
                } else if let Some(k) = lower.strip_suffix('k') {
                    (num(k)? * 1024.0) as u64
                } else if let Some(m) = lower.strip_suffix('m') {
                    (num(m)? * 1048576.0) as u64
                } else {
                    num(&lower)? as u64
                }
            }
        };
        if !(1514..=1 << 30).contains(&queue) {
            return Err(ShapeError::QueueSize(queue));
        }
        Ok(Shape {
            rate_bps,
            queue_bytes: queue as u32,
        })
    }
}

pub struct Lab {
    pub fleet: Fleet,
    pub gen: usize,
    pub sink: usize,
    pub dut: Option<usize>,
    /// The stick DUT's switch, or a VM DUT's vmnet namespace (its bridges
    /// and taps): watched with the DUT (its drops are the DUT side's, not
    /// the tester's: a tap that the guest does not empty drops there).
    pub switch: Option<usize>,
    pub gen_addr: Addressing,
    pub sink_addr: Addressing,
    pub topology: LabTopology,
}

const MAC_GEN0: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x01];
const MAC_DUT0: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x02];
const MAC_DUT1: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x03];
const MAC_SINK0: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x04];
/// The vmnet namespace's ends of the veths towards gen and the sink.
const MAC_HV0: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x05];
const MAC_HV1: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x06];

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}
fn v6(s: u16, h: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, s, 0, 0, 0, h))
}

/// The devices whose NAPI threads the core layout pinned (those without
/// get RPS instead).
fn pinned_devs(cores: Option<&crate::model::lab::LabCores>) -> Vec<String> {
    cores
        .iter()
        .flat_map(|c| &c.napi)
        .filter(|n| n.error.is_none() && !n.cpus.is_empty())
        .map(|n| n.dev.clone())
        .collect()
}

/// A routed lab's host addresses, IPv4 and IPv6: gen and the sink on their
/// own subnets (198.18.0.0/24 and 198.19.0.0/24, 2001:2:0:10::/64 and
/// 2001:2:0:20::/64), and the DUT's address on each, their gateway.
struct Routed {
    gen: (IpAddr, IpAddr),
    sink: (IpAddr, IpAddr),
    gw_gen: (IpAddr, IpAddr),
    gw_sink: (IpAddr, IpAddr),
}

fn routed() -> Routed {
    Routed {
        gen: (v4(198, 18, 0, 1), v6(0x10, 1)),
        sink: (v4(198, 19, 0, 1), v6(0x20, 1)),
        gw_gen: (v4(198, 18, 0, 254), v6(0x10, 0xfe)),
        gw_sink: (v4(198, 19, 0, 254), v6(0x20, 0xfe)),
    }
}

struct Node {
    ops: Vec<NetOp>,
    ifaces: Vec<LabInterface>,
}

impl Node {
    fn new() -> Self {
        Node {
            ops: Vec::new(),
            ifaces: Vec::new(),
        }
    }
    fn iface(&mut self, name: &str, mac: [u8; 6], mtu: u32, addrs: &[(IpAddr, u8)]) {
        self.ops.push(NetOp::Mtu {
            dev: name.into(),
            mtu,
        });
        for &(addr, prefix) in addrs {
            self.ops.push(NetOp::Addr {
                dev: name.into(),
                addr,
                prefix,
            });
        }
        self.ops.push(NetOp::LinkUp { dev: name.into() });
        self.ifaces.push(LabInterface {
            name: name.into(),
            mac: mac_string(&mac),
            mtu,
            addresses: addrs.iter().map(|(a, p)| format!("{a}/{p}")).collect(),
        });
    }
    fn route(&mut self, dst: IpAddr, prefix: u8, via: IpAddr) {
        self.ops.push(NetOp::Route { dst, prefix, via });
    }
    fn neigh(&mut self, dev: &str, addr: IpAddr, mac: [u8; 6]) {
        self.ops.push(NetOp::Neigh {
            dev: dev.into(),
            addr,
            mac,
        });
    }
    fn local(&mut self, dst: IpAddr, prefix: u8) {
        self.ops.push(NetOp::LocalRoute { dst, prefix });
    }
    /// Applies the node's steps in its agent's namespace; its record for
    /// results.json.
    fn configure(self, fleet: &mut Fleet, idx: usize, role: &str) -> Result<LabNode> {
        match fleet.call(
            idx,
            &Request::Configure { ops: self.ops },
            Duration::from_secs(30),
        )? {
            Response::Configured => {}
            other => fail!("configuring the {role} namespace: unexpected answer {other:?}"),
        }
        Ok(LabNode {
            role: role.into(),
            pid: fleet.agent(idx).pid,
            interfaces: self.ifaces,
        })
    }
    fn sysctl(&mut self, key: &str, value: &str) {
        self.ops.push(NetOp::Sysctl {
            key: key.into(),
            value: value.into(),
        });
    }
}

/// Checks what building a lab needs before anything is started.
pub fn preflight(spec: &LabSpec) -> Result<()> {
    if !crate::sys::is_root() {
        fail!(
            "the lab needs root: it creates network namespaces and veth links.\n\
             Run it as root, e.g. `sudo linerate lab`, or run tests between existing \
             endpoints with `linerate tcp`/`linerate udp`"
        );
    }
    if !netops::tool_exists("ip") {
        fail!("`ip` (iproute2) is not installed; install it with: apt-get install iproute2");
    }
    if matches!(spec.dut, Some(DutMode::Nat | DutMode::Fw)) && !netops::tool_exists("nft") {
        fail!(
            "DUT mode {} needs nftables, which is not installed; install it with: apt-get install nftables",
            spec.dut.map(|d| d.name()).unwrap_or_default()
        );
    }
    if spec.dut_remark.is_some() && !netops::tool_exists("nft") {
        fail!("--dut-remark needs nftables, which is not installed; install it with: apt-get install nftables");
    }
    if spec.dut_police_pps.is_some() && !netops::tool_exists("nft") {
        fail!("--dut-police needs nftables, which is not installed; install it with: apt-get install nftables");
    }
    if spec.dut_shape.is_some() && !netops::tool_exists("tc") {
        fail!("--dut-shape needs tc (iproute2), which is not installed; install it with: apt-get install iproute2");
    }
    if spec.dut_netem.is_some() {
        if !netops::tool_exists("tc") {
            fail!("--dut-delay needs tc (iproute2), which is not installed; install it with: apt-get install iproute2");
        }
        if spec.dut_shape.is_some() {
            fail!(
                "--dut-shape and --dut-delay both need the root qdisc of the DUT's egress \
                 towards the sink (tc tbf and tc netem): use one of them per run"
            );
        }
    }
    if spec.dut_police_pps == Some(0) {
        fail!("--dut-police must be above 0 packets per second");
    }
    if let Some(p) = spec.dut_loss_pct {
        if !(p > 0.0 && p < 100.0) {
            fail!("--dut-loss {p} must be a percentage between 0 and 100 (exclusive)");
        }
        if !netops::tool_exists("nft") {
            fail!("--dut-loss needs nftables, which is not installed; install it with: apt-get install nftables");
        }
    }
    if !(576..=9000).contains(&spec.mtu) {
        fail!("MTU {} is outside 576..=9000", spec.mtu);
    }
    if let Some(e) = queues_error(spec.queues) {
        fail!("{e}");
    }
    if spec.dut == Some(DutMode::Stick) {
        stick::preflight(spec)?;
    }
    vmdut::check_user_router(spec)?;
    if spec.dut_bond && spec.dut_vm.as_ref().is_none_or(|v| v.guest.is_opaque()) {
        fail!(
            "--dut-bond makes an 802.3ad bond inside linerate's DUT VM, which its agent \
             configures: add --dut-vm (a namespace DUT or your own router VM has no such step)"
        );
    }
    if let Some(vm) = &spec.dut_vm {
        preflight_vm(vm)?;
    }
    Ok(())
}

/// What a VM DUT needs, checked before any test runs: qemu, taps, and the
/// kernel (fetched now if it is not cached; the build finds it in the
/// cache).
fn preflight_vm(vm: &crate::vm::VmSpec) -> Result<()> {
    crate::vm::qemu::preflight()?;
    match &vm.guest {
        crate::vm::Guest::Image(img) => {
            crate::vm::router::image_format(img).context("--dut-image")?;
        }
        g => {
            if let crate::vm::Guest::Initrd { initrd, .. } = g {
                std::fs::File::open(initrd)
                    .with_context(|| format!("--dut-initrd {}", initrd.display()))?;
            }
            crate::vm::kernel::resolve(&vm.kernel, &|m| crate::model::stderr::errln!("lab: {m}"))
                .with_context(|| format!("the DUT VM's kernel ({})", vm.kernel))?;
        }
    }
    Ok(())
}

/// Sets RPS on every veth of the lab so receive and forwarding work runs on
/// `rps`, away from the pinned senders. A host that refuses (no sysfs,
/// no rx queues) keeps its defaults; the returned note says which it was.
fn steer_receive(
    fleet: &mut Fleet,
    placed: &[usize],
    nodes: &[LabNode],
    spec: &LabSpec,
    pinned: &[String],
) -> Option<String> {
    let rps = spec.rps;
    if rps.is_empty() {
        return None;
    }
    let cpus = rps.cpus();
    let mut done = Vec::new();
    for (&idx, node) in placed.iter().zip(nodes) {
        for i in node
            .interfaces
            .iter()
            .filter(|i| !i.mac.is_empty() && !pinned.contains(&i.name))
        {
            let op = NetOp::Rps {
                dev: i.name.clone(),
                cpus: cpus.clone(),
            };
            match fleet.call(
                idx,
                &Request::Configure { ops: vec![op] },
                Duration::from_secs(10),
            ) {
                Ok(Response::Configured) => done.push(format!("{}/{}", node.role, i.name)),
                Ok(Response::Error { message, .. }) => {
                    return Some(format!(
                    "RPS not set ({}/{}: {message}); receive work stays where the kernel puts it",
                    node.role, i.name
                ))
                }
                Ok(other) => return Some(format!("RPS not set: unexpected answer {other:?}")),
                Err(e) => return Some(format!("RPS not set: {e:#}")),
            }
        }
    }
    let xps = if spec.queues == 1 {
        "XPS left alone: a veth has one tx queue".to_string()
    } else {
        format!(
            "on each of the {} rx queues; XPS left alone: the kernel picks a tx queue by flow hash",
            spec.queues
        )
    };
    Some(format!(
        "RPS: receive work of {} steered to CPUs {cpus:?}, away from the senders' cores ({xps})",
        done.join(", ")
    ))
}

fn link(a: &str, b: &str) -> LabLink {
    LabLink {
        a: a.into(),
        b: b.into(),
        kind: "veth".into(),
        ports: Vec::new(),
    }
}

/// Removes what older linerate versions or interrupted manual set-ups may
/// have left: named namespaces with the `lr-` prefix. Labs of this version
/// leave nothing (their namespaces die with their agents), so this finds
/// nothing unless something outside linerate made such names.
pub fn cleanup() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let dir = Path::new("/run/netns");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(removed);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("lr-") {
            netops::run("ip", &["netns", "delete", &name], None)
                .with_context(|| format!("removing leftover namespace {name}"))?;
            removed.push(name);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod shape_tests {
    use super::Shape;

    #[test]
    fn parses_rate_and_queue() {
        let s = Shape::parse("20M,50ms").unwrap();
        assert_eq!(s.rate_bps, 20_000_000);
        assert_eq!(s.queue_bytes, 125_000);
        assert!((s.queue_delay_s() - 0.05).abs() < 1e-9);
        assert_eq!(Shape::parse("20M,64k").unwrap().queue_bytes, 65_536);
        assert_eq!(Shape::parse("8M").unwrap().queue_bytes, 100_000);
        assert!(Shape::parse("20M,10").is_err(), "smaller than a frame");
        assert!(Shape::parse("fast").is_err());
        assert!(Shape::parse("20M,x").is_err());
    }
}
