//! The ways of probing a target: UDP to a latency responder's session,
//! or ICMP echo.

use crate::latency::icmp::Pinger;
use crate::proto::probe::{Kind, Probe};
use crate::sys::realtime_ns;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A reply to one probe: its sequence number, RTT, and (responders) the
/// responder's accepted count.
pub(super) struct Reply {
    pub(super) seq: u32,
    pub(super) rtt_ns: u64,
    pub(super) rx_count: Option<u32>,
}

/// One way of probing a target.
pub(super) trait Prober: Send {
    fn send(&mut self, seq: u32) -> bool;
    fn recv(&mut self, wait: Duration) -> Option<Reply>;
}

/// The session a responder target probes: token and address.
pub(super) type SessionSlot = Arc<Mutex<Option<(u64, SocketAddr)>>>;

pub(super) struct UdpProber {
    pub(super) sock: UdpSocket,
    pub(super) session: SessionSlot,
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
}

impl Prober for UdpProber {
    fn send(&mut self, seq: u32) -> bool {
        let Some((token, addr)) = self.session.lock().ok().and_then(|g| *g) else {
            return false;
        };
        let mut b = vec![0u8; self.len];
        Probe::request(token, seq, realtime_ns()).emit(&mut b);
        self.sock.send_to(&b, addr).is_ok()
    }
    fn recv(&mut self, wait: Duration) -> Option<Reply> {
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_micros(100))))
            .ok()?;
        let (n, from) = self.sock.recv_from(&mut self.buf).ok()?;
        let rx = realtime_ns();
        let (token, addr) = self.session.lock().ok().and_then(|g| *g)?;
        let p = Probe::parse(&self.buf[..n]).ok()?;
        if from != addr || p.token != token || p.kind != Kind::Reply {
            return None;
        }
        let turnaround = p.responder_tx_ns.saturating_sub(p.responder_rx_ns);
        Some(Reply {
            seq: p.seq,
            rtt_ns: rx.saturating_sub(p.client_tx_ns).saturating_sub(turnaround),
            rx_count: Some(p.rx_count),
        })
    }
}

pub(super) struct IcmpProber {
    pub(super) pinger: Pinger,
    pub(super) buf: Vec<u8>,
}

impl Prober for IcmpProber {
    fn send(&mut self, seq: u32) -> bool {
        self.pinger.send(seq, realtime_ns()).is_ok()
    }
    fn recv(&mut self, wait: Duration) -> Option<Reply> {
        let (seq, tx) = self.pinger.recv(wait, &mut self.buf)?;
        Some(Reply {
            seq,
            rtt_ns: realtime_ns().saturating_sub(tx),
            rx_count: None,
        })
    }
}
