//! The seed write-ups' per-profile table: where each ramp saturated and the
//! NDR/PDR of each search.

use super::columns::{self, Column, KEEP};
use crate::proto::FrameSpec;
use crate::results::{RampDirection, RampResult, RunResults, SearchResult};
use crate::search;

/// The seed write-ups' summary: profile × direction → where the ramp
/// saturated and the NDR/PDR rates, in pps, L1 bit/s and % of line rate,
/// fitted to the terminal's width ([`columns::width_for`]).
pub fn summary_table(r: &crate::results::RunResults) -> Option<String> {
    summary_table_fit(r, columns::width_for(1))
}

/// The summary table fitted to `width` (none: every column).
pub fn summary_table_fit(r: &crate::results::RunResults, width: Option<usize>) -> Option<String> {
    if r.ramps.is_empty() && r.searches.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = r.ramps.iter().map(|x| x.profile.as_str()).collect();
    for s in &r.searches {
        if !names.contains(&s.profile.as_str()) {
            names.push(&s.profile);
        }
    }
    let mut cols = [
        Column::new("Profile", true, KEEP),
        Column::new("Dir", true, KEEP),
        Column::new("Ramp saturation", true, 5),
        Column::new("NDR pps", false, KEEP),
        Column::new("NDR L1 Gbit/s", false, 2),
        Column::new("NDR % line", false, 3),
        Column::new("PDR pps", false, KEEP),
        Column::new("PDR % line", false, 1),
    ];
    // Notes of rows whose figures disagree (saturation below the NDR…),
    // shown under the table beside a mark in the row.
    let mut notes: Vec<String> = Vec::new();
    for name in names {
        let ramp = r.ramps.iter().find(|x| x.profile == name);
        let srch = r.searches.iter().find(|x| x.profile == name);
        let frame = ramp
            .map(|x| x.frame)
            .or(srch.map(|x| x.frame))
            .unwrap_or(FrameSpec::Fixed(64));
        let l1 =
            |pps: f64| crate::model::units::l1_bps(pps, crate::engine::frame::average_frame(frame));
        let goal = |g: &str| goal_rate(srch, g);
        let dirs: Vec<String> = ramp
            .map(|x| x.directions.iter().map(|d| d.direction.clone()).collect())
            .unwrap_or_else(|| vec!["-".into()]);
        for d in dirs {
            let ramp_dir = ramp.and_then(|x| x.directions.iter().find(|y| y.direction == d));
            let mark = ramp_mark(r, ramp, ramp_dir, (name, &d), &mut notes);
            let sat = ramp_dir
                .map(saturation_cell)
                .map(|v| v + &mark)
                .unwrap_or_else(|| "-".into());
            let lr = ramp
                .map(|x| x.line_rate_pps)
                .or(srch.map(|x| x.line_rate_pps))
                .unwrap_or(1.0);
            let cell = |v: Option<(f64, &str)>, f: &dyn Fn(f64) -> String| {
                v.map(|(x, bound)| format!("{bound}{}", f(x)))
                    .unwrap_or_else(|| "-".into())
            };
            let row = [
                name.to_string(),
                d.replace("_to_", "→"),
                sat,
                cell(goal("ndr"), &|v| format!("{v:.0}")),
                cell(goal("ndr"), &|v| format!("{:.3}", l1(v) / 1e9)),
                cell(goal("ndr"), &|v| format!("{:.2}", v / lr * 100.0)),
                cell(goal("pdr"), &|v| format!("{v:.0}")),
                cell(goal("pdr"), &|v| format!("{:.2}", v / lr * 100.0)),
            ];
            for (c, v) in cols.iter_mut().zip(row) {
                c.cells.push((v, ()));
            }
        }
    }
    Some(render(cols, &notes, width))
}

