//! The lab with physical ports (`linerate lab --gen-port IF --sink-port IF`):
//! real interfaces moved into the gen and sink namespaces instead of veth
//! ends, cabled to an external DUT (or to each other with `--back-to-back`).
//!
//! The gen and sink agents take the ports themselves (`NetOp::TakePort`) and
//! give them back in their old state (MTU, up/down, addresses, alias, master)
//! when they end: clean end, Ctrl-C, SIGTERM, a lost controller. Only SIGKILL
//! of an agent skips that: the kernel then returns a real NIC to the initial
//! namespace, down and without addresses, and destroys a veth (and its peer)
//! with the namespace. This module builds the plan; it never touches a port
//! itself beyond reading its state for the checks and the results.
//!
//! Addressing is the embedded lab's by default, so a DUT set up like the
//! embedded DUT works unchanged: gen 198.18.0.1/24 via 198.18.0.254, sink
//! 198.19.0.1/24 via 198.19.0.254, flow prefixes 198.18.1.0/24 and
//! 198.19.1.0/24 accepted locally, IPv6 likewise in 2001:2:0:10::/60 and
//! 2001:2:0:20::/60.

use super::error::{fail, Result};
use super::{link, preflight, v4, v6, Addressing, Lab, LabSpec, Node};
use crate::model::lab::{LabLink, LabNode, LabTopology};
use crate::netops::check_ifname;
use crate::netops::port::{self, PortState};
use crate::proto::NetOp;
use crate::topology::Fleet;
use crate::topology::Netns;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// The ports to take and what is at their far end.
#[derive(Debug, Clone, PartialEq)]
pub struct PortsSpec {
    pub gen: String,
    pub sink: String,
    /// Take ports that fail the safety checks.
    pub force: bool,
    /// `None`: the two ports are cabled to each other.
    pub dut: Option<ExternalDut>,
}

/// The external DUT's addresses on its two ports, and MACs when known
/// (otherwise found by ARP once before the tests).
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalDut {
    pub gen_v4: Ipv4Addr,
    pub gen_v6: Ipv6Addr,
    pub sink_v4: Ipv4Addr,
    pub sink_v6: Ipv6Addr,
    pub gen_mac: Option<[u8; 6]>,
    pub sink_mac: Option<[u8; 6]>,
}

/// The raw `linerate lab` port flags, before validation.
#[derive(Debug, Clone, Default)]
pub struct PortFlags<'a> {
    pub gen_port: Option<&'a str>,
    pub sink_port: Option<&'a str>,
    pub force: bool,
    pub back_to_back: bool,
    pub dut_gen_addr: &'a [IpAddr],
    pub dut_sink_addr: &'a [IpAddr],
    pub dut_gen_mac: Option<&'a str>,
    pub dut_sink_mac: Option<&'a str>,
}

/// One side of the DUT: its v4 /16, the flow /24 inside it, its v6 /60 and
/// the flow /64 inside that.
struct Side {
    flag: &'static str,
    v4_net: Ipv4Addr,
    v4_flow: Ipv4Addr,
    v6_net: Ipv6Addr,
    v6_flow: Ipv6Addr,
}

const GEN_SIDE: Side = Side {
    flag: "--dut-gen-addr",
    v4_net: Ipv4Addr::new(198, 18, 0, 0),
    v4_flow: Ipv4Addr::new(198, 18, 1, 0),
    v6_net: Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 0),
    v6_flow: Ipv6Addr::new(0x2001, 2, 0, 0x11, 0, 0, 0, 0),
};
const SINK_SIDE: Side = Side {
    flag: "--dut-sink-addr",
    v4_net: Ipv4Addr::new(198, 19, 0, 0),
    v4_flow: Ipv4Addr::new(198, 19, 1, 0),
    v6_net: Ipv6Addr::new(0x2001, 2, 0, 0x20, 0, 0, 0, 0),
    v6_flow: Ipv6Addr::new(0x2001, 2, 0, 0x21, 0, 0, 0, 0),
};

