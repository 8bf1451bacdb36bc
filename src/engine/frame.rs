//! What every frame-building engine shares: the parameters of a sending
//! job, the [`Transmit`] trait an engine implements to put a batch on the
//! wire, the frame sizes a sender cycles through, and [`Template`]: one
//! flow's Ethernet/IP/UDP headers for one frame size with its checksums
//! precomputed, so only the linerate header and the UDP checksum change per
//! frame. The socket, packet, AF_XDP and XDP engines all build on this
//! module and on nothing of each other's.

use super::EngineError;
use crate::model::units;
use crate::proto::frame::{Header, HEADER_LEN};
use crate::proto::{Cidr, Dscp, FlowSpec, FrameSpec, RateProfile, TxEngine, Vlan};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Parameters of a sending job (from `Job::UdpSend`).
#[derive(Clone)]
pub struct SendSpec {
    pub flows: Vec<FlowSpec>,
    pub frame: FrameSpec,
    pub rate: Option<RateProfile>,
    pub duration: Duration,
    pub batch: usize,
    pub cpus: Vec<usize>,
    pub allow: Vec<Cidr>,
    pub tx_engine: TxEngine,
    /// Worker threads (0: one per CPU given, else half this agent's CPUs).
    pub threads: u16,
    /// VLAN tags on the frames: in the templates of frame-building engines,
    /// added by a sub-interface for sockets; counted in the frame size.
    pub vlan: Option<Vlan>,
    /// The DSCP of every frame: in the templates' IP header, set on the
    /// sockets of the socket engine; none: 0.
    pub dscp: Option<Dscp>,
    /// Stop after this many frames (a back-to-back burst) or at the
    /// duration's end, whichever comes first; none: at the end.
    pub max_frames: Option<u64>,
    /// SO_SNDBUF of the socket engine's sockets (`udp -w`); none: 4 MiB.
    pub window: Option<u32>,
}

impl SendSpec {
    /// What frame-building engines write into every frame beyond its
    /// flow's addresses.
    pub fn marks(&self) -> Marks {
        Marks {
            vlan: self.vlan,
            dscp: self.dscp,
        }
    }
}

/// What a frame-building engine writes into every frame of a job beyond
/// each flow's addresses and ports: VLAN tags and the DSCP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    pub vlan: Option<Vlan>,
    pub dscp: Option<Dscp>,
}

/// One datagram of a batch: its flow (index into the job's flows), its frame
/// size (index into [`frame_sequence`]) and the linerate header it carries.
#[derive(Debug, Clone, Copy)]
pub struct Msg {
    pub flow: usize,
    pub size: usize,
    pub header: Header,
}

/// When the frames of a kernel-paced batch are due ([`Transmit::send_paced`]).
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// CLOCK_MONOTONIC ns at which the batch's first frame is due (may be
    /// past: a sender behind sends the late frames at once).
    pub first_due_ns: u64,
    /// ns between frames.
    pub gap_ns: f64,
    /// A frame later than this is given up, not sent: a sender that
    /// stalled catches up at most this much.
    pub late_ns: u64,
    /// While catching up, frames leave at least this far apart, ns: a
    /// bounded overspeed, never a burst at the core's speed (0: no bound).
    pub catch_gap_ns: u64,
}

impl Pacing {
    /// The schedule of a run of `frames` that starts at `now_ns`. A run
    /// that starts so late that even its last frame is more than `late_ns`
    /// overdue would give up every frame and send none: its frames go from
    /// now at their spacing instead. That happens when the sender's own
    /// work before a run outlasts the frames it prepared (an unoptimised
    /// build at line rate took 2 to 7 ms for 2 to 4 ms of frames, and sent
    /// nothing at all). Nothing bursts: the frames keep their spacing, and
    /// the pacing loop, finding itself behind after the run, gives up what
    /// it missed. A run with any frame still in time keeps its schedule.
    pub fn starting_at(self, frames: usize, now_ns: u64) -> Pacing {
        let span = (frames.saturating_sub(1) as f64 * self.gap_ns) as u64;
        let last_due = self.first_due_ns.saturating_add(span);
        if now_ns > last_due.saturating_add(self.late_ns) {
            Pacing {
                first_due_ns: now_ns,
                ..self
            }
        } else {
            self
        }
    }
}

