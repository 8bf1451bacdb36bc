//! `linerate serve --iperf3` once configured: serves stock iperf3 clients
//! until Ctrl-C (or the duration), and records each served test as a run
//! of its own, with a budget on the results kept.

use super::config::RunOpts;
use super::error::OrchestrateError;
use super::run::Run;
use crate::iperf3::server::{self, ServerConfig};
use crate::iperf3::{Iperf3Error, Outcome};
use crate::model::stderr::errln;
use crate::proto::iperf3::Transport;
use crate::results::TestStatus;
use crate::runner::iperf3::record;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A validated `linerate serve --iperf3`.
#[derive(Debug, Clone)]
pub struct Iperf3Serve {
    pub server: ServerConfig,
    /// `--max-udp-send-rate`, bit/s (0: no limit), as the banner says it.
    pub max_udp_send_rate: f64,
    /// `--duration`: stop serving after this many seconds.
    pub duration_s: Option<f64>,
    /// Where each served test's results go.
    pub opts: RunOpts,
}

/// Serves until Ctrl-C or the duration; returns the exit status.
pub fn serve(c: &Iperf3Serve) -> i32 {
    let Iperf3Serve {
        server: cfg,
        max_udp_send_rate,
        duration_s,
        opts,
    } = c;
    if let Err(e) = server::check_descriptors(cfg.limits.max_clients) {
        errln!("error: {e}");
        return 2;
    }
    let listener = match server::bind(cfg.listen) {
        Ok(l) => l,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    let bound = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    errln!(
        "iperf3 server on {bound}: stock `iperf3 -c` clients may test against it, {} \
         (TCP and UDP on this port), up to {} s each{}; Ctrl-C stops",
        match cfg.limits.max_clients {
            1 => "one at a time".to_string(),
            n => format!("up to {n} at a time"),
        },
        cfg.limits.max_time_s,
        if *max_udp_send_rate > 0.0 {
            format!(
                ", UDP sent at most {}bit/s",
                crate::model::units::si(*max_udp_send_rate)
            )
        } else {
            String::new()
        }
    );
    let stop = AtomicBool::new(false);
    let until = duration_s.map(|d| std::time::Instant::now() + Duration::from_secs_f64(d));
    let mut failed = false;
    let mut broken = None;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if crate::model::signals::interrupted()
                    || until.is_some_and(|u| std::time::Instant::now() >= u)
                {
                    stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // Tests run at once; each is recorded as it ends, one at a time.
        broken = server::serve(cfg, &listener, &stop, |peer, _, r| {
            failed |= record_served(opts, peer, r) != 0;
        })
        .err();
        stop.store(true, Ordering::Relaxed);
    });
    if let Some(e) = broken {
        errln!("error: {e}");
        return 2;
    }
    if crate::model::signals::interrupted() || !failed {
        0
    } else {
        1
    }
}

/// One served test: its results directory, table (or JSON), exit status.
fn record_served(opts: &RunOpts, peer: SocketAddr, r: Result<Outcome, Iperf3Error>) -> i32 {
    let started = crate::model::clock::now_rfc3339();
    let far_role = format!("iperf3 client {peer} (far end)");
    let roles = ("linerate (iperf3 server)", far_role.as_str());
    let (test, err) = match r {
        Ok(o) => {
            let kind = match o.params.transport {
                Transport::Tcp => "tcp",
                Transport::Udp => "udp",
            };
            let name = format!("iperf3 {kind} from {peer}");
            (Some(record(&name, &o, roles, started)), None)
        }
        Err(Iperf3Error::Lost {
            message,
            partial: Some(o),
        }) => {
            let mut t = record(&format!("iperf3 from {peer}"), &o, roles, started);
            t.status = TestStatus::Failed;
            t.error = Some(message.clone());
            (Some(t), Some(OrchestrateError::Failed(message)))
        }
        Err(e) => {
            // Nothing ran (refused parameters, a client that left early).
            errln!("iperf3 client {peer}: {e}");
            return 1;
        }
    };
    let mut run = match Run::start(opts, "iperf3-serve") {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {}", crate::model::error::chain(&e));
            return 1;
        }
    };
    if let Some(t) = test {
        run.add_test(t);
    }
    let code = run.finish(err);
    if opts.write_results {
        prune_served(&opts.results_dir, SERVED_KEEP_RUNS, SERVED_KEEP_BYTES);
    }
    code
}

