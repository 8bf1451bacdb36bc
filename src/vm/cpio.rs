//! The initramfs format: a cpio archive in the "newc" layout the kernel
//! unpacks into its first root filesystem (Documentation/driver-api/
//! early-userspace/buffer-format.rst): a 110-byte ASCII header per entry,
//! the name, the data, each padded to 4 bytes, and a `TRAILER!!!` entry.
//! Parents come before their children, which is all the kernel asks.

use std::collections::BTreeMap;
use std::io::{self, Write};

/// One entry of the tree, by its path without a leading `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File {
        data: Data,
        mode: u32,
    },
    Symlink(String),
    /// A character device node (major, minor), e.g. /dev/console.
    Char(u32, u32),
}

/// What a file holds: bytes made here, or a file of this host's, read
/// when the archive is written (so a 100 MB binary is never held twice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    Bytes(Vec<u8>),
    Host(std::path::PathBuf),
}

/// A file tree to write as one archive; parent directories are added for
/// every path.
#[derive(Debug, Default)]
pub struct Tree {
    entries: BTreeMap<String, Entry>,
}

impl Tree {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `entry` at `path` (`/` or not at the start), with its parents.
    /// A later entry at the same path replaces an earlier one.
    pub fn add(&mut self, path: &str, entry: Entry) {
        let path = path.trim_start_matches('/').trim_end_matches('/');
        let mut at = 0;
        while let Some(i) = path[at..].find('/') {
            let parent = &path[..at + i];
            if !parent.is_empty() {
                self.entries.entry(parent.to_string()).or_insert(Entry::Dir);
            }
            at += i + 1;
        }
        if !path.is_empty() {
            self.entries.insert(path.to_string(), entry);
        }
    }

    pub fn file(&mut self, path: &str, data: Vec<u8>, mode: u32) {
        self.add(
            path,
            Entry::File {
                data: Data::Bytes(data),
                mode,
            },
        );
    }

    /// A copy of this host's file `src` at `path` (its mode kept).
    pub fn host_file(&mut self, path: &str, src: &std::path::Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(src)?.permissions().mode();
        self.add(
            path,
            Entry::File {
                data: Data::Host(src.to_path_buf()),
                mode,
            },
        );
        Ok(())
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(path.trim_start_matches('/'))
    }

    /// Bytes of file data in the tree (host files by their size now).
    pub fn data_bytes(&self) -> u64 {
        self.entries
            .values()
            .map(|e| match e {
                Entry::File {
                    data: Data::Bytes(b),
                    ..
                } => b.len() as u64,
                Entry::File {
                    data: Data::Host(p),
                    ..
                } => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
                _ => 0,
            })
            .sum()
    }

    /// Writes the archive. BTreeMap order puts `a` before `a/b`, so every
    /// directory comes before what it holds.
    pub fn write_to<W: Write>(&self, w: &mut W) -> io::Result<()> {
        for (ino, (path, e)) in (1u32..).zip(&self.entries) {
            let nlink = if matches!(e, Entry::Dir) { 2 } else { 1 };
            let name = path.as_bytes();
            match e {
                Entry::Dir => write_entry(w, ino, 0o040755, nlink, name, &[], (0, 0))?,
                Entry::File {
                    data: Data::Bytes(b),
                    mode,
                } => write_entry(w, ino, 0o100000 | (mode & 0o7777), 1, name, b, (0, 0))?,
                Entry::File {
                    data: Data::Host(src),
                    mode,
                } => {
                    // Read whole: a file that changes size while the
                    // archive is written must not corrupt it.
                    let b = std::fs::read(src).map_err(|e| {
                        io::Error::new(e.kind(), format!("reading {}: {e}", src.display()))
                    })?;
                    write_entry(w, ino, 0o100000 | (mode & 0o7777), 1, name, &b, (0, 0))?
                }
                Entry::Symlink(target) => {
                    write_entry(w, ino, 0o120777, 1, name, target.as_bytes(), (0, 0))?
                }
                Entry::Char(ma, mi) => write_entry(w, ino, 0o020600, 1, name, &[], (*ma, *mi))?,
            }
        }
        write_entry(w, 0, 0, 1, b"TRAILER!!!", &[], (0, 0))
    }
}

fn pad4<W: Write>(w: &mut W, len: usize) -> io::Result<()> {
    let pad = (4 - len % 4) % 4;
    w.write_all(&[0u8; 3][..pad])
}

fn write_entry<W: Write>(
    w: &mut W,
    ino: u32,
    mode: u32,
    nlink: u32,
    name: &[u8],
    data: &[u8],
    rdev: (u32, u32),
) -> io::Result<()> {
    let size = u32::try_from(data.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file over 4 GiB"))?;
    let namesize = name.len() + 1;
    let header = format!(
        "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{size:08x}{:08x}{:08x}{:08x}{:08x}{namesize:08x}{:08x}",
        0, 0, 0, 0, 0, rdev.0, rdev.1, 0
    );
    w.write_all(header.as_bytes())?;
    w.write_all(name)?;
    w.write_all(&[0])?;
    pad4(w, header.len() + namesize)?;
    w.write_all(data)?;
    pad4(w, data.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_first_and_padded() {
        let mut t = Tree::new();
        t.file("/bin/sh", b"#!x".to_vec(), 0o755);
        t.add("dev/console", Entry::Char(5, 1));
        t.add("lib64/ld.so", Entry::Symlink("/lib/ld.so".into()));
        let mut out = Vec::new();
        t.write_to(&mut out).unwrap();
        assert_eq!(out.len() % 4, 0);
        let s = String::from_utf8_lossy(&out);
        let names: Vec<_> = [
            "bin\0",
            "bin/sh\0",
            "dev\0",
            "dev/console\0",
            "TRAILER!!!\0",
        ]
        .iter()
        .map(|n| s.find(n).unwrap_or_else(|| panic!("{n:?} missing")))
        .collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        // Every header starts on a 4-byte boundary with the newc magic.
        assert_eq!(s.matches("070701").count(), 7);
        for (i, _) in s.match_indices("070701") {
            assert_eq!(i % 4, 0);
        }
        assert_eq!(t.data_bytes(), 3);
    }

    /// busybox's cpio reads what we write back, byte for byte.
    #[test]
    fn busybox_lists_and_extracts_it() {
        let Some(bb) = ["/usr/bin/busybox", "/bin/busybox"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
        else {
            crate::model::stderr::errln!("skipping: no busybox to read the archive back");
            return;
        };
        let mut t = Tree::new();
        t.file("a/b/c.txt", b"hello, odd length".to_vec(), 0o644);
        t.file("x", vec![7u8; 5], 0o600);
        t.add("a/l", Entry::Symlink("b/c.txt".into()));
        let mut out = Vec::new();
        t.write_to(&mut out).unwrap();
        let dir = std::env::temp_dir().join(format!("lr-cpio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new(bb)
            .args(["cpio", "-i", "-d"])
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&out).unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(
            std::fs::read(dir.join("a/b/c.txt")).unwrap(),
            b"hello, odd length"
        );
        assert_eq!(std::fs::read(dir.join("x")).unwrap(), vec![7u8; 5]);
        assert_eq!(
            std::fs::read_link(dir.join("a/l")).unwrap(),
            std::path::PathBuf::from("b/c.txt")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
