//! Comparison tables of several runs: what each run was, and per test and
//! direction the figure of every run with its difference against the first
//! run (the baseline).

use super::charts::{comparison_keys, find, RUN_COLORS};
use super::figures::{self, dir_label, is_tcp};
use super::format::{self as fmt, esc};
use super::ramps;
use super::registry::{self, Figure};
use super::run::Run;
use super::sections::{bar, dash, num};
use crate::model::criteria::Kind;
use crate::results::criteria::Change;

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
    /// Each run's spread of this figure from interval to interval (% of
    /// its mean; pp for loss): a difference within it is not coloured.
    noise: Vec<Option<f64>>,
    /// Each run's value is a lower bound (≥: a search that ended at the
    /// tester's limit or its max load).
    at_least: Vec<bool>,
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

/// A row of a ramp's or a search's packet rate; `bar` draws a bar behind
/// it.
fn row(
    figure: &str,
    key: &'static str,
    show: fn(f64) -> String,
    bar: bool,
    values: Vec<Option<f64>>,
) -> Row {
    Row {
        figure: figure.into(),
        key,
        show,
        in_points: false,
        bar,
        lower_is_better: false,
        noise: vec![None; values.len()],
        at_least: vec![false; values.len()],
        values,
    }
}

/// A row of a registered figure of a test direction: its label, key,
/// unit and direction from the registry; rates get a bar, loss is
/// compared in percentage points.
fn figure_row(f: &'static Figure, values: Vec<Option<f64>>) -> Row {
    let kind = f.kind();
    Row {
        figure: f.label.into(),
        key: f.key,
        show: match kind {
            Kind::Pps => fmt::pps,
            Kind::Bps => fmt::bps,
            Kind::Ratio => loss_text,
            _ => count_text,
        },
        in_points: kind == Kind::Ratio,
        bar: matches!(kind, Kind::Pps | Kind::Bps),
        lower_is_better: f.lower_is_better(),
        noise: vec![None; values.len()],
        at_least: vec![false; values.len()],
        values,
    }
}

/// The population standard deviation of `v`, and their mean.
pub(super) fn spread(v: &[f64]) -> Option<(f64, f64)> {
    if v.len() < 2 {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    Some((var.sqrt(), mean))
}

/// A direction's noise from its complete intervals: the spread of the
/// received rate in % of its mean, and of the loss in pp.
#[derive(Clone, Copy, Default)]
pub(super) struct Noise {
    pub(super) rate: Option<f64>,
    pub(super) loss: Option<f64>,
}

impl Noise {
    pub(super) fn of(t: &crate::results::TestResult, d: &crate::results::DirectionResult) -> Noise {
        let tcp = is_tcp(t);
        let iv: Vec<_> = figures::intervals(t, d)
            .into_iter()
            .filter(|f| f.complete)
            .collect();
        let loss: Vec<f64> = iv
            .iter()
            .filter_map(|f| f.loss_ratio)
            .map(|l| l * 100.0)
            .collect();
        let rate: Vec<f64> = iv
            .iter()
            .filter_map(|f| if tcp { f.rx_l2_bps } else { f.rx_pps })
            .collect();
        Noise {
            rate: spread(&rate).and_then(|(sd, mean)| (mean > 0.0).then(|| sd / mean * 100.0)),
            loss: spread(&loss).map(|(sd, _)| sd),
        }
    }

    /// The noise of a figure of the kind `kind`: rates their rate's, loss
    /// its own (none for counts).
    fn of_kind(self, kind: Kind) -> Option<f64> {
        match kind {
            Kind::Ratio => self.loss,
            Kind::Pps | Kind::Bps => self.rate,
            _ => None,
        }
    }
}

/// What is compared: per test and direction the received rate and loss
/// (goodput and retransmits for TCP); per ramp its saturation point and
/// peak; per search each result.
fn groups(runs: &[Run]) -> Vec<Group> {
    let mut out = test_groups(runs);
    out.extend(ramp_groups(runs));
    out.extend(search_groups(runs));
    out
}

/// A group per test and direction the runs share: the received rate and
/// what went wrong, with each run's noise.
fn test_groups(runs: &[Run]) -> Vec<Group> {
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
        // The received rate, then what goes wrong: retransmits (counted
        // as 0 where a stream recorded none) or loss.
        let (rate, trouble) = if is_tcp(t0) {
            (&registry::RX_L2_BPS, &registry::RETRANSMITS)
        } else {
            (&registry::RX_PPS, &registry::LOSS_RATIO)
        };
        let mut rows = vec![
            figure_row(rate, vals(&|t, d| figures::received(t, d))),
            figure_row(trouble, vals(&|t, d| trouble.value(t, d).unwrap_or(0.0))),
        ];
        // Each run's intervals are read once for all of the group's rows.
        let noise: Vec<Option<Noise>> = found
            .iter()
            .map(|x| x.map(|(t, d)| Noise::of(t, d)))
            .collect();
        for r in &mut rows {
            r.noise = noise
                .iter()
                .map(|n| n.and_then(|n| n.of_kind(kind_of(r.key))))
                .collect();
        }
        out.push(Group {
            name: key.label(),
            direction: key.direction.clone(),
            rows,
        });
    }
    out
}

