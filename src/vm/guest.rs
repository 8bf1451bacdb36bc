//! The guest's first and only filesystem: an initramfs linerate assembles
//! from this host's files: busybox for the init script, this linerate
//! binary (the agent), the network tools the agent runs (ip, tc, nft) with
//! their shared libraries, and the kernel modules the tests need. No
//! distribution image is involved.

use super::cpio::{Entry, Tree};
use super::error::{err, fail, Result};
use super::kernel::Kernel;
use super::modules;
use crate::model::error::Context;
use std::path::{Path, PathBuf};

/// Modules loaded at boot, with their dependencies: the virtio devices
/// first (NICs, the control port, entropy), then what the DUT modes and
/// the kernel-feature tests use. Those the kernel has built in, or does not
/// have, are skipped; the virtio ones must exist one way or the other.
pub const BOOT_MODULES: &[&str] = &["virtio_pci", "virtio_net", "virtio_console", "virtio_rng"];

pub const FEATURE_MODULES: &[&str] = &[
    // libcrc32c (nf_conntrack, nf_nat, nf_tables) asks the crypto layer
    // for "crc32c" at load: a soft dependency modinfo does not list.
    "crc32c_generic",
    "crc32c_intel",
    "bridge",
    "nf_tables",
    "nft_chain_nat",
    "nft_nat",
    "nft_masq",
    "nft_ct",
    "nft_limit",
    "nft_numgen",
    "sch_tbf",
    "sch_htb",
    "sch_netem",
    "8021q",
    "bonding",
    "tls",
    // kTLS's ciphers: tls asks the crypto layer for gcm(aes) or
    // rfc7539(chacha20,poly1305) only when keys are set, and a guest has
    // no modprobe to fetch them then (setsockopt fails with ENOENT).
    // Generic ones first; the x86 ones take over where the vCPU has
    // AES-NI/PCLMUL/AVX (KVM's host CPU, TCG's `max`).
    "aes_generic",
    "ctr",
    "ghash_generic",
    "gcm",
    "chacha_generic",
    "poly1305_generic",
    "chacha20poly1305",
    "aesni_intel",
    "ghash_clmulni_intel",
    "veth",
];

/// The serial port's name the agent talks on (`virtserialport name=`).
pub const PORT_NAME: &str = "linerate.0";

/// What the initramfs carries besides linerate.
const TOOLS: &[(&str, &str)] = &[("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")];

/// The init script: mounts, modules (bonding without its default bond0:
/// a bond is made by the step that wants one), NIC names by MAC from the kernel
/// command line (`linerate.nic=MAC/NAME`), then the agent on the serial
/// port as PID 1. When the agent exits the kernel panics, `panic=-1`
/// reboots, and qemu's `-no-reboot` ends the VM: the guest lives exactly as
/// long as its agent.
const INIT: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /run /tmp /sys/fs/bpf
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
hostname linerate-guest
while read -r m; do
  a=; [ "$m" = bonding ] && a=max_bonds=0
  insmod "/lib/modules/linerate/$m.ko" $a 2>/dev/null || echo "linerate-init: module $m did not load"
done < /lib/modules/linerate/order
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    linerate.hostname=*) hostname "${arg#linerate.hostname=}" ;;
    linerate.nic=*)
      v=${arg#linerate.nic=}; mac=${v%/*}; name=${v#*/}
      for d in /sys/class/net/*; do
        [ -f "$d/address" ] && [ "$(cat "$d/address")" = "$mac" ] && ip link set "${d##*/}" name "$name"
      done ;;
  esac
done
ip link set lo up
for arg in $(cat /proc/cmdline); do
  [ "$arg" = linerate.probe=1 ] && { echo linerate-probe-ok; poweroff -f; }