impl Side {
    /// The DUT's addresses on this side: the defaults (.254 / ::fe of the
    /// first subnet) unless the flag gives one or both families.
    fn addresses(&self, given: &[IpAddr]) -> Result<(Ipv4Addr, Ipv6Addr)> {
        let mut a4 = Ipv4Addr::from(u32::from(self.v4_net) + 254);
        let mut a6 = Ipv6Addr::from(u128::from(self.v6_net) + 0xfe);
        let (mut seen4, mut seen6) = (false, false);
        for a in given {
            match *a {
                IpAddr::V4(x) => {
                    let in_side = u32::from(x) >> 16 == u32::from(self.v4_net) >> 16;
                    let in_flow = u32::from(x) >> 8 == u32::from(self.v4_flow) >> 8;
                    let host = u32::from(x) & 0xff;
                    if seen4 || !in_side || in_flow || host == 0 || host == 255 {
                        fail!(
                            "{} {x}: give at most one IPv4 address, a host in {}/16 outside the \
                             flow prefix {}/24",
                            self.flag,
                            self.v4_net,
                            self.v4_flow
                        );
                    }
                    (a4, seen4) = (x, true);
                }
                IpAddr::V6(x) => {
                    let in_side = u128::from(x) >> 68 == u128::from(self.v6_net) >> 68;
                    let in_flow = u128::from(x) >> 64 == u128::from(self.v6_flow) >> 64;
                    if seen6 || !in_side || in_flow || u128::from(x) as u64 == 0 {
                        fail!(
                            "{} {x}: give at most one IPv6 address, a host in {}/60 outside the \
                             flow prefix {}/64",
                            self.flag,
                            self.v6_net,
                            self.v6_flow
                        );
                    }
                    (a6, seen6) = (x, true);
                }
            }
        }
        Ok((a4, a6))
    }
}

/// The port's own address next to the DUT's: host 1 of the DUT's subnet, or 2
/// when the DUT is 1.
fn port_v4(dut: Ipv4Addr) -> Ipv4Addr {
    let net = u32::from(dut) & !0xff;
    Ipv4Addr::from(net + if u32::from(dut) & 0xff == 1 { 2 } else { 1 })
}
fn port_v6(dut: Ipv6Addr) -> Ipv6Addr {
    let net = u128::from(dut) & !u128::from(u64::MAX);
    Ipv6Addr::from(net + if u128::from(dut) as u64 == 1 { 2 } else { 1 })
}

fn parse_mac(flag: &str, s: &str) -> Result<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in &mut mac {
        match parts.next().map(|p| u8::from_str_radix(p, 16)) {
            Some(Ok(v)) => *b = v,
            _ => fail!("{flag} {s}: not a MAC address; write it as 02:00:5e:00:00:01"),
        }
    }
    if parts.next().is_some() {
        fail!("{flag} {s}: not a MAC address; write it as 02:00:5e:00:00:01");
    }
    Ok(mac)
}

impl PortsSpec {
    /// Validates the port flags: `None` when no port is named (the embedded lab).
    pub fn from_flags(f: &PortFlags) -> Result<Option<Self>> {
        let (gen, sink) = match (f.gen_port, f.sink_port) {
            (None, None) => return Ok(None),
            (Some(g), Some(s)) => (g, s),
            _ => fail!("name both ports: --gen-port IF --sink-port IF"),
        };
        check_ifname(gen)?;
        check_ifname(sink)?;
        if gen == sink {
            fail!(
                "--gen-port and --sink-port are both {gen}; a port can serve one side only, \
                 name the two ports cabled to the DUT (or to each other with --back-to-back)"
            );
        }
        let dut_flags = !f.dut_gen_addr.is_empty()
            || !f.dut_sink_addr.is_empty()
            || f.dut_gen_mac.is_some()
            || f.dut_sink_mac.is_some();
        if f.back_to_back {
            if dut_flags {
                fail!("--back-to-back has no DUT: drop the --dut-* flags, or drop --back-to-back");
            }
            return Ok(Some(PortsSpec {
                gen: gen.into(),
                sink: sink.into(),
                force: f.force,
                dut: None,
            }));
        }
        let (gen_v4, gen_v6) = GEN_SIDE.addresses(f.dut_gen_addr)?;
        let (sink_v4, sink_v6) = SINK_SIDE.addresses(f.dut_sink_addr)?;
        Ok(Some(PortsSpec {
            gen: gen.into(),
            sink: sink.into(),
            force: f.force,
            dut: Some(ExternalDut {
                gen_v4,
                gen_v6,
                sink_v4,
                sink_v6,
                gen_mac: f
                    .dut_gen_mac
                    .map(|m| parse_mac("--dut-gen-mac", m))
                    .transpose()?,
                sink_mac: f
                    .dut_sink_mac
                    .map(|m| parse_mac("--dut-sink-mac", m))
                    .transpose()?,
            }),
        }))
    }
}