/// A group per ramp and direction: where it saturated and its peak.
fn ramp_groups(runs: &[Run]) -> Vec<Group> {
    let mut out = Vec::new();
    let mut ramp_keys: Vec<(String, String)> = Vec::new();
    for r in runs {
        for ramp in &r.results.ramps {
            for d in &ramp.directions {
                let k = (ramp.name.clone(), d.direction.clone());
                if !ramp_keys.contains(&k) {
                    ramp_keys.push(k);
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
                    false,
                    sums.iter()
                        .map(|s| s.as_ref().and_then(|s| s.saturation.map(|x| x.offered_pps)))
                        .collect(),
                ),
                row(
                    "peak received",
                    "peak_received_pps",
                    fmt::pps,
                    true,
                    sums.iter()
                        .map(|s| s.as_ref().map(|s| s.peak_received_pps))
                        .collect(),
                ),
            ],
        });
    }
    out
}

/// A group per search: a row per result it reports (NDR, PDR, RFC 2544
/// throughput…), lower bounds marked.
fn search_groups(runs: &[Run]) -> Vec<Group> {
    let mut search_keys: Vec<(String, String)> = Vec::new();
    for r in runs {
        for x in &r.results.searches {
            for (label, _, _) in ramps::search_results(x) {
                let k = (x.name.clone(), label);
                if !search_keys.contains(&k) {
                    search_keys.push(k);
                }
            }
        }
    }
    let mut by_search: Vec<Group> = Vec::new();
    for (name, label) in search_keys {
        let found: Vec<Option<(f64, bool)>> = runs
            .iter()
            .map(|r| {
                r.results
                    .searches
                    .iter()
                    .filter(|x| x.name == name)
                    .flat_map(ramps::search_results)
                    .find(|(l, _, _)| *l == label)
                    .map(|(_, pps, note)| (pps, ramps::note_is_lower_bound(&note)))
            })
            .collect();
        let mut new_row = row(
            &label,
            "rate_pps",
            fmt::pps,
            true,
            found.iter().map(|x| x.map(|x| x.0)).collect(),
        );
        new_row.at_least = found.iter().map(|x| x.is_some_and(|x| x.1)).collect();
        match by_search.iter_mut().find(|g| g.name == name) {
            Some(g) => g.rows.push(new_row),
            None => by_search.push(Group {
                name,
                direction: String::new(),
                rows: vec![new_row],
            }),
        }
    }
    by_search
}

/// The callout when the runs share no test: each run's tests listed.
fn no_shared_test(runs: &[Run]) -> String {
    let lists: Vec<String> = runs
        .iter()
        .map(|r| {
            let names: Vec<&str> = r.results.tests.iter().map(|t| t.name.as_str()).collect();
            format!(
                "{}: {}",
                r.label,
                if names.is_empty() {
                    "no tests".to_string()
                } else {
                    names.join(", ")
                }
            )
        })
        .collect();
    format!(
        "<p class=\"callout warn\" data-shared=\"0\">These runs share no test: no test of one \
             measured what a test of another did (same protocol, frame, flows, rate, streams), \
             so there is nothing to set side by side. {}.</p>",
        esc(&lists.join("; "))
    )
}

