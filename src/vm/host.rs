//! A VM as a plan's host (`[hosts.r1]` with a `vm` table): linerate boots
//! the guest, its agent answers on the virtio serial port like any agent,
//! and its NICs are taps placed where the plan says: in a named network
//! namespace (or this one), bridged to an interface there or given an
//! address of their own, while the guest's side gets the plan's address.
//!
//! ```text
//!  netns "gen" (the plan's)                 guest (qemu)
//!  198.18.5.2/24 on lrvmP.0 ══ virtio-net ══ nic0 198.18.5.1/24
//! ```
//!
//! qemu runs in the first NIC's namespace, where it makes its taps; a tap
//! for another namespace is moved there. The taps are qemu's: they go
//! with it, and qemu gets SIGKILL when the controller dies.

use super::error::{fail, Result};
use super::{qemu, Nic, VmSpec};
use crate::model::error::Context;
use crate::model::lab::LabVm;
use crate::model::stderr::errln;
use crate::proto::{Cidr, NetOp, Request, Response};
use crate::topology::Fleet;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A plan's VM host: the guest and its NICs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmHost {
    pub spec: VmSpec,
    pub nics: Vec<VmNic>,
}

/// One NIC of a VM host: where its tap goes on this machine and what the
/// guest's side is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmNic {
    /// The named namespace the tap goes into (`ip netns`); `None`: the
    /// controller's own.
    pub netns: Option<String>,
    /// A bridge there the tap joins (the guest then shares its segment).
    pub bridge: Option<String>,
    /// The guest's address on this NIC.
    pub address: Option<Cidr>,
    /// An address for the tap itself (this machine's side of the link).
    pub peer: Option<Cidr>,
    /// The guest's default route for this NIC's family, via this address.
    pub gateway: Option<IpAddr>,
    pub mtu: Option<u32>,
}

impl VmNic {
    /// The guest's name for NIC `i` (its init renames it by MAC).
    pub fn guest_name(i: usize) -> String {
        format!("nic{i}")
    }
}

/// Taps made by this process so far: every VM host's tap name is new.
static TAPS: AtomicU32 = AtomicU32::new(0);

/// A tap's name: `lrvm` + this process's id + a count, at most 11 bytes,
/// so a VLAN sub-interface of it (`TAP.100`, made for `--vlan` under
/// socket engines) still fits the kernel's 15.
fn tap_name() -> String {
    let n = TAPS.fetch_add(1, Ordering::Relaxed);
    let name = format!("lrvm{}.{n}", std::process::id());
    if name.len() <= 11 {
        name
    } else {
        format!("lrvm{:x}.{n}", std::process::id() % 0xffff)
    }
}

/// A MAC for NIC `i` of the `n`-th VM host: locally administered, unique
/// within this run.
fn mac(n: u32, i: usize) -> [u8; 6] {
    let pid = std::process::id();
    [0x02, 0x4c, (pid >> 8) as u8, pid as u8, n as u8, i as u8]
}

/// Checks what can be checked before anything starts: qemu and the taps'
/// namespaces.
pub fn preflight(vm: &VmHost) -> Result<()> {
    qemu::preflight()?;
    for ns in vm.nics.iter().filter_map(|n| n.netns.as_deref()) {
        if !Path::new("/run/netns").join(ns).exists() {
            fail!(
                "network namespace '{ns}' for a NIC of the VM does not exist (see `ip netns \
                 list`); create it or name another"
            );
        }
    }
    if !crate::sys::is_root() {
        fail!("a VM host's NICs are taps placed in namespaces: run as root");
    }
    Ok(())
}

