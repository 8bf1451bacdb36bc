//! The self-contained HTML page: one run ([`single`]) or a comparison of
//! several ([`comparison`]). Everything the page needs is inline — styles,
//! uPlot, our script, the chart data — and a Content-Security-Policy forbids
//! any fetch, so it opens offline from a double-click and cannot leak a
//! request. Sections come from `sections` and `compare`; chart data from
//! `charts`.

use super::charts::{self, chart_figure, Chart};
use super::format::{self as fmt, esc, script_json};
use super::pivot::{self, PivotOpts};
use super::run::{self, Run};
use super::sections;
use super::{compare, figures, ramps, registry};
use crate::results::{RunResults, RunStatus, TestResult, TestStatus};

const UPLOT_JS: &str = include_str!("assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("assets/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("assets/uPlot.LICENSE");
const REPORT_JS: &str = include_str!("assets/report.js");
const REPORT_CSS: &str = include_str!("assets/report.css");

/// Collects script errors before anything else runs, so the page can show
/// them and the browser test can read them from `#lr-errors`.
const ERROR_TRAP: &str = "window.lrErrors=[];\
window.addEventListener('error',function(e){window.lrErrors.push(String(e.message||e.type)+(e.filename?' @'+e.filename+':'+e.lineno:''));});\
window.addEventListener('unhandledrejection',function(e){window.lrErrors.push('unhandled rejection: '+String(e.reason));});\
window.addEventListener('securitypolicyviolation',function(e){window.lrErrors.push('blocked by the page policy: '+e.blockedURI);});";

/// uPlot's first line is a comment naming its home page; the page carries
/// no URL at all, so that comment is replaced by the full licence text.
fn uplot_js() -> &'static str {
    match UPLOT_JS.strip_prefix("/*!") {
        Some(rest) => rest
            .split_once("*/")
            .map(|(_, code)| code)
            .unwrap_or(UPLOT_JS),
        None => UPLOT_JS,
    }
}

struct Page<'a> {
    title: String,
    kind: &'a str,
    header: String,
    nav: Vec<(&'a str, &'a str)>,
    body: String,
    charts: Vec<Chart>,
}

fn render(p: Page) -> String {
    let nav: String = p
        .nav
        .iter()
        .map(|(id, label)| format!("<a href=\"#{id}\">{}</a>", esc(label)))
        .collect();
    let chart_data = script_json(&serde_json::json!({ "charts": p.charts }));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\
<meta name=\"generator\" content=\"linerate {version}\">\
<title>{title}</title><style>{UPLOT_CSS}\n{REPORT_CSS}</style><script>{ERROR_TRAP}</script></head>\
<body data-report=\"{kind}\" data-charts=\"{n}\">\
<header class=\"top\">{header}</header><nav class=\"toc\">{nav}</nav><main>{body}</main>\
<footer>Written by linerate {version}. Charts by uPlot 1.6.32 (MIT licence, embedded). \
Tables read without JavaScript and print; charts need scripts.</footer>\
<pre id=\"lr-errors\" class=\"errors\" hidden data-count=\"0\"></pre>\
<script type=\"application/json\" id=\"lr-chart-data\">{chart_data}</script>\
<!-- uPlot 1.6.32\n{license}-->\n<script>{uplot}</script>\n<script>{REPORT_JS}</script></body></html>\n",
        version = esc(env!("CARGO_PKG_VERSION")),
        title = esc(&p.title),
        kind = p.kind,
        n = p.charts.len(),
        header = p.header,
        body = p.body,
        license = UPLOT_LICENSE.replace("--", "—"),
        uplot = uplot_js(),
    )
}

fn status_pill(s: RunStatus) -> String {
    let (class, text) = match s {
        RunStatus::Complete => ("ok", "complete"),
        RunStatus::Partial => ("warn", "partial"),
        RunStatus::Interrupted => ("bad", "interrupted"),
        RunStatus::Aborted => ("bad", "aborted"),
    };
    format!("<span class=\"pill {class}\">{text}</span>")
}

