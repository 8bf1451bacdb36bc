//! Latency in reports: the one-line idle-vs-loaded note of the terminal
//! table, and the per-test HTML section (per-phase table, RTT CDF per phase,
//! RTT over time with the phases marked), drawn as inline SVG.

use crate::latency::stats::{LatencyResult, Percentiles};
use std::fmt::Write as _;

fn ms(s: f64) -> String {
    let v = s * 1e3;
    if v.abs() >= 100.0 {
        format!("{v:.0} ms")
    } else if v.abs() >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

fn phase_rtt<'a>(l: &'a LatencyResult, name: &str) -> Option<&'a Percentiles> {
    l.phases
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| p.rtt_s.as_ref())
}

/// "RTT idle p50 0.08 ms / p99 0.7 ms; loaded p50 48 ms / p99 52 ms
/// (+48 ms under load); loss loaded fwd 1.2 % rev 0 %".
pub fn note(l: &LatencyResult) -> String {
    let mut s = String::from("RTT");
    for name in ["idle", "loaded", "after"] {
        if let Some(p) = phase_rtt(l, name) {
            let _ = write!(s, " {name} p50 {} / p99 {};", ms(p.p50), ms(p.p99));
        }
    }
    if let Some(a) = l.added_latency_s {
        let _ = write!(
            s,
            " {} added under load",
            if a >= 0.0 {
                format!("+{}", ms(a))
            } else {
                ms(a)
            }
        );
    }
    if let Some(p) = l.phases.iter().find(|p| p.name == "loaded") {
        if p.lost_forward + p.lost_reverse > 0 {
            let _ = write!(
                s,
                "; loaded probe loss forward {:.1} %, reverse {:.1} %",
                p.loss_forward_ratio * 100.0,
                p.loss_reverse_ratio * 100.0
            );
        }
    }
    s
}

const PHASE_COLOURS: [(&str, &str); 3] = [
    ("idle", "#2b8a3e"),
    ("loaded", "#c92a2a"),
    ("after", "#1971c2"),
];

fn colour(name: &str) -> &'static str {
    PHASE_COLOURS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
        .unwrap_or("#555")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The HTML section of one test's latency.
pub fn section(test: &str, l: &LatencyResult) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<section class=\"latency\" data-test=\"{}\"><h3>Latency under {} load: {}</h3><p>{}</p>",
        esc(test),
        esc(&l.load),
        esc(test),
        esc(&note(l))
    );
    let clock = if l.clock.same_clock {
        "one-way delays exact (client and responder share one host's clock)".to_string()
    } else {
        format!(
            "one-way delays corrected by a clock offset of {} (error at most ±{})",
            ms(l.clock.offset_s),
            ms(l.clock.error_s)
        )
    };
    let _ = write!(
        h,
        "<p class=\"muted\">Probes of {} B every {} to {}; {}.</p>",
        l.payload_bytes,
        ms(l.interval_s),
        esc(&l.target),
        clock
    );
    h.push_str("<table class=\"latency-phases\"><tr><th>phase</th><th>probes</th><th>RTT p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>mean</th><th>fwd p50</th><th>rev p50</th><th>IPDV p50</th><th>loss fwd</th><th>loss rev</th><th>reordered</th><th>dup</th></tr>");
    for p in &l.phases {
        let cell = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "–".into());
        let r = p.rtt_s;
        let _ = write!(
            h,
            "<tr data-phase=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2} %</td><td>{:.2} %</td><td>{}</td><td>{}</td></tr>",
            esc(&p.name),
            esc(&p.name),
            p.sent,
            cell(r.map(|r| r.p50)),
            cell(r.map(|r| r.p90)),
            cell(r.map(|r| r.p99)),
            cell(r.map(|r| r.p99_9)),
            cell(r.map(|r| r.max)),
            cell(r.map(|r| r.mean)),
            cell(p.forward_s.map(|x| x.p50)),
            cell(p.reverse_s.map(|x| x.p50)),
            cell(p.ipdv_s.map(|x| x.p50)),
            p.loss_forward_ratio * 100.0,
            p.loss_reverse_ratio * 100.0,
            p.reordered,
            p.duplicates
        );
    }
    h.push_str("</table><div class=\"latency-charts\">");
    h.push_str(&cdf_svg(l));
    h.push_str(&series_svg(l));
    h.push_str("</div></section>");
    h
}

const W: f64 = 560.0;
const H: f64 = 240.0;
const PAD: f64 = 44.0;

