//! Latency at load points after a throughput search (`search
//! --latency-at`, RFC 2544 §26.2 at 100 %): one trial per share of the
//! throughput found, with one-way latency per direction.

use crate::model::hdr::OwdSummary;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The load points of one search and what they refer to.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct LatencyAt {
    /// Which throughput the points are shares of: `rfc2544 throughput`,
    /// or `mlr <goal> lower bound` (the first goal with no loss allowed,
    /// the NDR by default).
    pub basis: String,
    /// That throughput, pps (per direction).
    pub basis_pps: f64,
    /// Seconds of each point's trial.
    pub trial_s: f64,
    /// How sender and receiver clocks relate: `same host` (both ends read
    /// one CLOCK_MONOTONIC; across hosts `--latency-at` is refused).
    pub clock: String,
    /// hdrhistogram's significant digits of the figures (2: each within
    /// 0.8 % of the frames' value).
    pub significant_digits: u8,
    pub points: Vec<LatencyPoint>,
    /// Why there are no points, or fewer than asked (no throughput found,
    /// a trial failed, interrupted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One load point: its trial and each direction's latency.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct LatencyPoint {
    /// % of `basis_pps`.
    pub load_pct: f64,
    /// The rate asked, pps per direction.
    pub rate_pps: f64,
    /// Index of the point's trial in the run's `tests`.
    pub test: usize,
    pub directions: Vec<LatencyPointDirection>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct LatencyPointDirection {
    pub direction: String,
    pub tx_packets: u64,
    pub rx_packets: u64,
    /// Lost by the DUT (sequence numbers, the tester's own drops apart).
    pub dut_lost: u64,
    /// lost / tx_packets, 0..1.
    pub loss_ratio: f64,
    /// One-way latency of the frames received; absent when the receiver
    /// timed none (`note` says why).
    pub latency: Option<OwdSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
