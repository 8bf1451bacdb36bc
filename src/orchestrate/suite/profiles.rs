//! The suite's seed profiles: per profile an MLRsearch for NDR and PDR,
//! then a ramp sized to what it found, and notes where the two disagree.

use super::*;

/// `--only` matches a profile by part of its name, or all with `profiles`.
pub(super) fn profile_wanted(args: &LabConfig, name: &str) -> bool {
    args.only.is_empty()
        || args
            .only
            .iter()
            .any(|o| name.contains(o.as_str()) || o == "profiles")
}

/// The profiles' searches: MLR for NDR and PDR (0.5 %) from a thousandth
/// of `top` pps up to it, in short trials.
fn suite_search(top: f64) -> SearchPlan {
    use crate::model::units::Rate;
    use crate::orchestrate::config::Method;
    use crate::search;
    let goal = search::MlrGoal {
        final_trial_duration_s: 1.0,
        initial_trial_duration_s: 0.5,
        duration_sum_s: 2.0,
        relative_width: 0.02,
        ..search::MlrGoal::ndr()
    };
    SearchPlan {
        method: Method::Mlr,
        // A thousandth of the top: the self-test's ceiling (the live
        // engine's, millions of pps) must not put a slow DUT below it.
        min_rate: Some(Rate::Pps((top / 1000.0).max(1000.0).round())),
        max_rate: Rate::Pps(top.round()),
        goals: vec![
            goal.clone(),
            search::MlrGoal {
                name: "pdr".into(),
                loss_ratio: 0.005,
                ..goal
            },
        ],
        rfc_trial_s: 60.0,
        rfc_waits: true,
        rfc_acceptable_loss: 0.0,
        rfc_resolution: 0.02,
        frame_loss: false,
        cap_pps: None,
        latency_at: Vec::new(),
        b2b: Default::default(),
        verbose: false,
    }
}

/// The stream every profile sends: 16 flows, the lab's direction and
/// engines.
fn suite_stream(args: &LabConfig, opts: &RunOpts) -> Stream {
    Stream {
        flows: 16,
        bidir: args.direction == Direction::Both,
        ipv6: false,
        cpus: opts.cpus.clone(),
        allow: opts.allow_target.clone(),
        tx_engine: args.tx_engine,
        rx_engine: args.rx_engine,
        threads: args.threads,
    }
}

/// Per seed profile: an MLRsearch for NDR and PDR bounded by what the
/// tester showed it can send in the self-test, then a ramp sized to what
/// the search found (from half the NDR to half again above the PDR's upper
/// bound), so its samples fall where the DUT saturates; where the two
/// disagree, the ramp says so and why.
pub(super) fn profiles(
    args: &LabConfig,
    opts: &RunOpts,
    run: &mut Run,
    ends: &mut Ends,
) -> Result<()> {
    use crate::orchestrate::config::RampConfig;
    // The tester's own ceiling: above it every trial measures the tester.
    let cap = run
        .results
        .tests
        .iter()
        .filter(|t| t.name.starts_with("self-test"))
        .flat_map(|t| t.directions.iter().map(|d| d.rx_pps))
        .fold(0.0, f64::max);
    let stream = suite_stream(args, opts);
    let secs = args.duration_s.unwrap_or(8.0).clamp(2.0, 600.0);
    let mut lines = Vec::new();
    for name in config::SEED_PROFILES {
        if stop_requested() {
            break;
        }
        if !profile_wanted(args, name) {
            continue;
        }
        let p = config::seed_profile(name)?;
        let line_pps = crate::model::units::line_rate_pps(
            opts.line_rate_bps,
            crate::engine::frame::average_frame(p.frame),
        );
        let top = if cap > 0.0 {
            (cap * 1.2).min(line_pps)
        } else {
            line_pps
        };
        let plan = suite_search(top);
        let cfg = SearchConfig {
            profiles: vec![p.clone()],
            stream: stream.clone(),
            plan,
            line_rate_bps: opts.line_rate_bps,
        };
        lines.extend(crate::orchestrate::loadtest::run_search(
            ends.reborrow(),
            &p,
            &cfg,
            run,
        )?);
        let found = run
            .results
            .searches
            .last()
            .and_then(|s| s.mlr.as_ref())
            .map(search_figures)
            .unwrap_or_default();
        let spec = ramp_around(&found, top, secs);
        let ramp = RampConfig {
            profile: p.clone(),
            stream: stream.clone(),
            spec,
            probe: false,
            loss_threshold: 0.001,
            export_viz: None,
            line_rate_bps: opts.line_rate_bps,
        };
        lines.extend(crate::orchestrate::loadtest::run_ramp(ends, &ramp, run)?);
        if let Some(r) = run.results.ramps.last_mut() {
            lines.extend(note_contradictions(r, &found, &p.name, ramp.loss_threshold));
            run.save();
        }
    }
    for l in lines {
        errln!("{l}");
    }
    Ok(())
}