/// What the run was, in one line under the title.
fn run_line(r: &RunResults) -> String {
    let vm = r.labs.iter().find_map(|l| l.vm.as_ref());
    let dut = run::dut_mode(r)
        .map(|m| match vm {
            Some(vm) => format!("DUT {m}, {} (kernel {})", vm.kind(), vm.kernel_release),
            None => format!("DUT {m}"),
        })
        .unwrap_or_else(|| "no DUT".into());
    format!(
        "{} · {} · {} · {} · kernel {} · line rate {}",
        esc(&r.started_at),
        esc(&r.host.hostname),
        esc(&dut),
        esc(&format!("{} × {}", r.host.cpus, r.host.cpu_model)),
        esc(&r.host.kernel),
        esc(&fmt::bps(r.line_rate_bps))
    )
}

fn card(label: &str, value: &str, sub: &str, tone: &str) -> String {
    format!(
        "<div class=\"card {tone}\"><div class=\"k\">{}</div><div class=\"v\">{}</div><div class=\"s\">{}</div></div>",
        esc(label),
        esc(value),
        esc(sub)
    )
}

/// The headline figures: best UDP packet rate and TCP goodput through the
/// DUT, and anything that needs a look.
fn cards(r: &RunResults) -> String {
    let ok: Vec<_> = r
        .tests
        .iter()
        .filter(|t| t.status == TestStatus::Ok)
        .collect();
    let mut s = String::from("<div class=\"cards\">");
    if !r.tests.is_empty() {
        s.push_str(&card(
            "Tests",
            &format!("{} of {} ok", ok.len(), r.tests.len()),
            &format!("{:?}", r.status).to_lowercase(),
            if ok.len() == r.tests.len() {
                "ok"
            } else {
                "bad"
            },
        ));
    }
    s.push_str(&search_cards(r));
    let through_dut = |t: &&&crate::results::TestResult| {
        t.params
            .lab
            .and_then(|l| r.labs.get(l))
            .map(|l| l.kind != "back_to_back")
            .unwrap_or(true)
    };
    let best = |tcp: bool| {
        ok.iter()
            .filter(through_dut)
            .filter(|t| figures::is_tcp(t) == tcp)
            .flat_map(|t| {
                let f = registry::received(t);
                t.directions
                    .iter()
                    .filter_map(move |d| Some((t, d, f.value(t, d)?)))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2))
    };
    if let Some((t, d, received)) = best(false) {
        s.push_str(&card(
            "Most packets forwarded",
            &fmt::pps(received),
            &format!(
                "{} · {}{}",
                t.name,
                figures::dir_label(&d.direction),
                registry::LINE_RATE_PCT
                    .value(t, d)
                    .map(|p| format!(" · {p:.1} % of line"))
                    .unwrap_or_default()
            ),
            "",
        ));
    }
    if let Some((t, d, goodput)) = best(true) {
        s.push_str(&card(
            "Best TCP goodput",
            &fmt::bps(goodput),
            &format!("{} · {}", t.name, figures::dir_label(&d.direction)),
            "",
        ));
    }
    s.push_str(&needs_a_look(r, &ok));
    s.push_str(&doctor_card(r));
    s.push_str("</div>");
    s
}

/// The card of doctor's findings: how many, and the worst.
fn doctor_card(r: &RunResults) -> String {
    let findings: Vec<_> = r.doctor.iter().flat_map(|e| &e.report.findings).collect();
    let worst = findings.iter().map(|f| f.severity).max();
    card(
        "Doctor findings",
        &findings.len().to_string(),
        &worst
            .map(|w| format!("worst: {}", w.as_str()))
            .unwrap_or_else(|| "none".into()),
        match worst.map(|w| w.as_str()) {
            Some("critical") => "bad",
            Some("warning") => "warn",
            _ => "ok",
        },
    )
}

