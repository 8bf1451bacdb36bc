//! HTTP/2 downloads (`--http2`): the same connections, schedule, budget and
//! figures as the HTTP/1.1 event loops (`client_loop`), spoken with the h2
//! crate. Each event-loop thread runs a single-threaded tokio runtime; each
//! connection is one task that sends one request at a time on its own TCP
//! connection (as h2load does with its default of one stream per
//! connection), over TLS with ALPN `h2` for https, or in clear text with
//! prior knowledge (h2c) for http.
//!
//! The task drives its connection itself (h2's `Connection` future is
//! polled beside the request it waits on, not spawned as a task of its
//! own), and one timer per connection watches every wait for a stall: a
//! request costs no hop between tasks and no timer set or cleared.
//!
//! Every byte read from a socket is counted (heads, frames, TLS framing),
//! so the wire cross-check holds as for HTTP/1.1. A request that fails is
//! counted by kind; a server that ends a connection gracefully (GOAWAY
//! with no error) before a request went out costs a new connection, not a
//! failed request.

use super::client_shared::{
    count, handshake_failure, Failure, Kind, Shared, Timings, CONNECT_TIMEOUT, STALL,
};
use super::{ConnStats, HttpError};
use crate::proto::http::{ErrorKinds, StatusCount};
use crate::sys;
use bytes::Bytes;
use rustls::pki_types::ServerName;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Flow-control windows the client grants: large enough that a download
/// is never held back by the client's window on a fast path.
const STREAM_WINDOW: u32 = (1 << 30) - 1;
const CONNECTION_WINDOW: u32 = (1 << 31) - 1;
/// How often the loop thread looks for the run's end (or a stop).
const WATCH: Duration = Duration::from_millis(50);
/// After a failed connect, before the next attempt.
const BACKOFF: Duration = super::client_shared::CONNECT_BACKOFF;

/// What one loop thread's connections add up to.
#[derive(Default)]
struct Totals {
    status: Vec<StatusCount>,
    kinds: ErrorKinds,
    unread: u64,
}

/// Figures a connection task writes as it goes, kept by its loop thread
/// so a task ended at the run's cut loses nothing.
struct Slot {
    st: Arc<ConnStats>,
    times: Mutex<Timings>,
}

