//! `linerate doctor`: explains a host's likely network bottlenecks from its
//! own sysfs and procfs, with the evidence for each finding.
//!
//! Everything is read below a root directory (`/` for the live host, or a
//! fixture or extracted capture), so the same code runs on real machines and
//! in tests. Reading needs no privileges. Missing files skip a check and say
//! so in [`Report::skipped`]; they are never errors.
//!
//! This crate owns host inspection only: it sends no traffic and changes no
//! setting. Its fixes are suggestions for the operator.

#![deny(unsafe_code)]

mod capture;
mod cli;
mod cpu;
mod error;
mod host;
mod hwmon;
mod irq;
mod nic;
pub mod parse;
mod pcie;
mod render;
mod report;
mod tcp;
mod topology;

use std::path::PathBuf;
use std::time::Duration;

pub use capture::{capture, CaptureSummary};
pub use cli::{run_cli, run_cli_to, ColorChoice, DoctorArgs};
pub use error::Error;
pub use render::render_text;
pub use report::{
    Evidence, Facts, Finding, IrqFacts, NicFacts, NumaNode, PcieLink, Report, Severity, TcpFacts,
    Temperature,
};

use host::Host;

/// What to inspect and what the test will ask of the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Directory holding the host's `sys/` and `proc/`.
    pub root: PathBuf,
    /// Interfaces the test uses; empty inspects every physical NIC that is up.
    pub nics: Vec<String>,
    /// Cores the test runs on; enables the IRQ-on-test-core, NUMA and SMT
    /// checks that need to know them.
    pub cpus: Option<Vec<usize>>,
    /// Rate the test wants, in bits per second (with `rtt`: the BDP check).
    pub target_rate_bps: Option<f64>,
    /// Round-trip time of the test path (with `target_rate_bps`).
    pub rtt: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            root: PathBuf::from("/"),
            nics: Vec::new(),
            cpus: None,
            target_rate_bps: None,
            rtt: None,
        }
    }
}

/// Inspects the host below `opts.root` and explains what it finds.
///
/// Fails only when the root is not a directory or a NIC named in
/// `opts.nics` does not exist; anything else missing skips a check.
pub fn inspect(opts: &Options) -> Result<Report, Error> {
    inspect_host(&Host::new(&opts.root, false), opts)
}

/// 0 when nothing warns (no findings or only `Info`), 1 when any finding is
/// a `Warning` or `Critical`.
pub fn exit_code(report: &Report) -> i32 {
    let warns = report
        .findings
        .iter()
        .any(|f| f.severity >= Severity::Warning);
    i32::from(warns)
}

/// JSON Schema of [`Report`], for linerate's committed results schema.
pub fn report_schema() -> schemars::Schema {
    schemars::schema_for!(Report)
}

pub(crate) fn inspect_host(host: &Host, opts: &Options) -> Result<Report, Error> {
    match std::fs::metadata(&opts.root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::Root {
                root: opts.root.clone(),
                source: std::io::Error::other("not a directory"),
            })
        }
        Err(source) => {
            return Err(Error::Root {
                root: opts.root.clone(),
                source,
            })
        }
    }
    let mut ctx = Ctx {
        host,
        opts,
        facts: Facts::default(),
        topo: topology::Topology::default(),
        findings: Vec::new(),
        skipped: Vec::new(),
    };
    // Order matters: topology and NICs are facts the later checks use.
    topology::collect(&mut ctx);
    nic::collect(&mut ctx)?;
    pcie::check(&mut ctx);
    irq::check(&mut ctx);
    topology::check_test_cpus(&mut ctx);
    cpu::check(&mut ctx);
    tcp::check(&mut ctx);
    hwmon::check(&mut ctx);

    let mut findings = ctx.findings;
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.subject.cmp(&b.subject))
    });
    Ok(Report {
        root: opts.root.display().to_string(),
        findings,
        facts: ctx.facts,
        skipped: ctx.skipped,
    })
}

/// State shared by the checks during one inspection.
pub(crate) struct Ctx<'a> {
    pub(crate) host: &'a Host,
    pub(crate) opts: &'a Options,
    pub(crate) facts: Facts,
    /// Topology lookups the checks need but the report does not carry.
    pub(crate) topo: topology::Topology,
    pub(crate) findings: Vec<Finding>,
    pub(crate) skipped: Vec<String>,
}

impl Ctx<'_> {
    /// Notes a check that could not run and why.
    pub(crate) fn skip(&mut self, what: impl Into<String>) {
        self.skipped.push(what.into());
    }

    /// Notes that a check needs a file that is not readable.
    pub(crate) fn skip_missing(&mut self, check: &str, rel: &str) {
        self.skipped
            .push(format!("{check}: {} not readable", Host::host_path(rel)));
    }

    pub(crate) fn add(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    /// Reads a trimmed file and returns it with its evidence.
    pub(crate) fn read_ev(&self, rel: &str) -> Option<(String, Evidence)> {
        let value = self.host.read_trimmed(rel)?;
        Some((value.clone(), evidence(rel, value)))
    }
}

/// Evidence for a root-relative path, named as on the host.
pub(crate) fn evidence(rel: &str, value: impl Into<String>) -> Evidence {
    Evidence {
        path: Host::host_path(rel),
        value: value.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: Severity) -> Finding {
        Finding {
            id: "x".into(),
            severity,
            title: String::new(),
            evidence: Vec::new(),
            impact: String::new(),
            fix: String::new(),
            subject: None,
        }
    }

    fn report(findings: Vec<Finding>) -> Report {
        Report {
            root: "/".into(),
            findings,
            facts: Facts::default(),
            skipped: Vec::new(),
        }
    }

    #[test]
    fn exit_code_ignores_info() {
        assert_eq!(exit_code(&report(vec![])), 0);
        assert_eq!(exit_code(&report(vec![finding(Severity::Info)])), 0);
        assert_eq!(exit_code(&report(vec![finding(Severity::Warning)])), 1);
        assert_eq!(exit_code(&report(vec![finding(Severity::Critical)])), 1);
    }

    #[test]
    fn severity_serialises_lowercase_and_orders_by_gravity() {
        let json = serde_json::to_string(&Severity::Critical).unwrap();
        assert_eq!(json, "\"critical\"");
        assert!(Severity::Critical > Severity::Warning);
        assert!(Severity::Warning > Severity::Info);
    }

    #[test]
    fn missing_root_is_an_error() {
        let opts = Options {
            root: PathBuf::from("/nonexistent/linerate-doctor-root"),
            ..Options::default()
        };
        let err = inspect(&opts).unwrap_err();
        assert!(err.to_string().contains("--root"), "{err}");
    }

    #[test]
    fn schema_names_the_report() {
        let schema = serde_json::to_string(&report_schema()).unwrap();
        assert!(schema.contains("findings"));
        assert!(schema.contains("\"critical\""));
    }
}