impl PortsSpec {
    /// The sink port's own IPv4 and IPv6 addresses: where traffic goes.
    pub fn sink_addresses(&self) -> (Ipv4Addr, Ipv6Addr) {
        match &self.dut {
            Some(d) => (port_v4(d.sink_v4), port_v6(d.sink_v6)),
            None => (
                Ipv4Addr::new(198, 18, 0, 2),
                Ipv6Addr::from(u128::from(port_v6(GEN_SIDE.v6_net)) + 1),
            ),
        }
    }
}

/// Checks both ports here (the namespace the local agents start in) before
/// anything is started; the agents check again before they take them.
pub fn preflight_ports(spec: &LabSpec, ports: &PortsSpec) -> Result<(PortState, PortState)> {
    preflight(&LabSpec {
        dut: None,
        dut_vm: None,
        dut_bond: false,
        ..spec.clone()
    })?;
    let gen = port::inspect(&ports.gen)?;
    let sink = port::inspect(&ports.sink)?;
    port::check(&gen, ports.force)?;
    port::check(&sink, ports.force)?;
    Ok((gen, sink))
}

/// Builds the lab around two physical ports. `spec` gives the MTU; its DUT
/// mode is ignored (the DUT is external, or there is none).
pub fn build(spec: &LabSpec, ports: &PortsSpec, log_dir: Option<&Path>) -> Result<Lab> {
    preflight_ports(spec, ports)?;
    let mut fleet = Fleet::new();
    let log = |role: &str| log_dir.map(|d| d.join(format!("{role}.log")));
    let gen = fleet.spawn_local("gen", &Netns::New, log("gen").as_deref())?;
    let sink = fleet.spawn_local("sink", &Netns::New, log("sink").as_deref())?;
    let built = configure(&mut fleet, gen, sink, spec.mtu, ports)?;
    Ok(Lab {
        fleet,
        gen,
        sink,
        dut: None,
        switch: None,
        gen_addr: built.gen_addr,
        sink_addr: built.sink_addr,
        topology: built.topology,
    })
}

/// A port lab's addressing and record, its agents being the caller's.
pub struct PortLab {
    pub gen_addr: Addressing,
    pub sink_addr: Addressing,
    pub topology: LabTopology,
}

/// A port as its agent found it before taking it.
struct Inspected {
    record: crate::proto::lab::LabPort,
    mac: Option<[u8; 6]>,
}

/// Asks agent `idx` (here or on another host) to describe and check `dev`
/// in the namespace it started in.
fn inspect(fleet: &mut Fleet, idx: usize, dev: &str, force: bool) -> Result<Inspected> {
    let req = crate::proto::Request::InspectPort {
        dev: dev.into(),
        force,
    };
    match fleet.call(idx, &req, std::time::Duration::from_secs(15))? {
        crate::proto::Response::PortState { port, mac } => Ok(Inspected { record: port, mac }),
        other => fail!("inspecting port {dev}: unexpected answer {other:?}"),
    }
}

