//! The DUT's CPU cost per packet along the load (seed 001's figure):
//! cycles per packet (or ns of DUT CPU per packet where the host shows no
//! clock) against offered load, one line per ramp direction and the search
//! trials as points; and the terminal's one line per ramp direction.

use super::charts::{axis, series, sig, Chart, RUN_COLORS};
use super::format as fmt;
use crate::host::efficiency::DutStep;
use crate::results::{RampDirection, RampResult, RunResults};
use crate::search::{RampPhase, RampSample, SearchTrial};

/// A step's per-packet figure: cycles when `cycles`, else ns of CPU time.
fn per_packet(d: &DutStep, cycles: bool) -> Option<f64> {
    if cycles {
        d.cycles_per_packet
    } else {
        d.cpu_ns_per_packet
    }
}

/// A step at its offered load, packets/s.
pub type AtLoad<'a> = (f64, &'a DutStep);

/// A chart line: label, (offered pps, per-packet figure) points, series role.
type Line = (String, Vec<(f64, f64)>, &'static str);

/// Every step of the run that has a per-packet figure.
fn steps(r: &RunResults) -> impl Iterator<Item = &DutStep> {
    let ramps = r
        .ramps
        .iter()
        .flat_map(|x| &x.directions)
        .flat_map(|d| &d.samples)
        .filter_map(|s| s.dut.as_ref());
    let trials = r
        .searches
        .iter()
        .flat_map(search_trials)
        .filter_map(|t| t.outcome.dut.as_ref());
    ramps
        .chain(trials)
        .filter(|d| d.cpu_ns_per_packet.is_some())
}

fn search_trials(s: &crate::results::SearchResult) -> impl Iterator<Item = &SearchTrial> {
    let mlr = s.mlr.iter().flat_map(|m| &m.trials);
    let rfc = s.rfc2544.iter().flat_map(|m| &m.trials);
    let fl = s.frame_loss.iter().flat_map(|m| &m.trials);
    mlr.chain(rfc).chain(fl)
}

/// The chart's lines: each ramp direction's seconds and each search's
/// trials, as (offered load, per-packet cost) points.
fn lines_of(r: &RunResults, cycles: bool) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    for ramp in &r.ramps {
        for d in &ramp.directions {
            let pts: Vec<(f64, f64)> = d
                .samples
                .iter()
                .filter_map(|s| {
                    Some((
                        sig(s.offered_pps),
                        sig(per_packet(s.dut.as_ref()?, cycles)?),
                    ))
                })
                .collect();
            if !pts.is_empty() {
                let label = format!("{} {}", ramp.name, super::figures::dir_label(&d.direction));
                lines.push((label, pts, "received"));
            }
        }
    }
    for s in &r.searches {
        let pts: Vec<(f64, f64)> = search_trials(s)
            .filter_map(|t| {
                let v = per_packet(t.outcome.dut.as_ref()?, cycles)?;
                Some((sig(t.outcome.offered_pps), sig(v)))
            })
            .collect();
        if !pts.is_empty() {
            lines.push((format!("{} trials", s.name), pts, "trial"));
        }
    }
    lines
}

