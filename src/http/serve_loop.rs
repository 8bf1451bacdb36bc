//! One worker of the download server: an epoll event loop (level
//! triggered, non-blocking sockets) that accepts from the shared listener
//! and drives each connection's state machine: TLS handshake, request head
//! (within the request timeout), request body (`Content-Length` or
//! chunked, decoded by `chunked`) read and discarded, response
//! head (MSG_MORE) and body by sendfile(2) from the object (plain TCP and
//! kTLS) or through rustls, and a lingering close that lets the client
//! read an error answer. `serve_shared` holds what the loops share.

use super::chunked::{self, ChunkError};
use super::content;
use super::serve_shared::{Body, Refusal, Shared, TLS_REFUSAL_ALERT};
use super::tls;
use super::wire::{self, RangeAsk, Reject, RequestBody, MAX_HEAD, MAX_REQUEST_BODY};
use super::ConnStats;
use crate::sys::tls as ffi;
use crate::sys::{self, Epoll, Interest, Ready};
use rustls::ServerConnection;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Spreads connections over the loops: whichever loop accepts hands a
/// connection to the loop with the fewest open (through its inbox, and a
/// byte on its wake socket), so 4 connections on 2 loops are 2 and 2, not
/// however the accept wake-ups fell.
pub(super) struct Handoff {
    load: Vec<AtomicUsize>,
    inbox: Vec<Mutex<Vec<(TcpStream, IpAddr)>>>,
    wake: Vec<UnixStream>,
}

impl Handoff {
    /// The hand-off of `n` loops and each loop's end of its wake socket.
    pub(super) fn new(n: usize) -> io::Result<(Handoff, Vec<UnixStream>)> {
        let mut wake = Vec::with_capacity(n);
        let mut rx = Vec::with_capacity(n);
        for _ in 0..n {
            let (a, b) = UnixStream::pair()?;
            a.set_nonblocking(true)?;
            b.set_nonblocking(true)?;
            wake.push(a);
            rx.push(b);
        }
        let h = Handoff {
            load: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            inbox: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            wake,
        };
        Ok((h, rx))
    }

    /// No loops (they could not be set up).
    pub(super) fn empty() -> Handoff {
        Handoff {
            load: Vec::new(),
            inbox: Vec::new(),
            wake: Vec::new(),
        }
    }

    /// A loop that did not start never gets a connection.
    pub(super) fn retire(&self, me: usize) {
        if let Some(l) = self.load.get(me) {
            l.store(usize::MAX / 2, Ordering::Relaxed);
        }
    }

