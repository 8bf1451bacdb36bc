//! The download server (`linerate serve` and the agent's `http_serve` job):
//! one epoll event loop per core (`serve_loop`), HTTP/1.1 keep-alive,
//! single-range requests, bodies by sendfile(2) from the page cache or the
//! generated object's pattern (plain TCP and kTLS) or through rustls
//! (user-space TLS). This file binds, sets the limits, starts the loops,
//! takes the intervals and builds the summary; what the loops share is in
//! `serve_shared`. A bad client never stops the others.

use super::serve_loop::{Handoff, Worker};
use super::serve_shared::{Body, Shared};
use super::stats::{self, CpuMark};
use super::HttpError;
use super::{content, tls};
use crate::model::stderr::errln;
use crate::proto::http::Content;
use crate::proto::http::{CacheState, HttpSummary, KtlsStatus};
use crate::proto::IntervalSample;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ServeSpec {
    pub content: Content,
    /// TLS with this certificate and key (PEM), or self-signed when `None`.
    pub tls: Option<Option<(PathBuf, PathBuf)>>,
    /// Hand TLS records to the kernel where it has the `tls` ULP.
    pub ktls: bool,
    /// Evict `--root` files from the page cache instead of warming them.
    pub cold: bool,
    /// A request head must arrive within this time.
    pub request_timeout: Duration,
    /// Names for a generated certificate.
    pub names: Vec<String>,
    /// TCP congestion control of every connection (set on the listening
    /// socket, which accepted connections inherit); the kernel's default
    /// when `None`.
    pub congestion: Option<String>,
}

/// How much one server takes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; `None`: what the open-files limit allows.
    pub max_connections: Option<usize>,
    /// Connections open at once from one client address.
    pub max_per_client: usize,
    /// Event-loop threads; 0: one per CPU this process may run on.
    pub workers: usize,
}

pub const DEFAULT_MAX_PER_CLIENT: usize = 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: None,
            max_per_client: DEFAULT_MAX_PER_CLIENT,
            workers: 0,
        }
    }
}

/// Connection ids are u16 slots, unique among the connections open or
/// not yet reported; the cap stays below them.
const MAX_IDS: usize = 65_000;
/// Descriptors kept free of connections (files, listener, epoll, logs).
const FD_RESERVE: u64 = 128;
/// A server ready to accept: the listener is bound, the content prepared.
pub struct Server {
    listener: TcpListener,
    shared: Shared,
    workers: usize,
    cache: Option<CacheState>,
    pub fingerprint: Option<String>,
    pub generated_pem: Option<String>,
    pub object_bytes: u64,
    /// What kTLS will do, known before any connection (loopback probe).
    pub ktls_probe: Option<Result<(), HttpError>>,
    /// The open-files limit in force (raised to the hard limit at bind).
    pub fd_limit: u64,
}

/// What a run served, beyond the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServeCounts {
    /// Connections accepted over the run.
    pub connections: u64,
    /// Connections refused over a limit.
    pub refused: u64,
    /// Connections closed for not sending a request in time.
    pub timeouts: u64,
}

