//! Prometheus metrics of the monitor: a `linerate_rtt_seconds` histogram and
//! probe/loss counters per target, in the text exposition format (0.0.4),
//! served by a tiny HTTP server on `/metrics` or written atomically as a
//! node_exporter textfile. The state is a fixed set of counters per target:
//! its size does not grow with the run's length.

use hdrhistogram::Histogram;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Histogram bucket bounds, seconds.
pub const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Debug, Clone, Default)]
pub struct TargetMetrics {
    pub target: String,
    pub kind: String,
    /// Cumulative count per bucket of [`BUCKETS`] (non-cumulative here,
    /// summed when rendered).
    pub buckets: [u64; BUCKETS.len()],
    pub count: u64,
    pub sum_s: f64,
    pub sent: u64,
    pub lost: u64,
    pub lost_forward: u64,
    pub lost_reverse: u64,
    /// Windows that ran their whole length.
    pub windows: u64,
    /// Windows cut short by the run's end (at most one per target).
    pub partial_windows: u64,
    /// Every RTT of the run, ns, for the summary's percentiles: an HDR
    /// histogram, whose size is bounded by its range, not by the run's
    /// length.
    pub rtt_ns: Option<Histogram<u64>>,
}

impl TargetMetrics {
    pub fn observe(&mut self, rtt_s: f64) {
        if let Some(i) = BUCKETS.iter().position(|&b| rtt_s <= b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum_s += rtt_s;
        let h = self.rtt_ns.get_or_insert_with(super::stats::histogram);
        let _ = h.record(((rtt_s * 1e9) as u64).max(1));
    }
}

/// RTT over a whole monitor run, ms.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RttMs {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// One target over a whole monitor run (from the counters above).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetSummary {
    pub target: String,
    pub kind: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub lost_forward: u64,
    pub lost_reverse: u64,
    /// `lost / sent`, in %; `None` before the first probe.
    pub loss_pct: Option<f64>,
    pub mean_rtt_ms: Option<f64>,
    /// RTT percentiles of every answered probe; `None` without one.
    pub rtt_ms: Option<RttMs>,
    /// Windows that ran their whole length (one journal line each).
    pub windows: u64,
    /// Windows the run's end cut short (also in the journal, marked
    /// `"partial": true`): a run shorter than its window is one of these.
    pub partial_windows: u64,
}

impl TargetMetrics {
    pub fn summary(&self) -> TargetSummary {
        TargetSummary {
            target: self.target.clone(),
            kind: self.kind.clone(),
            sent: self.sent,
            received: self.count,
            lost: self.lost,
            lost_forward: self.lost_forward,
            lost_reverse: self.lost_reverse,
            loss_pct: (self.sent > 0).then(|| self.lost as f64 * 100.0 / self.sent as f64),
            mean_rtt_ms: (self.count > 0).then(|| self.sum_s * 1e3 / self.count as f64),
            rtt_ms: self
                .rtt_ns
                .as_ref()
                .and_then(super::stats::Percentiles::of)
                .map(|p| RttMs {
                    min: p.min * 1e3,
                    mean: p.mean * 1e3,
                    p50: p.p50 * 1e3,
                    p90: p.p90 * 1e3,
                    p99: p.p99 * 1e3,
                    max: p.max * 1e3,
                }),
            windows: self.windows,
            partial_windows: self.partial_windows,
        }
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub targets: Vec<TargetMetrics>,
}

pub type Shared = Arc<Mutex<Metrics>>;

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "NaN".into()
    }
}

