//! `linerate check RUN`: holds criteria against a finished run and compares
//! it with a baseline run, without running anything; exits as a test
//! command would (0 met, 1 missed or regressed, 2 input error, 3 the run
//! had failed), so a CI job can gate on runs made elsewhere.

use super::criteria_args::{parse_expect, parse_tolerance, EXIT_CODES};
use crate::model::stderr::{errln, errprint};
use crate::results::criteria::{evaluate, subjects, Marks};
use anyhow::Result;
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
    match check_inner(a) {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {e:#}");
            2
        }
    }
}

fn check_inner(a: &CheckArgs) -> Result<i32> {
    let expect = parse_expect(&a.expect)?;
    let mut r = crate::report::load(&a.run, None)?.results;
    // What is asked replaces what the run recorded: `check RUN --expect X`
    // decides on X alone, not on a baseline the run was compared with then.
    // With neither flag, the run's own verdicts are said again.
    if !expect.is_empty() || a.baseline.is_some() {
        let all = subjects(&r, Marks::default(), Marks::of(&r));
        r.criteria = evaluate(&expect, &all);
        r.baseline = match &a.baseline {
            Some(b) => Some(crate::report::baseline::compare_with(&r, b, a.tolerance)?),
            None => None,
        };
    }
    let text = crate::report::verdicts::terminal(&r);
    if text.is_empty() {
        errln!(
            "{}: nothing to check: the run recorded no criteria; give --expect or --baseline",
            a.run.display()
        );
    }
    if a.json {
        errprint!("{}", crate::model::stdout::printable(&text));
        crate::model::stdout::println(&serde_json::to_string_pretty(&r)?);
    } else {
        crate::model::stdout::print(&crate::model::stdout::printable(&text));
    }
    if let Some(j) = &a.junit {
        crate::report::junit::write(j, &r)?;
        errln!("junit: {}", j.display());
    }
    Ok(crate::orchestrate::run::exit_code(
        &r,
        r.error.is_some(),
        false,
    ))
}
