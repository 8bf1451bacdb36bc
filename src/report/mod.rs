//! Reports: the terminal table and progress line (`terminal`), and what
//! `linerate report` writes from run directories: one self-contained HTML
//! file for one run or a comparison of several (`html`, `sections`,
//! `compare`), CSV and Prometheus exports (`export`). Everything here reads
//! results documents and writes files or stdout; it runs no test, touches no
//! network and never changes a results document.
//!
//! Numbers are computed once in `figures` (rates per interval, offered load)
//! and formatted in `format`, so the terminal, the HTML tables, the charts and
//! the exports cannot disagree. `charts` builds the data each chart receives
//! (a plain JSON model that snapshot tests pin); `assets/report.js` draws it.
//!
//! # Why uPlot
//!
//! The charts are drawn by uPlot 1.6.32 (MIT licence, Leon Sorokin; the npm
//! package `uplot`, vendored byte for byte under `assets/` with its LICENSE,
//! see `assets/README.md`), embedded with `include_str!`. Chosen over
//! generating SVG in Rust because what the issue asks of a chart — values on
//! hover, series toggled from the legend, drag to zoom a time range — is what
//! uPlot does out of the box, in 51 kB of minified JavaScript with no
//! dependencies, drawing thousands of interval points on a canvas without
//! slowing the page. Our own SVG plus hand-written interaction would be more
//! code to maintain than the library. Larger libraries (Chart.js, ECharts,
//! Plotly) would cost 200 kB–3 MB of the 1.5 MB budget for features we do not
//! use. Tables are plain HTML rendered here, so they read without JavaScript
//! and print; only the charts need scripts.

use crate::model::stderr::{errln, errprint};
pub mod baseline;
pub mod charts;
pub mod columns;
mod compare;
mod cpu;
pub mod dscp;
pub mod efficiency;
pub mod error;
pub mod export;
pub mod figures;
pub mod format;
pub mod html;
mod http;
pub mod intervals;
pub mod junit;
pub mod latency;
pub mod latency_at;
pub mod matrix;
pub mod pivot;
pub mod profiles;
mod ramps;
pub mod registry;
mod run;
mod sections;
pub mod smoke;
pub mod terminal;
#[cfg(test)]
mod testdata;
pub mod verdicts;

pub use run::{dut_mode, Run};

use crate::model::error::chain;
use crate::model::error::Context;
use crate::model::files::write_atomic;
use crate::report::error::{fail, Result};
use crate::results::RunResults;
use std::path::{Path, PathBuf};

/// What `linerate report` is asked for (the command layer builds it from
/// the flags; see `cli::report`).
#[derive(Debug, Clone)]
pub struct ReportArgs {
    /// Run directories or results files; a directory of runs stands for its latest.
    pub runs: Vec<PathBuf>,
    /// Output file, `-` for stdout; `None` for the format's default.
    pub output: Option<PathBuf>,
    pub format: Format,
    /// One label per run, or none.
    pub labels: Vec<String>,
    /// For a monitor directory: the smoke graph's time range, as the user wrote it.
    pub from: Option<String>,
    pub to: Option<String>,
    /// `--pivot` (with `--rows`, `--cols`, `--cell`): the runs as pivot
    /// tables, printed, written as CSV and added to the HTML.
    pub pivot: Option<pivot::PivotOpts>,
    /// Where the pivot CSV goes (`--csv`); default: `pivot.csv` in the run
    /// directory for one run, `./linerate-pivot.csv` for several.
    pub pivot_csv: Option<PathBuf>,
}

/// What `linerate report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Csv,
    Prometheus,
}

/// `linerate report`: returns the exit status (0 ok, 1 failure, 2 usage).
pub fn run(args: &ReportArgs) -> i32 {
    if !args.labels.is_empty() && args.labels.len() != args.runs.len() {
        errln!(
            "linerate report: {} --label given for {} run directories; give one per run, in order",
            args.labels.len(),
            args.runs.len()
        );
        return 2;
    }
    // What the user named is read first: a path that holds no run, a
    // document of another schema or a --pivot the runs cannot answer is a
    // usage error (2), as for `check`; failing to write the report is 1.
    let input = match read_input(args) {
        Ok(i) => i,
        Err(e) => {
            errln!("linerate report: {}", chain(&e));
            return 2;
        }
    };
    match report(args, input) {
        Ok(()) => 0,
        Err(e) => {
            errln!("linerate report: {}", chain(&e));
            1
        }
    }
}

