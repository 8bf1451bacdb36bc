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

use super::{LabInterface, Node, MAC_DUT0, MAC_DUT1, MAC_HV0, MAC_HV1};
use crate::model::lab::LabVm;
use crate::model::stderr::errln;
use crate::proto::NetOp;
use crate::topology::{Fleet, Netns};
use crate::vm::{qemu, Nic, VmSpec};
use anyhow::{Context, Result};
use std::path::Path;
use std::time::Instant;

/// A booted VM DUT: its agent, the vmnet namespace's agent, and the record.
pub struct VmDut {
    pub dut: usize,
    pub vmnet: usize,
    pub record: LabVm,
}

/// Boots the DUT's guest with its NICs on taps in a new vmnet namespace.
/// `log` names the agents' log files.
pub fn boot(
    fleet: &mut Fleet,
    spec: &VmSpec,
    log: &dyn Fn(&str) -> Option<std::path::PathBuf>,
) -> Result<VmDut> {
    let say = |m: &str| errln!("lab: {m}");
    let prepared = qemu::prepare(spec, &say)?;
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
    let nics = [
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
    ];
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
    let record = LabVm {
        role: "dut".into(),
        accel: accel.name().into(),
        accel_reason,
        vcpus: spec.cpus.max(1),
        memory_mib: spec.memory_mib.max(256),
        nic_model: "virtio-net-pci".into(),
        kernel_release: prepared.kernel.release.clone(),
        kernel_origin: prepared.kernel.origin.clone(),
        modules: prepared.modules.clone(),
        missing_modules: prepared.missing.clone(),
        boot_s,
        qemu_pid: fleet.agent(dut).pid,
        host_cpus: Vec::new(),
    };
    Ok(VmDut { dut, vmnet, record })
}

/// The vmnet namespace's steps: each tap bridged with the veth towards
/// its side of the tester, everything up at the lab's MTU.
pub(super) fn vmnet_node(mtu: u32) -> Node {
    let mut n = Node::new();
    n.iface("hv0", MAC_HV0, mtu, &[]);
    n.iface("hv1", MAC_HV1, mtu, &[]);
    for dev in ["tap0", "tap1"] {
        n.ops.push(NetOp::Mtu {
            dev: dev.into(),
            mtu,
        });
        n.ops.push(NetOp::LinkUp { dev: dev.into() });
    }
    for (br, ports) in [("br0", ["hv0", "tap0"]), ("br1", ["hv1", "tap1"])] {
        n.ops.push(NetOp::Bridge {
            name: br.into(),
            ports: ports.iter().map(|p| p.to_string()).collect(),
        });
    }
    // Taps and bridges: no MAC recorded, so no NAPI thread is looked for
    // (a tap has none; qemu's threads do its work).
    for dev in ["tap0", "tap1", "br0", "br1"] {
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