/// Moves the ports into the namespaces of agents `gen` and `sink` (fresh
/// namespaces, started with `--netns new`, here or on other hosts) and
/// addresses them towards the external DUT, or towards each other.
pub fn configure(
    fleet: &mut Fleet,
    gen: usize,
    sink: usize,
    mtu: u32,
    ports: &PortsSpec,
) -> Result<PortLab> {
    let gen_state = inspect(fleet, gen, &ports.gen, ports.force)?;
    let sink_state = inspect(fleet, sink, &ports.sink, ports.force)?;
    let mut x = Sides {
        g: Node::new(),
        s: Node::new(),
        gp: ports.gen.as_str(),
        sp: ports.sink.as_str(),
        gen_state,
        sink_state,
    };
    for (n, p) in [(&mut x.g, x.gp), (&mut x.s, x.sp)] {
        n.ops.push(NetOp::TakePort {
            dev: p.into(),
            force: ports.force,
        });
    }
    let Cabled {
        gen: (gen4, gen6),
        sink: (sink4, sink6),
        links,
    } = match &ports.dut {
        Some(d) => via_dut(&mut x, d, mtu),
        None => back_to_back(&mut x, mtu)?,
    };
    let Sides { mut g, mut s, .. } = x;
    g.local(GEN_SIDE.v4_flow.into(), 24);
    g.local(GEN_SIDE.v6_flow.into(), 64);
    s.local(SINK_SIDE.v4_flow.into(), 24);
    s.local(SINK_SIDE.v6_flow.into(), 64);
    for n in [&mut g, &mut s] {
        n.sysctl("net.ipv4.conf.all.rp_filter", "0");
    }
    let mut nodes = Vec::new();
    for (idx, node, role) in [(gen, g, "gen"), (sink, s, "sink")] {
        nodes.push(node.configure(fleet, idx, role)?);
    }
    let topology = port_topology(ports, nodes, links);
    Ok(PortLab {
        gen_addr: Addressing {
            v4: Some(gen4.into()),
            v6: Some(gen6.into()),
            flow_v4: Some(GEN_SIDE.v4_flow),
            flow_v6: Some(GEN_SIDE.v6_flow),
            vlan: None,
        },
        sink_addr: Addressing {
            v4: Some(sink4.into()),
            v6: Some(sink6.into()),
            flow_v4: Some(SINK_SIDE.v4_flow),
            flow_v6: Some(SINK_SIDE.v6_flow),
            vlan: None,
        },
        topology,
    })
}

/// The record of the port lab: its nodes and physical links.
fn port_topology(ports: &PortsSpec, nodes: Vec<LabNode>, links: Vec<LabLink>) -> LabTopology {
    LabTopology {
        steering: None,
        cores: None,
        kind: if ports.dut.is_some() {
            "dut"
        } else {
            "back_to_back"
        }
        .into(),
        dut_mode: ports.dut.as_ref().map(|_| "external".to_string()),
        fw_rules: None,
        dut_shape: None,
        dut_netem: None,
        queues: None,
        dut_remark: None,
        nodes,
        links,
        offloads:
            "Physical ports: UDP one datagram per sendmmsg message (no UDP_SEGMENT), receiver \
                   without UDP_GRO, so every datagram is one frame on the wire; NIC offloads left \
                   as found. TCP: TSO/GRO as the NIC has them (bytes count)."
                .into(),
        stick: None,
        notes: Vec::new(),
        vm: None,
    }
}

/// The two ports being configured: each one's node, name and what
/// inspecting it found.
struct Sides<'a> {
    g: Node,
    s: Node,
    gp: &'a str,
    sp: &'a str,
    gen_state: Inspected,
    sink_state: Inspected,
}

/// The ports' addresses, and the links they make.
struct Cabled {
    gen: (Ipv4Addr, Ipv6Addr),
    sink: (Ipv4Addr, Ipv6Addr),
    links: Vec<LabLink>,
}