/// Puts batches of datagrams on the wire.
pub trait Transmit: Send {
    /// Flows per send group (one socket each); no group is empty.
    fn groups(&self) -> Vec<Vec<usize>>;
    /// Sends `msgs`, all of group `group`; returns how many the kernel took
    /// (a prefix of `msgs`). At most the batch size given at opening.
    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize>;
    /// Whether the engine spaces frames itself, in the kernel: the pacing
    /// loop then hands it a horizon's frames with their times through
    /// [`Transmit::send_paced`] instead of sending each batch when due.
    fn paces_itself(&self) -> bool {
        false
    }
    /// What the kernel gave `udp -w` on the engine's sockets (the socket
    /// engine; the others refuse `-w`).
    fn socket_buffers(&self) -> Option<crate::proto::SocketBuffers> {
        None
    }
    /// Sends `msgs`, all of group `group`, frame i not before
    /// `first_due_ns + i * gap_ns`, for about one run of the engine;
    /// returns how many left (a prefix of `msgs`) and how many frame slots
    /// it gave up as later than `late_ns` (the frames after them moved up:
    /// the loop counts the slots as missed). Engines that do not pace
    /// themselves send the batch at once.
    fn send_paced(
        &mut self,
        group: usize,
        msgs: &[Msg],
        _pacing: Pacing,
    ) -> io::Result<(usize, u64)> {
        self.send(group, msgs).map(|k| (k, 0))
    }
    /// "socket", "packet", "xdp" or "live", for results.
    fn name(&self) -> &'static str;
    /// Frames the engine put on the wire that are not the test's (the
    /// live engine's egress check), for the counters' cross-checks.
    fn own_frames(&self) -> u64 {
        0
    }
    /// Called once after the last batch: engines that queue frames for the
    /// kernel wait for them here and return how many never left (counted
    /// as send errors; they were counted as sent).
    fn finish(&mut self) -> u64 {
        0
    }
}

/// Frame sizes a sender cycles through. The imix interleaves its 7:4:1 mix
/// over 12 frames rather than sending runs of one size.
pub fn frame_sequence(spec: FrameSpec) -> Vec<u32> {
    match spec {
        FrameSpec::Fixed(n) => vec![n],
        FrameSpec::Imix => vec![64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 64, 594],
    }
}

/// Average frame size of a spec, in bytes with FCS.
pub fn average_frame(spec: FrameSpec) -> f64 {
    match spec {
        FrameSpec::Fixed(n) => f64::from(n),
        FrameSpec::Imix => units::imix_average(),
    }
}

/// Bytes the VLAN tags add to a frame (0 untagged).
pub fn tag_len(vlan: Option<Vlan>) -> u32 {
    vlan.map_or(0, |v| v.len() as u32)
}

/// UDP payload bytes of a `frame_size` B frame (FCS and tags included).
pub fn payload_for_frame(frame_size: u32, ipv6: bool, vlan: Option<Vlan>) -> Option<u32> {
    units::udp_payload_for_frame(frame_size.checked_sub(tag_len(vlan))?, ipv6)
}

/// Checks a frame spec against the IP version and tags: the frame must hold
/// Ethernet, its VLAN tags, IP and UDP headers plus the linerate header.
pub fn check_frames(spec: FrameSpec, ipv6: bool, vlan: Option<Vlan>) -> Result<(), EngineError> {
    for size in frame_sequence(spec) {
        if !(units::MIN_FRAME..=units::MAX_FRAME).contains(&size) {
            return Err(EngineError::Invalid(format!(
                "frame size {size} B is outside {}..={} B (sizes include the 4-byte FCS)",
                units::MIN_FRAME,
                units::MAX_FRAME
            )));
        }
        let payload = payload_for_frame(size, ipv6, vlan).unwrap_or(0);
        if (payload as usize) < HEADER_LEN {
            let tags = match vlan {
                None => String::new(),
                Some(v) if v.inner.is_some() => " with QinQ tags (8 B)".to_string(),
                Some(_) => " with a VLAN tag (4 B)".to_string(),
            };
            let min = units::FCS
                + tag_len(vlan)
                + units::ETH_HEADER
                + if ipv6 {
                    units::IPV6_HEADER
                } else {
                    units::IPV4_HEADER
                }
                + units::UDP_HEADER
                + HEADER_LEN as u32;
            return Err(EngineError::Invalid(format!(
                "a {size} B frame{tags} cannot carry {} + UDP + the 18-byte linerate header; the smallest {} frame{tags} is {min} B (tags count in the frame size)",
                if ipv6 { "IPv6" } else { "IPv4" },
                if ipv6 { "IPv6" } else { "IPv4" },
            )));
        }
    }
    Ok(())
}