    fn least_loaded(&self, me: usize) -> usize {
        let mine = self.load[me].load(Ordering::Relaxed);
        let (best, low) = self
            .load
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.load(Ordering::Relaxed)))
            .min_by_key(|&(_, l)| l)
            .unwrap_or((me, mine));
        if low < mine {
            best
        } else {
            me
        }
    }
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

    fn handshake(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        let Some(t) = conn.tls.as_mut() else {
            conn.state = State::Head;
            return Ok(None);
        };
        loop {
            while t.wants_write() {
                match t.write_tls(&mut conn.sock) {
                    Ok(_) => {}
                    Err(e) if would_block(&e) => {
                        return Ok(Some(Step::Wait(Interest {
                            read: true,
                            write: true,
                            exclusive: false,
                        })))
                    }
                    Err(e) => return Err(e),
                }
            }
            if !t.is_handshaking() {
                break;
            }
            match t.read_tls(&mut conn.sock) {
                Ok(0) => return Ok(Some(Step::Close)),
                Ok(_) => {}
                Err(e) if would_block(&e) => return Ok(Some(Step::Wait(Interest::READ))),
                Err(e) => return Err(e),
            }
            if let Err(e) = t.process_new_packets() {
                // rustls queued an alert: send it, then close.
                while t.wants_write() {
                    if t.write_tls(&mut conn.sock).is_err() {
                        break;
                    }
                }
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("TLS handshake: {e}"),
                ));
            }
        }
        tls::remember_version(&self.sh.tls_version, t);
        conn.state = State::Head;
        if conn.ktls_pending {
            let Some(mut t) = conn.tls.take() else {
                return Ok(None);
            };
            // A client's first request often comes with its Finished, and
            // rustls has decrypted it already: the kernel will never see
            // it, so it is kept here (a slow server, e.g. a guest under
            // TCG, read both at once and waited forever for the request).
            loop {
                match t.reader().read(&mut self.scratch) {
                    Ok(n) if n > 0 => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                    _ => break,
                }
            }
            let tls13 = t.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
            let secrets = (*t)
                .dangerous_extract_secrets()
                .map_err(|e| io::Error::other(format!("kTLS: extracting the session keys: {e}")))?;
            tls::enable_ktls(conn.sock.as_raw_fd(), tls13, secrets)
                .map_err(|e| io::Error::other(e.to_string()))?;
            self.sh.ktls_used.store(true, Ordering::Relaxed);
        }
        Ok(None)
    }

    /// Reads what has arrived (decrypting for TLS) into `inbuf`, up to
    /// `cap` bytes held. `Ok(false)`: nothing more now; `Ok(true)`: the
    /// client closed its side.
    fn fill(&mut self, conn: &mut Conn, cap: usize) -> io::Result<bool> {
        let before = conn.inbuf.len();
        let eof = match conn.tls.as_mut() {
            None => loop {
                let room = cap.saturating_sub(conn.inbuf.len()).min(self.scratch.len());
                if room == 0 {
                    break false;
                }
                match conn.sock.read(&mut self.scratch[..room]) {
                    Ok(0) => break true,
                    Ok(n) => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                    Err(e) if would_block(&e) => break false,
                    Err(e) => return Err(e),
                }
            },
            Some(t) => 'tls: loop {
                // Plaintext rustls already holds first, then the socket.
                loop {
                    let room = cap.saturating_sub(conn.inbuf.len()).min(self.scratch.len());
                    if room == 0 {
                        break 'tls false;
                    }
                    match t.reader().read(&mut self.scratch[..room]) {
                        Ok(0) => break 'tls true,
                        Ok(n) => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break 'tls true,
                        Err(e) => return Err(e),
                    }
                }
                match t.read_tls(&mut conn.sock) {
                    Ok(0) => {
                        // The socket ended; what rustls holds is read next time.
                        let _ = t.process_new_packets();
                        break true;
                    }
                    Ok(_) => {
                        if let Err(e) = t.process_new_packets() {
                            while t.wants_write() {
                                if t.write_tls(&mut conn.sock).is_err() {
                                    break;
                                }
                            }
                            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                        }
                    }
                    Err(e) if would_block(&e) => break false,
                    Err(e) => return Err(e),
                }
            },
        };
        let got = conn.inbuf.len() - before;
        self.sh.wire_bytes.fetch_add(got as u64, Ordering::Relaxed);
        // An end with bytes still unread is handled when they are parsed.
        Ok(eof && got == 0)
    }

    fn head(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        loop {
            if !conn.inbuf.is_empty() {
                match wire::parse_request(&conn.inbuf) {
                    Ok(req) => {
                        conn.inbuf.drain(..req.len);
                        match req.body {
                            RequestBody::Length(0) => self.respond(conn, &req),
                            RequestBody::Length(left) => conn.state = State::Discard { left, req },
                            RequestBody::Chunked => {
                                conn.state = State::DiscardChunked {
                                    dec: chunked::Decoder::with_limit(MAX_REQUEST_BODY),
                                    req,
                                }
                            }
                        }
                        return Ok(None);
                    }
                    Err(Reject::Partial) => {}
                    Err(Reject::Status(s)) => {
                        // The request's end is unknown: answer and close.
                        self.answer_error(conn, s, false);
                        return Ok(None);
                    }
                    Err(Reject::Http2) => {
                        // Counted as the HTTP/1.1 answer it stands for.
                        self.answer_error(conn, 505, false);
                        conn.out = wire::http2_refusal();
                        return Ok(None);
                    }
                }
            }
            if conn.inbuf.len() >= MAX_HEAD {
                self.answer_error(conn, 431, false);
                return Ok(None);
            }
            let had = conn.inbuf.len();
            let eof = self.fill(conn, MAX_HEAD)?;
            if eof {
                return Ok(Some(Step::Close));
            }
            if conn.inbuf.len() == had {
                return Ok(Some(Step::Wait(Interest::READ)));
            }
        }
    }

    fn discard(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        loop {
            let State::Discard { left, .. } = &mut conn.state else {
                return Ok(None);
            };
            let take = (*left).min(conn.inbuf.len() as u64) as usize;
            conn.inbuf.drain(..take);
            self.sh
                .request_body_bytes
                .fetch_add(take as u64, Ordering::Relaxed);
            *left -= take as u64;
            if *left == 0 {
                let State::Discard { req, .. } = std::mem::replace(&mut conn.state, State::Head)
                else {
                    return Ok(None);
                };
                self.respond(conn, &req);
                return Ok(None);
            }
            let want = (*left).min(self.scratch.len() as u64) as usize;
            if self.fill(conn, want)? {
                return Ok(Some(Step::Close));
            }
            if conn.inbuf.is_empty() {
                return Ok(Some(Step::Wait(Interest::READ)));
            }
        }
    }

    /// A chunked body, decoded as it arrives: what `inbuf` holds goes
    /// through the decoder and away, so a body is never held whole, and
    /// what follows its end stays for the next request. Malformed
    /// chunking gets 400, a body over [`MAX_REQUEST_BODY`] 413 (as soon as
    /// a chunk size says so), and both close the connection.
    fn discard_chunked(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        loop {
            let State::DiscardChunked { dec, .. } = &mut conn.state else {
                return Ok(None);
            };
            let done = match dec.feed(&conn.inbuf) {
                Ok(fed) => {
                    conn.inbuf.drain(..fed.used);
                    self.sh
                        .request_body_bytes
                        .fetch_add(fed.body, Ordering::Relaxed);
                    dec.is_done()
                }
                Err(e) => {
                    let status = match e {
                        ChunkError::TooLarge { .. } => 413,
                        _ => 400,
                    };
                    self.answer_error(conn, status, false);
                    return Ok(None);
                }
            };
            if done {
                let State::DiscardChunked { req, .. } =
                    std::mem::replace(&mut conn.state, State::Head)
                else {
                    return Ok(None);
                };
                self.respond(conn, &req);
                return Ok(None);
            }
            let cap = self.scratch.len();
            if self.fill(conn, cap)? {
                return Ok(Some(Step::Close));
            }
            if conn.inbuf.is_empty() {
                return Ok(Some(Step::Wait(Interest::READ)));
            }
        }
    }

    fn answer_error(&mut self, conn: &mut Conn, status: u16, keep: bool) {
        self.sh.count_status(status);
        conn.out = wire::error_response(status, keep);
        conn.out_at = 0;
        conn.body = None;
        conn.keep_alive = keep;
        conn.state = State::Send;
        conn.last_progress = Instant::now();
    }

    /// Sets up the answer to one request (head in `out`, body to send).
    fn respond(&mut self, conn: &mut Conn, req: &wire::RequestHead) {
        let (source, len) = match &self.sh.body {
            Body::Pattern(_, n) => (Source::Pattern, *n),
            Body::Root(root) => match wire::resolve(root, &req.target) {
                Ok(p) => match File::open(&p).and_then(|f| f.metadata().map(|m| (f, m.len()))) {
                    Ok((f, n)) => (Source::File(f), n),
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                        self.sh.refused(Refusal::Descriptors);
                        return self.answer_error(conn, 503, false);
                    }
                    Err(_) => return self.answer_error(conn, 404, req.keep_alive),
                },
                Err(status) => return self.answer_error(conn, status, req.keep_alive),
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
                self.sh.count_status(416);
                conn.out = wire::response_head(
                    416,
                    &[
                        ("Content-Range", format!("bytes */{len}")),
                        ("Content-Length", "0".into()),
                    ],
                    req.keep_alive,
                );
                conn.out_at = 0;
                conn.body = None;
                conn.keep_alive = req.keep_alive;
                conn.state = State::Send;
                return;
            }
        };
        extra.push(("Content-Length", count.to_string()));
        extra.push(("Content-Type", "application/octet-stream".into()));
        extra.push(("Accept-Ranges", "bytes".into()));
        self.sh.count_status(status);
        conn.out = wire::response_head(status, &extra, req.keep_alive);
        conn.out_at = 0;
        conn.body = (!req.head && count > 0).then_some(Transfer {
            source,
            off: start,
            end: start + count,
        });
        conn.keep_alive = req.keep_alive;
        conn.served = true;
        conn.state = State::Send;
        conn.last_progress = Instant::now();
    }

    fn send(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        let done = if conn.tls.is_some() {
            self.send_tls(conn)?
        } else {
            self.send_plain(conn)?
        };
        if !done {
            return Ok(Some(Step::Wait(Interest::WRITE)));
        }
        // The whole answer is out (or queued in the socket).
        let had_body = conn.body.take();
        if let Some(Transfer {
            source: Source::File(f),
            ..
        }) = &had_body
        {
            if self.sh.cold {
                // Pages still referenced by the socket stay; the rest go.
                let _ = ffi::evict_from_page_cache(f);
            }
        }
        if std::mem::take(&mut conn.served) {
            conn.stats.requests.fetch_add(1, Ordering::Relaxed);
        }
        conn.out.clear();
        conn.out_at = 0;
        if !conn.keep_alive || self.sh.stopping() {
            return Ok(Some(self.linger(conn)));
        }
        conn.state = State::Head;
        conn.deadline = Instant::now() + self.sh.request_timeout;
        Ok(None)
    }

    /// Plain TCP and kTLS: the head with MSG_MORE, the body by sendfile.
    /// `Ok(true)` when all is sent, `Ok(false)` when the socket is full.
    fn send_plain(&mut self, conn: &mut Conn) -> io::Result<bool> {
        let fd = conn.sock.as_raw_fd();
        let large = conn
            .body
            .as_ref()
            .is_some_and(|b| b.end - b.off >= CORK_FROM);
        if large && !conn.corked {
            conn.corked = sys::set_cork(fd, true).is_ok();
        }
        let done = self.send_plain_corked(conn)?;
        if done && std::mem::take(&mut conn.corked) {
            sys::set_cork(fd, false)?;
        }
        Ok(done)
    }

    fn send_plain_corked(&mut self, conn: &mut Conn) -> io::Result<bool> {
        let fd = conn.sock.as_raw_fd();
        while conn.out_at < conn.out.len() {
            let more = conn.body.is_some();
            match sys::send_nonblocking(fd, &conn.out[conn.out_at..], more) {
                Ok(n) => {
                    conn.out_at += n;
                    self.sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let Some(body) = conn.body.as_mut() else {
            return Ok(true);
        };
        let mut budget = SEND_BUDGET;
        while body.off < body.end {
            let want = (body.end - body.off).min(SENDFILE_CHUNK);
            let (file, mut pos, count) = match &body.source {
                Source::Pattern => {
                    let Body::Pattern(f, _) = &self.sh.body else {
                        return Err(io::Error::other("no generated object"));
                    };
                    let (at, n) = content::in_pattern(body.off, want);
                    (f, at as i64, n)
                }
                Source::File(f) => (f, body.off as i64, want),
            };
            match sys::sendfile(fd, file, &mut pos, count as usize) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended early (truncated while served?)",
                    ))
                }
                Ok(n) => {
                    body.off += n as u64;
                    conn.stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    self.sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    conn.last_progress = Instant::now();
                    budget = budget.saturating_sub(n as u64);
                    if budget == 0 && body.off < body.end {
                        // Level-triggered: the loop comes back at once,
                        // after the other ready connections had a turn.
                        return Ok(false);
                    }
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// User-space TLS: plaintext into rustls from pread chunks, records out.
    fn send_tls(&mut self, conn: &mut Conn) -> io::Result<bool> {
        let Some(t) = conn.tls.as_mut() else {
            return Ok(true);
        };
        let mut budget = SEND_BUDGET;
        loop {
            while t.wants_write() {
                match t.write_tls(&mut conn.sock) {
                    Ok(_) => conn.last_progress = Instant::now(),
                    Err(e) if would_block(&e) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            if budget == 0 {
                return Ok(false);
            }
            if conn.out_at < conn.out.len() {
                let n = t.writer().write(&conn.out[conn.out_at..])?;
                conn.out_at += n;
                self.sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                continue;
            }
            let Some(body) = conn.body.as_mut() else {
                return Ok(true);
            };
            if body.off >= body.end {
                return Ok(true);
            }
            let want = (body.end - body.off).min(TLS_CHUNK as u64);
            let n = match &body.source {
                Source::Pattern => {
                    let Body::Pattern(f, _) = &self.sh.body else {
                        return Err(io::Error::other("no generated object"));
                    };
                    let (at, k) = content::in_pattern(body.off, want);
                    f.read_at(&mut self.scratch[..k as usize], at)?
                }
                Source::File(f) => f.read_at(&mut self.scratch[..want as usize], body.off)?,
            };
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ended early (truncated while served?)",
                ));
            }
            let took = t.writer().write(&self.scratch[..n])?;
            body.off += took as u64;
            conn.stats.bytes.fetch_add(took as u64, Ordering::Relaxed);
            self.sh.wire_bytes.fetch_add(took as u64, Ordering::Relaxed);
            budget = budget.saturating_sub(took as u64);
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
