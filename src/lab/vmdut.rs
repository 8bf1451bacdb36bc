//! The DUT in a VM (`linerate lab --dut-vm`): the same DUT modes, run by
//! the same agent, inside a guest with its own kernel on its own vCPUs.
//!
//! ```text
//!  gen ns            vmnet ns (this host)                  guest (qemu)
//!  gen0 ── veth ── hv0 ─ br0 ─ tap0 ══ virtio-net ══ dut0 ┐
//!                                                          ├ route/bridge/nat/fw
//!  sink0 ─ veth ── hv1 ─ br1 ─ tap1 ══ virtio-net ══ dut1 ┘
//! ```
//!
//! The guest's NICs carry the namespace DUT's MACs and are renamed to
//! `dut0`/`dut1` by the guest's init, so the lab's addresses, routes and
//! static neighbours are exactly the namespace DUT's. The vmnet namespace
//! is held by an agent of its own, like every lab namespace; qemu runs in
//! it (its taps are made there) and gets SIGKILL when the controller dies,
//! and its taps go with it.

use super::error::{err, fail, Result};
use super::{Addressing, LabInterface, Node, MAC_DUT0, MAC_DUT1, MAC_HV0, MAC_HV1};
use crate::model::error::Context;
use crate::model::lab::{LabNode, LabVm};
use crate::model::stderr::errln;
use crate::proto::NetOp;
use crate::topology::{Fleet, Netns};
use crate::vm::router::{self, Router};
use crate::vm::{qemu, Guest, Nic, VmSpec};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

/// A booted VM DUT: its agent, the vmnet namespace's agent, and the record.
pub struct VmDut {
    pub dut: usize,
    pub vmnet: usize,
    pub record: LabVm,
}

/// Boots the DUT's guest with its NICs on taps in a new vmnet namespace
/// (three with `bond`: the gen side's two are the bond's ports).
/// `log` names the agents' log files.
pub fn boot(
    fleet: &mut Fleet,
    spec: &VmSpec,
    log: &dyn Fn(&str) -> Option<std::path::PathBuf>,
    bond: bool,
) -> Result<VmDut> {
    let say = |m: &str| errln!("lab: {m}");
    let prepared = qemu::prepare(spec, &say)?;
    if bond {
        super::bond::check_modules(&prepared.missing, &prepared.kernel.release)?;
    }
    let (accel, accel_reason) = qemu::choose(spec, &prepared)?;
    if accel == qemu::Accel::Tcg {
        say(&format!(
            "the DUT VM is emulated (TCG: {accel_reason}); its figures are far below what the \
             same kernel forwards on hardware or under KVM"
        ));
    }
    let vmnet = fleet.spawn_local("vmnet", &Netns::New, log("vmnet").as_deref())?;
    let ns_path = format!("/proc/{}/ns/net", fleet.agent(vmnet).pid);
    let ns = std::fs::File::open(&ns_path)
        .with_context(|| format!("opening the vmnet namespace ({ns_path})"))?;
    let nics = if bond {
        super::bond::nics()
    } else {
        lab_nics().to_vec()
    };
    // Its CPUs read "dut-vm CPU0" in verdicts, beside this host's.
    let cmd = qemu::command(
        spec,
        &prepared,
        accel,
        &nics,
        Some(ns),
        &qemu::hostname_arg("dut-vm"),
    );
    let began = Instant::now();
    let host = format!("vm:{}", prepared.kernel.release);
    let dut = fleet
        .spawn_within(
            "dut",
            &host,
            cmd,
            log("dut").as_deref(),
            qemu::boot_timeout(accel),
        )
        .with_context(|| {
            format!(
                "booting the DUT VM (kernel {}, {}, {} vCPU, {} MiB)",
                prepared.kernel.release,
                accel.name(),
                spec.cpus,
                spec.memory_mib
            )
        })?;
    let boot_s = began.elapsed().as_secs_f64();
    let record = prepared.record(
        "dut",
        spec,
        (accel, accel_reason),
        boot_s,
        fleet.agent(dut).pid,
    );
    Ok(VmDut { dut, vmnet, record })
}

/// The guest's two NICs: gen side first, with the namespace DUT's MACs.
fn lab_nics() -> [Nic; 2] {
    [
        Nic {
            tap: "tap0".into(),
            mac: MAC_DUT0,
            guest_name: "dut0".into(),
        },
        Nic {
            tap: "tap1".into(),
            mac: MAC_DUT1,
            guest_name: "dut1".into(),
        },
    ]
}