/// Cycles per packet against offered load for the run's ramps (a line per
/// direction) and searches (trials as points); `None` without DUT steps.
pub fn chart(id: &str, r: &RunResults) -> Option<Chart> {
    let all: Vec<&DutStep> = steps(r).collect();
    if all.is_empty() {
        return None;
    }
    // One unit for the whole chart: cycles only when every step has them.
    let cycles = all.iter().all(|d| d.cycles_per_packet.is_some());
    let lines = lines_of(r, cycles);
    // What was counted, said once: every step of a run is counted alike.
    let method = r.tests.iter().find_map(|t| t.dut_efficiency.as_ref());
    let mut xs: Vec<f64> = lines.iter().flat_map(|l| &l.1).map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut data = vec![xs.iter().map(|x| Some(*x)).collect::<Vec<_>>()];
    let mut s = Vec::new();
    for (i, (label, mut pts, role)) in lines.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut line = series(label, "eff", RUN_COLORS[i % RUN_COLORS.len()], role);
        line.span_gaps = true;
        s.push(line);
        data.push(
            xs.iter()
                .map(|x| pts.iter().find(|p| p.0 == *x).map(|p| p.1))
                .collect(),
        );
    }
    let (title, y_label) = if cycles {
        (
            "DUT cycles per packet vs offered load",
            "DUT cycles per packet",
        )
    } else {
        (
            "DUT CPU time per packet vs offered load",
            "DUT CPU ns per packet",
        )
    };
    Some(Chart {
        id: id.into(),
        title: title.into(),
        x: axis("x", "offered load", "pps", Some(0.0)),
        y: vec![axis("eff", y_label, "count", Some(0.0))],
        series: s,
        data,
        note: format!(
            "The DUT's CPU time over the packets it forwarded, per ramp second and per search \
             trial{}. Counted: {}.{}",
            if cycles {
                ", × its CPU clock"
            } else {
                "; no CPU clock on the DUT host, so ns rather than cycles"
            },
            method.map_or("", |m| m.counted.as_str()),
            method
                .map(|m| m.notes.iter().map(|n| format!(" {n}.")).collect::<String>())
                .unwrap_or_default()
        ),
        steps: false,
        marks: Vec::new(),
        x_labels: Vec::new(),
    })
}

/// The samples at the lowest offered load and at saturation (or,
/// unsaturated, at the highest load), each with a DUT step.
fn low_and_high_samples(d: &RampDirection) -> Option<(&RampSample, &RampSample)> {
    let with: Vec<&RampSample> = d
        .samples
        .iter()
        .filter(|s| s.dut.is_some_and(|x| x.cpu_ns_per_packet.is_some()) && s.offered_pps > 0.0)
        .collect();
    let low = with
        .iter()
        .min_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))?;
    let high = match d.summary.saturation {
        Some(sat) => d.samples.get(sat.sample_index).filter(|s| s.dut.is_some()),
        None => None,
    }
    .or_else(|| {
        with.iter()
            .filter(|s| s.phase != RampPhase::Warmup)
            .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
            .copied()
    })?;
    Some((low, high))
}

/// The figure at the lowest offered load and at saturation (or, unsaturated,
/// at the highest load), as ((pps, step), (pps, step)).
pub fn low_and_high(d: &RampDirection) -> Option<(AtLoad<'_>, AtLoad<'_>)> {
    let (low, high) = low_and_high_samples(d)?;
    Some((
        (low.offered_pps, low.dut.as_ref()?),
        (high.offered_pps, high.dut.as_ref()?),
    ))
}

/// `ramp NAME DIR: DUT 41184 cycles/packet at 33.3 kpps (lowest load), 6912
/// at 300 kpps (saturation)`; `None` without DUT steps.
pub fn ramp_line(r: &RampResult, d: &RampDirection) -> Option<String> {
    let ((lo_pps, lo), (hi_pps, hi)) = low_and_high(d)?;
    let (_, high) = low_and_high_samples(d)?;
    let cycles = lo.cycles_per_packet.is_some() && hi.cycles_per_packet.is_some();
    let v =
        |s: &DutStep| per_packet(s, cycles).map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
    let unit = if cycles {
        "cycles/packet"
    } else {
        "ns of CPU per packet"
    };
    Some(format!(
        "{} {}: DUT {} {unit} at {} (lowest load), {} at {} ({})",
        r.name,
        super::figures::dir_label(&d.direction),
        v(lo),
        fmt::pps(lo_pps),
        v(hi),
        fmt::pps(hi_pps),
        // The same rule as the ramp's rows: a lossy sample is the DUT's,
        // a short one without loss the tester's.
        if d.summary.saturated {
            "saturation"
        } else if crate::results::bottleneck::sample_tester_limited(high) {
            "highest load, not saturated: the tester could offer no more"
        } else {
            "highest load, not saturated"
        }
    ))
}
