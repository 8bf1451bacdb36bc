//! The iperf3 server's front door: one thread accepts connections, reads
//! each one's cookie without waiting on it (a client that sends nothing
//! holds nothing, and no slot), and hands the connection on by its cookie
//! ([`Slots`]): a new test on a thread of its own, a stream of a test that
//! takes its streams, or iperf3's busy answer. While some test takes UDP
//! streams it also holds the UDP port and routes each hello by the
//! client's address. It runs no test and never blocks on a client.

use super::data::Conn;
use super::slots::{Cookie, Route, Slots};
use super::Iperf3Error;
use crate::model::stderr::errln;
use crate::proto::iperf3::{self as wire, State};
use crate::sys::{self, Epoll, Interest};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a new connection (control or stream) may take to send its
/// cookie: stock clients send it at once.
pub const COOKIE_WAIT: Duration = Duration::from_secs(2);
/// Connections waiting for their cookie at most; more are denied at once.
pub const MAX_PENDING: usize = 64;
/// How often a thread that waits looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(250);
/// Hellos read per wakeup, so a UDP flood cannot starve the listener.
const HELLO_BATCH: usize = 64;

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
const UDP: u64 = 2;
const FIRST_PENDING: u64 = 3;

#[derive(Debug, PartialEq)]
enum UdpPort {
    Closed,
    Open,
    Failed(String),
}

struct Front {
    slots: Slots<Conn>,
    udp: UdpPort,
}

/// What the door and the tests' threads share.
pub struct Shared {
    front: Mutex<Front>,
    /// A UDP turn ended, or the UDP port opened (or could not).
    changed: Condvar,
    /// Wakes the door when a test's needs change.
    waker: UnixDatagram,
    /// New tests answered busy (every slot taken).
    busy: AtomicU64,
}

impl Shared {
    /// Room for `max_clients` tests at once; the second value is the
    /// door's end of the waker, for [`run`].
    pub fn new(max_clients: usize) -> io::Result<(Shared, UnixDatagram)> {
        let (waker, wakee) = UnixDatagram::pair()?;
        waker.set_nonblocking(true)?;
        wakee.set_nonblocking(true)?;
        let shared = Shared {
            front: Mutex::new(Front {
                slots: Slots::new(max_clients),
                udp: UdpPort::Closed,
            }),
            changed: Condvar::new(),
            waker,
            busy: AtomicU64::new(0),
        };
        Ok((shared, wakee))
    }

    /// New tests answered busy so far.
    pub fn busy(&self) -> u64 {
        self.busy.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Front> {
        // The bookkeeping stays whole whoever panicked holding it.
        self.front.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self) {
        // A full queue means the door has wakeups to read already.
        let _ = self.waker.send(&[1]);
    }

    /// Tells the waiting tests and the door that something changed.
    fn changed(&self) {
        self.changed.notify_all();
        self.wake();
    }
}

/// A new test's control connection, its cookie read, and its slot.
pub struct Admitted<'a> {
    pub conn: TcpStream,
    pub peer: SocketAddr,
    pub cookie: Cookie,
    pub slot: Slot<'a>,
}

/// A test's slot, freed on drop (with the streams it was taking).
pub struct Slot<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.shared.lock().slots.release(self.id);
        self.shared.changed();
    }
}

