//! What decided a run, as the terminal, the HTML report and the CSV show
//! it: each criterion PASS/FAIL with the measured value, each test's
//! figures over its repetitions (median, min–max), and the changes against
//! a baseline run.

use super::baseline::{describe, verdict_name, verdict_word};
use super::format::esc;
use crate::model::criteria::{self, Stat};
use crate::results::criteria::{subjects, Change, Marks, Subject};
use crate::results::RunResults;

/// Tests that ran more than once, with their figures.
fn repeated(r: &RunResults) -> Vec<Subject> {
    subjects(r, Marks::default(), Marks::of(r))
        .into_iter()
        .filter(|s| s.reps.len() > 1)
        .collect()
}

/// One row per figure of a repeated test: name, figure, median, min–max.
pub fn repetition_rows(r: &RunResults) -> Vec<[String; 5]> {
    let mut out = Vec::new();
    for s in repeated(r) {
        for f in s.figures() {
            let v = |st| s.stat(f.name, st).unwrap_or(f64::NAN);
            out.push([
                s.name.clone(),
                f.name.to_string(),
                criteria::show(f.kind, v(Stat::Median)),
                format!(
                    "{} – {}",
                    criteria::show(f.kind, v(Stat::Min)),
                    criteria::show(f.kind, v(Stat::Max))
                ),
                s.values(f.name).len().to_string(),
            ]);
        }
    }
    out
}

/// Left-aligned columns, two spaces apart, each line indented.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        s.push_str("  ");
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    s
}

/// The criteria, repetitions and baseline, as printed after the results
/// table; empty when the run had none of them.
pub fn terminal(r: &RunResults) -> String {
    let mut s = String::new();
    let reps = repetition_rows(r);
    if !reps.is_empty() {
        s.push_str(&format!(
            "\nRepetitions: each test ran {} times; median and min – max\n",
            r.repeat
        ));
        let mut rows = vec![vec![
            "Test".to_string(),
            "Figure".into(),
            "Median".into(),
            "Min – max".into(),
            "Runs".into(),
        ]];
        rows.extend(reps.into_iter().map(Vec::from));
        s.push_str(&columns(&rows));
    }
    if !r.criteria.is_empty() {
        let failed = r.criteria.iter().filter(|c| !c.passed).count();
        s.push_str(&format!(
            "\nCriteria: {} of {} met\n",
            r.criteria.len() - failed,
            r.criteria.len()
        ));
        let rows: Vec<Vec<String>> = r
            .criteria
            .iter()
            .map(|c| {
                vec![
                    if c.passed { "PASS" } else { "FAIL" }.to_string(),
                    c.expect.clone(),
                    c.test.clone(),
                    c.detail.clone(),
                ]
            })
            .collect();
        s.push_str(&columns(&rows));
    }
    if let Some(b) = &r.baseline {
        s.push_str(&format!(
            "\nAgainst baseline {} ({}), tolerance {} %: {}\n",
            b.baseline_name,
            b.baseline,
            b.tolerance_pct,
            counts(b)
        ));
        if b.figures.is_empty() {
            s.push_str("  no test of this run has a test of the same name in the baseline\n");
        }
        let rows: Vec<Vec<String>> = b
            .figures
            .iter()
            .map(|f| {
                vec![
                    verdict_word(f.change).to_string(),
                    f.test.clone(),
                    describe(f),
                ]
            })
            .collect();
        s.push_str(&columns(&rows));
        if b.figures
            .iter()
            .any(|f| f.baseline_at_least || f.value_at_least)
        {
            s.push_str(
                "  ≥: a lower bound (a search that ended at the tester's limit or its max load); \
                 open: a bound leaves the change undecided\n",
            );
        }
    }
    s
}

/// `1 regression, 2 improvements, 10 within noise, 1 inconclusive`.
fn counts(b: &crate::results::criteria::BaselineComparison) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{}, {}, {} within noise, {} inconclusive",
        plural(b.regressions, "regression", "regressions"),
        plural(b.improvements, "improvement", "improvements"),
        b.within_noise,
        b.inconclusive
    )
}