/// A goal's rate, and whether it is only a bound: ">=" for a lower
/// one (the tester's limit or the search's maximum), "<" when even
/// the lowest load failed (the same answer the search's own line
/// gives, never a rate that a later trial contradicted).
fn goal_rate(srch: Option<&SearchResult>, g: &str) -> Option<(f64, &'static str)> {
    use search::mlr::Irregular;
    use search::rfc2544::ThroughputEnd;
    let mlr = srch
        .and_then(|s| s.mlr.as_ref())
        .and_then(|m| m.goals.iter().find(|x| x.goal.name == g));
    if let Some(x) = mlr {
        return match x.irregular {
            Some(Irregular::MinLoadIsUpperBound) => x.relevant_upper_bound_pps.map(|v| (v, "<")),
            Some(Irregular::TesterLimitIsLowerBound | Irregular::MaxLoadIsLowerBound) => x
                .conditional_throughput_pps
                .or(x.relevant_lower_bound_pps)
                .map(|v| (v, ">=")),
            _ => x
                .conditional_throughput_pps
                .or(x.relevant_lower_bound_pps)
                .map(|v| (v, "")),
        };
    }
    if g != "ndr" {
        return None;
    }
    let r = srch.and_then(|s| s.rfc2544.as_ref())?;
    match r.end {
        ThroughputEnd::MinRateFailed => Some((r.config.min_pps, "<")),
        ThroughputEnd::Found => r.throughput_pps.map(|v| (v, "")),
        _ => r.throughput_pps.map(|v| (v, ">=")),
    }
}

/// The mark of a ramp direction's row (`[1]`, `[2-3]`) whose figures
/// disagree or whose lossy samples were left out, its notes added to
/// `notes`; empty when there are none.
fn ramp_mark(
    r: &RunResults,
    ramp: Option<&RampResult>,
    ramp_dir: Option<&RampDirection>,
    (name, d): (&str, &str),
    notes: &mut Vec<String>,
) -> String {
    // Lossy samples the hypervisor's steal explains are left out
    // of the saturation: said under the table too.
    let left_out = ramp_dir
        .filter(|y| y.summary.disturbed_samples > 0)
        .map(|y| {
            format!(
                "{} lossy sample{} of {} left out of the saturation: the DUT's host stalled long enough to lose all {} lost",
                y.summary.disturbed_samples,
                if y.summary.disturbed_samples == 1 { "" } else { "s" },
                y.summary.samples,
                if y.summary.disturbed_samples == 1 { "it" } else { "they" }
            )
        });
    match ramp_dir.filter(|y| !y.summary.notes.is_empty() || left_out.is_some()) {
        Some(y) => {
            // The host's share in the disagreement, when it had one.
            let steal = ramp
                .and_then(|x| r.tests.get(x.test))
                .and_then(|t| t.steal_ms)
                .filter(|&ms| ms > 0.0)
                .map(|ms| format!(" (the hypervisor held a CPU up to {ms:.0} ms during the ramp)"))
                .unwrap_or_default();
            let first = notes.len() + 1;
            for n in y.summary.notes.iter().chain(left_out.iter()) {
                notes.push(format!(
                    "[{}] {name} {}: {n}{steal}",
                    notes.len() + 1,
                    d.replace("_to_", "→")
                ));
            }
            if notes.len() > first {
                format!(" [{first}-{}]", notes.len())
            } else {
                format!(" [{first}]")
            }
        }
        None => String::new(),
    }
}

/// A ramp direction's saturation cell.
fn saturation_cell(y: &RampDirection) -> String {
    match &y.summary.saturation {
        // Where loss began inside the first lossy sample when
        // it rose (finer than a sample), else that sample.
        Some(s) => {
            let at = s.onset_pps.unwrap_or(s.offered_pps);
            let pct = if s.offered_pps > 0.0 {
                s.offered_line_rate_pct * at / s.offered_pps
            } else {
                0.0
            };
            format!("{at:.0} pps ({pct:.2} %)")
        }
        None if y.summary.undecided => "unknown (host stalls)".into(),
        None if y.summary.tester_limited_samples > 0 => "none (tester limit)".into(),
        None => "none".into(),
    }
}

