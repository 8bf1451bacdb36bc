//! JUnit XML (`--junit FILE`), the format GitLab, GitHub and Jenkins show:
//! one `<testsuite>` per run, one `<testcase>` per test (its repetitions
//! are one case), a `<failure>` per missed criterion or regression with
//! measured against expected, an `<error>` when the test or the run failed.
//! Written atomically.

use super::baseline::describe;
use crate::model::error::Context;
use crate::model::files::write_atomic;
use crate::report::error::Result;
use crate::results::criteria::{subjects, Change, Marks};
use crate::results::{RunResults, TestStatus};
use std::path::Path;

/// Escapes text for XML attributes and content.
fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // XML 1.0 allows no other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => o.push(' '),
            // Nor these two non-characters.
            '\u{FFFE}' | '\u{FFFF}' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

struct Case {
    name: String,
    time_s: f64,
    failures: Vec<(String, String)>,
    errors: Vec<String>,
}

/// A subject's time: its tests' durations and its searches' time spent.
fn time_of(r: &RunResults, name: &str) -> f64 {
    r.tests
        .iter()
        .filter(|t| t.name == name)
        .map(|t| t.params.duration_s)
        .chain(
            r.searches
                .iter()
                .filter(|x| x.name == name)
                .flat_map(|x| {
                    [
                        x.mlr.as_ref().map(|m| m.time_spent_s),
                        x.rfc2544.as_ref().map(|m| m.time_spent_s),
                    ]
                })
                .flatten(),
        )
        .fold(0.0, |a, b| a + b.max(0.0))
}

/// Adds a failure or an error to the "run" case, made when first needed.
fn run_case(cases: &mut Vec<Case>, failure: Option<(String, String)>, error: Option<String>) {
    if !cases.iter().any(|c| c.name == "run") {
        cases.push(Case {
            name: "run".into(),
            time_s: 0.0,
            failures: vec![],
            errors: vec![],
        });
    }
    if let Some(c) = cases.iter_mut().find(|c| c.name == "run") {
        c.failures.extend(failure);
        c.errors.extend(error);
    }
}

/// A case per subject with its failed criteria, regressions and errors;
/// what belongs to no subject goes to the "run" case.
fn cases(r: &RunResults) -> Vec<Case> {
    let mut cases: Vec<Case> = subjects(r, Marks::default(), Marks::of(r))
        .into_iter()
        .map(|s| Case {
            time_s: time_of(r, &s.name),
            name: s.name,
            failures: vec![],
            errors: vec![],
        })
        .collect();
    // An aborted test's case gets the failure of the criterion that
    // stopped it (below), not an error: it measured, and missed.
    for t in r
        .tests
        .iter()
        .filter(|t| !matches!(t.status, TestStatus::Ok | TestStatus::Aborted))
    {
        let msg = format!(
            "{} {}: {}",
            t.name,
            format!("{:?}", t.status).to_lowercase(),
            t.error.clone().unwrap_or_default()
        );
        if let Some(c) = cases.iter_mut().find(|c| c.name == t.name) {
            c.errors.push(msg);
        }
    }
    for c in r.criteria.iter().filter(|c| !c.passed) {
        let text = (
            format!("{}: {}", c.expect, c.detail),
            format!(
                "criterion {} not met\nmeasured: {}\nexpected: {}",
                c.expect,
                c.measured
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "not measured".into()),
                c.expected
            ),
        );
        match cases.iter_mut().find(|x| x.name == c.test) {
            Some(case) => case.failures.push(text),
            None => run_case(&mut cases, Some(text), None),
        }
    }
    if let Some(b) = &r.baseline {
        for f in b.figures.iter().filter(|f| f.change == Change::Regression) {
            let text = (
                format!("regression against {}: {}", b.baseline_name, describe(f)),
                format!(
                    "baseline {}: {}\nmeasured: {}\nbaseline value: {}",
                    b.baseline, f.figure, f.value, f.baseline
                ),
            );
            match cases.iter_mut().find(|x| x.name == f.test) {
                Some(case) => case.failures.push(text),
                None => run_case(&mut cases, Some(text), None),
            }
        }
    }
    if let Some(e) = &r.error {
        run_case(&mut cases, None, Some(format!("the run failed: {e}")));
    }
    cases
}

/// The JUnit document of a run.
pub fn document(r: &RunResults) -> String {
    let cases = cases(r);
    let failures: usize = cases.iter().map(|c| c.failures.len()).sum();
    let errors: usize = cases.iter().map(|c| c.errors.len()).sum();
    let time = cases.iter().fold(0.0, |a, c| a + c.time_s);
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    s.push_str(&format!(
        "<testsuites name=\"linerate\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">\n",
        cases.len()
    ));
    s.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{time:.3}\" timestamp=\"{}\" hostname=\"{}\">\n",
        xml(&r.name),
        cases.len(),
        xml(&r.started_at),
        xml(&r.host.hostname)
    ));
    for c in &cases {
        s.push_str(&format!(
            "    <testcase name=\"{}\" classname=\"linerate.{}\" time=\"{:.3}\"",
            xml(&c.name),
            xml(&r.name),
            c.time_s
        ));
        if c.failures.is_empty() && c.errors.is_empty() {
            s.push_str("/>\n");
            continue;
        }
        s.push_str(">\n");
        for (message, body) in &c.failures {
            s.push_str(&format!(
                "      <failure message=\"{}\" type=\"criterion\">{}</failure>\n",
                xml(message),
                xml(body)
            ));
        }
        for e in &c.errors {
            s.push_str(&format!(
                "      <error message=\"{}\" type=\"run\">{}</error>\n",
                xml(e),
                xml(e)
            ));
        }
        s.push_str("    </testcase>\n");
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

/// Writes the JUnit document of `r` to `path` atomically.
pub fn write(path: &Path, r: &RunResults) -> Result<()> {
    write_atomic(path, document(r).as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::criteria::CriterionResult;

    #[test]
    fn only_characters_xml_allows() {
        assert_eq!(xml("a\u{FFFE}b\u{FFFF}\u{1}<"), "a\u{FFFD}b\u{FFFD} &lt;");
    }

    #[test]
    fn failures_sit_in_their_test_case() {
        let mut r = crate::report::testdata::lab();
        let name = r.tests[0].name.clone();
        r.criteria = vec![
            CriterionResult {
                expect: "rx_pps>=1Gpps".into(),
                test: name.clone(),
                figure: "rx_pps".into(),
                stat: "median".into(),
                expected: 1e9,
                measured: Some(5.0),
                passed: false,
                detail: "5 pps >= 1 Gpps".into(),
            },
            CriterionResult {
                expect: "ndr>=1<2".into(),
                test: String::new(),
                figure: "ndr".into(),
                stat: "median".into(),
                expected: 1.0,
                measured: None,
                passed: false,
                detail: "not measured & <odd>".into(),
            },
        ];
        let x = document(&r);
        assert!(x.contains("failures=\"2\""), "{x}");
        assert!(
            x.contains("<failure message=\"rx_pps&gt;=1Gpps: 5 pps &gt;= 1 Gpps\""),
            "{x}"
        );
        assert!(x.contains("not measured &amp; &lt;odd&gt;"), "{x}");
        assert!(x.contains("<testcase name=\"run\""), "{x}");
        assert_eq!(
            x.matches("<testcase ").count(),
            x.matches("<testcase ").count()
        );
    }
}
