//! `linerate check RUN`: holds criteria against a finished run and compares
//! it with a baseline run, without running anything; exits as a test
//! command would (0 met, 1 missed or regressed, 2 input error, 3 the run
//! had failed), so a CI job can gate on runs made elsewhere. The flags
//! become a [`CheckConfig`]; `orchestrate::check` checks.

use super::criteria_args::{parse_expect, parse_tolerance, EXIT_CODES};
use crate::model::stderr::errln;
use crate::orchestrate::check::CheckConfig;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
#[command(after_help = EXIT_CODES)]
pub struct CheckArgs {
    /// The run to check: its directory or results.json (a directory of runs: the latest).
    pub run: PathBuf,
    /// A criterion the run must meet (repeatable), as on the test commands, e.g.
    /// 'ndr>=2Mpps', 'loss<=0.001%', 'p99<=2ms@max'. Without it, the criteria recorded
    /// with the run are shown again.
    #[arg(long = "expect", value_name = "EXPR")]
    pub expect: Vec<String>,
    /// Compare with this earlier run, figure by figure: a change beyond twice the runs' own
    /// spread and the figure's default tolerance is a regression (exit 1); a lower bound (≥)
    /// is compared as one.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: the default tolerance of rates (latency: twice it, at least 50 µs;
    /// loss: this share of it, at least 0.01 pp), when the runs' spread is smaller.
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = parse_tolerance)]
    pub tolerance: f64,
    /// Write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the checked results document (with criteria and baseline) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `linerate check`; returns the exit status.
pub fn check(a: &CheckArgs) -> i32 {
    let expect = match parse_expect(&a.expect) {
        Ok(e) => e,
        Err(e) => {
            errln!("error: {e:#}");
            return 2;
        }
    };
    crate::orchestrate::check::check(&CheckConfig {
        run: a.run.clone(),
        expect,
        baseline: a.baseline.clone(),
        tolerance_pct: a.tolerance,
        junit: a.junit.clone(),
        json: a.json,
    })
}
