//! Comparison tables (issue 21): sweeps, or any set of runs, as pivot
//! tables — rows × columns of axes (sweep coordinates and the pseudo-axes
//! `run`, `dut`, `test`, `profile`, `direction`), one figure per cell —
//! in the terminal, as CSV and in the HTML report with a line chart along
//! a numeric axis. Reads results only; writes `pivot.csv` when asked.
//!
//! `model` builds the table, `cell` says what a cell holds and how it is
//! written, `text` renders the terminal table and CSV, `page` the HTML.

mod cell;
mod model;
mod page;
#[cfg(test)]
mod tests;
mod text;

pub use model::{build, CellValue, Pivot, PivotOpts, Value, PSEUDO_AXES};
pub use page::section as html_section;
pub use text::csv;

use crate::model::error::Context;
use crate::model::files::write_atomic;
use crate::report::columns;
use crate::report::error::Result;
use crate::report::run::Run;
use crate::results::RunResults;
use std::path::Path;

/// The terminal tables of `pivots`, fitted to `width`.
pub fn tables(pivots: &[Pivot], width: Option<usize>) -> String {
    pivots.iter().map(|p| text::table(p, width)).collect()
}

/// For the run commands: prints the pivot of each sweep of a finished run
/// (nothing when it has none) to stdout, fitted to the terminal, and
/// writes `pivot.csv` into `run_dir` when there is one. `opts` are the
/// command's `--rows`/`--cols`/`--cell` (default: what the sweeps say).
/// An axis or cell the sweeps do not have is an error naming the good ones.
pub fn print_for_run(results: &RunResults, run_dir: Option<&Path>, opts: &PivotOpts) -> Result<()> {
    if let Some(text) = for_run(results, run_dir, opts)? {
        let mut out = std::io::stdout().lock();
        crate::model::stdout::write_to(&mut out, text.as_bytes()).context("writing to stdout")?;
    }
    Ok(())
}

/// A run's pivot tables as terminal text (none when it has nothing to
/// pivot); with `run_dir`, `pivot.csv` is written there too.
pub fn for_run(
    results: &RunResults,
    run_dir: Option<&Path>,
    opts: &PivotOpts,
) -> Result<Option<String>> {
    let run = Run {
        label: results.name.clone(),
        dir: run_dir.map(Path::to_path_buf).unwrap_or_default(),
        results: results.clone(),
    };
    let pivots = build(std::slice::from_ref(&run), opts)?;
    if pivots.is_empty() {
        return Ok(None);
    }
    let width = columns::width_for(1);
    let text = tables(&pivots, width);
    if let Some(dir) = run_dir {
        write_csv(&dir.join("pivot.csv"), &pivots)?;
    }
    Ok(Some(text))
}

/// Writes the pivots' CSV to `path`.
pub fn write_csv(path: &Path, pivots: &[Pivot]) -> Result<()> {
    write_atomic(path, csv(pivots).as_bytes()).with_context(|| {
        format!(
            "writing the pivot table to {} (check the directory exists and is writable, or give --csv another path)",
            path.display()
        )
    })?;
    Ok(())
}
