//! The pivot model: points (tests, ramps, searches) with coordinates, the
//! axes on each side, and one cell per row × column combination with the
//! median of the repetitions. No formatting and no I/O: `text` and `page`
//! render what [`build`] returns.

use super::cell::{self, Cell};
use crate::model::sweep::SweepInfo;
use crate::report::error::{fail, Result};
use crate::report::run::Run;

mod points;

use points::collect;

/// What the user asked of the pivot (`--pivot`, `--rows`, `--cols`,
/// `--cell`); the default pivots each sweep as its SweepInfo says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PivotOpts {
    /// Pivot runs without sweeps too: every test, ramp and search.
    pub all: bool,
    /// Axes shown as rows, outermost first; empty: chosen.
    pub rows: Vec<String>,
    /// Axes shown as columns, outermost first; empty: chosen.
    pub cols: Vec<String>,
    /// The figure in each cell (an `--expect` figure name, `%` appended
    /// for a packet rate in % of the line rate); none: by kind.
    pub cell: Option<String>,
}

/// Axes every point has besides its sweep coordinates.
pub const PSEUDO_AXES: [&str; 5] = ["run", "dut", "test", "profile", "direction"];

/// A value of an axis: as written, and as a number when it is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub text: String,
    pub number: Option<f64>,
}

impl Value {
    fn text(s: impl Into<String>) -> Value {
        let text = s.into();
        Value {
            number: text.parse().ok(),
            text,
        }
    }
}

/// One repetition's measurement at a point.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The value, and whether it is only a lower bound (a ramp that did
    /// not saturate: its peak offered load).
    Value(f64, bool),
    /// The point ran but did not measure the cell's figure.
    NotMeasured,
    Failed(String),
}

/// A test, ramp or search with every axis value.
#[derive(Debug, Clone)]
struct Point {
    sweep: Option<String>,
    /// Values in the order of the pivot's `axes`.
    values: Vec<(String, Value)>,
    cell: Cell,
    outcome: Outcome,
    /// The same point's received rate in % of the line rate (tests:
    /// `line_pct`, ramps: `saturation%`, searches: `ndr%`), for pivots
    /// whose default figures differ in unit.
    line: Option<(Cell, Outcome)>,
}

impl Point {
    fn get(&self, axis: &str) -> Option<&Value> {
        self.values.iter().find(|(k, _)| k == axis).map(|(_, v)| v)
    }
}

/// What one cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum CellValue {
    /// No point has these coordinates.
    Missing,
    /// Every repetition failed; the first error.
    Failed(String),
    /// The points ran but none measured the figure.
    NotMeasured,
    Value {
        median: f64,
        min: f64,
        max: f64,
        /// Repetitions measured.
        n: usize,
        /// Repetitions that failed (their errors).
        failed: Vec<String>,
        /// The value is a lower bound (a ramp that did not saturate).
        at_least: bool,
        cell: Cell,
    },
}

/// One pivot table.
#[derive(Debug, Clone)]
pub struct Pivot {
    /// The sweep's name, or `tests` when pivoting tests without sweeps.
    pub name: String,
    /// Every axis the points have, sweep axes first.
    pub axes: Vec<String>,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// Distinct row and column coordinates in order of first appearance.
    pub row_keys: Vec<Vec<Value>>,
    pub col_keys: Vec<Vec<Value>>,
    /// `cells[row][col]`.
    pub cells: Vec<Vec<CellValue>>,
    /// The figures shown, each once (several when kinds differ).
    pub figures: Vec<Cell>,
    /// Some point is bidirectional: its rates are both directions summed.
    pub summed_directions: bool,
}

/// The pivots of `runs`: one per sweep (points of the same sweep name in
/// several runs meet in one), or with `opts.all` and no sweep, one of every
/// test, ramp and search. Errors name a bad axis or cell and list the good
/// ones.
pub fn build(runs: &[Run], opts: &PivotOpts) -> Result<Vec<Pivot>> {
    let asked = opts.cell.as_deref().map(Cell::parse).transpose()?;
    let mut points = Vec::new();
    for run in runs {
        collect(run, asked, &mut points);
    }
    let any_sweep = points.iter().any(|p| p.sweep.is_some());
    if !any_sweep && !opts.all {
        return Ok(Vec::new());
    }
    let mut groups: Vec<(String, Vec<Point>)> = Vec::new();
    for p in points {
        if any_sweep && p.sweep.is_none() {
            continue;
        }
        let name = p.sweep.clone().unwrap_or_else(|| "tests".into());
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, g)) => g.push(p),
            None => groups.push((name, vec![p])),
        }
    }
    groups
        .into_iter()
        .map(|(name, g)| {
            let info = runs
                .iter()
                .find_map(|r| r.results.sweeps.iter().find(|s| s.name == name));
            pivot(name, g, info, opts)
        })
        .collect()
}

