//! One results document as the report sees it (`Run`: the document, its
//! directory and its label). Every report file may use it; it uses none of
//! them.

use crate::results::RunResults;
use std::path::PathBuf;

/// One results document and how the report calls it.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    /// The run directory (or the directory of the results file given).
    pub dir: PathBuf,
    pub results: RunResults,
}

impl Run {
    /// DUT mode of the run's lab, if it had a DUT.
    pub fn dut_mode(&self) -> Option<&str> {
        dut_mode(&self.results)
    }
}

pub fn dut_mode(r: &RunResults) -> Option<&str> {
    r.labs
        .iter()
        .filter(|l| l.kind == "dut")
        .find_map(|l| l.dut_mode.as_deref())
}
