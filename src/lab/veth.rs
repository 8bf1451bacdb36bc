//! Building the lab of namespaces on veth pairs ([`build`]), phase by
//! phase: the agents, the links between them, each node's addresses,
//! routes and neighbours, the DUT's impairments, the nodes' configuration
//! and core layout, and the record of it all.

use super::error::Result;
use super::{bond, cores, rules, stick, vmdut};
use super::{link, pinned_devs, preflight, routed, steer_receive, v4, v6, Node};
use super::{Addressing, DutMode, Lab, LabSpec};
use super::{MAC_DUT0, MAC_DUT1, MAC_GEN0, MAC_HV0, MAC_HV1, MAC_SINK0};
use crate::model::lab::{LabCores, LabInterface, LabLink, LabNode, LabTopology, LabVm};
use crate::netops;
use crate::proto::NetOp;
use crate::topology::{Fleet, Netns};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// Builds a lab. Agent logs go to `log_dir` when given.
pub fn build(spec: LabSpec, log_dir: Option<&Path>) -> Result<Lab> {
    preflight(&spec)?;
    if spec.dut == Some(DutMode::Stick) {
        return stick::build(spec, log_dir);
    }
    let mut sp = spawn(&spec, log_dir)?;
    let (at, mtu, vm) = (sp.at, spec.mtu, sp.vm.is_some());
    let mut n = Nodes::new();
    if spec.dut_bond && vm {
        bond::guest_ops(&mut n.d, mtu);
    }
    let links = cable(&spec, &sp.fleet, &at, vm)?;
    let dut_present = at.dut.is_some() || sp.router.is_some();
    let hosts = match (spec.dut, dut_present) {
        (Some(mode), true) if mode != DutMode::Bridge => through_router(&spec, mode, &mut n),
        (_, dut_here) => one_subnet(mtu, dut_here, &mut n),
    };
    if at.dut.is_some() {
        impair(&spec, &mut n.d);
    }
    accept_flows(&mut n);
    let mut c = configure(&mut sp.fleet, n, &at, &spec, vm)?;
    let plan = cores::plan(&spec.senders.cpus(), &spec.rps.cpus(), dut_present);
    let cores = plan
        .as_ref()
        .map(|p| cores::lay_out(&mut sp.fleet, &c.placed, &c.nodes, p));
    let addressing = addressing(hosts);
    let mut notes = Vec::new();
    if spec.dut_bond && vm {
        notes.push(bond::NOTE.to_string());
    }
    let mut vm_record = sp.vm.map(|v| v.record);
    if let Some(r) = sp.router {
        let (node, record) = adopt_router(&mut sp.fleet, r, &at, &addressing, &mut notes, mtu)?;
        c.guest = Some(node);
        vm_record = Some(record);
    }
    if let (Some(r), Some(p)) = (vm_record.as_mut(), plan.as_ref()) {
        pin_qemu(r, p);
    }
    let steering = steering(&mut sp.fleet, &c.placed, &c.nodes, &spec, cores.as_ref());
    if let Some(g) = c.guest {
        // gen, vmnet, then the guest: the order traffic crosses them.
        c.nodes.insert(2.min(c.nodes.len()), g);
    }
    let parts = Parts {
        nodes: c.nodes,
        links,
        cores,
        steering,
        notes,
        vm: vm_record,
    };
    Ok(Lab {
        fleet: sp.fleet,
        gen: at.gen,
        sink: at.sink,
        dut: at.dut,
        switch: at.vmnet,
        gen_addr: addressing.0,
        sink_addr: addressing.1,
        topology: topology(&spec, at.dut.is_some(), parts),
    })
}

/// The lab's agents, spawned, and a VM DUT (with its agent) or the user's
/// router VM (without one), booted.
struct Spawned {
    fleet: Fleet,
    at: Places,
    vm: Option<vmdut::VmDut>,
    router: Option<vmdut::RouterDut>,
}

