//! One event loop of the download client: a thread that owns a share of
//! the connections, each a state machine on a non-blocking socket driven
//! by epoll (level triggered): connect, TLS handshake, request, response
//! head (parsed by `wire`), body discarded (MSG_TRUNC on plain TCP, rustls
//! or kTLS otherwise), keep-alive or a new connection, stalls and the rate
//! schedule on timers. It adds to the run's figures (`Shared`, the
//! connections' `ConnStats`) and knows nothing of intervals or summaries.
//! The protocol's own steps are methods of `Driver` in other files:
//! HTTP/1.1's (send, head, body, an idle socket) in `client_h1`, HTTP/2's
//! (`--http2`: frames in and out) in `client_h2`.

use super::client_conn::{would_block, Conn, Link, State};
use super::client_shared::{
    count, handshake_failure, Failure, Kind, Shared, CONNECT_BACKOFF, CONNECT_TIMEOUT,
    FINISH_GRACE, STALL,
};
use super::h2::hpack::RequestBlock;
use super::{tls, HttpError};
use crate::proto::http::{ErrorKinds, StatusCount};
use crate::sys::{self, Epoll, Interest, Ready};
use rustls::pki_types::ServerName;
use rustls::ClientConnection;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Body bytes asked for per read: plain TCP discards them in the kernel.
pub(super) const DISCARD: usize = 4 << 20;
/// How often stalls are looked for, and the longest wait (a stop is seen).
const TICK: Duration = Duration::from_millis(100);
/// The least a ramp's waiting connection sleeps (rounding never spins).
const RAMP_STEP: Duration = Duration::from_millis(1);
/// Ready sockets taken per wait.
const BATCH: usize = 256;
const READ_WRITE: Interest = Interest {
    read: true,
    write: true,
    exclusive: false,
};

/// What a connection does next.
pub(super) enum Step {
    /// It moved on: run it again.
    Go,
    /// It waits for its socket.
    Wait(Interest),
}

/// One loop: its connections and the rest, apart so a connection can be
/// driven while the loop's buffers and counts are borrowed.
pub(super) struct Loop {
    conns: Vec<Conn>,
    drv: Driver,
}

pub(super) struct Driver {
    pub(super) sh: Arc<Shared>,
    ep: Epoll,
    /// The request, built once: every request of the run is the same.
    pub(super) request: Vec<u8>,
    /// With HTTP/2: the request's header block, built once too, and its
    /// body (`--body`), shared by every request.
    pub(super) h2_block: Option<RequestBlock>,
    pub(super) body: Arc<[u8]>,
    server_name: Option<ServerName<'static>>,
    every: Option<Duration>,
    /// Wake-ups of idle connections: (when, slot); stale entries skipped.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    pub(super) discard: Vec<u8>,
    /// Connections not done yet.
    live: usize,
    pub(super) wire: u64,
    /// Bytes queued unread in sockets when they were closed.
    unread: u64,
    /// Request body bytes of the completed requests.
    body_bytes: u64,
    status: Vec<StatusCount>,
    kinds: ErrorKinds,
}

impl Loop {
    /// `every`: with a rate, each connection's spacing of requests;
    /// `h2_block`: HTTP/2's request header block (`--http2`).
    pub(super) fn new(
        sh: Arc<Shared>,
        mut conns: Vec<Conn>,
        every: Option<Duration>,
        h2_block: Option<RequestBlock>,
    ) -> Result<Loop, HttpError> {
        let ep = Epoll::new(BATCH).map_err(HttpError::io("creating an epoll set"))?;
        let request = super::request::h1_request(&sh.spec.request, &sh.spec.path, &sh.spec.host);
        let body: Arc<[u8]> = Arc::from(sh.spec.request.body.as_slice());
        let server_name = match sh.spec.tls {
            None => None,
            Some(_) => Some(ServerName::try_from(sh.spec.host.clone()).map_err(|e| {
                HttpError::Tls(format!(
                    "TLS server name '{}': {e}; give a host name or an IP address",
                    sh.spec.host
                ))
            })?),
        };
        for (slot, c) in conns.iter_mut().enumerate() {
            c.slot = slot;
        }
        Ok(Loop {
            drv: Driver {
                live: conns.len(),
                sh,
                ep,
                request,
                h2_block,
                body,
                server_name,
                every,
                timers: BinaryHeap::new(),
                discard: vec![0u8; DISCARD],
                wire: 0,
                unread: 0,
                body_bytes: 0,
                status: Vec::new(),
                kinds: ErrorKinds::default(),
            },
            conns,
        })
    }

