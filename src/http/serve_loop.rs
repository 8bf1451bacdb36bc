//! One worker of the download server: an epoll event loop (level
//! triggered, non-blocking sockets) that accepts from the shared listener
//! and drives each connection's state machine: TLS handshake, request head
//! (within the request timeout), request body (`Content-Length` or
//! chunked, decoded by `chunked`) read and discarded, response
//! head (MSG_MORE) and body by sendfile(2) from the object (plain TCP and
//! kTLS) or through rustls, and a lingering close that lets the client
//! read an error answer. `serve_shared` holds what the loops share.

use super::chunked;
use super::serve_shared::{Refusal, Shared, TLS_REFUSAL_ALERT};
use super::tls;
use super::wire;
use super::ConnStats;
use crate::sys::{self, Epoll, Interest, Ready};
use rustls::ServerConnection;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod handoff;
mod request;
mod send;
pub(super) use handoff::Handoff;

const LISTENER: u64 = u64::MAX;
const WAKE: u64 = u64::MAX - 1;
/// Bytes one connection may send per wake-up before the others get a turn.
const SEND_BUDGET: u64 = 16 << 20;
/// Bodies from this size on are sent corked (TCP_CORK until the last byte
/// is queued): only full segments leave while the body streams. Without
/// it, each sendfile's tail went out as a short segment pushed from this
/// thread's CPU while ACKs pushed the rest from the receiver's: on a veth
/// pair that reorders, and one connection lost 40 % to spurious
/// retransmits (bench/README.md). Small answers skip the two syscalls.
const CORK_FROM: u64 = 1 << 20;
/// Bytes per sendfile call: the kernel sends what the socket buffer takes.
const SENDFILE_CHUNK: u64 = 8 << 20;
/// Plaintext bytes per rustls write (one pread each).
const TLS_CHUNK: usize = 256 << 10;
/// How long a closing connection may keep reading what the client still
/// sends (so it reads the answer before the close), and how much.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;
/// A body that makes no progress this long is abandoned.
const STALL: Duration = Duration::from_secs(30);
/// How often deadlines are checked (and `stop` seen).
const TICK: Duration = Duration::from_millis(100);
/// The listener pauses this long when the process is out of descriptors.
const FD_PAUSE: Duration = Duration::from_millis(200);

enum State {
    /// TLS handshake (rustls), before any request.
    Handshake,
    /// Waiting for a complete request head.
    Head,
    /// Reading and dropping the request body before answering it.
    Discard { left: u64, req: wire::RequestHead },
    /// The same for a chunked body, as it decodes.
    DiscardChunked {
        dec: chunked::Decoder,
        req: wire::RequestHead,
    },
    /// Sending `out` and then `body`.
    Send,
    /// Write side shut; reading and dropping until the client closes.
    Linger,
}

struct Transfer {
    source: Source,
    off: u64,
    end: u64,
}

enum Source {
    Pattern,
    File(File),
}

struct Conn {
    sock: TcpStream,
    id: u16,
    peer: IpAddr,
    stats: Arc<ConnStats>,
    /// User-space TLS, and the handshake of kTLS connections.
    tls: Option<Box<ServerConnection>>,
    /// The tls ULP is on: the keys go to the kernel after the handshake.
    ktls_pending: bool,
    state: State,
    /// Plaintext received and not yet consumed.
    inbuf: Vec<u8>,
    /// Deadline of the current wait (handshake, head, body, linger).
    deadline: Instant,
    out: Vec<u8>,
    out_at: usize,
    body: Option<Transfer>,
    keep_alive: bool,
    /// The answer in `out`/`body` serves the object (200/206): a request
    /// counted when it is out.
    served: bool,
    /// TCP_CORK is on for the answer being sent.
    corked: bool,
    last_progress: Instant,
    interest: Interest,
    lingered: usize,
}

enum Step {
    Wait(Interest),
    Close,
}

pub(super) struct Worker<'a> {
    sh: &'a Shared,
    handoff: &'a Handoff,
    me: usize,
    wake_rx: UnixStream,
    ep: Epoll,
    listener: TcpListener,
    listening: bool,
    paused_until: Option<Instant>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    scratch: Vec<u8>,
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

