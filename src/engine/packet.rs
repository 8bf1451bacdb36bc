//! The packet engine: linerate builds each Ethernet/IP/UDP frame itself and
//! hands it to an AF_PACKET socket with PACKET_QDISC_BYPASS, skipping the
//! kernel's UDP/IP send path and the qdisc.
//!
//! Frames carry exactly what the socket engine would send: the flow's
//! addresses and ports, the same 18-byte linerate header and frame sizes, and
//! correct IPv4 header and UDP checksums (the receiver's kernel verifies
//! them). The egress interface, source MAC and next-hop MAC come from the
//! namespace's route and neighbour tables (`ip -j route get`, `ip -j neigh`);
//! this module never resolves a neighbour itself, so a missing one is a
//! reason to refuse, and auto falls back to the socket engine.

use super::afxdp::XdpTx;
use super::frame::{Marks, Msg, Template, Transmit, FILL};
use super::path::{resolve, Resolved};
use super::EngineError;
use crate::proto::FlowSpec;
use crate::sys::{self, Sendmmsg};
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, OwnedFd};

/// The packet engine's transmitter: one AF_PACKET socket per egress interface.
pub struct PacketTx {
    sockets: Vec<(OwnedFd, Vec<usize>)>,
    /// Per flow, per entry of the frame sequence: `templates[flow * sizes + size]`.
    templates: Vec<Template>,
    sizes: usize,
    slot: usize,
    bufs: Vec<u8>,
    mm: Sendmmsg,
    /// Holds the ephemeral source port of flows that ask for none, so nothing
    /// else on the host takes it while frames carry it.
    _port: Option<UdpSocket>,
}

impl PacketTx {
    /// Resolves every flow's path and opens the sockets; the error says why
    /// the packet engine cannot run here.
    pub fn open(
        flows: &[FlowSpec],
        sizes: &[u32],
        ipv6: bool,
        marks: Marks,
        batch: usize,
    ) -> Result<PacketTx, EngineError> {
        PacketTx::with(resolve(flows, sizes, ipv6, marks)?, sizes.len(), batch)
    }

    /// Opens one AF_PACKET socket per egress interface of resolved flows.
    fn with(r: Resolved, sizes: usize, batch: usize) -> Result<PacketTx, EngineError> {
        let mut sockets = Vec::new();
        for (&ifindex, fl) in &r.by_if {
            let fd = sys::packet_socket().map_err(|e| {
                EngineError::Unavailable(format!(
                    "opening an AF_PACKET socket: {e} (needs root or CAP_NET_RAW)"
                ))
            })?;
            let raw = fd.as_raw_fd();
            sys::set_qdisc_bypass(raw).map_err(|e| {
                EngineError::Unavailable(format!("setting PACKET_QDISC_BYPASS: {e}"))
            })?;
            sys::set_buffer(raw, false, 4 << 20).map_err(|e| {
                EngineError::Unavailable(format!("sizing the packet socket's send buffer: {e}"))
            })?;
            sys::bind_packet(raw, ifindex).map_err(|e| {
                EngineError::Unavailable(format!(
                    "binding the packet socket to ifindex {ifindex}: {e}"
                ))
            })?;
            sockets.push((fd, fl.clone()));
        }
        let slot = r.slot;
        Ok(PacketTx {
            sockets,
            templates: r.templates,
            sizes,
            slot,
            bufs: vec![FILL; batch * slot],
            mm: Sendmmsg::new(batch),
            _port: r.port,
        })
    }
}

/// The engine `auto` picks among the frame-building ones, with the flows'
/// paths resolved once: AF_XDP where every interface runs it zero-copy,
/// else AF_PACKET. The error says why neither can run here.
pub fn open_fastest(
    flows: &[FlowSpec],
    sizes: &[u32],
    ipv6: bool,
    marks: Marks,
    batch: usize,
) -> Result<Box<dyn Transmit>, EngineError> {
    let r = resolve(flows, sizes, ipv6, marks)?;
    match XdpTx::sockets(&r) {
        Ok(s) if s.iter().all(|(x, _)| x.zero_copy()) => {
            Ok(Box::new(XdpTx::with(s, r, sizes.len())))
        }
        _ => Ok(Box::new(PacketTx::with(r, sizes.len(), batch)?)),
    }
}

impl Transmit for PacketTx {
    fn groups(&self) -> Vec<Vec<usize>> {
        self.sockets.iter().map(|s| s.1.clone()).collect()
    }

    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize> {
        let slot = self.slot;
        let n = msgs.len().min(self.bufs.len() / slot);
        let mut lens = [0usize; 1024];
        for (j, m) in msgs[..n].iter().enumerate() {
            let t = &self.templates[m.flow * self.sizes + m.size];
            lens[j] = t.write(&m.header, &mut self.bufs[j * slot..(j + 1) * slot]);
        }
        let bufs = &self.bufs;
        self.mm.send(self.sockets[group].0.as_raw_fd(), n, |j| {
            (&bufs[j * slot..j * slot + lens[j]], None, None)
        })
    }

    fn name(&self) -> &'static str {
        "packet"
    }
}
