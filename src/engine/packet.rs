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

use super::tx::{Msg, Transmit};
use crate::proto::frame::{Header, HEADER_LEN};
use crate::proto::FlowSpec;
use crate::sys::{self, Sendmmsg};
use crate::units;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};

const ETH_HEADER: usize = 14;
const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
const UDP_HEADER: usize = 8;
const TTL: u8 = 64;
/// Payload bytes after the linerate header, as the socket engine fills them.
const FILL: u8 = 0x78;

/// Where one flow's frames go out: interface, MACs, addresses and ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowPath {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// A flow's frame of one size, headers ready; only the linerate header and
/// the UDP checksum change per frame.
#[derive(Debug, Clone)]
pub struct Template {
    head: [u8; ETH_HEADER + IPV6_HEADER + UDP_HEADER],
    head_len: usize,
    /// Bytes handed to the socket: the frame size less the FCS the NIC adds.
    frame_len: usize,
    /// One's-complement sum of the UDP pseudo-header, UDP header and payload
    /// with the linerate header zeroed.
    csum_base: u64,
}

/// Sums big-endian 16-bit words; an odd last byte is the high byte of a word.
fn sum16(bytes: &[u8]) -> u64 {
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
fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

impl Template {
    /// The frame of `frame_size` bytes (FCS included) for one flow path.
    pub fn new(path: &FlowPath, frame_size: u32) -> Result<Template, String> {
        let ipv6 = path.dst.is_ipv6();
        if path.src.is_ipv6() != ipv6 {
            return Err(format!(
                "source {} and destination {} are of different IP versions",
                path.src, path.dst
            ));
        }
        let payload = units::udp_payload_for_frame(frame_size, ipv6)
            .map(|p| p as usize)
            .filter(|&p| p >= HEADER_LEN)
            .ok_or_else(|| format!("a {frame_size} B frame cannot carry the linerate header"))?;
        let udp_len = UDP_HEADER + payload;
        let mut head = [0u8; ETH_HEADER + IPV6_HEADER + UDP_HEADER];
        head[0..6].copy_from_slice(&path.dst_mac);
        head[6..12].copy_from_slice(&path.src_mac);
        let mut pseudo = Vec::with_capacity(40);
        let ip_len = match (path.src.ip(), path.dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                head[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let total = u16::try_from(IPV4_HEADER + udp_len)
                    .map_err(|_| format!("a {frame_size} B frame is too long for IPv4"))?;
                let ip = &mut head[ETH_HEADER..ETH_HEADER + IPV4_HEADER];
                ip[0] = 0x45;
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
                let plen = u16::try_from(udp_len)
                    .map_err(|_| format!("a {frame_size} B frame is too long for IPv6"))?;
                let ip = &mut head[ETH_HEADER..ETH_HEADER + IPV6_HEADER];
                ip[0] = 0x60;
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
        let u = ETH_HEADER + ip_len;
        head[u..u + 2].copy_from_slice(&path.src.port().to_be_bytes());
        head[u + 2..u + 4].copy_from_slice(&path.dst.port().to_be_bytes());
        head[u + 4..u + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let head_len = u + UDP_HEADER;
        let fill = payload - HEADER_LEN;
        // The fill bytes start at an even offset (the header is 18 bytes).
        let fill_sum = (fill / 2) as u64 * u64::from(u16::from_be_bytes([FILL, FILL]))
            + if fill % 2 == 1 {
                u64::from(FILL) << 8
            } else {
                0
            };
        let csum_base = sum16(&pseudo) + sum16(&head[u..head_len]) + fill_sum;
        Ok(Template {
            head,
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

/// What `ip -j route get` says about a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dev: String,
    pub gateway: Option<IpAddr>,
    pub prefsrc: Option<IpAddr>,
}

fn first(json: &str, what: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(json.trim())
        .map_err(|e| format!("unreadable `ip -j` output for {what}: {e}"))?;
    v.as_array()
        .and_then(|a| a.first())
        .cloned()
        .ok_or_else(|| format!("no entry for {what}"))
}

fn ip_field(v: &Value, key: &str) -> Option<IpAddr> {
    v.get(key)?.as_str()?.parse().ok()
}

/// Parses `ip -j route get DST`: refuses local, unreachable and loopback routes.
pub fn parse_route(json: &str, dst: IpAddr) -> Result<Route, String> {
    let r = first(json, &format!("the route to {dst}"))?;
    if let Some(t) = r.get("type").and_then(Value::as_str) {
        if t != "unicast" {
            return Err(format!(
                "the route to {dst} is of type {t}, not a unicast route out of an interface"
            ));
        }
    }
    let dev = r
        .get("dev")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the route to {dst} names no interface"))?
        .to_string();
    if dev == "lo" {
        return Err(format!("{dst} is reached over the loopback interface"));
    }
    Ok(Route {
        dev,
        gateway: ip_field(&r, "gateway"),
        prefsrc: ip_field(&r, "prefsrc"),
    })
}

/// An egress interface as `ip -j link show` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub mtu: u32,
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Parses `ip -j link show dev DEV`: an Ethernet interface that is up.
pub fn parse_link(json: &str, dev: &str) -> Result<Link, String> {
    let l = first(json, &format!("interface {dev}"))?;
    let kind = l.get("link_type").and_then(Value::as_str).unwrap_or("?");
    if kind != "ether" {
        return Err(format!(
            "interface {dev} is of link type {kind}, not Ethernet"
        ));
    }
    let up = l
        .get("flags")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("UP")));
    if !up {
        return Err(format!("interface {dev} is down"));
    }
    let ifindex = l
        .get("ifindex")
        .and_then(Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| format!("interface {dev} has no ifindex"))?;
    let mac = l
        .get("address")
        .and_then(Value::as_str)
        .and_then(parse_mac)
        .ok_or_else(|| format!("interface {dev} has no MAC address"))?;
    let mtu = l
        .get("mtu")
        .and_then(Value::as_u64)
        .and_then(|m| u32::try_from(m).ok())
        .unwrap_or(1500);
    Ok(Link { ifindex, mac, mtu })
}

/// Parses `ip -j neigh show to NH dev DEV`: the next hop's MAC, if known.
pub fn parse_neigh(json: &str, nh: IpAddr, dev: &str) -> Result<[u8; 6], String> {
    let missing = || {
        format!(
            "no usable neighbour entry for {nh} on {dev} (the packet engine does not run \
             ARP/ND; ping {nh} first or add a static neighbour)"
        )
    };
    if json.trim().is_empty() {
        return Err(missing());
    }
    let n = first(json, &format!("neighbour {nh}")).map_err(|_| missing())?;
    let bad = n.get("state").and_then(Value::as_array).is_some_and(|s| {
        s.iter()
            .any(|x| matches!(x.as_str(), Some("INCOMPLETE" | "FAILED" | "NOARP" | "NONE")))
    });
    if bad {
        return Err(missing());
    }
    n.get("lladdr")
        .and_then(Value::as_str)
        .and_then(parse_mac)
        .ok_or_else(missing)
}

fn ip_json(args: &[&str]) -> Result<String, String> {
    crate::netops::run_output("ip", args).map_err(|e| format!("{e:#}"))
}

/// Route, interface and next hop of every flow, looked up once.
struct Resolver {
    links: HashMap<String, Link>,
    neighbours: HashMap<(IpAddr, String), [u8; 6]>,
}

impl Resolver {
    fn route(&self, dst: IpAddr, src: Option<IpAddr>) -> Result<Route, String> {
        let fam = if dst.is_ipv6() { "-6" } else { "-4" };
        let d = dst.to_string();
        // With the flow's source first (policy routing), else without: a
        // source that is only accepted locally may not be usable in `from`.
        if let Some(s) = src {
            let s = s.to_string();
            if let Ok(out) = ip_json(&["-j", fam, "route", "get", &d, "from", &s]) {
                return parse_route(&out, dst);
            }
        }
        parse_route(&ip_json(&["-j", fam, "route", "get", &d])?, dst)
    }

    fn link(&mut self, dev: &str) -> Result<Link, String> {
        if let Some(l) = self.links.get(dev) {
            return Ok(l.clone());
        }
        crate::netops::check_ifname(dev).map_err(|e| format!("{e:#}"))?;
        let l = parse_link(&ip_json(&["-j", "link", "show", "dev", dev])?, dev)?;
        self.links.insert(dev.to_string(), l.clone());
        Ok(l)
    }

    fn neighbour(&mut self, nh: IpAddr, dev: &str) -> Result<[u8; 6], String> {
        let key = (nh, dev.to_string());
        if let Some(m) = self.neighbours.get(&key) {
            return Ok(*m);
        }
        let fam = if nh.is_ipv6() { "-6" } else { "-4" };
        let out = ip_json(&[
            "-j",
            fam,
            "neigh",
            "show",
            "to",
            &nh.to_string(),
            "dev",
            dev,
        ])?;
        let m = parse_neigh(&out, nh, dev)?;
        self.neighbours.insert(key, m);
        Ok(m)
    }
}

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

/// Every flow's frames, ready to write, and the interfaces they leave by.
struct Resolved {
    /// Per flow, per entry of the frame sequence: `templates[flow * sizes + size]`.
    templates: Vec<Template>,
    /// Flows per egress ifindex.
    by_if: BTreeMap<u32, Vec<usize>>,
    /// The largest frame, bytes without FCS rounding: one buffer slot.
    slot: usize,
    port: Option<UdpSocket>,
}

/// Resolves every flow's path (route, source, next-hop MAC) and builds its
/// frame templates; the error says why frames cannot be built here.
fn resolve(flows: &[FlowSpec], sizes: &[u32], ipv6: bool) -> Result<Resolved, String> {
    if sizes.is_empty() {
        return Err("no frame sizes".into());
    }
    if let Some(f) = flows.iter().find(|f| f.dst.ip().is_loopback()) {
        return Err(format!("{} is a loopback address", f.dst.ip()));
    }
    // The socket engine binds one ephemeral port for flows without a
    // source port; so does this engine, and keeps it bound.
    let port = if flows.iter().any(|f| f.src_port == 0) {
        let any: IpAddr = if ipv6 {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        };
        Some(
            UdpSocket::bind(SocketAddr::new(any, 0))
                .map_err(|e| format!("reserving a source port: {e}"))?,
        )
    } else {
        None
    };
    let eph = match &port {
        Some(s) => s
            .local_addr()
            .map_err(|e| format!("reading the reserved source port: {e}"))?
            .port(),
        None => 0,
    };
    let mut res = Resolver {
        links: HashMap::new(),
        neighbours: HashMap::new(),
    };
    let max_frame = sizes.iter().copied().max().unwrap_or(64);
    let mut by_if: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut templates = Vec::with_capacity(flows.len() * sizes.len());
    for (i, f) in flows.iter().enumerate() {
        let route = res.route(f.dst.ip(), f.src)?;
        let link = res.link(&route.dev)?;
        // An L2 frame of the largest size must fit the interface's MTU.
        let l3 = max_frame as usize - units::FCS as usize - ETH_HEADER;
        if l3 > link.mtu as usize {
            return Err(format!(
                "{max_frame} B frames exceed the MTU {} of {}",
                link.mtu, route.dev
            ));
        }
        let nh = route.gateway.unwrap_or(f.dst.ip());
        let dst_mac = res.neighbour(nh, &route.dev)?;
        let src_ip = f
            .src
            .or(route.prefsrc)
            .ok_or_else(|| format!("no source address for {} (the route names none)", f.dst))?;
        let src_port = if f.src_port == 0 { eph } else { f.src_port };
        let path = FlowPath {
            src_mac: link.mac,
            dst_mac,
            src: SocketAddr::new(src_ip, src_port),
            dst: f.dst,
        };
        for &s in sizes {
            templates.push(Template::new(&path, s)?);
        }
        by_if.entry(link.ifindex).or_default().push(i);
    }
    Ok(Resolved {
        templates,
        by_if,
        slot: max_frame as usize,
        port,
    })
}

impl PacketTx {
    /// Resolves every flow's path and opens the sockets; the error says why
    /// the packet engine cannot run here.
    pub fn open(
        flows: &[FlowSpec],
        sizes: &[u32],
        ipv6: bool,
        batch: usize,
    ) -> Result<PacketTx, String> {
        PacketTx::with(resolve(flows, sizes, ipv6)?, sizes.len(), batch)
    }

    /// Opens one AF_PACKET socket per egress interface of resolved flows.
    fn with(r: Resolved, sizes: usize, batch: usize) -> Result<PacketTx, String> {
        let mut sockets = Vec::new();
        for (&ifindex, fl) in &r.by_if {
            let fd = sys::packet_socket().map_err(|e| {
                format!("opening an AF_PACKET socket: {e} (needs root or CAP_NET_RAW)")
            })?;
            let raw = fd.as_raw_fd();
            sys::set_qdisc_bypass(raw).map_err(|e| format!("setting PACKET_QDISC_BYPASS: {e}"))?;
            sys::set_buffer(raw, false, 4 << 20)
                .map_err(|e| format!("sizing the packet socket's send buffer: {e}"))?;
            sys::bind_packet(raw, ifindex)
                .map_err(|e| format!("binding the packet socket to ifindex {ifindex}: {e}"))?;
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
    batch: usize,
) -> Result<Box<dyn Transmit>, String> {
    let r = resolve(flows, sizes, ipv6)?;
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
    pub fn open(flows: &[FlowSpec], sizes: &[u32], ipv6: bool) -> Result<XdpTx, String> {
        let r = resolve(flows, sizes, ipv6)?;
        let sockets = XdpTx::sockets(&r)?;
        Ok(XdpTx::with(sockets, r, sizes.len()))
    }

    /// One AF_XDP socket per egress interface of resolved flows.
    fn sockets(r: &Resolved) -> Result<Vec<(sys::Xsk, Vec<usize>)>, String> {
        let frame_size = (r.slot as u32).next_power_of_two().max(2048);
        let mut sockets = Vec::new();
        for (&ifindex, fl) in &r.by_if {
            let mut x = sys::Xsk::open(ifindex, XDP_FRAMES, frame_size).map_err(|e| {
                format!("opening an AF_XDP socket on ifindex {ifindex}: {e} (needs root and a kernel with AF_XDP)")
            })?;
            // Payload bytes after the linerate header are the same in every
            // frame: fill every UMEM frame once.
            x.fill_new_frames(FILL);
            sockets.push((x, fl.clone()));
        }
        Ok(sockets)
    }

    fn with(sockets: Vec<(sys::Xsk, Vec<usize>)>, r: Resolved, sizes: usize) -> XdpTx {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::udp::frame_sequence;
    use crate::proto::FrameSpec;

    /// RFC 1071 checksum written out independently of the engine's.
    fn rfc1071(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            sum += (u32::from(data[i]) << 8) | u32::from(data[i + 1]);
            i += 2;
        }
        if i < data.len() {
            sum += u32::from(data[i]) << 8;
        }
        while sum > 0xffff {
            sum = (sum >> 16) + (sum & 0xffff);
        }
        !(sum as u16)
    }

    fn path(src: &str, dst: &str) -> FlowPath {
        FlowPath {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
        }
    }

    const H: Header = Header {
        flow: 7,
        seq: 123_456_789,
        sent_ns: 0x0102_0304_0506_0708,
    };

    /// Checks a frame as a receiver would and returns its UDP payload.
    fn check_v4(f: &[u8], size: u32) -> Vec<u8> {
        assert_eq!(f.len(), size as usize - 4, "frame less FCS");
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..34];
        assert_eq!(ip[0], 0x45);
        assert_eq!(
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            f.len() - 14
        );
        assert_eq!(ip[9], 17);
        assert_eq!(rfc1071(ip), 0, "IPv4 header checksum");
        let udp = &f[34..];
        assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
        assert_ne!(&udp[6..8], &[0, 0], "UDP checksum present");
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(udp);
        assert_eq!(rfc1071(&pseudo), 0, "UDP checksum");
        udp.to_vec()
    }

    #[test]
    fn ipv4_frames_parse_with_right_checksums() {
        let p = path("198.18.0.2:40000", "198.19.0.9:5001");
        for size in [64, 65, 594, 1518] {
            let t = Template::new(&p, size).unwrap();
            let f = t.frame(&H);
            let udp = check_v4(&f, size);
            assert_eq!(&udp[0..2], &40000u16.to_be_bytes());
            assert_eq!(&udp[2..4], &5001u16.to_be_bytes());
            assert_eq!(Header::parse(&udp[8..]), Some(H));
            assert!(udp[8 + HEADER_LEN..].iter().all(|&b| b == FILL));
            assert_eq!(&f[26..30], &[198, 18, 0, 2]);
            assert_eq!(&f[30..34], &[198, 19, 0, 9]);
        }
    }

    #[test]
    fn ipv6_frames_parse_with_right_checksums() {
        let p = path("[2001:2::2]:40000", "[2001:2:0:1::9]:5001");
        for size in [84, 85, 1518] {
            let t = Template::new(&p, size).unwrap();
            let f = t.frame(&H);
            assert_eq!(f.len(), size as usize - 4);
            assert_eq!(&f[12..14], &[0x86, 0xdd]);
            let ip = &f[14..54];
            assert_eq!(ip[0] >> 4, 6);
            assert_eq!(ip[6], 17);
            let udp = &f[54..];
            assert_eq!(usize::from(u16::from_be_bytes([ip[4], ip[5]])), udp.len());
            assert_eq!(usize::from(u16::from_be_bytes([udp[4], udp[5]])), udp.len());
            assert_ne!(&udp[6..8], &[0, 0], "IPv6 requires a UDP checksum");
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip[8..40]);
            pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            pseudo.extend_from_slice(udp);
            assert_eq!(rfc1071(&pseudo), 0, "UDP checksum");
            assert_eq!(Header::parse(&udp[8..]), Some(H));
        }
    }

    #[test]
    fn checksums_follow_every_header() {
        let t = Template::new(&path("198.18.0.2:1", "198.19.0.9:2"), 64).unwrap();
        let mut buf = vec![FILL; 60];
        for seq in [0, 1, 0xffff, (1 << 48) - 1] {
            for sent_ns in [0, u64::MAX, 0xffff_0000_ffff_0000] {
                let h = Header {
                    flow: 0xffff,
                    seq,
                    sent_ns,
                };
                assert_eq!(t.write(&h, &mut buf), 60);
                check_v4(&buf, 64);
            }
        }
    }

    #[test]
    fn imix_sizes_per_frame_sequence() {
        let p = path("198.18.0.2:1", "198.19.0.9:2");
        for size in frame_sequence(FrameSpec::Imix) {
            let f = Template::new(&p, size).unwrap().frame(&H);
            check_v4(&f, size);
        }
        assert!(Template::new(&path("[2001:2::2]:1", "[2001:2::3]:2"), 64).is_err());
    }

    #[test]
    fn iproute2_json() {
        let dst: IpAddr = "198.19.0.9".parse().unwrap();
        let r = parse_route(
            r#"[{"dst":"198.19.0.9","gateway":"198.18.0.1","dev":"gen0","prefsrc":"198.18.0.2","flags":[],"uid":0,"cache":[]}]"#,
            dst,
        )
        .unwrap();
        assert_eq!(r.dev, "gen0");
        assert_eq!(r.gateway, Some("198.18.0.1".parse().unwrap()));
        assert_eq!(r.prefsrc, Some("198.18.0.2".parse().unwrap()));
        let lo = parse_route(
            r#"[{"type":"local","dst":"127.0.0.1","dev":"lo","prefsrc":"127.0.0.1","flags":[],"uid":0,"cache":["local"]}]"#,
            "127.0.0.1".parse().unwrap(),
        );
        assert!(lo.unwrap_err().contains("local"));
        let l = parse_link(
            r#"[{"ifindex":4,"ifname":"gen0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"link_type":"ether","address":"02:4c:52:00:00:0a"}]"#,
            "gen0",
        )
        .unwrap();
        assert_eq!(
            (l.ifindex, l.mac, l.mtu),
            (4, [2, 0x4c, 0x52, 0, 0, 10], 1500)
        );
        let e = parse_link(
            r#"[{"ifindex":1,"flags":["LOOPBACK","UP"],"mtu":65536,"link_type":"loopback","address":"00:00:00:00:00:00"}]"#,
            "lo",
        );
        assert!(e.unwrap_err().contains("not Ethernet"));
        let nh: IpAddr = "198.18.0.1".parse().unwrap();
        assert_eq!(
            parse_neigh(
                r#"[{"dst":"198.18.0.1","lladdr":"02:4c:52:00:00:01","state":["PERMANENT"]}]"#,
                nh,
                "gen0"
            )
            .unwrap(),
            [2, 0x4c, 0x52, 0, 0, 1]
        );
        assert!(parse_neigh("[]", nh, "gen0").is_err());
        assert!(parse_neigh("", nh, "gen0").is_err());
        assert!(parse_neigh(
            r#"[{"dst":"198.18.0.1","state":["INCOMPLETE"]}]"#,
            nh,
            "gen0"
        )
        .is_err());
    }
}
