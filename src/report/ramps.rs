//! Ramps and throughput searches in the report: their charts (forwarded vs
//! offered load with the ideal line and the saturation point, loss over
//! load with the threshold; every search trial as a point with the results
//! as lines; the DUT's cycles per packet over load, from `efficiency`) and their tables (saturation per ramp; NDR, PDR and RFC 2544
//! throughput per frame size as bars of the line rate).

use super::charts::{axis, series, sig, Chart, Mark, Series, IDEAL_COLOR};
use super::format::{self as fmt, esc};
use super::sections::{bar, dash, num};
use crate::proto::FrameSpec;
use crate::results::bottleneck::sample_tester_limited;
use crate::results::{RampDirection, RampResult, RunResults, SearchResult};
use crate::search::{RampPhase, RampSample, SearchTrial};

fn frame_bytes(f: FrameSpec) -> f64 {
    match f {
        FrameSpec::Fixed(n) => f64::from(n),
        FrameSpec::Imix => crate::model::units::imix_average(),
    }
}

fn frame_text(f: FrameSpec) -> String {
    match f {
        FrameSpec::Fixed(n) => format!("{n} B"),
        FrameSpec::Imix => "imix".into(),
    }
}

const FORWARDED: &str = "#1f5fa8";
const LIMITED: &str = "#b8860b";
const LOSS: &str = "#d62728";
const PASS: &str = "#2a9d3f";
const RESULT_COLORS: [&str; 4] = ["#1f5fa8", "#8c2d9c", "#17a2b8", "#7f7f7f"];

/// The forwarded-vs-offered chart's lines: the ideal, what was forwarded
/// and, if any, the samples the tester limited.
fn forwarded_lines(
    dir: &str,
    samples: &[&RampSample],
    x: &[Option<f64>],
) -> (Vec<Series>, Vec<Vec<Option<f64>>>) {
    let mut fwd_series = vec![
        series(
            "ideal: forwarded = offered".into(),
            "rate",
            IDEAL_COLOR,
            "ideal",
        ),
        series(format!("forwarded {dir}"), "rate", FORWARDED, "received"),
    ];
    let mut fwd_data = vec![
        x.to_vec(),
        x.to_vec(),
        samples.iter().map(|s| Some(sig(s.received_pps))).collect(),
    ];
    // Lossy samples are the DUT's evidence, whatever the sender did: only
    // short samples without loss measure the tester.
    if samples.iter().any(|s| sample_tester_limited(s)) {
        fwd_series.push(series(
            "tester-limited samples".into(),
            "rate",
            LIMITED,
            "limited",
        ));
        fwd_data.push(
            samples
                .iter()
                .map(|s| sample_tester_limited(s).then(|| sig(s.received_pps)))
                .collect(),
        );
    }
    (fwd_series, fwd_data)
}

/// Forwarded vs offered, and loss vs offered, of one ramp direction. Warmup
/// samples are left out: they run at another rate by design.
fn ramp_direction_charts(id: &str, r: &RampResult, d: &RampDirection) -> Vec<Chart> {
    let mut samples: Vec<_> = d
        .samples
        .iter()
        .filter(|s| s.phase != RampPhase::Warmup)
        .collect();
    samples.sort_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps));
    if samples.is_empty() {
        return Vec::new();
    }
    let dir = super::figures::dir_label(&d.direction);
    let x: Vec<Option<f64>> = samples.iter().map(|s| Some(sig(s.offered_pps))).collect();
    let marks: Vec<Mark> = d
        .summary
        .saturation
        .iter()
        .map(|s| Mark {
            x: sig(s.offered_pps),
            label: format!("saturation {}", fmt::pps(s.offered_pps)),
        })
        .collect();
    let x_axis = axis("x", "offered load", "pps", Some(0.0));
    let (fwd_series, fwd_data) = forwarded_lines(&dir, &samples, &x);
    let threshold = d.summary.loss_threshold * 100.0;
    vec![
        Chart {
            id: format!("{id}-fwd"),
            title: format!("{} · {dir}: forwarded vs offered", r.name),
            x: x_axis.clone(),
            y: vec![axis("rate", "forwarded", "pps", Some(0.0))],
            series: fwd_series,
            data: fwd_data,
            note: format!(
                "One point per second of the ramp and hold, by offered load. {}. Drag to zoom, click a legend entry to hide it.",
                d.summary.verdict
            ),
            steps: false,
            marks: marks.clone(),
            x_labels: Vec::new(),
        },
        Chart {
            id: format!("{id}-loss"),
            title: format!("{} · {dir}: loss vs offered", r.name),
            x: x_axis,
            y: vec![axis("loss", "loss", "%", Some(0.0))],
            series: vec![
                series(format!("loss {dir}"), "loss", LOSS, "received"),
                series(format!("threshold {}", fmt::pct(d.summary.loss_threshold, 2)), "loss", IDEAL_COLOR, "ideal"),
            ],
            data: vec![
                x.clone(),
                samples.iter().map(|s| Some(sig(s.loss_ratio * 100.0))).collect(),
                x.iter().map(|_| Some(sig(threshold))).collect(),
            ],
            note: "Lost / sent per second, from sequence numbers; a sample above the threshold is lossy, and the ramp saturates where the final lossy run begins.".into(),
            steps: false,
            marks,
            x_labels: Vec::new(),
        },
    ]
}

