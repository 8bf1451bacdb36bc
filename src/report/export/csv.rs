//! CSV (RFC 4180): one row per test and direction (`kind` = `summary`) and
//! one per interval sample pair (`kind` = `interval`) with the same columns,
//! so a spreadsheet filters on `kind` and plots either. Rates are computed as
//! in the HTML report (`figures`); summary rows end with the test's
//! bottleneck verdict. The `dut_*` columns hold the DUT's CPU time per
//! packet where linerate watched it (a lab DUT): over the sending phase on
//! summary rows, per interval on interval rows (ramp samples are these).

use crate::latency::stats::{LatencyPhase, LatencyResult};
use crate::report::figures::{self, is_tcp, IntervalFigures};
use crate::report::registry;
use crate::report::run::Run;
use crate::results::latency_at::{LatencyPoint, LatencyPointDirection};
use crate::results::{DirectionResult, SearchResult, TestResult, TestStatus};
use std::sync::LazyLock;

/// The columns before the figures of the registry.
const HEAD_COLUMNS: &[&str] = &[
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
];

/// The columns after the figures of the registry.
const TAIL_COLUMNS: &[&str] = &[
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
    "http_latency_p90_s",
    "http_latency_p99_9_s",
    "http_latency_uncorrected_p99_s",
    "http_rate_per_s",
    "http_status_counts",
    "http_errors",
    "http_errors_connect",
    "http_errors_timeout",
    "http_errors_reset",
    "http_errors_tls",
    "http_errors_protocol",
    "cpu_gen_pct_of_host",
    "cpu_sink_pct_of_host",
    "criterion",
    "verdict",
    "figure",
    "measured",
    "expected",
    "median",
    "min",
    "max",
    "repetitions",
    "dut_packets",
    "dut_cpu_ns_per_packet",
    "dut_cycles_per_packet",
    "dut_energy_uj_per_packet",
    "load_pct",
    "owd_min_s",
    "owd_p50_s",
    "owd_p90_s",
    "owd_p99_s",
    "owd_p99_9_s",
    "owd_max_s",
    "b2b_frames_avg",
    "b2b_burst_pps",
    "b2b_implied_buffer_time_s",
    "b2b_corrected_buffer_time_s",
    "b2b_drain_time_s",
];

/// Every column: the head, each figure of `registry::ALL` by its key, the
/// tail.
static CSV_COLUMNS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    HEAD_COLUMNS
        .iter()
        .copied()
        .chain(registry::ALL.iter().map(|f| f.key))
        .chain(TAIL_COLUMNS.iter().copied())
        .collect()
});

/// The DUT's step (summary rows: the sending phase; interval rows: that
/// interval) in its columns; blank without one.
fn dut_cells(cells: &mut [String], d: Option<&crate::host::efficiency::DutStep>) {
    let Some(d) = d else { return };
    for (name, v) in [
        ("dut_packets", Some(d.packets as f64)),
        ("dut_cpu_ns_per_packet", d.cpu_ns_per_packet),
        ("dut_cycles_per_packet", d.cycles_per_packet),
        ("dut_energy_uj_per_packet", d.energy_uj_per_packet),
    ] {
        if let Some(c) = cells.get_mut(column(name)) {
            *c = opt(v);
        }
    }
}