/// What the user's router (`--dut-image`, `--dut-initrd`) cannot be asked
/// to do: a DUT mode other than routing, or impairments, which linerate's
/// agent applies inside a DUT it configures.
pub fn check_user_router(spec: &super::LabSpec) -> Result<()> {
    let Some(vm) = spec.dut_vm.as_ref().filter(|v| v.guest.is_opaque()) else {
        return Ok(());
    };
    let flag = match &vm.guest {
        Guest::Image(_) => "--dut-image",
        _ => "--dut-initrd",
    };
    if let Some(mode) = spec.dut.filter(|m| *m != super::DutMode::Route) {
        fail!(
            "{flag} boots your own router, which you configured: linerate cannot make it a {} \
             DUT. Drop --dut (your router routes), or use --dut-vm for linerate's own DUT VM in \
             that mode",
            mode.name()
        );
    }
    let impairments = [
        (spec.dut_loss_pct.is_some(), "--dut-loss"),
        (spec.dut_police_pps.is_some(), "--dut-police"),
        (spec.dut_shape.is_some(), "--dut-shape"),
        (spec.dut_remark.is_some(), "--dut-remark"),
        (spec.dut_netem.is_some(), "--dut-delay"),
    ];
    if let Some((_, imp)) = impairments.iter().find(|(on, _)| *on) {
        fail!(
            "{imp} is applied by linerate's agent inside the DUT, and {flag} boots your own \
             router, with no agent inside: configure the impairment in your router, or use \
             --dut-vm"
        );
    }
    Ok(())
}

/// The user's router VM, booted (not yet forwarding) on taps in a new
/// vmnet namespace.
pub struct RouterDut {
    pub vmnet: usize,
    pub router: Router,
    pub record: LabVm,
    began: Instant,
    wait: Duration,
}

/// Boots the user's router (`--dut-image`, `--dut-initrd`) with the lab's
/// two NICs, gen side first; its console goes to the `dut-console` log.
pub fn boot_router(
    fleet: &mut Fleet,
    spec: &VmSpec,
    log: &dyn Fn(&str) -> Option<std::path::PathBuf>,
) -> Result<RouterDut> {
    let say = |m: &str| errln!("lab: {m}");
    qemu::preflight()?;
    let kernel = match &spec.guest {
        Guest::Initrd { .. } => Some(
            crate::vm::kernel::resolve(&spec.kernel, &say)
                .with_context(|| format!("your router's kernel ({})", spec.kernel))?,
        ),
        _ => None,
    };
    let (accel, accel_reason) = router::choose(spec, &say)?;
    if accel == qemu::Accel::Tcg {
        say(&format!(
            "your router VM is emulated (TCG: {accel_reason}); its figures are far below what it \
             forwards on hardware or under KVM"
        ));
    }
    let vmnet = fleet.spawn_local("vmnet", &Netns::New, log("vmnet").as_deref())?;
    let ns_path = format!("/proc/{}/ns/net", fleet.agent(vmnet).pid);
    let ns = std::fs::File::open(&ns_path)
        .with_context(|| format!("opening the vmnet namespace ({ns_path})"))?;
    let args = router::args(
        spec,
        kernel.as_ref().map(|k| k.image.as_path()),
        accel,
        &lab_nics(),
    )?;
    let began = Instant::now();
    let mut router = Router::start(args, ns, log("dut-console").as_deref())?;
    // qemu makes its taps as it starts: the vmnet namespace is wired to
    // them next, so they must be there first.
    wait_for_taps(fleet.agent(vmnet).pid, &mut router)?;
    let (release, origin, what) = match (&spec.guest, &kernel) {
        (Guest::Initrd { initrd, .. }, Some(k)) => (
            k.release.clone(),
            k.origin.clone(),
            format!("your kernel and initramfs {}", initrd.display()),
        ),
        (Guest::Image(img), _) => (
            "the image's own".to_string(),
            img.display().to_string(),
            format!(
                "your disk image {} (a snapshot: never written)",
                img.display()
            ),
        ),
        _ => (String::new(), String::new(), String::new()),
    };
    let record = LabVm {
        role: "dut".into(),
        accel: accel.name().into(),
        accel_reason,
        vcpus: spec.cpus.max(1),
        memory_mib: spec.memory_mib.max(256),
        nic_model: "virtio-net-pci".into(),
        kernel_release: release,
        kernel_origin: origin,
        modules: Vec::new(),
        missing_modules: Vec::new(),
        boot_s: 0.0,
        qemu_pid: router.pid,
        host_cpus: Vec::new(),
        user_router: Some(what),
    };
    Ok(RouterDut {
        vmnet,
        router,
        record,
        began,
        wait: forward_timeout(accel, spec.boot_wait_s),
    })
}