/// Which trials a points series shows.
type TrialClass = fn(&SearchTrial) -> bool;

/// The method's trials as points by outcome, with its results as lines.
fn trials_chart(
    id: &str,
    title: String,
    trials: &[SearchTrial],
    results: &[(String, f64)],
) -> Option<Chart> {
    if trials.is_empty() {
        return None;
    }
    let x: Vec<Option<f64>> = trials.iter().map(|t| Some((t.index + 1) as f64)).collect();
    let classes: [(&str, &str, TrialClass); 3] = [
        ("no loss", PASS, |t| t.counted && t.outcome.lost == 0),
        ("lossy", LOSS, |t| t.counted && t.outcome.lost > 0),
        ("tester-limited (not counted)", LIMITED, |t| !t.counted),
    ];
    let mut s = Vec::new();
    let mut data = vec![x.clone()];
    for (label, color, class) in classes {
        if trials.iter().any(class) {
            s.push(series(label.into(), "rate", color, "trial"));
            data.push(
                trials
                    .iter()
                    .map(|t| class(t).then(|| sig(t.rate_pps)))
                    .collect(),
            );
        }
    }
    for (i, (label, pps)) in results.iter().enumerate() {
        s.push(series(
            label.clone(),
            "rate",
            RESULT_COLORS[i % RESULT_COLORS.len()],
            "ideal",
        ));
        data.push(x.iter().map(|_| Some(sig(*pps))).collect());
    }
    Some(Chart {
        id: id.into(),
        title,
        x: axis("x", "trial", "count", None),
        y: vec![axis("rate", "trial rate", "pps", Some(0.0))],
        series: s,
        data,
        note: "Each trial at the rate it asked for, in the order run; dashed: the results. Tester-limited trials say nothing about the DUT and are not counted.".into(),
        steps: false,
        marks: Vec::new(),
        x_labels: Vec::new(),
    })
}

