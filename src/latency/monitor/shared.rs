//! What the monitor's threads share: the journal, the metrics and the
//! thread that rewrites the metrics textfile.

use super::journal::Journal;
use crate::latency::metrics;
use crate::model::error::chain;
use crate::model::stderr::errln;
use crate::sys::realtime_ns;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, Mutex};

pub(super) struct Shared {
    pub(super) journal: Mutex<Journal>,
    pub(super) metrics: metrics::Shared,
    pub(super) textfile: Option<PathBuf>,
    /// Wakes the thread that rewrites the textfile: its fsyncs must not
    /// hold up a probe thread on a busy disk.
    pub(super) textfile_kick: Mutex<Option<mpsc::Sender<()>>>,
    pub(super) stop: AtomicBool,
}

impl Shared {
    pub(super) fn write(&self, v: &serde_json::Value) {
        if let Ok(mut j) = self.journal.lock() {
            if let Err(e) = j.line(v) {
                errln!("monitor: writing the journal: {}", chain(&e));
            }
        }
    }
    /// Asks the textfile writer for a fresh copy; without a writer
    /// thread it is written here.
    pub(super) fn kick_textfile(&self) {
        let sent = self
            .textfile_kick
            .lock()
            .ok()
            .and_then(|k| k.as_ref().map(|tx| tx.send(()).is_ok()));
        if sent != Some(true) {
            self.textfile();
        }
    }
    /// Writes the textfile now, in the calling thread.
    pub(super) fn textfile(&self) {
        let Some(p) = &self.textfile else { return };
        let body = self.metrics.lock().map(|m| m.render()).unwrap_or_default();
        if let Err(e) = crate::model::files::write_atomic(p, body.as_bytes()) {
            errln!("monitor: writing {}: {}", p.display(), chain(&e));
        }
    }
}

/// The thread that rewrites `--metrics-textfile` after windows end; kicks
/// that arrive while it writes are folded into one more write. It ends
/// when the run takes the sender, or drops the shared state.
pub(super) fn start_textfile_writer(sh: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    sh.textfile.as_ref()?;
    let (tx, rx) = mpsc::channel::<()>();
    if let Ok(mut k) = sh.textfile_kick.lock() {
        *k = Some(tx);
    }
    // Weak: the sender lives in the shared state, which must not be kept
    // alive by the thread that waits on it (a run that ends early drops
    // the state, and with it the sender, and the thread ends).
    let shared = Arc::downgrade(sh);
    let writer = crate::host::kernel::spawn_named("lr-mon-prom", move || {
        while rx.recv().is_ok() {
            while rx.try_recv().is_ok() {}
            match shared.upgrade() {
                Some(sh) => sh.textfile(),
                None => return,
            }
        }
    });
    if writer.is_err() {
        // No thread: windows write the textfile themselves.
        if let Ok(mut k) = sh.textfile_kick.lock() {
            k.take();
        }
    }
    writer.ok()
}

pub(super) fn unix_s() -> f64 {
    realtime_ns() as f64 / 1e9
}

pub(super) fn annotation(text: &str, at: f64) -> serde_json::Value {
    json!({
        "type": "annotation",
        "unix_s": at,
        "time": crate::model::clock::rfc3339(at as u64),
        "text": text,
    })
}
