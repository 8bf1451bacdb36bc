//! The download client (the agent's `http_get` job): N connections, each a
//! thread doing keep-alive GETs back to back for a duration or a number of
//! requests. Plain-TCP bodies are discarded in the kernel (MSG_TRUNC); TLS
//! bodies go through rustls (or kTLS RX where the kernel has the ULP).

use super::stats::{self, CpuMark};
use super::wire::{self, MAX_HEAD};
use super::HttpError;
use super::{tls, ConnStats};
use crate::proto::http::{HttpSummary, KtlsStatus};
use crate::proto::IntervalSample;
use crate::sys;
use crate::sys::tls as ffi;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone)]
pub struct GetSpec {
    pub target: SocketAddr,
    /// Host header and TLS server name.
    pub host: String,
    pub path: String,
    pub tls: Option<Arc<ClientConfig>>,
    pub ktls: bool,
    pub connections: u16,
    pub duration: Duration,
    /// Stop after this many responses in all (else run for `duration`).
    pub requests: Option<u64>,
}

const POLL: Duration = Duration::from_millis(200);
/// A response that sends nothing for this long fails the connection.
const STALL: Duration = Duration::from_secs(10);
const DISCARD: usize = 4 << 20;
/// How long a download under way at the end may take to finish.
const FINISH_GRACE: Duration = Duration::from_secs(2);

struct Shared {
    spec: GetSpec,
    stop: Arc<AtomicBool>,
    deadline: Instant,
    /// Requests left to claim; negative: unlimited.
    budget: AtomicI64,
    wire_bytes: AtomicU64,
    status: Mutex<Vec<crate::proto::http::StatusCount>>,
    errors: AtomicU64,
    ktls_used: AtomicBool,
    ktls_note: Mutex<Option<String>>,
    tls_version: Mutex<Option<(String, String)>>,
    object_bytes: AtomicU64,
}

impl Shared {
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }
    fn claim(&self) -> bool {
        if self.over() {
            return false;
        }
        if self.budget.load(Ordering::Relaxed) < 0 {
            return true;
        }
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                (b > 0).then_some(b - 1)
            })
            .is_ok()
    }
}

/// Runs the downloads; `on_interval` gets per-connection bytes.
pub fn run(
    spec: GetSpec,
    stop: Arc<AtomicBool>,
    interval: Duration,
    on_interval: &mut dyn FnMut(IntervalSample),
) -> Result<HttpSummary, HttpError> {
    let start = Instant::now();
    let cpu = CpuMark::now();
    // With a request count the duration is only a safety cap.
    let cap = if spec.requests.is_some() {
        spec.duration.max(Duration::from_secs(3600))
    } else {
        spec.duration
    };
    let sh = Arc::new(Shared {
        budget: AtomicI64::new(spec.requests.map(|r| r as i64).unwrap_or(-1)),
        deadline: start + cap,
        spec,
        stop,
        wire_bytes: AtomicU64::new(0),
        status: Mutex::new(Vec::new()),
        errors: AtomicU64::new(0),
        ktls_used: AtomicBool::new(false),
        ktls_note: Mutex::new(None),
        tls_version: Mutex::new(None),
        object_bytes: AtomicU64::new(0),
    });
    let mut conns = Vec::new();
    let mut handles = Vec::new();
    for id in 0..sh.spec.connections.max(1) {
        let sock = TcpStream::connect_timeout(&sh.spec.target, Duration::from_secs(5))
            .map_err(|e| HttpError::Protocol(format!("connecting to {}: {e}", sh.spec.target)))?;
        let st = Arc::new(ConnStats::new(id, sock.as_raw_fd()));
        conns.push(Arc::clone(&st));
        let sh2 = Arc::clone(&sh);
        let h = crate::host::kernel::spawn_named("lr-http-get", move || {
            let mut sock = Some(sock);
            let mut ttfb = stats::new_histogram();
            let mut lat = stats::new_histogram();
            while !sh2.over() {
                let s = match sock.take() {
                    Some(s) => s,
                    // The server closed the last one (Connection: close, or
                    // nginx's keepalive_requests): open another.
                    None => {
                        match TcpStream::connect_timeout(&sh2.spec.target, Duration::from_secs(5)) {
                            Ok(s) => s,
                            Err(e) => {
                                record_error(&sh2, &st, HttpError::io("reconnecting")(e));
                                break;
                            }
                        }
                    }
                };
                match connection(&sh2, s, &st, &mut ttfb, &mut lat) {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(e) => {
                        record_error(&sh2, &st, e);
                        break;
                    }
                }
            }
            st.finish();
            if let Ok(mut g) = st.ttfb.lock() {
                *g = Some(ttfb);
            }
            if let Ok(mut g) = st.latency.lock() {
                *g = Some(lat);
            }
        });
        handles.push(h.map_err(HttpError::io("starting a client thread"))?);
    }
    let mut clock = crate::engine::IntervalClock::new(start, interval);
    let mut last = Vec::new();
    while !handles.iter().all(|h| h.is_finished()) {
        if let Some(span) = clock.due(Instant::now()) {
            on_interval(super::interval_of(&conns, span, &mut last, false));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for h in handles {
        let _ = h.join();
    }
    let span = clock.close(Instant::now());
    on_interval(super::interval_of(&conns, span, &mut last, false));
    let elapsed = start.elapsed().as_secs_f64();
    let (mut ttfb, mut lat) = (stats::new_histogram(), stats::new_histogram());
    for c in &conns {
        for (src, dst) in [(&c.ttfb, &mut ttfb), (&c.latency, &mut lat)] {
            if let Some(h) = src.lock().ok().and_then(|g| g.clone()) {
                let _ = dst.add(&h);
            }
        }
    }
    let connections: Vec<_> = conns.iter().map(|c| c.record(elapsed)).collect();
    let tv = sh.tls_version.lock().ok().and_then(|g| g.clone());
    let requested = sh.spec.tls.is_some() && sh.spec.ktls;
    let in_use = sh.ktls_used.load(Ordering::Relaxed);
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
        status_counts: sh.status.lock().map(|s| s.clone()).unwrap_or_default(),
        errors: sh.errors.load(Ordering::Relaxed),
        elapsed_s: elapsed,
        cpu: cpu.split(),
        ttfb: stats::latency_of(&ttfb),
        latency: stats::latency_of(&lat),
        latency_histogram: stats::buckets_of(&lat),
        connections,
        cache: None,
        object_bytes: sh.object_bytes.load(Ordering::Relaxed),
    })
}