/// Every axis some point has a value on, in the order first seen.
fn axes_of(points: &[Point]) -> Vec<String> {
    let mut axes: Vec<String> = Vec::new();
    for p in points {
        for (k, _) in &p.values {
            if !axes.contains(k) {
                axes.push(k.clone());
            }
        }
    }
    axes
}

/// A point's values on one side's axes ("–" where it has none).
fn key_of(p: &Point, side: &[String]) -> Vec<Value> {
    side.iter()
        .map(|a| p.get(a).cloned().unwrap_or_else(|| Value::text("–")))
        .collect()
}

/// The points' distinct keys on one side's axes, in the order first seen.
fn distinct_keys(points: &[Point], side: &[String]) -> Vec<Vec<Value>> {
    let mut keys: Vec<Vec<Value>> = points.iter().map(|p| key_of(p, side)).collect();
    dedup_unsorted(&mut keys);
    keys
}

/// Drops repeats from `v`, keeping each item's first place.
fn dedup_unsorted<T: PartialEq>(v: &mut Vec<T>) {
    let mut kept: Vec<T> = Vec::with_capacity(v.len());
    for x in v.drain(..) {
        if !kept.contains(&x) {
            kept.push(x);
        }
    }
    *v = kept;
}

/// The pivot of one group of points.
fn pivot(
    name: String,
    mut points: Vec<Point>,
    info: Option<&SweepInfo>,
    opts: &PivotOpts,
) -> Result<Pivot> {
    let axes = axes_of(&points);
    one_unit(&mut points);
    let check = |list: &[String], flag: &str| -> Result<()> {
        for a in list {
            if !axes.contains(a) {
                fail!(
                    "{flag} names axis '{a}', which the points of '{name}' do not have; \
                     its axes are: {} (give one or several of them, comma-separated)",
                    axes.join(", ")
                );
            }
        }
        Ok(())
    };
    let (mut rows, mut cols) = (opts.rows.clone(), opts.cols.clone());
    check(&rows, "--rows")?;
    check(&cols, "--cols")?;
    if let Some(a) = rows.iter().find(|a| cols.contains(a)) {
        fail!("axis '{a}' is in both --rows and --cols; put it on one side");
    }
    if rows.is_empty() && cols.is_empty() {
        if let Some(i) = info {
            rows = i
                .rows
                .iter()
                .filter(|a| axes.contains(a))
                .cloned()
                .collect();
            cols = i
                .cols
                .iter()
                .filter(|a| axes.contains(a))
                .cloned()
                .collect();
        }
    }
    choose(&points, &axes, &mut rows, &mut cols);
    let (row_keys, col_keys) = (distinct_keys(&points, &rows), distinct_keys(&points, &cols));
    let mut cells = Vec::new();
    for r in &row_keys {
        let mut line = Vec::new();
        for c in &col_keys {
            let here: Vec<&Point> = points
                .iter()
                .filter(|p| key_of(p, &rows) == *r && key_of(p, &cols) == *c)
                .collect();
            mixed(&here, &axes, &name)?;
            line.push(summarize(&here));
        }
        cells.push(line);
    }
    let mut figures: Vec<Cell> = points.iter().map(|p| p.cell).collect();
    dedup_unsorted(&mut figures);
    let summed_directions = points
        .iter()
        .any(|p| p.get("direction").is_some_and(|v| v.text == "bidir"));
    Ok(Pivot {
        name,
        axes,
        rows,
        cols,
        row_keys,
        col_keys,
        cells,
        figures,
        summed_directions,
    })
}

/// When the points' default figures differ in unit (UDP in % of line, TCP
/// in Gbit/s), every point shows its rate in % of the line rate if each
/// has one; otherwise each cell keeps its own figure and unit.
fn one_unit(points: &mut [Point]) {
    let first = points.first().map(|p| cell::unit_class(&p.cell));
    if points
        .iter()
        .all(|p| Some(cell::unit_class(&p.cell)) == first)
    {
        return;
    }
    let has_line = |p: &Point| {
        matches!(&p.line, Some((_, o)) if !matches!(o, Outcome::NotMeasured))
            || matches!(p.outcome, Outcome::Failed(_))
    };
    if !points.iter().all(has_line) {
        return;
    }
    for p in points.iter_mut() {
        if let Some((c, o)) = p.line.take() {
            p.cell = c;
            if !matches!(p.outcome, Outcome::Failed(_)) {
                p.outcome = o;
            }
        }
    }
}

