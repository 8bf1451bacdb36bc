//! The download client (the agent's `http_get` job): N connections, each a
//! thread doing keep-alive GETs back to back for a duration or a number of
//! requests. Plain-TCP bodies are discarded in the kernel (MSG_TRUNC); TLS
//! bodies go through rustls (or kTLS RX where the kernel has the ULP).

use super::stats::{self, CpuMark};
use super::wire::{self, MAX_HEAD};
use super::HttpError;
use super::{tls, ConnStats};
use crate::proto::http::{ErrorKinds, HttpSummary, KtlsStatus, StatusCount};
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
    /// Requests per second in all (each connection its share, on a fixed
    /// schedule); latency is then measured from the intended send time.
    pub rate_per_s: Option<f64>,
}

const POLL: Duration = Duration::from_millis(200);
/// A response that sends nothing for this long fails the request.
const STALL: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed connect, before the next attempt: a refusing port is
/// counted at a bounded pace, not in a busy loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
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
    status: Mutex<Vec<StatusCount>>,
    error_kinds: Mutex<ErrorKinds>,
    ktls_used: AtomicBool,
    ktls_note: Mutex<Option<String>>,
    tls_version: Mutex<Option<(String, String)>>,
    object_bytes: AtomicU64,
}

impl Shared {
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }
    /// Past the end, and past the grace a request under way has to finish.
    fn cut(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || Instant::now() >= self.deadline + FINISH_GRACE
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

/// What failed a request, for the counts by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Connect,
    Timeout,
    Reset,
    Tls,
    Protocol,
}

/// Why one request got no complete response.
struct Failure {
    kind: Kind,
    error: HttpError,
}

impl Failure {
    fn new(kind: Kind, error: HttpError) -> Self {
        Failure { kind, error }
    }
    /// An I/O error of an open connection, by what the kernel said.
    fn io(what: &str, tls: bool) -> impl FnOnce(io::Error) -> Failure + '_ {
        move |e| {
            let kind = match e.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Kind::Timeout,
                // rustls reports a broken record or alert as InvalidData.
                io::ErrorKind::InvalidData if tls => Kind::Tls,
                io::ErrorKind::InvalidData => Kind::Protocol,
                _ => Kind::Reset,
            };
            Failure::new(kind, HttpError::io(what)(e))
        }
    }
}

impl From<HttpError> for Failure {
    fn from(e: HttpError) -> Self {
        let kind = match &e {
            HttpError::Tls(_) => Kind::Tls,
            HttpError::Io { source, .. } => match source.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Kind::Timeout,
                _ => Kind::Reset,
            },
            HttpError::Protocol(_) | HttpError::Config(_) => Kind::Protocol,
        };
        Failure::new(kind, e)
    }
}

fn count(k: &mut ErrorKinds, kind: Kind) {
    match kind {
        Kind::Connect => k.connect += 1,
        Kind::Timeout => k.timeout += 1,
        Kind::Reset => k.reset += 1,
        Kind::Tls => k.tls += 1,
        Kind::Protocol => k.protocol += 1,
    }
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
    let sh = Arc::new(Shared {
        budget: AtomicI64::new(spec.requests.map(|r| r as i64).unwrap_or(-1)),
        deadline: start + cap,
        spec,
        stop,
        wire_bytes: AtomicU64::new(0),
        status: Mutex::new(Vec::new()),
        error_kinds: Mutex::new(ErrorKinds::default()),
        ktls_used: AtomicBool::new(false),
        ktls_note: Mutex::new(None),
        tls_version: Mutex::new(None),
        object_bytes: AtomicU64::new(0),
    });
    let n = sh.spec.connections.max(1);
    // Each connection's share of the rate, its first request offset by its
    // place so the connections' schedules interleave.
    let every = sh
        .spec
        .rate_per_s
        .map(|r| Duration::from_secs_f64(f64::from(n) / r));
    let mut conns = Vec::new();
    let mut handles = Vec::new();
    for id in 0..n {
        let st = Arc::new(ConnStats::new(id, -1));
        conns.push(Arc::clone(&st));
        let sh2 = Arc::clone(&sh);
        let first = every.map(|e| start + e.mul_f64(f64::from(id) / f64::from(n)));
        let h = crate::host::kernel::spawn_named("lr-http-get", move || {
            let mut w = Worker::new(&sh2, &st, every, first);
            w.run();
            w.finish();
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
            if let Some(h) = src.lock().ok().and_then(|g| g.clone()) {
                let _ = dst.add(&h);
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
    })
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
    fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Conn::Plain(s) | Conn::Ktls(s) => s.as_raw_fd(),
            Conn::Tls(t) => t.sock.sock.as_raw_fd(),
        }
    }
    fn tls(&self) -> bool {
        !matches!(self, Conn::Plain(_))
    }
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

/// How one request ended, when it did not fail.
enum Outcome {
    /// A complete response; `keep_alive`: the connection may carry the next.
    Done { keep_alive: bool },
    /// The test ended with the response under way: counted in bytes only.
    Cut,
}

/// One connection's thread: requests one at a time (no pipelining) on a
/// kept-alive connection, a new connection when the server closes it or a
/// request fails. With a rate, each request has an intended send time.
struct Worker<'a> {
    sh: &'a Arc<Shared>,
    st: &'a ConnStats,
    conn: Option<Conn>,
    request: Vec<u8>,
    head: Vec<u8>,
    buf: Vec<u8>,
    /// The request schedule: the next intended send time and the spacing.
    due: Option<Instant>,
    every: Option<Duration>,
    ttfb: hdrhistogram::Histogram<u64>,
    /// From the intended send time with a rate, else from the actual one.
    lat: hdrhistogram::Histogram<u64>,
    /// From the actual send time (kept apart only with a rate).
    raw: hdrhistogram::Histogram<u64>,
    status: Vec<StatusCount>,
    kinds: ErrorKinds,
}

