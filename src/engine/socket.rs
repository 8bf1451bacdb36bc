//! The socket engine: UDP sockets and the kernel's UDP/IP send path and
//! qdisc, with `sendmmsg` batches (one connected socket per flow where the
//! flows allow it). The portable fallback of every other engine.

use super::frame::{frame_sequence, Msg, SendSpec, Transmit};
use super::EngineError;
use crate::proto::frame::HEADER_LEN;
use crate::proto::{RxEngine, TxEngine};
use crate::sys::{self, Cmsg, Sendmmsg, SockAddr};
use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

struct TxSocket {
    sock: UdpSocket,
    connected: bool,
    flows: Vec<usize>,
}

fn unspecified(ipv6: bool, port: u16) -> SocketAddr {
    if ipv6 {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, port))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
    }
}

fn open_tx_sockets(spec: &SendSpec, ipv6: bool) -> io::Result<Vec<TxSocket>> {
    // One socket per distinct source port; flows that vary only addresses share one.
    let mut by_port: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, f) in spec.flows.iter().enumerate() {
        by_port.entry(f.src_port).or_default().push(i);
    }
    let mut out = Vec::new();
    for (port, flows) in by_port {
        let sock = UdpSocket::bind(unspecified(ipv6, port))?;
        let fd = sock.as_raw_fd();
        sys::set_buffer(fd, false, spec.window.map_or(4 << 20, |w| w as usize))?;
        if flows.iter().any(|&i| spec.flows[i].src.is_some()) {
            sys::set_transparent(fd, ipv6)?;
        }
        if let Some(d) = spec.dscp {
            sys::set_tos(fd, d.tos())?;
        }
        // A single plain flow goes through a connected socket: the route is
        // looked up once instead of per datagram.
        let connected = flows.len() == 1 && spec.flows[flows[0]].src.is_none();
        if connected {
            sock.connect(spec.flows[flows[0]].dst)?;
        }
        out.push(TxSocket {
            sock,
            connected,
            flows,
        });
    }
    Ok(out)
}

/// The socket engine: datagrams through UDP sockets, the kernel's UDP/IP
/// send path and the qdisc.
pub struct SocketTx {
    sockets: Vec<TxSocket>,
    dsts: Vec<SockAddr>,
    cmsgs: Vec<Option<Cmsg>>,
    /// UDP payload bytes per entry of the frame sequence.
    payloads: Vec<usize>,
    max_payload: usize,
    /// Preallocated payloads; only the header is rewritten per datagram.
    bufs: Vec<u8>,
    mm: Sendmmsg,
    /// The VLAN sub-interface the frames leave by (`--vlan`), held for
    /// the job.
    _vlan: Option<crate::netops::vlan::SubIf>,
    /// `udp -w`: the SO_SNDBUF asked for.
    window: Option<u32>,
}

impl SocketTx {
    pub fn open(spec: &SendSpec, ipv6: bool, batch: usize) -> Result<SocketTx, EngineError> {
        let vlan = match (spec.vlan, spec.flows.first()) {
            (Some(v), Some(f)) => {
                let sub = crate::netops::vlan::egress(f.dst.ip())
                    .and_then(|dev| crate::netops::vlan::ensure(&dev, v))
                    .map_err(|e| EngineError::Unavailable(format!("{e:#}")))?;
                sub
            }
            _ => None,
        };
        let sockets = open_tx_sockets(spec, ipv6).map_err(|e| {
            EngineError::Unavailable(format!("opening UDP sender sockets: {e} (varying source addresses needs root for IP_TRANSPARENT)"))
        })?;
        let payloads: Vec<usize> = frame_sequence(spec.frame)
            .iter()
            .map(|&s| {
                super::frame::payload_for_frame(s, ipv6, spec.vlan).unwrap_or(HEADER_LEN as u32)
                    as usize
            })
            .map(|p| p.max(HEADER_LEN))
            .collect();
        let max_payload = payloads.iter().copied().max().unwrap_or(HEADER_LEN);
        Ok(SocketTx {
            sockets,
            dsts: spec.flows.iter().map(|f| SockAddr::new(f.dst)).collect(),
            cmsgs: spec
                .flows
                .iter()
                .map(|f| f.src.map(Cmsg::source_address))
                .collect(),
            payloads,
            max_payload,
            bufs: vec![0x78u8; batch * max_payload],
            mm: Sendmmsg::new(batch),
            _vlan: vlan,
            window: spec.window,
        })
    }
}

impl Transmit for SocketTx {
    fn groups(&self) -> Vec<Vec<usize>> {
        self.sockets.iter().map(|s| s.flows.clone()).collect()
    }

    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize> {
        let max = self.max_payload;
        let n = msgs.len().min(self.bufs.len() / max);
        for (j, m) in msgs[..n].iter().enumerate() {
            m.header.emit(&mut self.bufs[j * max..j * max + HEADER_LEN]);
        }
        let s = &self.sockets[group];
        let (bufs, payloads, dsts, cmsgs) = (&self.bufs, &self.payloads, &self.dsts, &self.cmsgs);
        self.mm.send(s.sock.as_raw_fd(), n, |j| {
            let m = &msgs[j];
            let payload = &bufs[j * max..j * max + payloads[m.size]];
            let dst = if s.connected {
                None
            } else {
                Some(&dsts[m.flow])
            };
            (payload, dst, cmsgs[m.flow].as_ref())
        })
    }

    fn socket_buffers(&self) -> Option<crate::proto::SocketBuffers> {
        let w = self.window?;
        let s = self.sockets.first()?;
        Some(super::frame::socket_buffers(s.sock.as_raw_fd(), w))
    }

    fn name(&self) -> &'static str {
        "socket"
    }
}

/// The engines `udp -w` runs on: socket buffers exist only on the socket
/// engines' sockets, so `auto` means `socket` there, and an engine that
/// builds its own frames (packet, xdp, live) or counts them in XDP is
/// refused.
pub fn window_engines(
    window: Option<u32>,
    tx: TxEngine,
    rx: RxEngine,
) -> Result<(TxEngine, RxEngine), EngineError> {
    if window.is_none() {
        return Ok((tx, rx));
    }
    let tx = match tx {
        TxEngine::Auto | TxEngine::Socket => TxEngine::Socket,
        e => {
            return Err(EngineError::Invalid(format!(
                "-w/--window with --tx-engine {}: that engine sends without a UDP socket, so \
                 there is no SO_SNDBUF to set; use --tx-engine socket (or auto) with -w, or \
                 leave -w out",
                e.name()
            )))
        }
    };
    let rx = match rx {
        RxEngine::Auto | RxEngine::Socket => RxEngine::Socket,
        RxEngine::Xdp => {
            return Err(EngineError::Invalid(
                "-w/--window with --rx-engine xdp: the XDP sink counts frames before any \
                 socket, so there is no SO_RCVBUF to set; use --rx-engine socket (or auto) \
                 with -w, or leave -w out"
                    .into(),
            ))
        }
    };
    Ok((tx, rx))
}
