//! A search's latency at load points (`search --latency-at`): the
//! terminal table printed after the search and the report's chart of
//! percentiles against load.

use super::charts::{axis, series, sig, Chart};
use crate::results::latency_at::LatencyAt;
use crate::results::SearchResult;

/// µs with one decimal below 1 ms, none above.
fn us(ns: u64) -> String {
    let v = ns as f64 / 1e3;
    if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// The table printed after a search: a line per point and direction.
pub fn table(search: &str, l: &LatencyAt) -> Vec<String> {
    let mut out = vec![format!(
        "{search}: one-way latency at load (% of the {} {:.0} pps; {:.1} s trials; clock: {}; \
         HDR, {} significant digits)",
        l.basis, l.basis_pps, l.trial_s, l.clock, l.significant_digits
    )];
    out.push(format!(
        "  {:>6} {:>11} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "load",
        "pps",
        "direction",
        "loss",
        "min µs",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs"
    ));
    for p in &l.points {
        for d in &p.directions {
            let loss = format!("{:.3} %", d.loss_ratio * 100.0);
            let figures = match &d.latency {
                Some(s) => [s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.p99_9_ns, s.max_ns]
                    .iter()
                    .map(|&v| format!("{:>9}", us(v)))
                    .collect::<Vec<_>>()
                    .join(" "),
                None => format!(
                    "no latency: {}",
                    d.note.as_deref().unwrap_or("the receiver timed no frame")
                ),
            };
            out.push(format!(
                "  {:>4} % {:>11.0} {:<14} {:>9} {figures}",
                p.load_pct, p.rate_pps, d.direction, loss
            ));
        }
    }
    if let Some(n) = &l.note {
        out.push(format!("  {n}"));
    }
    out
}

const PCT_COLORS: [&str; 5] = ["#1f5fa8", "#2ca02c", "#c8590f", "#d62728", "#8c2d9c"];

/// Percentiles of one-way latency (µs) against load (% of the basis),
/// per direction: the first solid, the second dashed.
pub fn chart(id: &str, s: &SearchResult) -> Option<Chart> {
    let l = s.latency_at.as_ref()?;
    if l.points
        .iter()
        .all(|p| p.directions.iter().all(|d| d.latency.is_none()))
    {
        return None;
    }
    let x: Vec<Option<f64>> = l.points.iter().map(|p| Some(p.load_pct)).collect();
    let mut dirs: Vec<&str> = Vec::new();
    for p in &l.points {
        for d in &p.directions {
            if !dirs.contains(&d.direction.as_str()) {
                dirs.push(&d.direction);
            }
        }
    }
    type Pick = fn(&crate::model::hdr::OwdSummary) -> u64;
    let figures: [(&str, Pick); 5] = [
        ("p50", |s| s.p50_ns),
        ("p90", |s| s.p90_ns),
        ("p99", |s| s.p99_ns),
        ("p99.9", |s| s.p99_9_ns),
        ("max", |s| s.max_ns),
    ];
    let mut out_series = Vec::new();
    let mut data = vec![x];
    for (k, dir) in dirs.iter().enumerate() {
        for (j, (name, pick)) in figures.iter().enumerate() {
            let role = if k == 0 { "received" } else { "offered" };
            let mut se = series(format!("{dir} {name}"), "lat", PCT_COLORS[j], role);
            se.span_gaps = true;
            out_series.push(se);
            data.push(
                l.points
                    .iter()
                    .map(|p| {
                        let d = p.directions.iter().find(|d| d.direction == *dir)?;
                        d.latency.as_ref().map(|s| sig(pick(s) as f64 / 1e3))
                    })
                    .collect(),
            );
        }
    }
    Some(Chart {
        id: id.into(),
        title: format!("{} · one-way latency at load", s.name),
        x: axis("x", &format!("% of the {}", l.basis), "%", Some(0.0)),
        y: vec![axis("lat", "one-way latency", "µs", Some(0.0))],
        series: out_series,
        data,
        note: format!(
            "Each point a trial of {:.1} s at that share of {:.0} pps; percentiles from an HDR \
             histogram of every frame received (clock: {}).",
            l.trial_s, l.basis_pps, l.clock
        ),
        steps: false,
        marks: Vec::new(),
        x_labels: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hdr::OwdSummary;
    use crate::results::latency_at::{LatencyPoint, LatencyPointDirection};

    fn at() -> LatencyAt {
        let dir = |p99: u64| LatencyPointDirection {
            direction: "gen_to_sink".into(),
            tx_packets: 1000,
            rx_packets: 1000,
            dut_lost: 0,
            loss_ratio: 0.0,
            latency: Some(OwdSummary {
                frames: 1000,
                min_ns: 5_000,
                p50_ns: 8_000,
                p90_ns: 9_000,
                p99_ns: p99,
                p99_9_ns: p99 * 2,
                max_ns: 2_500_000,
            }),
            note: None,
        };
        LatencyAt {
            basis: "mlr ndr lower bound".into(),
            basis_pps: 100_000.0,
            trial_s: 1.0,
            clock: "same host".into(),
            significant_digits: 2,
            points: vec![
                LatencyPoint {
                    load_pct: 10.0,
                    rate_pps: 10_000.0,
                    test: 0,
                    directions: vec![dir(12_000)],
                },
                LatencyPoint {
                    load_pct: 90.0,
                    rate_pps: 90_000.0,
                    test: 1,
                    directions: vec![dir(400_000)],
                },
            ],
            note: None,
        }
    }

    #[test]
    fn the_table_has_a_line_per_point_in_microseconds() {
        let t = table("search 64b", &at());
        assert_eq!(t.len(), 4, "{t:#?}");
        assert!(t[0].contains("mlr ndr lower bound 100000 pps"), "{}", t[0]);
        assert!(t[0].contains("clock: same host"), "{}", t[0]);
        assert!(t[2].contains("10 %") && t[2].contains("12.0") && t[2].contains("2500"));
        assert!(t[3].contains("90 %") && t[3].contains("400") && t[3].contains("800"));
    }

    #[test]
    fn the_chart_puts_percentiles_against_load() {
        let s = SearchResult {
            name: "search 64b".into(),
            profile: "64b".into(),
            frame: crate::proto::FrameSpec::Fixed(64),
            flow_mode: crate::results::FlowMode::One,
            direction: crate::proto::Direction::Forward,
            line_rate_pps: 14_880_952.0,
            mlr: None,
            rfc2544: None,
            frame_loss: None,
            back_to_back: None,
            latency_at: Some(at()),
            sweep: None,
        };
        let c = chart("search0-lat", &s).unwrap();
        assert_eq!(c.data[0], vec![Some(10.0), Some(90.0)]);
        let p99 = c
            .series
            .iter()
            .position(|s| s.label == "gen_to_sink p99")
            .unwrap();
        assert_eq!(c.data[p99 + 1], vec![Some(12.0), Some(400.0)]);
        assert_eq!(c.y[0].unit, "µs");
    }
}
