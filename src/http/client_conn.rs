//! One connection of the download client's event loops: its socket and
//! TLS session (`Link`, non-blocking reads that count the bytes off the
//! wire), where it is in a request (`State`) and what it measures. The
//! loop (`client_loop`) drives it; this file does no waiting of its own.

use super::chunked;
use super::client_shared::Timings;
use super::h2::conn::Session;
use super::wire::MAX_HEAD;
use super::ConnStats;
use crate::sys::{self, Interest};
use rustls::ClientConnection;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

pub(super) fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// A connection's socket and its TLS session.
pub(super) struct Link {
    pub(super) sock: TcpStream,
    /// User-space TLS, and the handshake of a kTLS connection.
    pub(super) tls: Option<Box<ClientConnection>>,
    /// The tls ULP is on: the keys go to the kernel after the handshake.
    pub(super) ulp: bool,
    /// The kernel decrypts (kTLS): reads are plain reads of plaintext.
    pub(super) ktls: bool,
    /// The socket's SO_RCVLOWAT as last set (1: the kernel's default).
    pub(super) lowat: usize,
}

/// The most body bytes the kernel queues before it wakes the loop: fewer,
/// larger discards cost fewer wakeups (the TCP engine's receiver does the
/// same). Bodies shorter than `LOWAT_FROM` keep the default.
pub(super) const LOWAT: usize = 1 << 20;
const LOWAT_FROM: u64 = 64 << 10;

impl Link {
    pub(super) fn new(sock: TcpStream) -> Self {
        Link {
            sock,
            tls: None,
            ulp: false,
            ktls: false,
            lowat: 1,
        }
    }

    /// Lets the kernel hold back a readable event until `left` body bytes
    /// (at most `LOWAT`) are queued, on plain TCP only (a TLS record's
    /// bytes on the wire are not its plaintext). The rest of a body is the
    /// most it waits for, so a body's end and the next response's head
    /// (`left` 0) always wake the loop. Best effort: a refused option only
    /// costs wakeups.
    pub(super) fn wait_for(&mut self, left: u64) {
        if self.tls() {
            return;
        }
        let want = if left < LOWAT_FROM {
            1
        } else {
            left.min(LOWAT as u64) as usize
        };
        if want != self.lowat && sys::set_rcvlowat(self.sock.as_raw_fd(), want as i32).is_ok() {
            self.lowat = want;
        }
    }

    pub(super) fn tls(&self) -> bool {
        self.tls.is_some() || self.ktls
    }

    /// Reads plaintext into `buf`: `Ok(0)` at the end of the stream,
    /// `WouldBlock` when nothing has arrived. Counts bytes off the socket.
    pub(super) fn read(&mut self, buf: &mut [u8], wire: &mut u64) -> io::Result<usize> {
        let Link { sock, tls, .. } = self;
        let Some(t) = tls.as_mut() else {
            let n = (&*sock).read(buf)?;
            *wire += n as u64;
            return Ok(n);
        };
        loop {
            match t.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            let n = t.read_tls(sock)?;
            *wire += n as u64;
            if let Err(e) = t.process_new_packets() {
                // rustls queued an alert: send it, then fail.
                let _ = t.write_tls(sock);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // A key update or the like may want an answer.
            while t.wants_write() {
                if t.write_tls(sock).is_err() {
                    break;
                }
            }
            if n == 0 {
                // The socket ended: close_notify (0), a cut (UnexpectedEof)
                // or the last plaintext.
                return match t.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    r => r,
                };
            }
        }
    }

    /// Reads up to `buf.len()` body bytes to drop them: in the kernel on
    /// plain TCP (nothing copied), into `buf` otherwise.
    pub(super) fn discard(&mut self, buf: &mut [u8], wire: &mut u64) -> io::Result<usize> {
        if self.tls.is_some() {
            return self.read(buf, wire);
        }
        let n = if self.ktls {
            (&self.sock).read(buf)?
        } else {
            sys::recv_discard(self.sock.as_raw_fd(), buf)?
        };
        *wire += n as u64;
        Ok(n)
    }
}

pub(super) enum State {
    /// No request under way; the next starts at `wake`.
    Idle {
        wake: Instant,
    },
    Connecting {
        since: Instant,
    },
    Handshake {
        since: Instant,
    },
    /// Sending the request (plain: from byte `at`; TLS: rustls's queue).
    Sending {
        at: usize,
    },
    Head,
    /// A body of known length (`Content-Length`): `left` bytes to come.
    Body {
        left: u64,
    },
    /// A chunked body, as far as it decoded.
    Chunked(chunked::Decoder),
    /// A body without length or chunking: it ends when the server closes
    /// the connection; `got` bytes of it so far.
    UntilClose {
        got: u64,
    },
    Done,
}

/// One connection: requests one at a time (no pipelining, one HTTP/2
/// stream) on a kept-alive socket, a new socket when the server closes it
/// or a request fails.
pub(super) struct Conn {
    pub(super) slot: usize,
    pub(super) st: Arc<ConnStats>,
    pub(super) link: Option<Link>,
    /// HTTP/2's state of the open connection (`--http2` only).
    pub(super) h2: Option<Box<Session>>,
    /// The request under way went again on a new connection (HTTP/2: the
    /// server took it on none).
    pub(super) retried: bool,
    pub(super) state: State,
    /// What epoll watches on the open socket (None: not registered).
    pub(super) interest: Option<Interest>,
    /// The response head so far (a reused buffer).
    pub(super) head: Box<[u8]>,
    pub(super) have: usize,
    /// With a rate: the next request's intended send time.
    pub(super) due: Option<Instant>,
    /// The request under way: intended and actual send times, first byte.
    pub(super) intended: Option<Instant>,
    pub(super) t0: Instant,
    pub(super) first: Option<Instant>,
    /// The body's last progress.
    pub(super) quiet: Instant,
    pub(super) status: u16,
    pub(super) keep_alive: bool,
    pub(super) times: Timings,
}

impl Conn {
    /// `first`: with a rate, the first request's intended send time.
    pub(super) fn new(st: Arc<ConnStats>, first: Option<Instant>, now: Instant) -> Self {
        Conn {
            slot: 0,
            st,
            link: None,
            h2: None,
            retried: false,
            state: State::Idle {
                wake: first.unwrap_or(now),
            },
            interest: None,
            head: vec![0u8; MAX_HEAD].into_boxed_slice(),
            have: 0,
            due: first,
            intended: None,
            t0: now,
            first: None,
            quiet: now,
            status: 0,
            keep_alive: false,
            times: Timings::new(),
        }
    }
}
