//! `linerate serve`: the download server on its own, for any client (curl,
//! browsers, Go), until Ctrl-C. Prints where it listens, what it serves,
//! the certificate's fingerprint and whether kTLS is in use.

use super::server::{Limits, ServeSpec, Server};
use crate::model::signals::interrupted;
use crate::model::stdout::outln;
use crate::proto::http::Content;
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
}

pub fn run(cfg: &ServeConfig) -> i32 {
    let stop = Arc::new(AtomicBool::new(false));
    let mut server = match Server::bind(cfg.listen, &cfg.spec, Arc::clone(&stop)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
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
    outln!("linerate serve: listening on {scheme}://{addr}/ serving {what}");
    outln!(
        "limits: {} connections open at once ({} per client address), open-files limit {}; {} event loop{}; requests within {:.1} s",
        server.max_connections(),
        cfg.limits.max_per_client,
        server.fd_limit,
        server.workers(),
        if server.workers() == 1 { "" } else { "s" },
        cfg.spec.request_timeout.as_secs_f64()
    );
    if let Some(c) = server.cache() {
        outln!(
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
        outln!("TLS certificate ({origin}) SHA-256 fingerprint: {fp}");
        if let (Some(path), Some(pem)) = (&cfg.write_cert, &server.generated_pem) {
            match std::fs::write(path, pem) {
                Ok(()) => outln!("certificate written to {}", path.display()),
                Err(e) => eprintln!("warning: writing {}: {e}", path.display()),
            }
        }
        match &server.ktls_probe {
            Some(Ok(())) => {
                outln!("kTLS: tls ULP present; records go through the kernel (sendfile)")
            }
            Some(Err(why)) => outln!("kTLS: {why}; using user-space TLS (rustls)"),
            None => outln!("kTLS: off (--no-ktls); using user-space TLS (rustls)"),
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
    let (summary, counts) = server.run_counted(until, Duration::from_secs(1), &mut |_| {});
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    let statuses: Vec<String> = summary
        .status_counts
        .iter()
        .map(|s| format!("{}×{}", s.count, s.status))
        .collect();
    outln!(
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
    0
}
