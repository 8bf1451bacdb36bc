//! Comparison tables of several runs: what each run was, and per test and
//! direction the figure of every run with its difference against the first
//! run (the baseline).

use super::charts::{comparison_keys, find, RUN_COLORS};
use super::figures::{self, dir_label, is_tcp};
use super::format::{self as fmt, esc};
use super::ramps;
use super::run::Run;
use super::sections::{bar, dash, num};

/// One row per run: label, name, DUT mode, when, where.
pub fn runs_table(runs: &[Run]) -> String {
    let mut s = String::from(
        "<div class=\"scroll\"><table class=\"runs\"><thead><tr><th>Run</th><th>Name</th><th>DUT</th>\
         <th>Started</th><th>Status</th><th>Host</th><th>Kernel</th><th>linerate</th><th>Directory</th></tr></thead><tbody>",
    );
    for (i, r) in runs.iter().enumerate() {
        let x = &r.results;
        s.push_str(&format!(
            "<tr data-run=\"{}\"><td><span class=\"dot\" style=\"background:{}\"></span>{}{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&r.label),
            RUN_COLORS[i % RUN_COLORS.len()],
            esc(&r.label),
            if i == 0 { " <span class=\"muted\">(baseline)</span>" } else { "" },
            esc(&x.name),
            esc(r.dut_mode().unwrap_or("–")),
            esc(&x.started_at),
            esc(&format!("{:?}", x.status).to_lowercase()),
            esc(&x.host.hostname),
            esc(&x.host.kernel),
            esc(&x.linerate_version),
            esc(&r.dir.display().to_string()),
        ));
    }
    s.push_str("</tbody></table></div>");
    s
}

/// One figure of one test (or ramp, or search) in every run.
struct Row {
    figure: String,
    /// Field the value comes from (`data-figure` and `data-key`).
    key: &'static str,
    show: fn(f64) -> String,
    /// Differences in percentage points (loss) rather than in %.
    in_points: bool,
    /// A bar against the best run of the row behind the value.
    bar: bool,
    lower_is_better: bool,
    values: Vec<Option<f64>>,
}

struct Group {
    name: String,
    direction: String,
    rows: Vec<Row>,
}

fn loss_text(v: f64) -> String {
    fmt::pct(v, 3)
}

fn count_text(v: f64) -> String {
    fmt::count(v as u64)
}

fn row(figure: &str, key: &'static str, show: fn(f64) -> String, values: Vec<Option<f64>>) -> Row {
    Row {
        figure: figure.into(),
        key,
        show,
        in_points: key == "loss_ratio",
        bar: matches!(
            key,
            "rx_pps" | "rx_l2_bps" | "rate_pps" | "peak_received_pps"
        ),
        lower_is_better: matches!(key, "loss_ratio" | "retransmits"),
        values,
    }
}

/// What is compared: per test and direction the received rate and loss
/// (goodput and retransmits for TCP); per ramp its saturation point and
/// peak; per search each result.
fn groups(runs: &[Run]) -> Vec<Group> {
    let mut out = Vec::new();
    for key in comparison_keys(runs) {
        let found: Vec<_> = runs.iter().map(|r| find(&r.results, &key)).collect();
        let Some((t0, _)) = found.iter().flatten().next() else {
            continue;
        };
        let vals =
            |f: &dyn Fn(&crate::results::TestResult, &crate::results::DirectionResult) -> f64| {
                found
                    .iter()
                    .map(|x| x.map(|(t, d)| f(t, d)))
                    .collect::<Vec<_>>()
            };
        let rows = if is_tcp(t0) {
            vec![
                row(
                    "goodput",
                    "rx_l2_bps",
                    fmt::bps,
                    vals(&|t, d| figures::received(t, d)),
                ),
                row(
                    "retransmits",
                    "retransmits",
                    count_text,
                    vals(&|_, d| d.retransmits.unwrap_or(0) as f64),
                ),
            ]
        } else {
            vec![
                row(
                    "received",
                    "rx_pps",
                    fmt::pps,
                    vals(&|t, d| figures::received(t, d)),
                ),
                row("loss", "loss_ratio", loss_text, vals(&|_, d| d.loss_ratio)),
            ]
        };
        out.push(Group {
            name: key.0,
            direction: key.1,
            rows,
        });
    }
    let mut ramp_keys: Vec<(String, String)> = Vec::new();
    let mut search_keys: Vec<(String, String)> = Vec::new();
    for r in runs {
        for ramp in &r.results.ramps {
            for d in &ramp.directions {
                let k = (ramp.name.clone(), d.direction.clone());
                if !ramp_keys.contains(&k) {
                    ramp_keys.push(k);
                }
            }
        }
        for x in &r.results.searches {
            for (label, _, _) in ramps::search_results(x) {
                let k = (x.name.clone(), label);
                if !search_keys.contains(&k) {
                    search_keys.push(k);
                }
            }
        }
    }
    for (name, direction) in ramp_keys {
        let summary = |r: &Run| {
            r.results
                .ramps
                .iter()
                .filter(|x| x.name == name)
                .flat_map(|x| &x.directions)
                .find(|d| d.direction == direction)
                .map(|d| d.summary.clone())
        };
        let sums: Vec<_> = runs.iter().map(summary).collect();
        out.push(Group {
            name: name.clone(),
            direction: direction.clone(),
            rows: vec![
                row(
                    "saturation (offered)",
                    "saturation_offered_pps",
                    fmt::pps,
                    sums.iter()
                        .map(|s| s.as_ref().and_then(|s| s.saturation.map(|x| x.offered_pps)))
                        .collect(),
                ),
                row(
                    "peak received",
                    "peak_received_pps",
                    fmt::pps,
                    sums.iter()
                        .map(|s| s.as_ref().map(|s| s.peak_received_pps))
                        .collect(),
                ),
            ],
        });
    }
    let mut by_search: Vec<Group> = Vec::new();
    for (name, label) in search_keys {
        let values = runs
            .iter()
            .map(|r| {
                r.results
                    .searches
                    .iter()
                    .filter(|x| x.name == name)
                    .flat_map(ramps::search_results)
                    .find(|(l, _, _)| *l == label)
                    .map(|(_, pps, _)| pps)
            })
            .collect();
        let new_row = row(&label, "rate_pps", fmt::pps, values);
        match by_search.iter_mut().find(|g| g.name == name) {
            Some(g) => g.rows.push(new_row),
            None => by_search.push(Group {
                name,
                direction: String::new(),
                rows: vec![new_row],
            }),
        }
    }
    out.extend(by_search);
    out
}