/// The cards of each ramp's saturation and the first two searches'
/// answers.
fn search_cards(r: &RunResults) -> String {
    let mut s = String::new();
    for ramp in &r.ramps {
        for d in &ramp.directions {
            if let Some(sat) = &d.summary.saturation {
                s.push_str(&card(
                    "Ramp saturation",
                    &fmt::pps(sat.offered_pps),
                    &format!(
                        "{} · {} · {:.2} % of line",
                        ramp.name,
                        figures::dir_label(&d.direction),
                        sat.offered_line_rate_pct
                    ),
                    "warn",
                ));
            }
        }
    }
    for x in r.searches.iter().take(2) {
        if let Some((label, pps, note)) = ramps::search_results(x).into_iter().next() {
            let ratio = if x.line_rate_pps > 0.0 {
                pps / x.line_rate_pps
            } else {
                0.0
            };
            // A lower bound (the tester's limit, or no loss up to the
            // highest rate tried) keeps its "≥" in the headline too.
            let bound = ramps::note_is_lower_bound(&note);
            let value = if bound {
                format!("≥ {}", fmt::pps(pps))
            } else {
                fmt::pps(pps)
            };
            s.push_str(&card(
                &label,
                &value,
                &format!("{} · {} of line", x.name, fmt::pct(ratio, 2)),
                "",
            ));
        }
    }
    s
}

/// The card counting what needs a look: flagged counters, tester-limited
/// directions and tester-bound verdicts (and whether any loss).
fn needs_a_look(r: &RunResults, ok: &[&TestResult]) -> String {
    let lossy = ok
        .iter()
        .flat_map(|t| &t.directions)
        .filter(|d| d.loss_ratio > 0.0)
        .count();
    let flagged: usize = r
        .tests
        .iter()
        .map(|t| t.cross_checks.iter().filter(|c| c.flagged).count())
        .sum();
    let limited = ok
        .iter()
        .flat_map(|t| &t.directions)
        .filter(|d| d.tester_limited)
        .count();
    // Verdicts shown red (the tester, not the DUT, was the limit) need a
    // look as much as the rows they are about.
    let tester_bound = ok
        .iter()
        .filter_map(|t| t.bottleneck.as_ref())
        .filter(|b| figures::verdict_tone(b.kind) == "bad")
        .count();
    let issues = flagged + limited + tester_bound;
    card(
        "Needs a look",
        &issues.to_string(),
        &format!(
            "{flagged} counter disagreement{} · {limited} tester-limited · {tester_bound} tester-bound \
             verdict{} · {lossy} with loss",
            if flagged == 1 { "" } else { "s" },
            if tester_bound == 1 { "" } else { "s" }
        ),
        if issues > 0 {
            "bad"
        } else if lossy > 0 {
            "warn"
        } else {
            "ok"
        },
    )
}

fn section(id: &str, title: &str, body: &str) -> String {
    format!(
        "<section id=\"{id}\"><h2>{}</h2>{body}</section>",
        esc(title)
    )
}

/// Parameters of a test in a few words, for its chart's caption.
fn test_subtitle(t: &crate::results::TestResult) -> String {
    let mut parts = vec![
        format!("IPv{}", t.params.ip_version),
        format!("{:?}", t.params.direction).to_lowercase(),
        figures::flows_label(t),
        format!("{} s", t.params.duration_s),
    ];
    if !figures::is_tcp(t) {
        parts.insert(1, figures::frame_label(t));
    }
    if let Some(r) = t.params.rate_pps {
        parts.push(format!("at {}", fmt::pps(r)));
    }
    parts.join(" · ")
}

/// The charts of one run, each in its figure.
fn run_chart_figures(prefix: &str, r: &RunResults, charts: &[Chart]) -> String {
    let mut s = String::new();
    for (i, t) in r.tests.iter().enumerate() {
        let id = sections::chart_anchor(prefix, i);
        match charts.iter().find(|c| c.id == id) {
            Some(c) => s.push_str(&chart_figure(c, &test_subtitle(t))),
            None => s.push_str(&format!(
                "<figure class=\"chart empty\" id=\"{id}\"><figcaption><span class=\"title\">{}</span> \
                 <span class=\"muted\">no chart: the test {}</span></figcaption></figure>",
                esc(&t.name),
                if t.status == TestStatus::Ok { "has no intervals" } else { "did not finish" }
            )),
        }
    }
    s
}

