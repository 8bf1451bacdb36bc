//! The latency responder: answers probes of one session that the controller
//! opened over the control channel, and nothing else.
//!
//! Rules (after RFC 4656 §6.2/§6.5 and RFC 8762): a probe is answered only
//! when its token is the session's and it comes from the session's client
//! address, while the session lasts, and within the session's rate cap; the
//! reply is the request rewritten in place, so it is exactly as long as the
//! request. Everything else is counted and dropped without a byte sent.

use crate::engine::{EngineError, JobCtx};
use crate::proto::probe::{Kind, Probe};
use crate::proto::EndpointSummary;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Probes per second a session is answered at most, unless the controller
/// asks for less (a 10 ms prober sends 100).
pub const DEFAULT_MAX_PPS: u32 = 1000;
/// Hard ceiling of any session's rate cap.
pub const MAX_PPS_CEILING: u32 = 10_000;

/// One session as the controller opened it.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    pub token: u64,
    /// The only source address answered (the client's address as the
    /// responder sees it).
    pub client: IpAddr,
    pub duration: Duration,
    pub max_pps: u32,
}

/// Why a datagram got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Answer,
    NotAProbe,
    WrongToken,
    WrongAddress,
    Expired,
    RateCapped,
}

/// A token bucket of one second's worth at most a tenth of the rate.
pub struct RateCap {
    per_s: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl RateCap {
    pub fn new(max_pps: u32) -> Self {
        let per_s = f64::from(max_pps.clamp(1, MAX_PPS_CEILING));
        let burst = (per_s / 10.0).max(5.0);
        RateCap {
            per_s,
            burst,
            tokens: burst,
            last: None,
        }
    }
    pub fn take(&mut self, now: Instant) -> bool {
        if let Some(l) = self.last {
            let dt = now.saturating_duration_since(l).as_secs_f64();
            self.tokens = (self.tokens + dt * self.per_s).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The admission rule, without I/O: token and address are checked before
/// the rate cap spends anything.
pub fn judge(
    s: &Session,
    from: SocketAddr,
    datagram: &[u8],
    elapsed: Duration,
    cap: &mut RateCap,
    now: Instant,
) -> (Verdict, Option<Probe>) {
    let Ok(p) = Probe::parse(datagram) else {
        return (Verdict::NotAProbe, None);
    };
    if p.kind != Kind::Request {
        return (Verdict::NotAProbe, None);
    }
    if p.token != s.token {
        return (Verdict::WrongToken, None);
    }
    if from.ip() != s.client {
        return (Verdict::WrongAddress, None);
    }
    if elapsed >= s.duration {
        return (Verdict::Expired, None);
    }
    if !cap.take(now) {
        return (Verdict::RateCapped, None);
    }
    (Verdict::Answer, Some(p))
}

pub fn bind(addr: IpAddr) -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind(SocketAddr::new(addr, 0))?;
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    Ok(s)
}

/// Serves one session until it ends or the controller stops it; the socket
/// closes with it, so later probes meet a closed port.
///
/// Summary: `rx_packets` probes accepted, `tx_packets` replies sent,
/// `foreign` datagrams refused (not a probe, wrong token or address, after
/// the end), `tx_errors` probes over the rate cap plus failed sends.
pub fn serve(ctx: &JobCtx, sock: UdpSocket, s: Session) -> Result<EndpointSummary, EngineError> {
    let t0 = Instant::now();
    let mut cap = RateCap::new(s.max_pps);
    let mut buf = vec![0u8; 2048];
    let mut sum = EndpointSummary::default();
    let mut accepted: u32 = 0;
    while !ctx.stopped() {
        let elapsed = t0.elapsed();
        if elapsed >= s.duration {
            break;
        }
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(EngineError::io("latency responder: receiving")(e)),
        };
        let rx_ns = crate::sys::realtime_ns();
        let now = Instant::now();
        let dgram = &mut buf[..n];
        match judge(
            &s,
            from,
            dgram,
            now.saturating_duration_since(t0),
            &mut cap,
            now,
        ) {
            (Verdict::Answer, Some(mut p)) => {
                accepted = accepted.wrapping_add(1);
                sum.rx_packets += 1;
                sum.rx_bytes += n as u64;
                p.kind = Kind::Reply;
                p.rx_count = accepted;
                p.responder_rx_ns = rx_ns;
                p.responder_tx_ns = crate::sys::realtime_ns();
                // In place: the reply is exactly the request's length.
                if p.emit(dgram) && sock.send_to(dgram, from).is_ok() {
                    sum.tx_packets += 1;
                    sum.tx_bytes += n as u64;
                } else {
                    sum.tx_errors += 1;
                }
            }
            (Verdict::RateCapped, _) => sum.tx_errors += 1,
            _ => sum.foreign += 1,
        }
    }
    sum.elapsed_s = t0.elapsed().as_secs_f64();
    sum.cpu_s = crate::sys::process_cpu_seconds();
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(token: u64, kind: Kind) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let mut p = Probe::request(token, 1, 5);
        p.kind = kind;
        p.emit(&mut b);
        b
    }

    #[test]
    fn admission_rules() {
        let s = Session {
            token: 42,
            client: "198.18.0.1".parse().unwrap(),
            duration: Duration::from_secs(10),
            max_pps: 100,
        };
        let ok_from: SocketAddr = "198.18.0.1:5000".parse().unwrap();
        let bad_from: SocketAddr = "198.18.0.9:5000".parse().unwrap();
        let now = Instant::now();
        let mut cap = RateCap::new(100);
        let d = Duration::from_secs(1);
        let v = |r: (Verdict, Option<Probe>)| r.0;
        assert_eq!(
            v(judge(
                &s,
                ok_from,
                &probe(42, Kind::Request),
                d,
                &mut cap,
                now
            )),
            Verdict::Answer
        );
        assert_eq!(
            v(judge(
                &s,
                ok_from,
                &probe(41, Kind::Request),
                d,
                &mut cap,
                now
            )),
            Verdict::WrongToken
        );
        assert_eq!(
            v(judge(
                &s,
                bad_from,
                &probe(42, Kind::Request),
                d,
                &mut cap,
                now
            )),
            Verdict::WrongAddress
        );
        assert_eq!(
            v(judge(
                &s,
                ok_from,
                &probe(42, Kind::Reply),
                d,
                &mut cap,
                now
            )),
            Verdict::NotAProbe
        );
        assert_eq!(
            v(judge(&s, ok_from, b"hello", d, &mut cap, now)),
            Verdict::NotAProbe
        );
        let late = Duration::from_secs(10);
        assert_eq!(
            v(judge(
                &s,
                ok_from,
                &probe(42, Kind::Request),
                late,
                &mut cap,
                now
            )),
            Verdict::Expired
        );
    }

    #[test]
    fn rate_cap_bounds_a_burst() {
        let mut cap = RateCap::new(100);
        let t = Instant::now();
        let answered = (0..1000).filter(|_| cap.take(t)).count();
        assert_eq!(
            answered, 10,
            "a burst gets at most a tenth of a second's worth"
        );
        assert!(cap.take(t + Duration::from_millis(20)));
    }
}
