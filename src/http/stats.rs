//! What one side of an HTTP test reports: per-connection and total counts,
//! latency percentiles from HDR histograms, kTLS state, CPU split. Plain
//! data (serde + JSON Schema) shared by the agent messages and results.json.

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether the kernel did the TLS record layer on this side.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct KtlsStatus {
    /// kTLS was asked for (the T3 rows, `--ktls`).
    pub requested: bool,
    /// The kernel did the record layer for at least one connection.
    pub in_use: bool,
    /// Why not, when asked and not in use (e.g. the tls ULP is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The note the matrix and the results carry when the kernel lacks the ULP.
pub const KTLS_MISSING: &str = "kTLS not available on this kernel (tls ULP missing)";

/// Latency percentiles, microseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// One bucket of a latency histogram: downloads that took up to `le_us`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct LatencyBucket {
    pub le_us: u64,
    pub count: u64,
}

/// One connection's figures.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct HttpConnection {
    pub id: u16,
    /// Complete responses (client) or responses sent (server).
    pub requests: u64,
    /// Body bytes moved (partial last body included).
    pub body_bytes: u64,
    pub goodput_bps: f64,
    /// TCP_INFO total_retrans of this connection at its end.
    pub retransmits: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Why the connection ended early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// CPU time of one side over the test, in % of one core.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct CpuSplit {
    pub user_pct: f64,
    pub system_pct: f64,
    /// System-wide softirq time (packet processing) in % of one core; on
    /// one host shared by both sides.
    pub softirq_pct: f64,
}

/// The page-cache state of a `--root` server.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct CacheState {
    /// Files were read once before serving (the default).
    pub warmed: bool,
    /// Files were evicted first (`--cold`, posix_fadvise DONTNEED).
    pub cold: bool,
    pub files: u64,
    pub bytes: u64,
    /// Bytes the server process read from storage during the test
    /// (/proc/self/io read_bytes), and that as a rate.
    pub storage_read_bytes: u64,
    pub storage_read_bps: f64,
}

/// One side's HTTP summary (inside the agent's endpoint summary).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct HttpSummary {
    pub tls: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_suite: Option<String>,
    pub ktls: KtlsStatus,
    pub requests: u64,
    pub body_bytes: u64,
    /// Every byte read from (client) or written to (server) the sockets:
    /// HTTP heads and TLS framing included.
    pub wire_bytes: u64,
    /// Responses by status class on the client; error answers on the server.
    pub status_counts: Vec<StatusCount>,
    /// Connections that failed or were closed for a protocol error/timeout.
    pub errors: u64,
    pub elapsed_s: f64,
    pub cpu: CpuSplit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_histogram: Vec<LatencyBucket>,
    pub connections: Vec<HttpConnection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheState>,
    /// The size of the object served or downloaded, when one.
    #[serde(default)]
    pub object_bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct StatusCount {
    pub status: u16,
    pub count: u64,
}

pub fn add_status(v: &mut Vec<StatusCount>, status: u16, n: u64) {
    match v.iter_mut().find(|s| s.status == status) {
        Some(s) => s.count += n,
        None => {
            v.push(StatusCount { status, count: n });
            v.sort_by_key(|s| s.status);
        }
    }
}

/// A latency histogram in microseconds: 1 µs .. 1 h, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // Constant bounds within hdrhistogram's limits (low >= 1, high >= 2 low,
    // sigfig <= 5): construction cannot fail.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid constant histogram bounds")
}

pub fn latency_of(h: &Histogram<u64>) -> Option<Latency> {
    if h.is_empty() {
        return None;
    }
    Some(Latency {
        count: h.len(),
        mean_us: h.mean(),
        p50_us: h.value_at_quantile(0.5),
        p90_us: h.value_at_quantile(0.9),
        p99_us: h.value_at_quantile(0.99),
        max_us: h.max(),
    })
}

/// The histogram in logarithmic buckets (1-2-5 steps), empty ones dropped.
pub fn buckets_of(h: &Histogram<u64>) -> Vec<LatencyBucket> {
    let mut out: Vec<LatencyBucket> = Vec::new();
    for v in h.iter_recorded() {
        let le = bucket_edge(v.value_iterated_to());
        match out.last_mut() {
            Some(b) if b.le_us == le => b.count += v.count_at_value(),
            _ => out.push(LatencyBucket {
                le_us: le,
                count: v.count_at_value(),
            }),
        }
    }
    out
}

/// The smallest of 1, 2, 5, 10, 20, 50, ... at or above `v`.
fn bucket_edge(v: u64) -> u64 {
    let mut decade = 1u64;
    loop {
        for m in [1u64, 2, 5] {
            let e = decade.saturating_mul(m);
            if e >= v || e == u64::MAX {
                return e;
            }
        }
        decade = decade.saturating_mul(10);
    }
}

/// This process's user and system CPU seconds (/proc/self/stat).
pub fn process_user_system_s() -> (f64, f64) {
    let tick = crate::sys::tls::clock_ticks_per_s();
    let Ok(text) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the command name, which may hold spaces, in parentheses.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) as f64;
    (get(11) / tick, get(12) / tick)
}

/// System-wide softirq seconds (/proc/stat, first line).
pub fn softirq_s() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .map(|t| crate::kernel::parse_proc_stat(&t).softirq_s)
        .unwrap_or(0.0)
}

/// Bytes this process has read from storage (/proc/self/io read_bytes).
pub fn storage_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("read_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU at the start of a measurement; [`CpuMark::split`] gives the use since.
#[derive(Clone, Copy)]
pub struct CpuMark {
    user: f64,
    system: f64,
    softirq: f64,
    at: std::time::Instant,
}

impl CpuMark {
    pub fn now() -> Self {
        let (user, system) = process_user_system_s();
        CpuMark {
            user,
            system,
            softirq: softirq_s(),
            at: std::time::Instant::now(),
        }
    }
    pub fn split(&self) -> CpuSplit {
        let (u, s) = process_user_system_s();
        let wall = self.at.elapsed().as_secs_f64().max(1e-3);
        CpuSplit {
            user_pct: (u - self.user).max(0.0) / wall * 100.0,
            system_pct: (s - self.system).max(0.0) / wall * 100.0,
            softirq_pct: (softirq_s() - self.softirq).max(0.0) / wall * 100.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_buckets() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v).unwrap();
        }
        let l = latency_of(&h).unwrap();
        assert_eq!(l.count, 1000);
        assert!((495..=505).contains(&l.p50_us), "{l:?}");
        assert!((985..=995).contains(&l.p99_us), "{l:?}");
        assert_eq!(l.max_us, 1000);
        let b = buckets_of(&h);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 1000, "{b:?}");
        assert_eq!(b.first().map(|b| b.le_us), Some(1));
        assert!(latency_of(&new_histogram()).is_none());
    }

    #[test]
    fn status_counts_merge() {
        let mut v = vec![];
        add_status(&mut v, 200, 3);
        add_status(&mut v, 206, 1);
        add_status(&mut v, 200, 2);
        assert_eq!(
            v[0],
            StatusCount {
                status: 200,
                count: 5
            }
        );
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn cpu_readers_work() {
        let m = CpuMark::now();
        let s = m.split();
        assert!(s.user_pct >= 0.0 && s.system_pct >= 0.0);
    }
}