impl<'a> Worker<'a> {
    pub(super) fn new(
        sh: &'a Shared,
        handoff: &'a Handoff,
        me: usize,
        wake_rx: UnixStream,
        listener: TcpListener,
    ) -> io::Result<Self> {
        let ep = Epoll::new(256)?;
        ep.add(wake_rx.as_raw_fd(), WAKE, Interest::READ)?;
        let mut w = Worker {
            sh,
            handoff,
            me,
            wake_rx,
            ep,
            listener,
            listening: false,
            paused_until: None,
            conns: Vec::new(),
            free: Vec::new(),
            scratch: vec![0u8; TLS_CHUNK.max(64 << 10)],
        };
        w.listen(true)?;
        Ok(w)
    }

    fn listen(&mut self, on: bool) -> io::Result<()> {
        if on == self.listening {
            return Ok(());
        }
        let fd = self.listener.as_raw_fd();
        if on {
            let interest = Interest {
                read: true,
                write: false,
                exclusive: true,
            };
            self.ep.add(fd, LISTENER, interest)?;
        } else {
            self.ep.delete(fd)?;
        }
        self.listening = on;
        Ok(())
    }

    /// Runs until the server stops; every connection is closed on the way out.
    pub(super) fn run(mut self) {
        let mut next_tick = Instant::now() + TICK;
        while !self.sh.stopping() {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let ready = match self.ep.wait(wait.as_millis().min(1000) as i32) {
                Ok(r) => r,
                Err(_) => {
                    self.sh.errors.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(TICK);
                    Vec::new()
                }
            };
            for r in ready {
                if r.token == LISTENER {
                    self.accept_some();
                } else if r.token == WAKE {
                    self.take_inbox();
                } else {
                    self.event(r);
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick = now + TICK;
                self.check_deadlines(now);
                if self.paused_until.is_some_and(|t| now >= t) {
                    self.paused_until = None;
                    if self.listen(true).is_err() {
                        self.sh.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        for slot in 0..self.conns.len() {
            self.close(slot);
        }
        // Connections handed over as the server stopped are just closed.
        if let Ok(mut q) = self.handoff.inbox[self.me].lock() {
            q.clear();
        }
    }

    fn accept_some(&mut self) {
        for _ in 0..64 {
            match self.listener.accept() {
                Ok((sock, peer)) => self.place(sock, peer.ip()),
                Err(e) if would_block(&e) => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    // Out of descriptors: the pending connection stays in
                    // the backlog; stop polling the listener for a while
                    // instead of spinning on it.
                    self.sh.refused(Refusal::Descriptors);
                    if self.listen(false).is_ok() {
                        self.paused_until = Some(Instant::now() + FD_PAUSE);
                    }
                    return;
                }
                Err(_) => {
                    // ECONNABORTED and the like: that one client's problem.
                    self.sh.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Keeps a new connection, or hands it to a loop with fewer.
    fn place(&mut self, sock: TcpStream, peer: IpAddr) {
        let to = self.handoff.least_loaded(self.me);
        if to == self.me {
            return self.admit(sock, peer);
        }
        // Counted at once, so a burst of accepts spreads over the loops.
        self.handoff.load[to].fetch_add(1, Ordering::Relaxed);
        match self.handoff.inbox[to].lock() {
            Ok(mut q) => q.push((sock, peer)),
            Err(_) => {
                self.handoff.load[to].fetch_sub(1, Ordering::Relaxed);
                return self.admit(sock, peer);
            }
        }
        // A full wake socket means a wake-up is already pending.
        let _ = (&self.handoff.wake[to]).write(&[1]);
    }

    fn take_inbox(&mut self) {
        let mut sink = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut sink), Ok(n) if n > 0) {}
        let handed = match self.handoff.inbox[self.me].lock() {
            Ok(mut q) => std::mem::take(&mut *q),
            Err(_) => return,
        };
        for (sock, peer) in handed {
            // `place` counted it here already; `admit` counts it again.
            self.handoff.load[self.me].fetch_sub(1, Ordering::Relaxed);
            self.admit(sock, peer);
        }
    }

    fn admit(&mut self, sock: TcpStream, peer: IpAddr) {
        if sock.set_nonblocking(true).is_err() {
            self.sh.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let _ = sock.set_nodelay(true);
        let (id, stats) = match self.sh.admit(peer, sock.as_raw_fd()) {
            Ok(v) => v,
            Err(why) => {
                self.sh.refused(why);
                refuse(self.sh, &sock);
                return;
            }
        };
        let now = Instant::now();
        let mut conn = Conn {
            sock,
            id,
            peer,
            stats,
            tls: None,
            ktls_pending: false,
            state: State::Head,
            inbuf: Vec::new(),
            deadline: now + self.sh.request_timeout,
            out: Vec::new(),
            out_at: 0,
            body: None,
            keep_alive: true,
            served: false,
            corked: false,
            last_progress: now,
            interest: Interest::READ,
            lingered: 0,
        };
        if let Some(cfg) = &self.sh.tls {
            conn.ktls_pending = self.sh.ktls && self.set_ulp(&conn.sock);
            match ServerConnection::new(Arc::clone(cfg)) {
                Ok(mut t) => {
                    t.set_buffer_limit(Some(4 * TLS_CHUNK));
                    conn.tls = Some(Box::new(t));
                    conn.state = State::Handshake;
                }
                Err(_) => {
                    self.sh.errors.fetch_add(1, Ordering::Relaxed);
                    self.sh.finish(conn.id, conn.peer);
                    return;
                }
            }
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        if self
            .ep
            .add(conn.sock.as_raw_fd(), slot as u64, Interest::READ)
            .is_err()
        {
            self.sh.errors.fetch_add(1, Ordering::Relaxed);
            self.sh.finish(conn.id, conn.peer);
            self.free.push(slot);
            return;
        }
        self.conns[slot] = Some(conn);
        self.handoff.load[self.me].fetch_add(1, Ordering::Relaxed);
    }

    /// The ULP goes on before any TLS byte; without it, user-space TLS.
    fn set_ulp(&self, sock: &TcpStream) -> bool {
        tls::set_ulp_or_note(sock.as_raw_fd(), &self.sh.ktls_note)
    }

    fn event(&mut self, r: Ready) {
        let slot = r.token as usize;
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let step = self.drive(&mut conn);
        self.settle(slot, conn, step);
    }

    fn settle(&mut self, slot: usize, mut conn: Conn, step: Step) {
        match step {
            Step::Wait(interest) => {
                if interest != conn.interest {
                    if self
                        .ep
                        .modify(conn.sock.as_raw_fd(), slot as u64, interest)
                        .is_err()
                    {
                        self.conns[slot] = Some(conn);
                        self.close(slot);
                        return;
                    }
                    conn.interest = interest;
                }
                self.conns[slot] = Some(conn);
            }
            Step::Close => {
                self.conns[slot] = Some(conn);
                self.close(slot);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let _ = self.ep.delete(conn.sock.as_raw_fd());
        // A body cut short (the client left): what its socket still held
        // never reached the client, so it is not counted as sent.
        if let (Some(b), None) = (&conn.body, &conn.tls) {
            if b.off < b.end {
                let queued = sys::unacked_bytes(conn.sock.as_raw_fd()).unwrap_or(0);
                let sent = conn.stats.bytes.load(Ordering::Relaxed);
                let back = queued.min(sent);
                conn.stats.bytes.fetch_sub(back, Ordering::Relaxed);
                self.sh.wire_bytes.fetch_sub(back, Ordering::Relaxed);
            }
        }
        // TCP_INFO is taken while the socket is still open.
        self.sh.finish(conn.id, conn.peer);
        drop(conn);
        self.free.push(slot);
        self.handoff.load[self.me].fetch_sub(1, Ordering::Relaxed);
    }

    fn check_deadlines(&mut self, now: Instant) {
        for slot in 0..self.conns.len() {
            let Some(mut conn) = self.conns[slot].take() else {
                continue;
            };
            let step = match &conn.state {
                State::Send if now.duration_since(conn.last_progress) > STALL => {
                    self.sh.errors.fetch_add(1, Ordering::Relaxed);
                    self.sh
                        .note_error(&conn.stats, "the client took nothing for 30 s");
                    Step::Close
                }
                State::Linger if now >= conn.deadline => Step::Close,
                State::Handshake
                | State::Head
                | State::Discard { .. }
                | State::DiscardChunked { .. }
                    if now >= conn.deadline =>
                {
                    self.timed_out(&mut conn)
                }
                _ => Step::Wait(conn.interest),
            };
            self.settle(slot, conn, step);
        }
    }

    /// A request (or handshake) that did not arrive in time: a started
    /// request gets 408, an idle connection is just closed.
    fn timed_out(&mut self, conn: &mut Conn) -> Step {
        self.sh.timeouts.fetch_add(1, Ordering::Relaxed);
        let started = match conn.state {
            State::Discard { .. } | State::DiscardChunked { .. } => true,
            State::Head => !conn.inbuf.is_empty(),
            _ => false,
        };
        if !started {
            return Step::Close;
        }
        self.sh.count_status(408);
        let answer = wire::error_response(408, false);
        // One try: a client this slow does not get to hold the server.
        let _ = self.write_plain_or_tls(conn, &answer);
        self.linger(conn)
    }

    fn write_plain_or_tls(&mut self, conn: &mut Conn, b: &[u8]) -> io::Result<usize> {
        match conn.tls.as_mut() {
            None => sys::send_nonblocking(conn.sock.as_raw_fd(), b, false),
            Some(t) => {
                let n = t.writer().write(b)?;
                while t.wants_write() {
                    t.write_tls(&mut conn.sock)?;
                }
                Ok(n)
            }
        }
    }

    /// Shuts the write side (after TLS close_notify) and reads until the
    /// client closes or [`LINGER`] passes.
    fn linger(&mut self, conn: &mut Conn) -> Step {
        if let Some(t) = conn.tls.as_mut() {
            t.send_close_notify();
            while t.wants_write() {
                if t.write_tls(&mut conn.sock).is_err() {
                    break;
                }
            }
        }
        if conn.sock.shutdown(Shutdown::Write).is_err() {
            return Step::Close;
        }
        conn.state = State::Linger;
        conn.deadline = Instant::now() + LINGER;
        conn.body = None;
        Step::Wait(Interest::READ)
    }

    /// Moves one connection as far as it goes without blocking.
    fn drive(&mut self, conn: &mut Conn) -> Step {
        loop {
            let next = match conn.state {
                State::Handshake => self.handshake(conn),
                State::Head => self.head(conn),
                State::Discard { .. } => self.discard(conn),
                State::DiscardChunked { .. } => self.discard_chunked(conn),
                State::Send => self.send(conn),
                State::Linger => return self.drain_linger(conn),
            };
            match next {
                Ok(Some(step)) => return step,
                Ok(None) => continue, // the state changed: go on
                Err(e) => {
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset
                            | io::ErrorKind::BrokenPipe
                            | io::ErrorKind::UnexpectedEof
                    ) {
                        self.sh.errors.fetch_add(1, Ordering::Relaxed);
                        self.sh.note_error(&conn.stats, &e.to_string());
                    }
                    return Step::Close;
                }
            }
        }
    }

    fn drain_linger(&mut self, conn: &mut Conn) -> Step {
        loop {
            match conn.sock.read(&mut self.scratch) {
                Ok(0) => return Step::Close,
                Ok(n) => {
                    conn.lingered += n;
                    if conn.lingered > LINGER_BYTES {
                        return Step::Close;
                    }
                }
                Err(e) if would_block(&e) => return Step::Wait(Interest::READ),
                Err(_) => return Step::Close,
            }
        }
    }
}

/// Over a limit: a plain client gets 503, a TLS client a TLS alert (never
/// plaintext on a TLS port); then the connection closes.
fn refuse(sh: &Shared, sock: &TcpStream) {
    let fd = sock.as_raw_fd();
    if sh.tls.is_some() {
        let _ = sys::send_nonblocking(fd, &TLS_REFUSAL_ALERT, false);
    } else {
        sh.count_status(503);
        let _ = sys::send_nonblocking(fd, &wire::error_response(503, false), false);
    }
    let _ = sock.shutdown(Shutdown::Write);
}
