//! The UDP receive engines and the choice between them: the socket
//! receiver ([`super::udp`], recvmmsg on SO_REUSEPORT sockets) or the XDP
//! sink ([`super::xdp::sink`], counted and dropped in the driver). Both
//! hand back the same summary; it records which one counted and, for
//! auto, why XDP did not.

use super::udp;
use super::xdp::sink::{self, Sink, SinkSpec};
use super::EngineError;
use super::{workers, JobCtx};
use crate::proto::{EndpointSummary, RxEngine};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// What a receiver job asks for.
#[derive(Debug, Clone)]
pub struct RxSpec {
    pub bind: IpAddr,
    /// The port to receive on (0: any free one).
    pub port: u16,
    pub flows: u16,
    pub cpus: Vec<usize>,
    pub threads: u16,
    pub rx_engine: RxEngine,
    /// The address the senders aim at (the XDP sink's interface holds it).
    pub target: Option<IpAddr>,
    /// Tags the frames carry: counted in frame bytes; the XDP sink skips
    /// them, a socket receiver listens on a VLAN sub-interface.
    pub vlan: Option<crate::proto::Vlan>,
    /// The DSCP the senders mark with: the frames that arrive are then
    /// counted per DSCP value (a DUT may remark them).
    pub dscp: Option<crate::proto::Dscp>,
    /// SO_RCVBUF of the socket receiver's sockets (`udp -w`); none: 32 MiB.
    pub window: Option<u32>,
}

enum Engine {
    /// The sockets, and the VLAN sub-interface they receive on (`--vlan`).
    Socket(Vec<UdpSocket>, Option<crate::netops::vlan::SubIf>),
    /// The sink and the socket that keeps its port.
    Xdp(Box<Sink>, UdpSocket),
}

/// A receiver with its engine open, ready to run on its own thread.
pub struct Receiver {
    engine: Engine,
    port: u16,
    spec: RxSpec,
    note: Option<String>,
}

fn port_of(s: &UdpSocket) -> Result<u16, EngineError> {
    Ok(s.local_addr()
        .map_err(EngineError::io("reading the receiver's port"))?
        .port())
}

fn open_socket(spec: &RxSpec) -> Result<(Engine, u16), EngineError> {
    let vlan = match (spec.vlan, spec.target) {
        (Some(v), Some(t)) => crate::netops::vlan::holder(t)
            .and_then(|dev| crate::netops::vlan::ensure(&dev, v))
            .map_err(|e| EngineError::Unavailable(format!("{e:#}")))?,
        (Some(v), None) => {
            return Err(EngineError::Unavailable(format!(
                "the controller named no target address, so the interface to put VLAN {v} on \
                 is unknown (an older controller)"
            )))
        }
        _ => None,
    };
    let n = workers::thread_count(spec.threads, &spec.cpus, usize::from(spec.flows));
    let socks = udp::bind_receivers(spec.bind, spec.port, n, spec.window).map_err(
        EngineError::io(format!(
            "binding the UDP receiver on {}",
            SocketAddr::new(spec.bind, spec.port)
        )),
    )?;
    if spec.dscp.is_some() {
        for s in &socks {
            crate::sys::set_recv_tos(s.as_raw_fd()).map_err(EngineError::io(
                "asking for each datagram's TOS or traffic class (IP_RECVTOS, IPV6_RECVTCLASS)",
            ))?;
        }
    }
    let port = port_of(
        socks
            .first()
            .ok_or_else(|| EngineError::Failed("no receiver socket".into()))?,
    )?;
    Ok((Engine::Socket(socks, vlan), port))
}

fn open_xdp(spec: &RxSpec) -> Result<(Engine, u16), EngineError> {
    let target = spec.target.ok_or_else(|| {
        EngineError::Unavailable(
            "the controller named no target address, so the interface to attach to is unknown \
             (an older controller)"
                .into(),
        )
    })?;
    let ifname = sink::interface_of(target)?;
    // The socket keeps the port, so no other process takes it and the
    // frames the sink passes on find a receiver instead of an ICMP error.
    let sock = udp::bind_receivers(spec.bind, spec.port, 1, None)
        .map_err(EngineError::io(format!(
            "binding the UDP receiver on {}",
            spec.bind
        )))?
        .into_iter()
        .next()
        .ok_or_else(|| EngineError::Failed("no receiver socket".into()))?;
    let port = port_of(&sock)?;
    let s = Sink::open(
        SinkSpec {
            flows: spec.flows.max(1),
            ports: (port, port),
            // Frames are stamped with CLOCK_MONOTONIC, which is the
            // kernel's bpf_ktime_get_ns(): no offset on one host.
            clock_offset_ns: 0,
            tag_bytes: crate::engine::frame::tag_len(spec.vlan),
        },
        &ifname,
    )?;
    Ok((Engine::Xdp(Box::new(s), sock), port))
}

/// Opens the engine `spec.rx_engine` asks for; with auto, the XDP sink
/// where it attaches, else the socket receiver and why.
pub fn open(spec: RxSpec) -> Result<Receiver, EngineError> {
    let (engine, port, note) = match spec.rx_engine {
        RxEngine::Socket => {
            let (e, p) = open_socket(&spec)?;
            (e, p, None)
        }
        RxEngine::Xdp => {
            let (e, p) = open_xdp(&spec).map_err(|e| match e {
                EngineError::Unavailable(m) => EngineError::Unavailable(format!(
                    "the xdp receiver cannot run here: {m}; use --rx-engine socket or auto"
                )),
                e => e,
            })?;
            (e, p, None)
        }
        RxEngine::Auto => match open_xdp(&spec) {
            Ok((e, p)) => (e, p, None),
            Err(EngineError::Unavailable(m)) => {
                let (e, p) = open_socket(&spec)?;
                (e, p, Some(format!("xdp refused: {m}")))
            }
            Err(e) => return Err(e),
        },
    };
    Ok(Receiver {
        engine,
        port,
        spec,
        note,
    })
}

impl Receiver {
    /// The UDP port the senders aim at.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The engine that will count: "socket" or "xdp".
    pub fn engine(&self) -> &'static str {
        match self.engine {
            Engine::Socket(..) => "socket",
            Engine::Xdp(..) => "xdp",
        }
    }

    /// Counts until the controller stops the job.
    pub fn run(self, ctx: &JobCtx) -> Result<EndpointSummary, EngineError> {
        let buffers = match (&self.engine, self.spec.window) {
            (Engine::Socket(socks, _), Some(w)) => socks
                .first()
                .map(|s| super::frame::socket_buffers(s.as_raw_fd(), w)),
            _ => None,
        };
        let mut s = match self.engine {
            Engine::Socket(socks, _vlan) => udp::receive(
                ctx,
                socks,
                (self.spec.flows, self.spec.vlan, self.spec.dscp.is_some()),
                &self.spec.cpus,
            )?,
            Engine::Xdp(sink, sock) => sink::receive(ctx, *sink, sock, &self.spec.cpus)?,
        };
        if self.spec.dscp.is_none() {
            // The sink counts always (one add per frame); reported when asked.
            s.dscp_received.clear();
        }
        s.rx_engine_note = self.note;
        s.socket_buffers = buffers;
        Ok(s)
    }
}
