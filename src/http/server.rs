//! The download server (`linerate serve` and the agent's `http_serve` job):
//! one thread per connection, HTTP/1.1 keep-alive, single-range requests,
//! bodies by sendfile(2) from the page cache (plain TCP and kTLS) or
//! through rustls from pread buffers (user-space TLS). Errors are answered
//! and counted; a bad client never stops the others.

use super::stats::{self, CpuMark};
use super::wire::{self, RangeAsk, Reject, MAX_HEAD};
use super::HttpError;
use super::{content, tls, ConnStats};
use crate::proto::http::Content;
use crate::proto::http::{CacheState, HttpConnection, HttpSummary, KtlsStatus};
use crate::proto::IntervalSample;
use crate::sys;
use crate::sys::tls as ffi;
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
}

/// Connections served at once; more are answered 503 and closed.
const MAX_CONNECTIONS: usize = 512;
/// Read/write timeouts of one socket call: how often threads look at `stop`.
const POLL: Duration = Duration::from_millis(200);
/// A body that makes no progress this long is abandoned.
const STALL: Duration = Duration::from_secs(30);

enum Body {
    Memory(File, u64),
    Root(PathBuf),
}

struct Shared {
    body: Body,
    tls: Option<Arc<ServerConfig>>,
    ktls: bool,
    /// `--cold`: every file body is dropped from the page cache after it
    /// was sent, so each download reads the disk again.
    cold: bool,
    request_timeout: Duration,
    conns: Mutex<Vec<Arc<ConnStats>>>,
    active: AtomicU64,
    ktls_used: AtomicBool,
    ktls_note: Mutex<Option<String>>,
    status: Mutex<Vec<crate::proto::http::StatusCount>>,
    errors: AtomicU64,
    wire_bytes: AtomicU64,
    tls_version: Mutex<Option<(String, String)>>,
    stop: Arc<AtomicBool>,
}

/// A server ready to accept: the listener is bound, the content prepared.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    cache: Option<CacheState>,
    pub fingerprint: Option<String>,
    pub generated_pem: Option<String>,
    pub object_bytes: u64,
    /// What kTLS will do, known before any connection (loopback probe).
    pub ktls_probe: Option<Result<(), HttpError>>,
}