fn axes(
    h: &mut String,
    x_label: &str,
    y_label: &str,
    x_max: f64,
    y_max: f64,
    x_fmt: &dyn Fn(f64) -> String,
    y_fmt: &dyn Fn(f64) -> String,
) {
    let _ = write!(
        h,
        "<line x1=\"{PAD}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#888\"/><line x1=\"{PAD}\" y1=\"10\" x2=\"{PAD}\" y2=\"{y0}\" stroke=\"#888\"/>",
        y0 = H - PAD,
        x1 = W - 10.0
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let x = PAD + f * (W - PAD - 10.0);
        let y = H - PAD - f * (H - PAD - 10.0);
        let _ = write!(
            h,
            "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
            H - PAD + 14.0,
            x_fmt(f * x_max),
            PAD - 4.0,
            y + 3.0,
            y_fmt(f * y_max)
        );
    }
    let _ = write!(
        h,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text><text x=\"12\" y=\"{:.1}\" font-size=\"11\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        (W + PAD) / 2.0,
        H - 8.0,
        esc(x_label),
        H / 2.0,
        H / 2.0,
        esc(y_label)
    );
}

/// Per phase, the RTT CDF.
fn cdf_svg(l: &LatencyResult) -> String {
    let x_max = l
        .phases
        .iter()
        .flat_map(|p| p.rtt_cdf.iter().map(|c| c[0]))
        .fold(0.0, f64::max)
        .max(1e-4)
        * 1.05;
    let mut h = format!("<svg class=\"latency-cdf\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"RTT CDF per phase\">");
    axes(
        &mut h,
        "RTT",
        "fraction of probes",
        x_max,
        1.0,
        &|v| ms(v),
        &|v| format!("{v:.2}"),
    );
    for p in &l.phases {
        if p.rtt_cdf.is_empty() {
            continue;
        }
        let pts: Vec<String> = p
            .rtt_cdf
            .iter()
            .map(|c| {
                format!(
                    "{:.1},{:.1}",
                    PAD + c[0] / x_max * (W - PAD - 10.0),
                    H - PAD - c[1] * (H - PAD - 10.0)
                )
            })
            .collect();
        let _ = write!(
            h,
            "<polyline class=\"cdf\" data-phase=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>",
            esc(&p.name),
            colour(&p.name),
            pts.join(" ")
        );
    }
    legend(&mut h, l);
    h.push_str("</svg>");
    h
}

fn legend(h: &mut String, l: &LatencyResult) {
    for (i, p) in l.phases.iter().enumerate() {
        let x = PAD + 10.0 + i as f64 * 80.0;
        let _ = write!(
            h,
            "<rect x=\"{x:.0}\" y=\"12\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0}\" y=\"21\" font-size=\"11\">{}</text>",
            colour(&p.name),
            x + 14.0,
            esc(&p.name)
        );
    }
}

/// RTT over time with the phases shaded.
fn series_svg(l: &LatencyResult) -> String {
    let t_max = l.series.last().map(|p| p.t_s).unwrap_or(1.0).max(1e-3);
    let y_max = l
        .series
        .iter()
        .filter_map(|p| p.rtt_s)
        .fold(0.0, f64::max)
        .max(1e-4)
        * 1.1;
    let sx = |t: f64| PAD + t / t_max * (W - PAD - 10.0);
    let sy = |v: f64| H - PAD - v / y_max * (H - PAD - 10.0);
    let mut h = format!("<svg class=\"latency-series\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"RTT over time\">");
    for p in &l.phases {
        let _ = write!(
            h,
            "<rect class=\"phase\" data-phase=\"{}\" x=\"{:.1}\" y=\"10\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" opacity=\"0.08\"/>",
            esc(&p.name),
            sx(p.start_s.min(t_max)),
            (sx(p.end_s.min(t_max)) - sx(p.start_s.min(t_max))).max(0.0),
            H - PAD - 10.0,
            colour(&p.name)
        );
    }
    axes(
        &mut h,
        "seconds",
        "RTT",
        t_max,
        y_max,
        &|v| format!("{v:.0}"),
        &|v| ms(v),
    );
    let pts: Vec<String> = l
        .series
        .iter()
        .filter_map(|p| p.rtt_s.map(|r| format!("{:.1},{:.1}", sx(p.t_s), sy(r))))
        .collect();
    let _ = write!(
        h,
        "<polyline class=\"rtt\" fill=\"none\" stroke=\"#333\" stroke-width=\"1\" points=\"{}\"/>",
        pts.join(" ")
    );
    for p in l.series.iter().filter(|p| p.rtt_s.is_none()) {
        let _ = write!(
            h,
            "<line class=\"lost\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e8590c\"/>",
            H - PAD,
            H - PAD - 6.0,
            x = sx(p.t_s)
        );
    }
    legend(&mut h, l);
    h.push_str("</svg>");
    h
}