done
port=
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = "@PORT@" ] && port=/dev/${p##*/}
done
[ -n "$port" ] || { echo "linerate-init: no virtio serial port @PORT@"; poweroff -f; }
echo "linerate-init: agent on $port"
exec /bin/linerate agent --stdio <>"$port" >&0
"#;

/// An assembled initramfs and what it holds.
pub struct Initramfs {
    pub tree: Tree,
    /// Modules in it, in load order.
    pub modules: Vec<String>,
    /// Feature modules this kernel lacks (neither module nor built in).
    pub missing: Vec<String>,
}

/// The shared libraries `bin` loads (absolute paths, the loader included),
/// as this host's `ldd` reports them. A static binary has none.
fn shared_libs(bin: &Path) -> Result<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd")
        .arg(bin)
        .output()
        .context("running ldd to find shared libraries (part of libc-bin)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // "not a dynamic executable" (static): nothing to copy.
        return Ok(Vec::new());
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// Adds `bin` at `dest` with every library it loads at its own path.
fn add_binary(tree: &mut Tree, bin: &Path, dest: &str) -> Result<()> {
    tree.host_file(dest, bin)
        .with_context(|| format!("reading {}", bin.display()))?;
    for lib in shared_libs(bin)? {
        let at = lib.to_string_lossy().to_string();
        if !tree.contains(&at) {
            // Resolved: a symlink's target content at the link's path.
            let real = std::fs::canonicalize(&lib).unwrap_or(lib.clone());
            tree.host_file(&at, &real)
                .with_context(|| format!("reading {}", real.display()))?;
        }
    }
    Ok(())
}

/// Builds the initramfs for `kernel` with `linerate` as the agent.
pub fn assemble(kernel: &Kernel, linerate: &Path) -> Result<Initramfs> {
    let busybox = which("busybox").ok_or_else(|| {
        err!(
            "booting a guest needs busybox for its init; install it with: apt-get install \
             busybox-static"
        )
    })?;
    let mut tree = Tree::new();
    for d in [
        "proc", "sys", "dev", "run", "tmp", "etc", "root", "usr/bin", "usr/sbin", "sbin",
    ] {
        tree.add(d, Entry::Dir);
    }
    tree.add("dev/console", Entry::Char(5, 1));
    tree.add("dev/null", Entry::Char(1, 3));
    add_binary(&mut tree, &busybox, "bin/busybox")?;
    for applet in [
        "sh", "mount", "mkdir", "insmod", "cat", "echo", "poweroff", "hostname", "sleep", "ls",
        "dmesg", "uname",
    ] {
        tree.add(&format!("bin/{applet}"), Entry::Symlink("busybox".into()));
    }
    add_binary(&mut tree, linerate, "bin/linerate")?;
    for (tool, package) in TOOLS {
        let bin = which(tool).ok_or_else(|| {
            err!("the guest needs `{tool}` from this host; install it with: apt-get install {package}")
        })?;
        add_binary(&mut tree, &bin, &format!("sbin/{tool}"))?;
    }
    tree.file("etc/hostname", b"linerate-guest\n".to_vec(), 0o644);
    tree.file(
        "init",
        INIT.replace("@PORT@", PORT_NAME).into_bytes(),
        0o755,
    );
    let (mods, missing) = match &kernel.modules {
        Some(root) => guest_modules(kernel, root)?,
        None => (Vec::new(), Vec::new()),
    };
    let mut order = String::new();
    for m in &mods {
        tree.file(
            &format!("lib/modules/linerate/{}.ko", m.name),
            m.elf.clone(),
            0o644,
        );
        order.push_str(&m.name);
        order.push('\n');
    }
    tree.file("lib/modules/linerate/order", order.into_bytes(), 0o644);
    Ok(Initramfs {
        tree,
        modules: mods.into_iter().map(|m| m.name).collect(),
        missing,
    })
}

/// The modules the guest loads from `root`, the kernel's module tree
/// (the boot and feature modules and what they need, in load order), and
/// those missing that are not built in; a missing boot module is an error.
fn guest_modules(kernel: &Kernel, root: &Path) -> Result<(Vec<modules::Module>, Vec<String>)> {
    let index = modules::index(root)?;
    let mut wanted: Vec<&str> = BOOT_MODULES.to_vec();
    wanted.extend_from_slice(FEATURE_MODULES);
    let (mods, missing) = modules::closure(&index, &wanted)?;
    let builtin = std::fs::read_to_string(root.join("modules.builtin")).unwrap_or_default();
    let is_builtin = |m: &str| {
        builtin.lines().any(|l| {
            Path::new(l)
                .file_name()
                .map(|f| modules::canonical(f.to_string_lossy().trim_end_matches(".ko")))
                .as_deref()
                == Some(m)
        })
    };
    let missing: Vec<String> = missing.into_iter().filter(|m| !is_builtin(m)).collect();
    if let Some(m) = missing
        .iter()
        .find(|m| BOOT_MODULES.contains(&m.as_str()) && m.as_str() != "virtio_rng")
    {
        fail!(
            "kernel {} has no {m} (neither a module in {} nor built in): a guest needs \
             virtio devices",
            kernel.release,
            root.display()
        );
    }
    Ok((mods, missing))
}

/// Writes the initramfs into an anonymous memory file (nothing on disk to
/// leave behind, even after SIGKILL); qemu reads it through
/// `/proc/PID/fd/N` at start.
pub fn to_memfd(initramfs: &Initramfs) -> Result<std::fs::File> {
    let f = crate::sys::memfd_with(&[]).context("creating a memory file for the initramfs")?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &f);
    initramfs
        .tree
        .write_to(&mut w)
        .context("writing the initramfs")?;
    std::io::Write::flush(&mut w)?;
    drop(w);
    Ok(f)
}

#[cfg(test)]
mod tests {
    #[test]
    fn init_ends_in_the_agent_on_the_port() {
        let init = super::INIT.replace("@PORT@", super::PORT_NAME);
        assert!(init.starts_with("#!/bin/sh\n"));
        assert!(init.contains("\"linerate.0\""));
        assert!(init
            .trim_end()
            .ends_with("exec /bin/linerate agent --stdio <>\"$port\" >&0"));
    }
}
