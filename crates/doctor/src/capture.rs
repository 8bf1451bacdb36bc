//! `--capture`: runs the inspection while recording every file and directory
//! it touched, and writes them to a `.tar.gz` with paths relative to the
//! root. Extracting the archive and running `doctor --root DIR` on it
//! reproduces the same report on another machine, which is how a user's
//! host becomes a bug report or a test fixture.
//!
//! The archive is written to a temporary file in the destination directory,
//! fsynced and renamed into place, so a crash leaves either the old file or
//! the complete new one.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::host::{Host, Recorded};
use crate::{inspect_host, Error, Options, Report};

/// What `capture` wrote.
#[derive(Debug, Clone)]
pub struct CaptureSummary {
    /// The archive written.
    pub path: PathBuf,
    /// Regular files in the archive.
    pub files: usize,
    /// Directory entries in the archive (directories whose existence a
    /// check relied on, such as `queues/rx-3`).
    pub dirs: usize,
    /// Total bytes of file contents, before compression.
    pub bytes: u64,
    /// The report of the inspection the capture recorded.
    pub report: Report,
}

/// Inspects the host like [`crate::inspect`] and writes every file it read
/// to `out` as a gzipped tar, paths relative to `opts.root`.
pub fn capture(opts: &Options, out: &Path) -> Result<CaptureSummary, Error> {
    let host = Host::new(&opts.root, true);
    let report = inspect_host(&host, opts)?;
    let recorded = host.take_recorded();
    let write_err = |source| Error::CaptureWrite {
        path: out.to_path_buf(),
        source,
    };
    write_atomically(out, &recorded).map_err(write_err)?;
    let files = recorded
        .values()
        .filter(|e| matches!(e, Recorded::File(_)))
        .count();
    let bytes = recorded
        .values()
        .map(|e| match e {
            Recorded::File(b) => b.len() as u64,
            Recorded::Dir => 0,
        })
        .sum();
    Ok(CaptureSummary {
        path: out.to_path_buf(),
        files,
        dirs: recorded.len() - files,
        bytes,
        report,
    })
}

fn write_atomically(out: &Path, recorded: &BTreeMap<String, Recorded>) -> io::Result<()> {
    let name = out
        .file_name()
        .ok_or_else(|| io::Error::other("the capture path has no file name"))?;
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = write_archive(&tmp, recorded).and_then(|()| fs::rename(&tmp, out));
    if result.is_err() {
        // Best effort: the temp file is ours and useless after a failure.
        let _ = fs::remove_file(&tmp);
        return result;
    }
    // The rename is durable only once the directory entry is on disk.
    // Failing to sync a directory (some filesystems refuse) does not undo
    // the write, so it is not an error.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_archive(path: &Path, recorded: &BTreeMap<String, Recorded>) -> io::Result<()> {
    let file = File::options().write(true).create_new(true).open(path)?;
    let gz = GzEncoder::new(BufWriter::new(file), Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // BTreeMap order puts every directory before the entries inside it.
    for (rel, entry) in recorded {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(mtime);
        match entry {
            Recorded::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                tar.append_data(&mut header, rel, io::empty())?;
            }
            Recorded::File(bytes) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(0o644);
                header.set_size(bytes.len() as u64);
                tar.append_data(&mut header, rel, bytes.as_slice())?;
            }
        }
    }
    let gz = tar.into_inner()?;
    let mut buffered = gz.finish()?;
    buffered.flush()?;
    let file = buffered.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}
