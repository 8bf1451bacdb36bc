//! Exports for other tools.
//!
//! CSV (RFC 4180): one row per test and direction (`kind` = `summary`) and
//! one per interval sample pair (`kind` = `interval`) with the same columns,
//! so a spreadsheet filters on `kind` and plots either. Rates are computed as
//! in the HTML report (`figures`); summary rows end with the test's
//! bottleneck verdict.
//!
//! Prometheus text exposition format, following the naming guide: a
//! `linerate_` prefix, base units (bytes, seconds), `_total` on counters,
//! ratios 0–1, and labels `run`, `test`, `direction`. No sample timestamps,
//! so node_exporter's textfile collector accepts the file as it is.

use super::figures::{self, is_tcp};
use super::Run;
use crate::results::TestStatus;

const CSV_COLUMNS: &[&str] = &[
    "run",
    "label",
    "dut",
    "test",
    "status",
    "protocol",
    "ip_version",
    "frame",
    "flows",
    "direction",
    "kind",
    "interval",
    "t_start_s",
    "t_end_s",
    "target_pps",
    "tx_packets",
    "rx_packets",
    "lost",
    "reordered",
    "duplicates",
    "tx_errors",
    "tester_drops",
    "tx_pps",
    "rx_pps",
    "tx_l2_bps",
    "rx_l2_bps",
    "rx_l1_bps",
    "line_rate_pct",
    "loss_ratio",
    "retransmits",
    "tx_bytes",
    "rx_bytes",
    "bottleneck",
    "latency_phase",
    "rtt_p50_s",
    "rtt_p90_s",
    "rtt_p99_s",
    "rtt_p99_9_s",
    "rtt_max_s",
    "rtt_mean_s",
    "owd_forward_p50_s",
    "owd_reverse_p50_s",
    "probe_lost_forward",
    "probe_lost_reverse",
    "added_latency_s",
    "http_requests",
    "http_requests_per_s",
    "http_ttfb_p50_s",
    "http_latency_p50_s",
    "http_latency_p99_s",
    "http_ktls_client",
    "http_ktls_server",
    "http_bound",
];

/// HTTP columns of a summary row (empty for other tests).
fn http_cells(t: &crate::results::TestResult) -> Vec<String> {
    let Some(h) = &t.http else {
        return vec![String::new(); 8];
    };
    let s = |us: Option<u64>| us.map(|v| (v as f64 / 1e6).to_string()).unwrap_or_default();
    let k = |k: Option<&crate::proto::http::KtlsStatus>| {
        k.map(|k| match (k.requested, k.in_use) {
            (false, _) => "off",
            (true, true) => "in_use",
            (true, false) => "unavailable",
        })
        .unwrap_or("")
        .to_string()
    };
    let c = &h.client;
    vec![
        c.requests.to_string(),
        h.requests_per_s.to_string(),
        s(c.ttfb.as_ref().map(|l| l.p50_us)),
        s(c.latency.as_ref().map(|l| l.p50_us)),
        s(c.latency.as_ref().map(|l| l.p99_us)),
        k(Some(&c.ktls)),
        k(h.server.as_ref().map(|s| &s.ktls)),
        h.bound.clone().unwrap_or_default(),
    ]
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map(|v| v.to_string())
        .unwrap_or_default()
}

