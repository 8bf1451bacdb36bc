//! HTTP and HTTPS downloads: the server (`linerate serve`, the agent's
//! `http_serve` job), the client (the `http_get` job), TLS and kTLS, and
//! the per-connection counters both report.
//!
//! - `wire`: request/response heads, Range, paths inside a root (no I/O).
//! - `chunked`: the chunked transfer coding's decoder both sides use.
//! - `server` (with `serve_loop`, `serve_shared`) and `client` (with
//!   `client_loop`, `client_conn`, `client_shared`): the data planes,
//!   epoll event loops on non-blocking sockets, one thread per CPU.
//! - `h2`: HTTP/2 frames, HPACK and a connection's protocol state, without
//!   I/O; `client_h2` drives it on the client's event loops (`--http2`).
//! - `request`: what the client sends and when (no I/O): `--header`
//!   checks, bodies, the HTTP/1.1 request built once, ramp stages.
//! - `tls`: rustls configurations, the kTLS key structures.
//! - `stats`: the summary types (results.json) and HDR histograms.
//! - `ffi`: the few syscalls `sys` lacks (TCP_ULP, SOL_TLS, fadvise).
//! - `serve_cmd`: the standalone `linerate serve` command.

pub mod chunked;
pub mod client;
mod client_conn;
mod client_h1;
mod client_h2;
mod client_loop;
mod client_shared;
mod content;
mod error;
pub mod h2;
pub mod job;
pub mod request;
pub mod serve_cmd;
mod serve_loop;
mod serve_shared;
pub mod server;
pub mod stats;
pub mod tls;
pub mod wire;

pub use error::HttpError;

use crate::proto::{IntervalSample, StreamSample};
use crate::sys;
use hdrhistogram::Histogram;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// TCP_INFO counters of one connection, summed over its sockets.
struct TcpCounts {
    retrans: u32,
    dsack: u32,
    reord: u32,
}

/// One connection's live counters, shared between its thread and the
/// sampler that reports intervals.
pub struct ConnStats {
    pub id: u16,
    /// The socket sampled for TCP_INFO; -1 between connections.
    fd: AtomicI32,
    /// Retransmits (and D-SACK'd ones) of sockets already closed.
    retrans_closed: AtomicU32,
    dsack_closed: AtomicU32,
    reord_closed: AtomicU32,
    pub bytes: AtomicU64,
    pub requests: AtomicU64,
    pub error: Mutex<Option<String>>,
    pub ttfb: Mutex<Option<Histogram<u64>>>,
    pub latency: Mutex<Option<Histogram<u64>>>,
    /// With a request rate: latency from the actual send times.
    pub latency_uncorrected: Mutex<Option<Histogram<u64>>>,
}

impl ConnStats {
    /// `fd` (-1: none yet) must stay open until [`ConnStats::detach`] or
    /// [`ConnStats::finish`] (its owner keeps it).
    pub fn new(id: u16, fd: RawFd) -> Self {
        ConnStats {
            id,
            fd: AtomicI32::new(fd),
            retrans_closed: AtomicU32::new(0),
            dsack_closed: AtomicU32::new(0),
            reord_closed: AtomicU32::new(0),
            bytes: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            error: Mutex::new(None),
            ttfb: Mutex::new(None),
            latency: Mutex::new(None),
            latency_uncorrected: Mutex::new(None),
        }
    }

    fn retrans(&self) -> u32 {
        self.tcp_counts().retrans
    }

    /// Retransmits so far, of them those the peer D-SACK'd (spurious), and
    /// the reordering the sender saw.
    fn tcp_counts(&self) -> TcpCounts {
        let fd = self.fd.load(Ordering::Acquire);
        let open = if fd >= 0 {
            sys::tcp_info(fd).unwrap_or_default()
        } else {
            sys::TcpInfo::default()
        };
        TcpCounts {
            retrans: self.retrans_closed.load(Ordering::Relaxed) + open.total_retrans,
            dsack: self.dsack_closed.load(Ordering::Relaxed) + open.dsack_dups,
            reord: self.reord_closed.load(Ordering::Relaxed) + open.reord_seen,
        }
    }

    /// Samples a new socket of this connection (after a reconnect).
    pub fn attach(&self, fd: RawFd) {
        self.fd.store(fd, Ordering::Release);
    }

    /// Takes the socket's last TCP_INFO while it is still open.
    pub fn detach(&self) {
        let fd = self.fd.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            if let Ok(t) = sys::tcp_info(fd) {
                self.retrans_closed
                    .fetch_add(t.total_retrans, Ordering::Relaxed);
                self.dsack_closed.fetch_add(t.dsack_dups, Ordering::Relaxed);
                self.reord_closed.fetch_add(t.reord_seen, Ordering::Relaxed);
            }
        }
    }

    /// The connection is over: its last figures are final.
    pub fn finish(&self) {
        self.detach();
    }

    pub fn record(&self, elapsed_s: f64) -> crate::proto::http::HttpConnection {
        let bytes = self.bytes.load(Ordering::Relaxed);
        let lat = |h: &Mutex<Option<Histogram<u64>>>| {
            h.lock()
                .ok()
                .and_then(|g| g.as_ref().and_then(stats::latency_of))
        };
        let TcpCounts {
            retrans,
            dsack,
            reord,
        } = self.tcp_counts();
        crate::proto::http::HttpConnection {
            id: self.id,
            requests: self.requests.load(Ordering::Relaxed),
            body_bytes: bytes,
            goodput_bps: bytes as f64 * 8.0 / elapsed_s.max(1e-6),
            retransmits: u64::from(retrans),
            spurious_retransmits: u64::from(dsack.min(retrans)),
            reorder_events: u64::from(reord),
            ttfb: lat(&self.ttfb),
            latency: lat(&self.latency),
            error: self.error.lock().ok().and_then(|e| e.clone()),
        }
    }
}

/// One interval of many connections: bytes per connection as streams
/// (`sender`: the server side) and their sum, the requests completed and
/// the connections open at its end.
pub fn interval_of(
    conns: &[std::sync::Arc<ConnStats>],
    span: (f64, f64),
    last: &mut Vec<(u64, u64, u64)>,
    sender: bool,
) -> IntervalSample {
    let mut iv = IntervalSample {
        t_start: span.0,
        t_end: span.1,
        ..Default::default()
    };
    last.resize(conns.len(), (0, 0, 0));
    for (c, l) in conns.iter().zip(last.iter_mut()) {
        let bytes = c.bytes.load(Ordering::Relaxed);
        let retr = u64::from(c.retrans());
        let reqs = c.requests.load(Ordering::Relaxed);
        let (db, dr) = (bytes.saturating_sub(l.0), retr.saturating_sub(l.1));
        iv.requests += reqs.saturating_sub(l.2);
        *l = (bytes, retr, reqs);
        let open = c.fd.load(Ordering::Acquire) >= 0;
        iv.connections += u32::from(open);
        // A connection without a socket that moved nothing (done, or a
        // ramp's waiting one) says nothing.
        if !open && db == 0 {
            continue;
        }
        if sender {
            iv.tx_bytes += db;
        } else {
            iv.rx_bytes += db;
        }
        iv.streams.push(StreamSample {
            id: c.id,
            sender,
            bytes: db,
            retransmits: dr,
            cwnd: 0,
            rtt_us: 0,
        });
    }
    iv
}