/// The ports addressed towards the external DUT `d`: each in its own
/// subnet, the far side routed via the DUT, static neighbours when its
/// MACs are known.
fn via_dut(x: &mut Sides, d: &ExternalDut, mtu: u32) -> Cabled {
    let (gp, sp) = (x.gp, x.sp);
    let (g, s) = (&mut x.g, &mut x.s);
    let (gen4, gen6) = (port_v4(d.gen_v4), port_v6(d.gen_v6));
    let (sink4, sink6) = (port_v4(d.sink_v4), port_v6(d.sink_v6));
    let (d_g4, d_g6, d_s4, d_s6) = (
        IpAddr::V4(d.gen_v4),
        IpAddr::V6(d.gen_v6),
        IpAddr::V4(d.sink_v4),
        IpAddr::V6(d.sink_v6),
    );
    let mac_of = |st: &Inspected| st.mac.unwrap_or_default();
    g.iface(
        gp,
        mac_of(&x.gen_state),
        mtu,
        &[(gen4.into(), 24), (gen6.into(), 64)],
    );
    s.iface(
        sp,
        mac_of(&x.sink_state),
        mtu,
        &[(sink4.into(), 24), (sink6.into(), 64)],
    );
    g.route(v4(198, 19, 0, 0), 16, d_g4);
    g.route(v6(0x20, 0), 60, d_g6);
    s.route(v4(198, 18, 0, 0), 16, d_s4);
    s.route(v6(0x10, 0), 60, d_s6);
    // Static neighbours towards the DUT: no ARP/ND during a test. The
    // DUT port's IPv6 neighbour takes the MAC its IPv4 one has.
    for (n, dev, a4, a6, mac) in [
        (&mut *g, gp, d_g4, d_g6, d.gen_mac),
        (&mut *s, sp, d_s4, d_s6, d.sink_mac),
    ] {
        match mac {
            Some(m) => {
                n.neigh(dev, a4, m);
                n.neigh(dev, a6, m);
            }
            None => n.ops.push(NetOp::ResolveNeigh {
                dev: dev.into(),
                addr: a4,
                also: vec![a6],
            }),
        }
    }
    let peer = |a: Ipv4Addr| format!("external-dut/{a}");
    Cabled {
        gen: (gen4, gen6),
        sink: (sink4, sink6),
        links: vec![
            physical(&format!("gen/{gp}"), &peer(d.gen_v4), vec![&x.gen_state]),
            physical(&format!("sink/{sp}"), &peer(d.sink_v4), vec![&x.sink_state]),
        ],
    }
}

/// The ports cabled to each other: one subnet, gen .1 and sink .2, each
/// the other's static neighbour.
fn back_to_back(x: &mut Sides, mtu: u32) -> Result<Cabled> {
    let (gp, sp) = (x.gp, x.sp);
    let (g, s) = (&mut x.g, &mut x.s);
    let (Some(gmac), Some(smac)) = (x.gen_state.mac, x.sink_state.mac) else {
        fail!(
            "ports {gp} and {sp}: a MAC address is unknown, so they cannot be cabled back to back"
        );
    };
    let (gen4, gen6) = (Ipv4Addr::new(198, 18, 0, 1), port_v6(GEN_SIDE.v6_net));
    let (sink4, sink6) = (
        Ipv4Addr::new(198, 18, 0, 2),
        Ipv6Addr::from(u128::from(gen6) + 1),
    );
    g.iface(gp, gmac, mtu, &[(gen4.into(), 24), (gen6.into(), 64)]);
    s.iface(sp, smac, mtu, &[(sink4.into(), 24), (sink6.into(), 64)]);
    g.route(v4(198, 19, 0, 0), 16, sink4.into());
    g.route(v6(0x20, 0), 60, sink6.into());
    s.route(GEN_SIDE.v4_flow.into(), 24, gen4.into());
    s.route(GEN_SIDE.v6_flow.into(), 64, gen6.into());
    g.neigh(gp, sink4.into(), smac);
    g.neigh(gp, sink6.into(), smac);
    s.neigh(sp, gen4.into(), gmac);
    s.neigh(sp, gen6.into(), gmac);
    Ok(Cabled {
        gen: (gen4, gen6),
        sink: (sink4, sink6),
        links: vec![physical(
            &format!("gen/{gp}"),
            &format!("sink/{sp}"),
            vec![&x.gen_state, &x.sink_state],
        )],
    })
}

fn physical(a: &str, b: &str, ports: Vec<&Inspected>) -> LabLink {
    LabLink {
        kind: "physical".into(),
        ports: ports.into_iter().map(|p| p.record.clone()).collect(),
        ..link(a, b)
    }
}

#[cfg(test)]
mod tests;
