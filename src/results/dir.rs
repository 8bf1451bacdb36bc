//! One run's directory on disk: `results.json` written atomically,
//! `intervals.ndjson` appended line by line while the run goes (a SIGKILL
//! leaves every earlier line intact), agent logs beside them.

use super::RunResults;
use crate::model::clock::time_stamp_compact;
use crate::model::files::write_atomic;
use crate::proto::IntervalSample;
use anyhow::{Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One run's directory on disk.
pub struct RunDir {
    pub path: PathBuf,
    ndjson: File,
}

impl RunDir {
    pub fn create(base: &Path, name: &str) -> Result<Self> {
        let stamp = time_stamp_compact();
        let path = base.join(format!("{stamp}-{name}"));
        fs::create_dir_all(path.join("agents")).with_context(|| {
            format!(
                "creating the results directory {} (choose another with --results-dir)",
                path.display()
            )
        })?;
        let ndjson = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path.join("intervals.ndjson"))
            .context("creating intervals.ndjson")?;
        Ok(RunDir { path, ndjson })
    }

    pub fn agent_log(&self, role: &str) -> PathBuf {
        self.path.join("agents").join(format!("{role}.log"))
    }

    /// Appends one complete line; a SIGKILL leaves every earlier line intact.
    pub fn log_interval(&mut self, test: &str, role: &str, sample: &IntervalSample) {
        let line = serde_json::json!({"test": test, "endpoint": role, "sample": sample});
        let mut s = line.to_string();
        s.push('\n');
        // A full disk must not stop the measurement; results.json reports the run.
        let _ = self.ndjson.write_all(s.as_bytes());
    }

    pub fn write_results(&self, r: &RunResults) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(r)?;
        write_atomic(&self.path.join("results.json"), &bytes)
    }
}
