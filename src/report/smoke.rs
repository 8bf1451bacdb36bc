//! `linerate report MONITOR_DIR`: the smoke graph of a monitor's journal,
//! smokeping's way: per target and window the spread of the RTTs as grey
//! smoke (darker where more probes fall), the median as a line coloured by
//! the window's loss, and annotations as marked vertical lines; over the
//! whole journal or `--from`/`--to`. Windows are merged into at most
//! [`MAX_COLUMNS`] columns so a month draws as fast as an hour.

use crate::latency::monitor::{journal_files, JOURNAL};
use crate::model::error::Context;
use crate::report::error::{fail, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::Path;

pub const MAX_COLUMNS: usize = 1200;
/// RTT values kept per column (quantiles of the merged windows).
const SMOKE_POINTS: usize = 20;

pub fn is_monitor_dir(p: &Path) -> bool {
    p.is_dir() && p.join(JOURNAL).is_file()
}

#[derive(Debug, Clone, Default)]
struct Column {
    start: f64,
    end: f64,
    sent: u64,
    lost: u64,
    rtts: Vec<f64>,
}

struct Annotation {
    at: f64,
    text: String,
}

/// Parses `--from`/`--to`: Unix seconds or RFC 3339 UTC
/// (`2026-11-22T10:00:00Z`, seconds optional).
pub fn parse_time(s: &str) -> Result<f64> {
    if let Ok(v) = s.parse::<f64>() {
        return Ok(v);
    }
    let t = s.trim_end_matches('Z');
    let (date, time) = t.split_once('T').unwrap_or((t, "00:00:00"));
    let d: Vec<i64> = date.split('-').filter_map(|x| x.parse().ok()).collect();
    let h: Vec<f64> = time.split(':').filter_map(|x| x.parse().ok()).collect();
    if d.len() != 3 || h.is_empty() {
        fail!("'{s}' is not a time: give Unix seconds or YYYY-MM-DDTHH:MM[:SS]Z");
    }
    let (y, m, day) = (d[0], d[1], d[2]);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = h[0] * 3600.0 + h.get(1).unwrap_or(&0.0) * 60.0 + h.get(2).unwrap_or(&0.0);
    Ok(days as f64 * 86_400.0 + secs)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn ms(s: f64) -> String {
    let v = s * 1e3;
    if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// smokeping's loss colours, by share of probes lost.
pub fn loss_colour(ratio: f64) -> &'static str {
    match ratio {
        r if r <= 0.0 => "#26a641",
        r if r <= 0.05 => "#00b8ff",
        r if r <= 0.10 => "#0059ff",
        r if r <= 0.25 => "#7e00ff",
        r if r <= 0.50 => "#ff00ff",
        r if r < 1.0 => "#ff6600",
        _ => "#ff0000",
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Windows per target, and the annotations.
type Journal = (BTreeMap<String, Vec<Column>>, Vec<Annotation>);

/// Reads the journal within [from, to]: windows per target, annotations.
fn read(dir: &Path, from: f64, to: f64) -> Result<Journal> {
    let mut targets: BTreeMap<String, Vec<Column>> = BTreeMap::new();
    let mut notes = Vec::new();
    for f in journal_files(dir) {
        let file = std::fs::File::open(&f).with_context(|| format!("opening {}", f.display()))?;
        for line in std::io::BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue; // a torn last line after a crash
            };
            match v["type"].as_str() {
                Some("window") => {
                    let start = v["start_unix_s"].as_f64().unwrap_or(0.0);
                    let end = v["end_unix_s"].as_f64().unwrap_or(start);
                    if end < from || start > to {
                        continue;
                    }
                    let mut rtts: Vec<f64> = v["rtts_s"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                        .unwrap_or_default();
                    rtts.sort_by(f64::total_cmp);
                    targets
                        .entry(v["target"].as_str().unwrap_or("?").to_string())
                        .or_default()
                        .push(Column {
                            start,
                            end,
                            sent: v["sent"].as_u64().unwrap_or(0),
                            lost: v["lost"].as_u64().unwrap_or(0),
                            rtts,
                        });
                }
                Some("annotation") => {
                    let at = v["unix_s"].as_f64().unwrap_or(0.0);
                    if (from..=to).contains(&at) {
                        notes.push(Annotation {
                            at,
                            text: v["text"].as_str().unwrap_or("").to_string(),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    Ok((targets, notes))
}

/// Merges windows into at most `max` columns over [t0, t1].
fn columns(windows: &[Column], t0: f64, t1: f64, max: usize) -> Vec<Column> {
    if windows.len() <= max {
        return windows.to_vec();
    }
    let span = (t1 - t0).max(1e-9);
    let mut out: Vec<Column> = Vec::new();
    let mut cur: Option<(usize, Column)> = None;
    for w in windows {
        let slot = (((w.start - t0) / span) * max as f64) as usize;
        match &mut cur {
            Some((s, c)) if *s == slot => {
                c.end = w.end;
                c.sent += w.sent;
                c.lost += w.lost;
                c.rtts.extend(&w.rtts);
            }
            _ => {
                if let Some((_, c)) = cur.take() {
                    out.push(c);
                }
                cur = Some((slot, w.clone()));
            }
        }
    }
    out.extend(cur.map(|c| c.1));
    for c in &mut out {
        c.rtts.sort_by(f64::total_cmp);
        if c.rtts.len() > SMOKE_POINTS {
            let n = c.rtts.len();
            c.rtts = (0..SMOKE_POINTS)
                .map(|i| quantile(&c.rtts, i as f64 / (SMOKE_POINTS - 1) as f64))
                .collect();
            let _ = n;
        }
    }
    out
}

const W: f64 = 960.0;
const H: f64 = 280.0;
const L: f64 = 64.0;
const R: f64 = 12.0;
const T: f64 = 24.0;
const B: f64 = 36.0;

/// Where a time and an RTT land on a graph that spans `span` seconds from
/// `t0` and RTTs up to `y_max`.
struct Scale {
    t0: f64,
    span: f64,
    y_max: f64,
}

impl Scale {
    /// The x of a time.
    fn x(&self, t: f64) -> f64 {
        L + (t - self.t0) / self.span * (W - L - R)
    }

    /// The y of an RTT, clipped at the top.
    fn y(&self, v: f64) -> f64 {
        H - B - (v / self.y_max).min(1.0) * (H - B - T)
    }
}

/// The top of the RTT axis: scaled to the medians' spread, like
/// smokeping, so a lone outlier does not flatten everything else.
fn y_max(cols: &[Column]) -> f64 {
    let mut meds: Vec<f64> = cols
        .iter()
        .filter(|c| !c.rtts.is_empty())
        .map(|c| quantile(&c.rtts, 0.5))
        .collect();
    meds.sort_by(f64::total_cmp);
    let p90s = cols
        .iter()
        .filter(|c| !c.rtts.is_empty())
        .map(|c| quantile(&c.rtts, 0.9))
        .fold(0.0, f64::max);
    (quantile(&meds, 0.98) * 2.5)
        .max(p90s.min(quantile(&meds, 0.98) * 5.0))
        .max(1e-4)
}

/// The graph's frame and grid: five RTT lines with their values, five
/// times below.
fn grid(h: &mut String, scale: &Scale) {
    let _ = write!(
        h,
        "<rect x=\"{L}\" y=\"{T}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#bbb\"/>",
        W - L - R,
        H - B - T
    );
    for i in 0..=4 {
        let v = scale.y_max * f64::from(i) / 4.0;
        let _ = write!(
        h,
        "<line x1=\"{L}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/><text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
        W - R,
        L - 4.0,
        scale.y(v) + 3.0,
        ms(v),
        y = scale.y(v)
    );
        let t = scale.t0 + scale.span * f64::from(i) / 4.0;
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            scale.x(t),
            H - B + 14.0,
            crate::model::clock::rfc3339(t.max(0.0) as u64).replace('T', " ")
        );
    }
}

fn graph(name: &str, cols: &[Column], notes: &[Annotation], t0: f64, t1: f64) -> String {
    let span = (t1 - t0).max(1e-3);
    let scale = Scale {
        t0,
        span,
        y_max: y_max(cols),
    };
    let sx = |t: f64| scale.x(t);
    let sy = |v: f64| scale.y(v);
    let mut h = format!(
        "<figure class=\"smoke-target\" data-target=\"{}\"><figcaption>{}</figcaption><svg class=\"smoke\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"smoke graph of {}\">",
        esc(name),
        esc(name),
        esc(name)
    );
    grid(&mut h, &scale);
    // The smoke: nested bands between symmetric quantiles.
    for c in cols {
        let (x0, x1) = (sx(c.start), sx(c.end).max(sx(c.start) + 1.0));
        let n = c.rtts.len();
        for k in 0..n / 2 {
            let (lo, hi) = (c.rtts[k], c.rtts[n - 1 - k]);
            let _ = write!(
                h,
                "<rect class=\"band\" x=\"{x0:.1}\" width=\"{:.1}\" y=\"{:.1}\" height=\"{:.1}\" fill=\"#000\" fill-opacity=\"0.09\"/>",
                x1 - x0,
                sy(hi),
                (sy(lo) - sy(hi)).max(0.5)
            );
        }
    }
    // The median, coloured by loss; a window that lost everything is a red
    // bar along the top.
    let mut path = Vec::new();
    for c in cols {
        let (x0, x1) = (sx(c.start), sx(c.end).max(sx(c.start) + 1.0));
        let loss = if c.sent > 0 {
            c.lost as f64 / c.sent as f64
        } else {
            0.0
        };
        if c.rtts.is_empty() {
            let _ = write!(
                h,
                "<rect class=\"all-lost\" x=\"{x0:.1}\" y=\"{T}\" width=\"{:.1}\" height=\"4\" fill=\"{}\"><title>all probes lost</title></rect>",
                x1 - x0,
                loss_colour(1.0)
            );
            continue;
        }
        let m = quantile(&c.rtts, 0.5);
        path.push(format!("{:.1},{:.1}", (x0 + x1) / 2.0, sy(m)));
        let _ = write!(
            h,
            "<line class=\"median-seg\" data-loss=\"{loss:.3}\" x1=\"{x0:.1}\" x2=\"{x1:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{}\" stroke-width=\"2.5\"><title>median {} loss {:.1} %</title></line>",
            loss_colour(loss),
            ms(m),
            loss * 100.0,
            y = sy(m)
        );
    }
    let _ = write!(
        h,
        "<polyline class=\"median\" fill=\"none\" stroke=\"#26a641\" stroke-opacity=\"0.35\" stroke-width=\"1\" points=\"{}\"/>",
        path.join(" ")
    );
    for a in notes {
        let x = sx(a.at);
        let _ = write!(
            h,
            "<g class=\"annotation\"><line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{T}\" y2=\"{:.1}\" stroke=\"#d9480f\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#d9480f\">{}</text></g>",
            H - B,
            x + 3.0,
            T + 12.0,
            esc(&a.text)
        );
    }
    h.push_str("</svg></figure>");
    h
}

/// The smoke page of a monitor directory over [from, to] (Unix seconds).
pub fn page(dir: &Path, from: Option<f64>, to: Option<f64>) -> Result<String> {
    let (targets, notes) = read(dir, from.unwrap_or(f64::MIN), to.unwrap_or(f64::MAX))?;
    if targets.is_empty() {
        fail!(
            "{}: no monitor windows in that span (is the monitor still in its first window?)",
            dir.display()
        );
    }
    let t0 = from.unwrap_or_else(|| {
        targets
            .values()
            .flatten()
            .map(|c| c.start)
            .fold(f64::MAX, f64::min)
    });
    let t1 = to.unwrap_or_else(|| {
        targets
            .values()
            .flatten()
            .map(|c| c.end)
            .fold(f64::MIN, f64::max)
    });
    let mut body = String::new();
    for (name, windows) in &targets {
        let cols = columns(windows, t0, t1, MAX_COLUMNS);
        let sent: u64 = windows.iter().map(|w| w.sent).sum();
        let lost: u64 = windows.iter().map(|w| w.lost).sum();
        body.push_str(&graph(name, &cols, &notes, t0, t1));
        let _ =
            write!(
            body,
            "<p class=\"summary\" data-target=\"{}\">{} windows, {} probes, {} lost ({:.2} %)</p>",
            esc(name),
            windows.len(),
            sent,
            lost,
            if sent > 0 { lost as f64 / sent as f64 * 100.0 } else { 0.0 }
        );
    }
    let legend: String = [0.0, 0.05, 0.10, 0.25, 0.5, 0.9, 1.0]
        .iter()
        .map(|&r| {
            format!(
                "<span class=\"legend\"><i style=\"background:{}\"></i>{}</span>",
                loss_colour(r),
                if r == 0.0 {
                    "0".to_string()
                } else {
                    format!("≤{:.0} %", r * 100.0)
                }
            )
        })
        .collect();
    Ok(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>linerate monitor · {dir}</title><style>body{{font:14px system-ui,sans-serif;margin:24px;color:#222}}figure{{margin:0 0 8px}}figcaption{{font-weight:600;margin:12px 0 4px}}.legend{{margin-right:12px}}.legend i{{display:inline-block;width:14px;height:4px;margin-right:4px;vertical-align:middle}}.summary{{color:#555;margin:0 0 16px}}</style></head><body><h1>linerate monitor</h1><p class=\"span\">{} – {} · median line coloured by loss: {legend}</p>{body}</body></html>",
        crate::model::clock::rfc3339(t0.max(0.0) as u64),
        crate::model::clock::rfc3339(t1.max(0.0) as u64),
        dir = esc(&dir.display().to_string()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_columns() {
        assert_eq!(parse_time("1700000000").unwrap(), 1.7e9);
        let t = parse_time("2026-11-22T10:00:00Z").unwrap();
        assert_eq!(
            crate::model::clock::rfc3339(t as u64),
            "2026-11-22T10:00:00Z"
        );
        assert!(parse_time("yesterday").is_err());
        let w: Vec<Column> = (0..3000)
            .map(|i| Column {
                start: f64::from(i),
                end: f64::from(i + 1),
                sent: 20,
                lost: 1,
                rtts: (0..19).map(|k| f64::from(k) * 1e-3).collect(),
            })
            .collect();
        let c = columns(&w, 0.0, 3000.0, 1000);
        assert!(c.len() <= 1000);
        assert_eq!(c.iter().map(|c| c.sent).sum::<u64>(), 60_000);
        assert!(c.iter().all(|c| c.rtts.len() <= SMOKE_POINTS));
    }
}
