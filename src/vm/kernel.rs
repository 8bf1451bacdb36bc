//! Guest kernels: a path to a kernel image, a Debian kernel package file,
//! or a Debian release (`debian:bookworm`, `debian:stable`), whose kernel
//! linerate downloads as Debian's own package (with this host's apt, from
//! its Debian mirror) and keeps in a cache.

use super::error::{err, fail, Result, VmError};
use crate::model::error::Context;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// Where a guest kernel comes from, as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// `debian:RELEASE`: Debian's kernel package of that release.
    Debian(String),
    /// A kernel package file (`.deb`).
    Deb(PathBuf),
    /// A kernel image (bzImage); its modules from /lib/modules/RELEASE of
    /// this host when present.
    Image(PathBuf),
}

/// The default guest kernel: Debian's stable kernel.
pub const DEFAULT_KERNEL: &str = "debian:stable";

impl KernelSource {
    pub fn parse(s: &str) -> Result<Self, super::BadSetting> {
        if let Some(rel) = s.strip_prefix("debian:") {
            let ok = !rel.is_empty()
                && rel.len() <= 32
                && rel
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !ok {
                return Err(super::BadSetting(format!(
                    "'{rel}' is not a Debian release name: use e.g. debian:bookworm, debian:trixie \
                     or debian:stable"
                )));
            }
            return Ok(KernelSource::Debian(rel.to_string()));
        }
        if s.is_empty() {
            return Err(super::BadSetting(
                "an empty kernel: give a path or debian:RELEASE".into(),
            ));
        }
        let p = PathBuf::from(s);
        if s.ends_with(".deb") {
            Ok(KernelSource::Deb(p))
        } else {
            Ok(KernelSource::Image(p))
        }
    }
}

impl std::fmt::Display for KernelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelSource::Debian(r) => write!(f, "debian:{r}"),
            KernelSource::Deb(p) | KernelSource::Image(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub image: PathBuf,
    /// `lib/modules/RELEASE` of this kernel, if it has modules.
    pub modules: Option<PathBuf>,
    /// `uname -r` of the guest.
    pub release: String,
    /// Where it came from, for the results (package and mirror, or path).
    pub origin: String,
}

/// linerate's cache for guest kernels: `$LINERATE_CACHE`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/linerate`, then `vm/`.
pub fn cache_dir() -> Result<PathBuf> {
    let base = match std::env::var_os("LINERATE_CACHE") {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(d) => PathBuf::from(d).join("linerate"),
            None => {
                let home = std::env::var_os("HOME").ok_or_else(|| {
                    err!("no HOME to keep guest kernels in: set LINERATE_CACHE to a directory")
                })?;
                PathBuf::from(home).join(".cache/linerate")
            }
        },
    };
    let dir = base.join("vm");
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the guest kernel cache {}", dir.display()))?;
    crate::model::files::trusted_dir(&dir).map_err(|e| VmError::Other(e.into()))?;
    Ok(dir)
}

/// The release a bzImage names in its setup header (`kernel_version`):
/// the first word of the version string at 0x200 + the offset at 0x20e.
pub fn image_release(image: &[u8]) -> Option<String> {
    if image.len() < 0x210 || &image[0x202..0x206] != b"HdrS" {
        return None;
    }
    let off = u16::from_le_bytes([image[0x20e], image[0x20f]]) as usize + 0x200;
    let s = image.get(off..off.checked_add(256)?.min(image.len()))?;
    let end = s.iter().position(|&b| b == 0 || b == b' ')?;
    let r = std::str::from_utf8(&s[..end]).ok()?;
    (!r.is_empty()).then(|| r.to_string())
}

/// Resolves `src` to a kernel on this host, downloading it if needed.
/// `say` reports slow steps (a download) to the user.
pub fn resolve(src: &KernelSource, say: &dyn Fn(&str)) -> Result<Kernel> {
    match src {
        KernelSource::Image(p) => {
            let bytes = std::fs::read(p)
                .with_context(|| format!("reading the kernel image {}", p.display()))?;
            let release = image_release(&bytes).ok_or_else(|| {
                err!(
                    "{} is not an x86 Linux kernel image (bzImage): no setup header. Give a \
                     vmlinuz, a kernel .deb or debian:RELEASE",
                    p.display()
                )
            })?;
            let modules = Path::new("/lib/modules").join(&release);
            Ok(Kernel {
                image: p.clone(),
                modules: modules.join("kernel").is_dir().then_some(modules),
                release,
                origin: p.display().to_string(),
            })
        }
        KernelSource::Deb(p) => {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(p)
                .with_context(|| format!("reading the kernel package {}", p.display()))?;
            let key = format!(
                "deb-{}-{}-{}",
                p.file_stem()
                    .map(|s| s.to_string_lossy().replace(
                        |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-' && c != '_',
                        "_"
                    ))
                    .unwrap_or_default(),
                meta.size(),
                meta.mtime()
            );
            let dir = cache_dir()?.join("kernels").join(key);
            if let Ok(k) = load(&dir) {
                return Ok(k);
            }
            say(&format!("unpacking the kernel package {}", p.display()));
            install_deb(p, &dir, &p.display().to_string())?;
            load(&dir)
        }
        KernelSource::Debian(rel) => {
            let dir = cache_dir()?.join("kernels").join(format!("debian-{rel}"));
            let cached = load(&dir).ok();
            let fresh = std::fs::metadata(dir.join("origin"))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age < Duration::from_secs(7 * 86_400));
            if let (Some(k), true) = (&cached, fresh) {
                return Ok(k.clone());
            }
            match fetch_debian(rel, &dir, say) {
                Ok(()) => load(&dir),
                Err(e) => match cached {
                    Some(k) => {
                        say(&format!(
                            "could not refresh debian:{rel}'s kernel ({e:#}); using the cached {}",
                            k.release
                        ));
                        Ok(k)
                    }
                    None => Err(e),
                },
            }
        }
    }
}

