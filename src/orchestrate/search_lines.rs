//! The lines a search prints, and its searches' configurations from the
//! plan: each MLR goal's answer, the RFC 2544 throughput and its
//! frame-loss run. Pure: what [`super::loadtest::run_search`] shows and
//! runs.

use crate::orchestrate::config::SearchPlan;
use crate::search;

/// Each MLR goal's answer line (and its evidence line, if any).
pub(super) fn mlr_lines(name: &str, r: &search::MlrResult, min: f64, lr_pps: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let pct = |pps: f64| pps / lr_pps * 100.0;
    for g in &r.goals {
        let v = g.conditional_throughput_pps.or(g.relevant_lower_bound_pps);
        let answer = match (&g.irregular, v) {
            (Some(search::mlr::Irregular::MinLoadIsUpperBound), _) => format!(
                "below {min:.0} pps (the lowest load tried lost more than {} %); pass a lower --min-rate",
                g.goal.loss_ratio * 100.0
            ),
            (Some(search::mlr::Irregular::TesterLimitIsLowerBound), Some(v)) => format!(
                ">= {v:.0} pps, {:.2} % of line rate: the tester's limit, not the DUT's (no DUT loss up to what it could offer)",
                pct(v)
            ),
            (Some(search::mlr::Irregular::TesterLimitInBracket), Some(v)) => format!(
                "between {v:.0} and {:.0} pps ({:.2} % of line rate at most): the DUT lost frames at the upper bound; the tester could not offer the loads between to narrow it",
                g.relevant_upper_bound_pps.unwrap_or(v),
                pct(g.relevant_upper_bound_pps.unwrap_or(v))
            ),
            (Some(search::mlr::Irregular::MaxLoadIsLowerBound), Some(v)) => format!(
                ">= {v:.0} pps, {:.2} % of line rate: no loss up to --max-rate",
                pct(v)
            ),
            (Some(search::mlr::Irregular::Unfinished), _) => {
                let why = match r.end {
                    search::MlrEnd::TrialLimit => "it reached its trial limit",
                    search::MlrEnd::TimeLimit => "it reached its time limit",
                    _ => "it ended",
                };
                let bounds = match (g.relevant_lower_bound_pps, g.relevant_upper_bound_pps) {
                    (Some(lo), Some(hi)) => format!("between {lo:.0} and {hi:.0} pps"),
                    (Some(lo), None) => format!(">= {lo:.0} pps"),
                    (None, Some(hi)) => format!("below {hi:.0} pps"),
                    (None, None) => "no bound".into(),
                };
                format!(
                    "unfinished: {bounds} when {why} before the goal's width; run it again or allow more trials"
                )
            }
            (_, Some(v)) => format!("{v:.0} pps, {:.2} % of line rate", pct(v)),
            (_, None) => "not found".into(),
        };
        lines.push(format!(
            "{} {}: {answer} ({} trials, {:.1} s)",
            name, g.goal.name, g.trials_used, g.time_spent_s
        ));
        if let Some(c) = &g.confidence {
            lines.push(format!("  {} evidence: {}", g.goal.name, c.summary()));
        }
    }
    lines
}

/// The RFC 2544 throughput's line.
pub(super) fn rfc2544_line(name: &str, r: &search::Rfc2544Result, min: f64, lr_pps: f64) -> String {
    let pct = |pps: f64| pps / lr_pps * 100.0;
    format!(
        "{} RFC 2544 throughput: {}{}{} ({} trials, {:.1} s)",
        name,
        match (r.end, r.throughput_pps) {
            (search::rfc2544::ThroughputEnd::MinRateFailed, _) => format!(
                "below {min:.0} pps (the lowest load tried lost frames); pass a lower --min-rate"
            ),
            (search::rfc2544::ThroughputEnd::TesterLimit, Some(v)) => format!(
                ">= {v:.0} pps, {:.2} % of line rate: the tester's limit, not the DUT's",
                pct(v)
            ),
            (_, Some(v)) => format!("{v:.0} pps, {:.2} % of line rate", pct(v)),
            (_, None) => "none found".into(),
        },
        match r.contradicting_trials {
            0 => String::new(),
            n => format!(
                "; {n} trial{} contradicted an earlier one (loss below a rate that had \
                 passed, or the reverse): the DUT's loss-free rate moved while it was measured",
                if n == 1 { "" } else { "s" }
            ),
        },
        if r.rfc2544_compliant {
            ""
        } else {
            " [not RFC 2544 compliant: see compliance_notes]"
        },
        r.trials.len(),
        r.time_spent_s
    )
}

/// The RFC 2544 throughput search's configuration from the plan.
pub(super) fn rfc2544_config(plan: &SearchPlan, min: f64, max: f64) -> search::Rfc2544Config {
    let mut cfg = search::Rfc2544Config::new(min, max);
    cfg.trial_duration_s = plan.rfc_trial_s;
    cfg.acceptable_loss_ratio = plan.rfc_acceptable_loss;
    cfg.resolution = search::rfc2544::Resolution::Relative(plan.rfc_resolution);
    if !plan.rfc_waits {
        cfg.waits = search::TrialWaits::NONE;
    }
    cfg
}

/// The frame-loss run's configuration from the plan.
pub(super) fn frame_loss_config(plan: &SearchPlan, max: f64) -> search::FrameLossConfig {
    let mut fl = search::FrameLossConfig::new(max);
    fl.trial_duration_s = plan.rfc_trial_s;
    if !plan.rfc_waits {
        fl.waits = search::TrialWaits::NONE;
    }
    fl
}