/// Spawns gen, the DUT (a namespace or a VM; none back to back or for the
/// user's router) and the sink, in that order.
fn spawn(spec: &LabSpec, log_dir: Option<&Path>) -> Result<Spawned> {
    let mut fleet = Fleet::new();
    let log = |role: &str| log_dir.map(|d| d.join(format!("{role}.log")));
    let gen = fleet.spawn_local("gen", &Netns::New, log("gen").as_deref())?;
    let mut vm = None;
    let mut router = None;
    let dut = match (spec.dut, &spec.dut_vm) {
        (Some(_), Some(v)) if v.guest.is_opaque() => {
            router = Some(vmdut::boot_router(&mut fleet, v, &log)?);
            None
        }
        (Some(_), Some(v)) => {
            let booted = vmdut::boot(&mut fleet, v, &log, spec.dut_bond)?;
            let d = booted.dut;
            vm = Some(booted);
            Some(d)
        }
        (Some(_), None) => Some(fleet.spawn_local("dut", &Netns::New, log("dut").as_deref())?),
        (None, _) => None,
    };
    let sink = fleet.spawn_local("sink", &Netns::New, log("sink").as_deref())?;
    let vmnet = vm
        .as_ref()
        .map(|v| v.vmnet)
        .or(router.as_ref().map(|r| r.vmnet));
    Ok(Spawned {
        fleet,
        at: Places {
            gen,
            dut,
            sink,
            vmnet,
        },
        vm,
        router,
    })
}

/// Where the lab's nodes run: their agents' indexes in the fleet.
#[derive(Clone, Copy)]
struct Places {
    gen: usize,
    dut: Option<usize>,
    sink: usize,
    /// A VM DUT's vmnet namespace (its bridges and taps).
    vmnet: Option<usize>,
}

/// The configuration of gen, the DUT and the sink, as it is built up.
struct Nodes {
    g: Node,
    d: Node,
    s: Node,
}

impl Nodes {
    fn new() -> Nodes {
        Nodes {
            g: Node::new(),
            d: Node::new(),
            s: Node::new(),
        }
    }
}

/// The links: gen — dut — sink, or gen — sink back to back; created, and
/// as the record lists them.
fn cable(spec: &LabSpec, fleet: &Fleet, at: &Places, vm: bool) -> Result<Vec<LabLink>> {
    let pid = |i: usize| fleet.agent(i).pid;
    let q = spec.queues;
    let (gen, sink) = (at.gen, at.sink);
    let mut links = Vec::new();
    match (at.dut, at.vmnet) {
        (_, Some(vmnet)) => {
            let vn = pid(vmnet);
            netops::create_veth("gen0", MAC_GEN0, pid(gen), "hv0", MAC_HV0, vn, q)?;
            netops::create_veth("hv1", MAC_HV1, vn, "sink0", MAC_SINK0, pid(sink), q)?;
            links.push(link("gen/gen0", "vmnet/hv0"));
            if spec.dut_bond && vm {
                links.extend(bond::links());
            } else {
                links.push(LabLink {
                    a: "vmnet/tap0".into(),
                    b: "dut/dut0".into(),
                    kind: "tap, virtio-net".into(),
                    ports: Vec::new(),
                });
            }
            links.push(LabLink {
                a: "dut/dut1".into(),
                b: "vmnet/tap1".into(),
                kind: "virtio-net, tap".into(),
                ports: Vec::new(),
            });
            links.push(link("vmnet/hv1", "sink/sink0"));
        }
        (Some(di), None) => {
            netops::create_veth("gen0", MAC_GEN0, pid(gen), "dut0", MAC_DUT0, pid(di), q)?;
            netops::create_veth("dut1", MAC_DUT1, pid(di), "sink0", MAC_SINK0, pid(sink), q)?;
            links.push(link("gen/gen0", "dut/dut0"));
            links.push(link("dut/dut1", "sink/sink0"));
        }
        (None, _) => {
            netops::create_veth("gen0", MAC_GEN0, pid(gen), "sink0", MAC_SINK0, pid(sink), q)?;
            links.push(link("gen/gen0", "sink/sink0"));
        }
    }
    Ok(links)
}

/// Flow prefixes: generator side 198.18.1.0/24 and 2001:2:0:11::/64, sink
/// side 198.19.1.0/24 and 2001:2:0:21::/64, as (gen v4, gen v6, sink v4,
/// sink v6).
fn flow_prefixes() -> (IpAddr, IpAddr, IpAddr, IpAddr) {
    (
        v4(198, 18, 1, 0),
        v6(0x11, 0),
        v4(198, 19, 1, 0),
        v6(0x21, 0),
    )
}

/// gen's and the sink's host addresses: ((gen v4, gen v6), (sink v4, sink v6)).
type Hosts = ((IpAddr, IpAddr), (IpAddr, IpAddr));

