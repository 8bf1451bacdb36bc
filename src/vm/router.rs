//! The user's own router as a VM (`lab --dut-image FILE`, `lab --dut-kernel
//! K --dut-initrd FILE`): booted by qemu with the lab's two NICs, gen side
//! first, and nothing of linerate inside. The user configured it; linerate
//! only boots it, keeps its console, and stops it with the lab.

use super::error::{fail, Result};
use super::qemu::{self, Accel, Nic};
use super::{Guest, VmSpec};
use crate::model::error::Context;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// Console lines kept for error messages.
const TAIL_LINES: usize = 40;

/// A booted router: qemu, and the last lines of its serial console.
pub struct Router {
    child: Option<Child>,
    console: Arc<Mutex<VecDeque<String>>>,
    pub pid: u32,
}

/// A disk image's format, from its first bytes: qcow2 or raw.
pub fn image_format(path: &Path) -> Result<&'static str> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut magic = [0u8; 4];
    let n = f.read(&mut magic).unwrap_or(0);
    if n == 4 && &magic == b"QFI\xfb" {
        return Ok("qcow2");
    }
    let known: [(&[u8], &str); 3] = [(b"KDMV", "vmdk"), (b"<<< ", "vdi"), (b"conectix", "vhd")];
    for (m, name) in known {
        if magic.starts_with(&m[..m.len().min(4)]) {
            fail!(
                "{} is a {name} image; linerate boots qcow2 and raw images: convert it with \
                 `qemu-img convert -O qcow2 {} router.qcow2`",
                path.display(),
                path.display()
            );
        }
    }
    Ok("raw")
}

/// qemu's `-drive`/`-chardev` option values take `,,` for a comma.
fn qemu_path(p: &Path) -> String {
    p.display().to_string().replace(',', ",,")
}

/// qemu's arguments for the user's router: its disk (a snapshot: the file
/// is never written) or its kernel and initramfs, the serial console on
/// qemu's stderr, and `nics` in order.
pub fn args(
    spec: &VmSpec,
    kernel: Option<&Path>,
    accel: Accel,
    nics: &[Nic],
) -> Result<Vec<String>> {
    let mut a = qemu::machine_args(spec, accel);
    match &spec.guest {
        Guest::Image(img) => {
            let format = image_format(img)?;
            a.extend([
                "-drive".into(),
                format!(
                    "file={},if=virtio,format={format},snapshot=on",
                    qemu_path(img)
                ),
                "-boot".into(),
                "order=c".into(),
            ]);
        }
        Guest::Initrd { initrd, append } => {
            let Some(k) = kernel else {
                fail!("--dut-initrd needs the router's kernel (--dut-kernel)");
            };
            a.extend([
                "-kernel".into(),
                k.display().to_string(),
                "-initrd".into(),
                initrd.display().to_string(),
                "-append".into(),
                format!("console=ttyS0 {append}").trim().to_string(),
            ]);
        }
        Guest::Agent => fail!("the DUT VM runs linerate's agent: boot it with --dut-vm"),
    }
    a.extend([
        "-chardev".into(),
        "file,id=con,path=/proc/self/fd/2".into(),
        "-serial".into(),
        "chardev:con".into(),
    ]);
    a.extend(qemu::device_args(nics, accel));
    Ok(a)
}

/// The accelerator for the user's router. Auto with a usable /dev/kvm
/// needs the probe, which boots linerate's own guest on the default kernel
/// (once per host boot: the answer is remembered).
pub fn choose(spec: &VmSpec, say: &dyn Fn(&str)) -> Result<(Accel, String)> {
    if let Some(choice) = qemu::without_probe(spec)? {
        return Ok(choice);
    }
    let probe = VmSpec {
        guest: Guest::Agent,
        ..VmSpec::default()
    };
    let p = qemu::prepare(&probe, say).context("preparing the KVM probe guest")?;
    qemu::choose(&probe, &p)
}

