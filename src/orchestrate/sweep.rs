//! What every sweep shares, from the command line (`--sweep`) or a plan,
//! once its points run: the tagging of a point's results, a point that
//! could not run as a failed test, and the terminal's list of points with
//! their pivot tables.

use crate::model::error::chain;
use crate::model::sweep::Point;
use crate::results::criteria::Marks;
use crate::results::{RunResults, TestStatus};

/// Tags what the run added since `from` as the sweep point `p`: its
/// coordinates on every test, ramp and search, and the point's name on
/// them (one of a kind takes the name, several keep theirs after it).
pub fn tag_point(r: &mut RunResults, from: Marks, p: &Point) {
    let name = |old: &str, several: bool| {
        if several && old != p.name {
            format!("{} ({old})", p.name)
        } else {
            p.name.clone()
        }
    };
    let n = r.tests.len().saturating_sub(from.tests);
    for t in r.tests.iter_mut().skip(from.tests) {
        t.name = name(&t.name, n > 1);
        t.sweep = Some(p.point.clone());
    }
    let n = r.ramps.len().saturating_sub(from.ramps);
    for x in r.ramps.iter_mut().skip(from.ramps) {
        x.name = name(&x.name, n > 1);
        x.sweep = Some(p.point.clone());
    }
    let n = r.searches.len().saturating_sub(from.searches);
    for x in r.searches.iter_mut().skip(from.searches) {
        x.name = name(&x.name, n > 1);
        x.sweep = Some(p.point.clone());
    }
}

/// Records the end of point `p` begun at `from`: an error that left no
/// test behind becomes a failed test of that name, an error after its
/// tests fails the last one; then the point is tagged. Returns whether the
/// point failed.
pub fn finish_point(
    r: &mut RunResults,
    from: Marks,
    p: &Point,
    kind: &str,
    error: Option<&crate::orchestrate::error::OrchestrateError>,
) -> bool {
    if let Some(e) = error {
        let msg = chain(e);
        if r.tests.len() == from.tests {
            r.tests.push(failed_test(&p.name, kind, msg));
        } else if let Some(t) = r.tests.last_mut() {
            if t.status == TestStatus::Ok {
                t.status = TestStatus::Failed;
            }
            t.error.get_or_insert(msg);
        }
    }
    tag_point(r, from, p);
    error.is_some()
        || r.tests[from.tests.min(r.tests.len())..]
            .iter()
            .any(|t| t.status == TestStatus::Failed)
}

/// A test that could not run: a row with the reason, so the matrix has
/// every cell.
fn failed_test(name: &str, kind: &str, error: String) -> crate::results::TestResult {
    use crate::results::{Protocol, TestParams, TestResult};
    let protocol = match kind {
        "tcp" => Protocol::Tcp,
        "http" => Protocol::Http,
        _ => Protocol::Udp,
    };
    let params = TestParams::new(protocol, false, crate::proto::Direction::Forward, 0.0);
    let mut t = TestResult::new(name, crate::model::clock::now_rfc3339(), params);
    t.status = TestStatus::Failed;
    t.error = Some(error);
    t
}

/// The terminal's list of every sweep's points and their status, after
/// the results table. The pivot table (issue 21 item 2) goes in
/// [`pivot_hook`].
pub fn points_list(r: &RunResults, run_dir: Option<&std::path::Path>) -> Option<String> {
    if r.sweeps.is_empty() {
        return None;
    }
    let mut out = String::new();
    for s in &r.sweeps {
        out.push_str(&format!(
            "\nsweep {}: {} point{} over {}\n",
            s.name,
            s.points,
            if s.points == 1 { "" } else { "s" },
            s.axes.join(" x ")
        ));
        let mut seen = 0;
        for t in r
            .tests
            .iter()
            .filter(|t| t.sweep.as_ref().is_some_and(|p| p.sweep == s.name))
        {
            seen += 1;
            let status = match t.status {
                TestStatus::Ok => "ok",
                TestStatus::Failed => "FAILED",
                TestStatus::Interrupted => "interrupted",
                TestStatus::Aborted => "aborted",
            };
            let why = match (&t.status, &t.error) {
                (TestStatus::Failed, Some(e)) => format!(": {e}"),
                _ => String::new(),
            };
            out.push_str(&format!("  {status:<11} {}{why}\n", t.name));
        }
        if seen < s.points {
            out.push_str(&format!("  ({} points not run)\n", s.points - seen));
        }
    }
    if let Some(t) = pivot_hook(r, run_dir) {
        out.push_str(&t);
    }
    Some(out)
}

/// The pivot tables of the run's sweeps (issue 21 item 2), and
/// `pivot.csv` in the run directory; a pivot that cannot be built says why
/// instead of a table.
pub fn pivot_hook(r: &RunResults, run_dir: Option<&std::path::Path>) -> Option<String> {
    let opts = crate::report::pivot::PivotOpts::default();
    match crate::report::pivot::for_run(r, run_dir, &opts) {
        Ok(t) => t,
        Err(e) => Some(format!("\npivot table: {}\n", chain(&e))),
    }
}