impl Server {
    pub fn bind(
        addr: SocketAddr,
        spec: &ServeSpec,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, HttpError> {
        let (body, cache, object_bytes) = match &spec.content {
            Content::Size(n) => (Body::Memory(content::generated(*n)?, *n), None, *n),
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
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                body,
                tls,
                ktls: spec.ktls,
                cold: spec.cold && matches!(spec.content, Content::Root(_)),
                request_timeout: spec.request_timeout,
                conns: Mutex::new(Vec::new()),
                active: AtomicU64::new(0),
                ktls_used: AtomicBool::new(false),
                ktls_note: Mutex::new(None),
                status: Mutex::new(Vec::new()),
                errors: AtomicU64::new(0),
                wire_bytes: AtomicU64::new(0),
                tls_version: Mutex::new(None),
                stop,
            }),
            cache,
            fingerprint,
            generated_pem,
            object_bytes,
            ktls_probe,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
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
        let start = Instant::now();
        let cpu = CpuMark::now();
        let io0 = stats::storage_read_bytes();
        let mut clock = crate::engine::IntervalClock::new(start, interval);
        let mut last: Vec<(u64, u64)> = Vec::new();
        let mut next_id: u16 = 0;
        let sh = &self.shared;
        loop {
            if sh.stop.load(Ordering::Relaxed) || until.is_some_and(|u| Instant::now() >= u) {
                break;
            }
            match self.listener.accept() {
                Ok((conn, _)) => {
                    let id = next_id;
                    next_id = next_id.wrapping_add(1);
                    self.spawn_conn(conn, id);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => {
                    sh.errors.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            if let Some(span) = clock.due(Instant::now()) {
                on_interval(sample(sh, span, &mut last));
            }
        }
        sh.stop.store(true, Ordering::Relaxed);
        // Connection threads see `stop` within one poll.
        let wait = Instant::now() + Duration::from_secs(2);
        while sh.active.load(Ordering::Relaxed) > 0 && Instant::now() < wait {
            std::thread::sleep(Duration::from_millis(10));
        }
        let span = clock.close(Instant::now());
        on_interval(sample(sh, span, &mut last));
        let elapsed = start.elapsed().as_secs_f64();
        let conns = sh.conns.lock().map(|c| c.clone()).unwrap_or_default();
        let connections: Vec<HttpConnection> = conns.iter().map(|c| c.record(elapsed)).collect();
        let mut cache = self.cache.clone();
        if let Some(c) = &mut cache {
            c.storage_read_bytes = stats::storage_read_bytes().saturating_sub(io0);
            c.storage_read_bps = c.storage_read_bytes as f64 * 8.0 / elapsed.max(1e-3);
        }
        let tv = sh.tls_version.lock().ok().and_then(|g| g.clone());
        HttpSummary {
            tls: sh.tls.is_some(),
            tls_version: tv.as_ref().map(|t| t.0.clone()),
            cipher_suite: tv.map(|t| t.1),
            ktls: self.ktls_status(),
            requests: connections.iter().map(|c| c.requests).sum(),
            body_bytes: connections.iter().map(|c| c.body_bytes).sum(),
            wire_bytes: sh.wire_bytes.load(Ordering::Relaxed),
            status_counts: sh.status.lock().map(|s| s.clone()).unwrap_or_default(),
            errors: sh.errors.load(Ordering::Relaxed),
            elapsed_s: elapsed,
            cpu: cpu.split(),
            connections,
            cache,
            object_bytes: self.object_bytes,
            ..Default::default()
        }
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

    fn spawn_conn(&self, conn: TcpStream, id: u16) {
        let sh = Arc::clone(&self.shared);
        if sh.active.load(Ordering::Relaxed) as usize >= MAX_CONNECTIONS {
            let _ = (&conn).write_all(&wire::error_response(503, false));
            sh.count_status(503);
            return;
        }
        // A second handle keeps the socket (and its TCP_INFO) until the
        // connection's figures are taken, and keeps its fd from being reused.
        let Ok(keep) = conn.try_clone() else {
            sh.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let stats = Arc::new(ConnStats::new(id, keep.as_raw_fd()));
        if let Ok(mut c) = sh.conns.lock() {
            c.push(Arc::clone(&stats));
        }
        sh.active.fetch_add(1, Ordering::Relaxed);
        let sh2 = Arc::clone(&sh);
        let spawned = crate::host::kernel::spawn_named("lr-http-serve", move || {
            if let Err(e) = serve_conn(&sh2, conn, &stats) {
                sh2.errors.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut g) = stats.error.lock() {
                    *g = Some(e.to_string());
                }
            }
            stats.finish();
            let _ = keep.shutdown(std::net::Shutdown::Both);
            drop(keep);
            sh2.active.fetch_sub(1, Ordering::Relaxed);
        });
        if spawned.is_err() {
            sh.active.fetch_sub(1, Ordering::Relaxed);
            sh.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Shared {
    fn count_status(&self, status: u16) {
        if let Ok(mut s) = self.status.lock() {
            crate::proto::http::add_status(&mut s, status, 1);
        }
    }
}

fn sample(sh: &Shared, span: (f64, f64), last: &mut Vec<(u64, u64)>) -> IntervalSample {
    let conns = sh.conns.lock().map(|c| c.clone()).unwrap_or_default();
    super::interval_of(&conns, span, last, true)
}

/// A connection's byte stream: plain TCP (kTLS too: the kernel encrypts)
/// or rustls in user space.
enum Conn {
    Plain(TcpStream),
    Ktls(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) | Conn::Ktls(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
    fn write_all(&mut self, b: &[u8], stop: &AtomicBool) -> io::Result<()> {
        let mut off = 0;
        let t0 = Instant::now();
        while off < b.len() {
            let r = match self {
                Conn::Plain(s) | Conn::Ktls(s) => s.write(&b[off..]),
                Conn::Tls(t) => t.write(&b[off..]),
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                Err(e) if retry(&e) => check_stall(t0, stop)?,
                Err(e) => return Err(e),
            }
        }
        if let Conn::Tls(t) = self {
            let t0 = Instant::now();
            loop {
                match t.flush() {
                    Ok(()) => break,
                    Err(e) if retry(&e) => check_stall(t0, stop)?,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn check_stall(t0: Instant, stop: &AtomicBool) -> io::Result<()> {
    if stop.load(Ordering::Relaxed) {
        return Err(io::Error::other("server stopping"));
    }
    if t0.elapsed() > STALL {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client took nothing for 30 s",
        ));
    }
    Ok(())
}

fn serve_conn(sh: &Shared, sock: TcpStream, st: &ConnStats) -> Result<(), HttpError> {
    let setup = "setting up the connection's socket";
    sock.set_nonblocking(false).map_err(HttpError::io(setup))?;
    sock.set_read_timeout(Some(POLL))
        .map_err(HttpError::io(setup))?;
    sock.set_write_timeout(Some(POLL))
        .map_err(HttpError::io(setup))?;
    let mut conn = match &sh.tls {
        None => Conn::Plain(sock),
        Some(cfg) => handshake(sh, sock, cfg)?,
    };
    let mut buf = vec![0u8; MAX_HEAD];
    let mut have = 0usize;
    loop {
        // Read one request head, within the request timeout.
        let t0 = Instant::now();
        let req = loop {
            if have > 0 {
                match wire::parse_request(&buf[..have]) {
                    Ok(r) => break r,
                    Err(Reject::Partial) => {}
                    Err(Reject::Status(s)) => {
                        sh.count_status(s);
                        let _ = conn.write_all(&wire::error_response(s, false), &sh.stop);
                        return Ok(());
                    }
                }
            }
            if have == buf.len() {
                sh.count_status(431);
                let _ = conn.write_all(&wire::error_response(431, false), &sh.stop);
                return Ok(());
            }
            match conn.read(&mut buf[have..]) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    have += n;
                    sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if retry(&e) => {
                    if sh.stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    if t0.elapsed() >= sh.request_timeout {
                        // Only a started request earns an answer; an idle
                        // keep-alive connection is just closed.
                        if have > 0 {
                            sh.count_status(408);
                            let _ = conn.write_all(&wire::error_response(408, false), &sh.stop);
                        }
                        return Ok(());
                    }
                }
                Err(e) => return Err(HttpError::io("reading a request")(e)),
            }
        };
        let keep = respond(sh, &mut conn, &req, st)?;
        buf.copy_within(req.len..have, 0);
        have -= req.len;
        if !keep || sh.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
}

fn handshake(sh: &Shared, sock: TcpStream, cfg: &Arc<ServerConfig>) -> Result<Conn, HttpError> {
    let fd = sock.as_raw_fd();
    // The ULP goes on before any TLS byte; without it, user-space TLS.
    let ulp = sh.ktls
        && match ffi::set_tls_ulp(fd) {
            Ok(()) => true,
            Err(e) => {
                if let Ok(mut n) = sh.ktls_note.lock() {
                    *n = Some(if tls::ulp_missing(&e) {
                        crate::proto::http::KTLS_MISSING.to_string()
                    } else {
                        format!("setting TCP_ULP tls: {e}")
                    });
                }
                false
            }
        };
    let mut tls =
        ServerConnection::new(Arc::clone(cfg)).map_err(|e| HttpError::Tls(format!("TLS: {e}")))?;
    let mut sock = sock;
    let t0 = Instant::now();
    while tls.is_handshaking() {
        match tls.complete_io(&mut sock) {
            Ok(_) => {}
            Err(e) if retry(&e) => {
                if t0.elapsed() > sh.request_timeout || sh.stop.load(Ordering::Relaxed) {
                    return Err(HttpError::Protocol("TLS handshake timed out".into()));
                }
            }
            Err(e) => return Err(HttpError::io("TLS handshake")(e)),
        }
    }
    while tls.wants_write() {
        tls.write_tls(&mut sock)
            .map_err(HttpError::io("TLS handshake"))?;
    }
    tls::remember_version(&sh.tls_version, &tls);
    if !ulp {
        return Ok(Conn::Tls(Box::new(StreamOwned::new(tls, sock))));
    }
    let tls13 = tls.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
    let secrets = tls
        .dangerous_extract_secrets()
        .map_err(|e| HttpError::Tls(format!("kTLS: extracting the session keys: {e}")))?;
    tls::enable_ktls(fd, tls13, secrets)?;
    sh.ktls_used.store(true, Ordering::Relaxed);
    Ok(Conn::Ktls(sock))
}

/// Answers one request; returns whether the connection stays open.
fn respond(
    sh: &Shared,
    conn: &mut Conn,
    req: &wire::RequestHead,
    st: &ConnStats,
) -> Result<bool, HttpError> {
    let opened;
    let (file, len): (&File, u64) = match &sh.body {
        Body::Memory(f, n) => (f, *n),
        Body::Root(root) => match wire::resolve(root, &req.target) {
            Ok(p) => match File::open(&p).and_then(|f| f.metadata().map(|m| (f, m.len()))) {
                Ok((f, n)) => {
                    opened = f;
                    (&opened, n)
                }
                Err(_) => return error(sh, conn, 404, req.keep_alive),
            },
            Err(status) => return error(sh, conn, status, req.keep_alive),
        },
    };
    let (status, start, count, mut extra) = match wire::parse_range(req.range.as_deref(), len) {
        RangeAsk::Whole => (200, 0, len, vec![]),
        RangeAsk::Part { start, end } => (
            206,
            start,
            end - start + 1,
            vec![("Content-Range", format!("bytes {start}-{end}/{len}"))],
        ),
        RangeAsk::Unsatisfiable => {
            sh.count_status(416);
            let head = wire::response_head(
                416,
                &[
                    ("Content-Range", format!("bytes */{len}")),
                    ("Content-Length", "0".into()),
                ],
                req.keep_alive,
            );
            conn.write_all(&head, &sh.stop)
                .map_err(HttpError::io("answering"))?;
            return Ok(req.keep_alive);
        }
    };
    extra.push(("Content-Length", count.to_string()));
    extra.push(("Content-Type", "application/octet-stream".into()));
    extra.push(("Accept-Ranges", "bytes".into()));
    let head = wire::response_head(status, &extra, req.keep_alive);
    conn.write_all(&head, &sh.stop)
        .map_err(HttpError::io("sending a response head"))?;
    sh.wire_bytes
        .fetch_add(head.len() as u64, Ordering::Relaxed);
    sh.count_status(status);
    if !req.head {
        send_body(sh, conn, file, start, count, st)?;
        if sh.cold {
            // Pages still referenced by the socket stay; the rest go.
            let _ = ffi::evict_from_page_cache(file);
        }
    }
    st.requests.fetch_add(1, Ordering::Relaxed);
    Ok(req.keep_alive)
}

fn error(sh: &Shared, conn: &mut Conn, status: u16, keep: bool) -> Result<bool, HttpError> {
    sh.count_status(status);
    conn.write_all(&wire::error_response(status, keep), &sh.stop)
        .map_err(HttpError::io(format!("answering {status}")))?;
    Ok(keep)
}

fn send_body(
    sh: &Shared,
    conn: &mut Conn,
    file: &File,
    start: u64,
    count: u64,
    st: &ConnStats,
) -> Result<(), HttpError> {
    let end = start + count;
    match conn {
        Conn::Plain(s) | Conn::Ktls(s) => {
            let fd: RawFd = s.as_raw_fd();
            let mut off = start as i64;
            let mut t0 = Instant::now();
            while (off as u64) < end {
                let want = (end - off as u64).min(1 << 30) as usize;
                match sys::sendfile(fd, file, &mut off, want) {
                    Ok(0) => return Err(HttpError::Protocol("the file ended early".into())),
                    Ok(n) => {
                        st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                        sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        t0 = Instant::now();
                    }
                    Err(e) if retry(&e) => {
                        check_stall(t0, &sh.stop).map_err(HttpError::io("sending a body"))?
                    }
                    Err(e) => return Err(HttpError::io("sending a body")(e)),
                }
            }
            Ok(())
        }
        Conn::Tls(_) => {
            let mut buf = vec![0u8; 256 * 1024];
            let mut off = start;
            while off < end {
                let want = (end - off).min(buf.len() as u64) as usize;
                let n = file
                    .read_at(&mut buf[..want], off)
                    .map_err(HttpError::io("reading the file"))?;
                if n == 0 {
                    return Err(HttpError::Protocol("the file ended early".into()));
                }
                conn.write_all(&buf[..n], &sh.stop)
                    .map_err(HttpError::io("sending a body"))?;
                off += n as u64;
                st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok(())
        }
    }
}
