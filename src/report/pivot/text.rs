//! A pivot as text: the terminal table (fitted to the width: columns that
//! do not fit go to a further block that repeats the row labels) and the
//! CSV file (one line per row, one column per column combination, the
//! median in the unit the `unit` column names).

use super::cell::{Cell, Scale};
use super::model::{CellValue, Pivot, Value};
use crate::report::columns::{shorten, wrap};
use crate::report::export::csv_field;

/// The scale of each figure in the pivot, from the values it holds.
pub fn scales(p: &Pivot) -> Vec<(Cell, Scale)> {
    p.figures
        .iter()
        .map(|f| {
            let values: Vec<f64> = p
                .cells
                .iter()
                .flatten()
                .filter_map(|c| match c {
                    CellValue::Value { median, cell, .. } if cell == f => Some(*median),
                    _ => None,
                })
                .collect();
            (*f, Scale::for_values(f, &values))
        })
        .collect()
}

fn scale_of(scales: &[(Cell, Scale)], c: &Cell) -> Scale {
    scales
        .iter()
        .find(|(f, _)| f == c)
        .map(|(_, s)| *s)
        .unwrap_or(Scale { div: 1.0, unit: "" })
}

/// A cell as the tables write it: `12.3`, `≥97.0`, `12.3 (11.9–12.5)` for
/// repetitions, `FAIL`, `–` where nothing ran, `n/a` where the points did
/// not measure the figure. With `unit` (pivots of several figures), the
/// unit follows the median.
pub fn cell_text(c: &CellValue, scales: &[(Cell, Scale)], unit: bool) -> String {
    match c {
        CellValue::Missing => "–".into(),
        CellValue::NotMeasured => "n/a".into(),
        CellValue::Failed(_) => "FAIL".into(),
        CellValue::Value {
            median,
            min,
            max,
            n,
            failed,
            at_least,
            cell,
        } => {
            let s = scale_of(scales, cell);
            let mut t = if unit {
                s.text(*median)
            } else {
                s.number(*median)
            };
            if *at_least {
                t.insert(0, '≥');
            }
            if *n > 1 {
                t.push_str(&format!(" ({}–{})", s.number(*min), s.number(*max)));
            }
            if !failed.is_empty() {
                t.push_str(&format!(" +{} FAIL", failed.len()));
            }
            t
        }
    }
}

/// The line above a table: what the cells are and how to read them.
pub fn caption(p: &Pivot, scales: &[(Cell, Scale)]) -> String {
    let figs: Vec<String> = scales
        .iter()
        .map(|(c, s)| {
            let unit = if s.unit.is_empty() {
                String::new()
            } else {
                format!(", {}", s.unit)
            };
            format!("{}: {}{unit}", c.name(), c.about())
        })
        .collect();
    let mut notes = vec![figs.join("; ")];
    if p.summed_directions {
        notes.push("bidirectional points: both directions summed".into());
    }
    let reps = p
        .cells
        .iter()
        .flatten()
        .any(|c| matches!(c, CellValue::Value { n, .. } if *n > 1));
    if reps {
        notes.push("repetitions: median (min–max)".into());
    }
    if p.cells
        .iter()
        .flatten()
        .any(|c| matches!(c, CellValue::Value { at_least: true, .. }))
    {
        notes.push("≥: the ramp did not saturate (its peak offered load)".into());
    }
    notes.join(" · ")
}