/// Every run's summaries and interval samples as one CSV document.
pub fn csv(runs: &[Run]) -> String {
    let mut out = CSV_COLUMNS.join(",");
    out.push_str("\r\n");
    let mut row = |mut cells: Vec<String>| {
        // Rows without latency leave its columns empty.
        cells.resize(CSV_COLUMNS.len(), String::new());
        let line: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    };
    for run in runs {
        let r = &run.results;
        let line_rate = r.line_rate_bps;
        for t in &r.tests {
            let tcp = is_tcp(t);
            let head = |direction: &str, kind: &str| {
                vec![
                    r.name.clone(),
                    run.label.clone(),
                    run.dut_mode().unwrap_or("").to_string(),
                    t.name.clone(),
                    format!("{:?}", t.status).to_lowercase(),
                    format!("{:?}", t.params.protocol).to_lowercase(),
                    t.params.ip_version.to_string(),
                    figures::frame_label(t).replace(" B", "").replace('-', ""),
                    figures::flows_label(t),
                    direction.to_string(),
                    kind.to_string(),
                ]
            };
            if t.status != TestStatus::Ok && t.directions.is_empty() {
                let mut cells = head("", "summary");
                cells.resize(CSV_COLUMNS.len(), String::new());
                row(cells);
                continue;
            }
            for d in &t.directions {
                let mut cells = head(&d.direction, "summary");
                let tx_l2 = if tcp {
                    Some(figures::offered(t, d))
                } else {
                    figures::avg_frame(t).map(|f| crate::model::units::l2_bps(d.tx_pps, f))
                };
                cells.extend([
                    String::new(),
                    "0".into(),
                    d.duration_s.to_string(),
                    opt(figures::target_pps(t, d).filter(|_| !tcp)),
                    d.tx_packets.to_string(),
                    d.rx_packets.to_string(),
                    d.lost.to_string(),
                    d.reordered.to_string(),
                    d.duplicates.to_string(),
                    d.tx_errors.to_string(),
                    d.tester_drops.to_string(),
                    opt((!tcp).then_some(d.tx_pps)),
                    opt((!tcp).then_some(d.rx_pps)),
                    opt(tx_l2),
                    d.rx_l2_bps.to_string(),
                    opt(d.rx_l1_bps),
                    d.line_rate_pct.to_string(),
                    opt((!tcp).then_some(d.loss_ratio)),
                    d.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                    d.sender_summary.tx_bytes.to_string(),
                    d.receiver_summary.rx_bytes.to_string(),
                    t.bottleneck
                        .as_ref()
                        .map(|b| b.verdict.clone())
                        .unwrap_or_default(),
                ]);
                cells.extend(http_cells(t));
                row(cells);
                for f in figures::intervals(t, d) {
                    let mut cells = head(&d.direction, "interval");
                    let pct = f
                        .rx_l1_bps
                        .or(f.rx_l2_bps)
                        .map(|b| b / line_rate * 100.0)
                        .filter(|_| line_rate > 0.0);
                    cells.extend([
                        f.index.to_string(),
                        f.t_start.to_string(),
                        f.t_end.to_string(),
                        opt(f.target_pps),
                        f.tx_packets.to_string(),
                        f.rx_packets.to_string(),
                        f.lost.to_string(),
                        f.reordered.to_string(),
                        f.duplicates.to_string(),
                        f.tx_errors.to_string(),
                        String::new(),
                        opt(f.tx_pps),
                        opt(f.rx_pps),
                        opt(f.tx_l2_bps),
                        opt(f.rx_l2_bps),
                        opt(f.rx_l1_bps),
                        opt(pct),
                        opt(f.loss_ratio),
                        f.retransmits.map(|x| x.to_string()).unwrap_or_default(),
                        f.tx_bytes.to_string(),
                        f.rx_bytes.to_string(),
                        String::new(),
                    ]);
                    cells.resize(CSV_COLUMNS.len(), String::new());
                    row(cells);
                }
            }
            if let Some(l) = &t.latency {
                for p in &l.phases {
                    let mut cells = head("", "latency");
                    cells.extend([
                        String::new(),
                        p.start_s.to_string(),
                        p.end_s.to_string(),
                        String::new(),
                        p.sent.to_string(),
                        p.answered.to_string(),
                        (p.lost_forward + p.lost_reverse).to_string(),
                        p.reordered.to_string(),
                        p.duplicates.to_string(),
                    ]);
                    cells.resize(CSV_COLUMNS.len() - 12, String::new());
                    let r = p.rtt_s;
                    cells.extend([
                        p.name.clone(),
                        opt(r.map(|r| r.p50)),
                        opt(r.map(|r| r.p90)),
                        opt(r.map(|r| r.p99)),
                        opt(r.map(|r| r.p99_9)),
                        opt(r.map(|r| r.max)),
                        opt(r.map(|r| r.mean)),
                        opt(p.forward_s.map(|x| x.p50)),
                        opt(p.reverse_s.map(|x| x.p50)),
                        p.lost_forward.to_string(),
                        p.lost_reverse.to_string(),
                        opt(l.added_latency_s.filter(|_| p.name == "loaded")),
                    ]);
                    row(cells);
                }
            }
        }
    }
    out
}

