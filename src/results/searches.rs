//! A run's ramps and searches: per profile, the ramp's samples and
//! summary per direction, and a search's trials and answer.

use super::{latency_at, FlowMode};
use crate::proto::{Direction, FrameSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct RampResult {
    pub name: String,
    pub profile: String,
    pub frame: FrameSpec,
    pub flow_mode: FlowMode,
    /// Index into `tests` of the test that carried the ramp.
    pub test: usize,
    pub spec: crate::search::RampSpec,
    /// Packets per second at 100 % of the line rate for this frame size.
    pub line_rate_pps: f64,
    pub directions: Vec<RampDirection>,
    /// The sweep point this ramp is, as its test's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::model::sweep::SweepPoint>,
}

impl RampResult {
    /// Samples per direction, in order.
    pub fn directions_samples(&self) -> Vec<Vec<crate::search::RampSample>> {
        self.directions.iter().map(|d| d.samples.clone()).collect()
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct RampDirection {
    pub direction: String,
    /// One sample per second.
    pub samples: Vec<crate::search::RampSample>,
    pub summary: crate::search::ramp::RampSummary,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct SearchResult {
    pub name: String,
    pub profile: String,
    pub frame: FrameSpec,
    pub flow_mode: FlowMode,
    pub direction: Direction,
    pub line_rate_pps: f64,
    pub mlr: Option<crate::search::MlrResult>,
    pub rfc2544: Option<crate::search::rfc2544::Rfc2544Result>,
    pub frame_loss: Option<crate::search::rfc2544::FrameLossResult>,
    /// `--latency-at`: one-way latency at shares of the throughput found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_at: Option<latency_at::LatencyAt>,
    /// RFC 2544 §26.4 / RFC 9004 back-to-back frames (`--method back-to-back`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_to_back: Option<crate::search::BackToBackResult>,
    /// The sweep point this search is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::model::sweep::SweepPoint>,
}
