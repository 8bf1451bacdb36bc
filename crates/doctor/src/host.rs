//! Reading a host's sysfs/procfs under a root directory, and remembering what
//! was read so `capture` can reproduce it.
//!
//! This module owns every filesystem access `inspect` makes; checks never
//! touch `std::fs` directly. That is what makes a capture complete: whatever
//! a check saw went through here and was recorded. It reads only file
//! contents and directory listings, never symlink targets, so a capture (plain
//! files and directories) and a fixture tree behave exactly like the live host.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Larger files are truncated: /proc/interrupts on a big host is about a
/// megabyte, a kernel config a few hundred kilobytes. The cap keeps an odd
/// root (a device node, a huge file) from eating memory.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// An entry recorded for a capture.
#[derive(Debug, Clone)]
pub(crate) enum Recorded {
    File(Vec<u8>),
    Dir,
}

/// Read-only view of a host rooted at a directory.
pub(crate) struct Host {
    root: PathBuf,
    /// Root-relative path (no leading slash) to what was read; `None` when
    /// not capturing, so ordinary runs keep no copies.
    recorded: Option<RefCell<BTreeMap<String, Recorded>>>,
}

impl Host {
    pub(crate) fn new(root: &Path, record: bool) -> Self {
        Host {
            root: root.to_path_buf(),
            recorded: record.then(|| RefCell::new(BTreeMap::new())),
        }
    }

    /// The path as it is named on the host: `/` + the root-relative path.
    pub(crate) fn host_path(rel: &str) -> String {
        format!("/{rel}")
    }

    fn full(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn record(&self, rel: &str, entry: Recorded) {
        if let Some(map) = &self.recorded {
            map.borrow_mut().insert(rel.to_string(), entry);
        }
    }

    /// Takes the recorded entries (empty when not recording).
    pub(crate) fn take_recorded(&self) -> BTreeMap<String, Recorded> {
        match &self.recorded {
            Some(map) => std::mem::take(&mut *map.borrow_mut()),
            None => BTreeMap::new(),
        }
    }

    /// Raw bytes of a file, at most `MAX_FILE_BYTES`.
    pub(crate) fn read_bytes(&self, rel: &str) -> io::Result<Vec<u8>> {
        let path = self.full(rel);
        // sysfs and procfs attributes are regular files; a FIFO in an odd
        // root would block `open` forever and a device node never ends.
        if !fs::metadata(&path)?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let file = fs::File::open(path)?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
        self.record(rel, Recorded::File(bytes.clone()));
        Ok(bytes)
    }

    /// File contents as text; invalid UTF-8 is replaced, not an error, since
    /// sysfs values are ASCII and anything else is an odd file to tolerate.
    pub(crate) fn read_string(&self, rel: &str) -> io::Result<String> {
        let bytes = self.read_bytes(rel)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Trimmed contents, or `None` when the file cannot be read (missing,
    /// permission, or an attribute the driver refuses, like `speed` on a
    /// down link).
    pub(crate) fn read_trimmed(&self, rel: &str) -> Option<String> {
        self.read_string(rel).ok().map(|s| s.trim().to_string())
    }

    /// Whether `rel` is a directory (following symlinks, as sysfs links are).
    pub(crate) fn is_dir(&self, rel: &str) -> bool {
        let is_dir = self.full(rel).is_dir();
        if is_dir {
            self.record(rel, Recorded::Dir);
        }
        is_dir
    }

    /// Names in a directory, sorted, or an empty list when it cannot be read.
    fn names(&self, rel: &str) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.full(rel)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        names
    }

    /// Subdirectories of `rel` whose name passes `keep`, in natural order
    /// (`cpu2` before `cpu10`). Each is recorded, so a capture keeps
    /// directories whose existence is all a check needs (e.g. `queues/rx-3`).
    pub(crate) fn list_dirs(&self, rel: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let dirs: Vec<String> = self
            .names(rel)
            .into_iter()
            .filter(|n| keep(n))
            .filter(|n| self.full(&format!("{rel}/{n}")).is_dir())
            .collect();
        for d in &dirs {
            self.record(&format!("{rel}/{d}"), Recorded::Dir);
        }
        dirs
    }

    /// Files in `rel` whose name passes `keep`, in natural order. Not
    /// recorded: the caller reads the ones it uses.
    pub(crate) fn list_files(&self, rel: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
        self.names(rel)
            .into_iter()
            .filter(|n| keep(n))
            .filter(|n| self.full(&format!("{rel}/{n}")).is_file())
            .collect()
    }
}

/// Orders names with embedded numbers by value, so `rx-10` follows `rx-9`.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head, tail.parse().ok())
    }
    let (ha, na) = split(a);
    let (hb, nb) = split(b);
    ha.cmp(hb).then(na.cmp(&nb)).then(a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_puts_ten_after_nine() {
        let mut v = vec!["rx-10", "rx-9", "rx-1", "tx-0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["rx-1", "rx-9", "rx-10", "tx-0"]);
    }

    #[test]
    fn fifos_and_directories_are_not_read() {
        let dir = std::env::temp_dir().join(format!("linerate-doctor-host-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        let host = Host::new(&dir, true);
        assert!(host.read_bytes("sub").is_err());
        assert!(host.read_bytes("missing").is_err());
        // mkfifo is coreutils; without it the FIFO half is not testable here.
        let made = std::process::Command::new("mkfifo")
            .arg(dir.join("fifo"))
            .status()
            .is_ok_and(|s| s.success());
        if made {
            assert!(host.read_bytes("fifo").is_err());
        }
        assert!(host.take_recorded().is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