/// An HTTP test's requests, latency quantiles, CPU per side and kTLS.
fn http_metrics(e: &mut Exposition, run: &str, t: &crate::results::TestResult) {
    let Some(h) = &t.http else { return };
    let l: &[(&str, &str)] = &[("run", run), ("test", &t.name)];
    e.add(
        "linerate_http_requests_total",
        "counter",
        "HTTP downloads the client completed.",
        l,
        h.client.requests as f64,
    );
    e.add(
        "linerate_http_goodput_bytes_per_second",
        "gauge",
        "HTTP body bytes per second the client received.",
        l,
        h.goodput_bps / 8.0,
    );
    for (name, lat) in [
        ("linerate_http_download_seconds", &h.client.latency),
        ("linerate_http_ttfb_seconds", &h.client.ttfb),
    ] {
        let Some(lat) = lat else { continue };
        for (q, v) in [
            ("0.5", lat.p50_us),
            ("0.9", lat.p90_us),
            ("0.99", lat.p99_us),
            ("1", lat.max_us),
        ] {
            e.add(
                name,
                "gauge",
                "Per-download latency (request to last body byte) or time to first byte, seconds, by quantile.",
                &[l[0], l[1], ("quantile", q)],
                v as f64 / 1e6,
            );
        }
    }
    let sides = [("client", Some(&h.client)), ("server", h.server.as_ref())];
    for (side, s) in sides {
        let Some(s) = s else { continue };
        for (mode, v) in [
            ("user", s.cpu.user_pct),
            ("system", s.cpu.system_pct),
            ("softirq", s.cpu.softirq_pct),
        ] {
            e.add(
                "linerate_http_cpu_ratio",
                "gauge",
                "CPU time of one side in cores (1 = one core busy); softirq is system-wide.",
                &[l[0], l[1], ("side", side), ("mode", mode)],
                v / 100.0,
            );
        }
        e.add(
            "linerate_http_ktls_in_use",
            "gauge",
            "1 when the kernel did this side's TLS records (kTLS).",
            &[l[0], l[1], ("side", side)],
            if s.ktls.in_use { 1.0 } else { 0.0 },
        );
    }
}