/// Axes whose values differ between the points, in axis order, leaving out
/// those another chosen axis already decides (a run's DUT mode when each
/// run has one; a test's profile).
fn varying(points: &[Point], axes: &[String], chosen: &[String]) -> Vec<String> {
    let mut kept: Vec<String> = chosen.to_vec();
    let mut out = Vec::new();
    for a in axes {
        if kept.contains(a) || distinct(points, a) < 2 || decided(points, &kept, a) {
            continue;
        }
        kept.push(a.clone());
        out.push(a.clone());
    }
    out
}

fn distinct(points: &[Point], axis: &str) -> usize {
    let mut seen: Vec<&Value> = Vec::new();
    for v in points.iter().filter_map(|p| p.get(axis)) {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen.len()
}

/// Whether the values of `by` decide the value of `axis` at every point.
fn decided(points: &[Point], by: &[String], axis: &str) -> bool {
    if by.is_empty() {
        return false;
    }
    fn values_of<'a>(p: &'a Point, by: &[String]) -> Vec<Option<&'a Value>> {
        by.iter().map(|a| p.get(a)).collect()
    }
    let key = |p| values_of(p, by);
    points.iter().all(|p| {
        points
            .iter()
            .filter(|q| key(q) == key(p))
            .all(|q| q.get(axis) == p.get(axis))
    })
}

/// Fills the sides the user left empty: the varying axis with the most
/// values (at most 8) as columns, the rest as rows; `test` when nothing
/// varies.
fn choose(points: &[Point], axes: &[String], rows: &mut Vec<String>, cols: &mut Vec<String>) {
    let chosen: Vec<String> = rows.iter().chain(cols.iter()).cloned().collect();
    let mut rest = varying(points, axes, &chosen);
    if cols.is_empty() && !(rows.is_empty() && rest.len() == 1 && distinct(points, &rest[0]) > 8) {
        let best = rest
            .iter()
            .enumerate()
            .map(|(i, a)| (distinct(points, a), std::cmp::Reverse(i), a.clone()))
            .filter(|(n, _, _)| *n <= 8)
            .max();
        if let Some((_, std::cmp::Reverse(i), a)) = best {
            rest.remove(i);
            cols.push(a);
        }
    }
    rows.extend(rest);
    if rows.is_empty() && cols.is_empty() {
        rows.push("test".into());
    }
}

/// Errors when a cell would hold points that differ in an axis not shown
/// (they are different measurements, not repetitions).
fn mixed(here: &[&Point], axes: &[String], name: &str) -> Result<()> {
    let Some(first) = here.first() else {
        return Ok(());
    };
    for a in axes {
        let mut vals: Vec<&str> = Vec::new();
        for p in here {
            let v = p.get(a).map(|v| v.text.as_str()).unwrap_or("–");
            if !vals.contains(&v) {
                vals.push(v);
            }
        }
        if vals.len() > 1 {
            fail!(
                "a cell of '{name}' would mix points that differ in '{a}' ({}; first: {}): \
                 add '{a}' to --rows or --cols",
                vals.join(", "),
                first.get(a).map(|v| v.text.as_str()).unwrap_or("–")
            );
        }
    }
    Ok(())
}

/// The repetitions of one cell: median with min–max of those measured.
fn summarize(here: &[&Point]) -> CellValue {
    if here.is_empty() {
        return CellValue::Missing;
    }
    let mut vals: Vec<f64> = Vec::new();
    let mut at_least = false;
    let mut failed = Vec::new();
    for p in here {
        match &p.outcome {
            Outcome::Value(v, lb) => {
                vals.push(*v);
                at_least |= *lb;
            }
            Outcome::Failed(e) => failed.push(e.clone()),
            Outcome::NotMeasured => {}
        }
    }
    if vals.is_empty() {
        return match failed.into_iter().next() {
            Some(e) => CellValue::Failed(e),
            None => CellValue::NotMeasured,
        };
    }
    vals.sort_by(f64::total_cmp);
    let n = vals.len();
    let median = if n % 2 == 1 {
        vals[n / 2]
    } else {
        (vals[n / 2 - 1] + vals[n / 2]) / 2.0
    };
    CellValue::Value {
        median,
        min: vals[0],
        max: vals[n - 1],
        n,
        failed,
        at_least,
        cell: here[0].cell,
    }
}
