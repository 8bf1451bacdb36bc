//! The monitor's NDJSON journal, rotated by size and count.

use crate::latency::error::Result;
use crate::model::error::Context;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The journal's file name; rotated ones get `.1`, `.2`, ... (older last).
pub const JOURNAL: &str = "monitor.ndjson";

/// The NDJSON journal with size/count rotation.
pub struct Journal {
    dir: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    max_files: u32,
}

impl Journal {
    pub fn open(dir: &Path, max_bytes: u64, max_files: u32) -> Result<Journal> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(JOURNAL);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Journal {
            dir: dir.into(),
            file,
            written,
            max_bytes: max_bytes.max(4096),
            max_files: max_files.max(1),
        })
    }

    fn rotate(&mut self) -> Result<()> {
        let name = |k: u32| {
            if k == 0 {
                self.dir.join(JOURNAL)
            } else {
                self.dir.join(format!("{JOURNAL}.{k}"))
            }
        };
        let _ = fs::remove_file(name(self.max_files - 1));
        for k in (0..self.max_files - 1).rev() {
            let _ = fs::rename(name(k), name(k + 1));
        }
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(name(0))
            .context("opening a fresh journal after rotation")?;
        self.written = 0;
        Ok(())
    }

    /// Appends one line (whole lines only: a crash leaves complete ones).
    pub fn line(&mut self, v: &serde_json::Value) -> Result<()> {
        let mut s = v.to_string();
        s.push('\n');
        if self.written > 0 && self.written + s.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(s.as_bytes())?;
        self.written += s.len() as u64;
        Ok(())
    }
}

/// The journal files of a monitor directory, oldest first.
pub fn journal_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            let k = if n == JOURNAL {
                0
            } else {
                n.strip_prefix(&format!("{JOURNAL}."))?.parse().ok()?
            };
            Some((k, e.path()))
        })
        .collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.0));
    v.into_iter().map(|(_, p)| p).collect()
}