/// Metric families in the order first used; samples of a family together.
struct Exposition {
    families: Vec<(String, String, &'static str, Vec<String>)>,
}

fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

impl Exposition {
    fn add(&mut self, name: &str, kind: &'static str, help: &str, labels: &[(&str, &str)], v: f64) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
            .collect();
        let sample = format!("{name}{{{}}} {}", labels.join(","), number(v));
        match self.families.iter_mut().find(|f| f.0 == name) {
            Some(f) => f.3.push(sample),
            None => self
                .families
                .push((name.to_string(), help.to_string(), kind, vec![sample])),
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (name, help, kind, samples) in &self.families {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            for s in samples {
                out.push_str(s);
                out.push('\n');
            }
        }
        out
    }
}

/// Seconds since the Unix epoch of an RFC 3339 UTC time as results.json
/// writes it (`2026-11-21T10:45:24Z`).
fn unix_seconds(s: &str) -> Option<f64> {
    let (date, time) = s.trim_end_matches('Z').split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|x| x.parse::<f64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    // Days from civil (Howard Hinnant), the inverse of results::rfc3339.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + hh * 3600.0 + mm * 60.0 + ss)
}

/// A test's latency: RTT quantiles per phase, added latency, probe loss.
fn latency_metrics(
    e: &mut Exposition,
    run: &str,
    test: &str,
    l: &crate::latency::stats::LatencyResult,
) {
    for p in &l.phases {
        if let Some(r) = p.rtt_s {
            for (q, v) in [
                ("0.5", r.p50),
                ("0.9", r.p90),
                ("0.99", r.p99),
                ("0.999", r.p99_9),
                ("1", r.max),
            ] {
                e.add(
                    "linerate_latency_rtt_seconds",
                    "gauge",
                    "Probe round-trip time per phase (idle, loaded, after) and quantile.",
                    &[
                        ("run", run),
                        ("test", test),
                        ("phase", &p.name),
                        ("quantile", q),
                    ],
                    v,
                );
            }
        }
        for (dir, v) in [
            ("forward", p.loss_forward_ratio),
            ("reverse", p.loss_reverse_ratio),
        ] {
            e.add(
                "linerate_latency_probe_loss_ratio",
                "gauge",
                "Probes lost per phase and direction, 0-1.",
                &[
                    ("run", run),
                    ("test", test),
                    ("phase", &p.name),
                    ("direction", dir),
                ],
                v,
            );
        }
    }
    if let Some(a) = l.added_latency_s {
        e.add(
            "linerate_latency_added_seconds",
            "gauge",
            "Loaded p50 RTT minus idle p50 RTT.",
            &[("run", run), ("test", test)],
            a,
        );
    }
}

/// The runs' results in the Prometheus text exposition format.
pub fn prometheus(runs: &[Run]) -> String {
    let mut e = Exposition {
        families: Vec::new(),
    };
    for run in runs {
        let r = &run.results;
        let status = format!("{:?}", r.status).to_lowercase();
        let dut = run.dut_mode().unwrap_or("");
        let rl: &[(&str, &str)] = &[("run", &run.label)];
        e.add(
            "linerate_run_info",
            "gauge",
            "A linerate run; the value is always 1.",
            &[
                ("run", &run.label),
                ("name", &r.name),
                ("version", &r.linerate_version),
                ("status", &status),
                ("dut", dut),
                ("host", &r.host.hostname),
                ("kernel", &r.host.kernel),
            ],
            1.0,
        );
        if let Some(ts) = r.finished_at.as_deref().and_then(unix_seconds) {
            e.add(
                "linerate_run_finished_timestamp_seconds",
                "gauge",
                "When the run finished, seconds since the Unix epoch.",
                rl,
                ts,
            );
        }
        e.add(
            "linerate_line_rate_bytes_per_second",
            "gauge",
            "L1 line rate that line-rate ratios refer to, bytes per second.",
            rl,
            r.line_rate_bps / 8.0,
        );
        for t in r.tests.iter().filter(|t| t.status == TestStatus::Ok) {
            http_metrics(&mut e, &run.label, t);
            let tcp = is_tcp(t);
            if let Some(l) = &t.latency {
                latency_metrics(&mut e, &run.label, &t.name, l);
            }
            for d in &t.directions {
                let l: &[(&str, &str)] = &[
                    ("run", &run.label),
                    ("test", &t.name),
                    ("direction", &d.direction),
                ];
                e.add(
                    "linerate_test_duration_seconds",
                    "gauge",
                    "Seconds the sender ran.",
                    l,
                    d.duration_s,
                );
                let layers: Vec<(&str, f64)> = if tcp {
                    vec![("payload", d.rx_l2_bps / 8.0)]
                } else {
                    let mut v = vec![("l2", d.rx_l2_bps / 8.0)];
                    if let Some(l1) = d.rx_l1_bps {
                        v.push(("l1", l1 / 8.0));
                    }
                    v
                };
                for (layer, v) in layers {
                    e.add(
                        "linerate_received_bytes_per_second",
                        "gauge",
                        "Received rate in bytes per second: l2 frames with FCS, l1 adds 20 B per frame, payload is TCP goodput.",
                        &[l[0], l[1], l[2], ("layer", layer)],
                        v,
                    );
                }
                e.add(
                    "linerate_line_rate_ratio",
                    "gauge",
                    "Received L1 rate (TCP: goodput) as a share of the line rate, 0-1.",
                    l,
                    d.line_rate_pct / 100.0,
                );
                if tcp {
                    e.add(
                        "linerate_tcp_retransmitted_segments_total",
                        "counter",
                        "TCP segments the sender retransmitted.",
                        l,
                        d.retransmits.unwrap_or(0) as f64,
                    );
                    e.add(
                        "linerate_sent_payload_bytes_total",
                        "counter",
                        "TCP payload bytes sent.",
                        l,
                        d.sender_summary.tx_bytes as f64,
                    );
                    continue;
                }
                e.add(
                    "linerate_offered_packets_per_second",
                    "gauge",
                    "Packets per second the sender sent.",
                    l,
                    d.tx_pps,
                );
                e.add(
                    "linerate_received_packets_per_second",
                    "gauge",
                    "Packets per second that arrived.",
                    l,
                    d.rx_pps,
                );
                if let Some(p) = figures::target_pps(t, d) {
                    e.add(
                        "linerate_target_packets_per_second",
                        "gauge",
                        "Packets per second the test asked for.",
                        l,
                        p,
                    );
                }
                let counters: [(&str, &str, u64); 8] = [
                    ("linerate_sent_packets_total", "Packets sent.", d.tx_packets),
                    (
                        "linerate_received_packets_total",
                        "Packets received.",
                        d.rx_packets,
                    ),
                    (
                        "linerate_lost_packets_total",
                        "Packets missing by sequence number, tester drops included.",
                        d.lost,
                    ),
                    (
                        "linerate_dut_lost_packets_total",
                        "Lost packets less the tester's own drops: what the DUT dropped.",
                        d.dut_lost,
                    ),
                    (
                        "linerate_tester_dropped_packets_total",
                        "Packets the tester dropped itself (socket overruns, its own interfaces).",
                        d.tester_drops,
                    ),
                    (
                        "linerate_send_errors_total",
                        "Failed send calls (ENOBUFS, EAGAIN).",
                        d.tx_errors,
                    ),
                    (
                        "linerate_reordered_packets_total",
                        "Packets that arrived after a later one (not loss).",
                        d.reordered,
                    ),
                    (
                        "linerate_duplicate_packets_total",
                        "Packets that arrived twice (not loss).",
                        d.duplicates,
                    ),
                ];
                for (name, help, v) in counters {
                    e.add(name, "counter", help, l, v as f64);
                }
                e.add(
                    "linerate_loss_ratio",
                    "gauge",
                    "Lost packets as a share of packets sent, 0-1.",
                    l,
                    d.loss_ratio,
                );
                e.add(
                    "linerate_tester_limited",
                    "gauge",
                    "1 when the sender could not offer the rate asked for (the figures measure the tester).",
                    l,
                    if d.tester_limited { 1.0 } else { 0.0 },
                );
            }
            let tl: &[(&str, &str)] = &[("run", &run.label), ("test", &t.name)];
            for c in &t.cpu {
                e.add(
                    "linerate_agent_cpu_ratio",
                    "gauge",
                    "CPU time of an endpoint's agent over the test, as a share of one core.",
                    &[tl[0], tl[1], ("role", &c.role)],
                    c.process_pct / 100.0,
                );
            }
            if let Some(c) = t.cpu.first() {
                e.add(
                    "linerate_softirq_ratio",
                    "gauge",
                    "Share of all cores spent in softirq during the test (veth forwarding runs there).",
                    tl,
                    c.softirq_pct / 100.0,
                );
            }
            if let Some(eff) = &t.efficiency {
                if let Some(c) = eff.cycles_per_packet {
                    e.add(
                        "linerate_cycles_per_packet",
                        "gauge",
                        "CPU cycles of all cores per received packet; source is perf (counters) or estimate.",
                        &[tl[0], tl[1], ("source", &eff.cycles_source)],
                        c,
                    );
                }
                if let Some(uj) = eff.energy_uj_per_packet {
                    e.add(
                        "linerate_energy_joules_per_packet",
                        "gauge",
                        "Package energy per received packet (RAPL), joules.",
                        tl,
                        uj / 1e6,
                    );
                }
            }
            for c in &t.cross_checks {
                let cl = [tl[0], tl[1], ("check", c.what.as_str())];
                e.add(
                    "linerate_cross_check_difference_ratio",
                    "gauge",
                    "Application count against kernel interface count: |kernel - application| / application.",
                    &cl,
                    c.difference_ratio,
                );
                e.add(
                    "linerate_cross_check_flagged",
                    "gauge",
                    "1 when application and kernel counts differ by over 1 %.",
                    &cl,
                    if c.flagged { 1.0 } else { 0.0 },
                );
            }
        }
        for ramp in &r.ramps {
            for d in &ramp.directions {
                let l: &[(&str, &str)] = &[
                    ("run", &run.label),
                    ("ramp", &ramp.name),
                    ("direction", &d.direction),
                ];
                if let Some(sat) = &d.summary.saturation {
                    e.add(
                        "linerate_ramp_saturation_offered_packets_per_second",
                        "gauge",
                        "Offered rate where the ramp saturated (start of the final lossy run).",
                        l,
                        sat.offered_pps,
                    );
                }
                e.add(
                    "linerate_ramp_peak_received_packets_per_second",
                    "gauge",
                    "Highest received rate of the ramp after the warmup.",
                    l,
                    d.summary.peak_received_pps,
                );
            }
        }
        for x in &r.searches {
            for (label, pps, _) in super::ramps::search_results(x) {
                // `NDR (loss ≤ 0.0 %)` → `ndr`, `RFC 2544 throughput` → `rfc2544_throughput`.
                let result = match label.split(' ').next().unwrap_or("").to_lowercase() {
                    r if r == "rfc" => "rfc2544_throughput".to_string(),
                    r => r,
                };
                e.add(
                    "linerate_search_rate_packets_per_second",
                    "gauge",
                    "Result of a throughput search (NDR, PDR, RFC 2544 throughput).",
                    &[
                        ("run", &run.label),
                        ("search", &x.name),
                        ("result", &result),
                    ],
                    pps,
                );
            }
        }
    }
    e.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    #[test]
    fn csv_rows_per_direction_and_interval() {
        let runs = testdata::three_runs();
        let out = csv(&runs[..1]);
        let lines: Vec<&str> = out.lines().collect();
        // Fields, counting commas outside quotes (verdicts hold commas).
        let fields = |l: &str| {
            let mut quoted = false;
            1 + l
                .chars()
                .filter(|&c| {
                    if c == '"' {
                        quoted = !quoted;
                    }
                    c == ',' && !quoted
                })
                .count()
        };
        assert_eq!(fields(lines[0]), CSV_COLUMNS.len());
        let r = &runs[0].results;
        let dirs: usize = r.tests.iter().map(|t| t.directions.len()).sum();
        let intervals: usize = r
            .tests
            .iter()
            .flat_map(|t| &t.directions)
            .map(|d| d.intervals.len())
            .sum();
        assert_eq!(lines.len(), 1 + dirs + intervals);
        for l in &lines[1..] {
            assert_eq!(fields(l), CSV_COLUMNS.len(), "{l}");
        }
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    #[test]
    fn prometheus_names_and_grouping() {
        let out = prometheus(&testdata::three_runs());
        let mut seen_types = Vec::new();
        let mut current = String::new();
        for line in out.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap().to_string();
                assert!(!seen_types.contains(&name), "family {name} split");
                assert!(name.starts_with("linerate_"));
                if rest.ends_with("counter") {
                    assert!(name.ends_with("_total"), "{name}");
                }
                seen_types.push(name.clone());
                current = name;
            } else if !line.starts_with('#') {
                assert!(
                    line.starts_with(&format!("{current}{{")),
                    "{line} outside {current}"
                );
                let v = line.rsplit(' ').next().unwrap();
                assert!(v.parse::<f64>().is_ok(), "{line}");
            }
        }
        assert!(out.contains(
            "linerate_loss_ratio{run=\"nat\",test=\"udp imix var2\",direction=\"gen_to_sink\"}"
        ));
        assert!(!out.contains("bits"), "base unit is bytes");
    }

    #[test]
    fn rfc3339_round_trip() {
        for t in [0u64, 951_782_400, 1_795_000_000] {
            let s = crate::model::clock::rfc3339(t);
            assert_eq!(unix_seconds(&s), Some(t as f64), "{s}");
        }
        assert_eq!(unix_seconds("garbage"), None);
    }
}
