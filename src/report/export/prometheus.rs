//! Prometheus text exposition format, following the naming guide: a
//! `linerate_` prefix, base units (bytes, seconds), `_total` on counters,
//! ratios 0–1, and labels `run`, `test`, `direction`. No sample timestamps,
//! so node_exporter's textfile collector accepts the file as it is.

use crate::report::figures::{self, is_tcp};
use crate::report::ramps;
use crate::report::registry::{self, Figure};
use crate::report::run::Run;
use crate::results::{DirectionResult, TestResult, TestStatus};

/// The runs' results in the Prometheus text exposition format.
pub fn prometheus(runs: &[Run]) -> String {
    let mut e = Exposition {
        families: Vec::new(),
    };
    for run in runs {
        run_metrics(&mut e, run);
        // Series must be unique: a name a run gives several tests (a plan's
        // repeats, a sweep) is numbered from its second test on.
        let mut seen: std::collections::HashMap<&str, usize> = Default::default();
        for t in run
            .results
            .tests
            .iter()
            .filter(|t| t.status == TestStatus::Ok)
        {
            let n = seen.entry(t.name.as_str()).or_insert(0);
            *n += 1;
            let name = if *n == 1 {
                t.name.clone()
            } else {
                format!("{} #{n}", t.name)
            };
            test_metrics(&mut e, &run.label, &name, t);
        }
        ramp_metrics(&mut e, run);
        search_metrics(&mut e, run);
    }
    e.render()
}

/// The run itself: its identity, when it finished, its line rate.
fn run_metrics(e: &mut Exposition, run: &Run) {
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
}

/// One test that ran: HTTP and latency figures, each direction, then the
/// test-wide CPU, efficiency and cross-check figures.
fn test_metrics(e: &mut Exposition, run: &str, name: &str, t: &TestResult) {
    http_metrics(e, run, name, t);
    if let Some(l) = &t.latency {
        latency_metrics(e, run, name, l);
    }
    for d in &t.directions {
        let l: &[(&str, &str)] = &[("run", run), ("test", name), ("direction", &d.direction)];
        direction_metrics(e, l, t, d);
    }
    let tl: &[(&str, &str)] = &[("run", run), ("test", name)];
    cpu_metrics(e, tl, t);
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

/// One direction of a test: duration, rates and, for TCP, its counters;
/// UDP's packet figures follow in `packet_metrics`.
fn direction_metrics(e: &mut Exposition, l: &[(&str, &str)], t: &TestResult, d: &DirectionResult) {
    let tcp = is_tcp(t);
    e.add(
        "linerate_test_duration_seconds",
        "gauge",
        "Seconds the sender ran.",
        l,
        d.duration_s,
    );
    // One series of bytes per second, its layers the received figures.
    let layers: &[(&str, &Figure)] = if tcp {
        &[("payload", &registry::RX_L2_BPS)]
    } else {
        &[("l2", &registry::RX_L2_BPS), ("l1", &registry::RX_L1_BPS)]
    };
    for (layer, f) in layers {
        let Some(v) = f.value(t, d) else { continue };
        let v = v / 8.0;
        e.add(
            "linerate_received_bytes_per_second",
            "gauge",
            "Received rate in bytes per second: l2 frames with FCS, l1 adds 20 B per frame, payload is TCP goodput.",
            &[l[0], l[1], l[2], ("layer", layer)],
            v,
        );
    }
    if let Some(p) = registry::LINE_RATE_PCT.value(t, d) {
        e.figure(&registry::LINE_RATE_PCT, l, p);
    }
    if !tcp {
        packet_metrics(e, l, t, d);
        return;
    }
    // A stream without a count counts none.
    let r = &registry::RETRANSMITS;
    e.figure(r, l, r.value(t, d).unwrap_or(0.0));
    e.add(
        "linerate_sent_payload_bytes_total",
        "counter",
        "TCP payload bytes sent.",
        l,
        d.sender_summary.tx_bytes as f64,
    );
}

/// A packet stream's rates, counters, loss and whether the tester kept up.
fn packet_metrics(e: &mut Exposition, l: &[(&str, &str)], t: &TestResult, d: &DirectionResult) {
    for f in [&registry::TX_PPS, &registry::RX_PPS] {
        if let Some(v) = f.value(t, d) {
            e.figure(f, l, v);
        }
    }
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
    if let Some(v) = registry::LOSS_RATIO.value(t, d) {
        e.figure(&registry::LOSS_RATIO, l, v);
    }
    e.add(
        "linerate_tester_limited",
        "gauge",
        "1 when the sender could not offer the rate asked for (the figures measure the tester).",
        l,
        if d.tester_limited { 1.0 } else { 0.0 },
    );
}

/// CPU of each agent, softirq share and the cost per packet.
fn cpu_metrics(e: &mut Exposition, tl: &[(&str, &str)], t: &TestResult) {
    for c in &t.cpu {
        e.add(
            "linerate_agent_cpu_ratio",
            "gauge",
            "CPU time of an endpoint's agent over the test, as a share of all its host's CPUs (1 = every CPU busy).",
            &[tl[0], tl[1], ("role", &c.role)],
            c.process_pct / 100.0,
        );
    }
    if let Some(c) = t.cpu.first() {
        e.add(
            "linerate_softirq_ratio",
            "gauge",
            "Share of all the host's CPUs spent in softirq during the test (veth forwarding runs there).",
            tl,
            c.softirq_pct / 100.0,
        );
    }
    let Some(eff) = &t.efficiency else { return };
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

/// Each ramp direction's saturation point and peak.
fn ramp_metrics(e: &mut Exposition, run: &Run) {
    for ramp in &run.results.ramps {
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
}

/// Each search's results (NDR, PDR, RFC 2544 throughput).
fn search_metrics(e: &mut Exposition, run: &Run) {
    for x in &run.results.searches {
        for (label, pps, _) in ramps::search_results(x) {
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

/// An HTTP test's requests, latency quantiles, CPU per side and kTLS.
fn http_metrics(e: &mut Exposition, run: &str, name: &str, t: &TestResult) {
    let Some(h) = &t.http else { return };
    let l: &[(&str, &str)] = &[("run", run), ("test", name)];
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
                "CPU time of one side as a share of all its host's CPUs (1 = every CPU busy); softirq is system-wide.",
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
    /// A registered figure's own series (none for a figure without one).
    fn figure(&mut self, f: &Figure, labels: &[(&str, &str)], v: f64) {
        if let Some(s) = &f.series {
            self.add(s.name, s.kind, s.help, labels, v / s.per);
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

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

    /// Tests that share a name (repeats, sweeps) still give one series each.
    #[test]
    fn series_are_unique_when_names_repeat() {
        let mut runs = testdata::three_runs();
        let t = runs[0].results.tests[0].clone();
        runs[0].results.tests.push(t);
        let out = prometheus(&runs);
        let samples: Vec<&str> = out
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().0)
            .collect();
        let mut unique = samples.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), samples.len(), "duplicate series");
        assert!(out.contains(" #2\""), "{out}");
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