/// A routing DUT (router, NAT, firewall): gen and the sink on their own
/// subnets with the DUT as their gateway.
fn through_router(spec: &LabSpec, mode: DutMode, n: &mut Nodes) -> Hosts {
    let (g, d, s) = (&mut n.g, &mut n.d, &mut n.s);
    let mtu = spec.mtu;
    let (gen_flow4, gen_flow6, sink_flow4, sink_flow6) = flow_prefixes();
    let r = routed();
    let ((gen4, gen6), (sink4, sink6)) = (r.gen, r.sink);
    let ((d0_4, d0_6), (d1_4, d1_6)) = (r.gw_gen, r.gw_sink);
    g.iface("gen0", MAC_GEN0, mtu, &[(gen4, 24), (gen6, 64)]);
    d.iface("dut0", MAC_DUT0, mtu, &[(d0_4, 24), (d0_6, 64)]);
    d.iface("dut1", MAC_DUT1, mtu, &[(d1_4, 24), (d1_6, 64)]);
    s.iface("sink0", MAC_SINK0, mtu, &[(sink4, 24), (sink6, 64)]);
    g.route(v4(198, 19, 0, 0), 16, d0_4);
    g.route(v6(0x20, 0), 60, d0_6);
    s.route(v4(198, 18, 0, 0), 16, d1_4);
    s.route(v6(0x10, 0), 60, d1_6);
    d.route(sink_flow4, 24, sink4);
    d.route(sink_flow6, 64, sink6);
    d.route(gen_flow4, 24, gen4);
    d.route(gen_flow6, 64, gen6);
    // Static neighbours: no ARP/ND during a test, no first-packet loss.
    g.neigh("gen0", d0_4, MAC_DUT0);
    g.neigh("gen0", d0_6, MAC_DUT0);
    d.neigh("dut0", gen4, MAC_GEN0);
    d.neigh("dut0", gen6, MAC_GEN0);
    d.neigh("dut1", sink4, MAC_SINK0);
    d.neigh("dut1", sink6, MAC_SINK0);
    s.neigh("sink0", d1_4, MAC_DUT1);
    s.neigh("sink0", d1_6, MAC_DUT1);
    d.sysctl("net.ipv4.ip_forward", "1");
    d.sysctl("net.ipv6.conf.all.forwarding", "1");
    d.sysctl("net.ipv4.conf.all.rp_filter", "0");
    match mode {
        DutMode::Nat => d.ops.push(NetOp::Nft {
            ruleset: rules::nat("dut1"),
        }),
        DutMode::Fw => d.ops.push(NetOp::Nft {
            ruleset: rules::firewall(spec.fw_rules),
        }),
        _ => {}
    }
    ((gen4, gen6), (sink4, sink6))
}

/// Back to back, or through a bridge: one subnet, gen .1 and sink .2.
fn one_subnet(mtu: u32, dut_here: bool, n: &mut Nodes) -> Hosts {
    let (g, d, s) = (&mut n.g, &mut n.d, &mut n.s);
    let (gen_flow4, gen_flow6, _, _) = flow_prefixes();
    let (gen4, gen6, sink4, sink6) = (
        v4(198, 18, 0, 1),
        v6(0x10, 1),
        v4(198, 18, 0, 2),
        v6(0x10, 2),
    );
    // The bridge DUT: both links in br0.
    if dut_here {
        d.iface("dut0", MAC_DUT0, mtu, &[]);
        d.iface("dut1", MAC_DUT1, mtu, &[]);
        d.ops.push(NetOp::Bridge {
            name: "br0".into(),
            ports: vec!["dut0".into(), "dut1".into()],
        });
        d.ifaces.push(LabInterface {
            name: "br0".into(),
            mac: String::new(),
            mtu,
            addresses: vec![],
        });
    }
    g.iface("gen0", MAC_GEN0, mtu, &[(gen4, 24), (gen6, 64)]);
    s.iface("sink0", MAC_SINK0, mtu, &[(sink4, 24), (sink6, 64)]);
    g.route(v4(198, 19, 0, 0), 16, sink4);
    g.route(v6(0x20, 0), 60, sink6);
    s.route(gen_flow4, 24, gen4);
    s.route(gen_flow6, 64, gen6);
    g.neigh("gen0", sink4, MAC_SINK0);
    g.neigh("gen0", sink6, MAC_SINK0);
    s.neigh("sink0", gen4, MAC_GEN0);
    s.neigh("sink0", gen6, MAC_GEN0);
    ((gen4, gen6), (sink4, sink6))
}

