//! Kernel modules for a guest: the ones a feature needs and everything they
//! depend on, in load order. Dependencies come from each module's own
//! `.modinfo` section (`depends=`), so no `depmod` output is needed (a
//! kernel package does not ship one: `depmod` writes it on install).

use super::error::{fail, Result};
use crate::model::error::{Context, Step};
use object::{Object, ObjectSection};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// A module's name as the kernel knows it: dashes are underscores.
pub fn canonical(name: &str) -> String {
    name.replace('-', "_")
}

/// Every module file under `root` (`lib/modules/RELEASE`), by name.
pub fn index(root: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.join("kernel")];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if dir == root.join("kernel") => {
                return Err(
                    Step::new(format!("reading kernel modules in {}", dir.display()), e).into(),
                )
            }
            Err(_) => continue,
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let file = e.file_name().to_string_lossy().to_string();
            if let Some(stem) = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
                .iter()
                .find_map(|s| file.strip_suffix(s))
            {
                out.insert(canonical(stem), p);
            }
        }
    }
    Ok(out)
}

/// The module file's bytes, decompressed (Debian from trixie on ships
/// `.ko.xz`; busybox's insmod wants plain ELF).
pub fn read_plain(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some(("xz", "xz-utils"))
    } else if name.ends_with(".zst") {
        Some(("zstd", "zstd"))
    } else if name.ends_with(".gz") {
        Some(("gzip", "gzip"))
    } else {
        None
    };
    let Some((tool, package)) = tool else {
        return Ok(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?);
    };
    let out = std::process::Command::new(tool)
        .args(["-dc"])
        .arg(path)
        .output()
        .with_context(|| {
            format!(
                "running {tool} to unpack the kernel module {}; install it with: apt-get install {package}",
                path.display()
            )
        })?;
    if !out.status.success() {
        fail!(
            "{tool} -dc {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// The `depends=` list of a module's `.modinfo` section.
pub fn depends(elf: &[u8]) -> Result<Vec<String>> {
    let file = object::File::parse(elf).context("not an ELF kernel module")?;
    let Some(section) = file.section_by_name(".modinfo") else {
        fail!("no .modinfo section: not a kernel module");
    };
    let data = section.data().context("reading .modinfo")?;
    Ok(data
        .split(|&b| b == 0)
        .filter_map(|kv| kv.strip_prefix(b"depends="))
        .flat_map(|v| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(canonical)
                .collect::<Vec<_>>()
        })
        .filter(|d| !d.is_empty())
        .collect())
}

/// A module to load, with its plain bytes.
pub struct Module {
    pub name: String,
    pub elf: Vec<u8>,
}

/// The modules `wanted` names and their dependencies, each once, every
/// dependency before its users. Names the kernel does not have as modules
/// (built in, or absent from this kernel) are returned apart: the caller
/// decides which of them matter.
pub fn closure(
    index: &BTreeMap<String, PathBuf>,
    wanted: &[&str],
) -> Result<(Vec<Module>, Vec<String>)> {
    let mut order = Vec::new();
    let mut missing = Vec::new();
    let mut seen = HashSet::new();
    for w in wanted {
        visit(index, &canonical(w), &mut seen, &mut order, &mut missing, 0)?;
    }
    Ok((order, missing))
}

fn visit(
    index: &BTreeMap<String, PathBuf>,
    name: &str,
    seen: &mut HashSet<String>,
    order: &mut Vec<Module>,
    missing: &mut Vec<String>,
    depth: usize,
) -> Result<()> {
    if !seen.insert(name.to_string()) {
        return Ok(());
    }
    if depth > 64 {
        fail!("kernel module dependencies deeper than 64 at {name}: a loop?");
    }
    let Some(path) = index.get(name) else {
        missing.push(name.to_string());
        return Ok(());
    };
    let elf = read_plain(path)?;
    for d in depends(&elf).with_context(|| format!("reading {}", path.display()))? {
        visit(index, &d, seen, order, missing, depth + 1)?;
    }
    order.push(Module {
        name: name.to_string(),
        elf,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_canonical() {
        assert_eq!(canonical("virtio-rng"), "virtio_rng");
        assert_eq!(canonical("nft_masq"), "nft_masq");
    }

    #[test]
    fn garbage_is_not_a_module() {
        assert!(depends(b"not an elf").is_err());
    }
}
