//! `linerate check RUN` once configured: holds criteria against a finished
//! run and compares it with a baseline run, without running anything, and
//! exits as a test command would.

use crate::model::criteria::Criterion;
use crate::model::error::chain;
use crate::model::stderr::{errln, errprint};
use crate::orchestrate::error::Result;
use crate::results::criteria::{evaluate, subjects, Marks};
use std::path::PathBuf;

/// A validated `linerate check`.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// The run: its directory or results.json (a directory of runs: the latest).
    pub run: PathBuf,
    /// Criteria that replace the run's own (none: the run's are shown again).
    pub expect: Vec<Criterion>,
    pub baseline: Option<PathBuf>,
    /// With a baseline: the default tolerance, %.
    pub tolerance_pct: f64,
    pub junit: Option<PathBuf>,
    /// The checked results document on stdout.
    pub json: bool,
}

/// Checks the run; returns the exit status.
pub fn check(c: &CheckConfig) -> i32 {
    match check_inner(c) {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {}", chain(&e));
            2
        }
    }
}

fn check_inner(a: &CheckConfig) -> Result<i32> {
    let expect = &a.expect;
    let mut r = crate::report::load(&a.run, None)?.results;
    // What is asked replaces what the run recorded: `check RUN --expect X`
    // decides on X alone, not on a baseline the run was compared with then.
    // With neither flag, the run's own verdicts are said again.
    if !expect.is_empty() || a.baseline.is_some() {
        let all = subjects(&r, Marks::default(), Marks::of(&r));
        r.criteria = evaluate(expect, &all);
        r.baseline = match &a.baseline {
            Some(b) => Some(crate::report::baseline::compare_with(
                &r,
                b,
                a.tolerance_pct,
            )?),
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
    Ok(super::run::exit_code(&r, r.error.is_some(), false))
}
