//! `linerate report`: its flags and the report request they describe.

use crate::report::pivot::PivotOpts;
use crate::report::{Format, ReportArgs};
use clap::Args;
use std::path::PathBuf;

/// Flags of `linerate report`.
#[derive(Args, Debug, Clone)]
pub struct ReportFlags {
    /// Run directories (or their results.json) to report on; several are compared.
    /// A directory of run directories (e.g. linerate-results) stands for its latest run.
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// Output file, `-` for stdout (default: report.html in the run directory for one run,
    /// ./linerate-compare.html for several; stdout for csv and prometheus).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// html: the interactive report. csv: one row per test and direction (kind=summary)
    /// and one per interval sample (kind=interval). prometheus: text exposition format.
    #[arg(long, value_enum, default_value = "html")]
    pub format: FormatArg,
    /// Name of each run in comparisons, in the order of the run directories (repeatable).
    /// Default: the run names, or the DUT modes when the names are all the same.
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// For a monitor directory: the smoke graph from this time (Unix seconds or
    /// YYYY-MM-DDTHH:MM:SSZ; default: the journal's start).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// For a monitor directory: the smoke graph up to this time (default: its end).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Show the runs as pivot tables (every test, ramp and search; with sweeps, one table
    /// per sweep): printed, written as CSV (see --csv) and added to the HTML report.
    #[arg(long)]
    pub pivot: bool,
    /// Axes shown as the pivot's rows, comma-separated, outermost first: sweep parameters
    /// and run, dut, test, profile, direction (implies --pivot; default: chosen).
    #[arg(long, value_name = "AXES", value_delimiter = ',')]
    pub rows: Vec<String>,
    /// Axes shown as the pivot's columns (as --rows).
    #[arg(long, value_name = "AXES", value_delimiter = ',')]
    pub cols: Vec<String>,
    /// The figure in each cell: a --expect figure name (rx_pps, goodput, line_pct, loss,
    /// p99, ndr…), a packet rate with % appended for % of the line rate (ndr%, saturation%).
    /// Default by kind: UDP line_pct (rx_pps without a line rate), TCP/HTTP goodput,
    /// ramps saturation%, searches ndr%.
    #[arg(long, value_name = "FIGURE")]
    pub cell: Option<String>,
    /// Where the pivot CSV goes (default: pivot.csv in the run directory for one run,
    /// ./linerate-pivot.csv for several).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// The formats `--format` names.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatArg {
    Html,
    Csv,
    Prometheus,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Html => Format::Html,
            FormatArg::Csv => Format::Csv,
            FormatArg::Prometheus => Format::Prometheus,
        }
    }
}

/// `linerate report`: what to report on, and how.
pub fn report(a: &ReportFlags) -> ReportArgs {
    ReportArgs {
        runs: a.runs.clone(),
        output: a.output.clone(),
        format: a.format.into(),
        labels: a.labels.clone(),
        from: a.from.clone(),
        to: a.to.clone(),
        pivot: (a.pivot
            || !a.rows.is_empty()
            || !a.cols.is_empty()
            || a.cell.is_some()
            || a.csv.is_some())
        .then(|| PivotOpts {
            all: true,
            rows: trimmed(&a.rows),
            cols: trimmed(&a.cols),
            cell: a.cell.clone(),
        }),
        pivot_csv: a.csv.clone(),
    }
}

/// Axis names as given, without blanks around them or empty ones.
fn trimmed(v: &[String]) -> Vec<String> {
    v.iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
