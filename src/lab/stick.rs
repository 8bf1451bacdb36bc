//! The router-on-a-stick DUT (`--dut stick`): a switch namespace with a
//! plain Linux bridge, and gen, sink and the DUT's one trunk link plugged
//! into it. The generator's traffic is on VLAN A, the sink's on VLAN B;
//! the DUT routes between them on its trunk with an XDP program of its own
//! (engine/xdp/stick.bpf.c) that its agent attaches and holds.
//!
//! No VLAN device exists anywhere (the kernel may lack the 802.1Q driver):
//! the bridge has no vlan_filtering and forwards tagged frames by MAC, and
//! the tags are written by linerate's frame-building engines and rewritten
//! by the DUT's program. Neighbours are static (the DUT's gateway
//! addresses on both VLANs are its trunk's MAC), and so is the bridge's
//! forwarding table, so no frame is ever flooded.

use super::error::{fail, Result};
use super::{cores, link, pinned_devs, routed, steer_receive, v4, v6, Lab, LabSpec, Node, Routed};
use super::{MAC_DUT0, MAC_GEN0, MAC_SINK0};
use crate::model::lab::{LabInterface, LabTopology};
use crate::netops;
use crate::proto::{NetOp, Vlan};
use crate::topology::{Addressing, Fleet, Netns};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

const MAC_SW_GEN: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x11];
const MAC_SW_DUT: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x12];
const MAC_SW_SINK: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x14];

/// What only the stick DUT needs, checked before anything starts.
pub(super) fn preflight(spec: &LabSpec) -> Result<()> {
    let (a, b) = spec.stick_vlans;
    for id in [a, b] {
        if !(1..=4094).contains(&id) {
            fail!(
                "--stick-vlans {a},{b}: VLAN id {id} is outside 1..4094; give two ids in 1..4094"
            );
        }
    }
    if a == b {
        fail!(
            "--stick-vlans {a},{b}: a router on a stick routes between two VLANs; give two \
             different ids (default 10,20)"
        );
    }
    let impairment = [
        (spec.dut_loss_pct.is_some(), "--dut-loss"),
        (spec.dut_police_pps.is_some(), "--dut-police"),
        (spec.dut_shape.is_some(), "--dut-shape"),
        (spec.dut_remark.is_some(), "--dut-remark"),
        (spec.dut_netem.is_some(), "--dut-delay"),
    ];
    if let Some((_, flag)) = impairment.iter().find(|(on, _)| *on) {
        fail!(
            "{flag} acts on the kernel's forwarding (nftables, tc), but the stick DUT forwards \
             in XDP before either sees a frame; drop {flag}, or use --dut route"
        );
    }
    if !netops::tool_exists("bridge") {
        fail!(
            "--dut stick needs `bridge` (iproute2) for the switch's static forwarding table; \
             install it with: apt-get install iproute2"
        );
    }
    Ok(())
}

