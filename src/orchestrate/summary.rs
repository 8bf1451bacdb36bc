//! Commands whose result is a summary document rather than tests
//! (`monitor`, `serve`), once configured: they run, print, and write
//! `summary.json` in a run directory of their own.

use crate::http::serve_cmd::ServeConfig;
use crate::latency::monitor::MonitorConfig;
use crate::model::error::chain;
use crate::model::stderr::errln;
use crate::model::stdout::outln;
use crate::orchestrate::error::{err, Result};
use std::path::PathBuf;

/// Where a summary goes: `--results-dir`, `--name`, not `--no-results`,
/// `--json`.
#[derive(Debug, Clone)]
pub struct SummaryOut {
    pub results_dir: PathBuf,
    /// The run directory's name after its time stamp (else the kind).
    pub name: Option<String>,
    pub write: bool,
    /// The document on stdout too.
    pub json: bool,
}

impl SummaryOut {
    /// The end of a command whose result is a summary rather than tests
    /// (`monitor`, `serve`): `summary.json` in a run directory of its own
    /// unless --no-results, and the same document on stdout with --json.
    pub fn write(&self, kind: &str, doc: &impl serde::Serialize) -> Result<()> {
        let text = serde_json::to_string_pretty(doc)
            .map_err(|e| err!("encoding the {kind} summary as JSON: {e}"))?;
        if self.write {
            let name = self.name.as_deref().unwrap_or(kind);
            let dir = self.results_dir.join(format!(
                "{}-{name}",
                crate::model::clock::time_stamp_compact()
            ));
            std::fs::create_dir_all(&dir).map_err(|e| {
                err!(
                    "creating the results directory {}: {e} (choose another with --results-dir, \
                     or give --no-results)",
                    dir.display()
                )
            })?;
            crate::model::files::write_atomic(&dir.join("summary.json"), text.as_bytes())?;
            errln!("results: {}", dir.display());
        }
        if self.json {
            crate::model::stdout::println(&text);
        }
        Ok(())
    }
}

/// `linerate monitor`: monitors, then prints the per-target table and writes the summary;
/// returns the exit status.
pub fn monitor(cfg: MonitorConfig, warning: Option<String>, out: &SummaryOut) -> i32 {
    if let Some(w) = warning {
        errln!("{w}");
    }
    let summary = match crate::latency::monitor::run(cfg) {
        Ok(s) => s,
        Err(e) => {
            errln!("monitor: {}", crate::model::error::chain(&e));
            return 1;
        }
    };
    // The table on stdout, or on stderr when stdout carries --json.
    let table = crate::latency::monitor::summary_table(&summary);
    if out.json {
        errln!("{table}");
    } else {
        outln!("{table}");
    }
    errln!(
        "monitor: stopped after {:.1} s; peak RSS {:.1} MiB",
        summary.duration_s,
        summary.max_rss_bytes as f64 / 1048576.0
    );
    if let Err(e) = out.write("monitor", &summary) {
        errln!("error: {}", chain(&e));
        return 1;
    }
    match &summary.error {
        Some(e) => {
            errln!("monitor: {e}");
            1
        }
        None => 0,
    }
}

/// `linerate serve`: serves, then writes the summary; returns the exit status.
pub fn serve(cfg: &ServeConfig, out: &SummaryOut) -> i32 {
    let report = match crate::http::serve_cmd::run(cfg) {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {e:#}");
            return 2;
        }
    };
    match out.write("serve", &report) {
        Ok(()) => 0,
        Err(e) => {
            errln!("error: {}", chain(&e));
            1
        }
    }
}