/// A back-to-back search's row (`kind` = `back_to_back`): the burst rate
/// as `target_pps`, the repetitions' longest bursts in `min`, `max` and
/// `repetitions`, and the benchmark and buffer times in the `b2b_*` columns.
fn back_to_back_cells(
    run: &Run,
    s: &crate::results::SearchResult,
    b: &crate::search::BackToBackResult,
) -> Vec<String> {
    let mut cells = vec![String::new(); CSV_COLUMNS.len()];
    let frame = match s.frame {
        crate::proto::FrameSpec::Fixed(n) => n.to_string(),
        crate::proto::FrameSpec::Imix => "imix".into(),
    };
    let u = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    for (name, v) in [
        ("run", run.results.name.clone()),
        ("label", run.label.clone()),
        ("dut", run.dut_mode().unwrap_or("").to_string()),
        ("test", s.name.clone()),
        ("status", "ok".into()),
        ("protocol", "udp".into()),
        ("frame", frame),
        ("kind", "back_to_back".into()),
        ("target_pps", b.config.burst_pps.to_string()),
        ("min", u(b.frames_min)),
        ("max", u(b.frames_max)),
        ("repetitions", b.trials.len().to_string()),
        ("b2b_frames_avg", opt(b.frames_avg)),
        ("b2b_burst_pps", b.config.burst_pps.to_string()),
        ("b2b_implied_buffer_time_s", opt(b.implied_buffer_time_s)),
        (
            "b2b_corrected_buffer_time_s",
            opt(b.corrected_buffer_time_s),
        ),
        ("b2b_drain_time_s", opt(b.drain_time_s)),
    ] {
        if let Some(c) = cells.get_mut(column(name)) {
            *c = v;
        }
    }
    cells
}

/// Where a column is (the list above is fixed; a typo fails the tests).
fn column(name: &str) -> usize {
    CSV_COLUMNS
        .iter()
        .position(|c| *c == name)
        .unwrap_or(CSV_COLUMNS.len())
}

/// The agents' CPU in % of all their host's CPUs (summary rows).
fn cpu_cells(t: &crate::results::TestResult) -> Vec<String> {
    ["gen", "sink"]
        .iter()
        .map(|role| {
            t.cpu
                .iter()
                .find(|c| c.role == *role)
                .map(|c| c.process_pct.to_string())
                .unwrap_or_default()
        })
        .collect()
}

/// HTTP columns of a summary row (empty for other tests).
fn http_cells(t: &crate::results::TestResult) -> Vec<String> {
    let Some(h) = &t.http else {
        return vec![String::new(); 19];
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
        s(c.latency.as_ref().map(|l| l.p90_us)),
        s(c.latency.as_ref().map(|l| l.p999_us)),
        s(c.latency_uncorrected.as_ref().map(|l| l.p99_us)),
        c.rate_per_s.map(|r| r.to_string()).unwrap_or_default(),
        c.status_counts
            .iter()
            .map(|s| format!("{}:{}", s.status, s.count))
            .collect::<Vec<_>>()
            .join(" "),
        c.errors.to_string(),
        c.error_kinds.connect.to_string(),
        c.error_kinds.timeout.to_string(),
        c.error_kinds.reset.to_string(),
        c.error_kinds.tls.to_string(),
        c.error_kinds.protocol.to_string(),
    ]
}

/// One CSV field, quoted when it holds a comma, quote or line break. Text
/// that a spreadsheet would take for a formula (beginning with `=`, `+`,
/// `-`, `@`, tab or CR, and not a number) gets a leading `'`, as OWASP
/// advises against CSV injection: names come from plans and peers.
pub fn csv_field(s: &str) -> String {
    let formula =
        s.len() > 1 && s.starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err();
    let s = if formula {
        format!("'{s}")
    } else {
        s.to_string()
    };
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
                row(summary_cells(head(&d.direction, "summary"), t, d));
                for f in figures::intervals(t, d) {
                    row(interval_cells(
                        head(&d.direction, "interval"),
                        d,
                        &f,
                        line_rate,
                    ));
                }
            }
            if let Some(l) = &t.latency {
                for p in &l.phases {
                    row(latency_cells(head("", "latency"), l, p));
                }
            }
        }
        for s in &r.searches {
            if let Some(b) = &s.back_to_back {
                row(back_to_back_cells(run, s, b));
            }
            let Some(l) = &s.latency_at else { continue };
            for p in &l.points {
                for d in &p.directions {
                    row(latency_at_cells(run, s, p, d));
                }
            }
        }
        for (test, kind, verdict) in crate::report::verdicts::csv_rows(r) {
            let mut cells = vec![
                r.name.clone(),
                run.label.clone(),
                run.dut_mode().unwrap_or("").to_string(),
                test,
            ];
            cells.resize(column("kind"), String::new());
            cells.push(kind.to_string());
            cells.resize(column("criterion"), String::new());
            cells.extend(verdict);
            row(cells);
        }
    }
    out
}