/// Bytes on the L2 wire (FCS and VLAN tags included) of a datagram with
/// `payload` bytes.
pub fn frame_of_payload(payload: usize, ipv6: bool, vlan: Option<Vlan>) -> u64 {
    let ip = if ipv6 {
        units::IPV6_HEADER
    } else {
        units::IPV4_HEADER
    };
    payload as u64
        + u64::from(units::UDP_HEADER + ip + units::ETH_HEADER + units::FCS + tag_len(vlan))
}

pub const ETH_HEADER: usize = 14;
pub const IPV4_HEADER: usize = 20;
pub const IPV6_HEADER: usize = 40;
pub const UDP_HEADER: usize = 8;
const TTL: u8 = 64;
/// Payload bytes after the linerate header, as the socket engine fills them.
pub const FILL: u8 = 0x78;

/// Where one flow's frames go out: interface, MACs, addresses and ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowPath {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// Tags written after the MACs, before the EtherType.
    pub vlan: Option<Vlan>,
    /// The DSCP in the IPv4 TOS byte or IPv6 traffic class (ECN bits 0);
    /// none: 0.
    pub dscp: Option<Dscp>,
}

/// Ethernet header with up to two VLAN tags, IPv6 and UDP: the longest head.
const HEAD_MAX: usize = ETH_HEADER + 8 + IPV6_HEADER + UDP_HEADER;

/// A flow's frame of one size, headers ready; only the linerate header and
/// the UDP checksum change per frame.
#[derive(Debug, Clone)]
pub struct Template {
    head: [u8; HEAD_MAX],
    head_len: usize,
    /// Bytes handed to the socket: the frame size less the FCS the NIC adds.
    frame_len: usize,
    /// One's-complement sum of the UDP pseudo-header, UDP header and payload
    /// with the linerate header zeroed.
    csum_base: u64,
}

/// Sums big-endian 16-bit words; an odd last byte is the high byte of a word.
pub fn sum16(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(2);
    let mut s: u64 = chunks
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = chunks.remainder() {
        s += u64::from(*last) << 8;
    }
    s
}

/// Folds a sum into 16 bits and complements it (RFC 1071).
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Writes the EtherType and the IP header of a frame whose UDP datagram is
/// `udp_len` bytes into `head` (from the EtherType on): the header's
/// length, and the UDP checksum's pseudo-header.
fn ip_header(
    head: &mut [u8],
    path: &FlowPath,
    udp_len: usize,
    frame_size: u32,
) -> Result<(usize, Vec<u8>), EngineError> {
    let tos = path.dscp.map_or(0, Dscp::tos);
    let mut pseudo = Vec::with_capacity(40);
    let ip_len = match (path.src.ip(), path.dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            head[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let total = u16::try_from(IPV4_HEADER + udp_len).map_err(|_| {
                EngineError::Invalid(format!("a {frame_size} B frame is too long for IPv4"))
            })?;
            let ip = &mut head[ETH_HEADER..ETH_HEADER + IPV4_HEADER];
            ip[0] = 0x45;
            // Before the header checksum, which covers it.
            ip[1] = tos;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            // Identification 0 with DF: an atomic datagram (RFC 6864).
            ip[6] = 0x40;
            ip[8] = TTL;
            ip[9] = libc::IPPROTO_UDP as u8;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let c = fold(sum16(ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, libc::IPPROTO_UDP as u8]);
            pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
            IPV4_HEADER
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            head[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let plen = u16::try_from(udp_len).map_err(|_| {
                EngineError::Invalid(format!("a {frame_size} B frame is too long for IPv6"))
            })?;
            let ip = &mut head[ETH_HEADER..ETH_HEADER + IPV6_HEADER];
            // Version 6, then the traffic class across the nibbles
            // (flow label 0).
            ip[0] = 0x60 | tos >> 4;
            ip[1] = tos << 4;
            ip[4..6].copy_from_slice(&plen.to_be_bytes());
            ip[6] = libc::IPPROTO_UDP as u8;
            ip[7] = TTL;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&(udp_len as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, libc::IPPROTO_UDP as u8]);
            IPV6_HEADER
        }
        _ => unreachable!("IP versions checked above"),
    };
    Ok((ip_len, pseudo))
}