    /// Runs until every connection is done or the run is cut, then hands
    /// the loop's figures to the run.
    pub(super) fn run(mut self) {
        let now = Instant::now();
        for c in &mut self.conns {
            self.drv.advance(c, now);
        }
        let cut_at = self.drv.sh.deadline + FINISH_GRACE;
        let mut events: Vec<Ready> = Vec::with_capacity(BATCH);
        let mut next_tick = now + TICK;
        loop {
            let now = Instant::now();
            if self.drv.live == 0 || self.drv.sh.cut(now) {
                break;
            }
            if now >= next_tick {
                next_tick = now + TICK;
                for c in &mut self.conns {
                    self.drv.check_stall(c, now);
                }
            }
            if self.drv.live == 0 {
                break;
            }
            let until = self
                .drv
                .timers
                .peek()
                .map_or(next_tick, |t| t.0 .0.min(next_tick))
                .min(cut_at);
            let timeout = until.saturating_duration_since(Instant::now());
            if let Err(e) = self.drv.ep.wait_into(Some(timeout), &mut events) {
                // Only a broken epoll set fails here: end the loop and say so.
                for c in &self.conns {
                    if let Ok(mut g) = c.st.error.lock() {
                        g.get_or_insert(format!("waiting for socket events: {e}"));
                    }
                }
                break;
            }
            for r in &events {
                let Some(c) = self.conns.get_mut(r.token as usize) else {
                    continue;
                };
                self.drv.event(c, Instant::now());
            }
            // Timers after events: an idle socket the server closed while
            // this thread waited is seen closed before a request goes on it.
            let now = Instant::now();
            while let Some(&Reverse((at, slot))) = self.drv.timers.peek() {
                if at > now {
                    break;
                }
                self.drv.timers.pop();
                if let Some(c) = self.conns.get_mut(slot) {
                    if matches!(c.state, State::Idle { wake } if wake <= now) {
                        self.drv.advance(c, now);
                    }
                }
            }
        }
        self.finish();
    }

    fn finish(mut self) {
        for c in &mut self.conns {
            self.drv.close(c);
            c.st.finish();
            c.times.hand_over(&c.st, self.drv.every.is_some());
        }
        let d = &self.drv;
        d.sh.add_totals(d.wire, d.unread, &d.status, &d.kinds);
        d.sh.request_body_bytes
            .fetch_add(d.body_bytes, Ordering::Relaxed);
    }
}

impl Driver {
    /// A socket event: an idle connection's socket may have closed; any
    /// other runs on.
    fn event(&mut self, c: &mut Conn, now: Instant) {
        match c.state {
            State::Done => return,
            State::Idle { .. } => {
                if c.link.is_some() && c.h2.is_some() {
                    self.h2_idle(c, now);
                } else if c.link.is_some() {
                    self.idle_read(c, now);
                }
                return;
            }
            _ => {}
        }
        self.advance(c, now);
    }

    /// Runs one connection as far as it goes now.
    pub(super) fn advance(&mut self, c: &mut Conn, now: Instant) {
        loop {
            let step = match c.state {
                State::Done => return,
                State::Idle { wake } if wake > now => {
                    self.timers.push(Reverse((wake, c.slot)));
                    // A kept-alive socket is watched for the server closing it.
                    let want = c.link.as_ref().map(|_| Interest::READ);
                    if let Err(e) = self.watch(c, want) {
                        self.fail(c, Failure::io("watching a socket", false)(e), now);
                        continue;
                    }
                    return;
                }
                State::Idle { .. } => self.begin(c, now),
                State::Connecting { .. } => self.connecting(c, now),
                State::Handshake { .. } => self.handshake(c, now),
                State::Sending { .. }
                | State::Head
                | State::Body { .. }
                | State::Chunked(_)
                | State::UntilClose { .. }
                    if c.h2.is_some() =>
                {
                    self.h2_step(c, now)
                }
                State::Sending { at } => self.send(c, at),
                State::Head => self.head(c, now),
                State::Body { left } => self.body(c, left, now),
                State::Chunked(dec) => self.chunked(c, dec, now),
                State::UntilClose { got } => self.until_close(c, got, now),
            };
            match step {
                Ok(Step::Go) => {}
                Ok(Step::Wait(i)) => match self.watch(c, Some(i)) {
                    Ok(()) => return,
                    Err(e) => self.fail(c, Failure::io("watching a socket", false)(e), now),
                },
                Err(f) => self.fail(c, f, now),
            }
        }
    }

    /// Registers, changes or drops what epoll watches on the socket.
    fn watch(&mut self, c: &mut Conn, want: Option<Interest>) -> io::Result<()> {
        if c.interest == want {
            return Ok(());
        }
        let Some(link) = c.link.as_ref() else {
            c.interest = None;
            return Ok(());
        };
        let fd = link.sock.as_raw_fd();
        match (c.interest, want) {
            (None, Some(i)) => self.ep.add(fd, c.slot as u64, i)?,
            (Some(_), Some(i)) => self.ep.modify(fd, c.slot as u64, i)?,
            (Some(_), None) => self.ep.delete(fd)?,
            (None, None) => {}
        }
        c.interest = want;
        Ok(())
    }

