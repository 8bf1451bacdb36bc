//! iperf3 UDP streams: datagrams that start with iperf3's header (send
//! time, sequence number), paced to a rate, and a receiver that counts
//! them the way iperf3 does (a gap is loss until the late datagram comes,
//! which then counts as reordered), with RFC 1889 jitter.

use crate::proto::iperf3::UdpHeader;
use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One UDP stream's counters, shared with the reporter.
#[derive(Default)]
pub struct UdpCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    pub lost: AtomicU64,
    pub reordered: AtomicU64,
    pub duplicates: AtomicU64,
    /// The highest sequence number seen (receiver) or sent (sender).
    pub highest: AtomicU64,
    /// Jitter in seconds, as f64 bits.
    pub jitter_bits: AtomicU64,
    /// The counters when the omitted seconds ended: (packets, bytes, lost, highest).
    pub at_omit: Mutex<Option<[u64; 4]>>,
}

impl UdpCounters {
    pub fn jitter_s(&self) -> f64 {
        f64::from_bits(self.jitter_bits.load(Ordering::Relaxed))
    }

    fn snapshot(&self) -> [u64; 4] {
        [
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed),
            self.highest.load(Ordering::Relaxed),
        ]
    }

    /// Remembers the counters at the end of the omitted seconds, once.
    pub fn mark_omit(&self) {
        if let Ok(mut g) = self.at_omit.lock() {
            if g.is_none() {
                *g = Some(self.snapshot());
            }
        }
    }

    /// (packets, bytes, lost, highest) since the omitted seconds ended.
    pub fn after_omit(&self) -> [u64; 4] {
        let now = self.snapshot();
        let base = self.at_omit.lock().ok().and_then(|g| *g).unwrap_or([0; 4]);
        [0, 1, 2, 3].map(|i| now[i].saturating_sub(base[i]))
    }
}

fn now_header(seq: u64) -> UdpHeader {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    UdpHeader {
        sec: t.as_secs() as u32,
        usec: t.subsec_micros(),
        seq,
    }
}

/// Sends `len`-byte datagrams at `rate_bps` of payload (0: as fast as the
/// socket takes them) until `deadline` or `stop`.
pub fn send(
    sock: &UdpSocket,
    len: usize,
    rate_bps: u64,
    counters64: bool,
    deadline: Instant,
    stop: &AtomicBool,
    c: &UdpCounters,
) {
    let mut buf = vec![0x5au8; len.max(UdpHeader::len(counters64))];
    let start = Instant::now();
    let ns_per_packet = if rate_bps == 0 {
        0.0
    } else {
        len as f64 * 8.0 * 1e9 / rate_bps as f64
    };
    let mut seq: u64 = 0;
    let _ = sock.set_write_timeout(Some(Duration::from_millis(100)));
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Datagrams due by now; a burst of at most 1 ms of them after a
        // late wake-up, so the rate holds on average without a flood.
        let due = if ns_per_packet == 0.0 {
            seq + 64
        } else {
            let elapsed = now.duration_since(start).as_nanos() as f64;
            let due = (elapsed / ns_per_packet) as u64 + 1;
            due.min(seq + (1e6 / ns_per_packet).max(1.0) as u64 + 1)
        };
        while seq < due {
            now_header(seq + 1).emit(&mut buf, counters64);
            match sock.send(&buf) {
                Ok(n) => {
                    seq += 1;
                    c.packets.fetch_add(1, Ordering::Relaxed);
                    c.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    c.highest.store(seq, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // The peer's port is gone (ICMP unreachable): counted,
                    // the run goes on until the control channel says.
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Err(_) => {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        if ns_per_packet > 0.0 {
            let next = start + Duration::from_nanos(((seq as f64) * ns_per_packet) as u64);
            let wait = next.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait.min(Duration::from_millis(50)));
            }
        }
    }
}

/// Counts datagrams until `stop`.
pub fn receive(sock: &UdpSocket, counters64: bool, stop: &AtomicBool, c: &UdpCounters) {
    let mut buf = vec![0u8; 65_536];
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut prev_transit: Option<f64> = None;
    let mut jitter = 0.0f64;
    let mut highest: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => {
                c.errors.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let Some(h) = UdpHeader::parse(&buf[..n], counters64) else {
            // Too short for a header: iperf3 would not send it.
            c.errors.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        c.packets.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if h.seq > highest {
            if h.seq > highest + 1 {
                c.lost.fetch_add(h.seq - highest - 1, Ordering::Relaxed);
            }
            highest = h.seq;
            c.highest.store(highest, Ordering::Relaxed);
        } else if h.seq == highest {
            c.duplicates.fetch_add(1, Ordering::Relaxed);
        } else {
            // Late: it was counted lost when the gap opened.
            c.reordered.fetch_add(1, Ordering::Relaxed);
            let _ = c
                .lost
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let sent = f64::from(h.sec) + f64::from(h.usec) / 1e6;
        let transit = now - sent;
        if let Some(p) = prev_transit {
            jitter += ((transit - p).abs() - jitter) / 16.0;
            c.jitter_bits.store(jitter.to_bits(), Ordering::Relaxed);
        }
        prev_transit = Some(transit);
    }
}
