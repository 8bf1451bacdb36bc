//! What one side of an HTTP test measures, computed in the agent: latency
//! histograms, process CPU split, softirq and storage counters. The plain
//! types it fills live in linerate-proto (`proto::http`).

use crate::host::kernel::host_cpus;
use crate::proto::http::{CpuSplit, Latency, LatencyBucket};
use hdrhistogram::Histogram;

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
        p999_us: h.value_at_quantile(0.999),
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
        .map(|t| crate::host::kernel::parse_proc_stat(&t).softirq_s)
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

/// CPU at the start of a measurement; [`CpuMark::split`] gives the use
/// since, in % of all the host's CPUs (0-100 %).
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
        let cpus = host_cpus();
        // CPU seconds over wall seconds of all the CPUs: a share of the host.
        let capacity = self.at.elapsed().as_secs_f64().max(1e-3) * f64::from(cpus);
        CpuSplit {
            user_pct: (u - self.user).max(0.0) / capacity * 100.0,
            system_pct: (s - self.system).max(0.0) / capacity * 100.0,
            softirq_pct: (softirq_s() - self.softirq).max(0.0) / capacity * 100.0,
            cpus,
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
    fn cpu_readers_work() {
        let m = CpuMark::now();
        // Keep every CPU busy for a while: the shares stay within 0-100 %.
        let n = host_cpus();
        assert!(n >= 1);
        let spin = |_| {
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while t.elapsed() < std::time::Duration::from_millis(300) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            x
        };
        std::thread::scope(|sc| {
            for i in 0..n {
                sc.spawn(move || spin(i));
            }
        });
        let s = m.split();
        assert_eq!(s.cpus, n);
        let total = s.user_pct + s.system_pct;
        assert!(s.user_pct >= 0.0 && s.system_pct >= 0.0);
        assert!(total <= 100.0 + 5.0, "a share of the host's CPUs: {s:?}");
    }
}