impl Slot<'_> {
    /// The TCP connections that bring this test's cookie, until the
    /// returned [`Streams`] drops.
    pub fn tcp_streams(&self) -> Streams<'_> {
        let (tx, rx) = channel();
        self.shared.lock().slots.open_tcp(self.id, tx);
        Streams {
            shared: self.shared,
            id: self.id,
            rx,
            udp: false,
        }
    }

    /// Waits (until `deadline` or `stop`) for this client address's UDP
    /// turn and the UDP port, then the UDP streams its hellos open, each
    /// connected to the client's port, until the returned [`Streams`] drops.
    pub fn udp_streams(
        &self,
        peer: SocketAddr,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<Streams<'_>, Iperf3Error> {
        let (tx, rx) = channel();
        let mut f = self.shared.lock();
        let mut turn = false;
        let mut why = None;
        loop {
            if !turn {
                turn = f.slots.take_udp_turn(self.id, tx.clone());
                if turn {
                    self.shared.wake();
                }
            }
            if turn {
                match &f.udp {
                    UdpPort::Open => break,
                    UdpPort::Failed(m) => {
                        why = Some(Iperf3Error::Io(format!(
                            "opening UDP port {} for the streams of {peer}: {m}",
                            peer.port()
                        )));
                        break;
                    }
                    UdpPort::Closed => {}
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stop.load(Ordering::Relaxed) {
                why = Some(Iperf3Error::Lost {
                    message: format!(
                        "the test of {peer} waited in vain for another test from {} to take \
                         its UDP streams (one test per address at a time)",
                        peer.ip()
                    ),
                    partial: None,
                });
                break;
            }
            f = self
                .shared
                .changed
                .wait_timeout(f, left.min(STOP_POLL))
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        drop(f);
        let streams = Streams {
            shared: self.shared,
            id: self.id,
            rx,
            udp: true,
        };
        match why {
            // Dropping `streams` ends the turn.
            Some(e) => Err(e),
            None => Ok(streams),
        }
    }
}

/// The streams coming to a test while it takes them.
pub struct Streams<'a> {
    shared: &'a Shared,
    id: u64,
    rx: Receiver<Conn>,
    udp: bool,
}

impl Streams<'_> {
    /// The next stream, or None at `deadline` or `stop`.
    pub fn next(&self, deadline: Instant, stop: &AtomicBool) -> Option<Conn> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stop.load(Ordering::Relaxed) {
                return None;
            }
            match self.rx.recv_timeout(left.min(STOP_POLL)) {
                Ok(c) => return Some(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

impl Drop for Streams<'_> {
    fn drop(&mut self) {
        let mut f = self.shared.lock();
        if self.udp {
            f.slots.end_udp_turn(self.id);
        } else {
            f.slots.close_tcp(self.id);
        }
        drop(f);
        self.shared.changed();
    }
}

/// Answers a connection ACCESS_DENIED without reading from it, as iperf3
/// answers a client while it is busy.
pub fn deny(conn: TcpStream) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = (&conn).write_all(&[State::AccessDenied.byte()]);
}

/// A connection whose cookie is on its way.
struct Pending {
    conn: TcpStream,
    peer: SocketAddr,
    cookie: Cookie,
    got: usize,
    by: Instant,
    token: u64,
}

/// The door's own state on its thread.
struct Door<'a, F> {
    listener: &'a TcpListener,
    udp_listen: SocketAddr,
    shared: &'a Shared,
    ep: Epoll,
    pending: Vec<Pending>,
    next_token: u64,
    /// The unconnected UDP socket hellos come to, while a test wants them.
    udp: Option<UdpSocket>,
    admit: F,
}

/// Runs the door until `stop`: each admitted test goes to `admit`, which
/// starts it on a thread of its own. `listener` is non-blocking; UDP
/// hellos are taken on `udp_listen`.
pub fn run<'a>(
    listener: &'a TcpListener,
    udp_listen: SocketAddr,
    shared: &'a Shared,
    wakee: UnixDatagram,
    stop: &AtomicBool,
    admit: impl FnMut(Admitted<'a>),
) -> Result<(), Iperf3Error> {
    let ep = Epoll::new(64).map_err(Iperf3Error::io("setting up the iperf3 server's epoll"))?;
    ep.add(listener.as_raw_fd(), LISTENER, Interest::READ)
        .map_err(Iperf3Error::io("watching the iperf3 listener"))?;
    ep.add(wakee.as_raw_fd(), WAKER, Interest::READ)
        .map_err(Iperf3Error::io("watching the iperf3 server's waker"))?;
    let mut door = Door {
        listener,
        udp_listen,
        shared,
        ep,
        pending: Vec::new(),
        next_token: FIRST_PENDING,
        udp: None,
        admit,
    };
    let mut ready = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let wait = door
            .pending
            .iter()
            .map(|p| p.by.saturating_duration_since(now))
            .fold(STOP_POLL, Duration::min);
        if let Err(e) = door.ep.wait_into(Some(wait), &mut ready) {
            return Err(Iperf3Error::Io(format!(
                "waiting for iperf3 clients (epoll): {e}"
            )));
        }
        for r in &ready {
            match r.token {
                LISTENER => door.accept(),
                WAKER => {
                    let mut b = [0u8; 64];
                    while wakee.recv(&mut b).is_ok() {}
                }
                UDP => door.hellos(),
                t => door.read_cookie(t),
            }
        }
        door.expire();
        door.sync_udp();
    }
    Ok(())
}