/// A socket that counts every byte read from it into the run's wire total.
struct Counted<T> {
    io: T,
    read: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        if n > 0 {
            self.read.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// h2's connection future: reads and writes the socket, answers SETTINGS
/// and PING. The connection's own task polls it whenever it waits.
type Driver = Pin<Box<dyn Future<Output = Result<(), h2::Error>> + Send>>;

/// The connection's driver and its stall timer.
struct Link {
    /// `None` once the connection has ended: dropping h2's connection
    /// ends every stream on it with an error, so no wait is left hanging.
    conn: Option<Driver>,
    /// Made at the first wait that blocks, then moved only when it fires
    /// before the wait it watches is `STALL` old.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// How a wait on a connection ended without its answer.
enum Waited {
    /// Nothing for `STALL`.
    Stalled,
    /// The connection ended with the wait still pending.
    Closed,
}

impl Link {
    fn new(conn: Driver) -> Self {
        Link {
            conn: Some(conn),
            timer: None,
        }
    }

    /// Polls `f` until it is ready, driving the connection meanwhile; a
    /// stall is `STALL` without an answer from the moment `f` first blocks.
    async fn wait<T>(
        &mut self,
        mut f: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Result<T, Waited> {
        let mut limit: Option<Instant> = None;
        poll_fn(|cx| {
            // What is already there (the rest of a body, a stream's slot)
            // needs no turn of the connection: a turn costs h2 its locks
            // and checks, so it comes only when `f` has to wait.
            if let Poll::Ready(v) = f(cx) {
                return Poll::Ready(Ok(v));
            }
            match self.conn.as_mut() {
                Some(c) => {
                    if c.as_mut().poll(cx).is_ready() {
                        self.conn = None;
                    }
                    if let Poll::Ready(v) = f(cx) {
                        return Poll::Ready(Ok(v));
                    }
                    if self.conn.is_none() {
                        return Poll::Ready(Err(Waited::Closed));
                    }
                }
                None => return Poll::Ready(Err(Waited::Closed)),
            }
            let limit = *limit.get_or_insert_with(|| Instant::now() + STALL);
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(limit.into())));
            while timer.as_mut().poll(cx).is_ready() {
                if Instant::now() >= limit {
                    return Poll::Ready(Err(Waited::Stalled));
                }
                timer.as_mut().reset(limit.into());
            }
            Poll::Pending
        })
        .await
    }
}

/// An open HTTP/2 connection. `peek` is a second handle on the socket, so
/// TCP_INFO and the unread count are read from it for as long as the
/// connection is ours, whatever h2 does with its own.
struct Session {
    send: h2::client::SendRequest<Bytes>,
    link: Link,
    peek: std::net::TcpStream,
    st: Arc<ConnStats>,
    totals: Arc<Mutex<Totals>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        let unread = sys::unread_bytes(self.peek.as_raw_fd()).unwrap_or(0);
        if let Ok(mut t) = self.totals.lock() {
            t.unread += unread;
        }
        self.st.detach();
    }
}

/// What a loop thread needs to know of the run.
struct Ctx {
    sh: Arc<Shared>,
    every: Option<Duration>,
    uri: http::Uri,
    agent: http::HeaderValue,
    name: Option<ServerName<'static>>,
    wire: Arc<AtomicU64>,
    totals: Arc<Mutex<Totals>>,
}

/// What every request of the run goes to: made once, before any thread
/// starts, from the host and path.
#[derive(Clone)]
pub(super) struct Target {
    uri: http::Uri,
    /// The TLS server name (https only).
    name: Option<ServerName<'static>>,
}

pub(super) fn target(sh: &Shared) -> Result<Target, HttpError> {
    Ok(Target {
        uri: uri_of(sh)?,
        name: server_name(sh)?,
    })
}

fn uri_of(sh: &Shared) -> Result<http::Uri, HttpError> {
    let tls = sh.spec.tls.is_some();
    let scheme = if tls { "https" } else { "http" };
    let host = &sh.spec.host;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    let port = sh.spec.target.port();
    let authority = if port == if tls { 443 } else { 80 } {
        host
    } else {
        format!("{host}:{port}")
    };
    let s = format!("{scheme}://{authority}{}", sh.spec.path);
    s.parse().map_err(|e| {
        HttpError::Config(format!(
            "'{s}' is not a URI HTTP/2 can send ({e}); check the host and path"
        ))
    })
}

fn server_name(sh: &Shared) -> Result<Option<ServerName<'static>>, HttpError> {
    let host = &sh.spec.host;
    match sh.spec.tls {
        None => Ok(None),
        Some(_) => ServerName::try_from(host.clone()).map(Some).map_err(|e| {
            HttpError::Tls(format!(
                "TLS server name '{host}': {e}; give a host name or an IP address"
            ))
        }),
    }
}

/// One loop thread: runs its connections to the end of the run and hands
/// their figures to `ConnStats` and the run's totals.
pub(super) fn run_loop(
    sh: Arc<Shared>,
    share: Vec<(Arc<ConnStats>, Option<Instant>)>,
    every: Option<Duration>,
    Target { uri, name }: Target,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            for (st, _) in &share {
                if let Ok(mut g) = st.error.lock() {
                    g.get_or_insert(format!("starting the HTTP/2 client's runtime: {e}"));
                }
                st.finish();
            }
            return;
        }
    };
    let agent = http::HeaderValue::from_static(concat!("linerate/", env!("CARGO_PKG_VERSION")));
    let ctx = Arc::new(Ctx {
        sh: Arc::clone(&sh),
        every,
        uri,
        agent,
        name,
        wire: Arc::new(AtomicU64::new(0)),
        totals: Arc::new(Mutex::new(Totals::default())),
    });
    let slots: Vec<Arc<Slot>> = share
        .iter()
        .map(|(st, _)| {
            Arc::new(Slot {
                st: Arc::clone(st),
                times: Mutex::new(Timings::new()),
            })
        })
        .collect();
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (slot, (_, first)) in slots.iter().zip(&share) {
            set.spawn(connection(Arc::clone(&ctx), Arc::clone(slot), *first));
        }
        loop {
            match tokio::time::timeout(WATCH, set.join_next()).await {
                Ok(None) => break,
                Ok(Some(_)) => {}
                Err(_) => {
                    if sh.cut(Instant::now()) {
                        set.abort_all();
                        while set.join_next().await.is_some() {}
                        break;
                    }
                }
            }
        }
    });
    // The runtime goes first: what its tasks still hold is closed.
    drop(rt);
    for slot in &slots {
        slot.st.finish();
        if let Ok(mut t) = slot.times.lock() {
            t.hand_over(&slot.st, every.is_some());
        }
    }
    let wire = ctx.wire.load(Ordering::Relaxed);
    let totals = ctx.totals.lock().map(|mut t| std::mem::take(&mut *t));
    if let Ok(t) = totals {
        sh.add_totals(wire, t.unread, &t.status, &t.kinds);
    }
}