    /// Closes the socket (which leaves the epoll set with it).
    pub(super) fn close(&mut self, c: &mut Conn) {
        c.h2 = None;
        if let Some(link) = c.link.take() {
            // What the kernel took in for us and we never read: the
            // interface counted it, so the wire cross-check needs it.
            self.unread += sys::unread_bytes(link.sock.as_raw_fd()).unwrap_or(0);
            c.st.detach();
        }
        c.interest = None;
    }

    fn done(&mut self, c: &mut Conn) {
        self.close(c);
        if !matches!(c.state, State::Done) {
            c.state = State::Done;
            self.live -= 1;
        }
    }

    /// After a response or a failure: the next request's time (or done,
    /// when its intended time is past the end).
    fn next(&mut self, c: &mut Conn, wake: Instant) {
        if c.due.is_some_and(|d| d >= self.sh.deadline) {
            self.done(c);
        } else {
            c.state = State::Idle { wake };
        }
    }

    pub(super) fn fail(&mut self, c: &mut Conn, f: Failure, now: Instant) {
        count(&mut self.kinds, f.kind);
        if let Ok(mut g) = c.st.error.lock() {
            g.get_or_insert(f.error.to_string());
        }
        self.close(c);
        let wake = match c.due {
            Some(due) => due,
            None if f.kind == Kind::Connect => now + CONNECT_BACKOFF,
            None => now,
        };
        self.next(c, wake);
    }

    /// A request's time has come: claim it from the budget, then connect
    /// or send.
    fn begin(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        // A ramp's connection past the target closes (the request it had in
        // flight is done) and waits for the target to come back above it.
        if let Some(wake) = self.sh.ramp_hold(c.st.id, now) {
            self.close(c);
            match wake.filter(|&w| w < self.sh.deadline) {
                Some(w) => {
                    c.state = State::Idle {
                        wake: w.max(now + RAMP_STEP),
                    }
                }
                None => self.done(c),
            }
            return Ok(Step::Go);
        }
        if c.due.is_some_and(|d| d >= self.sh.deadline) || !self.sh.claim(now) {
            self.done(c);
            return Ok(Step::Go);
        }
        c.intended = c.due;
        c.due = c.due.zip(self.every).map(|(d, e)| d + e);
        c.retried = false;
        // An HTTP/2 connection the server is closing takes no request.
        if c.h2.as_ref().is_some_and(|s| !s.can_request()) {
            self.close(c);
        }
        if c.link.is_some() {
            return self.start_request(c, now);
        }
        self.connect(c, now)
    }

    /// Opens a new socket for the request under way.
    pub(super) fn connect(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        let target = self.sh.spec.target;
        let tos = self.sh.spec.dscp.map(crate::proto::Dscp::tos);
        let sock = sys::connect_nonblocking_marked(target, tos).map_err(|e| {
            Failure::new(
                Kind::Connect,
                HttpError::io(format!("connecting to {target}"))(e),
            )
        })?;
        c.st.attach(sock.as_raw_fd());
        c.link = Some(Link::new(sock));
        c.interest = None;
        c.state = State::Connecting { since: now };
        Ok(Step::Wait(Interest::WRITE))
    }