impl Server {
    pub fn bind(
        addr: SocketAddr,
        spec: &ServeSpec,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, HttpError> {
        let (body, cache, object_bytes) = match &spec.content {
            Content::Size(n) => (Body::Pattern(content::generated(*n)?, *n), None, *n),
            Content::Root(dir) => {
                let root = dir.canonicalize().map_err(|e| {
                    HttpError::Config(format!(
                        "--root {}: {e}; name an existing directory",
                        dir.display()
                    ))
                })?;
                if !root.is_dir() {
                    return Err(HttpError::Config(format!(
                        "--root {}: not a directory",
                        dir.display()
                    )));
                }
                let cache = content::prepare_cache(&root, spec.cold);
                (Body::Root(root), Some(cache), 0)
            }
        };
        let (tls, fingerprint, generated_pem) = match &spec.tls {
            None => (None, None, None),
            Some(ck) => {
                let ck = ck.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
                let t = tls::server_config(ck, &spec.names, spec.ktls)?;
                (Some(t.config), Some(t.fingerprint), t.generated_pem)
            }
        };
        let ktls_probe = (tls.is_some() && spec.ktls).then(tls::probe_ulp);
        let listener =
            TcpListener::bind(addr).map_err(HttpError::io(format!("listening on {addr}")))?;
        listener
            .set_nonblocking(true)
            .map_err(HttpError::io(format!("listening on {addr}")))?;
        if let Some(cc) = &spec.congestion {
            use std::os::fd::AsRawFd;
            crate::sys::set_congestion(listener.as_raw_fd(), cc).map_err(HttpError::io(
                format!(
                    "setting congestion control {cc} (is its module loaded? see \
                 /proc/sys/net/ipv4/tcp_available_congestion_control)"
                ),
            ))?;
        }
        // Each connection holds a descriptor: take all the hard limit allows.
        let fd_limit = crate::sys::raise_nofile_limit().unwrap_or(1024);
        let mut server = Server {
            listener,
            shared: Shared::new(
                body,
                tls,
                spec.ktls,
                spec.cold && matches!(spec.content, Content::Root(_)),
                spec.request_timeout,
                stop,
            ),
            workers: 1,
            cache,
            fingerprint,
            generated_pem,
            object_bytes,
            ktls_probe,
            fd_limit,
        };
        server.set_limits(Limits::default());
        Ok(server)
    }

    /// Applies `limits`; a connection cap over what the descriptors allow
    /// is lowered to it.
    pub fn set_limits(&mut self, limits: Limits) {
        let by_fds = self.fd_limit.saturating_sub(FD_RESERVE).max(1) as usize;
        let cap = limits.max_connections.unwrap_or(by_fds);
        self.shared.max_connections = cap.min(by_fds).clamp(1, MAX_IDS);
        self.shared.max_per_client = limits.max_per_client.max(1);
        self.workers = if limits.workers > 0 {
            limits.workers
        } else {
            crate::sys::allowed_cpus().map(|c| c.len()).unwrap_or(1)
        }
        .clamp(1, 64);
    }

    /// Connections the server keeps open at once.
    pub fn max_connections(&self) -> usize {
        self.shared.max_connections
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Marks every connection's packets with `dscp` (set on the listening
    /// socket: accepted connections and their SYN-ACKs inherit it).
    pub fn mark(&self, dscp: crate::proto::Dscp) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        crate::sys::set_tos(self.listener.as_raw_fd(), dscp.tos())
    }

    pub fn cache(&self) -> Option<&CacheState> {
        self.cache.as_ref()
    }

    /// Accepts and serves until `stop` or `until`; calls `on_interval` with
    /// per-connection bytes every `interval`. Returns the summary.
    pub fn run(
        self,
        until: Option<Instant>,
        interval: Duration,
        on_interval: &mut dyn FnMut(IntervalSample),
    ) -> HttpSummary {
        self.run_counted(until, interval, on_interval).0
    }

    /// [`Server::run`], with the counts the summary does not carry.
    pub fn run_counted(
        self,
        until: Option<Instant>,
        interval: Duration,
        on_interval: &mut dyn FnMut(IntervalSample),
    ) -> (HttpSummary, ServeCounts) {
        let start = Instant::now();
        let cpu = CpuMark::now();
        let io0 = stats::storage_read_bytes();
        let mut clock = crate::engine::IntervalClock::new(start, interval);
        let sh = &self.shared;
        let (handoff, wake_rx) = match Handoff::new(self.workers) {
            Ok(v) => v,
            Err(e) => {
                errln!("linerate serve: making the event loops' wake sockets: {e}");
                sh.stop_now();
                (Handoff::empty(), Vec::new())
            }
        };
        let handoff = &handoff;
        std::thread::scope(|scope| {
            let mut started = 0;
            for (me, rx) in wake_rx.into_iter().enumerate() {
                let spawned = self
                    .listener
                    .try_clone()
                    .and_then(|l| Worker::new(sh, handoff, me, rx, l))
                    .and_then(|w| {
                        std::thread::Builder::new()
                            .name("lr-http-serve".into())
                            .spawn_scoped(scope, move || w.run())
                    });
                match spawned {
                    Ok(_) => started += 1,
                    Err(e) => {
                        handoff.retire(me);
                        sh.errors.fetch_add(1, Ordering::Relaxed);
                        errln!("linerate serve: starting an event loop: {e}");
                    }
                }
            }
            if started == 0 {
                sh.stop_now();
            }
            while !sh.stopping() {
                if until.is_some_and(|u| Instant::now() >= u) {
                    break;
                }
                // Only intervals are taken here; the workers wait in epoll.
                std::thread::sleep(Duration::from_millis(50));
                if let Some(span) = clock.due(Instant::now()) {
                    on_interval(sh.sample(span));
                }
            }
            sh.stop_now();
            // The workers close their connections and end within a tick.
        });
        let span = clock.close(Instant::now());
        on_interval(sh.sample(span));
        self.summary(start.elapsed().as_secs_f64(), io0, &cpu)
    }

    /// What the server did over `elapsed` seconds, from the I/O counter
    /// (`io0`) and CPU mark taken at its start: its summary and its counts.
    fn summary(&self, elapsed: f64, io0: u64, cpu: &CpuMark) -> (HttpSummary, ServeCounts) {
        let sh = &self.shared;
        let (connections, requests, body_bytes, accepted) = sh.records(elapsed);
        let mut cache = self.cache.clone();
        if let Some(c) = &mut cache {
            c.storage_read_bytes = stats::storage_read_bytes().saturating_sub(io0);
            c.storage_read_bps = c.storage_read_bytes as f64 * 8.0 / elapsed.max(1e-3);
        }
        let tv = sh.tls_version.lock().ok().and_then(|g| g.clone());
        let summary = HttpSummary {
            tls: sh.tls.is_some(),
            tls_version: tv.as_ref().map(|t| t.0.clone()),
            cipher_suite: tv.map(|t| t.1),
            ktls: self.ktls_status(),
            requests,
            body_bytes,
            wire_bytes: sh.wire_bytes.load(Ordering::Relaxed),
            status_counts: sh.status_counts(),
            errors: sh.errors.load(Ordering::Relaxed),
            elapsed_s: elapsed,
            cpu: cpu.split(),
            connections,
            cache,
            object_bytes: self.object_bytes,
            request_body_bytes: sh.request_body_bytes.load(Ordering::Relaxed),
            ..Default::default()
        };
        let counts = ServeCounts {
            connections: accepted,
            refused: sh.refused_total(),
            timeouts: sh.timeouts.load(Ordering::Relaxed),
        };
        (summary, counts)
    }

    fn ktls_status(&self) -> KtlsStatus {
        let sh = &self.shared;
        let requested = sh.tls.is_some() && sh.ktls;
        let in_use = sh.ktls_used.load(Ordering::Relaxed);
        let note = if requested && !in_use {
            sh.ktls_note
                .lock()
                .ok()
                .and_then(|n| n.clone())
                .or_else(|| {
                    self.ktls_probe
                        .as_ref()
                        .and_then(|p| p.as_ref().err().map(|e| e.to_string()))
                })
        } else {
            None
        };
        KtlsStatus {
            requested,
            in_use,
            note,
        }
    }
}