/// A figure's cells across the runs: each run's value (a bar when the
/// figure has one, against the `best`) and, after the first, its change.
fn figure_cells(fig: &Row, best: f64) -> String {
    let mut s = String::new();
    let base = fig.values.first().copied().flatten();
    for (i, v) in fig.values.iter().enumerate() {
        let shown = |v: f64| {
            let ge = if fig.at_least.get(i).copied().unwrap_or(false) {
                "≥ "
            } else {
                ""
            };
            format!("{ge}{}", (fig.show)(v))
        };
        s.push_str(&match *v {
            Some(v) if fig.bar && best > 0.0 => bar(v / best, &shown(v), fig.key, v),
            Some(v) => num(fig.key, v, &shown(v), if i == 0 { "strong" } else { "" }),
            None => dash(),
        });
        if i > 0 {
            let noise = [fig.noise.first(), fig.noise.get(i)]
                .into_iter()
                .flatten()
                .flatten()
                .fold(0.0_f64, |a, b| a.max(*b));
            let bounds = (
                fig.at_least.first().copied().unwrap_or(false),
                fig.at_least.get(i).copied().unwrap_or(false),
            );
            s.push_str(&delta_cell(fig, *v, base, noise, bounds));
        }
    }
    s
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
    let groups = groups(runs);
    let shared = groups
        .iter()
        .filter(|g| {
            g.rows
                .first()
                .is_some_and(|r| r.values.iter().filter(|v| v.is_some()).count() >= 2)
        })
        .count();
    if runs.len() > 1 && shared == 0 {
        s.insert_str(0, &no_shared_test(runs));
    }
    for g in groups {
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
            s.push_str(&figure_cells(fig, best));
            s.push_str("</tr>");
        }
    }
    s.push_str(&format!(
        "</tbody></table></div><p class=\"legend\">Δ: difference against the baseline ({}), in % of its value; \
         loss in percentage points (pp). <span class=\"swatch better\"></span> better · <span class=\"swatch worse\"></span> worse, \
         coloured only beyond twice the larger run's spread from one interval to the next (and at least 1 % of a rate, \
         0.01 pp of loss, 10 % of a count); closer differences are within the runs' own noise. \
         ≥: a lower bound (a search that ended at the tester's limit or its max load), compared as one: \
         a change it leaves open is not coloured.</p>",
        esc(runs.first().map(|r| r.label.as_str()).unwrap_or(""))
    ));
    s
}

/// The smallest difference coloured when the runs say nothing of their
/// noise: 1 % of a rate, 0.01 pp of loss, 10 % of a count.
fn floor(fig: &Row) -> f64 {
    match kind_of(fig.key) {
        Kind::Ratio => 0.01,
        Kind::Count => 10.0,
        _ => 1.0,
    }
}

/// The unit of the row `key`: a registered figure's, else a packet rate
/// (ramps and searches).
fn kind_of(key: &str) -> Kind {
    registry::by_key(key).map_or(Kind::Pps, |f| f.kind())
}

/// A difference's cell: coloured better or worse only beyond twice the
/// larger of the two runs' `noise` (and at least [`floor`]); a lower bound
/// (≥) on either side is weighed as `results::criteria::classify` does, and a
/// change it leaves open is not coloured.
fn delta_cell(
    fig: &Row,
    v: Option<f64>,
    base: Option<f64>,
    noise: f64,
    (base_at_least, at_least): (bool, bool),
) -> String {
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
            let threshold = (2.0 * noise).max(floor(fig));
            let tone = match crate::results::criteria::classify(
                d,
                threshold,
                fig.lower_is_better,
                base_at_least,
                at_least,
            ) {
                Change::Regression => "worse",
                Change::Improvement => "better",
                Change::WithinNoise => "",
                Change::Inconclusive => "open",
            };
            format!(
                "<td class=\"n delta {tone}\" data-delta=\"{d}\" data-noise=\"{noise}\">{}</td>",
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
    fn tests_are_matched_by_what_they_measured_not_their_names() {
        let mut runs = testdata::three_runs();
        // The same test under another name (a plan's, an ad-hoc run's).
        for t in &mut runs[1].results.tests {
            t.name = format!("{} renamed", t.name);
        }
        let t = differences(&runs);
        assert!(t.contains(">-20.0 %<"), "matched despite the names: {t}");
        assert!(t.contains(" renamed"), "the other name is shown: {t}");
        assert!(!t.contains("share no test"), "{t}");
        // Another rate is another test: nothing in common, and it says so.
        for t in &mut runs[2].results.tests {
            t.params.rate_pps = Some(12_345.0);
        }
        let two = vec![runs.remove(0), runs.remove(1)];
        let t = differences(&two);
        assert!(t.contains("These runs share no test"), "{t}");
    }

    #[test]
    fn a_difference_within_the_runs_noise_is_not_coloured() {
        let runs = testdata::three_runs();
        let groups = groups(&runs);
        let fig = &groups[0].rows[0];
        // A change of 0.2 % is noise whatever the runs say; 30 % is not,
        // unless the runs swing by more than 15 % from second to second.
        let cell =
            |v: f64, noise: f64| delta_cell(fig, Some(v), Some(100.0), noise, (false, false));
        assert!(
            cell(100.2, 0.0).contains("delta \""),
            "{}",
            cell(100.2, 0.0)
        );
        assert!(cell(70.0, 0.0).contains("delta worse"));
        assert!(cell(130.0, 0.0).contains("delta better"));
        assert!(cell(70.0, 16.0).contains("delta \""));
        // Noise comes from the runs' intervals.
        assert!(fig.noise.iter().all(|n| n.is_some()), "{:?}", fig.noise);
    }

    #[test]
    fn runs_are_listed_with_the_baseline_marked() {
        let t = runs_table(&testdata::three_runs());
        assert!(t.contains("route <span class=\"muted\">(baseline)</span>"));
        assert!(t.contains(">fw<"));
    }
}