/// The table of `cols` under its intro, then its notes and the columns
/// left out to fit `width`.
fn render(cols: [Column<()>; 8], notes: &[String], width: Option<usize>) -> String {
    let upper = cols
        .iter()
        .any(|c| c.cells.iter().any(|(v, ())| v.starts_with('<')));
    let (cols, dropped) = columns::fit(cols.into(), width);
    let mut out = String::from("\n");
    let intro = format!(
        "Per profile (ramp saturation: where loss above 0.1 % began, inside the first sample \
         of the final lossy run; NDR 0 %, PDR 0.5 % loss; >= marks a lower bound: the \
         tester's limit or the highest rate tried, not the DUT's{}):",
        if upper {
            "; < an upper bound: even the lowest rate tried lost frames"
        } else {
            ""
        }
    );
    for l in columns::wrap(&intro, width, "", "") {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str(&columns::render(&cols, (), &|_, s| s.to_string()));
    for n in notes {
        for l in columns::wrap(n, width, "", "    ") {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !dropped.is_empty() {
        for l in columns::wrap(
            &format!(
                "Left out to fit: {} (--wide shows them).",
                dropped.join(", ")
            ),
            width,
            "",
            "",
        ) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    #[test]
    fn the_profile_table_fits_80_columns_and_keeps_ndr_and_pdr() {
        let mut r = testdata::ramp();
        r.searches = testdata::search().searches;
        let full = summary_table_fit(&r, None).expect("a table");
        assert!(full.contains("NDR L1 Gbit/s"), "{full}");
        let narrow = summary_table_fit(&r, Some(80)).expect("a table");
        for l in narrow.lines() {
            assert!(l.chars().count() <= 80, "{l:?}");
        }
        for h in ["Profile", "NDR pps", "PDR pps"] {
            assert!(narrow.contains(h), "{narrow}");
        }
        assert!(narrow.contains("Left out to fit"), "{narrow}");
    }

    /// Issue 33: a goal that failed even at the lowest load is an upper
    /// bound, as the search's own line says ("below N pps"), never a ">="
    /// of a rate a later trial contradicted.
    #[test]
    fn a_goal_below_the_lowest_load_is_an_upper_bound() {
        let mut r = testdata::ramp();
        r.searches = testdata::search().searches;
        let g = &mut r.searches[0].mlr.as_mut().expect("an MLR search").goals[0];
        g.irregular = Some(search::mlr::Irregular::MinLoadIsUpperBound);
        g.conditional_throughput_pps = None;
        g.relevant_lower_bound_pps = None;
        g.relevant_upper_bound_pps = Some(10_000.0);
        let t = summary_table_fit(&r, None).expect("a table");
        assert!(
            t.contains("<10000 ") && t.contains("< an upper bound"),
            "{t}"
        );
        assert!(!t.contains(">=10000"), "{t}");
    }

    #[test]
    fn a_saturation_below_the_ndr_is_marked_and_its_reason_shown_under_the_table() {
        let mut r = testdata::ramp();
        r.searches = testdata::search().searches;
        let plain = summary_table_fit(&r, Some(100)).expect("a table");
        assert!(!plain.contains("[1]"), "{plain}");
        let why = "the ramp saw loss from 73142 pps, below the NDR 104309 pps";
        r.ramps[0].directions[0].summary.notes = vec![why.into()];
        let t = r.ramps[0].test;
        r.tests[t].steal_ms = Some(870.0);
        let marked = summary_table_fit(&r, Some(100)).expect("a table");
        let row = marked
            .lines()
            .find(|l| l.starts_with(&r.ramps[0].profile))
            .expect("the ramp's row");
        assert!(row.contains("[1]"), "{marked}");
        let under: String = marked
            .lines()
            .skip_while(|l| !l.starts_with("[1]"))
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(under.contains(why), "{marked}");
        assert!(
            under.contains("the hypervisor held a CPU up to 870 ms during the ramp"),
            "{marked}"
        );
        for l in marked.lines() {
            assert!(l.chars().count() <= 100, "{l:?}");
        }
    }
}