/// A cached kernel directory: `vmlinuz`, `modules/` and `release`, `origin`.
fn load(dir: &Path) -> Result<Kernel> {
    let release = std::fs::read_to_string(dir.join("release"))?
        .trim()
        .to_string();
    let origin = std::fs::read_to_string(dir.join("origin"))?
        .trim()
        .to_string();
    let image = dir.join("vmlinuz");
    if !image.is_file() || release.is_empty() {
        fail!("incomplete kernel cache {}", dir.display());
    }
    let modules = dir.join("modules");
    Ok(Kernel {
        image,
        modules: modules.join("kernel").is_dir().then_some(modules),
        release,
        origin,
    })
}

fn need(tool: &str, package: &str, why: &str) -> Result<()> {
    if crate::netops::tool_exists(tool) {
        return Ok(());
    }
    fail!(
        "{why} needs `{tool}`, which is not installed; install it with: apt-get install {package}"
    )
}

/// Unpacks a kernel package into `dir` (replacing it): its bzImage as
/// `vmlinuz`, its modules as `modules/`.
fn install_deb(deb: &Path, dir: &Path, origin: &str) -> Result<()> {
    need("dpkg-deb", "dpkg", "unpacking a Debian kernel package")?;
    let started = SystemTime::now();
    let parent = dir.parent().context("kernel cache directory")?;
    std::fs::create_dir_all(parent)?;
    let work = parent.join(format!(".unpack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(work.join("root"))
        .output()
        .context("running dpkg-deb")?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&work);
        fail!(
            "dpkg-deb -x {} failed: {}",
            deb.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let boot = work.join("root/boot");
    let image = std::fs::read_dir(&boot)
        .ok()
        .and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
            })
        })
        .ok_or_else(|| {
            err!(
                "{} holds no /boot/vmlinuz-*: not a kernel image package",
                deb.display()
            )
        })?;
    let release = image
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .trim_start_matches("vmlinuz-")
                .to_string()
        })
        .unwrap_or_default();
    std::fs::rename(&image, work.join("vmlinuz"))?;
    let mods = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|m| work.join("root").join(m).join(&release))
        .find(|p| p.is_dir());
    if let Some(m) = mods {
        std::fs::rename(m, work.join("modules"))?;
    }
    std::fs::remove_dir_all(work.join("root"))?;
    std::fs::write(work.join("release"), format!("{release}\n"))?;
    std::fs::write(work.join("origin"), format!("{origin}\n"))?;
    // Two linerate processes may unpack the same kernel at once (two labs
    // started together on a fresh host): the first to finish puts its copy
    // in place, the other keeps that one rather than remove it under a
    // guest that may be booting from it. An older copy is replaced.
    if std::fs::rename(&work, dir).is_ok() {
        return Ok(());
    }
    let theirs_is_new = std::fs::metadata(dir.join("origin"))
        .and_then(|m| m.modified())
        .is_ok_and(|t| t >= started);
    if theirs_is_new && load(dir).is_ok() {
        let _ = std::fs::remove_dir_all(&work);
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&work, dir)
        .with_context(|| format!("moving the kernel into {}", dir.display()))?;
    Ok(())
}

/// This host's Debian mirror (the first `…/debian` URI apt is set up with),
/// `$LINERATE_DEBIAN_MIRROR`, or deb.debian.org.
fn mirror() -> String {
    if let Ok(m) = std::env::var("LINERATE_DEBIAN_MIRROR") {
        return m;
    }
    let mut texts = Vec::new();
    if let Ok(s) = std::fs::read_to_string("/etc/apt/sources.list") {
        texts.push(s);
    }
    if let Ok(d) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<_> = d.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            if f.extension().is_some_and(|e| e == "sources" || e == "list") {
                if let Ok(s) = std::fs::read_to_string(&f) {
                    texts.push(s);
                }
            }
        }
    }
    texts
        .iter()
        .flat_map(|t| t.split_whitespace())
        .find(|w| {
            (w.starts_with("http://") || w.starts_with("https://"))
                && w.trim_end_matches('/').ends_with("/debian")
        })
        .map(|w| w.trim_end_matches('/').to_string())
        .unwrap_or_else(|| "http://deb.debian.org/debian".to_string())
}

