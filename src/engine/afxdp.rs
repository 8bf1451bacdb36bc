//! The AF_XDP engine (`--tx-engine xdp`): the packet engine's frames put
//! on an AF_XDP socket's TX ring, one socket per egress interface (queue 0),
//! zero-copy where the driver offers it, copy mode elsewhere.

use super::frame::{Marks, Msg, Template, Transmit, FILL};
use super::path::{resolve, Resolved};
use super::EngineError;
use crate::proto::FlowSpec;
use crate::sys;
use std::io;
use std::net::UdpSocket;

/// The XDP engine's transmitter: the same frames as the packet engine, put
/// on an AF_XDP socket's TX ring (one socket per egress interface, queue 0),
/// zero-copy where the driver offers it, copy mode elsewhere.
pub struct XdpTx {
    sockets: Vec<(sys::Xsk, Vec<usize>)>,
    templates: Vec<Template>,
    sizes: usize,
    _port: Option<UdpSocket>,
}

/// UMEM frames per socket and their size (a power of two that holds the
/// largest frame linerate sends, 9000 B jumbo frames included).
const XDP_FRAMES: u32 = 4096;

impl XdpTx {
    pub fn open(
        flows: &[FlowSpec],
        sizes: &[u32],
        ipv6: bool,
        marks: Marks,
    ) -> Result<XdpTx, EngineError> {
        let r = resolve(flows, sizes, ipv6, marks)?;
        let sockets = XdpTx::sockets(&r)?;
        Ok(XdpTx::with(sockets, r, sizes.len()))
    }

    /// One AF_XDP socket per egress interface of resolved flows.
    pub(super) fn sockets(r: &Resolved) -> Result<Vec<(sys::Xsk, Vec<usize>)>, EngineError> {
        let frame_size = (r.slot as u32).next_power_of_two().max(2048);
        let mut sockets = Vec::new();
        for (&ifindex, fl) in &r.by_if {
            let mut x = sys::Xsk::open(ifindex, XDP_FRAMES, frame_size).map_err(|e| {
                EngineError::Unavailable(format!("opening an AF_XDP socket on ifindex {ifindex}: {e} (needs root and a kernel with AF_XDP)"))
            })?;
            // Payload bytes after the linerate header are the same in every
            // frame: fill every UMEM frame once.
            x.fill_new_frames(FILL);
            sockets.push((x, fl.clone()));
        }
        Ok(sockets)
    }

    pub(super) fn with(sockets: Vec<(sys::Xsk, Vec<usize>)>, r: Resolved, sizes: usize) -> XdpTx {
        XdpTx {
            sockets,
            templates: r.templates,
            sizes,
            _port: r.port,
        }
    }
}

impl Transmit for XdpTx {
    fn groups(&self) -> Vec<Vec<usize>> {
        self.sockets.iter().map(|s| s.1.clone()).collect()
    }

    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize> {
        let (templates, sizes) = (&self.templates, self.sizes);
        self.sockets[group].0.send(msgs.len(), |j, buf| {
            let m = &msgs[j];
            templates[m.flow * sizes + m.size].write(&m.header, buf)
        })
    }

    fn finish(&mut self) -> u64 {
        // Frames still on a ring when the sender stops have been counted as
        // sent: give the kernel up to a second to send them, and report any
        // it did not (or refused as invalid) so they count as send errors.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut stuck = 0;
        for (x, _) in &mut self.sockets {
            while x.in_flight() > 0 && std::time::Instant::now() < deadline {
                let _ = x.kick();
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            stuck += u64::from(x.in_flight()) + x.invalid();
        }
        stuck
    }

    fn name(&self) -> &'static str {
        "xdp"
    }
}