/// The lab's records of the user's router: its NICs as the lab expects
/// them configured (its own interface names are its business).
pub(super) fn router_node(
    pid: u32,
    mtu: u32,
    gw_gen: (IpAddr, IpAddr),
    gw_sink: (IpAddr, IpAddr),
) -> LabNode {
    let nic = |name: &str, mac: [u8; 6], (a4, a6): (IpAddr, IpAddr)| LabInterface {
        name: name.into(),
        mac: crate::netops::mac_string(&mac),
        mtu,
        addresses: vec![format!("{a4}/24"), format!("{a6}/64")],
    };
    LabNode {
        role: "dut".into(),
        pid,
        interfaces: vec![
            nic("nic1", MAC_DUT0, gw_gen),
            nic("nic2", MAC_DUT1, gw_sink),
        ],
    }
}

/// One probe through the router: from an address on one side to one on
/// the other, and what it needs of the router when it does not arrive.
struct Probe {
    v6: bool,
    from: SocketAddr,
    to: SocketAddr,
    tx: UdpSocket,
    rx: UdpSocket,
    needs: String,
    arrived: bool,
}

/// A UDP socket bound to `addr` in the namespace agent `pid` holds.
fn udp_in(pid: u32, addr: SocketAddr) -> Result<UdpSocket> {
    let path = format!("/proc/{pid}/ns/net");
    let ns = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
    let sock = std::thread::scope(|s| {
        s.spawn(|| -> std::io::Result<UdpSocket> {
            crate::sys::enter_netns_file(&ns)?;
            let u = crate::sys::udp_freebind(addr)?;
            u.set_nonblocking(true)?;
            Ok(u)
        })
        .join()
    })
    .map_err(|_| err!("the probe thread for {addr} panicked"))?;
    Ok(sock.with_context(|| format!("a probe socket on {addr}"))?)
}

/// Port of the probes (fresh namespaces: nothing else listens).
const PROBE_PORT: u16 = 47_999;

fn probes(
    fleet: &Fleet,
    gen: usize,
    sink: usize,
    ga: &Addressing,
    sa: &Addressing,
) -> Result<Vec<Probe>> {
    let (gp, sp) = (fleet.agent(gen).pid, fleet.agent(sink).pid);
    let mut v = Vec::new();
    for v6 in [false, true] {
        let fam = if v6 { "IPv6" } else { "IPv4" };
        let (Some(g), Some(s), Some(gf), Some(sf)) =
            (ga.main(v6), sa.main(v6), ga.flow(v6, 0), sa.flow(v6, 0))
        else {
            continue;
        };
        let (gw_g, gw_s, net_g, net_s, flow_g, flow_s) = if v6 {
            (
                "2001:2:0:10::fe/64",
                "2001:2:0:20::fe/64",
                "2001:2:0:10::/64",
                "2001:2:0:20::/64",
                "2001:2:0:11::/64",
                "2001:2:0:21::/64",
            )
        } else {
            (
                "198.18.0.254/24",
                "198.19.0.254/24",
                "198.18.0.0/24",
                "198.19.0.0/24",
                "198.18.1.0/24",
                "198.19.1.0/24",
            )
        };
        let _ = (net_g, net_s);
        let cases = [
            (
                gp,
                g,
                sp,
                s,
                format!(
                "{fam} from the generator ({g}) to the sink ({s}): give the router's first NIC \
                 {gw_g} and its second {gw_s}, and turn {fam} forwarding on"
            ),
            ),
            (
                gp,
                gf,
                sp,
                sf,
                format!("{fam} between the flows' prefixes ({gf} to {sf}): route {flow_s} via {s}"),
            ),
            (
                sp,
                sf,
                gp,
                gf,
                format!(
                    "{fam} back from the sink's flow prefix ({sf} to {gf}): route {flow_g} via {g}"
                ),
            ),
        ];
        for (fp, from, tp, to, needs) in cases {
            let from = SocketAddr::new(from, 0);
            let to = SocketAddr::new(to, PROBE_PORT);
            v.push(Probe {
                v6,
                from,
                to,
                tx: udp_in(fp, from)?,
                rx: udp_in(tp, to)?,
                needs,
                arrived: false,
            });
        }
    }
    Ok(v)
}