impl<'a, F: FnMut(Admitted<'a>)> Door<'a, F> {
    fn accept(&mut self) {
        loop {
            let (conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors, most likely: the listener stays
                    // readable, so wait a little rather than spin.
                    errln!("iperf3: accepting a connection: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    return;
                }
            };
            // All slots taken and no test takes streams: busy at once,
            // unread, as iperf3 answers while it runs a test.
            let read = {
                let f = self.shared.lock();
                !f.slots.full() || f.slots.taking_tcp()
            };
            if !read || self.pending.len() >= MAX_PENDING {
                self.shared.busy.fetch_add(1, Ordering::Relaxed);
                deny(conn);
                continue;
            }
            let token = self.next_token;
            self.next_token += 1;
            if conn.set_nonblocking(true).is_err()
                || self
                    .ep
                    .add(conn.as_raw_fd(), token, Interest::READ)
                    .is_err()
            {
                continue;
            }
            self.pending.push(Pending {
                conn,
                peer,
                cookie: [0; wire::COOKIE_LEN],
                got: 0,
                by: Instant::now() + COOKIE_WAIT,
                token,
            });
        }
    }

    /// Reads what has come of a pending connection's cookie; a whole one
    /// routes the connection.
    fn read_cookie(&mut self, token: u64) {
        let Some(k) = self.pending.iter().position(|p| p.token == token) else {
            return;
        };
        let p = &mut self.pending[k];
        let closed = loop {
            match (&p.conn).read(&mut p.cookie[p.got..]) {
                Ok(0) => break Some("closed the connection before sending its cookie".into()),
                Ok(n) => {
                    p.got += n;
                    if p.got == wire::COOKIE_LEN {
                        break None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(format!("reading its cookie: {e}")),
            }
        };
        let p = self.pending.swap_remove(k);
        let _ = self.ep.delete(p.conn.as_raw_fd());
        match closed {
            Some(why) => errln!("iperf3: {}: {why}", p.peer),
            None => self.route(p.conn, p.peer, p.cookie),
        }
    }

    fn route(&mut self, conn: TcpStream, peer: SocketAddr, cookie: Cookie) {
        if let Err(e) = wire::check_cookie(&cookie) {
            errln!("iperf3: {peer}: not an iperf3 client ({e}); closed");
            return;
        }
        let route = self.shared.lock().slots.route(&cookie, peer.ip());
        match route {
            Route::Stream(to) => {
                if conn.set_nonblocking(false).is_ok() {
                    let _ = to.send(Conn::Tcp(conn));
                }
            }
            Route::Admit(id) => {
                let slot = Slot {
                    shared: self.shared,
                    id,
                };
                match conn.set_nonblocking(false) {
                    Ok(()) => (self.admit)(Admitted {
                        conn,
                        peer,
                        cookie,
                        slot,
                    }),
                    Err(e) => errln!("iperf3: {peer}: setting up its control connection: {e}"),
                }
            }
            Route::Busy => {
                self.shared.busy.fetch_add(1, Ordering::Relaxed);
                deny(conn)
            }
            Route::Denied => deny(conn),
        }
    }

    /// Closes connections whose cookie did not come in time.
    fn expire(&mut self) {
        let now = Instant::now();
        self.pending.retain(|p| {
            let late = p.by <= now;
            if late {
                errln!(
                    "iperf3: {}: sent no cookie within {} s; closed",
                    p.peer,
                    COOKIE_WAIT.as_secs()
                );
            }
            !late
        });
    }

    /// Opens the UDP port while some test wants hellos, closes it after.
    fn sync_udp(&mut self) {
        let mut f = self.shared.lock();
        let want = f.slots.taking_udp();
        if want && self.udp.is_none() && f.udp == UdpPort::Closed {
            f.udp = match self.open_udp() {
                Ok(s) => {
                    self.udp = Some(s);
                    UdpPort::Open
                }
                Err(e) => UdpPort::Failed(e.to_string()),
            };
            drop(f);
            self.shared.changed.notify_all();
        } else if !want {
            if let Some(s) = self.udp.take() {
                let _ = self.ep.delete(s.as_raw_fd());
            }
            f.udp = UdpPort::Closed;
        }
    }

    fn open_udp(&self) -> io::Result<UdpSocket> {
        let s = sys::udp_reuseport(self.udp_listen)?;
        s.set_nonblocking(true)?;
        self.ep.add(s.as_raw_fd(), UDP, Interest::READ)?;
        Ok(s)
    }

    /// Routes the hellos that came: each one's socket is connected to the
    /// client's port and goes to the test whose turn its address has; a
    /// fresh socket takes the next hello.
    fn hellos(&mut self) {
        let mut from = VecDeque::new();
        if let Some(u) = &self.udp {
            read_hellos(u, &mut from);
        }
        while let Some(client) = from.pop_front() {
            let Some(to) = self.shared.lock().slots.udp_route(client.ip()) else {
                // Not from a client whose test takes UDP streams: dropped
                // (a spoofed source would make this server a reflector).
                continue;
            };
            // The next socket is bound before this one is connected, so no
            // hello finds the port closed in between.
            let next = match self.open_udp() {
                Ok(s) => s,
                Err(e) => {
                    errln!(
                        "iperf3: opening UDP port {} for the next stream: {e}",
                        self.udp_listen
                    );
                    return;
                }
            };
            let Some(this) = self.udp.replace(next) else {
                return;
            };
            let _ = self.ep.delete(this.as_raw_fd());
            if let Err(e) = this.connect(client) {
                errln!("iperf3: connecting a UDP stream to {client}: {e}");
                continue;
            }
            // What waited on it before the connect is other clients':
            // their hellos are routed like any.
            read_hellos(&this, &mut from);
            if this.set_nonblocking(false).is_ok() {
                let _ = to.send(Conn::Udp(this));
            }
        }
    }
}

/// The sources of the hellos waiting on `u` (a batch at most).
fn read_hellos(u: &UdpSocket, out: &mut VecDeque<SocketAddr>) {
    let mut b = [0u8; 64];
    for _ in 0..HELLO_BATCH {
        match u.recv_from(&mut b) {
            Ok((n, from)) if wire::is_udp_hello(&b[..n]) => out.push_back(from),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