/// What `linerate report` read: a monitor's smoke page, or runs (and the
/// pivot tables asked of them).
enum Input {
    Smoke(String),
    Runs(Vec<Run>, Vec<pivot::Pivot>),
}

fn read_input(args: &ReportArgs) -> Result<Input> {
    if let [dir] = args.runs.as_slice() {
        if smoke::is_monitor_dir(dir) {
            let from = args.from.as_deref().map(smoke::parse_time).transpose()?;
            let to = args.to.as_deref().map(smoke::parse_time).transpose()?;
            return Ok(Input::Smoke(smoke::page(dir, from, to)?));
        }
    }
    let runs = load_runs(&args.runs, &args.labels)?;
    let pivots = match &args.pivot {
        Some(opts) => {
            let p = pivot::build(&runs, opts)?;
            if p.is_empty() {
                fail!("--pivot: the runs hold no tests, ramps or searches to pivot");
            }
            p
        }
        None => Vec::new(),
    };
    Ok(Input::Runs(runs, pivots))
}

fn report(args: &ReportArgs, input: Input) -> Result<()> {
    let (runs, pivots) = match input {
        Input::Smoke(page) => {
            let dir = args.runs.first().cloned().unwrap_or_default();
            let out = args
                .output
                .clone()
                .unwrap_or_else(|| dir.join("smoke.html"));
            write_atomic(&out, page.as_bytes())
                .with_context(|| format!("writing {}", out.display()))?;
            errln!("report: {} (smoke graph)", out.display());
            return Ok(());
        }
        Input::Runs(runs, pivots) => (runs, pivots),
    };
    if !pivots.is_empty() {
        print_pivots(&runs, &pivots, args)?;
    }
    let (bytes, default_out) = match args.format {
        Format::Html => {
            let page = if runs.len() == 1 {
                html::single_with(&runs[0], args.pivot.as_ref())
            } else {
                html::comparison_with(&runs, args.pivot.as_ref())
            };
            let out = if runs.len() == 1 {
                runs[0].dir.join("report.html")
            } else {
                PathBuf::from("linerate-compare.html")
            };
            (page.into_bytes(), Some(out))
        }
        Format::Csv => (export::csv(&runs).into_bytes(), None),
        Format::Prometheus => (export::prometheus(&runs).into_bytes(), None),
    };
    match args.output.clone().or(default_out) {
        Some(p) if p.as_os_str() != "-" => {
            write_atomic(&p, &bytes).with_context(|| format!("writing {}", p.display()))?;
            errln!(
                "report: {} ({})",
                p.display(),
                format::bytes(bytes.len() as u64)
            );
        }
        _ => {
            // A closed pipe (`| head`) is not a failure: `write_to` says Ok.
            let mut out = std::io::stdout().lock();
            crate::model::stdout::write_to(&mut out, &bytes).context("writing to stdout")?;
        }
    }
    Ok(())
}

/// `--pivot`: the tables to stdout (stderr when the report itself goes to
/// stdout), the CSV to `--csv` or its default.
fn print_pivots(runs: &[Run], pivots: &[pivot::Pivot], args: &ReportArgs) -> Result<()> {
    let to_stdout = args.output.as_deref().is_some_and(|o| o.as_os_str() == "-")
        || (args.output.is_none() && args.format != Format::Html);
    if to_stdout {
        errprint!(
            "{}",
            crate::model::stdout::printable(&pivot::tables(pivots, columns::width_for(2)))
        );
    } else {
        let text = pivot::tables(pivots, columns::width_for(1));
        let mut out = std::io::stdout().lock();
        crate::model::stdout::write_to(&mut out, text.as_bytes()).context("writing to stdout")?;
    }
    let csv = args.pivot_csv.clone().unwrap_or_else(|| match runs {
        [one] => one.dir.join("pivot.csv"),
        _ => PathBuf::from("linerate-pivot.csv"),
    });
    pivot::write_csv(&csv, pivots)?;
    errln!("report: {} (pivot table)", csv.display());
    Ok(())
}