/// Notes under each of the ramp's directions where it and the search
/// before it (`found`) disagree ([`crate::search::ramp::contradictions`]); the
/// lines that print them.
fn note_contradictions(
    r: &mut crate::results::RampResult,
    found: &Found,
    profile: &str,
    loss_threshold: f64,
) -> Vec<String> {
    let mut lines = Vec::new();
    for d in &mut r.directions {
        let sat = d
            .summary
            .saturation
            .map(|s| s.onset_pps.unwrap_or(s.offered_pps));
        let held = crate::search::ramp::RampHeld {
            to_pps: sat.unwrap_or(d.summary.peak_offered_pps),
            saturated: sat.is_some(),
            loss_threshold,
        };
        d.summary.notes = crate::search::ramp::contradictions(
            found.ndr,
            found.pdr,
            sat,
            found.pdr_upper,
            Some(held),
        );
        for n in &d.summary.notes {
            lines.push(format!("ramp {profile} {}: note: {n}", d.direction));
        }
    }
    lines
}

/// What a profile's search found, as the ramp after it needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Found {
    /// The NDR and PDR as reported (conditional throughput), pps.
    ndr: Option<f64>,
    pdr: Option<f64>,
    /// The lowest relevant lower bound and the highest relevant upper
    /// bound of the goals, pps.
    low: Option<f64>,
    high: Option<f64>,
    /// Where the PDR goal failed, with its loss ratio.
    pdr_upper: Option<crate::search::ramp::PdrUpper>,
}

fn search_figures(m: &crate::search::MlrResult) -> Found {
    let goal = |name: &str| m.goals.iter().find(|g| g.goal.name == name);
    let value = |name: &str| {
        goal(name).and_then(|g| g.conditional_throughput_pps.or(g.relevant_lower_bound_pps))
    };
    let lows = m.goals.iter().filter_map(|g| g.relevant_lower_bound_pps);
    let highs = m
        .goals
        .iter()
        .filter_map(|g| g.relevant_upper_bound_pps.or(g.relevant_lower_bound_pps));
    Found {
        ndr: value("ndr"),
        pdr: value("pdr"),
        low: lows.reduce(f64::min),
        high: highs.reduce(f64::max),
        pdr_upper: goal("pdr").and_then(|g| {
            Some(crate::search::ramp::PdrUpper {
                load_pps: g.relevant_upper_bound_pps?,
                loss_ratio: g.goal.loss_ratio,
            })
        }),
    }
}

/// A ramp whose samples fall where the DUT saturates: from half the lowest
/// bound the search found to half again above its highest (at most `top`,
/// the tester's ceiling), a second per sample. Without a search answer, the
/// whole range up to `top` as before.
fn ramp_around(found: &Found, top: f64, secs: f64) -> crate::search::RampSpec {
    let (start, target) = match (found.low, found.high) {
        (Some(lo), Some(hi)) if hi > 0.0 => ((lo * 0.5).min(top * 0.5), (hi * 1.5).min(top)),
        _ => (0.0, top),
    };
    crate::search::RampSpec {
        warmup_pps: target * 0.05,
        warmup_s: 1.0,
        start_pps: start,
        target_pps: target,
        ramp_s: secs,
        hold_s: 2.0,
    }
}

#[cfg(test)]
mod ramp_tests {
    use super::*;

    #[test]
    fn the_ramp_spans_the_search_answer() {
        let f = Found {
            ndr: Some(300_000.0),
            pdr: Some(320_000.0),
            low: Some(300_000.0),
            high: Some(326_000.0),
            pdr_upper: None,
        };
        let s = ramp_around(&f, 6_000_000.0, 8.0);
        assert_eq!((s.start_pps, s.target_pps), (150_000.0, 489_000.0));
        assert!(s.validate().is_ok());
        // Capped by the tester, and the whole range without an answer.
        assert_eq!(ramp_around(&f, 400_000.0, 8.0).target_pps, 400_000.0);
        let none = ramp_around(&Found::default(), 400_000.0, 8.0);
        assert_eq!((none.start_pps, none.target_pps), (0.0, 400_000.0));
    }
}
