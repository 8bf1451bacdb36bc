//! One target's windows: probes spread over each, the replies taken in,
//! and the window's line and metrics.

use super::config::MonitorConfig;
use super::probers::{Prober, Reply};
use super::shared::{unix_s, Shared};
use crate::latency::stats::{self, Percentiles};
use crate::proto::probe::ProbeSample;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a run's last (partial) window waits for replies to its
/// probes still in flight.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(1);

/// Records a reply's RTT on the window's probe it answers (the window's
/// first probe is `base`); a second reply to a probe changes nothing.
pub(super) fn take_reply(samples: &mut [ProbeSample], base: u32, r: Reply) {
    let Some(i) = r.seq.checked_sub(base) else {
        return;
    };
    if let Some(s) = samples.get_mut(i as usize) {
        if s.2 == 0 {
            // Only the RTT matters here: fake times that give it.
            s.2 = s.1 + r.rtt_ns.max(1);
            s.5 = r.rx_count.unwrap_or(0);
        }
    }
}

/// A cut window's last replies: waits up to [`STOP_GRACE`] for the probes
/// still unanswered.
fn await_stragglers(p: &mut dyn Prober, samples: &mut [ProbeSample], base: u32) {
    let grace = Instant::now() + STOP_GRACE;
    while samples.iter().any(|s| !s.answered()) && Instant::now() < grace {
        let wait = grace
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        if let Some(r) = p.recv(wait) {
            take_reply(samples, base, r);
        }
    }
}

/// One target's windows, until told to stop or until `end`. The window
/// the stop cuts short is summarised too (`"partial": true`), after the
/// replies still in flight had [`STOP_GRACE`] to come in: a run shorter
/// than its window still measures.
pub(super) fn target_loop(
    name: String,
    kind: &'static str,
    mut p: Box<dyn Prober>,
    cfg: Arc<MonitorConfig>,
    sh: Arc<Shared>,
) {
    let n = cfg.probes.max(1);
    let spacing = cfg.window / n;
    let mut seq: u32 = 0;
    let mut win_start = Instant::now();
    // Each target runs the whole --duration from its own start, so a
    // window as long as the run ends with it, complete.
    let end = cfg.duration.map(|d| win_start + d);
    let done = || sh.stop.load(Ordering::Relaxed) || end.is_some_and(|e| Instant::now() >= e);
    let mut win_unix = unix_s();
    while !done() {
        let base = seq;
        let mut samples: Vec<ProbeSample> = Vec::with_capacity(n as usize);
        let take = |r: Reply, samples: &mut Vec<ProbeSample>| take_reply(samples, base, r);
        let win_end = win_start + cfg.window;
        let mut cut = false;
        'probes: for i in 0..n {
            let due = win_start + spacing * i;
            while Instant::now() < due {
                if done() {
                    cut = true;
                    break 'probes;
                }
                let wait = due
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(250));
                if let Some(r) = p.recv(wait) {
                    take(r, &mut samples);
                }
            }
            samples.push(ProbeSample(seq, 1_000_000_000, 0, 0, 0, 0, 0));
            if !p.send(seq) {
                // Counted as sent and lost: the target is unreachable.
            }
            seq = seq.wrapping_add(1);
        }
        while !cut && Instant::now() < win_end {
            if done() {
                cut = true;
                break;
            }
            let wait = win_end
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(250));
            if let Some(r) = p.recv(wait) {
                take(r, &mut samples);
            }
        }
        if cut {
            if samples.is_empty() {
                return;
            }
            await_stragglers(p.as_mut(), &mut samples, base);
        }
        let end_unix = unix_s();
        emit_window(&name, kind, &samples, (win_unix, end_unix), cut, &cfg, &sh);
        if cut {
            return;
        }
        win_start = win_end;
        win_unix = end_unix;
        // Fell behind (a suspended host): start the next window now.
        if Instant::now() > win_start + cfg.window {
            win_start = Instant::now();
        }
    }
}

/// Writes one window's line and adds it to the metrics.
fn emit_window(
    name: &str,
    kind: &str,
    samples: &[ProbeSample],
    (start, end): (f64, f64),
    partial: bool,
    cfg: &MonitorConfig,
    sh: &Shared,
) {
    let mut h = stats::histogram();
    let mut rtts: Vec<f64> = Vec::new();
    for s in samples.iter().filter(|s| s.answered()) {
        let ns = s.2 - s.1;
        let _ = h.record(ns.max(1));
        rtts.push(ns as f64 / 1e9);
    }
    rtts.sort_by(f64::total_cmp);
    let sent = samples.len() as u64;
    let received = rtts.len() as u64;
    let lost = sent - received;
    let (mut lf, mut lr) = (0u64, 0u64);
    if kind == "udp" {
        for d in stats::loss_directions(samples, None).into_iter().flatten() {
            if d {
                lf += 1;
            } else {
                lr += 1;
            }
        }
    }
    let pct: Option<Percentiles> = Percentiles::of(&h);
    let line = json!({
        "type": "window",
        "target": name,
        "kind": kind,
        "start_unix_s": start,
        "end_unix_s": end,
        "time": crate::model::clock::rfc3339(start as u64),
        "window_s": cfg.window.as_secs_f64(),
        "partial": partial,
        "sent": sent,
        "received": received,
        "lost": lost,
        "loss_ratio": if sent > 0 { lost as f64 / sent as f64 } else { 0.0 },
        "lost_forward": if kind == "udp" { Some(lf) } else { None },
        "lost_reverse": if kind == "udp" { Some(lr) } else { None },
        "rtt_s": pct,
        "rtts_s": rtts,
    });
    sh.write(&line);
    if let Ok(mut m) = sh.metrics.lock() {
        let t = m.target(name, kind);
        for r in &rtts {
            t.observe(*r);
        }
        t.sent += sent;
        t.lost += lost;
        t.lost_forward += lf;
        t.lost_reverse += lr;
        if partial {
            t.partial_windows += 1;
        } else {
            t.windows += 1;
        }
    }
    sh.kick_textfile();
}