/// apt's options for a private apt tree under `work` that reads only the
/// sources `list` and no index it does not need.
fn apt_options(list: &Path, work: &Path) -> Vec<String> {
    vec![
        format!("Dir::Etc::SourceList={}", list.display()),
        format!("Dir::Etc::SourceParts={}", work.join("parts").display()),
        format!("Dir::State::Lists={}", work.join("lists").display()),
        format!("Dir::Cache={}", work.join("cache").display()),
        "Dir::State::Status=/dev/null".into(),
        "APT::Sandbox::User=root".into(),
        "Acquire::Languages=none".into(),
        "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".into(),
        "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false".into(),
        "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false".into(),
        "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false".into(),
        "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false".into(),
    ]
}

/// Downloads Debian `rel`'s kernel (the package `linux-image-amd64` points
/// to) into `dir`, with apt working in a private directory: this host's
/// package state is not touched.
fn fetch_debian(rel: &str, dir: &Path, say: &dyn Fn(&str)) -> Result<()> {
    let why = format!("fetching debian:{rel}'s kernel");
    need("apt-get", "apt", &why)?;
    need("dpkg-deb", "dpkg", &why)?;
    let keyring = Path::new("/usr/share/keyrings/debian-archive-keyring.gpg");
    if !keyring.exists() {
        fail!(
            "{why} needs Debian's archive keys ({}); install them with: apt-get install \
             debian-archive-keyring, or give --dut-kernel a kernel file",
            keyring.display()
        );
    }
    let mirror = mirror();
    say(&format!(
        "downloading debian:{rel}'s kernel package from {mirror}"
    ));
    let parent = dir.parent().context("kernel cache directory")?;
    std::fs::create_dir_all(parent)?;
    let work = parent.join(format!(".apt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    for d in ["lists/partial", "cache/archives/partial", "parts", "dl"] {
        std::fs::create_dir_all(work.join(d))?;
    }
    let list = work.join("sources.list");
    std::fs::write(
        &list,
        format!(
            "deb [signed-by={}] {mirror} {rel} main\n",
            keyring.display()
        ),
    )?;
    let opts = apt_options(&list, &work);
    let apt = |tool: &str, args: &[&str]| -> Result<String> {
        let mut c = Command::new(tool);
        for o in &opts {
            c.arg("-o").arg(o);
        }
        let out = c
            .args(args)
            .current_dir(work.join("dl"))
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .with_context(|| format!("running {tool}"))?;
        if !out.status.success() {
            fail!(
                "`{tool} {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    };
    let result = (|| -> Result<()> {
        apt("apt-get", &["-q", "update"])
            .with_context(|| format!("reading debian:{rel}'s package lists from {mirror}"))?;
        let show = apt("apt-cache", &["show", "linux-image-amd64"])
            .with_context(|| format!("debian:{rel} has no linux-image-amd64 for this mirror"))?;
        let pkg = show
            .lines()
            .find_map(|l| l.strip_prefix("Depends:"))
            .and_then(|d| {
                d.split(',')
                    .map(|p| p.split_whitespace().next().unwrap_or(""))
                    .find(|p| p.starts_with("linux-image-"))
            })
            .map(str::to_string)
            .ok_or_else(|| err!("linux-image-amd64 of debian:{rel} names no kernel package"))?;
        apt("apt-get", &["-q", "download", &pkg]).with_context(|| format!("downloading {pkg}"))?;
        let deb = std::fs::read_dir(work.join("dl"))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .ok_or_else(|| err!("apt-get download {pkg} left no .deb"))?;
        install_deb(&deb, dir, &format!("{pkg} of debian:{rel} from {mirror}"))
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse() {
        assert_eq!(
            KernelSource::parse("debian:bookworm").unwrap(),
            KernelSource::Debian("bookworm".into())
        );
        assert!(KernelSource::parse("debian:").is_err());
        assert!(KernelSource::parse("debian:../etc").is_err());
        assert!(matches!(
            KernelSource::parse("/tmp/k.deb").unwrap(),
            KernelSource::Deb(_)
        ));
        assert!(matches!(
            KernelSource::parse("/boot/vmlinuz-6.1").unwrap(),
            KernelSource::Image(_)
        ));
    }

    #[test]
    fn release_from_a_setup_header() {
        let mut img = vec![0u8; 0x600];
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x20e..0x210].copy_from_slice(&0x300u16.to_le_bytes());
        let v = b"6.1.0-56-amd64 (debian-kernel@lists.debian.org) #1 SMP\0";
        img[0x500..0x500 + v.len()].copy_from_slice(v);
        assert_eq!(image_release(&img).as_deref(), Some("6.1.0-56-amd64"));
        assert_eq!(image_release(&img[..0x300]), None);
        assert_eq!(image_release(b"MZ nothing"), None);
    }
}