/// The served tests' results kept: anyone who reaches the port may start
/// tests, so their results have a budget, oldest removed first.
const SERVED_KEEP_RUNS: usize = 200;
const SERVED_KEEP_BYTES: u64 = 200 << 20;

/// Removes the oldest `*-iperf3-serve` results directories in `base` until
/// at most `runs` of them are left, together at most `bytes` (the newest
/// is always kept); says what it removed.
fn prune_served(base: &std::path::Path, runs: usize, bytes: u64) {
    fn size(p: &std::path::Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(p) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => size(&e.path()),
                Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
                _ => 0,
            })
            .sum()
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let mut dirs: Vec<((String, u32), String, u64)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| served_order(&n).map(|k| (k, n)))
        .map(|(k, n)| {
            let b = size(&base.join(&n));
            (k, n, b)
        })
        .collect();
    dirs.sort();
    let mut total: u64 = dirs.iter().map(|d| d.2).sum();
    let mut removed = 0;
    while dirs.len() > 1 && (dirs.len() > runs || total > bytes) {
        let (_, n, b) = dirs.remove(0);
        if std::fs::remove_dir_all(base.join(&n)).is_ok() {
            removed += 1;
        }
        total = total.saturating_sub(b);
    }
    if removed > 0 {
        errln!(
            "iperf3: removed the {removed} oldest served test result(s) from {}: served tests keep \
             at most {runs} results and {} MiB",
            base.display(),
            bytes >> 20
        );
    }
}

/// Where a served test's results directory sorts, oldest first: its
/// time stamp, then the number a directory made in the same second gets
/// (`…-iperf3-serve-2`: tests end at once); None for other directories.
fn served_order(name: &str) -> Option<(String, u32)> {
    if let Some(stamp) = name.strip_suffix("-iperf3-serve") {
        return Some((stamp.to_string(), 1));
    }
    let (stamp, n) = name.rsplit_once("-iperf3-serve-")?;
    Some((stamp.to_string(), n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_results_keep_a_budget() {
        let base = std::env::temp_dir().join(format!("lr-prune-{}", std::process::id()));
        for i in 0..5 {
            let d = base.join(format!("2026112{i}T000000-iperf3-serve"));
            std::fs::create_dir_all(d.join("agents")).unwrap();
            std::fs::write(d.join("results.json"), vec![b'x'; 1000]).unwrap();
        }
        std::fs::create_dir_all(base.join("20261101T000000-lab")).unwrap();
        prune_served(&base, 3, u64::MAX);
        let mut left: Vec<String> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "20261101T000000-lab",
                "20261122T000000-iperf3-serve",
                "20261123T000000-iperf3-serve",
                "20261124T000000-iperf3-serve"
            ]
        );
        // By bytes: two of 1000 B fit in 2500.
        prune_served(&base, 100, 2500);
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 3);
        // Directories made in the same second count, in their order.
        for n in [
            "20261125T000000-iperf3-serve-10",
            "20261125T000000-iperf3-serve-2",
        ] {
            std::fs::create_dir_all(base.join(n)).unwrap();
        }
        std::fs::create_dir_all(base.join("20261125T000000-iperf3-serve-x")).unwrap();
        // -10 was made after -2 (not before, as its name sorts).
        prune_served(&base, 1, u64::MAX);
        assert!(!base.join("20261125T000000-iperf3-serve-2").exists());
        assert!(base.join("20261125T000000-iperf3-serve-10").exists());
        assert!(base.join("20261125T000000-iperf3-serve-x").exists());
        assert!(!base.join("20261124T000000-iperf3-serve").exists());
        assert_eq!(
            served_order("20261125T000000-iperf3-serve-10"),
            Some(("20261125T000000".into(), 10))
        );
        assert_eq!(served_order("20261125T000000-lab"), None);
        // The newest is kept even when alone over the budget.
        prune_served(&base, 100, 10);
        assert!(base.join("20261125T000000-iperf3-serve-10").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
