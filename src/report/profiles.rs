//! The seed write-ups' per-profile table: where each ramp saturated and the
//! NDR/PDR of each search.

use crate::proto::FrameSpec;
use crate::search;

/// The seed write-ups' summary: profile × direction → where the ramp
/// saturated and the NDR/PDR rates, in pps, L1 bit/s and % of line rate.
pub fn summary_table(r: &crate::results::RunResults) -> Option<String> {
    if r.ramps.is_empty() && r.searches.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = r.ramps.iter().map(|x| x.profile.as_str()).collect();
    for s in &r.searches {
        if !names.contains(&s.profile.as_str()) {
            names.push(&s.profile);
        }
    }
    let header = [
        "Profile",
        "Dir",
        "Ramp saturation",
        "NDR pps",
        "NDR L1 Gbit/s",
        "NDR % line",
        "PDR pps",
        "PDR % line",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for name in names {
        let ramp = r.ramps.iter().find(|x| x.profile == name);
        let srch = r.searches.iter().find(|x| x.profile == name);
        let frame = ramp
            .map(|x| x.frame)
            .or(srch.map(|x| x.frame))
            .unwrap_or(FrameSpec::Fixed(64));
        let l1 =
            |pps: f64| crate::model::units::l1_bps(pps, crate::engine::frame::average_frame(frame));
        // A goal's rate, and whether it is only a lower bound (the tester's
        // limit or the search's maximum), which the table marks with ">=".
        let goal = |g: &str| -> Option<(f64, bool)> {
            let mlr = srch
                .and_then(|s| s.mlr.as_ref())
                .and_then(|m| m.goals.iter().find(|x| x.goal.name == g));
            if let Some(x) = mlr {
                let bound_only = matches!(
                    x.irregular,
                    Some(search::mlr::Irregular::TesterLimitIsLowerBound)
                        | Some(search::mlr::Irregular::MaxLoadIsLowerBound)
                );
                return x
                    .conditional_throughput_pps
                    .or(x.relevant_lower_bound_pps)
                    .map(|v| (v, bound_only));
            }
            if g != "ndr" {
                return None;
            }
            let r = srch.and_then(|s| s.rfc2544.as_ref())?;
            let bound_only = !matches!(r.end, search::rfc2544::ThroughputEnd::Found);
            r.throughput_pps.map(|v| (v, bound_only))
        };
        let dirs: Vec<String> = ramp
            .map(|x| x.directions.iter().map(|d| d.direction.clone()).collect())
            .unwrap_or_else(|| vec!["-".into()]);
        for d in dirs {
            let sat = ramp
                .and_then(|x| x.directions.iter().find(|y| y.direction == d))
                .map(|y| match &y.summary.saturation {
                    Some(s) => format!(
                        "{:.0} pps ({:.2} %)",
                        s.offered_pps, s.offered_line_rate_pct
                    ),
                    None if y.summary.tester_limited_samples > 0 => "none (tester limit)".into(),
                    None => "none".into(),
                })
                .unwrap_or_else(|| "-".into());
            let lr = ramp
                .map(|x| x.line_rate_pps)
                .or(srch.map(|x| x.line_rate_pps))
                .unwrap_or(1.0);
            let cell = |v: Option<(f64, bool)>, f: &dyn Fn(f64) -> String| {
                v.map(|(x, bound)| format!("{}{}", if bound { ">=" } else { "" }, f(x)))
                    .unwrap_or_else(|| "-".into())
            };
            rows.push(vec![
                name.to_string(),
                d.replace("_to_", "→"),
                sat,
                cell(goal("ndr"), &|v| format!("{v:.0}")),
                cell(goal("ndr"), &|v| format!("{:.3}", l1(v) / 1e9)),
                cell(goal("ndr"), &|v| format!("{:.2}", v / lr * 100.0)),
                cell(goal("pdr"), &|v| format!("{v:.0}")),
                cell(goal("pdr"), &|v| format!("{:.2}", v / lr * 100.0)),
            ]);
        }
    }
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let fmt = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = w[i].saturating_sub(c.chars().count());
                if i < 3 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = String::from(
        "\nPer profile (ramp: first sample of the final lossy run above 0.1 % loss; NDR 0 %, PDR 0.5 % loss;\n\
         >= marks a lower bound: the tester's limit or the highest rate tried, not the DUT's):\n",
    );
    out.push_str(&fmt(header.iter().map(|s| s.to_string()).collect()));
    out.push('\n');
    out.push_str(&fmt(w.iter().map(|n| "-".repeat(*n)).collect()));
    out.push('\n');
    for row in rows {
        out.push_str(&fmt(row));
        out.push('\n');
    }
    Some(out)
}