/// `TesterLimitIsLowerBound` → `tester limit is lower bound`.
fn words(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_uppercase() && !out.is_empty() {
            out.push(' ');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Whether a [`search_results`] note marks its rate as a lower bound (≥):
/// the tester's limit, or no loss up to the highest rate tried.
pub fn note_is_lower_bound(note: &str) -> bool {
    ["lower bound", "tester limit", "max rate passed"]
        .iter()
        .any(|w| note.contains(w))
}

/// Results of one search as (label, pps, note): MLRsearch goals, RFC 2544
/// throughput.
pub fn search_results(s: &SearchResult) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    if let Some(m) = &s.mlr {
        for g in &m.goals {
            if let Some(pps) = g.conditional_throughput_pps.or(g.relevant_lower_bound_pps) {
                let note = match &g.irregular {
                    Some(i) => format!("irregular: {}", words(&format!("{i:?}"))),
                    None if g.regular => "regular".into(),
                    None => String::new(),
                };
                out.push((
                    format!(
                        "{} (loss ≤ {})",
                        g.goal.name.to_uppercase(),
                        fmt::pct(g.goal.loss_ratio, 1)
                    ),
                    pps,
                    note,
                ));
            }
        }
    }
    if let Some(r) = &s.rfc2544 {
        if let Some(pps) = r.throughput_pps {
            out.push((
                "RFC 2544 throughput".into(),
                pps,
                words(&format!("{:?}", r.end)),
            ));
        }
    }
    out
}

/// Every chart of the run's ramps and searches.
pub fn charts(prefix: &str, r: &RunResults) -> Vec<Chart> {
    let mut out = Vec::new();
    for (i, ramp) in r.ramps.iter().enumerate() {
        for (j, d) in ramp.directions.iter().enumerate() {
            out.extend(ramp_direction_charts(
                &format!("{prefix}ramp{i}-{j}"),
                ramp,
                d,
            ));
        }
    }
    // In the ramps' section, or the searches' when there is no ramp.
    let section = if r.ramps.is_empty() { "search" } else { "ramp" };
    out.extend(super::efficiency::chart(
        &format!("{prefix}{section}-dut"),
        r,
    ));
    for (i, s) in r.searches.iter().enumerate() {
        let results: Vec<(String, f64)> = search_results(s)
            .into_iter()
            .map(|(l, p, _)| (l, p))
            .collect();
        let methods = [
            ("mlr", "MLRsearch", s.mlr.as_ref().map(|m| &m.trials)),
            (
                "rfc",
                "RFC 2544 throughput",
                s.rfc2544.as_ref().map(|m| &m.trials),
            ),
            (
                "fl",
                "RFC 2544 frame loss",
                s.frame_loss.as_ref().map(|m| &m.trials),
            ),
        ];
        out.extend(super::latency_at::chart(
            &format!("{prefix}search{i}-lat"),
            s,
        ));
        for (key, method, trials) in methods {
            if let Some(c) = trials.and_then(|t| {
                trials_chart(
                    &format!("{prefix}search{i}-{key}"),
                    format!("{} · {method} trials", s.name),
                    t,
                    &results,
                )
            }) {
                out.push(c);
            }
        }
    }
    out
}

/// Every (ramp, direction) of the runs, in the order first seen.
fn ramp_keys(runs: &[super::run::Run]) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in runs {
        for ramp in &r.results.ramps {
            for d in &ramp.directions {
                let k = (ramp.name.clone(), d.direction.clone());
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
    }
    keys
}

/// Per run, one ramp direction's (offered, forwarded) points after the
/// warmup.
fn forwarded_per_run(
    runs: &[super::run::Run],
    name: &str,
    direction: &str,
) -> Vec<Vec<(f64, f64)>> {
    runs.iter()
        .map(|r| {
            r.results
                .ramps
                .iter()
                .filter(|x| x.name == name)
                .flat_map(|x| &x.directions)
                .filter(|d| d.direction == direction)
                .flat_map(|d| &d.samples)
                .filter(|s| s.phase != RampPhase::Warmup)
                .map(|s| (sig(s.offered_pps), sig(s.received_pps)))
                .collect()
        })
        .collect()
}

/// One chart per ramp and direction across runs: each run's forwarded rate
/// over the offered load (every run at its own offered values, merged on one
/// axis), the ideal line, and each run's saturation point.
pub fn comparison_charts(runs: &[super::run::Run]) -> Vec<Chart> {
    let keys = ramp_keys(runs);
    let mut out = Vec::new();
    for (k, (name, direction)) in keys.iter().enumerate() {
        let per_run = forwarded_per_run(runs, name, direction);
        let mut xs: Vec<f64> = per_run.iter().flatten().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        if xs.is_empty() {
            continue;
        }
        let mut s = vec![series(
            "ideal: forwarded = offered".into(),
            "rate",
            IDEAL_COLOR,
            "ideal",
        )];
        let mut data = vec![xs.iter().map(|x| Some(*x)).collect::<Vec<_>>()];
        data.push(data[0].clone());
        let mut marks = Vec::new();
        for (i, (run, points)) in runs.iter().zip(&per_run).enumerate() {
            if points.is_empty() {
                continue;
            }
            let mut line = series(
                run.label.clone(),
                "rate",
                super::charts::RUN_COLORS[i % 8],
                "received",
            );
            line.span_gaps = true;
            s.push(line);
            data.push(
                xs.iter()
                    .map(|x| points.iter().find(|p| p.0 == *x).map(|p| p.1))
                    .collect(),
            );
            let sat = run
                .results
                .ramps
                .iter()
                .filter(|x| &x.name == name)
                .flat_map(|x| &x.directions)
                .find(|d| &d.direction == direction)
                .and_then(|d| d.summary.saturation);
            if let Some(sat) = sat {
                marks.push(Mark {
                    x: sig(sat.offered_pps),
                    label: format!("{} saturates", run.label),
                });
            }
        }
        out.push(Chart {
            id: format!("cmpramp{k}"),
            title: format!("{name} · {}: forwarded vs offered", super::figures::dir_label(direction)),
            x: axis("x", "offered load", "pps", Some(0.0)),
            y: vec![axis("rate", "forwarded", "pps", Some(0.0))],
            series: s,
            data,
            note: "Each run's forwarded rate by offered load over the ramp and hold (warmup left out); dashed: the ideal; red lines: where each run saturated.".into(),
            steps: false,
            marks,
            x_labels: Vec::new(),
        });
    }
    out
}

/// Samples after the warmup that measure the tester: short of the
/// schedule with no loss. A lossy sample counts among the lossy ones
/// only, so the two columns never claim the same second (results written
/// before that rule marked every short sample).
pub fn tester_limited_samples(d: &RampDirection) -> usize {
    d.samples
        .iter()
        .filter(|s| s.phase != RampPhase::Warmup && sample_tester_limited(s))
        .count()
}

/// Ramps: where each direction saturated.
pub fn ramps_table(r: &RunResults) -> String {
    let mut s = String::from(
        "<div class=\"scroll\"><table class=\"ramps\"><thead><tr><th>Ramp</th><th>Direction</th><th>Frame</th>\
         <th>Verdict</th><th class=\"n\">Saturation (offered)</th><th class=\"n\">Last good offered</th>\
         <th class=\"n\">Peak received</th><th class=\"n\">% of line rate</th><th class=\"n\">Lossy samples</th>\
         <th class=\"n\">Tester-limited samples</th></tr></thead><tbody>",
    );
    for ramp in &r.ramps {
        for d in &ramp.directions {
            let sm = &d.summary;
            s.push_str(&format!(
                "<tr data-ramp=\"{}\" data-direction=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td>",
                esc(&ramp.name),
                esc(&d.direction),
                esc(&ramp.name),
                esc(&super::figures::dir_label(&d.direction)),
                esc(&frame_text(ramp.frame)),
                if sm.saturated { "warn" } else { "" },
                esc(&sm.verdict)
            ));
            match &sm.saturation {
                Some(sat) => {
                    s.push_str(&num(
                        "saturation_offered_pps",
                        sat.offered_pps,
                        &fmt::pps(sat.offered_pps),
                        "strong",
                    ));
                    s.push_str(&match sat.last_good_offered_pps {
                        Some(v) => num("last_good_offered_pps", v, &fmt::pps(v), ""),
                        None => dash(),
                    });
                }
                None => {
                    s.push_str(&dash());
                    s.push_str(&dash());
                }
            }
            s.push_str(&num(
                "peak_received_pps",
                sm.peak_received_pps,
                &fmt::pps(sm.peak_received_pps),
                "",
            ));
            s.push_str(&bar(
                sm.peak_received_line_rate_pct / 100.0,
                &format!("{:.2} %", sm.peak_received_line_rate_pct),
                "peak_received_line_rate_pct",
                sm.peak_received_line_rate_pct,
            ));
            s.push_str(&num(
                "lossy_samples",
                sm.lossy_samples as f64,
                &format!("{} of {}", sm.lossy_samples, sm.samples),
                "",
            ));
            let limited = tester_limited_samples(d);
            s.push_str(&num(
                "tester_limited_samples",
                limited as f64,
                &limited.to_string(),
                if limited > 0 { "warn" } else { "" },
            ));
            s.push_str("</tr>");
        }
    }
    s.push_str("</tbody></table></div><p class=\"legend\">Saturation: the first sample of the final unbroken run of samples lossier than the threshold. \
        Tester-limited samples fell short of the schedule and lost nothing: they measure the tester, not the DUT; \
        a lossy sample is the DUT's evidence at the rate offered, whatever the schedule asked.</p>");
    s
}

/// Searches: each result per frame size, as a bar of the line rate.
pub fn searches_table(r: &RunResults) -> String {
    let mut s = String::from(
        "<div class=\"scroll\"><table class=\"searches\"><thead><tr><th>Search</th><th>Frame</th><th>Result</th>\
         <th class=\"n\">Rate</th><th class=\"n\">L1</th><th class=\"n\">% of line rate</th><th>Notes</th>\
         <th class=\"n\">Trials</th><th class=\"n\">Time</th></tr></thead><tbody>",
    );
    for x in &r.searches {
        let results = search_results(x);
        let trials = x.mlr.as_ref().map(|m| m.trials.len()).unwrap_or(0)
            + x.rfc2544.as_ref().map(|m| m.trials.len()).unwrap_or(0)
            + x.frame_loss.as_ref().map(|m| m.trials.len()).unwrap_or(0);
        let time = x.mlr.as_ref().map(|m| m.time_spent_s).unwrap_or(0.0)
            + x.rfc2544.as_ref().map(|m| m.time_spent_s).unwrap_or(0.0)
            + x.frame_loss.as_ref().map(|m| m.time_spent_s).unwrap_or(0.0);
        if results.is_empty() {
            s.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td colspan=\"5\" class=\"muted\">no rate met a goal</td>{}{}</tr>",
                esc(&x.name),
                esc(&frame_text(x.frame)),
                num("trials", trials as f64, &trials.to_string(), ""),
                num("time_spent_s", time, &fmt::seconds(time), "")
            ));
        }
        for (i, (label, pps, note)) in results.iter().enumerate() {
            let l1 = crate::model::units::l1_bps(*pps, frame_bytes(x.frame));
            let ratio = if x.line_rate_pps > 0.0 {
                pps / x.line_rate_pps
            } else {
                0.0
            };
            s.push_str(&format!(
                "<tr data-search=\"{}\" data-result=\"{}\"><td>{}</td><td>{}</td><td>{}</td>{}{}{}<td class=\"muted\">{}</td>",
                esc(&x.name),
                esc(label),
                if i == 0 { esc(&x.name) } else { String::new() },
                if i == 0 { esc(&frame_text(x.frame)) } else { String::new() },
                esc(label),
                num("rate_pps", *pps, &fmt::pps(*pps), "strong"),
                num("l1_bps", l1, &fmt::bps(l1), ""),
                bar(ratio, &fmt::pct(ratio, 2), "line_rate_ratio", ratio),
                esc(note)
            ));
            if i == 0 {
                s.push_str(&num("trials", trials as f64, &trials.to_string(), ""));
                s.push_str(&num("time_spent_s", time, &fmt::seconds(time), ""));
            } else {
                s.push_str("<td></td><td></td>");
            }
            s.push_str("</tr>");
        }
        if let Some(fl) = &x.frame_loss {
            let steps: Vec<String> = fl
                .steps
                .iter()
                .map(|st| format!("{:.0} %: {:.3} %", st.percent_of_max, st.frame_loss_pct))
                .collect();
            s.push_str(&format!(
                "<tr><td></td><td></td><td>RFC 2544 frame loss</td><td colspan=\"4\">{}</td><td></td><td></td></tr>",
                esc(&steps.join(" · "))
            ));
        }
    }
    s.push_str("</tbody></table></div><p class=\"legend\">NDR: highest rate with no loss; PDR: highest rate with loss under its goal (MLRsearch, RFC 9971: conditional throughput at the relevant lower bound). \
        Bars: the rate as a share of the line rate for that frame size.</p>");
    s
}

#[cfg(test)]
mod tests;
