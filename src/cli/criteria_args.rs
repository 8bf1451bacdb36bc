//! The flags that decide a run, shared by every test command: `--expect`,
//! `--repeat`, `--baseline`, `--tolerance`, `--junit`, `--abort-on-fail`;
//! and the exit codes they lead to (`EXIT_CODES`, shown in `--help`).

use crate::model::criteria;
use crate::orchestrate::abort;
use crate::orchestrate::config::{AbortOpts, CriteriaOpts};
use crate::report::registry;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::path::PathBuf;

/// The exit codes of every test command, for `--help` and the README.
pub const EXIT_CODES: &str = "Exit status:
  0    every test ran and every criterion (--expect) was met, no regression (--baseline)
  1    a criterion failed, a regression was found, or a test failed (e.g. nothing arrived);
       also a run stopped by --abort-on-fail (results so far are kept, marked aborted)
  2    usage or input error: a flag, a plan file, a criterion that does not parse, an
       ns:NAME that does not exist (found before any results directory is written)
  3    the run itself failed: an agent, the lab's topology, ssh, a test that sent nothing,
       results that could not be written (results so far are kept)
  130  interrupted (Ctrl-C, SIGTERM); results so far are kept, marked interrupted";

/// Pass/fail criteria, repetitions, a baseline and JUnit output.
#[derive(Args, Debug, Clone, Default)]
pub struct CriteriaArgs {
    /// A criterion the run must meet (repeatable): FIGURE OP VALUE[UNIT][@median|min|max],
    /// e.g. 'loss<=0.001%', 'rx_pps>=1.2Mpps', 'p99<=2ms@max', 'ndr>=2Mpps',
    /// 'goodput>=9Gbit/s'. Figures: rx_pps, tx_pps, l1_bps, l2_bps, goodput, line_pct,
    /// loss, dut_loss, lost, reordered, duplicates, retransmits, tx_errors, p50, p90, p99,
    /// latency_max, jitter, added_latency, requests_per_s, errors, ndr, pdr, throughput,
    /// saturation, cpu. A failed criterion exits 1.
    #[arg(long = "expect", value_name = "EXPR")]
    pub expect: Vec<String>,
    /// Run each test N times: tables show the median and min-max, criteria hold against
    /// the median unless they say @min or @max.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Compare with an earlier run (its directory or results.json), figure by figure: a
    /// change beyond twice the runs' own spread (repetitions, a search's bracket, a ramp's
    /// step, intervals) and the figure's default tolerance is a regression (exit 1); a
    /// lower bound (≥) is compared as one.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: the default tolerance of rates (latency: twice it, at least 50 µs;
    /// loss: this share of it, at least 0.01 pp), when the runs' spread is smaller.
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = parse_tolerance)]
    pub tolerance: f64,
    /// Write a JUnit XML report here: one test case per test, a failure per missed
    /// criterion or regression (for GitLab, GitHub, Jenkins).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Stop the run (status aborted, exit 1) once a criterion (--expect) has clearly failed
    /// over a test's intervals so far, after the grace period. Checked per interval: loss,
    /// lost, rx_pps, tx_pps, l1_bps, l2_bps (udp); goodput, l2_bps, retransmits (tcp).
    #[arg(long)]
    pub abort_on_fail: bool,
    /// With --abort-on-fail: seconds of a test's intervals before a criterion may fail
    /// (default: three intervals, 3 s at the default --interval 1).
    #[arg(long, value_name = "SECS", requires = "abort_on_fail",
          value_parser = super::parse::parse_secs)]
    pub abort_after: Option<f64>,
}

/// `5%` or `5`: a tolerance in % (0..=1000).
pub fn parse_tolerance(s: &str) -> Result<f64> {
    let t = s.trim();
    let v: f64 = t
        .strip_suffix('%')
        .unwrap_or(t)
        .trim()
        .parse()
        .map_err(|_| anyhow!("'{s}' is not a percentage: write e.g. 5% or 2.5%"))?;
    if !(0.0..=1000.0).contains(&v) {
        bail!("{v} % is outside 0..=1000 %");
    }
    Ok(v)
}

/// What a UDP packet stream measures (`udp`, a ramp's test, a latency
/// load of `--load udp`).
const PACKET: &[&str] = &[
    registry::RX_PPS.key,
    registry::TX_PPS.key,
    "l1_bps",
    "l2_bps",
    "line_pct",
    "loss",
    "dut_loss",
    "lost",
    "reordered",
    "duplicates",
    "tx_errors",
    "cpu",
];
/// What a TCP load measures.
const STREAM: &[&str] = &[
    "goodput",
    "l2_bps",
    "line_pct",
    registry::RETRANSMITS.key,
    "cpu",
];
/// What latency probes measure (`latency`, `tcp`/`udp` with --latency).
const PROBES: &[&str] = &[
    "p50",
    "p90",
    "p99",
    "latency_max",
    "jitter",
    "added_latency",
];
const HTTP: &[&str] = &[
    "goodput",
    "requests_per_s",
    "errors",
    "p50",
    "p90",
    "p99",
    "latency_max",
    "cpu",
];
const MLR: &[&str] = &["ndr", "pdr"];
const RFC2544: &[&str] = &["throughput"];

