//! Each stream's I/O: the loops that send (sendfile, or many streams from
//! one thread) and receive (MSG_TRUNC), and the counters they share with
//! the sampler.

use crate::sys;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A stream's counters, written by its thread and read by the sampler.
pub(super) struct Shared {
    pub(super) bytes: AtomicU64,
    pub(super) done: AtomicBool,
    /// TCP_INFO taken by the stream thread just before it closes, for the
    /// reporter's last sample (after close the kernel reports zeros).
    pub(super) last_cwnd: AtomicU32,
    pub(super) last_rtt_us: AtomicU32,
    pub(super) last_retrans: AtomicU32,
}

impl Shared {
    /// A stream's counters before it starts.
    pub(super) fn new() -> Shared {
        Shared {
            bytes: AtomicU64::new(0),
            done: AtomicBool::new(false),
            last_cwnd: AtomicU32::new(0),
            last_rtt_us: AtomicU32::new(0),
            last_retrans: AtomicU32::new(0),
        }
    }

    fn remember(&self, fd: std::os::fd::RawFd) {
        if let Ok(i) = sys::tcp_info(fd) {
            self.last_cwnd.store(i.snd_cwnd, Ordering::Relaxed);
            self.last_rtt_us.store(i.rtt_us, Ordering::Relaxed);
            self.last_retrans.store(i.total_retrans, Ordering::Relaxed);
        }
    }

    /// Marks the stream ended and wakes the sampler that waits for it.
    pub(super) fn end(&self, sampler: &std::thread::Thread) {
        self.done.store(true, Ordering::Release);
        sampler.unpark();
    }
}

/// Sends with sendfile(2) from an in-memory file: the payload pages go to the
/// socket by reference, so the sender's core spends nothing on copying (the
/// pattern never changes, so sharing pages is safe). Falls back to write(2).
pub(super) fn send_loop(
    conn: &TcpStream,
    shared: &Shared,
    stop: &AtomicBool,
    deadline: Instant,
    len: usize,
) {
    let buf = vec![0x5au8; len];
    let file = sys::memfd_with(&buf).ok();
    let fd = conn.as_raw_fd();
    let mut off: i64 = 0;
    let mut w = conn;
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let res = match &file {
            Some(f) => {
                if off as usize >= len {
                    off = 0;
                }
                let left = len - off as usize;
                sys::sendfile(fd, f, &mut off, left)
            }
            None => w.write(&buf),
        };
        match res {
            Ok(n) => {
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if transient(&e) => {}
            Err(_) => break,
        }
    }
    shared.remember(fd);
    let _ = conn.shutdown(Shutdown::Write);
}

/// Sends on every stream of `streams` from this one thread, until
/// `deadline` or `stop`, the way iperf3's own client does: after each wait
/// for writable sockets, up to [`PASSES`] passes over the writable streams
/// in a fixed order, one non-blocking write of `len` bytes to each per
/// pass; a stream whose socket is full sits out until the next wait.
/// Interleaved this way the far end finds every stream readable when it
/// wakes; writing one stream until it was full before the next (8 writes
/// each) cut 4 streams to a stock `iperf3 -s` on a 2-core veth lab from
/// about 29 to about 18 Gbit/s (bench/README.md). A stream that fails
/// stops alone; each ends with its TCP_INFO kept, a FIN, and `waker` (the
/// sampler) woken. It writes (copies) rather than sendfile: with several
/// streams sharing one file's pages, 4 streams to `iperf3 -s` on a veth
/// showed 5-8 times the retransmits and less goodput (bench/README.md).
pub(super) fn send_many(
    mut ep: sys::Epoll,
    streams: &[(TcpStream, Arc<Shared>)],
    stop: &AtomicBool,
    deadline: Instant,
    len: usize,
    waker: &std::thread::Thread,
) {
    let buf = vec![0x5au8; len];
    let mut open = vec![true; streams.len()];
    let mut writable = vec![false; streams.len()];
    let mut ready = Vec::new();
    loop {
        let now = Instant::now();
        if now >= deadline || stop.load(Ordering::Relaxed) || !open.contains(&true) {
            break;
        }
        let wait = (deadline - now).min(Duration::from_millis(100));
        if ep.wait_into(Some(wait), &mut ready).is_err() {
            continue;
        }
        for r in &ready {
            let k = r.token as usize;
            if let (Some(w), Some(true)) = (writable.get_mut(k), open.get(k)) {
                *w = true;
            }
        }
        for _ in 0..PASSES {
            let mut wrote = false;
            for (k, (c, shared)) in streams.iter().enumerate() {
                if !writable[k] {
                    continue;
                }
                let mut w = c;
                match w.write(&buf) {
                    Ok(n) => {
                        shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                        wrote = true;
                        // A short write: the socket is full.
                        writable[k] = n == buf.len();
                    }
                    Err(e) if transient(&e) => writable[k] = false,
                    Err(_) => {
                        writable[k] = false;
                        open[k] = false;
                        let _ = ep.delete(c.as_raw_fd());
                        finish_sender(c, shared, waker);
                    }
                }
            }
            if !wrote || Instant::now() >= deadline {
                break;
            }
        }
        writable.fill(false);
    }
    for (k, (c, shared)) in streams.iter().enumerate() {
        if open[k] {
            finish_sender(c, shared, waker);
        }
    }
}

/// Passes over the writable streams between two waits (iperf3's
/// `multisend`).
const PASSES: usize = 10;

/// A write that may simply be tried again: the socket was full (or its
/// timeout passed) or a signal came.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A sending stream's end: its last TCP_INFO kept, a FIN sent, and the
/// stream marked done for the sampler, which is woken.
fn finish_sender(conn: &TcpStream, shared: &Shared, waker: &std::thread::Thread) {
    shared.remember(conn.as_raw_fd());
    let _ = conn.shutdown(Shutdown::Write);
    shared.end(waker);
}

/// Bytes the kernel queues before it wakes the receiver. Fewer, larger
/// reads cost fewer wakeups and socket-lock hand-overs; on a veth lab this
/// took one stream from ~15 to ~20 Gbit/s. EOF and the read timeout still
/// return whatever is queued, so slow streams are not held back.
const RCVLOWAT: i32 = 1 << 20;

pub(super) fn recv_loop(conn: &TcpStream, shared: &Shared, stop: &AtomicBool) {
    let mut buf = vec![0u8; 2 << 20];
    let fd = conn.as_raw_fd();
    // Best effort: without it the stream still works, with more wakeups.
    let _ = sys::set_rcvlowat(fd, RCVLOWAT);
    loop {
        match sys::recv_discard(fd, &mut buf) {
            Ok(0) => {
                shared.remember(fd);
                break;
            }
            Ok(n) => {
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
}
