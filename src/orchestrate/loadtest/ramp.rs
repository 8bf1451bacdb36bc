//! Ramps over real UDP trials: the unpaced probe that sizes a ramp, the
//! ramp with the stall watch on, its seconds run again when the host
//! stalled, and each direction's summary.

use super::*;

/// Seconds of the unpaced probe that sizes a ramp to the DUT.
const PROBE_S: f64 = 1.0;

/// Sizes a ramp to the DUT: one unpaced second (recorded as a test) shows
/// what the tester offers and what the DUT forwards when overloaded. The
/// ramp climbs to twice what was forwarded (the tester's offer at most),
/// with a warmup at 5 % of that; a DUT that lost nothing of the tester's
/// most gets a ramp to that most (the tester is the limit there).
fn probe_ramp(ends: &mut Ends, cfg: &RampConfig, run: &mut Run) -> Result<search::RampSpec> {
    let mut t = base_test(&cfg.profile, &cfg.stream)?;
    t.name = format!("ramp probe {}", cfg.profile.name);
    t.duration = Duration::from_secs_f64(PROBE_S);
    let i = run.results.tests.len();
    run.ramp_udp(ends, &t);
    let r = &run.results.tests[i];
    if r.status != TestStatus::Ok {
        fail!(
            "the probe that sizes the ramp to the DUT failed: {}; give the ramp's end with --ramp-to RATE",
            r.error.clone().unwrap_or_default()
        );
    }
    let n = r.directions.len().max(1) as f64;
    let offered = r.directions.iter().map(|d| d.tx_pps).sum::<f64>() / n;
    let forwarded = r.directions.iter().map(|d| d.rx_pps).sum::<f64>() / n;
    if !(offered > 0.0 && forwarded > 0.0) {
        fail!(
            "the probe that sizes the ramp to the DUT got nothing through (offered {offered:.0} pps, received {forwarded:.0}); check the path, or give --ramp-to RATE"
        );
    }
    let target = (2.0 * forwarded).min(offered).min(cfg.spec.target_pps);
    errln!(
        "ramp {}: the probe offered {offered:.0} pps and the DUT forwarded {forwarded:.0}; ramping to {target:.0} pps",
        cfg.profile.name
    );
    Ok(search::RampSpec {
        warmup_pps: cfg.spec.warmup_pps.min(target * 0.05),
        target_pps: target,
        start_pps: cfg.spec.start_pps.min(target),
        ..cfg.spec
    })
}

/// Runs one ramp and records it; returns a verdict line per direction.
/// The stall watch is on meanwhile: a lossy second it explains is run
/// again and left out of the saturation, as a search's disturbed trial.
pub fn run_ramp(ends: &mut Ends, cfg: &RampConfig, run: &mut Run) -> Result<Vec<String>> {
    ends.watch_stalls(true);
    let lines = ramp_watched(ends, cfg, run);
    ends.watch_stalls(false);
    lines
}

/// The line that says how many of a ramp's seconds were run again, if any.
fn rerun_note(name: &str, reruns: usize) -> Option<String> {
    (reruns > 0).then(|| {
        format!(
            "ramp {}: {reruns} disturbed second{} run again as 1 s trials at {} rate{} (the \
             DUT's host stalled long enough to lose what {} lost)",
            name,
            if reruns == 1 { "" } else { "s" },
            if reruns == 1 { "its" } else { "their" },
            if reruns == 1 { "" } else { "s" },
            if reruns == 1 { "it" } else { "they" },
        )
    })
}

/// Each direction's ramp summary, and its verdict line added to `lines`.
fn summarize_directions(
    name: &str,
    sampled: Vec<(String, Vec<search::RampSample>)>,
    loss_threshold: f64,
    lr_pps: f64,
    lines: &mut Vec<String>,
) -> Vec<crate::results::RampDirection> {
    let mut dirs = Vec::new();
    for (direction, samples) in sampled {
        let summary = search::summarize_ramp(&samples, loss_threshold, lr_pps);
        let mut verdict = format!("ramp {} {}: {}", name, direction, summary.verdict);
        if summary.tester_limited_samples > 0 {
            verdict.push_str(&format!(
                "; the tester could not offer the asked rate in {} of {} samples (those measure the tester, not the DUT)",
                summary.tester_limited_samples, summary.samples
            ));
        }
        lines.push(verdict);
        dirs.push(crate::results::RampDirection {
            direction,
            samples,
            summary,
        });
    }
    dirs
}

