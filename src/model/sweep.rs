//! What a sweep point is (issue 21): the coordinates of one test of a
//! benchmark matrix, and the axes of the matrix it belongs to. Plans and
//! the `--sweep` flag produce them, results.json carries them, the report
//! pivots on them. Pure data; the expansion lives beside it once built.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One coordinate of a sweep point: a parameter and the value it had.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct Coord {
    /// The parameter as the user named it (`frame_size`, `streams`, `dut`…).
    pub key: String,
    /// Its value as the user wrote it (`64`, `bidir`, `router`).
    pub value: String,
    /// The value as a number when it is one (for plots along this axis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<f64>,
}

/// Which sweep a test belongs to and where in it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct SweepPoint {
    /// The sweep's name (the plan test's or the command's name).
    pub sweep: String,
    /// 0-based position in the sweep's expansion order.
    pub index: usize,
    /// Coordinates in the sweep's axis order.
    pub coords: Vec<Coord>,
}

/// A sweep of the run: its axes and how the report pivots it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct SweepInfo {
    pub name: String,
    /// Every axis, in expansion order (the first varies slowest).
    pub axes: Vec<String>,
    /// Axes shown as the pivot's rows (`--rows`, a plan's `rows`); empty:
    /// the report chooses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<String>,
    /// Axes shown as the pivot's columns (`--cols`, a plan's `cols`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cols: Vec<String>,
    /// The figure in each cell (`rx_gbps`, `pct_line`, `rx_pps`…); none:
    /// the report chooses by test kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// How many points the sweep has.
    pub points: usize,
}
