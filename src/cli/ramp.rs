//! `linerate ramp`: its flags and the ramp configuration they describe.

use super::common::Common;
use super::parse::parse_rate_arg;
use super::target::{ProfileArgs, TargetArgs};
use crate::model::units::Rate;
use crate::orchestrate::config::RampConfig;
use crate::orchestrate::config::RampSpec;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::path::PathBuf;

/// Flags of `linerate ramp`.
#[derive(Args, Debug, Clone)]
pub struct RampArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Warmup rate: pps (10kpps), L1 bit/s (100M) or % of the line rate (1%).
    #[arg(long, default_value = "1%", value_parser = parse_rate_arg)]
    pub warmup_rate: Rate,
    /// Warmup seconds.
    #[arg(long, default_value_t = 5.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub warmup: f64,
    /// Rate the ramp ends at: pps, L1 bit/s or % of the line rate; `auto`
    /// first probes the DUT (one second unpaced) and ramps to twice what it
    /// forwarded, so the samples fall around its limit.
    #[arg(long, default_value = "auto", value_parser = parse_ramp_to)]
    pub ramp_to: RampTo,
    /// Ramp seconds (linear from 0 to --ramp-to).
    #[arg(long, default_value_t = 30.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub ramp: f64,
    /// Seconds to hold --ramp-to after the ramp.
    #[arg(long, default_value_t = 5.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub hold: f64,
    /// Loss (%) above which a one-second sample counts as lossy.
    #[arg(long, default_value_t = 0.1)]
    pub loss_threshold: f64,
    /// Also write the samples for another tool: `--export trex-loadtest-viz FILE`.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"])]
    pub export: Option<Vec<String>>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: super::common::SweepArgs,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

/// Where a ramp ends: a rate, or sized to the DUT by a probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RampTo {
    Auto,
    Rate(Rate),
}

fn parse_ramp_to(s: &str) -> Result<RampTo> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(RampTo::Auto);
    }
    parse_rate_arg(s)
        .map(RampTo::Rate)
        .map_err(|e| anyhow!("{e}; or `auto` to size the ramp to the DUT by a one-second probe"))
}

/// `linerate ramp`: the validated ramp.
pub fn ramp(a: &RampArgs) -> Result<RampConfig> {
    let p = a.profile.resolve(a.target.lab)?;
    let frame = crate::orchestrate::values::average_frame(p.frame);
    let spec = RampSpec {
        warmup_pps: a.warmup_rate.pps(frame, a.common.line_rate_bps()),
        warmup_s: a.warmup,
        start_pps: 0.0,
        // With auto, a placeholder the probe replaces: the line rate.
        target_pps: match a.ramp_to {
            RampTo::Rate(r) => r.pps(frame, a.common.line_rate_bps()),
            RampTo::Auto => Rate::LinePct(100.0).pps(frame, a.common.line_rate_bps()),
        },
        ramp_s: a.ramp,
        hold_s: a.hold,
    };
    spec.validate().map_err(|e| anyhow!("{e}"))?;
    if !(0.0..100.0).contains(&a.loss_threshold) {
        bail!(
            "--loss-threshold {} must be a percentage in 0..100",
            a.loss_threshold
        );
    }
    let export_viz = match &a.export {
        None => None,
        Some(ex) => {
            if ex.first().map(String::as_str) != Some("trex-loadtest-viz") {
                bail!("--export knows one format: trex-loadtest-viz (e.g. --export trex-loadtest-viz ramp.json)");
            }
            Some(PathBuf::from(
                ex.get(1).ok_or_else(|| anyhow!("--export needs a file"))?,
            ))
        }
    };
    Ok(RampConfig {
        profile: p,
        stream: a.profile.stream(&a.common, a.target.lab),
        spec,
        probe: a.ramp_to == RampTo::Auto,
        loss_threshold: a.loss_threshold / 100.0,
        export_viz,
        line_rate_bps: a.common.line_rate_bps(),
    })
}