/// Does this kernel have the 802.1Q driver (built in, loaded, or as a
/// module to load)? Socket tests through the stick would need it.
pub fn kernel_has_8021q() -> bool {
    if Path::new("/sys/module/8021q").exists() || Path::new("/proc/net/vlan").exists() {
        return true;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let dir = format!("/lib/modules/{}", release.trim());
    Path::new(&format!("{dir}/kernel/net/8021q")).exists()
        || std::fs::read_to_string(format!("{dir}/modules.builtin"))
            .is_ok_and(|b| b.contains("8021q"))
}

/// Why sockets (TCP, HTTP, latency probes) cannot cross the stick, and
/// what would make them.
pub fn socket_reason() -> String {
    let driver = if kernel_has_8021q() {
        "This kernel has the 802.1Q driver, but the lab does not build VLAN sub-interfaces \
         for the stick yet"
    } else {
        "This kernel has no 802.1Q driver (CONFIG_VLAN_8021Q), so no VLAN sub-interface can \
         exist"
    };
    format!(
        "the kernel's sockets, which they use, send and receive tagged frames only through \
         VLAN sub-interfaces. {driver}; \
         run them with --dut route (the same routing without tags)."
    )
}

/// Why the suite's socket rows (TCP, HTTP, latency) do not run on the
/// stick, and what would make them run.
pub fn socket_rows_note() -> String {
    format!(
        "TCP, HTTP and latency rows skipped with --dut stick: {}",
        socket_reason()
    )
}

/// Builds the stick lab: gen, dut, switch and sink namespaces.
pub(super) fn build(spec: LabSpec, log_dir: Option<&Path>) -> Result<Lab> {
    let (vlan_a, vlan_b) = spec.stick_vlans;
    let mut fleet = Fleet::new();
    let (gen, dut, sw, sink) = spawn_wired(&mut fleet, log_dir, spec.queues)?;
    let links = vec![
        link("gen/gen0", "switch/sw-gen"),
        link("dut/dut0", "switch/sw-dut"),
        link("sink/sink0", "switch/sw-sink"),
    ];
    let mtu = spec.mtu;
    let r = routed();
    let (g, s) = gen_and_sink(mtu, &r);
    let w = switch(mtu);
    let mut d = Node::new();
    d.iface("dut0", MAC_DUT0, mtu, &[]);
    // Last, once dut0 is up: the program and its BPF link, held by the agent.
    d.ops.push(NetOp::Stick {
        dev: "dut0".into(),
        dut_mac: MAC_DUT0,
        vlan_a,
        mac_a: MAC_GEN0,
        vlan_b,
        mac_b: MAC_SINK0,
    });

    let mut nodes = Vec::new();
    let placed = vec![gen, dut, sw, sink];
    for (idx, node, role) in [
        (gen, g, "gen"),
        (dut, d, "dut"),
        (sw, w, "switch"),
        (sink, s, "sink"),
    ] {
        nodes.push(node.configure(&mut fleet, idx, role)?);
    }
    let plan = cores::plan(&spec.senders.cpus(), &spec.rps.cpus(), true);
    let cores = plan.map(|p| cores::lay_out(&mut fleet, &placed, &nodes, &p));
    let pinned = pinned_devs(cores.as_ref());
    let steering = steer_receive(&mut fleet, &placed, &nodes, &spec, &pinned);
    let topology = LabTopology {
        kind: "dut".into(),
        dut_mode: Some("stick".into()),
        fw_rules: None,
        dut_shape: None,
        dut_netem: None,
        queues: Some(spec.queues),
        dut_remark: None,
        nodes,
        links,
        offloads: "VLAN tags written by the sending engine (packet or AF_XDP) and rewritten by \
                   the DUT's XDP program; the switch's ports have tx VLAN offload off (tags in \
                   the frame, where XDP sees them); sw-dut has GRO on and a pass-all XDP \
                   program (NAPI for the DUT's XDP_TX). Every frame is one packet at the DUT."
            .into(),
        steering,
        cores,
        stick: Some(format!(
            "router on a stick: trunk dut0 (MAC {}) in switch br0 (no vlan_filtering, static \
             fdb); VLAN {vlan_a}: gen 198.18.0.1, gateway 198.18.0.254; VLAN {vlan_b}: sink \
             198.19.0.1, gateway 198.19.0.254; routed in XDP (stick.bpf.c): tag swapped, MACs \
             rewritten, TTL/hop limit - 1, XDP_TX; TTL <= 1 dropped and counted",
            netops::mac_string(&MAC_DUT0)
        )),
        notes: Vec::new(),
        vm: None,
    };
    let (gen_addr, sink_addr) = addressing(&r, spec.stick_vlans);
    Ok(Lab {
        fleet,
        gen,
        sink,
        dut: Some(dut),
        switch: Some(sw),
        gen_addr,
        sink_addr,
        topology,
    })
}

/// Starts the four agents, each in a new namespace, and wires gen, dut and
/// sink to the switch with `queues` queues: (gen, dut, switch, sink).
fn spawn_wired(
    fleet: &mut Fleet,
    log_dir: Option<&Path>,
    queues: u32,
) -> Result<(usize, usize, usize, usize)> {
    let log = |role: &str| log_dir.map(|d| d.join(format!("{role}.log")));
    let gen = fleet.spawn_local("gen", &Netns::New, log("gen").as_deref())?;
    let dut = fleet.spawn_local("dut", &Netns::New, log("dut").as_deref())?;
    let sw = fleet.spawn_local("switch", &Netns::New, log("switch").as_deref())?;
    let sink = fleet.spawn_local("sink", &Netns::New, log("sink").as_deref())?;
    let pid = |i: usize| fleet.agent(i).pid;
    let q = queues;
    netops::create_veth("gen0", MAC_GEN0, pid(gen), "sw-gen", MAC_SW_GEN, pid(sw), q)?;
    netops::create_veth("dut0", MAC_DUT0, pid(dut), "sw-dut", MAC_SW_DUT, pid(sw), q)?;
    netops::create_veth(
        "sink0",
        MAC_SINK0,
        pid(sink),
        "sw-sink",
        MAC_SW_SINK,
        pid(sw),
        q,
    )?;
    Ok((gen, dut, sw, sink))
}

/// The generator's and the sink's addressing: host and flow addresses,
/// each on its VLAN.
fn addressing(r: &Routed, (vlan_a, vlan_b): (u16, u16)) -> (Addressing, Addressing) {
    let tag = |id: u16| Some(Vlan { id, inner: None });
    let gen = Addressing {
        v4: Some(r.gen.0),
        v6: Some(r.gen.1),
        flow_v4: Some(Ipv4Addr::new(198, 18, 1, 0)),
        flow_v6: Some(Ipv6Addr::new(0x2001, 2, 0, 0x11, 0, 0, 0, 0)),
        vlan: tag(vlan_a),
    };
    let sink = Addressing {
        v4: Some(r.sink.0),
        v6: Some(r.sink.1),
        flow_v4: Some(Ipv4Addr::new(198, 19, 1, 0)),
        flow_v6: Some(Ipv6Addr::new(0x2001, 2, 0, 0x21, 0, 0, 0, 0)),
        vlan: tag(vlan_b),
    };
    (gen, sink)
}

/// The switch: the three ports in bridge br0 with static fdb entries,
/// tags in the frame (tx VLAN offload off), and NAPI for the DUT's XDP_TX.
fn switch(mtu: u32) -> Node {
    let mut w = Node::new();
    for (dev, mac) in [
        ("sw-gen", MAC_SW_GEN),
        ("sw-dut", MAC_SW_DUT),
        ("sw-sink", MAC_SW_SINK),
    ] {
        w.iface(dev, mac, mtu, &[]);
        // A veth with tx VLAN offload keeps the tag in skb metadata, and
        // XDP on its peer (the DUT's program, the XDP sink) would see the
        // frame untagged: the switch writes tags into the frame.
        w.ops.push(NetOp::Offload {
            dev: dev.into(),
            feature: "txvlan".into(),
            on: false,
        });
    }
    // The DUT's program sends forwarded frames back by XDP_TX into its
    // veth, whose peer must have NAPI or the frames are lost. GRO gives it
    // NAPI, but this kernel schedules that NAPI for XDP_TX'd frames only
    // when the peer has an XDP program (engine::xdp::stick): GRO on, and a
    // pass-all program the switch's agent holds, on the port facing the DUT.
    w.ops.push(NetOp::Offload {
        dev: "sw-dut".into(),
        feature: "gro".into(),
        on: true,
    });
    w.ops.push(NetOp::XdpPass {
        dev: "sw-dut".into(),
    });
    w.ops.push(NetOp::Bridge {
        name: "br0".into(),
        ports: vec!["sw-gen".into(), "sw-dut".into(), "sw-sink".into()],
    });
    for (dev, mac) in [
        ("sw-gen", MAC_GEN0),
        ("sw-dut", MAC_DUT0),
        ("sw-sink", MAC_SINK0),
    ] {
        w.ops.push(NetOp::Fdb {
            dev: dev.into(),
            mac,
        });
    }
    w.ifaces.push(LabInterface {
        name: "br0".into(),
        mac: String::new(),
        mtu,
        addresses: vec![],
    });
    w
}

/// The generator and the sink: each on its VLAN's side of the trunk, the
/// other side's prefixes routed via the DUT's gateway address on its VLAN.
fn gen_and_sink(mtu: u32, r: &Routed) -> (Node, Node) {
    let (mut g, mut s) = (Node::new(), Node::new());
    let ((gen4, gen6), (sink4, sink6)) = (r.gen, r.sink);
    // The DUT's gateway address on each VLAN: held by no interface (the
    // stack cannot see the VLANs), answered for by static neighbours.
    let ((gw_a4, gw_a6), (gw_b4, gw_b6)) = (r.gw_gen, r.gw_sink);
    g.iface("gen0", MAC_GEN0, mtu, &[(gen4, 24), (gen6, 64)]);
    s.iface("sink0", MAC_SINK0, mtu, &[(sink4, 24), (sink6, 64)]);
    g.route(v4(198, 19, 0, 0), 16, gw_a4);
    g.route(v6(0x20, 0), 60, gw_a6);
    s.route(v4(198, 18, 0, 0), 16, gw_b4);
    s.route(v6(0x10, 0), 60, gw_b6);
    g.neigh("gen0", gw_a4, MAC_DUT0);
    g.neigh("gen0", gw_a6, MAC_DUT0);
    s.neigh("sink0", gw_b4, MAC_DUT0);
    s.neigh("sink0", gw_b6, MAC_DUT0);
    g.local(v4(198, 18, 1, 0), 24);
    g.local(v6(0x11, 0), 64);
    s.local(v4(198, 19, 1, 0), 24);
    s.local(v6(0x21, 0), 64);
    for n in [&mut g, &mut s] {
        n.sysctl("net.ipv4.conf.all.rp_filter", "0");
    }
    (g, s)
}