/// A column combination's label: the value, or `axis=value` pairs.
pub fn col_label(cols: &[String], key: &[Value]) -> String {
    match key {
        [] => String::new(),
        [v] => v.text.clone(),
        _ => cols
            .iter()
            .zip(key)
            .map(|(a, v)| format!("{a}={}", v.text))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The terminal table of one pivot, fitted to `width` when there is one.
pub fn table(p: &Pivot, width: Option<usize>) -> String {
    let scales = scales(p);
    let unit = scales.len() > 1;
    let mut out = heading(p, &scales, width);
    let max_left = width.map(|w| (w / 2).max(12)).unwrap_or(usize::MAX);
    // Left block: one column per row axis (or the figure when no rows).
    let left_heads: Vec<String> = if p.rows.is_empty() {
        vec![String::new()]
    } else {
        p.rows.clone()
    };
    let left_cells: Vec<Vec<String>> = p
        .row_keys
        .iter()
        .map(|k| {
            if p.rows.is_empty() {
                vec![scales.first().map(|(c, _)| c.name()).unwrap_or_default()]
            } else {
                k.iter().map(|v| shorten(&v.text, max_left)).collect()
            }
        })
        .collect();
    let mut left_w: Vec<usize> = left_heads.iter().map(|h| h.chars().count()).collect();
    for row in &left_cells {
        for (w, c) in left_w.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let left_total: usize = left_w.iter().sum::<usize>() + 2 * left_w.len().saturating_sub(1);
    let texts: Vec<Vec<String>> = p
        .cells
        .iter()
        .map(|r| r.iter().map(|c| cell_text(c, &scales, unit)).collect())
        .collect();
    let col_w = column_widths(p, &texts);
    let blocks = column_blocks(&col_w, left_total, width);
    for block in &blocks {
        for (level, axis) in p.cols.iter().enumerate() {
            let mut line = format!("{:>left_total$}", axis);
            for &j in block {
                let w = col_w[j];
                line.push_str(&format!("  {:>w$}", p.col_keys[j][level].text));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if !p.rows.is_empty() {
            let heads: Vec<String> = left_heads
                .iter()
                .zip(&left_w)
                .map(|(h, w)| format!("{h:<w$}"))
                .collect();
            out.push_str(heads.join("  ").trim_end());
            out.push('\n');
        }
        for (r, row) in left_cells.iter().enumerate() {
            let heads: Vec<String> = row
                .iter()
                .zip(&left_w)
                .map(|(h, w)| format!("{h:<w$}"))
                .collect();
            let mut line = heads.join("  ");
            for &j in block {
                let w = col_w[j];
                line.push_str(&format!("  {:>w$}", texts[r][j]));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out.push_str(&failures(p, width));
    out
}

/// A pivot table's title (its name and axes) and caption, wrapped to
/// `width`, after a blank line.
fn heading(p: &Pivot, scales: &[(Cell, Scale)], width: Option<usize>) -> String {
    let title = format!(
        "Pivot '{}' (rows: {}; columns: {})",
        p.name,
        if p.rows.is_empty() {
            "-".into()
        } else {
            p.rows.join(", ")
        },
        if p.cols.is_empty() {
            "-".into()
        } else {
            p.cols.join(", ")
        }
    );
    let mut out = String::from("\n");
    for l in wrap(&title, width, "", "  ").into_iter().chain(wrap(
        &caption(p, scales),
        width,
        "  ",
        "  ",
    )) {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Each column's width: its widest head or cell (`texts`, by row).
fn column_widths(p: &Pivot, texts: &[Vec<String>]) -> Vec<usize> {
    let col_w_for = |j: usize, texts: &[String]| -> usize {
        let head = p.col_keys[j]
            .iter()
            .map(|v| v.text.chars().count())
            .max()
            .unwrap_or(0);
        texts
            .iter()
            .map(|t| t.chars().count())
            .max()
            .unwrap_or(0)
            .max(head)
    };
    (0..p.col_keys.len())
        .map(|j| {
            let column: Vec<String> = texts.iter().map(|r| r[j].clone()).collect();
            col_w_for(j, &column)
        })
        .collect()
}

/// Blocks of columns (of widths `col_w`) that fit beside the left block
/// (`left_total` wide) in `width`.
fn column_blocks(col_w: &[usize], left_total: usize, width: Option<usize>) -> Vec<Vec<usize>> {
    let mut blocks: Vec<Vec<usize>> = Vec::new();
    let mut used = left_total;
    for (j, w) in col_w.iter().enumerate() {
        match blocks.last_mut() {
            Some(b) if width.is_none_or(|max| used + 2 + w <= max) => {
                b.push(j);
                used += 2 + w;
            }
            _ => {
                blocks.push(vec![j]);
                used = left_total + 2 + w;
            }
        }
    }
    blocks
}

/// The first ten failed points of a pivot, one line each, and how many
/// more there were.
fn failures(p: &Pivot, width: Option<usize>) -> String {
    let mut out = String::new();
    let failures: Vec<String> = p
        .cells
        .iter()
        .enumerate()
        .flat_map(|(r, row)| row.iter().enumerate().map(move |(c, v)| (r, c, v)))
        .filter_map(|(r, c, v)| match v {
            CellValue::Failed(e) => Some(format!("  FAIL {}: {e}", where_(p, r, c))),
            _ => None,
        })
        .collect();
    for f in failures.iter().take(10) {
        out.push_str(&shorten(f, width.unwrap_or(usize::MAX)));
        out.push('\n');
    }
    if failures.len() > 10 {
        out.push_str(&format!(
            "  … and {} more failed points\n",
            failures.len() - 10
        ));
    }
    out
}

/// `test=udp 64B, run=route`: where a cell is.
pub fn where_(p: &Pivot, r: usize, c: usize) -> String {
    p.rows
        .iter()
        .zip(&p.row_keys[r])
        .chain(p.cols.iter().zip(&p.col_keys[c]))
        .map(|(a, v)| format!("{a}={}", v.text))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every pivot as CSV: `pivot`, `figure`, `unit`, the row axes, then a
/// column per column combination holding the median (repetitions: their
/// median; empty: nothing ran there or the figure was not measured;
/// `FAIL`: every repetition failed). Pivots whose axes differ follow each
/// other, each with its own header line.
pub fn csv(pivots: &[Pivot]) -> String {
    let mut out = String::new();
    for p in pivots {
        let scales = scales(p);
        let mixed = scales.len() > 1;
        let mut head = vec!["pivot".to_string(), "figure".into(), "unit".into()];
        head.extend(p.rows.iter().cloned());
        if p.cols.is_empty() {
            head.push("value".into());
        } else {
            head.extend(p.col_keys.iter().map(|k| col_label(&p.cols, k)));
        }
        line(&mut out, &head);
        for (r, key) in p.row_keys.iter().enumerate() {
            let (figure, unit) = match scales.as_slice() {
                [(c, s)] => (c.name(), s.unit.to_string()),
                _ => ("mixed".into(), "in each cell".into()),
            };
            let mut fields = vec![p.name.clone(), figure, unit];
            fields.extend(key.iter().map(|v| v.text.clone()));
            for c in &p.cells[r] {
                fields.push(match c {
                    CellValue::Value { median, cell, .. } if !mixed => {
                        format!("{}", scale_of(&scales, cell).scaled(*median))
                    }
                    CellValue::Value { .. } => cell_text(c, &scales, true),
                    CellValue::Failed(_) => "FAIL".into(),
                    CellValue::Missing | CellValue::NotMeasured => String::new(),
                });
            }
            line(&mut out, &fields);
        }
    }
    out
}

fn line(out: &mut String, fields: &[String]) {
    let f: Vec<String> = fields.iter().map(|s| csv_field(s)).collect();
    out.push_str(&f.join(","));
    out.push('\n');
}