/// Waits (at most 30 s) until qemu has made the router's taps in the
/// vmnet namespace of the agent `vp`.
fn wait_for_taps(vp: u32, router: &mut Router) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    while !["tap0", "tap1"]
        .iter()
        .all(|t| dev_packets(vp, t).is_some())
    {
        if let Some(st) = router.exited() {
            fail!(
                "qemu stopped ({st}) before it made the router's NICs; its last lines:\n{}",
                router.console_tail()
            );
        }
        if Instant::now() >= until {
            fail!("qemu made no taps for the router's NICs within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Why the router did not forward the lab's IPv4 by `now`: the probes
/// that did not pass, what its taps (in the vmnet namespace of the agent
/// `vp`) saw, and its console's last lines.
fn not_forwarding(
    r: &RouterDut,
    vp: u32,
    probes: &[Probe],
    main_at: Option<Instant>,
    now: Instant,
) -> super::LabError {
    let deadline = r.began + r.wait;
    let nic = |tap: &str| match dev_packets(vp, tap) {
        // A tap's transmit is the guest's receive.
        Some((rx, tx)) => format!("got {tx} frames from the lab and sent {rx}"),
        None => "(no counters)".into(),
    };
    let sent_nothing = ["tap0", "tap1"]
        .iter()
        .all(|t| dev_packets(vp, t).is_some_and(|(rx, _)| rx == 0));
    let missing: Vec<String> = probes
        .iter()
        .filter(|p| !p.v6 && !p.arrived)
        .map(|p| format!("  - {}", p.needs))
        .collect();
    let when = match main_at {
        Some(m) if now < deadline => format!(
            "{:.0} s after it began to forward from the generator to the sink (its \
             routes do not come later)",
            (now - m).as_secs_f64()
        ),
        _ => format!("within {} s of its boot", r.wait.as_secs()),
    };
    err!(
        "your router did not forward the lab's IPv4 {when}; what did not \
         pass:\n{}\nIts first NIC (gen side, {}) {}; its second (sink side, {}) {}.{}\n\
         Its console's last lines:\n{}",
        missing.join("\n"),
        crate::netops::mac_string(&MAC_DUT0),
        nic("tap0"),
        crate::netops::mac_string(&MAC_DUT1),
        nic("tap1"),
        if sent_nothing {
            " It sent nothing at all: did it boot, and are its first two NICs the \
             virtio-net ones (gen side first)?"
        } else {
            ""
        },
        r.router.console_tail()
    )
}

/// Packets in and out of `dev` in the namespace of `pid`, from
/// /proc/PID/net/dev: (rx, tx).
fn dev_packets(pid: u32, dev: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).ok()?;
    text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != dev {
            return None;
        }
        let f: Vec<u64> = rest
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        Some((*f.get(1)?, *f.get(9)?))
    })
}

/// How long after the main IPv4 path forwards the flows' prefixes may
/// still fail before the router is refused for lacking their routes.
const ROUTES_GRACE: Duration = Duration::from_secs(10);

/// How long the user's router may take to boot and forward.
fn forward_timeout(accel: qemu::Accel, asked: Option<u32>) -> Duration {
    match (asked, accel) {
        (Some(s), _) => Duration::from_secs(u64::from(s)),
        (None, qemu::Accel::Kvm) => Duration::from_secs(120),
        (None, _) => Duration::from_secs(300),
    }
}