/// One connection: requests one after another (or on its schedule) until
/// the run's end or the budget is spent.
async fn connection(ctx: Arc<Ctx>, slot: Arc<Slot>, mut due: Option<Instant>) {
    let sh = &ctx.sh;
    let mut session: Option<Session> = None;
    loop {
        if let Some(d) = due {
            if d >= sh.deadline {
                return;
            }
            let mut sleep = std::pin::pin!(tokio::time::sleep_until(d.into()));
            match session.as_mut() {
                // The connection keeps answering the server meanwhile.
                Some(s) => {
                    if let Some(c) = s.link.conn.as_mut() {
                        let ended = poll_fn(|cx| match sleep.as_mut().poll(cx) {
                            Poll::Ready(()) => Poll::Ready(false),
                            Poll::Pending => c.as_mut().poll(cx).map(|_| true),
                        })
                        .await;
                        if ended {
                            s.link.conn = None;
                            sleep.await;
                        }
                    } else {
                        sleep.await;
                    }
                }
                None => sleep.await,
            }
        }
        if !sh.claim(Instant::now()) {
            return;
        }
        let intended = due;
        due = due.zip(ctx.every).map(|(d, e)| d + e);
        // A server that went away between requests (GOAWAY, close) costs
        // a new connection; the request is tried on it once more.
        let mut tries = 0;
        let outcome = loop {
            tries += 1;
            let mut s = match session.take() {
                Some(s) => s,
                None => match open(&ctx, &slot.st).await {
                    Ok(s) => s,
                    Err(f) => break Err(f),
                },
            };
            match request(&ctx, &slot, &mut s).await {
                Ok(done) => {
                    session = Some(s);
                    break Ok(done);
                }
                Err(Attempt::Gone) if tries < 2 => continue,
                Err(Attempt::Gone) => {
                    break Err(Failure::new(
                        Kind::Reset,
                        HttpError::Protocol(
                            "the server ended the HTTP/2 connection before the request was taken, twice"
                                .into(),
                        ),
                    ))
                }
                Err(Attempt::Failed(f)) => break Err(f),
            }
        };
        let now = Instant::now();
        match outcome {
            Ok((t0, first, status)) => {
                if let Ok(mut t) = slot.times.lock() {
                    t.record(t0, first, intended, now);
                }
                slot.st.requests.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut t) = ctx.totals.lock() {
                    crate::proto::http::add_status(&mut t.status, status, 1);
                }
            }
            Err(f) => {
                let connect = f.kind == Kind::Connect;
                if let Ok(mut t) = ctx.totals.lock() {
                    count(&mut t.kinds, f.kind);
                }
                if let Ok(mut g) = slot.st.error.lock() {
                    g.get_or_insert(f.error.to_string());
                }
                session = None;
                if connect && due.is_none() {
                    tokio::time::sleep(BACKOFF).await;
                }
            }
        }
    }
}

/// Connects, then TLS (ALPN h2) or clear text, then the HTTP/2 preface.
async fn open(ctx: &Ctx, st: &Arc<ConnStats>) -> Result<Session, Failure> {
    let sh = &ctx.sh;
    let target = sh.spec.target;
    let refused = |e: io::Error| {
        Failure::new(
            Kind::Connect,
            HttpError::io(format!("connecting to {target}"))(e),
        )
    };
    let std_sock = sys::connect_nonblocking(target).map_err(refused)?;
    let peek = std_sock.try_clone().map_err(refused)?;
    let sock = tokio::net::TcpStream::from_std(std_sock).map_err(refused)?;
    let connected = async {
        loop {
            sock.writable().await?;
            if let Some(e) = sock.take_error()? {
                return Err(e);
            }
            match sock.peer_addr() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                    tokio::task::yield_now().await;
                }
                Err(e) => return Err(e),
            }
        }
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, connected).await {
        Ok(r) => r.map_err(refused)?,
        Err(_) => return Err(refused(io::ErrorKind::TimedOut.into())),
    }
    // Requests are small and one at a time: no Nagle delay.
    sock.set_nodelay(true)
        .map_err(|e| Failure::from(HttpError::io("setting TCP_NODELAY")(e)))?;
    st.attach(peek.as_raw_fd());
    let io = Counted {
        io: sock,
        read: Arc::clone(&ctx.wire),
    };
    match start(ctx, io).await {
        Ok((send, conn)) => Ok(Session {
            send,
            link: Link::new(conn),
            peek,
            st: Arc::clone(st),
            totals: Arc::clone(&ctx.totals),
        }),
        Err(f) => {
            st.detach();
            Err(f)
        }
    }
}

