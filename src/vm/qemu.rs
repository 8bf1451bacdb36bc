//! The emulator: qemu's command line for a guest, and the choice between
//! KVM and TCG (KVM where it really boots a guest, decided by a bounded
//! probe; TCG, emulated and slow, everywhere else).

use super::error::{err, fail, Result};
use super::guest::{self, Initramfs};
use super::kernel::Kernel;
use super::VmSpec;
use crate::model::error::Context;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const QEMU: &str = "qemu-system-x86_64";

/// Which accelerator qemu uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM if a probe guest boots with it, else TCG.
    Auto,
    Kvm,
    Tcg,
}

impl Accel {
    pub fn parse(s: &str) -> Result<Self, super::BadSetting> {
        match s {
            "auto" => Ok(Accel::Auto),
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            _ => Err(super::BadSetting(format!(
                "'{s}' is not an accelerator: use auto, kvm or tcg"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// The hostname a guest takes (`linerate.hostname=`): how its CPUs and
/// counters are named beside this host's.
pub fn hostname_arg(name: &str) -> String {
    format!("linerate.hostname={name}")
}

/// One guest NIC: a tap on this host (created by qemu in the namespace it
/// runs in), the guest's MAC, and the name the guest gives it.
#[derive(Debug, Clone)]
pub struct Nic {
    pub tap: String,
    pub mac: [u8; 6],
    pub guest_name: String,
}

/// A guest ready to start: its kernel and initramfs.
pub struct Prepared {
    pub kernel: Kernel,
    /// The initramfs, in a memory file qemu opens through /proc.
    pub initrd: File,
    pub initrd_bytes: u64,
    pub modules: Vec<String>,
    pub missing: Vec<String>,
}

impl Prepared {
    /// The results' record of a guest booted from this (linerate's agent
    /// inside): the DUT VM and a plan's VM hosts alike.
    pub fn record(
        &self,
        role: &str,
        spec: &VmSpec,
        (accel, accel_reason): (Accel, String),
        boot_s: f64,
        qemu_pid: u32,
    ) -> crate::model::lab::LabVm {
        crate::model::lab::LabVm {
            role: role.to_string(),
            accel: accel.name().into(),
            accel_reason,
            vcpus: spec.cpus.max(1),
            memory_mib: spec.memory_mib.max(256),
            nic_model: "virtio-net-pci".into(),
            kernel_release: self.kernel.release.clone(),
            kernel_origin: self.kernel.origin.clone(),
            modules: self.modules.clone(),
            missing_modules: self.missing.clone(),
            boot_s,
            qemu_pid,
            host_cpus: Vec::new(),
            user_router: None,
        }
    }
}

/// Checks what booting a guest needs on this host before anything starts.
pub fn preflight() -> Result<()> {
    if !crate::netops::tool_exists(QEMU) {
        fail!(
            "a VM needs {QEMU}, which is not installed; install it with: apt-get install \
             qemu-system-x86"
        );
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        fail!("a VM's NICs are taps and this host has no /dev/net/tun (modprobe tun)");
    }
    Ok(())
}

/// Resolves the kernel (downloading it if needed) and assembles the
/// initramfs with this linerate as the agent.
pub fn prepare(spec: &VmSpec, say: &dyn Fn(&str)) -> Result<Prepared> {
    preflight()?;
    let kernel = super::kernel::resolve(&spec.kernel, say)?;
    let exe = std::env::current_exe().context("finding the linerate executable for the guest")?;
    let initramfs: Initramfs = guest::assemble(&kernel, &exe)?;
    let initrd = guest::to_memfd(&initramfs)?;
    let initrd_bytes = initrd.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(Prepared {
        kernel,
        initrd,
        initrd_bytes,
        modules: initramfs.modules,
        missing: initramfs.missing,
    })
}

fn mac(m: &[u8; 6]) -> String {
    crate::netops::mac_string(m)
}

/// qemu's arguments for `p` under `accel` (kvm or tcg), with `nics`, and
/// extra kernel arguments. The console (kernel, init, the agent's stderr)
/// goes to qemu's stderr; stdin and stdout are the agent's control port.
pub fn args(
    spec: &VmSpec,
    p: &Prepared,
    accel: Accel,
    nics: &[Nic],
    append: &str,
    probe: bool,
) -> Vec<String> {
    let mut a = machine_args(spec, accel);
    a.extend([
        "-kernel".into(),
        p.kernel.image.display().to_string(),
        "-initrd".into(),
        format!("/proc/{}/fd/{}", std::process::id(), p.initrd.as_raw_fd()),
    ]);
    let mut cmdline = String::from("console=ttyS0 quiet loglevel=4 panic=-1");
    for n in nics {
        cmdline.push_str(&format!(" linerate.nic={}/{}", mac(&n.mac), n.guest_name));
    }
    if probe {
        cmdline.push_str(" linerate.probe=1");
    }
    if !append.is_empty() {
        cmdline.push(' ');
        cmdline.push_str(append);
    }
    a.extend(["-append".into(), cmdline]);
    if probe {
        // The console on stdout, read for the probe's word.
        a.extend(["-serial".into(), "stdio".into()]);
    } else {
        a.extend([
            "-chardev".into(),
            "file,id=con,path=/proc/self/fd/2".into(),
            "-serial".into(),
            "chardev:con".into(),
            "-device".into(),
            "virtio-serial-pci,id=vser0".into(),
            "-chardev".into(),
            "stdio,id=ctl,signal=off".into(),
            "-device".into(),
            format!(
                "virtserialport,bus=vser0.0,chardev=ctl,name={}",
                guest::PORT_NAME
            ),
        ]);
    }
    a.extend(device_args(nics, accel));
    a
}

/// The machine: q35 under `accel`, the spec's vCPUs and memory, nothing
/// qemu would add by default (no display, no NICs, no reboot).
pub(super) fn machine_args(spec: &VmSpec, accel: Accel) -> Vec<String> {
    let kvm = accel == Accel::Kvm;
    vec![
        "-machine".into(),
        format!("q35,accel={}", if kvm { "kvm" } else { "tcg" }),
        "-cpu".into(),
        if kvm { "host" } else { "max" }.into(),
        "-smp".into(),
        spec.cpus.max(1).to_string(),
        "-m".into(),
        format!("{}M", spec.memory_mib.max(256)),
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        // Threads named `CPU N/TCG` or `CPU N/KVM`: how the host's side
        // finds the vCPUs' time (the bottleneck verdict reads it).
        "-name".into(),
        "linerate,debug-threads=on".into(),
    ]
}

/// An entropy source and the NICs, in order: virtio-net on taps (with
/// vhost-net under KVM where the host has it), each at 10 Gbit/s.
pub(super) fn device_args(nics: &[Nic], accel: Accel) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-object".into(),
        "rng-random,id=rng0,filename=/dev/urandom".into(),
        "-device".into(),
        "virtio-rng-pci,rng=rng0".into(),
    ];
    let vhost = accel == Accel::Kvm && std::path::Path::new("/dev/vhost-net").exists();
    for (i, n) in nics.iter().enumerate() {
        a.extend([
            "-netdev".into(),
            format!(
                "tap,id=n{i},ifname={},script=no,downscript=no{}",
                n.tap,
                if vhost { ",vhost=on" } else { "" }
            ),
            "-device".into(),
            format!(
                "virtio-net-pci,netdev=n{i},mac={},speed=10000,duplex=full",
                mac(&n.mac)
            ),
        ]);
    }
    a
}

/// The qemu command for a guest, started in the network namespace `netns`
/// refers to (where its taps are made).
pub fn command(
    spec: &VmSpec,
    p: &Prepared,
    accel: Accel,
    nics: &[Nic],
    netns: Option<File>,
    append: &str,
) -> Command {
    let mut cmd = Command::new(QEMU);
    cmd.args(args(spec, p, accel, nics, append, false));
    if let Some(ns) = netns {
        crate::sys::netns_on_exec(&mut cmd, ns);
    }
    cmd
}

/// How long a guest may take to reach its agent: TCG boots a stock kernel
/// in about 6 s on a quiet 2-core host; a loaded one takes several times
/// that.
pub fn boot_timeout(accel: Accel) -> Duration {
    match accel {
        Accel::Kvm => Duration::from_secs(30),
        _ => Duration::from_secs(150),
    }
}

/// The accelerator to use and why. `Auto` tries KVM (when /dev/kvm opens)
/// with a probe guest that must print its word within 20 s: some hosts
/// (nested virtualisation) open /dev/kvm but hang the guest. A failed
/// probe is remembered until this host reboots.
pub fn choose(spec: &VmSpec, p: &Prepared) -> Result<(Accel, String)> {
    match without_probe(spec)? {
        Some(choice) => Ok(choice),
        None => {
            let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .unwrap_or_default()
                .trim()
                .to_string();
            let memo = super::kernel::cache_dir().ok().map(|d| d.join("kvm-probe"));
            let key = format!("{boot_id} {}", p.kernel.release);
            if let Some(m) = &memo {
                if let Ok(s) = std::fs::read_to_string(m) {
                    if let Some(rest) = s.trim().strip_prefix(&key) {
                        return Ok(match rest.trim() {
                            "ok" => (Accel::Kvm, "KVM booted a probe guest earlier on this host boot".into()),
                            _ => (Accel::Tcg, "/dev/kvm opens, but a probe guest did not boot with it earlier on this host boot (nested virtualisation?)".into()),
                        });
                    }
                }
            }
            let outcome = probe(spec, p, Duration::from_secs(20));
            if let Some(m) = &memo {
                let word = if outcome.is_ok() { "ok" } else { "fail" };
                let _ = crate::model::files::write_atomic(m, format!("{key} {word}\n").as_bytes());
            }
            Ok(match outcome {
                Ok(s) => (Accel::Kvm, format!("KVM booted a probe guest in {s:.1} s")),
                Err(e) => (
                    Accel::Tcg,
                    format!("/dev/kvm opens, but a probe guest did not boot with it ({e}): emulating with TCG"),
                ),
            })
        }
    }
}

/// /dev/kvm opens for reading and writing.
fn kvm_opens() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// The accelerator when no probe guest is needed to decide it: asked for,
/// or auto without a usable /dev/kvm. `None`: auto needs the probe.
pub fn without_probe(spec: &VmSpec) -> Result<Option<(Accel, String)>> {
    let opens = kvm_opens();
    Ok(match spec.accel {
        Accel::Tcg => Some((Accel::Tcg, "asked for (--vm-accel tcg)".into())),
        Accel::Kvm => {
            if !opens {
                fail!("--vm-accel kvm: /dev/kvm does not open here (no KVM, or no permission); use --vm-accel tcg or auto");
            }
            Some((Accel::Kvm, "asked for (--vm-accel kvm)".into()))
        }
        Accel::Auto if !opens => Some((Accel::Tcg, "no usable /dev/kvm on this host".into())),
        Accel::Auto => None,
    })
}

/// Boots the guest with KVM and no NICs until its init prints
/// `linerate-probe-ok`; seconds it took.
fn probe(spec: &VmSpec, p: &Prepared, limit: Duration) -> Result<f64> {
    let began = Instant::now();
    let mut cmd = Command::new(QEMU);
    cmd.args(args(spec, p, Accel::Kvm, &[], "", true))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    crate::sys::die_with_parent(&mut cmd);
    let mut child = cmd.spawn().context("starting the KVM probe guest")?;
    let out = child.stdout.take().context("probe output")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.contains("linerate-probe-ok") {
                let _ = tx.send(());
                break;
            }
        }
    });
    let got = rx.recv_timeout(limit);
    let _ = child.kill();
    let _ = child.wait();
    match got {
        Ok(()) => Ok(began.elapsed().as_secs_f64()),
        Err(_) => Err(err!("no sign of life within {} s", limit.as_secs())),
    }
}
