//! A scratch file for records a test gathers while it runs and needs only
//! when it assembles its result (interval samples, the DUT's readings), so
//! a controller's memory does not grow with the length of a run. The file
//! is unnamed (it vanishes with the process, even on SIGKILL) and lives in
//! the run's results directory, or in the temp directory with
//! `--no-results`. Records are JSON lines, written [`BATCH`] at a time.
//!
//! A scratch file that cannot be opened or written (a full disk) is said
//! once on stderr; the records from then on are kept in memory, so the
//! results stay complete.

use crate::model::stderr::errln;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Records gathered before they are written out in one go: the most a
/// spill holds in memory while its file works.
pub const BATCH: usize = 64;

/// Records of type `T`, in the order they came.
pub struct Spill<T> {
    what: &'static str,
    file: Option<File>,
    dir: PathBuf,
    /// Bytes of whole lines in the file: what reading back may trust.
    good_len: u64,
    /// Records not yet written (at most [`BATCH`] while the file works).
    pending: Vec<T>,
    /// True once the file failed: `pending` then keeps everything.
    in_memory: bool,
}

impl<T: Serialize + DeserializeOwned + Clone> Spill<T> {
    /// A spill of `what` (for messages: "interval samples") in `dir`, or
    /// in the temp directory without one.
    pub fn new(what: &'static str, dir: Option<&Path>) -> Self {
        let dir = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let mut spill = Spill {
            what,
            file: None,
            dir,
            good_len: 0,
            pending: Vec::with_capacity(BATCH),
            in_memory: false,
        };
        match crate::model::files::scratch_file(&spill.dir) {
            Ok(f) => spill.file = Some(f),
            Err(e) => spill.fall_back(&e.to_string()),
        }
        spill
    }

    pub fn push(&mut self, record: T) {
        self.pending.push(record);
        if !self.in_memory && self.pending.len() >= BATCH {
            self.write_pending();
        }
    }

    /// Records held in memory now (not in the file).
    #[cfg(test)]
    pub fn held_in_memory(&self) -> usize {
        self.pending.len()
    }

    /// Calls `each` with every record in order; the spill keeps them.
    pub fn for_each(&mut self, mut each: impl FnMut(T)) {
        if let Err(e) = self.read_back(&mut each) {
            errln!(
                "warning: reading {} back from a scratch file in {}: {e}; results.json lacks some \
                 of them (the test's totals are unaffected)",
                self.what,
                self.dir.display()
            );
        }
    }

    /// Drops the records held in memory for which `keep` says false.
    pub fn retain_pending(&mut self, keep: impl FnMut(&T) -> bool) {
        self.pending.retain(keep);
    }

    fn read_back(&mut self, each: &mut impl FnMut(T)) -> io::Result<()> {
        if let Some(f) = self.file.as_mut() {
            f.seek(SeekFrom::Start(0))?;
            let reader = BufReader::new(Read::by_ref(f).take(self.good_len));
            for line in reader.lines() {
                each(serde_json::from_str(&line?)?);
            }
            // Appends continue at the end of what is known good.
            f.seek(SeekFrom::Start(self.good_len))?;
        }
        for r in &self.pending {
            each(r.clone());
        }
        Ok(())
    }

    /// Writes the pending records as one block; on failure cuts the file
    /// back to its last whole line and keeps everything in memory from now.
    fn write_pending(&mut self) {
        let Some(f) = self.file.as_mut() else {
            return;
        };
        let mut block = Vec::with_capacity(self.pending.len() * 256);
        for r in &self.pending {
            if let Err(e) = serde_json::to_writer(&mut block, r) {
                self.fall_back(&e.to_string());
                return;
            }
            block.push(b'\n');
        }
        match f.write_all(&block) {
            Ok(()) => {
                self.good_len += block.len() as u64;
                self.pending.clear();
            }
            Err(e) => {
                // A partial block must not be read back as records.
                let _ = f.set_len(self.good_len);
                let _ = f.seek(SeekFrom::Start(self.good_len));
                self.fall_back(&e.to_string());
            }
        }
    }

    fn fall_back(&mut self, why: &str) {
        self.in_memory = true;
        errln!(
            "warning: cannot keep {} in a scratch file in {} ({why}); keeping them in memory \
             instead, which grows with the run's length (free space there, or point TMPDIR or \
             --results-dir elsewhere)",
            self.what,
            self.dir.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_that_cannot_open_its_file_keeps_everything_in_memory() {
        let mut s: Spill<(u32, String)> =
            Spill::new("test records", Some(Path::new("/nonexistent-linerate-dir")));
        for i in 0..(3 * BATCH as u32) {
            s.push((i, format!("r{i}")));
        }
        assert_eq!(s.held_in_memory(), 3 * BATCH);
        let mut back = Vec::new();
        s.for_each(|r| back.push(r));
        assert_eq!(back.len(), 3 * BATCH);
        assert_eq!(back[5], (5, "r5".to_string()));
    }

    #[test]
    fn a_spill_leaves_no_file_behind_and_reads_back_twice() {
        let dir = std::env::temp_dir().join(format!("lr-spill-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut s: Spill<u64> = Spill::new("test records", Some(&dir));
        for i in 0..1000u64 {
            s.push(i);
        }
        assert!(s.held_in_memory() < BATCH);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "a named file in {dir:?}"
        );
        for _ in 0..2 {
            let mut n = 0u64;
            s.for_each(|r| {
                assert_eq!(r, n);
                n += 1;
            });
            assert_eq!(n, 1000);
        }
        // Appends after a read go after what is there.
        s.push(1000);
        let mut last = 0;
        s.for_each(|r| last = r);
        assert_eq!(last, 1000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