/// The HTML section of the same, or `None` when the run had none of it.
pub fn html(r: &RunResults) -> Option<String> {
    let reps = repetition_rows(r);
    if r.criteria.is_empty() && r.baseline.is_none() && reps.is_empty() {
        return None;
    }
    let mut s = String::from("<section id=\"criteria\"><h2>Criteria</h2>");
    if !r.criteria.is_empty() {
        s.push_str(
            "<div class=\"scroll\"><table class=\"criteria\"><thead><tr><th>Result</th>\
             <th>Criterion</th><th>Test</th><th>Measured</th></tr></thead><tbody>",
        );
        for c in &r.criteria {
            let verdict = if c.passed { "PASS" } else { "FAIL" };
            s.push_str(&format!(
                "<tr data-criterion=\"{}\" data-passed=\"{}\"><td class=\"{}\">{verdict}</td>\
                 <td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&c.expect),
                c.passed,
                if c.passed { "better" } else { "worse" },
                esc(&c.expect),
                esc(&c.test),
                esc(&c.detail)
            ));
        }
        s.push_str("</tbody></table></div>");
    }
    if !reps.is_empty() {
        s.push_str(&format!(
            "<h3>Repetitions ({} runs of each test)</h3><div class=\"scroll\"><table class=\"repetitions\">\
             <thead><tr><th>Test</th><th>Figure</th><th>Median</th><th>Min – max</th><th>Runs</th></tr></thead><tbody>",
            r.repeat
        ));
        for row in reps {
            s.push_str("<tr>");
            for c in row {
                s.push_str(&format!("<td>{}</td>", esc(&c)));
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table></div>");
    }
    if let Some(b) = &r.baseline {
        s.push_str(&format!(
            "<h3>Against baseline {} (tolerance {} %)</h3><p class=\"legend\">{}. A change counts \
             only beyond its threshold: twice the runs' own spread, or the figure's default \
             tolerance; ≥ marks a lower bound.</p><div class=\"scroll\"><table class=\"baseline\">\
             <thead><tr><th>Test</th><th>Verdict</th><th>Change</th></tr></thead><tbody>",
            esc(&b.baseline_name),
            b.tolerance_pct,
            esc(&counts(b))
        ));
        for f in &b.figures {
            let tone = match f.change {
                Change::Regression => "worse",
                Change::Improvement => "better",
                Change::WithinNoise | Change::Inconclusive => "",
            };
            s.push_str(&format!(
                "<tr data-figure=\"{}\" data-change=\"{}\"><td>{}</td><td class=\"{tone}\">{}</td>\
                 <td class=\"{tone}\">{}</td></tr>",
                esc(&f.figure),
                verdict_name(f.change),
                esc(&f.test),
                verdict_word(f.change),
                esc(&describe(f))
            ));
        }
        s.push_str("</tbody></table></div>");
    }
    s.push_str("</section>");
    Some(s)
}

/// CSV rows: `criterion` (verdict pass/fail, measured, expected),
/// `repetition` (median, min, max, runs) and `baseline` (verdict, measured
/// = this run, expected = the baseline) for the columns `criterion`,
/// `verdict`, `figure`, `measured`, `expected`, `median`, `min`, `max`,
/// `repetitions`.
pub fn csv_rows(r: &RunResults) -> Vec<(String, &'static str, [String; 9])> {
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let mut out = Vec::new();
    for c in &r.criteria {
        out.push((
            c.test.clone(),
            "criterion",
            [
                c.expect.clone(),
                if c.passed { "pass" } else { "fail" }.into(),
                c.figure.clone(),
                num(c.measured),
                c.expected.to_string(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
        ));
    }
    for s in repeated(r) {
        for f in s.figures() {
            out.push((
                s.name.clone(),
                "repetition",
                [
                    String::new(),
                    String::new(),
                    f.name.to_string(),
                    String::new(),
                    String::new(),
                    num(s.stat(f.name, Stat::Median)),
                    num(s.stat(f.name, Stat::Min)),
                    num(s.stat(f.name, Stat::Max)),
                    s.values(f.name).len().to_string(),
                ],
            ));
        }
    }
    if let Some(b) = &r.baseline {
        for f in &b.figures {
            out.push((
                f.test.clone(),
                "baseline",
                [
                    String::new(),
                    verdict_name(f.change).replace(' ', "_"),
                    f.figure.clone(),
                    f.value.to_string(),
                    f.baseline.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ],
            ));
        }
    }
    out
}