/// The DUT's impairments. They apply to whatever it forwards: the bridge
/// family's forward hook sees bridged frames, inet's sees routed ones.
fn impair(spec: &LabSpec, d: &mut Node) {
    let bridge = spec.dut == Some(DutMode::Bridge);
    if let Some(pct) = spec.dut_loss_pct {
        d.ops.push(NetOp::Nft {
            ruleset: rules::random_loss(pct, bridge),
        });
    }
    if let Some(pps) = spec.dut_police_pps {
        d.ops.push(NetOp::Nft {
            ruleset: rules::police(pps, (pps / 100).max(10), bridge),
        });
    }
    if let Some(r) = spec.dut_remark {
        d.ops.push(NetOp::Nft {
            ruleset: rules::remark(r, bridge),
        });
    }
    if let Some(n) = spec.dut_netem {
        d.ops.extend(n.ops(["dut0", "dut1"]));
    }
    if let Some(sh) = spec.dut_shape {
        d.ops.push(NetOp::Shape {
            dev: "dut1".into(),
            rate_bps: sh.rate_bps,
            burst_bytes: sh.burst_bytes(),
            limit_bytes: sh.queue_bytes,
        });
    }
}

/// Both ends accept their whole flow prefix locally (AnyIP), so flows can
/// vary source and destination addresses in either direction.
fn accept_flows(n: &mut Nodes) {
    let (gen_flow4, gen_flow6, sink_flow4, sink_flow6) = flow_prefixes();
    n.g.local(gen_flow4, 24);
    n.g.local(gen_flow6, 64);
    n.s.local(sink_flow4, 24);
    n.s.local(sink_flow6, 64);
    for n in [&mut n.g, &mut n.s] {
        n.sysctl("net.ipv4.conf.all.rp_filter", "0");
    }
}

/// The nodes as configured: those of this host's kernel with their agents'
/// indexes (laid out on its cores), and a VM DUT's guest apart (it has
/// CPUs of its own; its qemu is pinned instead).
struct Configured {
    nodes: Vec<LabNode>,
    placed: Vec<usize>,
    guest: Option<LabNode>,
}

/// Configures gen, vmnet, the DUT and the sink, in that order.
fn configure(
    fleet: &mut Fleet,
    n: Nodes,
    at: &Places,
    spec: &LabSpec,
    vm: bool,
) -> Result<Configured> {
    let mut nodes = Vec::new();
    let mut placed = Vec::new();
    let mut guest = None;
    for (idx, node, role) in [
        (Some(at.gen), n.g, "gen"),
        (
            at.vmnet,
            vmdut::vmnet_node(spec.mtu, spec.dut_bond),
            "vmnet",
        ),
        (at.dut, n.d, "dut"),
        (Some(at.sink), n.s, "sink"),
    ] {
        let Some(idx) = idx else { continue };
        let rec = node.configure(fleet, idx, role)?;
        if role == "dut" && vm {
            guest = Some(rec);
        } else {
            nodes.push(rec);
            placed.push(idx);
        }
    }
    Ok(Configured {
        nodes,
        placed,
        guest,
    })
}

/// gen's and the sink's addressing: their host addresses and flow prefixes.
fn addressing(((gen4, gen6), (sink4, sink6)): Hosts) -> (Addressing, Addressing) {
    (
        Addressing {
            v4: Some(gen4),
            v6: Some(gen6),
            flow_v4: Some(Ipv4Addr::new(198, 18, 1, 0)),
            flow_v6: Some(Ipv6Addr::new(0x2001, 2, 0, 0x11, 0, 0, 0, 0)),
            vlan: None,
        },
        Addressing {
            v4: Some(sink4),
            v6: Some(sink6),
            flow_v4: Some(Ipv4Addr::new(198, 19, 1, 0)),
            flow_v6: Some(Ipv6Addr::new(0x2001, 2, 0, 0x21, 0, 0, 0, 0)),
            vlan: None,
        },
    )
}