/// What a test command's results hold: the figures `--expect` can name on
/// it, in [`criteria::FIGURES`] order (`None`: the lab's suite and plans
/// measure any of them). Parts a flag adds are named with the flag.
pub fn measured_by(command: &str) -> Option<Vec<(&'static [&'static str], &'static str)>> {
    Some(match command {
        "tcp" => vec![(STREAM, ""), (PROBES, "--latency")],
        "udp" => vec![(PACKET, ""), (PROBES, "--latency")],
        "latency" => vec![(PACKET, "--load udp"), (STREAM, "--load tcp"), (PROBES, "")],
        "http" => vec![(HTTP, "")],
        "ramp" => vec![(PACKET, ""), (&["saturation"], "")],
        "search" => vec![(MLR, "--method mlr"), (RFC2544, "--method rfc2544")],
        _ => return None,
    })
}

/// The figure names of `parts`, each once, in [`criteria::FIGURES`] order.
fn names(parts: &[&'static [&'static str]]) -> Vec<&'static str> {
    criteria::FIGURES
        .iter()
        .map(|f| f.name)
        .filter(|n| parts.iter().any(|p| p.contains(n)))
        .collect()
}

/// `--expect`'s help on `command`: the grammar and the figures it measures.
pub fn expect_help(command: &str) -> String {
    let figures = match measured_by(command) {
        None => criteria::figure_names(),
        Some(parts) => {
            let plain: Vec<_> = parts
                .iter()
                .filter(|p| p.1.is_empty())
                .map(|p| p.0)
                .collect();
            let mut text = names(&plain).join(", ");
            for (list, flag) in parts.iter().filter(|p| !p.1.is_empty()) {
                let extra: Vec<_> = names(&[list])
                    .into_iter()
                    .filter(|n| !names(&plain).contains(n))
                    .collect();
                if !extra.is_empty() {
                    if !text.is_empty() {
                        text.push_str("; ");
                    }
                    text.push_str(&format!("with {flag}: {}", extra.join(", ")));
                }
            }
            text
        }
    };
    format!(
        "A criterion the run must meet (repeatable): FIGURE OP VALUE[UNIT][@median|min|max], \
         e.g. 'loss<=0.001%', 'rx_pps>=1.2Mpps', 'p99<=2ms@max', 'ndr>=2Mpps'. Figures {}: \
         {figures}. A failed criterion exits 1; a figure the command does not measure is a \
         usage error (exit 2).",
        if command.is_empty() {
            "".to_string()
        } else {
            format!("{command} measures")
        }
    )
}

/// Refuses a criterion on a figure `command` does not measure, before
/// anything runs: `active` are the flags given among those that add
/// figures (`--latency`, `--load udp`, `--method mlr`...).
pub fn check_measured(list: &[criteria::Criterion], command: &str, active: &[&str]) -> Result<()> {
    let Some(parts) = measured_by(command) else {
        return Ok(());
    };
    let on: Vec<_> = parts
        .iter()
        .filter(|p| p.1.is_empty() || active.contains(&p.1))
        .map(|p| p.0)
        .collect();
    let measured = names(&on);
    for c in list {
        if measured.contains(&c.figure.name) {
            continue;
        }
        let with = parts
            .iter()
            .find(|p| !p.1.is_empty() && !active.contains(&p.1) && p.0.contains(&c.figure.name))
            .map(|p| format!(" without {}: add {} to measure it", p.1, p.1))
            .unwrap_or_default();
        bail!(
            "--expect '{}': {command} does not measure {} ({}){with}; {command} measures {}",
            c.text,
            c.figure.name,
            c.figure.about,
            measured.join(", ")
        );
    }
    Ok(())
}

/// Parses `--expect` values, naming the flag in the error (a plan's
/// error points at its `expect` key by it).
pub fn parse_expect(list: &[String]) -> Result<Vec<criteria::Criterion>> {
    criteria::parse_all(list).map_err(|e| anyhow!("--expect {e}"))
}

impl CriteriaArgs {
    /// The validated options.
    pub fn opts(&self) -> Result<CriteriaOpts> {
        if let Some(b) = &self.baseline {
            if !b.exists() {
                bail!(
                    "--baseline {}: no such run directory or results file; name a run \
                     directory of an earlier run (e.g. linerate-results/<run>)",
                    b.display()
                );
            }
        }
        if let Some(j) = &self.junit {
            let dir = j
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            if !dir.is_dir() {
                bail!(
                    "--junit {}: directory {} does not exist; create it or name another file",
                    j.display(),
                    dir.display()
                );
            }
        }
        let expect = parse_expect(&self.expect)?;
        Ok(CriteriaOpts {
            abort: self.abort_opts(&expect)?,
            expect,
            repeat: self.repeat,
            baseline: self.baseline.clone(),
            tolerance_pct: self.tolerance,
            junit: self.junit.clone(),
        })
    }

    /// `--abort-on-fail` over `expect` ([`abort::opts`]).
    pub fn abort_opts(&self, expect: &[criteria::Criterion]) -> Result<Option<AbortOpts>> {
        Ok(abort::opts(self.abort_on_fail, self.abort_after, expect)?)
    }
}