/// On a connected socket: TLS with ALPN h2 for https, then HTTP/2's
/// preface.
async fn start(
    ctx: &Ctx,
    io: Counted<tokio::net::TcpStream>,
) -> Result<(h2::client::SendRequest<Bytes>, Driver), Failure> {
    let sh = &ctx.sh;
    let target = sh.spec.target;
    let mut b = h2::client::Builder::new();
    b.initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    match (&sh.spec.tls, &ctx.name) {
        (Some(cfg), Some(name)) => {
            let hs = tokio_rustls::TlsConnector::from(Arc::clone(cfg)).connect(name.clone(), io);
            let tls = match tokio::time::timeout(STALL, hs).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => return Err(handshake_failure(target, e)),
                Err(_) => {
                    return Err(Failure::new(
                        Kind::Timeout,
                        HttpError::Tls(format!("TLS handshake with {target}: timed out")),
                    ))
                }
            };
            let conn = tls.get_ref().1;
            super::tls::remember_version(&sh.tls_version, conn);
            if conn.alpn_protocol() != Some(b"h2".as_slice()) {
                return Err(Failure::protocol(
                    format!(
                        "the server at {target} did not agree to HTTP/2 in the TLS handshake \
                         (ALPN h2); leave out --http2 for HTTP/1.1, or turn HTTP/2 on in the \
                         server (nginx: `listen ... ssl http2`)"
                    ),
                    Kind::Protocol,
                ));
            }
            handshake(&b, tls, target).await
        }
        _ => handshake(&b, io, target).await,
    }
}

/// The HTTP/2 preface and SETTINGS; the connection's driver is then
/// polled by the task that sends the requests (its errors reach them).
async fn handshake<T>(
    b: &h2::client::Builder,
    io: T,
    target: std::net::SocketAddr,
) -> Result<(h2::client::SendRequest<Bytes>, Driver), Failure>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match tokio::time::timeout(STALL, b.handshake::<_, Bytes>(io)).await {
        Ok(Ok((send, conn))) => Ok((send, Box::pin(conn))),
        Ok(Err(e)) => Err(h2_failure(&e, "starting HTTP/2", target)),
        Err(_) => Err(Failure::new(
            Kind::Timeout,
            HttpError::Protocol(format!(
                "starting HTTP/2 with {target}: no answer in {STALL:?}"
            )),
        )),
    }
}

/// How a request attempt ended, when it did not give a response.
enum Attempt {
    /// The connection was closing before the request was taken: retry it
    /// on a new one.
    Gone,
    Failed(Failure),
}