/// The figures of the charts whose ids start with `id_prefix`, in a grid.
fn figures_of(charts: &[Chart], id_prefix: &str, with_charts: bool) -> String {
    if !with_charts {
        return String::new();
    }
    let figs: String = charts
        .iter()
        .filter(|c| c.id.starts_with(id_prefix))
        .map(|c| chart_figure(c, ""))
        .collect();
    format!("<div class=\"chart-grid\">{figs}</div>")
}

/// The sections of one run; `prefix` keeps ids unique when several runs
/// share a page.
pub fn run_sections(prefix: &str, r: &RunResults, charts: &[Chart], with_charts: bool) -> String {
    let has_tests = !r.tests.is_empty();
    let mut s = section(
        &format!("{prefix}summary"),
        "Summary",
        &if has_tests {
            sections::summary_table(r, prefix)
        } else {
            "<p class=\"muted\">No traffic tests in this run: its results are the ramps and searches below.</p>".into()
        },
    );
    if !r.ramps.is_empty() {
        s.push_str(&section(
            &format!("{prefix}ramps"),
            "Ramps",
            &format!(
                "{}{}",
                ramps::ramps_table(r),
                figures_of(charts, &format!("{prefix}ramp"), with_charts)
            ),
        ));
    }
    if !r.searches.is_empty() {
        s.push_str(&section(
            &format!("{prefix}searches"),
            "Throughput searches",
            &format!(
                "{}{}",
                ramps::searches_table(r),
                figures_of(charts, &format!("{prefix}search"), with_charts)
            ),
        ));
    }
    if with_charts && !r.tests.is_empty() {
        s.push_str(&section(
            &format!("{prefix}charts"),
            "Throughput over time",
            &format!(
                "<div class=\"chart-grid\">{}</div>",
                run_chart_figures(prefix, r, charts)
            ),
        ));
    }
    if let Some(h) = super::http::section(r, prefix, if with_charts { charts } else { &[] }) {
        s.push_str(&section(&format!("{prefix}http"), "HTTP downloads", &h));
    }
    if has_tests {
        s.push_str(&section(
            &format!("{prefix}cpu"),
            "CPU and efficiency",
            &format!(
                "{}{}",
                sections::cpu_table(r),
                super::cpu::verdicts(r, prefix, if with_charts { charts } else { &[] })
            ),
        ));
        s.push_str(&section(
            &format!("{prefix}checks"),
            "Kernel counter cross-checks",
            &sections::checks(r),
        ));
    }
    s.push_str(&section(
        &format!("{prefix}context"),
        "Context",
        &format!(
            "{}<h3>Lab topology</h3>{}",
            sections::context(r),
            sections::topology(r)
        ),
    ));
    s.push_str(&section(
        &format!("{prefix}doctor"),
        "Doctor findings",
        &sections::doctor(r),
    ));
    s
}

/// The report of one run (its sweeps as pivot tables).
pub fn single(run: &Run) -> String {
    single_with(run, None)
}

/// The pivot section of `runs`: each sweep, or with `--pivot` what it
/// asks; an error (an axis the points lack) is shown in its place.
fn pivots(runs: &[Run], opts: Option<&PivotOpts>, prefix: &str) -> Option<(String, Vec<Chart>)> {
    let default = PivotOpts::default();
    match pivot::build(runs, opts.unwrap_or(&default)) {
        Ok(p) if p.is_empty() => None,
        Ok(p) => Some(pivot::html_section(&p, prefix)),
        Err(e) => Some((
            format!(
                "<p class=\"muted\">No pivot table: {}</p>",
                esc(&crate::model::error::chain(&e))
            ),
            Vec::new(),
        )),
    }
}

