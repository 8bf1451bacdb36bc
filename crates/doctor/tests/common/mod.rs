//! Helpers the doctor's integration tests share: fixture hosts and their
//! options, findings by id, scratch directories and flag parsing.

// Each test file is its own binary and uses only some of these.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use clap::Parser;
use linerate_doctor::{DoctorArgs, Finding, Options, Report};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn opts(name: &str) -> Options {
    Options {
        root: fixture(name),
        ..Options::default()
    }
}

pub fn ids(report: &Report) -> Vec<&str> {
    report.findings.iter().map(|f| f.id.as_str()).collect()
}

pub fn finding<'a>(report: &'a Report, id: &str) -> &'a Finding {
    report
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id} in {:?}", ids(report)))
}

/// The evidence pairs of a finding, for exact comparison.
pub fn evidence(f: &Finding) -> Vec<(&str, &str)> {
    f.evidence
        .iter()
        .map(|e| (e.path.as_str(), e.value.as_str()))
        .collect()
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "linerate-doctor-test-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("creating a temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn parse_args(argv: &[&str]) -> DoctorArgs {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        doctor: DoctorArgs,
    }
    let mut full = vec!["doctor"];
    full.extend_from_slice(argv);
    Cli::try_parse_from(full).expect("test flags parse").doctor
}

/// Copies a fixture tree into `to` (plain files and directories).
pub fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("creating a copy's directory");
    for e in fs::read_dir(from)
        .expect("listing a fixture directory")
        .flatten()
    {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).expect("copying a fixture file");
        }
    }
}