/// Per test and direction (and per ramp and search): every run's figure
/// and its difference against the baseline, the first run.
pub fn differences(runs: &[Run]) -> String {
    let mut s = String::from(
        "<div class=\"scroll\"><table class=\"diff\"><thead><tr><th>Test</th><th>Direction</th><th>Figure</th>",
    );
    for (i, r) in runs.iter().enumerate() {
        s.push_str(&format!(
            "<th class=\"n\"><span class=\"dot\" style=\"background:{}\"></span>{}</th>",
            RUN_COLORS[i % RUN_COLORS.len()],
            esc(&r.label)
        ));
        if i > 0 {
            s.push_str(&format!(
                "<th class=\"n\">Δ vs {}</th>",
                esc(&runs[0].label)
            ));
        }
    }
    s.push_str("</tr></thead><tbody>");
    for g in groups(runs) {
        for (ri, fig) in g.rows.iter().enumerate() {
            let best = fig.values.iter().flatten().copied().fold(0.0, f64::max);
            s.push_str(&format!(
                "<tr data-test=\"{}\" data-direction=\"{}\" data-figure=\"{}\">",
                esc(&g.name),
                esc(&g.direction),
                esc(if fig.key == "rate_pps" {
                    &fig.figure
                } else {
                    fig.key
                })
            ));
            if ri == 0 {
                s.push_str(&format!(
                    "<td rowspan=\"{n}\">{}</td><td rowspan=\"{n}\">{}</td>",
                    esc(&g.name),
                    esc(&dir_label(&g.direction)),
                    n = g.rows.len()
                ));
            }
            s.push_str(&format!("<td>{}</td>", esc(&fig.figure)));
            let base = fig.values.first().copied().flatten();
            for (i, v) in fig.values.iter().enumerate() {
                s.push_str(&match *v {
                    Some(v) if fig.bar && best > 0.0 => bar(v / best, &(fig.show)(v), fig.key, v),
                    Some(v) => num(
                        fig.key,
                        v,
                        &(fig.show)(v),
                        if i == 0 { "strong" } else { "" },
                    ),
                    None => dash(),
                });
                if i > 0 {
                    s.push_str(&delta_cell(fig, *v, base));
                }
            }
            s.push_str("</tr>");
        }
    }
    s.push_str(&format!(
        "</tbody></table></div><p class=\"legend\">Δ: difference against the baseline ({}), in % of its value; \
         loss in percentage points (pp). <span class=\"swatch better\"></span> better · <span class=\"swatch worse\"></span> worse.</p>",
        esc(runs.first().map(|r| r.label.as_str()).unwrap_or(""))
    ));
    s
}

fn delta_cell(fig: &Row, v: Option<f64>, base: Option<f64>) -> String {
    // Loss is compared in percentage points: +0.5 pp, not +∞ %.
    let delta = match (v, base, fig.in_points) {
        (Some(v), Some(b), true) => Some(((v - b) * 100.0, format!("{:+.3} pp", (v - b) * 100.0))),
        (Some(v), Some(b), false) => {
            fmt::delta_pct(v, b).map(|text| ((v - b) / b.abs() * 100.0, text))
        }
        _ => None,
    };
    match delta {
        Some((d, text)) => {
            let worse = if fig.lower_is_better {
                d > 0.0
            } else {
                d < 0.0
            };
            let tone = if d.abs() < 1e-9 {
                ""
            } else if worse {
                "worse"
            } else {
                "better"
            };
            format!(
                "<td class=\"n delta {tone}\" data-delta=\"{d}\">{}</td>",
                esc(&text)
            )
        }
        None => dash(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    #[test]
    fn differences_against_the_first_run() {
        let runs = testdata::three_runs();
        let t = differences(&runs);
        // nat received 0.8 × route, fw 0.5 ×.
        assert!(t.contains(">-20.0 %<"), "{t}");
        assert!(t.contains(">-50.0 %<"), "{t}");
        assert!(t.contains("delta worse"));
    }

    #[test]
    fn ramps_and_searches_are_compared() {
        let mut runs = testdata::three_runs();
        runs[0].results.ramps = testdata::ramp().ramps;
        runs[1].results.ramps = testdata::ramp().ramps;
        runs[2].results.searches = testdata::search().searches;
        let t = differences(&runs);
        assert!(t.contains("data-figure=\"saturation_offered_pps\""), "{t}");
        assert!(t.contains("data-figure=\"NDR (loss ≤ 0.0 %)\""), "{t}");
    }

    #[test]
    fn runs_are_listed_with_the_baseline_marked() {
        let t = runs_table(&testdata::three_runs());
        assert!(t.contains("route <span class=\"muted\">(baseline)</span>"));
        assert!(t.contains(">fw<"));
    }
}
