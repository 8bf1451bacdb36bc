//! A pivot in the HTML report: a table per pivot (a failed cell's error
//! in its title) and, along an axis whose values are all numbers, a line
//! chart with one line per combination of the other axes, built as a
//! `charts::Chart` so report.js draws it like every other chart.

use super::cell::{chart_unit, Cell};
use super::model::{CellValue, Pivot, Value};
use super::text::{caption, cell_text, col_label, scales, where_};
use crate::report::charts::{axis, chart_figure, series, sig, Chart, RUN_COLORS};
use crate::report::format::esc;

/// The body of the report's pivot section and the charts it draws;
/// `prefix` keeps ids unique on a page of several runs.
pub fn section(pivots: &[Pivot], prefix: &str) -> (String, Vec<Chart>) {
    let mut body = String::new();
    let mut charts = Vec::new();
    for (i, p) in pivots.iter().enumerate() {
        body.push_str(&table(p));
        if let Some(c) = chart(p, &format!("{prefix}pivot{i}")) {
            body.push_str(&format!(
                "<div class=\"chart-grid\">{}</div>",
                chart_figure(&c, "median per point")
            ));
            charts.push(c);
        }
    }
    (body, charts)
}

fn table(p: &Pivot) -> String {
    let sc = scales(p);
    let unit = sc.len() > 1;
    let mut s = format!(
        "<h3>{}</h3><p class=\"muted\">{}</p><div class=\"scroll\"><table class=\"pivot\" data-pivot=\"{}\"><thead>",
        esc(&p.name),
        esc(&caption(p, &sc)),
        esc(&p.name)
    );
    let left = p.rows.len().max(1);
    for (level, a) in p.cols.iter().enumerate() {
        s.push_str(&format!(
            "<tr><th colspan=\"{left}\" class=\"n\">{}</th>",
            esc(a)
        ));
        for k in &p.col_keys {
            s.push_str(&format!("<th class=\"n\">{}</th>", esc(&k[level].text)));
        }
        s.push_str("</tr>");
    }
    s.push_str("<tr>");
    if p.rows.is_empty() {
        s.push_str("<th></th>");
    }
    for a in &p.rows {
        s.push_str(&format!("<th>{}</th>", esc(a)));
    }
    for _ in &p.col_keys {
        s.push_str("<th></th>");
    }
    s.push_str("</tr></thead><tbody>");
    for (r, key) in p.row_keys.iter().enumerate() {
        s.push_str("<tr>");
        if p.rows.is_empty() {
            let name = sc.first().map(|(c, _)| c.name()).unwrap_or_default();
            s.push_str(&format!("<th>{}</th>", esc(&name)));
        }
        for v in key {
            s.push_str(&format!("<th>{}</th>", esc(&v.text)));
        }
        for (c, v) in p.cells[r].iter().enumerate() {
            let text = cell_text(v, &sc, unit);
            let at = where_(p, r, c);
            let (class, title) = match v {
                CellValue::Failed(e) => ("n bad", format!("{at}: failed: {e}")),
                CellValue::Missing => ("n na", format!("{at}: no test ran here")),
                CellValue::NotMeasured => ("n na", format!("{at}: not measured")),
                CellValue::Value { n, failed, .. } => (
                    "n",
                    if failed.is_empty() {
                        format!("{at}: {n} repetition{}", if *n == 1 { "" } else { "s" })
                    } else {
                        format!(
                            "{at}: {n} measured, {} failed: {}",
                            failed.len(),
                            failed.join("; ")
                        )
                    },
                ),
            };
            let value = match v {
                CellValue::Value { median, .. } => format!(" data-value=\"{median}\""),
                _ => String::new(),
            };
            s.push_str(&format!(
                "<td class=\"{class}\" title=\"{}\"{value}>{}</td>",
                esc(&title),
                esc(&text)
            ));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    s
}

/// The first shown axis (columns first) whose values are all numbers,
/// with at least two of them.
fn numeric_axis(p: &Pivot) -> Option<(bool, usize)> {
    let numeric = |keys: &[Vec<Value>], i: usize| {
        let mut xs: Vec<f64> = Vec::new();
        for k in keys {
            let x = k[i].number?;
            if !xs.contains(&x) {
                xs.push(x);
            }
        }
        Some(xs.len() >= 2)
    };
    (0..p.cols.len())
        .find(|&i| numeric(&p.col_keys, i) == Some(true))
        .map(|i| (true, i))
        .or_else(|| {
            (0..p.rows.len())
                .find(|&i| numeric(&p.row_keys, i) == Some(true))
                .map(|i| (false, i))
        })
}

/// Every cell of `p` with its x on the numeric axis (`on_cols`, `x_at`),
/// the label of its line (the other axes) and its value; none when a cell
/// has no x.
fn chart_points(
    p: &Pivot,
    figure: &Cell,
    (on_cols, x_at): (bool, usize),
    factor: f64,
) -> Option<Vec<(f64, String, Option<f64>)>> {
    let mut points: Vec<(f64, String, Option<f64>)> = Vec::new();
    for (r, rk) in p.row_keys.iter().enumerate() {
        for (c, ck) in p.col_keys.iter().enumerate() {
            let (mut rk, mut ck) = (rk.clone(), ck.clone());
            let (mut rows, mut cols) = (p.rows.clone(), p.cols.clone());
            let x = if on_cols {
                cols.remove(x_at);
                ck.remove(x_at).number
            } else {
                rows.remove(x_at);
                rk.remove(x_at).number
            }?;
            rows.extend(cols);
            rk.extend(ck);
            let label = if rows.is_empty() {
                figure.name()
            } else {
                col_label(&rows, &rk)
            };
            let y = match &p.cells[r][c] {
                CellValue::Value { median, .. } => Some(sig(median * factor)),
                _ => None,
            };
            points.push((x, label, y));
        }
    }
    Some(points)
}

/// The pivot as lines along its numeric axis; none when it has no such
/// axis or its cells are of several units.
fn chart(p: &Pivot, id: &str) -> Option<Chart> {
    let [figure] = p.figures.as_slice() else {
        return None;
    };
    let (on_cols, x_at) = numeric_axis(p)?;
    let x_name = if on_cols {
        &p.cols[x_at]
    } else {
        &p.rows[x_at]
    };
    let (unit, factor) = chart_unit(figure);
    let points = chart_points(p, figure, (on_cols, x_at), factor)?;
    let mut xs: Vec<f64> = points.iter().map(|(x, _, _)| *x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut labels: Vec<String> = Vec::new();
    for (_, l, _) in &points {
        if !labels.contains(l) {
            labels.push(l.clone());
        }
    }
    let mut data = vec![xs.iter().map(|x| Some(*x)).collect::<Vec<_>>()];
    let mut list = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        let mut s = series(l.clone(), "y", RUN_COLORS[i % RUN_COLORS.len()], "received");
        s.span_gaps = true;
        list.push(s);
        data.push(
            xs.iter()
                .map(|x| {
                    points
                        .iter()
                        .find(|(px, pl, _)| px == x && pl == l)
                        .and_then(|(_, _, y)| *y)
                })
                .collect(),
        );
    }
    Some(Chart {
        id: id.to_string(),
        title: format!("{}: {} by {x_name}", p.name, figure.name()),
        x: axis("x", x_name, "count", None),
        y: vec![axis("y", &figure.name(), unit, Some(0.0))],
        series: list,
        data,
        note: format!(
            "{} (median of repetitions) against {x_name}, a line per combination of the other axes. \
             Click a legend entry to hide it.",
            figure.name()
        ),
        steps: false,
        marks: Vec::new(),
        x_labels: Vec::new(),
    })
}
