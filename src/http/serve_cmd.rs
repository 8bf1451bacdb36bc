//! `linerate serve`: the download server on its own, for any client (curl,
//! browsers, Go), until Ctrl-C. Prints where it listens, what it serves,
//! the certificate's fingerprint and whether kTLS is in use, and hands
//! back the summary of the whole serving (the command writes it out).

use super::server::{Limits, ServeSpec, Server};
use crate::model::signals::interrupted;
use crate::model::stderr::{errln, errprint};
use crate::model::stdout::outln;
use crate::proto::http::Content;
use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `linerate serve`, validated.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub spec: ServeSpec,
    pub limits: Limits,
    /// Stop after this long (tests); `None`: until Ctrl-C.
    pub duration: Option<Duration>,
    /// Write the generated certificate (PEM) here, for `curl --cacert`.
    pub write_cert: Option<std::path::PathBuf>,
    /// Stdout carries a JSON document: the lines below go to stderr.
    pub json: bool,
    /// A live line of the last second's rate on a terminal's stderr.
    pub progress: bool,
}

/// What `linerate serve` served, from start to stop.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServeReport {
    pub listen: SocketAddr,
    pub started_at: String,
    pub finished_at: String,
    /// Stopped by Ctrl-C or SIGTERM (rather than by --duration).
    pub interrupted: bool,
    pub summary: crate::proto::http::HttpSummary,
}

/// Serves until Ctrl-C, SIGTERM or the duration; an error only when it
/// could not start (its message names the cause too: print it with `{}`
/// or `{:#}`, not by walking its sources).
pub fn run(cfg: &ServeConfig) -> Result<ServeReport, super::HttpError> {
    let json = cfg.json;
    let line = |line: String| {
        if json {
            errln!("{line}");
        } else {
            outln!("{line}");
        }
    };
    // Each line goes to stdout, or to stderr when stdout carries JSON.
    macro_rules! say {
        ($($arg:tt)*) => { line(format!($($arg)*)) };
    }
    let stop = Arc::new(AtomicBool::new(false));
    let started_at = crate::model::clock::now_rfc3339();
    let mut server = Server::bind(cfg.listen, &cfg.spec, Arc::clone(&stop))?;
    server.set_limits(cfg.limits);
    let addr = server.local_addr().unwrap_or(cfg.listen);
    let scheme = if cfg.spec.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let what = match &cfg.spec.content {
        Content::Size(n) => format!(
            "a generated object of {n} bytes at every path (streamed from a {} byte pattern in memory)",
            super::content::PERIOD
        ),
        Content::Root(d) => format!("files under {}", d.display()),
    };
    say!("linerate serve: listening on {scheme}://{addr}/ serving {what}");
    say!(
        "limits: {} connections open at once ({} per client address), open-files limit {}; {} event loop{}; requests within {:.1} s",
        server.max_connections(),
        cfg.limits.max_per_client,
        server.fd_limit,
        server.workers(),
        if server.workers() == 1 { "" } else { "s" },
        cfg.spec.request_timeout.as_secs_f64()
    );
    if let Some(c) = server.cache() {
        say!(
            "page cache: {} files, {} bytes {}",
            c.files,
            c.bytes,
            if c.cold {
                "evicted (--cold): bodies come from the disk"
            } else {
                "warmed (read once): bodies come from the page cache"
            }
        );
    }
    if let Some(fp) = &server.fingerprint {
        let origin = if server.generated_pem.is_some() {
            "self-signed, made at start"
        } else {
            "from --cert"
        };
        say!("TLS certificate ({origin}) SHA-256 fingerprint: {fp}");
        if let (Some(path), Some(pem)) = (&cfg.write_cert, &server.generated_pem) {
            match std::fs::write(path, pem) {
                Ok(()) => say!("certificate written to {}", path.display()),
                Err(e) => errln!("warning: writing {}: {e}", path.display()),
            }
        }
        match &server.ktls_probe {
            Some(Ok(())) => {
                say!("kTLS: tls ULP present; records go through the kernel (sendfile)")
            }
            Some(Err(why)) => say!("kTLS: {why}; using user-space TLS (rustls)"),
            None => say!("kTLS: off (--no-ktls); using user-space TLS (rustls)"),
        }
    }
    let until = cfg.duration.map(|d| Instant::now() + d);
    let watcher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || loop {
            if interrupted() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        })
    };
    let live = cfg.progress && std::io::stderr().is_terminal();
    let mut on_interval = |s: crate::proto::IntervalSample| {
        if live {
            let secs = (s.t_end - s.t_start).max(1e-3);
            errprint!(
                "\r\x1b[Kserving: {:.3} Gbit/s of bodies in the last second",
                s.tx_bytes as f64 * 8.0 / secs / 1e9
            );
        }
    };
    let (summary, counts) = server.run_counted(until, Duration::from_secs(1), &mut on_interval);
    if live {
        errprint!("\r\x1b[K");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    let statuses: Vec<String> = summary
        .status_counts
        .iter()
        .map(|s| format!("{}×{}", s.count, s.status))
        .collect();
    say!(
        "served {} responses ({}), {} body bytes over {} connections in {:.1} s; {} connection errors, {} refused over a limit, {} closed for a late request; kTLS in use: {}",
        summary.requests,
        statuses.join(", "),
        summary.body_bytes,
        counts.connections,
        summary.elapsed_s,
        summary.errors,
        counts.refused,
        counts.timeouts,
        if summary.ktls.in_use { "yes" } else { "no" }
    );
    Ok(ServeReport {
        listen: addr,
        started_at,
        finished_at: crate::model::clock::now_rfc3339(),
        interrupted: interrupted(),
        summary,
    })
}
