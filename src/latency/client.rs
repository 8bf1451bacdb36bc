//! The probing client: isochronous probes to one responder, every reply
//! matched to its probe by sequence number. The samples go to the controller
//! at the end (in chunks that fit a control frame), which cuts them into
//! phases and computes the statistics.

use crate::engine::{EngineError, JobCtx};
use crate::proto::probe::{Kind, Probe, ProbeSample, HEADER_LEN};
use crate::proto::{EndpointSummary, Response};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// How long replies are awaited after the last probe.
pub const GRACE: Duration = Duration::from_secs(2);
/// Samples per control message (about 100 bytes of JSON each).
pub const CHUNK: usize = 2000;
/// Shortest interval between probes.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

#[derive(Debug, Clone, Copy)]
pub struct ProbeSpec {
    pub target: SocketAddr,
    pub token: u64,
    pub interval: Duration,
    pub payload: u16,
    pub duration: Duration,
}

pub fn open(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let any: IpAddr = if target.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
    // Connected: the kernel drops datagrams from anyone but the responder.
    s.connect(target)?;
    Ok(s)
}

/// Matches replies to probes and notes reordering and duplicates.
pub struct Tracker {
    pub samples: Vec<ProbeSample>,
    token: u64,
    highest_answered: Option<u32>,
}

impl Tracker {
    pub fn new(token: u64, capacity: usize) -> Self {
        Tracker {
            samples: Vec::with_capacity(capacity),
            token,
            highest_answered: None,
        }
    }
    pub fn sent(&mut self, seq: u32, tx_ns: u64) {
        self.samples.push(ProbeSample(seq, tx_ns, 0, 0, 0, 0, 0));
    }
    /// Records a reply; false when the datagram is not one of ours.
    pub fn reply(&mut self, datagram: &[u8], rx_ns: u64) -> bool {
        let Ok(p) = Probe::parse(datagram) else {
            return false;
        };
        if p.kind != Kind::Reply || p.token != self.token {
            return false;
        }
        let Some(s) = self.samples.get_mut(p.seq as usize) else {
            return false;
        };
        if s.answered() {
            s.6 = s.6.saturating_add(1 << 8);
            return true;
        }
        s.2 = rx_ns.max(1);
        s.3 = p.responder_rx_ns;
        s.4 = p.responder_tx_ns;
        s.5 = p.rx_count;
        match self.highest_answered {
            Some(h) if p.seq < h => s.6 |= 1,
            _ => self.highest_answered = Some(p.seq),
        }
        true
    }
}

/// Sends probes until the duration ends or the controller stops the job,
/// waits [`GRACE`] for late replies, then hands the samples over.
pub fn run(ctx: &JobCtx, sock: UdpSocket, spec: ProbeSpec) -> Result<EndpointSummary, EngineError> {
    let interval = spec.interval.max(MIN_INTERVAL);
    let len = usize::from(spec.payload).max(HEADER_LEN);
    let expected = (spec.duration.as_secs_f64() / interval.as_secs_f64()).ceil() as usize + 1;
    let mut tr = Tracker::new(spec.token, expected.min(4_000_000));
    let mut out = vec![0u8; len];
    let mut inb = vec![0u8; 2048];
    let mut sum = EndpointSummary::default();
    let t0 = Instant::now();
    let mut next = t0;
    let mut seq: u32 = 0;
    let mut end: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if end.is_none() && (ctx.stopped() || now.saturating_duration_since(t0) >= spec.duration) {
            end = Some(now + GRACE);
        }
        if let Some(e) = end {
            if now >= e {
                break;
            }
        } else if now >= next {
            let tx_ns = crate::sys::realtime_ns();
            Probe::request(spec.token, seq, tx_ns).emit(&mut out);
            tr.sent(seq, tx_ns);
            match sock.send(&out) {
                Ok(_) => {
                    sum.tx_packets += 1;
                    sum.tx_bytes += len as u64;
                }
                Err(_) => sum.tx_errors += 1,
            }
            seq = seq.wrapping_add(1);
            next += interval;
            // After a stall, keep the grid but do not send a burst.
            if next < now {
                next = now + interval;
            }
        }
        let wait_until = end.unwrap_or(next);
        let wait = wait_until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_micros(100));
        if sock.set_read_timeout(Some(wait)).is_err() {
            sum.tx_errors += 1;
        }
        if let Ok(n) = sock.recv(&mut inb) {
            let rx_ns = crate::sys::realtime_ns();
            if tr.reply(&inb[..n], rx_ns) {
                sum.rx_packets += 1;
                sum.rx_bytes += n as u64;
            } else {
                sum.foreign += 1;
            }
        }
    }
    sum.elapsed_s = t0.elapsed().saturating_sub(GRACE).as_secs_f64();
    sum.cpu_s = crate::sys::process_cpu_seconds();
    sum.reordered = tr.samples.iter().filter(|s| s.reordered()).count() as u64;
    sum.duplicates = tr.samples.iter().map(|s| u64::from(s.duplicates())).sum();
    for chunk in tr.samples.chunks(CHUNK) {
        let _ = ctx.out.send(Response::LatencyProbes {
            test: ctx.test,
            probes: chunk.to_vec(),
        });
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(token: u64, seq: u32, count: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let mut p = Probe::request(token, seq, 1);
        p.kind = Kind::Reply;
        p.rx_count = count;
        p.responder_rx_ns = 10;
        p.responder_tx_ns = 11;
        p.emit(&mut b);
        b
    }

    #[test]
    fn tracks_replies_reorder_and_duplicates() {
        let mut t = Tracker::new(9, 4);
        for s in 0..4 {
            t.sent(s, 100 + u64::from(s));
        }
        assert!(t.reply(&reply(9, 0, 1), 200));
        assert!(t.reply(&reply(9, 2, 2), 210));
        assert!(t.reply(&reply(9, 1, 3), 220));
        assert!(t.reply(&reply(9, 1, 3), 221));
        assert!(!t.reply(&reply(8, 3, 4), 230), "another session's token");
        assert!(!t.reply(&reply(9, 77, 4), 230), "a sequence never sent");
        assert!(t.samples[1].reordered());
        assert_eq!(t.samples[1].duplicates(), 1);
        assert!(!t.samples[3].answered());
        assert_eq!(t.samples[2].5, 2);
    }
}