impl<'a> Worker<'a> {
    fn new(
        sh: &'a Arc<Shared>,
        st: &'a ConnStats,
        every: Option<Duration>,
        first: Option<Instant>,
    ) -> Self {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: linerate/{}\r\nAccept: */*\r\n\r\n",
            sh.spec.path,
            sh.spec.host,
            env!("CARGO_PKG_VERSION")
        );
        Worker {
            sh,
            st,
            conn: None,
            request: request.into_bytes(),
            head: vec![0u8; MAX_HEAD],
            buf: vec![0u8; DISCARD],
            due: first,
            every,
            ttfb: stats::new_histogram(),
            lat: stats::new_histogram(),
            raw: stats::new_histogram(),
            status: Vec::new(),
            kinds: ErrorKinds::default(),
        }
    }

    fn run(&mut self) {
        while self.sh.claim() {
            // The intended send time of this request (rate mode).
            let intended = match self.due {
                Some(due) => {
                    if due >= self.sh.deadline {
                        break;
                    }
                    if !sleep_until(due, &self.sh.stop) {
                        break;
                    }
                    self.due = self.every.map(|e| due + e);
                    Some(due)
                }
                None => None,
            };
            match self.one(intended) {
                Ok(Outcome::Done { keep_alive }) => {
                    if !keep_alive {
                        self.close();
                    }
                }
                Ok(Outcome::Cut) => break,
                Err(f) => {
                    self.close();
                    count(&mut self.kinds, f.kind);
                    if let Ok(mut g) = self.st.error.lock() {
                        g.get_or_insert(f.error.to_string());
                    }
                    if f.kind == Kind::Connect && self.every.is_none() {
                        std::thread::sleep(CONNECT_BACKOFF);
                    }
                }
            }
        }
    }

    fn close(&mut self) {
        if self.conn.take().is_some() {
            self.st.detach();
        }
    }

    /// Hands this thread's figures to the run.
    fn finish(mut self) {
        self.close();
        self.st.finish();
        if let Ok(mut g) = self.st.ttfb.lock() {
            *g = Some(std::mem::replace(&mut self.ttfb, stats::new_histogram()));
        }
        if let Ok(mut g) = self.st.latency.lock() {
            *g = Some(std::mem::replace(&mut self.lat, stats::new_histogram()));
        }
        if self.every.is_some() {
            if let Ok(mut g) = self.st.latency_uncorrected.lock() {
                *g = Some(std::mem::replace(&mut self.raw, stats::new_histogram()));
            }
        }
        if let Ok(mut s) = self.sh.status.lock() {
            for c in &self.status {
                crate::proto::http::add_status(&mut s, c.status, c.count);
            }
        }
        if let Ok(mut k) = self.sh.error_kinds.lock() {
            k.add(&self.kinds);
        }
    }

    /// Opens a connection (and its TLS session) unless one is open.
    fn connect(&mut self) -> Result<&mut Conn, Failure> {
        if self.conn.is_none() {
            let target = self.sh.spec.target;
            let sock = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT).map_err(|e| {
                Failure::new(
                    Kind::Connect,
                    HttpError::io(format!("connecting to {target}"))(e),
                )
            })?;
            let what = "setting the socket's timeouts";
            sock.set_read_timeout(Some(POLL))
                .map_err(HttpError::io(what))?;
            sock.set_write_timeout(Some(Duration::from_secs(5)))
                .map_err(HttpError::io(what))?;
            // Requests are small and one at a time: no Nagle delay.
            sock.set_nodelay(true).map_err(HttpError::io(what))?;
            let conn = match &self.sh.spec.tls {
                None => Conn::Plain(sock),
                Some(cfg) => handshake(self.sh, sock, cfg)?,
            };
            self.st.attach(conn.fd());
            self.conn = Some(conn);
        }
        self.conn.as_mut().ok_or_else(|| {
            Failure::new(Kind::Protocol, HttpError::Protocol("no connection".into()))
        })
    }

    /// One request and its response.
    fn one(&mut self, intended: Option<Instant>) -> Result<Outcome, Failure> {
        self.connect()?;
        let (sh, st) = (self.sh, self.st);
        let Some(conn) = self.conn.as_mut() else {
            return Err(Failure::new(
                Kind::Protocol,
                HttpError::Protocol("no connection".into()),
            ));
        };
        let tls = conn.tls();
        let t0 = Instant::now();
        conn.write_all(&self.request)
            .map_err(Failure::io("sending a request", tls))?;
        let mut have = 0usize;
        let mut first: Option<Instant> = None;
        let mut wire = 0u64;
        let resp = loop {
            match conn.read(&mut self.head[have..]) {
                Ok(0) if have == 0 => {
                    return Err(Failure::new(
                        Kind::Reset,
                        HttpError::Protocol(
                            "the server closed the connection without answering a request".into(),
                        ),
                    ))
                }
                Ok(0) => {
                    return Err(Failure::new(
                        Kind::Reset,
                        HttpError::Protocol("the server closed the connection mid-response".into()),
                    ))
                }
                Ok(n) => {
                    first.get_or_insert_with(Instant::now);
                    have += n;
                    wire += n as u64;
                    if let Some(r) = wire::parse_response(&self.head[..have])? {
                        break r;
                    }
                }
                Err(e) if retry(&e) => {
                    if sh.cut() {
                        return Ok(Outcome::Cut);
                    }
                    if t0.elapsed() > STALL {
                        return Err(Failure::new(
                            Kind::Timeout,
                            HttpError::Protocol(format!("no response within {STALL:?}")),
                        ));
                    }
                }
                Err(e) => return Err(Failure::io("reading a response", tls)(e)),
            }
        };
        let Some(len) = resp.content_length else {
            return Err(Failure::new(
                Kind::Protocol,
                HttpError::Protocol(format!(
                    "HTTP {} without Content-Length; linerate needs sized bodies",
                    resp.status
                )),
            ));
        };
        sh.object_bytes.fetch_max(len, Ordering::Relaxed);
        let early = ((have - resp.len) as u64).min(len);
        st.bytes.fetch_add(early, Ordering::Relaxed);
        let mut left = len - early;
        let mut quiet = Instant::now();
        while left > 0 {
            // A body under way when time is up is finished (within a grace),
            // so every body the server sent is one the client counted.
            if sh.cut() {
                return Ok(Outcome::Cut); // a partial body: counted in bytes, not requests
            }
            let want = left.min(DISCARD as u64) as usize;
            match conn.discard(&mut self.buf, want) {
                Ok(0) => {
                    return Err(Failure::new(
                        Kind::Reset,
                        HttpError::Protocol("the server closed the connection mid-body".into()),
                    ))
                }
                Ok(n) => {
                    left -= n as u64;
                    wire += n as u64;
                    st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    quiet = Instant::now();
                }
                Err(e) if retry(&e) => {
                    if quiet.elapsed() > STALL {
                        return Err(Failure::new(
                            Kind::Timeout,
                            HttpError::Protocol(format!("the body stalled for {STALL:?}")),
                        ));
                    }
                }
                Err(e) => return Err(Failure::io("reading a body", tls)(e)),
            }
        }
        if !tls {
            // Under TLS the socket reader counts the wire bytes itself.
            sh.wire_bytes.fetch_add(wire, Ordering::Relaxed);
        }
        let done = Instant::now();
        let us = |d: Duration| (d.as_micros() as u64).max(1);
        let _ = self.ttfb.record(us(first.unwrap_or(done) - t0));
        match intended {
            Some(at) => {
                let _ = self.lat.record(us(done.saturating_duration_since(at)));
                let _ = self.raw.record(us(done - t0));
            }
            None => {
                let _ = self.lat.record(us(done - t0));
            }
        }
        st.requests.fetch_add(1, Ordering::Relaxed);
        crate::proto::http::add_status(&mut self.status, resp.status, 1);
        Ok(Outcome::Done {
            keep_alive: resp.keep_alive,
        })
    }
}

/// Sleeps until `at` in short steps, so a stop is seen; false when stopped.
fn sleep_until(at: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(POLL));
    }
}

fn handshake(sh: &Arc<Shared>, sock: TcpStream, cfg: &Arc<ClientConfig>) -> Result<Conn, Failure> {
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
                    return Err(Failure::new(
                        Kind::Timeout,
                        HttpError::Tls(format!("TLS handshake with {}: timed out", sh.spec.target)),
                    ));
                }
            }
            Err(e) => {
                // A reset during the handshake is the peer's reset; the rest
                // (alerts, bad certificates) are TLS failures.
                let kind = match e.kind() {
                    io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof => Kind::Reset,
                    _ => Kind::Tls,
                };
                return Err(Failure::new(
                    kind,
                    HttpError::Tls(format!("TLS handshake with {}: {e}", sh.spec.target)),
                ));
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
