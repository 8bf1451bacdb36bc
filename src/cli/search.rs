//! `linerate search`: its flags and the throughput search they describe.

use super::common::Common;
use super::parse::{parse_frame, parse_rate_arg};
use super::target::{ProfileArgs, TargetArgs};
use crate::model::units::Rate;
use crate::orchestrate::config::MlrGoal;
use crate::orchestrate::config::{Method, Profile, SearchConfig, SearchPlan};
use crate::proto::FrameSpec;
use anyhow::{anyhow, Result};
use clap::Args;

/// The search methods.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodArg {
    /// MLRsearch: NDR and PDR (and any --goal) in one search.
    Mlr,
    /// RFC 2544 throughput: binary search for the highest zero-loss rate.
    Rfc2544,
    /// Both, one after the other.
    Both,
    /// RFC 2544 §26.4 / RFC 9004 back-to-back frames: the longest burst forwarded whole.
    BackToBack,
}

/// Flags of `linerate search`.
#[derive(Args, Debug, Clone)]
pub struct SearchArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Frame sizes to search one after the other, e.g. 64,128,256,512,1024,1280,1518,imix.
    #[arg(long, value_delimiter = ',', value_parser = parse_frame)]
    pub sizes: Vec<FrameSpec>,
    #[arg(long, value_enum, default_value = "mlr")]
    pub method: MethodArg,
    /// Lowest rate to try: pps, L1 bit/s or % of the line rate (default 1 kpps, or half of
    /// --max-rate if that is lower).
    #[arg(long, value_parser = parse_rate_arg)]
    pub min_rate: Option<Rate>,
    /// Highest rate to try: pps, L1 bit/s or % of the line rate.
    #[arg(long, default_value = "100%", value_parser = parse_rate_arg)]
    pub max_rate: Rate,
    /// RFC 2544 trial seconds (the RFC asks for 60; shorter is labelled non-compliant).
    #[arg(long, default_value_t = 60.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub trial: f64,
    /// RFC 2544: skip the §23 waits around trials (labelled non-compliant).
    #[arg(long)]
    pub no_waits: bool,
    /// RFC 2544 method: loss (%) a trial may have and still pass (RFC 2544 itself
    /// allows none; above 0 the result is a partial drop rate, labelled so).
    #[arg(long, default_value_t = 0.0)]
    pub acceptable_loss: f64,
    /// RFC 2544: also measure the frame loss rate at 100 %, 90 % … of --max-rate.
    #[arg(long)]
    pub frame_loss: bool,
    /// After the search, one-way latency at these % of the throughput found
    /// (RFC 2544 §26.2 at 100), e.g. 10,50,90,100: a trial each.
    #[arg(long, value_delimiter = ',', value_name = "PCT", value_parser = crate::orchestrate::latency_at::parse_load_pct)]
    pub latency_at: Vec<f64>,
    /// Back-to-back: repetitions of the burst search (RFC 2544 asks for 50; fewer is labelled).
    #[arg(long, default_value_t = 50, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub b2b_trials: u16,
    /// Back-to-back: the longest burst, frames (default: 2 s at the burst rate).
    #[arg(long, value_name = "FRAMES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_burst: Option<u64>,
    /// Back-to-back: the DUT's throughput for RFC 9004's corrected buffer time (pps, bit/s or
    /// %; default: its forwarding rate measured under overload).
    #[arg(long, value_parser = parse_rate_arg)]
    pub b2b_throughput: Option<Rate>,
    /// MLRsearch goal NAME=LOSS% (repeatable; default ndr=0 and pdr=0.5).
    #[arg(long = "goal", value_name = "NAME=LOSS%")]
    pub goals: Vec<String>,
    /// MLRsearch: final trial seconds.
    #[arg(long, default_value_t = 1.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub final_trial: f64,
    /// MLRsearch: trial seconds summed at a load before it is decided.
    #[arg(long, default_value_t = 21.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration_sum: f64,
    /// Relative width of the answer, % (MLRsearch goals; RFC 2544 resolution).
    #[arg(long, default_value_t = 0.5)]
    pub width: f64,
    /// MLRsearch: share of trial time allowed to exceed the loss ratio.
    #[arg(long, default_value_t = 0.5)]
    pub exceed_ratio: f64,
    /// A line per trial (folded into the live line otherwise; results.json has them all).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: super::common::SweepArgs,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

/// One `--goal NAME=LOSS%` on top of the shared goal settings.
pub fn parse_goal(s: &str, base: &MlrGoal) -> Result<MlrGoal> {
    let (name, loss) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("--goal '{s}': write NAME=LOSS%, e.g. ndr=0 or pdr=0.5"))?;
    let loss: f64 = loss
        .trim_end_matches('%')
        .parse()
        .map_err(|_| anyhow!("--goal '{s}': the loss must be a percentage, e.g. 0.5"))?;
    Ok(MlrGoal {
        name: name.trim().into(),
        loss_ratio: loss / 100.0,
        ..base.clone()
    })
}

/// `linerate search`: the validated search.
pub fn search_cfg(a: &SearchArgs) -> Result<SearchConfig> {
    if a.method == MethodArg::BackToBack && !a.latency_at.is_empty() {
        anyhow::bail!("--latency-at needs a throughput to take shares of, and --method back-to-back finds none: use --method mlr, rfc2544 or both");
    }
    let p = a.profile.resolve(a.target.lab)?;
    let base = MlrGoal {
        final_trial_duration_s: a.final_trial,
        initial_trial_duration_s: a.final_trial.min(1.0),
        duration_sum_s: a.duration_sum,
        relative_width: a.width / 100.0,
        exceed_ratio: a.exceed_ratio,
        ..MlrGoal::ndr()
    };
    let goals = if a.goals.is_empty() {
        vec![
            base.clone(),
            MlrGoal {
                name: "pdr".into(),
                loss_ratio: 0.005,
                ..base.clone()
            },
        ]
    } else {
        a.goals
            .iter()
            .map(|g| parse_goal(g, &base))
            .collect::<Result<_>>()?
    };
    let profiles = if a.sizes.is_empty() {
        vec![p]
    } else {
        a.sizes
            .iter()
            .map(|&frame| Profile::custom(frame, p.flow_mode))
            .collect()
    };
    Ok(SearchConfig {
        profiles,
        stream: a.profile.stream(&a.common, a.target.lab),
        plan: SearchPlan {
            method: match a.method {
                MethodArg::Mlr => Method::Mlr,
                MethodArg::Rfc2544 => Method::Rfc2544,
                MethodArg::Both => Method::Both,
                MethodArg::BackToBack => Method::BackToBack,
            },
            min_rate: a.min_rate,
            max_rate: a.max_rate,
            goals,
            rfc_trial_s: a.trial,
            rfc_waits: !a.no_waits,
            rfc_acceptable_loss: a.acceptable_loss / 100.0,
            rfc_resolution: a.width / 100.0,
            frame_loss: a.frame_loss,
            cap_pps: None,
            latency_at: a.latency_at.clone(),
            b2b: crate::orchestrate::config::B2bPlan {
                trials: a.b2b_trials.into(),
                max_burst: a.max_burst,
                throughput: a.b2b_throughput,
            },
            verbose: a.verbose,
        },
        line_rate_bps: a.common.line_rate_bps(),
    })
}