/// The report of one run, with the pivot tables `opts` asks for.
pub fn single_with(run: &Run, opts: Option<&PivotOpts>) -> String {
    let r = &run.results;
    let pivot = pivots(std::slice::from_ref(run), opts, "");
    let mut charts = charts::run_charts("", r);
    charts.extend(ramps::charts("", r));
    charts.extend(super::cpu::cpu_charts("", r));
    charts.extend(super::http::charts("", r));
    let header = format!(
        "<div class=\"brand\">linerate report</div><h1>{} {}</h1><div class=\"sub\">{}</div>",
        esc(&r.name),
        status_pill(r.status),
        run_line(r)
    );
    let pivot_body = pivot
        .as_ref()
        .map(|(b, _)| section("pivots", "Pivot tables", b));
    let mut body = format!(
        "{}{}{}{}",
        cards(r),
        super::verdicts::html(r).unwrap_or_default(),
        pivot_body.clone().unwrap_or_default(),
        run_sections("", r, &charts, true)
    );
    if let Some((_, c)) = pivot {
        charts.extend(c);
    }
    let latency: String = r
        .tests
        .iter()
        .filter_map(|t| {
            t.latency
                .as_ref()
                .map(|l| super::latency::section(&t.name, l))
        })
        .collect();
    if !latency.is_empty() {
        body.push_str(&section("latency", "Latency under load", &latency));
    }
    render(Page {
        title: format!("linerate · {}", r.name),
        kind: "single",
        header,
        nav: [
            ("pivots", "Pivots", pivot_body.is_some()),
            ("summary", "Summary", true),
            ("ramps", "Ramps", !r.ramps.is_empty()),
            ("searches", "Searches", !r.searches.is_empty()),
            ("charts", "Charts", !r.tests.is_empty()),
            (
                "latency",
                "Latency",
                r.tests.iter().any(|t| t.latency.is_some()),
            ),
            ("http", "HTTP", r.tests.iter().any(|t| t.http.is_some())),
            ("cpu", "CPU", !r.tests.is_empty()),
            ("checks", "Cross-checks", !r.tests.is_empty()),
            ("context", "Context", true),
            ("doctor", "Doctor", true),
        ]
        .into_iter()
        .filter(|n| n.2)
        .map(|(id, label, _)| (id, label))
        .collect(),
        body,
        charts,
    })
}

/// The report comparing several runs: differences, one chart per test and
/// direction with a series per run, then each run's own sections.
pub fn comparison(runs: &[Run]) -> String {
    comparison_with(runs, None)
}

/// The comparison, with the pivot tables `opts` asks for (default: the
/// runs' sweeps).
pub fn comparison_with(runs: &[Run], opts: Option<&PivotOpts>) -> String {
    let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
    let pivot = pivots(runs, opts, "");
    let mut charts = charts::comparison_charts(runs);
    charts.extend(ramps::comparison_charts(runs));
    let header = format!(
        "<div class=\"brand\">linerate comparison</div><h1>{}</h1><div class=\"sub\">{} runs · baseline: {}</div>",
        esc(&labels.join(" vs ")),
        runs.len(),
        esc(labels.first().copied().unwrap_or(""))
    );
    let mut body = section("runs", "Runs", &compare::runs_table(runs));
    let has_pivot = pivot.is_some();
    if let Some((b, c)) = pivot {
        body.push_str(&section("pivots", "Pivot tables", &b));
        charts.extend(c);
    }
    body.push_str(&section(
        "differences",
        "Differences",
        &compare::differences(runs),
    ));
    let figs: String = charts
        .iter()
        .map(|c| chart_figure(c, "received per run vs the ideal"))
        .collect();
    body.push_str(&section(
        "charts",
        "Throughput over time, per run",
        &format!("<div class=\"chart-grid\">{figs}</div>"),
    ));
    for (i, run) in runs.iter().enumerate() {
        let prefix = format!("r{i}-");
        body.push_str(&format!(
            "<details class=\"run\" id=\"run{i}\"{}><summary><h2>Run {}: {}</h2></summary>{}</details>",
            if i == 0 { " open" } else { "" },
            i + 1,
            esc(&run.label),
            run_sections(&prefix, &run.results, &[], false)
        ));
    }
    render(Page {
        title: format!("linerate · {}", labels.join(" vs ")),
        kind: "comparison",
        header,
        nav: [
            ("runs", "Runs", true),
            ("pivots", "Pivots", has_pivot),
            ("differences", "Differences", true),
            ("charts", "Charts", true),
            ("run0", "Each run", true),
        ]
        .into_iter()
        .filter(|n| n.2)
        .map(|(id, label, _)| (id, label))
        .collect(),
        body,
        charts,
    })
}

#[cfg(test)]
mod tests;