/// `ip` with `args`, in namespace `ns` (`None`: this one).
fn ip(ns: Option<&str>, args: &[&str]) -> Result<()> {
    let mut cmd = Command::new("ip");
    if let Some(n) = ns {
        cmd.args(["-n", n]);
    }
    let out = cmd
        .args(args)
        .output()
        .context("running ip (iproute2) to place the VM's taps")?;
    if !out.status.success() {
        fail!(
            "ip {}{}: {}",
            ns.map(|n| format!("-n {n} ")).unwrap_or_default(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Boots the guest of host `name`, places its taps and configures its NICs;
/// the agent's index and the record. `log` names the agent's log file.
pub fn boot(
    fleet: &mut Fleet,
    name: &str,
    vm: &VmHost,
    log: Option<&Path>,
) -> Result<(usize, LabVm)> {
    preflight(vm)?;
    let say = |m: &str| errln!("host {name}: {m}");
    let prepared = qemu::prepare(&vm.spec, &say)?;
    let (accel, accel_reason) = qemu::choose(&vm.spec, &prepared)?;
    if accel == qemu::Accel::Tcg {
        say(&format!(
            "the guest is emulated (TCG: {accel_reason}); its figures are far below what the \
             same kernel does on hardware or under KVM"
        ));
    }
    let n = TAPS.load(Ordering::Relaxed);
    let nics: Vec<Nic> = vm
        .nics
        .iter()
        .enumerate()
        .map(|(i, _)| Nic {
            tap: tap_name(),
            mac: mac(n, i),
            guest_name: VmNic::guest_name(i),
        })
        .collect();
    // qemu makes its taps where it runs: in the first NIC's namespace.
    let home = vm.nics.first().and_then(|n| n.netns.clone());
    let netns = match &home {
        Some(ns) => {
            let p = Path::new("/run/netns").join(ns);
            Some(std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))?)
        }
        None => None,
    };
    let cmd = qemu::command(
        &vm.spec,
        &prepared,
        accel,
        &nics,
        netns,
        &qemu::hostname_arg(name),
    );
    let began = Instant::now();
    let idx = fleet
        .spawn_within(
            name,
            &format!("vm:{name}"),
            cmd,
            log,
            qemu::boot_timeout(accel),
        )
        .with_context(|| {
            format!(
                "booting VM host {name} (kernel {}, {}, {} vCPU, {} MiB)",
                prepared.kernel.release,
                accel.name(),
                vm.spec.cpus,
                vm.spec.memory_mib
            )
        })?;
    let boot_s = began.elapsed().as_secs_f64();
    let qemu_pid = fleet.agent(idx).pid;
    for (nic, tap) in vm.nics.iter().zip(&nics) {
        place_tap(home.as_deref(), nic, &tap.tap, qemu_pid)
            .with_context(|| format!("placing VM host {name}'s tap {}", tap.tap))?;
    }
    configure_guest(fleet, idx, &vm.nics)
        .with_context(|| format!("configuring VM host {name}'s NICs"))?;
    let record = prepared.record(name, &vm.spec, (accel, accel_reason), boot_s, qemu_pid);
    Ok((idx, record))
}

/// Moves the tap from qemu's namespace (`home`) to the NIC's, then brings
/// it up there, in its bridge or with its address.
fn place_tap(home: Option<&str>, nic: &VmNic, tap: &str, qemu_pid: u32) -> Result<()> {
    // qemu made the tap as it started; the guest's agent answering means
    // it is there. Wait a little all the same.
    let until = Instant::now() + Duration::from_secs(10);
    while ip(home, &["link", "show", "dev", tap]).is_err() {
        if Instant::now() >= until {
            fail!("qemu (pid {qemu_pid}) made no tap {tap} within 10 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let at = nic.netns.as_deref();
    if at != home {
        // A pid names the controller's own namespace.
        let to = match at {
            Some(ns) => ns.to_string(),
            None => std::process::id().to_string(),
        };
        ip(home, &["link", "set", "dev", tap, "netns", &to])?;
    }
    if let Some(mtu) = nic.mtu {
        ip(at, &["link", "set", "dev", tap, "mtu", &mtu.to_string()])?;
    }
    if let Some(br) = &nic.bridge {
        ip(at, &["link", "set", "dev", tap, "master", br])?;
    }
    if let Some(peer) = &nic.peer {
        ip(at, &["addr", "add", &peer.to_string(), "dev", tap])?;
    }
    ip(at, &["link", "set", "dev", tap, "up"])
}

/// The guest's side: each NIC's address, MTU and gateway, then up.
fn configure_guest(fleet: &mut Fleet, idx: usize, nics: &[VmNic]) -> Result<()> {
    let mut ops = Vec::new();
    let mut routes = Vec::new();
    for (i, nic) in nics.iter().enumerate() {
        let dev = VmNic::guest_name(i);
        if let Some(mtu) = nic.mtu {
            ops.push(NetOp::Mtu {
                dev: dev.clone(),
                mtu,
            });
        }
        if let Some(a) = nic.address {
            ops.push(NetOp::Addr {
                dev: dev.clone(),
                addr: a.addr,
                prefix: a.prefix,
            });
        }
        ops.push(NetOp::LinkUp { dev });
        if let Some(gw) = nic.gateway {
            let dst = if gw.is_ipv4() {
                IpAddr::from([0u8; 4])
            } else {
                IpAddr::from([0u16; 8])
            };
            routes.push(NetOp::Route {
                dst,
                prefix: 0,
                via: gw,
            });
        }
    }
    ops.extend(routes);
    match fleet.call(idx, &Request::Configure { ops }, Duration::from_secs(30))? {
        Response::Configured => Ok(()),
        Response::Error { message, .. } => fail!("{message}"),
        other => fail!("unexpected answer {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tap_names_fit_and_differ() {
        let a = super::tap_name();
        let b = super::tap_name();
        assert!(a.len() <= 11 && b.len() <= 11, "{a} {b}");
        assert_ne!(a, b);
        assert!(a.starts_with("lrvm"));
    }
}