fn record_error(sh: &Shared, st: &ConnStats, e: HttpError) {
    sh.errors.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut g) = st.error.lock() {
        g.get_or_insert(e.to_string());
    }
}

/// A TCP socket that counts what it reads, under rustls.
struct Counted {
    sock: TcpStream,
    shared: Arc<Shared>,
}

impl Read for Counted {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(b)?;
        self.shared
            .wire_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Write for Counted {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.sock.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

enum Conn {
    Plain(TcpStream),
    Ktls(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, Counted>>),
}

impl Conn {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) | Conn::Ktls(s) => s.read(b),
            Conn::Tls(t) => t.read(b),
        }
    }
    /// Reads up to `max` body bytes to discard them: in the kernel on plain
    /// TCP (nothing copied), into `buf` otherwise.
    fn discard(&mut self, buf: &mut [u8], max: usize) -> io::Result<usize> {
        let k = max.min(buf.len());
        match self {
            Conn::Plain(s) => sys::recv_discard(s.as_raw_fd(), &mut buf[..k]),
            Conn::Ktls(s) => s.read(&mut buf[..k]),
            Conn::Tls(t) => t.read(&mut buf[..k]),
        }
    }
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Conn::Plain(s) | Conn::Ktls(s) => s.write_all(b),
            Conn::Tls(t) => {
                t.write_all(b)?;
                t.flush()
            }
        }
    }
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Downloads over one TCP connection until time is up or the server closes
/// it; `Ok(true)`: open another and go on.
fn connection(
    sh: &Arc<Shared>,
    sock: TcpStream,
    st: &ConnStats,
    ttfb: &mut hdrhistogram::Histogram<u64>,
    lat: &mut hdrhistogram::Histogram<u64>,
) -> Result<bool, HttpError> {
    /// Detaches the socket from the sampler before it closes.
    struct Attached<'a>(&'a ConnStats);
    impl Drop for Attached<'_> {
        fn drop(&mut self) {
            self.0.detach();
        }
    }
    sock.set_read_timeout(Some(POLL))
        .map_err(HttpError::io("setting the socket's timeouts"))?;
    sock.set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(HttpError::io("setting the socket's timeouts"))?;
    let mut conn = match &sh.spec.tls {
        None => Conn::Plain(sock),
        Some(cfg) => handshake(sh, sock, cfg)?,
    };
    st.attach(match &conn {
        Conn::Plain(s) | Conn::Ktls(s) => s.as_raw_fd(),
        Conn::Tls(t) => t.sock.sock.as_raw_fd(),
    });
    let _attached = Attached(st);
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: linerate/{}\r\nAccept: */*\r\n\r\n",
        sh.spec.path,
        sh.spec.host,
        env!("CARGO_PKG_VERSION")
    );
    let mut head = vec![0u8; MAX_HEAD];
    let mut buf = vec![0u8; DISCARD];
    let plain = matches!(conn, Conn::Plain(_));
    while sh.claim() {
        conn.write_all(request.as_bytes())
            .map_err(HttpError::io("sending a request"))?;
        let t0 = Instant::now();
        let mut have = 0usize;
        let mut first: Option<Instant> = None;
        let resp = loop {
            match conn.read(&mut head[have..]) {
                Ok(0) if have == 0 => return Ok(true), // closed between requests
                Ok(0) => {
                    return Err(HttpError::Protocol(
                        "the server closed the connection mid-response".into(),
                    ))
                }
                Ok(n) => {
                    first.get_or_insert_with(Instant::now);
                    have += n;
                    if plain {
                        sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    if let Some(r) = wire::parse_response(&head[..have])? {
                        break r;
                    }
                }
                Err(e) if retry(&e) => {
                    if sh.stop.load(Ordering::Relaxed) {
                        return Ok(false);
                    }
                    if t0.elapsed() > STALL {
                        return Err(HttpError::Protocol(format!("no response within {STALL:?}")));
                    }
                }
                Err(e) => return Err(HttpError::io("reading a response")(e)),
            }
        };
        let Some(len) = resp.content_length else {
            return Err(HttpError::Protocol(format!(
                "HTTP {} without Content-Length; linerate needs sized bodies",
                resp.status
            )));
        };
        sh.object_bytes.fetch_max(len, Ordering::Relaxed);
        let early = ((have - resp.len) as u64).min(len);
        st.bytes.fetch_add(early, Ordering::Relaxed);
        let mut left = len - early;
        let mut quiet = Instant::now();
        while left > 0 {
            // A body under way when time is up is finished (within a grace),
            // so every body the server sent is one the client counted.
            if sh.stop.load(Ordering::Relaxed) || Instant::now() >= sh.deadline + FINISH_GRACE {
                return Ok(false); // a partial body: counted in bytes, not requests
            }
            let want = left.min(DISCARD as u64) as usize;
            match conn.discard(&mut buf, want) {
                Ok(0) => {
                    return Err(HttpError::Protocol(
                        "the server closed the connection mid-body".into(),
                    ))
                }
                Ok(n) => {
                    left -= n as u64;
                    st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    if plain {
                        sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    quiet = Instant::now();
                }
                Err(e) if retry(&e) => {
                    if quiet.elapsed() > STALL {
                        return Err(HttpError::Protocol(format!(
                            "the body stalled for {STALL:?}"
                        )));
                    }
                }
                Err(e) => return Err(HttpError::io("reading a body")(e)),
            }
        }
        let done = Instant::now();
        let us = |d: Duration| (d.as_micros() as u64).max(1);
        let _ = ttfb.record(us(first.unwrap_or(done) - t0));
        let _ = lat.record(us(done - t0));
        st.requests.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut s) = sh.status.lock() {
            crate::proto::http::add_status(&mut s, resp.status, 1);
        }
        if !resp.keep_alive {
            return Ok(true);
        }
    }
    Ok(false)
}

fn handshake(
    sh: &Arc<Shared>,
    sock: TcpStream,
    cfg: &Arc<ClientConfig>,
) -> Result<Conn, HttpError> {
    let fd = sock.as_raw_fd();
    let ulp = sh.spec.ktls
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
    let name = ServerName::try_from(sh.spec.host.clone())
        .map_err(|e| HttpError::Tls(format!("TLS server name '{}': {e}", sh.spec.host)))?;
    let mut tls = ClientConnection::new(Arc::clone(cfg), name)
        .map_err(|e| HttpError::Tls(format!("TLS: {e}")))?;
    let mut io = Counted {
        sock,
        shared: Arc::clone(sh),
    };
    let t0 = Instant::now();
    while tls.is_handshaking() {
        match tls.complete_io(&mut io) {
            Ok(_) => {}
            Err(e) if retry(&e) => {
                if t0.elapsed() > STALL {
                    return Err(HttpError::Protocol("TLS handshake timed out".into()));
                }
            }
            Err(e) => {
                return Err(HttpError::Protocol(format!(
                    "TLS handshake with {}: {e}",
                    sh.spec.target
                )))
            }
        }
    }
    tls::remember_version(&sh.tls_version, &tls);
    if !ulp {
        return Ok(Conn::Tls(Box::new(StreamOwned::new(tls, io))));
    }
    let tls13 = tls.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
    let secrets = tls
        .dangerous_extract_secrets()
        .map_err(|e| HttpError::Tls(format!("kTLS: extracting the session keys: {e}")))?;
    tls::enable_ktls(fd, tls13, secrets)?;
    sh.ktls_used.store(true, Ordering::Relaxed);
    Ok(Conn::Ktls(io.sock))
}