/// A summary row of direction `d` of `t`, after its `head` cells.
fn summary_cells(head: Vec<String>, t: &TestResult, d: &DirectionResult) -> Vec<String> {
    let tcp = is_tcp(t);
    let mut cells = head;
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
    ]);
    cells.extend(registry::ALL.iter().map(|f| opt(f.value(t, d))));
    cells.extend([
        d.sender_summary.tx_bytes.to_string(),
        d.receiver_summary.rx_bytes.to_string(),
        t.bottleneck
            .as_ref()
            .map(|b| b.verdict.clone())
            .unwrap_or_default(),
    ]);
    // The latency probe's columns stay empty on a summary row.
    cells.resize(column("http_requests"), String::new());
    cells.extend(http_cells(t));
    cells.extend(cpu_cells(t));
    cells.resize(CSV_COLUMNS.len(), String::new());
    let dut = t.dut_efficiency.as_ref().and_then(|e| e.test.as_ref());
    dut_cells(&mut cells, dut);
    cells
}

/// An interval row (sample pair `f` of direction `d`), after its `head`
/// cells.
fn interval_cells(
    head: Vec<String>,
    d: &DirectionResult,
    f: &IntervalFigures,
    line_rate: f64,
) -> Vec<String> {
    let mut cells = head;
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
    ]);
    cells.extend(
        registry::ALL
            .iter()
            .map(|x| opt((x.interval)(f, line_rate))),
    );
    cells.extend([
        f.tx_bytes.to_string(),
        f.rx_bytes.to_string(),
        String::new(),
    ]);
    cells.resize(CSV_COLUMNS.len(), String::new());
    let dut = d.intervals.get(f.index).and_then(|p| p.dut.as_ref());
    dut_cells(&mut cells, dut);
    cells
}

/// A latency row: phase `p` of the test's latency probe `l`, after its
/// `head` cells.
fn latency_cells(head: Vec<String>, l: &LatencyResult, p: &LatencyPhase) -> Vec<String> {
    let mut cells = head;
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
    cells.resize(column("latency_phase"), String::new());
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
    cells
}

/// A `latency_at` row: one-way latency of direction `d` at load point `p`
/// of search `s`.
fn latency_at_cells(
    run: &Run,
    s: &SearchResult,
    p: &LatencyPoint,
    d: &LatencyPointDirection,
) -> Vec<String> {
    let r = &run.results;
    let mut cells = vec![
        r.name.clone(),
        run.label.clone(),
        run.dut_mode().unwrap_or("").to_string(),
        s.name.clone(),
    ];
    cells.resize(column("direction"), String::new());
    cells.extend([d.direction.clone(), "latency_at".into()]);
    cells.resize(column("target_pps"), String::new());
    cells.extend([
        p.rate_pps.to_string(),
        d.tx_packets.to_string(),
        d.rx_packets.to_string(),
        d.dut_lost.to_string(),
    ]);
    cells.resize(column(registry::LOSS_RATIO.key), String::new());
    cells.push(d.loss_ratio.to_string());
    cells.resize(column("load_pct"), String::new());
    cells.push(p.load_pct.to_string());
    if let Some(o) = &d.latency {
        cells.extend(
            [o.min_ns, o.p50_ns, o.p90_ns, o.p99_ns, o.p99_9_ns, o.max_ns]
                .map(|ns| (ns as f64 / 1e9).to_string()),
        );
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    #[test]
    fn formulas_in_names_are_neutralised() {
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("+1+cmd"), "'+1+cmd");
        assert_eq!(csv_field("\tx"), "'\tx");
        assert_eq!(csv_field("-2.5"), "-2.5");
        assert_eq!(csv_field("lab-64b"), "lab-64b");
    }

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
}