    /// The connect under way: made, refused, or still going.
    fn connecting(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        let target = self.sh.spec.target;
        let refused = |e: io::Error| {
            Failure::new(
                Kind::Connect,
                HttpError::io(format!("connecting to {target}"))(e),
            )
        };
        let link = c.link.as_mut().ok_or_else(no_link)?;
        if let Some(e) = link.sock.take_error().map_err(refused)? {
            return Err(refused(e));
        }
        match link.sock.peer_addr() {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                return Ok(Step::Wait(Interest::WRITE))
            }
            Err(e) => return Err(refused(e)),
        }
        // Requests are small and one at a time: no Nagle delay.
        link.sock
            .set_nodelay(true)
            .map_err(HttpError::io("setting TCP_NODELAY"))?;
        let Some(cfg) = self.sh.spec.tls.clone() else {
            return self.start_request(c, now);
        };
        let fd = link.sock.as_raw_fd();
        link.ulp = self.sh.spec.ktls && tls::set_ulp_or_note(fd, &self.sh.ktls_note);
        let name = self.server_name.clone().ok_or_else(no_link)?;
        let session =
            ClientConnection::new(cfg, name).map_err(|e| HttpError::Tls(format!("TLS: {e}")))?;
        link.tls = Some(Box::new(session));
        c.state = State::Handshake { since: now };
        Ok(Step::Go)
    }

    fn handshake(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        let target = self.sh.spec.target;
        let link = c.link.as_mut().ok_or_else(no_link)?;
        let Link {
            sock, tls: session, ..
        } = link;
        let Some(t) = session.as_mut() else {
            return self.start_request(c, now);
        };
        let broken = |e: io::Error| handshake_failure(target, e);
        loop {
            while t.wants_write() {
                match t.write_tls(sock) {
                    Ok(_) => {}
                    Err(e) if would_block(&e) => return Ok(Step::Wait(READ_WRITE)),
                    Err(e) => return Err(broken(e)),
                }
            }
            if !t.is_handshaking() {
                break;
            }
            match t.read_tls(sock) {
                Ok(0) => return Err(broken(io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => self.wire += n as u64,
                Err(e) if would_block(&e) => return Ok(Step::Wait(Interest::READ)),
                Err(e) => return Err(broken(e)),
            }
            if let Err(e) = t.process_new_packets() {
                // rustls queued an alert: send it, then fail.
                let _ = t.write_tls(sock);
                return Err(broken(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
        }
        tls::remember_version(&self.sh.tls_version, t);
        if link.ulp {
            let Some(t) = link.tls.take() else {
                return Err(no_link());
            };
            let tls13 = t.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
            let secrets = (*t)
                .dangerous_extract_secrets()
                .map_err(|e| HttpError::Tls(format!("kTLS: extracting the session keys: {e}")))?;
            tls::enable_ktls(link.sock.as_raw_fd(), tls13, secrets)?;
            link.ktls = true;
            self.sh.ktls_used.store(true, Ordering::Relaxed);
        }
        self.start_request(c, now)
    }

    fn start_request(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        if self.h2_block.is_some() {
            return self.h2_start(c, now);
        }
        c.t0 = now;
        c.first = None;
        c.have = 0;
        c.state = State::Sending { at: 0 };
        let link = c.link.as_mut().ok_or_else(no_link)?;
        if let Some(t) = link.tls.as_mut() {
            // rustls encrypts the request into its queue; `send` drains it.
            t.writer()
                .write_all(&self.request)
                .map_err(Failure::io("sending a request", true))?;
        }
        Ok(Step::Go)
    }

    /// A whole response: its figures, then the next request's time.
    pub(super) fn complete(&mut self, c: &mut Conn, now: Instant) {
        c.times
            .record(c.t0, c.first.unwrap_or(now), c.intended, now);
        c.st.requests.fetch_add(1, Ordering::Relaxed);
        self.body_bytes += self.body.len() as u64;
        crate::proto::http::add_status(&mut self.status, c.status, 1);
        if !c.keep_alive {
            self.close(c);
        }
        let wake = c.due.unwrap_or(now);
        self.next(c, wake);
    }

    /// Fails what has waited too long: a connect, a handshake, a response
    /// that does not start, a body that stops.
    fn check_stall(&mut self, c: &mut Conn, now: Instant) {
        let target = self.sh.spec.target;
        let since = |t: Instant| now.saturating_duration_since(t);
        // A slow body may sit under SO_RCVLOWAT for seconds: take what is
        // queued, so slow is not mistaken for stalled.
        let in_body = matches!(
            c.state,
            State::Body { .. } | State::Chunked(_) | State::UntilClose { .. }
        );
        if in_body && since(c.quiet) > STALL / 4 {
            if let Some(l) = c.link.as_mut() {
                l.wait_for(0);
            }
        }
        let f = match c.state {
            State::Connecting { since: t } if since(t) > CONNECT_TIMEOUT => Failure::new(
                Kind::Connect,
                HttpError::io(format!("connecting to {target}"))(io::ErrorKind::TimedOut.into()),
            ),
            State::Handshake { since: t } if since(t) > STALL => Failure::new(
                Kind::Timeout,
                HttpError::Tls(format!("TLS handshake with {target}: timed out")),
            ),
            State::Sending { .. } | State::Head if since(c.t0) > STALL => {
                Failure::protocol(format!("no response within {STALL:?}"), Kind::Timeout)
            }
            State::Body { .. } | State::Chunked(_) | State::UntilClose { .. }
                if since(c.quiet) > STALL =>
            {
                Failure::protocol(format!("the body stalled for {STALL:?}"), Kind::Timeout)
            }
            _ => return,
        };
        self.fail(c, f, now);
        self.advance(c, now);
    }
}

/// A state that needs a socket found none: a bug, reported as one.
pub(super) fn no_link() -> Failure {
    Failure::protocol(
        "internal: a connection step ran without its socket",
        Kind::Protocol,
    )
}
