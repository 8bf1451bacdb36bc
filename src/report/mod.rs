//! Reports: the terminal table and progress line (`terminal`), and the
//! self-contained HTML report, run comparison and exports (`linerate report`).

pub mod terminal;

use std::path::Path;

/// Flags of `linerate report`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Run directories (or results.json files) to report on; several are compared.
    #[arg(required = true)]
    pub runs: Vec<std::path::PathBuf>,
    /// Output file (default: report.html in the single run directory, or stdout for exports).
    #[arg(short, long)]
    pub output: Option<std::path::PathBuf>,
}

/// `linerate report`: returns the exit status.
pub fn run(args: &ReportArgs) -> i32 {
    eprintln!(
        "linerate report: not built yet ({} run(s) given)",
        args.runs.len()
    );
    2
}

/// Writes `report.html` into a finished run directory. Called by every
/// command that writes a results directory.
pub fn write_run_report(_run_dir: &Path) -> anyhow::Result<()> {
    Ok(())
}