impl Router {
    /// Starts qemu with `args` in the network namespace `netns` refers to
    /// (its taps are made there). Its console goes to `log` (if any) and
    /// its last lines are kept. qemu gets SIGKILL when this process dies.
    pub fn start(args: Vec<String>, netns: File, log: Option<&Path>) -> Result<Router> {
        let mut cmd = Command::new(qemu::QEMU);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        crate::sys::netns_on_exec(&mut cmd, netns);
        crate::sys::die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", qemu::QEMU))?;
        let console = Arc::new(Mutex::new(VecDeque::new()));
        let mut file = match log {
            Some(p) => Some(File::create(p).with_context(|| format!("creating {}", p.display()))?),
            None => None,
        };
        if let Some(err) = child.stderr.take() {
            let keep = Arc::clone(&console);
            std::thread::spawn(move || {
                for line in BufReader::new(err).split(b'\n') {
                    let Ok(line) = line else { break };
                    if let Some(f) = file.as_mut() {
                        let _ = f.write_all(&line);
                        let _ = f.write_all(b"\n");
                    }
                    let raw = String::from_utf8_lossy(&line);
                    let text = crate::model::stdout::printable(raw.trim_end_matches('\r'));
                    if let Ok(mut q) = keep.lock() {
                        if q.len() == TAIL_LINES {
                            q.pop_front();
                        }
                        q.push_back(text.trim_end().to_string());
                    }
                }
            });
        }
        let pid = child.id();
        Ok(Router {
            child: Some(child),
            console,
            pid,
        })
    }

    /// qemu's exit, if it has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The console's last lines, indented, or a note that it said nothing.
    pub fn console_tail(&self) -> String {
        let lines: Vec<String> = self
            .console
            .lock()
            .map(|q| q.iter().filter(|l| !l.is_empty()).cloned().collect())
            .unwrap_or_default();
        if lines.is_empty() {
            "  (its serial console, ttyS0, printed nothing)".into()
        } else {
            lines
                .iter()
                .map(|l| format!("  | {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    }

    /// Hands qemu over (to the lab's fleet, which stops it with the
    /// agents).
    pub fn into_child(mut self) -> Option<Child> {
        self.child.take()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_formats_by_their_first_bytes() {
        let dir = std::env::temp_dir().join(format!("lr-img-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let q = dir.join("a.qcow2");
        std::fs::write(&q, b"QFI\xfb\0\0\0\x03rest").unwrap();
        assert_eq!(image_format(&q).unwrap(), "qcow2");
        let r = dir.join("b.img");
        std::fs::write(&r, [0u8; 512]).unwrap();
        assert_eq!(image_format(&r).unwrap(), "raw");
        let v = dir.join("c.vmdk");
        std::fs::write(&v, b"KDMV\x01\0\0\0").unwrap();
        let e = image_format(&v).unwrap_err().to_string();
        assert!(e.contains("vmdk") && e.contains("qemu-img convert"), "{e}");
        assert!(image_format(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_router_boots_from_its_disk_as_a_snapshot_or_from_its_kernel() {
        let dir = std::env::temp_dir().join(format!("lr-img2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("r,1.qcow2");
        std::fs::write(&img, b"QFI\xfb\0\0\0\x03").unwrap();
        let nics = [Nic {
            tap: "tap0".into(),
            mac: [2, 0x4c, 0x52, 0, 0, 2],
            guest_name: "dut0".into(),
        }];
        let spec = VmSpec {
            guest: Guest::Image(img.clone()),
            ..VmSpec::default()
        };
        let a = args(&spec, None, Accel::Tcg, &nics).unwrap().join(" ");
        assert!(
            a.contains("r,,1.qcow2,if=virtio,format=qcow2,snapshot=on"),
            "{a}"
        );
        assert!(!a.contains("-kernel"), "{a}");
        assert!(a.contains("mac=02:4c:52:00:00:02"), "{a}");
        let spec = VmSpec {
            guest: Guest::Initrd {
                initrd: dir.join("i.cpio"),
                append: "router=1".into(),
            },
            ..VmSpec::default()
        };
        let k = dir.join("bzImage");
        let a = args(&spec, Some(&k), Accel::Tcg, &nics).unwrap();
        let i = a.iter().position(|x| x == "-append").unwrap();
        assert_eq!(a[i + 1], "console=ttyS0 router=1");
        assert!(args(&spec, None, Accel::Tcg, &nics).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
