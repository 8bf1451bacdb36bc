//! One run's directory on disk: `results.json` written atomically,
//! `intervals.ndjson` appended line by line while the run goes (a SIGKILL
//! leaves every earlier line intact), agent logs beside them.
//!
//! The directory is always new (`mkdir`, with a `-2`, `-3`… suffix when
//! the name is taken) and every file in it is created new without
//! following symlinks, so a link planted where the next run will write
//! is never written through. A write that fails is remembered, not
//! dropped: the run still finishes its measurement, then says its results
//! are not on disk and exits non-zero.

use super::RunResults;
use crate::model::clock::time_stamp_compact;
use crate::model::error::{chain, Context, ModelError, Step};
use crate::model::files::{create_dir_new, create_new, trusted_dir, write_atomic};
use crate::proto::IntervalSample;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why a results directory could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The run name cannot name a directory; the message says what to do.
    #[error("{0}")]
    BadName(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

type Result<T, E = ResultsError> = std::result::Result<T, E>;

/// One run's directory on disk.
pub struct RunDir {
    pub path: PathBuf,
    ndjson: File,
    /// The first write that failed, with the file and the system's reason.
    write_error: OnceLock<String>,
}

impl RunDir {
    pub fn create(base: &Path, name: &str) -> Result<Self> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(ResultsError::BadName(format!(
                "the run name {name:?} cannot name a directory: it becomes part of the results \
                 directory's name; choose one without '/' (--name or the plan's name)"
            )));
        }
        let stem = format!("{}-{name}", time_stamp_compact());
        let path = trusted_dir(base)
            .and_then(|()| create_dir_new(base, &stem))
            .with_context(|| {
                format!(
                    "creating a results directory in {} (choose another with --results-dir)",
                    base.display()
                )
            })?;
        fs::create_dir(path.join("agents"))
            .with_context(|| format!("creating {}", path.join("agents").display()))?;
        let file = path.join("intervals.ndjson");
        let ndjson = create_new(&file).with_context(|| format!("creating {}", file.display()))?;
        Ok(RunDir {
            path,
            ndjson,
            write_error: OnceLock::new(),
        })
    }

    pub fn agent_log(&self, role: &str) -> PathBuf {
        self.path.join("agents").join(format!("{role}.log"))
    }

    /// Appends one complete line; a SIGKILL leaves every earlier line intact.
    pub fn log_interval(&mut self, test: &str, role: &str, sample: &IntervalSample) {
        let line = serde_json::json!({"test": test, "endpoint": role, "sample": sample});
        let mut s = line.to_string();
        s.push('\n');
        // A full disk must not stop the measurement; the run reports it at the end.
        if let Err(e) = self.ndjson.write_all(s.as_bytes()) {
            self.failed(format!(
                "writing {}: {e}",
                self.path.join("intervals.ndjson").display()
            ));
        }
    }

    pub fn write_results(&self, r: &RunResults) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(r)?;
        let written = write_atomic(&self.path.join("results.json"), &bytes);
        if let Err(e) = &written {
            self.failed(chain(e));
        }
        Ok(written?)
    }

    /// Records a write that failed elsewhere in this directory (the report).
    pub fn failed(&self, what: String) {
        let _ = self.write_error.set(what);
    }

    /// The first write into this directory that failed, if one did.
    pub fn write_error(&self) -> Option<&str> {
        self.write_error.get().map(String::as_str)
    }
}
