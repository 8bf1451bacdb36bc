//! The HTTP downloads section of the HTML report: the T1/T2/T3 matrix,
//! one row per HTTP test (goodput, requests, TTFB and latency percentiles,
//! CPU split and kTLS per side, what bound the run), and two charts per
//! test: per-connection throughput over time and the latency histogram.

use super::charts::{axis, series, Chart, RUN_COLORS};
use super::format::esc;
use crate::proto::http::{CpuSplit, HttpSummary, KtlsStatus, Latency, LatencyBucket};
use crate::results::{RunResults, TestStatus};

fn ms(l: &Option<Latency>, f: fn(&Latency) -> u64) -> String {
    l.as_ref()
        .map(|l| format!("{:.2}", f(l) as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

fn cpu(c: &CpuSplit) -> String {
    format!(
        "{:.0} / {:.0} / {:.0}",
        c.user_pct, c.system_pct, c.softirq_pct
    )
}

/// `200: 7091, 404: 3`.
pub fn status_counts(c: &HttpSummary) -> String {
    if c.status_counts.is_empty() {
        return "-".into();
    }
    c.status_counts
        .iter()
        .map(|s| format!("{}: {}", s.status, s.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `0`, or `12 (connect 10, reset 2)`: failed requests by kind.
pub fn error_kinds(c: &HttpSummary) -> String {
    let k = &c.error_kinds;
    let parts: Vec<String> = [
        ("connect", k.connect),
        ("timeout", k.timeout),
        ("reset", k.reset),
        ("TLS", k.tls),
        ("protocol", k.protocol),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{what} {n}"))
    .collect();
    if parts.is_empty() {
        c.errors.to_string()
    } else {
        format!("{} ({})", c.errors, parts.join(", "))
    }
}

fn ktls(k: &KtlsStatus) -> String {
    match (k.requested, k.in_use) {
        (false, _) => "off".into(),
        (true, true) => "in use".into(),
        (true, false) => format!(
            "not in use: {}",
            k.note.clone().unwrap_or_else(|| "unknown".into())
        ),
    }
}

fn side(s: Option<&HttpSummary>, f: impl Fn(&HttpSummary) -> String) -> String {
    s.map(f).unwrap_or_else(|| "-".into())
}

/// One finished download test's cells of the Downloads table.
fn download_cells(name: &str, h: &crate::results::HttpResult) -> [String; 17] {
    let c = &h.client;
    let sv = h.server.as_ref();
    let retr: u64 = sv
        .unwrap_or(c)
        .connections
        .iter()
        .map(|c| c.retransmits)
        .sum();
    let cache = sv
        .and_then(|s| s.cache.as_ref())
        .map(|c| {
            if c.cold {
                format!(
                    "cold (evicted); {} B read from storage",
                    c.storage_read_bytes
                )
            } else {
                format!("warmed: {} files, {} B", c.files, c.bytes)
            }
        })
        .unwrap_or_else(|| "-".into());
    [
        name.to_string(),
        h.url.clone(),
        h.connections.to_string(),
        format!("{:.3}", h.goodput_bps / 1e9),
        format!("{:.1}", h.requests_per_s),
        ms(&c.ttfb, |l| l.p50_us),
        format!(
            "{} / {} / {} / {} / {}",
            ms(&c.latency, |l| l.p50_us),
            ms(&c.latency, |l| l.p90_us),
            ms(&c.latency, |l| l.p99_us),
            ms(&c.latency, |l| l.p999_us),
            ms(&c.latency, |l| l.max_us)
        ) + if c.rate_per_s.is_some() {
            " (from intended send times)"
        } else {
            ""
        },
        status_counts(c),
        error_kinds(c),
        retr.to_string(),
        cpu(&c.cpu),
        side(sv, |s| cpu(&s.cpu)),
        c.tls_version
            .clone()
            .map(|v| format!("{v} {}", c.cipher_suite.clone().unwrap_or_default()))
            .unwrap_or_else(|| "-".into()),
        ktls(&c.ktls),
        side(sv, |s| ktls(&s.ktls)),
        cache,
        h.bound
            .clone()
            .map(|b| format!("{b}: {}", h.bound_reason.clone().unwrap_or_default()))
            .unwrap_or_else(|| "-".into()),
    ]
}

/// The section's HTML, or `None` when the run has no HTTP test.
pub fn section(r: &RunResults, prefix: &str, charts: &[Chart]) -> Option<String> {
    if !r.tests.iter().any(|t| t.http.is_some()) {
        return None;
    }
    let mut s = String::new();
    let rows = crate::report::matrix::rows(r);
    if !rows.is_empty() {
        s.push_str(
            "<h3>T1 HTTP / T2 HTTPS / T3 HTTPS+kTLS</h3><table class=\"matrix\"><thead><tr>",
        );
        for h in crate::report::matrix::HEADER {
            s.push_str(&format!("<th>{h}</th>"));
        }
        s.push_str("</tr></thead><tbody>");
        for r in rows {
            s.push_str("<tr>");
            for c in r.cells() {
                s.push_str(&format!("<td>{}</td>", esc(&c)));
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table>");
    }
    s.push_str(
        "<h3>Downloads</h3><table class=\"http\"><thead><tr><th>test</th><th>url</th>\
         <th>conns</th><th>Gbit/s</th><th>req/s</th><th>TTFB p50 ms</th><th>latency p50/p90/p99/p99.9/max ms</th><th>status</th><th>errors</th>\
         <th>retr</th><th title=\"% of all the host's CPUs\">client CPU usr/sys/softirq % of host</th><th title=\"% of all the host's CPUs\">server CPU usr/sys/softirq % of host</th>\
         <th>TLS</th><th>kTLS client</th><th>kTLS server</th><th>page cache</th><th>bound</th></tr></thead><tbody>",
    );
    for t in &r.tests {
        let Some(h) = &t.http else { continue };
        if t.status != TestStatus::Ok {
            s.push_str(&format!(
                "<tr><td>{}</td><td colspan=\"16\">{}</td></tr>",
                esc(&t.name),
                esc(t.error.as_deref().unwrap_or("failed"))
            ));
            continue;
        }
        let cells = download_cells(&t.name, h);
        s.push_str("<tr>");
        for c in cells {
            s.push_str(&format!("<td>{}</td>", esc(&c)));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    let figs: String = charts
        .iter()
        .filter(|c| c.id.starts_with(&format!("{prefix}http")))
        .map(|c| super::charts::chart_figure(c, ""))
        .collect();
    s.push_str(&format!("<div class=\"chart-grid\">{figs}</div>"));
    Some(s)
}

/// An HTTP test's chart of download latency, one bar per bucket.
fn latency_chart(id: String, name: &str, b: &[LatencyBucket]) -> Chart {
    let mut s = series("downloads".into(), "count", RUN_COLORS[0], "received");
    s.line = "bars".into();
    Chart {
        id,
        title: format!("{name}: download latency"),
        x: axis("x", "latency up to", "bucket", None),
        y: vec![axis("count", "downloads", "count", Some(0.0))],
        series: vec![s],
        data: vec![
            (0..b.len()).map(|k| Some(k as f64)).collect(),
            b.iter().map(|x| Some(x.count as f64)).collect(),
        ],
        note: "Request to last body byte, per download (HDR histogram, 1-2-5 buckets).".into(),
        steps: false,
        marks: Vec::new(),
        x_labels: b
            .iter()
            .map(|x| {
                if x.le_us >= 1000 {
                    format!("≤{} ms", x.le_us / 1000)
                } else {
                    format!("≤{} µs", x.le_us)
                }
            })
            .collect(),
    }
}

/// Per HTTP test: throughput per connection over time, latency histogram.
pub fn charts(prefix: &str, r: &RunResults) -> Vec<Chart> {
    let mut out = Vec::new();
    for (i, t) in r.tests.iter().enumerate() {
        let (Some(h), Some(d)) = (&t.http, t.directions.first()) else {
            continue;
        };
        if t.status != TestStatus::Ok {
            continue;
        }
        // The client's samples: per connection, bytes received.
        let samples: Vec<_> = d
            .intervals
            .iter()
            .filter_map(|p| p.receiver.as_ref())
            .collect();
        let ids: Vec<u16> = h.client.connections.iter().map(|c| c.id).collect();
        if !samples.is_empty() && !ids.is_empty() {
            let mut xs: Vec<Option<f64>> = samples.iter().map(|s| Some(s.t_start)).collect();
            xs.push(samples.last().map(|s| s.t_end));
            let mut data = vec![xs];
            let mut list = Vec::new();
            for (k, id) in ids.iter().enumerate() {
                let mut col: Vec<Option<f64>> = samples
                    .iter()
                    .map(|s| {
                        let span = (s.t_end - s.t_start).max(1e-6);
                        Some(
                            s.streams
                                .iter()
                                .find(|x| x.id == *id)
                                .map(|x| super::charts::sig(x.bytes as f64 * 8.0 / span))
                                .unwrap_or(0.0),
                        )
                    })
                    .collect();
                col.push(col.last().copied().flatten());
                data.push(col);
                list.push(series(
                    format!("connection {id}"),
                    "rate",
                    RUN_COLORS[k % RUN_COLORS.len()],
                    "received",
                ));
            }
            out.push(Chart {
                id: format!("{prefix}http{i}tput"),
                title: format!("{}: throughput per connection", t.name),
                x: axis("x", "time since the client started", "s", None),
                y: vec![axis("rate", "goodput", "bit/s", Some(0.0))],
                series: list,
                data,
                note: "Body bytes each connection received per interval (client side).".into(),
                steps: true,
                marks: Vec::new(),
                x_labels: Vec::new(),
            });
        }
        let b = &h.client.latency_histogram;
        if !b.is_empty() {
            out.push(latency_chart(format!("{prefix}http{i}lat"), &t.name, b));
        }
    }
    out
}