/// Writes `report.html` into a finished run directory. Called by every
/// command that writes a results directory.
pub fn write_run_report(run_dir: &Path) -> Result<()> {
    let run = load(run_dir, None)?;
    let page = html::single(&run);
    Ok(write_atomic(&run_dir.join("report.html"), page.as_bytes())?)
}

/// Loads every run and gives each a label.
pub fn load_runs(paths: &[PathBuf], labels: &[String]) -> Result<Vec<Run>> {
    let mut runs = paths
        .iter()
        .enumerate()
        .map(|(i, p)| load(p, labels.get(i).cloned()))
        .collect::<Result<Vec<_>>>()?;
    if labels.is_empty() {
        let names: Vec<String> = runs.iter().map(|r| r.results.name.clone()).collect();
        let modes: Vec<String> = runs
            .iter()
            .map(|r| r.dut_mode().unwrap_or("no DUT").to_string())
            .collect();
        let picked = if distinct(&names) {
            names
        } else if distinct(&modes) {
            modes
        } else {
            (1..=runs.len())
                .zip(&names)
                .map(|(i, n)| format!("{n} #{i}"))
                .collect()
        };
        for (r, l) in runs.iter_mut().zip(picked) {
            r.label = l;
        }
    }
    Ok(runs)
}

fn distinct(v: &[String]) -> bool {
    let mut s: Vec<&String> = v.iter().collect();
    s.sort();
    s.dedup();
    s.len() == v.len()
}

/// Reads one run: a run directory, its results.json, or a directory of run
/// directories (its most recently written run).
pub fn load(path: &Path, label: Option<String>) -> Result<Run> {
    if !path.exists() {
        fail!(
            "{}: no such file or directory; give a run directory written by linerate (lab, tcp, \
             udp, ...), its results.json, or a directory of runs",
            path.display()
        );
    }
    let file = if path.is_dir() {
        let direct = path.join("results.json");
        if direct.is_file() {
            direct
        } else {
            let latest = latest_run(path).with_context(|| {
                format!(
                    "{} holds no results.json and no run directory with one \
                     (give a directory written by linerate lab, tcp or udp)",
                    path.display()
                )
            })?;
            errln!(
                "using the latest run in {}: {}",
                path.display(),
                latest.display()
            );
            latest.join("results.json")
        }
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "reading {} (give a run directory written by linerate lab, tcp or udp, or its results.json)",
            file.display()
        )
    })?;
    let results: RunResults = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a linerate results document this version reads",
            file.display()
        )
    })?;
    let major = |v: &str| v.split('.').next().unwrap_or("").to_string();
    if major(&results.schema_version) != major(crate::results::SCHEMA_VERSION) {
        fail!(
            "{} has schema version {}; this linerate reads {}.x (use the linerate that wrote it)",
            file.display(),
            results.schema_version,
            major(crate::results::SCHEMA_VERSION)
        );
    }
    let dir = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(Run {
        label: label.unwrap_or_else(|| results.name.clone()),
        dir,
        results,
    })
}

/// The run directory below `base` whose results.json was written last.
fn latest_run(base: &Path) -> Option<PathBuf> {
    std::fs::read_dir(base)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let m = std::fs::metadata(p.join("results.json")).ok()?;
            Some((m.modified().ok()?, p))
        })
        .max()
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_fall_back_to_dut_mode() {
        let mut runs = testdata::three_runs();
        for r in &mut runs {
            r.results.name = "lab".into();
        }
        let dir = std::env::temp_dir().join(format!("lr-report-labels-{}", std::process::id()));
        let mut paths = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let d = dir.join(format!("r{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("results.json"),
                serde_json::to_vec(&r.results).unwrap(),
            )
            .unwrap();
            paths.push(d);
        }
        let loaded = load_runs(&paths, &[]).unwrap();
        let labels: Vec<&str> = loaded.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["route", "nat", "fw"]);
        // A directory of runs stands for its latest.
        let latest = load(&dir, None).unwrap();
        assert_eq!(latest.dir.file_name().unwrap(), "r2");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wrong_file_says_what_to_give() {
        let e = load(Path::new("/nonexistent/run"), None).unwrap_err();
        assert!(chain(&e).contains("give a run directory"), "{}", chain(&e));
    }
}