/// Waits for the user's router VM to forward and takes its process into
/// the fleet; returns its node (the guest) and its record.
fn adopt_router(
    fleet: &mut Fleet,
    mut r: vmdut::RouterDut,
    at: &Places,
    addressing: &(Addressing, Addressing),
    notes: &mut Vec<String>,
    mtu: u32,
) -> Result<(LabNode, LabVm)> {
    let vmnet = r.vmnet;
    let (boot_s, more) = vmdut::wait_forwarding(
        fleet,
        (at.gen, at.sink, vmnet),
        (&addressing.0, &addressing.1),
        &mut r,
    )?;
    notes.extend(more);
    notes.push(
        "The DUT is your own router VM, with no linerate agent inside: its interface \
         counters and CPU are not read; what it lost is what the sequence numbers and this \
         host's taps show."
            .to_string(),
    );
    let mut record = r.record.clone();
    record.boot_s = boot_s;
    let guest = vmdut::router_node(record.qemu_pid, mtu, routed().gw_gen, routed().gw_sink);
    if let Some(child) = r.router.into_child() {
        fleet.adopt(child);
    }
    Ok((guest, record))
}

/// Pins a VM DUT's qemu to the DUT's cores of the layout, if it has any.
fn pin_qemu(r: &mut LabVm, p: &cores::Plan) {
    if !p.dut.is_empty() {
        match vmdut::pin(r.qemu_pid, &p.dut) {
            Ok(()) => r.host_cpus = p.dut.clone(),
            Err(e) => crate::model::stderr::errln!("lab: qemu left unpinned: {e:#}"),
        }
    }
}

/// RPS where no NAPI thread was pinned (or pinning failed); the note
/// saying what receive work runs where.
fn steering(
    fleet: &mut Fleet,
    placed: &[usize],
    nodes: &[LabNode],
    spec: &LabSpec,
    cores: Option<&LabCores>,
) -> Option<String> {
    let pinned = pinned_devs(cores);
    if !pinned.is_empty()
        && nodes
            .iter()
            .flat_map(|n| &n.interfaces)
            .filter(|i| !i.mac.is_empty())
            .all(|i| pinned.contains(&i.name))
    {
        Some(format!(
            "RPS left off: every veth's receive work runs in NAPI threads pinned by role \
                 (see cores){}",
            if spec.queues > 1 {
                format!(", one per rx queue ({} each)", spec.queues)
            } else {
                String::new()
            }
        ))
    } else {
        steer_receive(fleet, placed, nodes, spec, &pinned)
    }
}

/// What the record of the lab's topology takes besides the spec.
struct Parts {
    nodes: Vec<LabNode>,
    links: Vec<LabLink>,
    cores: Option<LabCores>,
    steering: Option<String>,
    notes: Vec<String>,
    vm: Option<LabVm>,
}

/// The lab's topology as the results record it; the DUT's settings only
/// where a DUT namespace (or VM with an agent) applied them.
fn topology(spec: &LabSpec, dut: bool, p: Parts) -> LabTopology {
    LabTopology {
        kind: if spec.dut.is_some() {
            "dut"
        } else {
            "back_to_back"
        }
        .into(),
        dut_mode: spec.dut.map(|m| m.name().to_string()),
        fw_rules: (spec.dut == Some(DutMode::Fw)).then_some(spec.fw_rules),
        dut_shape: spec.dut_shape.filter(|_| dut).map(|s| s.describe()),
        queues: Some(spec.queues),
        dut_remark: spec.dut_remark.filter(|_| dut).map(|r| r.to_string()),
        dut_netem: spec.dut_netem.filter(|_| dut).map(|n| n.describe()),
        nodes: p.nodes,
        links: p.links,
        offloads: offloads(p.cores.is_some()).into(),
        steering: p.steering,
        cores: p.cores,
        stick: None,
        notes: p.notes,
        vm: p.vm,
    }
}

/// The offloads note: with the core layout (`napi`), veth GRO is on for
/// NAPI threads.
fn offloads(napi: bool) -> &'static str {
    if napi {
        "UDP: one datagram per sendmmsg message (no UDP_SEGMENT), receiver without UDP_GRO, \
         veth GRO on for NAPI (datagrams are not merged: no UDP GRO socket, no fraglist \
         forwarding): every datagram is one packet at the DUT, checked against interface \
         counters. TCP: TSO/GRO on (bytes count)."
    } else {
        "UDP: one datagram per sendmmsg message (no UDP_SEGMENT), receiver without \
         UDP_GRO, veth GRO at its kernel default (off without XDP): every datagram is one \
         packet at the DUT, checked against interface counters. TCP: TSO/GRO on (bytes count)."
    }
}