fn ramp_watched(ends: &mut Ends, cfg: &RampConfig, run: &mut Run) -> Result<Vec<String>> {
    let probed;
    let spec = if cfg.probe {
        probed = probe_ramp(ends, cfg, run)?;
        &probed
    } else {
        &cfg.spec
    };
    let (p, loss_threshold) = (&cfg.profile, cfg.loss_threshold);
    let mut t = base_test(p, &cfg.stream)?;
    t.name = format!("ramp {}", p.name);
    t.duration = Duration::from_secs_f64(spec.total_s());
    t.rate_profile = Some(crate::proto::RateProfile {
        points: spec
            .breakpoints()
            .into_iter()
            .map(|(t_s, pps)| crate::proto::RatePoint { t_s, pps })
            .collect(),
    });
    let test_index = run.results.tests.len();
    run.ramp_udp(ends, &t);
    let r = &run.results.tests[test_index];
    if r.status != TestStatus::Ok {
        fail!("ramp {}: {}", p.name, r.error.clone().unwrap_or_default());
    }
    let lr_pps = line_rate_pps(cfg.line_rate_bps, p);
    let mut sampled: Vec<(String, Vec<search::RampSample>)> = r
        .directions
        .iter()
        .map(|d| (d.direction.clone(), ramp_samples(d, spec)))
        .collect();
    let reruns = rerun_disturbed(ends, cfg, run, spec, &mut sampled)?;
    let mut lines: Vec<String> = rerun_note(&p.name, reruns).into_iter().collect();
    let dirs = summarize_directions(&p.name, sampled, loss_threshold, lr_pps, &mut lines);
    run.results.ramps.push(crate::results::RampResult {
        name: t.name.clone(),
        profile: p.name.clone(),
        frame: p.frame,
        flow_mode: p.flow_mode,
        test: test_index,
        spec: *spec,
        line_rate_pps: lr_pps,
        directions: dirs,
        sweep: None,
    });
    if let Some(r) = run.results.ramps.last() {
        lines.extend(
            r.directions
                .iter()
                .filter_map(|d| crate::report::efficiency::ramp_line(r, d)),
        );
    }
    run.save();
    if let Some(file) = &cfg.export_viz {
        let r = run
            .results
            .ramps
            .last()
            .ok_or_else(|| err!("no ramp to export"))?;
        let samples = r.directions_samples();
        let forward = samples.first().map(Vec::as_slice).unwrap_or(&[]);
        let reverse = samples.get(1).map(Vec::as_slice);
        let v = search::viz_export(&r.spec, forward, reverse, &p.name, r.line_rate_pps);
        crate::model::files::write_atomic(file, serde_json::to_string_pretty(&v)?.as_bytes())?;
        errln!("wrote {} (trex-loadtest-viz vars/stats)", file.display());
    }
    Ok(lines)
}

/// The most disturbed ramp seconds run again, per ramp.
const RAMP_RERUNS_MOST: usize = 4;

/// Runs again, as 1 s trials at their intended rates, the ramp seconds whose
/// loss the host's stalls explain ([`search::RampSample::disturbed`]: the
/// hypervisor's steal or the stall watch),
/// as a search runs a disturbed trial again, and puts the trials' figures in
/// their place (marked `rerun`). A rerun that is disturbed too stays so and
/// is left out of the saturation as before. Returns how many ran.
fn rerun_disturbed(
    ends: &mut Ends,
    cfg: &RampConfig,
    run: &mut Run,
    spec: &search::RampSpec,
    sampled: &mut [(String, Vec<search::RampSample>)],
) -> Result<usize> {
    let lossy = |s: &search::RampSample| s.loss_ratio > cfg.loss_threshold;
    let mut seconds: Vec<usize> = sampled
        .iter()
        .flat_map(|(_, samples)| {
            samples
                .iter()
                .enumerate()
                .filter(|(_, s)| s.phase != search::RampPhase::Warmup && lossy(s) && s.disturbed())
        })
        .map(|(i, _)| i)
        .collect();
    seconds.sort_unstable();
    seconds.dedup();
    seconds.truncate(RAMP_RERUNS_MOST);
    let mut ran = 0;
    for i in seconds {
        if stop_requested() {
            break;
        }
        let Some(pps) = sampled
            .iter()
            .find_map(|(_, s)| s.get(i))
            .map(|s| s.intended_pps)
        else {
            continue;
        };
        let mut t = base_test(&cfg.profile, &cfg.stream)?;
        t.name = format!("ramp {} rerun {pps:.0} pps", cfg.profile.name);
        t.rate_pps = Some(pps);
        let k = run.results.tests.len();
        run.ramp_udp(ends, &t);
        ran += 1;
        let res = &run.results.tests[k];
        if res.status != TestStatus::Ok {
            continue;
        }
        for (direction, samples) in sampled.iter_mut() {
            let Some(d) = res.directions.iter().find(|d| &d.direction == direction) else {
                continue;
            };
            let Some(old) = samples.get_mut(i) else {
                continue;
            };
            if let Some(new) = rerun_sample(d, spec, old) {
                *old = new;
            }
        }
    }
    Ok(ran)
}

/// A rerun trial's figures as the ramp sample `old` (its time and phase
/// kept): the trial's whole-run counts, and the DUT's readings of its
/// longest interval.
pub(super) fn rerun_sample(
    d: &crate::results::DirectionResult,
    spec: &search::RampSpec,
    old: &search::RampSample,
) -> Option<search::RampSample> {
    let secs = Some(d.duration_s).filter(|&s| s > 0.0)?;
    let dut = ramp_samples(d, spec)
        .into_iter()
        .filter_map(|s| s.dut)
        .max_by(|a, b| a.duration_s.total_cmp(&b.duration_s));
    let lost = d.lost;
    Some(search::RampSample {
        t_s: old.t_s,
        phase: old.phase,
        intended_pps: old.intended_pps,
        offered_pps: d.tx_packets as f64 / secs,
        received_pps: d.rx_packets as f64 / secs,
        loss_ratio: if d.rx_packets + lost > 0 {
            lost as f64 / (d.rx_packets + lost) as f64
        } else {
            0.0
        },
        tester_limited: crate::results::bottleneck::sender_short(d.tx_packets, d.tx_target)
            && lost == 0,
        dut,
        rerun: true,
    })
}
