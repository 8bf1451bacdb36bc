//! The download client (the agent's `http_get` job): N connections spread
//! over event loops, one thread per CPU this process may run on (never more
//! than connections), each connection doing keep-alive GETs back to back
//! for a duration or a number of requests, or on a fixed schedule with a
//! rate. This file starts the loops (`client_loop`; HTTP/1.1, or HTTP/2
//! with `client_h2`'s steps), reports intervals while they run, and adds
//! their figures up into the summary.

use super::client_conn::Conn;
use super::client_h2;
use super::client_loop::Loop;
pub use super::client_shared::GetSpec;
use super::client_shared::Shared;
use super::stats::{self, CpuMark};
use super::{ConnStats, HttpError};
use crate::proto::http::{HttpSummary, KtlsStatus};
use crate::proto::IntervalSample;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the sampling thread looks at the clock and the loops.
const SAMPLE: Duration = Duration::from_millis(5);

/// How many event loops: one per CPU this process may run on, never more
/// than connections.
fn loops_for(connections: u16) -> usize {
    let cpus = crate::sys::allowed_cpus().map_or(1, |c| c.len()).max(1);
    cpus.min(usize::from(connections.max(1)))
}

/// Runs the downloads; `on_interval` gets per-connection bytes.
pub fn run(
    spec: GetSpec,
    stop: Arc<AtomicBool>,
    interval: Duration,
    on_interval: &mut dyn FnMut(IntervalSample),
) -> Result<HttpSummary, HttpError> {
    if let Some(r) = spec.rate_per_s {
        if !(r.is_finite() && r > 0.0) {
            return Err(HttpError::Config(format!(
                "a request rate of {r}/s: give a positive number"
            )));
        }
    }
    let start = Instant::now();
    let cpu = CpuMark::now();
    // With a request count the duration is only a safety cap.
    let cap = if spec.requests.is_some() {
        spec.duration.max(Duration::from_secs(3600))
    } else {
        spec.duration
    };
    let sh = Arc::new(Shared::new(spec, stop, start, start + cap));
    let n = sh.spec.connections.max(1);
    // Each connection's share of the rate, its first request offset by its
    // place so the connections' schedules interleave.
    let every = sh
        .spec
        .rate_per_s
        .map(|r| Duration::from_secs_f64(f64::from(n) / r));
    let conns: Vec<Arc<ConnStats>> = (0..n).map(|id| Arc::new(ConnStats::new(id, -1))).collect();
    // Connection `id` runs on loop `id % loops`: each loop a fair share.
    let count = loops_for(n);
    let mut shares: Vec<Vec<(Arc<ConnStats>, Option<Instant>)>> =
        (0..count).map(|_| Vec::new()).collect();
    for (id, st) in conns.iter().enumerate() {
        let first = every.map(|e| start + e.mul_f64(id as f64 / f64::from(n)));
        shares[id % count].push((Arc::clone(st), first));
    }
    // HTTP/2's request header block, built once for every loop.
    let h2_block = if sh.spec.http2 {
        Some(client_h2::request_block(&sh)?)
    } else {
        None
    };
    let mut runs: Vec<Box<dyn FnOnce() + Send>> = Vec::new();
    for share in shares {
        let share = share
            .into_iter()
            .map(|(st, first)| Conn::new(st, first, start))
            .collect();
        let l = Loop::new(Arc::clone(&sh), share, every, h2_block.clone())?;
        runs.push(Box::new(move || l.run()));
    }
    let mut handles = Vec::new();
    for run in runs {
        let h = crate::host::kernel::spawn_named("lr-http-get", run);
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The loops already running end with the run.
                sh.stop.store(true, Ordering::Relaxed);
                for h in handles {
                    let _ = h.join();
                }
                return Err(HttpError::io("starting a client event loop thread")(e));
            }
        }
    }
    let mut clock = crate::engine::IntervalClock::new(start, interval);
    let mut last = Vec::new();
    while !handles.iter().all(|h| h.is_finished()) {
        if let Some(span) = clock.due(Instant::now()) {
            on_interval(super::interval_of(&conns, span, &mut last, false));
        }
        std::thread::sleep(SAMPLE);
    }
    for h in handles {
        let _ = h.join();
    }
    let span = clock.close(Instant::now());
    on_interval(super::interval_of(&conns, span, &mut last, false));
    let elapsed = start.elapsed().as_secs_f64();
    let (mut ttfb, mut lat, mut raw) = (
        stats::new_histogram(),
        stats::new_histogram(),
        stats::new_histogram(),
    );
    for c in &conns {
        for (src, dst) in [
            (&c.ttfb, &mut ttfb),
            (&c.latency, &mut lat),
            (&c.latency_uncorrected, &mut raw),
        ] {
            // Added where it lies: a copy is 190 KB per histogram.
            if let Ok(g) = src.lock() {
                if let Some(h) = g.as_ref() {
                    let _ = dst.add(h);
                }
            }
        }
    }
    let connections: Vec<_> = conns.iter().map(|c| c.record(elapsed)).collect();
    let tv = sh.tls_version.lock().ok().and_then(|g| g.clone());
    let requested = sh.spec.tls.is_some() && sh.spec.ktls;
    let in_use = sh.ktls_used.load(Ordering::Relaxed);
    let error_kinds = sh.error_kinds.lock().map(|k| k.clone()).unwrap_or_default();
    let rate = sh.spec.rate_per_s;
    Ok(HttpSummary {
        tls: sh.spec.tls.is_some(),
        tls_version: tv.as_ref().map(|t| t.0.clone()),
        cipher_suite: tv.map(|t| t.1),
        ktls: KtlsStatus {
            requested,
            in_use,
            note: (requested && !in_use)
                .then(|| sh.ktls_note.lock().ok().and_then(|n| n.clone()))
                .flatten(),
        },
        requests: connections.iter().map(|c| c.requests).sum(),
        body_bytes: connections.iter().map(|c| c.body_bytes).sum(),
        wire_bytes: sh.wire_bytes.load(Ordering::Relaxed),
        http2: sh.spec.http2,
        unread_at_close_bytes: sh.unread_at_close.load(Ordering::Relaxed),
        status_counts: sh.status.lock().map(|s| s.clone()).unwrap_or_default(),
        errors: error_kinds.total(),
        error_kinds,
        rate_per_s: rate,
        latency_uncorrected: rate.and_then(|_| stats::latency_of(&raw)),
        elapsed_s: elapsed,
        cpu: cpu.split(),
        ttfb: stats::latency_of(&ttfb),
        latency: stats::latency_of(&lat),
        latency_histogram: stats::buckets_of(&lat),
        connections,
        cache: None,
        object_bytes: sh.object_bytes.load(Ordering::Relaxed),
        method: sh.spec.request.method,
        extra_headers: sh.spec.request.headers.len() as u32,
        request_body_bytes: sh.request_body_bytes.load(Ordering::Relaxed),
        ramp: sh.spec.ramp.clone(),
    })
}