impl Metrics {
    pub fn target(&mut self, target: &str, kind: &str) -> &mut TargetMetrics {
        let i = match self.targets.iter().position(|t| t.target == target) {
            Some(i) => i,
            None => {
                self.targets.push(TargetMetrics {
                    target: target.into(),
                    kind: kind.into(),
                    ..Default::default()
                });
                self.targets.len() - 1
            }
        };
        &mut self.targets[i]
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP linerate_rtt_seconds Round-trip time of linerate monitor probes.\n# TYPE linerate_rtt_seconds histogram"
        );
        for t in &self.targets {
            let l = format!(
                "target=\"{}\",kind=\"{}\"",
                escape(&t.target),
                escape(&t.kind)
            );
            let mut cum = 0;
            for (b, n) in BUCKETS.iter().zip(t.buckets) {
                cum += n;
                let _ = writeln!(
                    o,
                    "linerate_rtt_seconds_bucket{{{l},le=\"{}\"}} {cum}",
                    num(*b)
                );
            }
            let _ = writeln!(
                o,
                "linerate_rtt_seconds_bucket{{{l},le=\"+Inf\"}} {}",
                t.count
            );
            let _ = writeln!(o, "linerate_rtt_seconds_sum{{{l}}} {}", num(t.sum_s));
            let _ = writeln!(o, "linerate_rtt_seconds_count{{{l}}} {}", t.count);
        }
        let counter =
            |o: &mut String, name: &str, help: &str, f: &dyn Fn(&TargetMetrics) -> u64| {
                let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
                for t in &self.targets {
                    let _ = writeln!(
                        o,
                        "{name}{{target=\"{}\",kind=\"{}\"}} {}",
                        escape(&t.target),
                        escape(&t.kind),
                        f(t)
                    );
                }
            };
        counter(&mut o, "linerate_probes_sent_total", "Probes sent.", &|t| {
            t.sent
        });
        counter(
            &mut o,
            "linerate_probes_lost_total",
            "Probes without a reply in time.",
            &|t| t.lost,
        );
        counter(
            &mut o,
            "linerate_probes_lost_forward_total",
            "Probes the responder never received (responder targets).",
            &|t| t.lost_forward,
        );
        counter(
            &mut o,
            "linerate_probes_lost_reverse_total",
            "Probes answered whose reply never came back (responder targets).",
            &|t| t.lost_reverse,
        );
        o
    }
}

/// Serves `/metrics` on `addr` from a thread; returns the bound address.
pub fn serve(addr: SocketAddr, m: Shared) -> std::io::Result<SocketAddr> {
    let l = TcpListener::bind(addr)?;
    let bound = l.local_addr()?;
    crate::host::kernel::spawn_named("lr-metrics", move || {
        for conn in l.incoming().flatten() {
            // One connection at a time: scrapes are rare and small.
            let _ = answer(conn, &m);
        }
    })?;
    Ok(bound)
}

fn answer(mut c: TcpStream, m: &Shared) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut r = BufReader::new(c.try_clone()?).take(8192);
    let mut line = String::new();
    r.read_line(&mut line)?;
    // Drain the headers (bounded by `take`).
    let mut h = String::new();
    while r.read_line(&mut h)? > 2 {
        h.clear();
    }
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = if line.starts_with("GET ") && (path == "/metrics" || path == "/") {
        let body = m.lock().map(|g| g.render()).unwrap_or_default();
        ("200 OK", body)
    } else {
        ("404 Not Found", "only GET /metrics here\n".to_string())
    };
    write!(
        c,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    c.flush()
}

use std::io::Read as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_cumulative_buckets() {
        let mut m = Metrics::default();
        let t = m.target("local=127.0.0.1", "udp");
        t.observe(0.0003);
        t.observe(0.02);
        t.observe(9.0);
        t.sent = 4;
        t.lost = 1;
        let s = m.render();
        assert!(s.contains("linerate_rtt_seconds_bucket{target=\"local=127.0.0.1\",kind=\"udp\",le=\"0.0005\"} 1"), "{s}");
        assert!(s.contains("le=\"0.025\"} 2"), "{s}");
        assert!(s.contains("le=\"+Inf\"} 3"), "{s}");
        assert!(s.contains("linerate_probes_lost_total{target=\"local=127.0.0.1\",kind=\"udp\"} 1"));
    }
}