/// Waits until the user's router forwards the lab's traffic: IPv4 from
/// the generator to the sink, between the flows' prefixes, and back; then
/// IPv6 the same, for at most 15 s more. Seconds from boot to IPv4
/// forwarding, and notes (IPv6 that did not pass). A router that never
/// forwards IPv4 is an error naming each missing path, its NICs'
/// counters and its console's last lines.
pub fn wait_forwarding(
    fleet: &Fleet,
    (gen, sink, vmnet): (usize, usize, usize),
    (ga, sa): (&Addressing, &Addressing),
    r: &mut RouterDut,
) -> Result<(f64, Vec<String>)> {
    let mut probes = probes(fleet, gen, sink, ga, sa)?;
    let deadline = r.began + r.wait;
    errln!(
        "lab: waiting for your router to forward (at most {} s from its boot)",
        r.wait.as_secs()
    );
    let mut v4_at: Option<f64> = None;
    // When the main IPv4 path (generator to sink) first passed: a router
    // that forwards it but not the flows' prefixes lacks routes, and
    // waiting out its whole boot time would not bring them.
    let mut main_at: Option<Instant> = None;
    let mut said = Instant::now();
    let mut buf = [0u8; 64];
    loop {
        if let Some(st) = r.router.exited() {
            fail!(
                "your router VM stopped ({st}) before it forwarded; its console's last lines:\n{}",
                r.router.console_tail()
            );
        }
        for p in probes.iter_mut().filter(|p| !p.arrived) {
            let _ = p.tx.send_to(b"linerate-router-probe", p.to);
            while let Ok((n, from)) = p.rx.recv_from(&mut buf) {
                if &buf[..n] == b"linerate-router-probe" && from.ip() == p.from.ip() {
                    p.arrived = true;
                }
            }
        }
        if main_at.is_none() && probes.first().is_some_and(|p| !p.v6 && p.arrived) {
            main_at = Some(Instant::now());
        }
        let v4_done = probes.iter().filter(|p| !p.v6).all(|p| p.arrived);
        if v4_done && v4_at.is_none() {
            v4_at = Some(r.began.elapsed().as_secs_f64());
        }
        let all = probes.iter().all(|p| p.arrived);
        let now = Instant::now();
        if let Some(t) = v4_at {
            let v6_late = r.began + Duration::from_secs_f64(t) + Duration::from_secs(15) <= now;
            if all || v6_late {
                let notes = probes
                    .iter()
                    .filter(|p| !p.arrived)
                    .map(|p| format!("IPv6 did not pass through your router: {}; IPv6 tests through it will show the loss", p.needs))
                    .collect::<Vec<_>>();
                for n in &notes {
                    errln!("lab: {n}");
                }
                return Ok((t, notes));
            }
        } else if now >= deadline || main_at.is_some_and(|m| now >= m + ROUTES_GRACE) {
            return Err(not_forwarding(
                r,
                fleet.agent(vmnet).pid,
                &probes,
                main_at,
                now,
            ));
        }
        if said.elapsed() >= Duration::from_secs(30) {
            said = Instant::now();
            errln!(
                "lab: still waiting for your router ({:.0} s since its boot)",
                r.began.elapsed().as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The vmnet namespace's steps: each tap bridged with the veth towards
/// its side of the tester (with `bond`, the bond's second tap on the gen
/// side too), everything up at the lab's MTU.
pub(super) fn vmnet_node(mtu: u32, bond: bool) -> Node {
    let mut n = Node::new();
    n.iface("hv0", MAC_HV0, mtu, &[]);
    n.iface("hv1", MAC_HV1, mtu, &[]);
    let mut taps = vec!["tap0", "tap1"];
    if bond {
        taps.push(super::bond::TAP);
    }
    for &dev in &taps {
        n.ops.push(NetOp::Mtu {
            dev: dev.into(),
            mtu,
        });
        n.ops.push(NetOp::LinkUp { dev: dev.into() });
    }
    let gen_side = if bond {
        &["hv0", "tap0", super::bond::TAP][..]
    } else {
        &["hv0", "tap0"]
    };
    for (br, ports) in [("br0", gen_side), ("br1", &["hv1", "tap1"])] {
        n.ops.push(NetOp::Bridge {
            name: br.into(),
            ports: ports.iter().map(|p| p.to_string()).collect(),
        });
    }
    // Taps and bridges: no MAC recorded, so no NAPI thread is looked for
    // (a tap has none; qemu's threads do its work).
    for dev in taps.into_iter().chain(["br0", "br1"]) {
        n.ifaces.push(LabInterface {
            name: dev.into(),
            mac: String::new(),
            mtu,
            addresses: vec![],
        });
    }
    n
}

/// Pins every thread of the VM's qemu (its vCPUs included) to `cpus` of
/// this host: the DUT's cores of the lab's layout.
pub fn pin(pid: u32, cpus: &[usize]) -> Result<()> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    for t in std::fs::read_dir(&tasks).with_context(|| format!("reading {}", tasks.display()))? {
        let tid: u32 = t?.file_name().to_string_lossy().parse().unwrap_or(0);
        if tid != 0 {
            crate::sys::pin_pid(tid, cpus)
                .with_context(|| format!("pinning qemu thread {tid} to CPUs {cpus:?}"))?;
        }
    }
    Ok(())
}