impl Template {
    /// The frame of `frame_size` bytes (FCS included) for one flow path.
    pub fn new(path: &FlowPath, frame_size: u32) -> Result<Template, EngineError> {
        let ipv6 = path.dst.is_ipv6();
        if path.src.is_ipv6() != ipv6 {
            return Err(EngineError::Invalid(format!(
                "source {} and destination {} are of different IP versions",
                path.src, path.dst
            )));
        }
        let payload = payload_for_frame(frame_size, ipv6, path.vlan)
            .map(|p| p as usize)
            .filter(|&p| p >= HEADER_LEN)
            .ok_or_else(|| {
                EngineError::Invalid(format!(
                    "a {frame_size} B frame{} cannot carry the linerate header",
                    if path.vlan.is_some() {
                        " with its VLAN tags"
                    } else {
                        ""
                    }
                ))
            })?;
        let udp_len = UDP_HEADER + payload;
        let mut full = [0u8; HEAD_MAX];
        full[0..6].copy_from_slice(&path.dst_mac);
        full[6..12].copy_from_slice(&path.src_mac);
        // The tags sit between the MACs and the EtherType; everything after
        // moves by their length, and no checksum covers them.
        let tags = tag_len(path.vlan) as usize;
        if let Some(v) = path.vlan {
            v.emit(&mut full[12..12 + tags]);
        }
        let head = &mut full[tags..];
        let (ip_len, pseudo) = ip_header(head, path, udp_len, frame_size)?;
        let u = ETH_HEADER + ip_len;
        head[u..u + 2].copy_from_slice(&path.src.port().to_be_bytes());
        head[u + 2..u + 4].copy_from_slice(&path.dst.port().to_be_bytes());
        head[u + 4..u + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let udp_sum = sum16(&head[u..u + UDP_HEADER]);
        let head_len = tags + u + UDP_HEADER;
        let fill = payload - HEADER_LEN;
        // The fill bytes start at an even offset (the header is 18 bytes).
        let fill_sum = (fill / 2) as u64 * u64::from(u16::from_be_bytes([FILL, FILL]))
            + if fill % 2 == 1 {
                u64::from(FILL) << 8
            } else {
                0
            };
        let csum_base = sum16(&pseudo) + udp_sum + fill_sum;
        Ok(Template {
            head: full,
            head_len,
            frame_len: head_len + payload,
            csum_base,
        })
    }

    /// Writes the frame with `h` into `buf`, whose bytes past the linerate
    /// header must already hold the fill. Returns the frame's length.
    pub fn write(&self, h: &Header, buf: &mut [u8]) -> usize {
        let (hl, fl) = (self.head_len, self.frame_len);
        buf[..hl].copy_from_slice(&self.head[..hl]);
        h.emit(&mut buf[hl..hl + HEADER_LEN]);
        let c = fold(self.csum_base + sum16(&buf[hl..hl + HEADER_LEN]));
        // 0 means "no checksum" in UDP over IPv4 and is invalid over IPv6.
        let c = if c == 0 { 0xffff } else { c };
        buf[hl - 2..hl].copy_from_slice(&c.to_be_bytes());
        fl
    }

    /// The whole frame with `h`, fill included (tests, tools).
    pub fn frame(&self, h: &Header) -> Vec<u8> {
        let mut buf = vec![FILL; self.frame_len];
        self.write(h, &mut buf);
        buf
    }
}

/// What the kernel gave a `-w` request of `requested` bytes on `fd`:
/// SO_SNDBUF and SO_RCVBUF as it reports them (twice the request, capped
/// by wmem_max/rmem_max where the agent may not pass them).
pub fn socket_buffers(fd: std::os::fd::RawFd, requested: u32) -> crate::proto::SocketBuffers {
    let get = |receive| {
        crate::sys::get_buffer(fd, receive)
            .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
            .unwrap_or(0)
    };
    crate::proto::SocketBuffers {
        requested_bytes: requested,
        sndbuf_bytes: get(false),
        rcvbuf_bytes: get(true),
    }
}

#[cfg(test)]
mod tests;