/// One GET and its whole body: (send time, first byte, status).
async fn request(
    ctx: &Ctx,
    slot: &Slot,
    s: &mut Session,
) -> Result<(Instant, Instant, u16), Attempt> {
    let target = ctx.sh.spec.target;
    let send = &mut s.send;
    match s.link.wait(|cx| send.poll_ready(cx)).await {
        Ok(Ok(())) => {}
        // Closed, or closing gracefully, before anything was sent: a new
        // connection. Any other reason is the server's answer.
        Ok(Err(e)) if refused(&e) || e.is_io() => return Err(Attempt::Gone),
        Ok(Err(e)) => return Err(Attempt::Failed(h2_failure(&e, "opening a stream", target))),
        Err(Waited::Closed) => return Err(Attempt::Gone),
        Err(Waited::Stalled) => {
            return Err(Attempt::Failed(Failure::new(
                Kind::Timeout,
                HttpError::Protocol(format!(
                    "{target}: no HTTP/2 stream could be opened in {STALL:?}"
                )),
            )))
        }
    }
    let mut req = http::Request::new(());
    *req.uri_mut() = ctx.uri.clone();
    req.headers_mut()
        .insert(http::header::USER_AGENT, ctx.agent.clone());
    req.headers_mut()
        .insert(http::header::ACCEPT, http::HeaderValue::from_static("*/*"));
    let t0 = Instant::now();
    let (mut resp, _) = match s.send.send_request(req, true) {
        Ok(r) => r,
        Err(e) if refused(&e) => return Err(Attempt::Gone),
        Err(e) => return Err(Attempt::Failed(h2_failure(&e, "sending a request", target))),
    };
    let resp = match s.link.wait(|cx| Pin::new(&mut resp).poll(cx)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) if refused(&e) => return Err(Attempt::Gone),
        Ok(Err(e)) => {
            return Err(Attempt::Failed(h2_failure(
                &e,
                "waiting for a response",
                target,
            )))
        }
        Err(Waited::Closed) => return Err(Attempt::Failed(closed(target))),
        Err(Waited::Stalled) => {
            return Err(Attempt::Failed(stalled(
                target,
                "the response did not start",
            )))
        }
    };
    let first = Instant::now();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    loop {
        match s.link.wait(|cx| body.poll_data(cx)).await {
            Ok(None) => break,
            Ok(Some(Ok(chunk))) => {
                let n = chunk.len();
                slot.st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                let _ = body.flow_control().release_capacity(n);
            }
            Ok(Some(Err(e))) => {
                return Err(Attempt::Failed(h2_failure(&e, "reading a body", target)))
            }
            Err(Waited::Closed) => return Err(Attempt::Failed(closed(target))),
            Err(Waited::Stalled) => {
                return Err(Attempt::Failed(stalled(target, "the body stopped")))
            }
        }
    }
    Ok((t0, first, status))
}

/// The connection ended under a request without h2 saying why (h2 ends
/// every stream with an error when its connection ends: a safety net).
fn closed(target: std::net::SocketAddr) -> Failure {
    Failure::new(
        Kind::Reset,
        HttpError::Protocol(format!(
            "{target}: the HTTP/2 connection ended in the middle of a request"
        )),
    )
}

fn stalled(target: std::net::SocketAddr, what: &str) -> Failure {
    Failure::new(
        Kind::Timeout,
        HttpError::io(format!("{target}: {what} for {STALL:?}"))(io::ErrorKind::TimedOut.into()),
    )
}

/// The server refused the stream without processing it, or was going away
/// gracefully: the request may be sent again on a new connection.
fn refused(e: &h2::Error) -> bool {
    e.reason() == Some(h2::Reason::REFUSED_STREAM)
        || (e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR))
}

/// An h2 error as a failure of the right kind, with what the server said.
fn h2_failure(e: &h2::Error, what: &str, target: std::net::SocketAddr) -> Failure {
    if let Some(io) = e.get_io() {
        let kind = match io.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Kind::Timeout,
            io::ErrorKind::InvalidData => Kind::Tls,
            _ => Kind::Reset,
        };
        return Failure::new(
            kind,
            HttpError::io(format!("{what} to/from {target}"))(io::Error::new(
                io.kind(),
                io.to_string(),
            )),
        );
    }
    let remote = e.is_remote() && (e.is_go_away() || e.is_reset());
    let why = if e.reason() == Some(h2::Reason::HTTP_1_1_REQUIRED) {
        format!(
            "{what}: the server at {target} asked for HTTP/1.1 (HTTP_1_1_REQUIRED): it may not \
             speak HTTP/2 here; leave out --http2 for HTTP/1.1"
        )
    } else if remote {
        format!(
            "{what}: the server ended the {} ({e})",
            if e.is_reset() { "stream" } else { "connection" }
        )
    } else {
        format!(
            "{what}: {e}; the server at {target} may not speak HTTP/2 here (h2c needs prior-knowledge \
             support, e.g. nginx `listen ... http2`; leave out --http2 for HTTP/1.1)"
        )
    };
    let kind = if remote && e.reason() != Some(h2::Reason::HTTP_1_1_REQUIRED) {
        Kind::Reset
    } else {
        Kind::Protocol
    };
    Failure::new(kind, HttpError::Protocol(why))
}
