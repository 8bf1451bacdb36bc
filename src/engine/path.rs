//! Where a flow's frames leave this host: its route, egress interface,
//! source MAC and next hop's MAC, read from the namespace's own tables
//! (`ip -j route get`, `ip -j link`, `ip -j neigh`) once per job, and each
//! flow's frame templates built from them. This module never resolves a
//! neighbour itself: a missing one is a reason to refuse, and auto falls
//! back to the socket engine.

use super::frame::{FlowPath, Marks, Template, ETH_HEADER};
use super::EngineError;
use crate::model::units;
use crate::proto::{FlowSpec, Vlan};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr, UdpSocket};

/// What `ip -j route get` says about a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dev: String,
    pub gateway: Option<IpAddr>,
    pub prefsrc: Option<IpAddr>,
}

fn first(json: &str, what: &str) -> Result<Value, EngineError> {
    let v: Value = serde_json::from_str(json.trim()).map_err(|e| {
        EngineError::Unavailable(format!("unreadable `ip -j` output for {what}: {e}"))
    })?;
    v.as_array()
        .and_then(|a| a.first())
        .cloned()
        .ok_or_else(|| EngineError::Unavailable(format!("no entry for {what}")))
}

fn ip_field(v: &Value, key: &str) -> Option<IpAddr> {
    v.get(key)?.as_str()?.parse().ok()
}

/// Parses `ip -j route get DST`: refuses local, unreachable and loopback routes.
pub fn parse_route(json: &str, dst: IpAddr) -> Result<Route, EngineError> {
    let r = first(json, &format!("the route to {dst}"))?;
    if let Some(t) = r.get("type").and_then(Value::as_str) {
        if t != "unicast" {
            return Err(EngineError::Unavailable(format!(
                "the route to {dst} is of type {t}, not a unicast route out of an interface"
            )));
        }
    }
    let dev = r
        .get("dev")
        .and_then(Value::as_str)
        .ok_or_else(|| EngineError::Unavailable(format!("the route to {dst} names no interface")))?
        .to_string();
    if dev == "lo" {
        return Err(EngineError::Unavailable(format!(
            "{dst} is reached over the loopback interface"
        )));
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
    /// A VLAN device: its id, whether it is an 802.1ad (service) tag, and
    /// the device below it (`ip -d`'s `linkinfo` and `link`).
    pub vlan: Option<(u16, bool, String)>,
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
pub fn parse_link(json: &str, dev: &str) -> Result<Link, EngineError> {
    let l = first(json, &format!("interface {dev}"))?;
    let kind = l.get("link_type").and_then(Value::as_str).unwrap_or("?");
    if kind != "ether" {
        return Err(EngineError::Unavailable(format!(
            "interface {dev} is of link type {kind}, not Ethernet"
        )));
    }
    let up = l
        .get("flags")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("UP")));
    if !up {
        return Err(EngineError::Unavailable(format!("interface {dev} is down")));
    }
    let ifindex = l
        .get("ifindex")
        .and_then(Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| EngineError::Unavailable(format!("interface {dev} has no ifindex")))?;
    let mac = l
        .get("address")
        .and_then(Value::as_str)
        .and_then(parse_mac)
        .ok_or_else(|| EngineError::Unavailable(format!("interface {dev} has no MAC address")))?;
    let mtu = l
        .get("mtu")
        .and_then(Value::as_u64)
        .and_then(|m| u32::try_from(m).ok())
        .unwrap_or(1500);
    let vlan = l.get("linkinfo").and_then(|i| {
        if i.get("info_kind")?.as_str()? != "vlan" {
            return None;
        }
        let d = i.get("info_data")?;
        let id = u16::try_from(d.get("id")?.as_u64()?).ok()?;
        let ad = d.get("protocol").and_then(Value::as_str) == Some("802.1ad");
        Some((id, ad, l.get("link")?.as_str()?.to_string()))
    });
    Ok(Link {
        ifindex,
        mac,
        mtu,
        vlan,
    })
}

/// The device frames really leave by when the route names a VLAN device
/// (up to QinQ: two stacked), and the tags the stack adds, outer first.
/// linerate writes those tags itself and sends on the device below: XDP
/// and AF_PACKET on a VLAN device would go through its software path.
fn untag_stack(
    res: &mut Resolver,
    dev: &str,
    want: Option<Vlan>,
) -> Result<(Link, Option<Vlan>), EngineError> {
    let top = res.link(dev)?;
    let Some((id, ad, lower)) = top.vlan.clone() else {
        return Ok((top, want));
    };
    let below = res.link(&lower)?;
    let (bottom, stack) = match below.vlan.clone() {
        None => (below, Vlan { id, inner: None }),
        Some((outer, _, bottom)) if !ad => (
            res.link(&bottom)?,
            Vlan {
                id: outer,
                inner: Some(id),
            },
        ),
        Some(_) => {
            return Err(EngineError::Unavailable(format!(
                "{dev} stacks an 802.1ad tag on another VLAN device; linerate writes one \
                 802.1Q tag or QinQ (802.1ad outside, 802.1Q inside)"
            )))
        }
    };
    if let (Some(w), true) = (want, stack.inner.is_none() && ad) {
        return Err(EngineError::Invalid(format!(
            "the route leaves by {dev}, an 802.1ad VLAN device, and the test asks for VLAN {w}"
        )));
    }
    match want {
        Some(w) if w != stack => Err(EngineError::Invalid(format!(
            "the route leaves by {dev}, a VLAN {stack} device, but the test asks for VLAN {w}; \
             give --vlan {stack} or route through the device of VLAN {w}"
        ))),
        _ => Ok((bottom, Some(stack))),
    }
}

/// Parses `ip -j neigh show to NH dev DEV`: the next hop's MAC, if known.
pub fn parse_neigh(json: &str, nh: IpAddr, dev: &str) -> Result<[u8; 6], EngineError> {
    let missing = || {
        EngineError::Unavailable(format!(
            "no usable neighbour entry for {nh} on {dev} (the packet engine does not run \
             ARP/ND; ping {nh} first or add a static neighbour)"
        ))
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

/// Makes the kernel resolve `nh`'s MAC: one empty datagram to its discard
/// port (9) from this namespace, which starts ARP/ND for it (a next hop
/// is on a link of this host: the datagram goes no further than it).
fn solicit(nh: IpAddr) -> std::io::Result<()> {
    let any: IpAddr = if nh.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
    s.send_to(&[], SocketAddr::new(nh, 9)).map(drop)
}

fn ip_json(args: &[&str]) -> Result<String, EngineError> {
    crate::netops::run_output("ip", args).map_err(|e| EngineError::Unavailable(format!("{e:#}")))
}

/// Route, interface and next hop of every flow, looked up once.
pub struct Resolver {
    links: HashMap<String, Link>,
    neighbours: HashMap<(IpAddr, String), [u8; 6]>,
}

impl Resolver {
    fn route(&self, dst: IpAddr, src: Option<IpAddr>) -> Result<Route, EngineError> {
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

    fn link(&mut self, dev: &str) -> Result<Link, EngineError> {
        if let Some(l) = self.links.get(dev) {
            return Ok(l.clone());
        }
        crate::netops::check_ifname(dev).map_err(|e| EngineError::Unavailable(format!("{e:#}")))?;
        let l = parse_link(&ip_json(&["-d", "-j", "link", "show", "dev", dev])?, dev)?;
        self.links.insert(dev.to_string(), l.clone());
        Ok(l)
    }

    fn neighbour(&mut self, nh: IpAddr, dev: &str) -> Result<[u8; 6], EngineError> {
        let key = (nh, dev.to_string());
        if let Some(m) = self.neighbours.get(&key) {
            return Ok(*m);
        }
        let fam = if nh.is_ipv6() { "-6" } else { "-4" };
        let nh_s = nh.to_string();
        let show = || ip_json(&["-j", fam, "neigh", "show", "to", &nh_s, "dev", dev]);
        let m = match parse_neigh(&show()?, nh, dev) {
            Ok(m) => m,
            Err(first) => {
                // No entry yet (a fresh namespace, or it expired): have the
                // kernel ask, as any socket's first datagram would, and
                // wait for the answer a moment.
                if solicit(nh).is_err() {
                    return Err(first);
                }
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
                loop {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    match parse_neigh(&show()?, nh, dev) {
                        Ok(m) => break m,
                        Err(_) if std::time::Instant::now() < deadline => {}
                        Err(_) => {
                            return Err(EngineError::Unavailable(format!(
                                "{nh} did not answer ARP/ND on {dev} within 1 s, so there is \
                                 no MAC to write frames to (the packet and live engines build \
                                 whole frames): check that {nh} is up on {dev}'s link, or add \
                                 a static neighbour"
                            )))
                        }
                    }
                }
            }
        };
        self.neighbours.insert(key, m);
        Ok(m)
    }
}

/// Every flow's frames, ready to write, and the interfaces they leave by.
pub struct Resolved {
    /// Per flow, per entry of the frame sequence: `templates[flow * sizes + size]`.
    pub templates: Vec<Template>,
    /// Flows per egress ifindex.
    pub by_if: BTreeMap<u32, Vec<usize>>,
    /// The largest frame, bytes without FCS rounding: one buffer slot.
    pub slot: usize,
    pub port: Option<UdpSocket>,
}

/// The ephemeral source port for flows without one, bound and kept (the
/// socket engine binds one too), and its number; none (0) when every flow
/// names its source port.
fn reserve_port(flows: &[FlowSpec], ipv6: bool) -> Result<(Option<UdpSocket>, u16), EngineError> {
    if !flows.iter().any(|f| f.src_port == 0) {
        return Ok((None, 0));
    }
    let any: IpAddr = if ipv6 {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0))
        .map_err(|e| EngineError::Unavailable(format!("reserving a source port: {e}")))?;
    let eph = socket
        .local_addr()
        .map_err(|e| EngineError::Unavailable(format!("reading the reserved source port: {e}")))?
        .port();
    Ok((Some(socket), eph))
}

/// Resolves every flow's path (route, source, next-hop MAC) and builds its
/// frame templates; the error says why frames cannot be built here.
pub fn resolve(
    flows: &[FlowSpec],
    sizes: &[u32],
    ipv6: bool,
    marks: Marks,
) -> Result<Resolved, EngineError> {
    if sizes.is_empty() {
        return Err(EngineError::Unavailable("no frame sizes".into()));
    }
    if let Some(f) = flows.iter().find(|f| f.dst.ip().is_loopback()) {
        return Err(EngineError::Unavailable(format!(
            "{} is a loopback address",
            f.dst.ip()
        )));
    }
    let (port, eph) = reserve_port(flows, ipv6)?;
    let mut res = Resolver {
        links: HashMap::new(),
        neighbours: HashMap::new(),
    };
    let max_frame = sizes.iter().copied().max().unwrap_or(64);
    let mut by_if: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut templates = Vec::with_capacity(flows.len() * sizes.len());
    for (i, f) in flows.iter().enumerate() {
        let route = res.route(f.dst.ip(), f.src)?;
        let (link, tags) = untag_stack(&mut res, &route.dev, marks.vlan)?;
        // An L2 frame of the largest size must fit the interface's MTU; its
        // tags are part of the frame size and not of the IP packet.
        let l3 = (max_frame as usize)
            .saturating_sub(units::FCS as usize + ETH_HEADER + tags.map_or(0, |v| v.len()));
        if l3 > link.mtu as usize {
            return Err(EngineError::Unavailable(format!(
                "{max_frame} B frames{} exceed the MTU {} of {}",
                if tags.is_some() {
                    " with their VLAN tags"
                } else {
                    ""
                },
                link.mtu,
                route.dev
            )));
        }
        let nh = route.gateway.unwrap_or(f.dst.ip());
        let dst_mac = res.neighbour(nh, &route.dev)?;
        let src_ip = f.src.or(route.prefsrc).ok_or_else(|| {
            EngineError::Unavailable(format!(
                "no source address for {} (the route names none)",
                f.dst
            ))
        })?;
        let src_port = if f.src_port == 0 { eph } else { f.src_port };
        let path = FlowPath {
            src_mac: link.mac,
            dst_mac,
            src: SocketAddr::new(src_ip, src_port),
            dst: f.dst,
            vlan: tags,
            dscp: marks.dscp,
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(lo.unwrap_err().to_string().contains("local"));
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
        assert!(e.unwrap_err().to_string().contains("not Ethernet"));
        let v = parse_link(
            r#"[{"ifindex":5,"link":"gen0","ifname":"gen0.100","flags":["UP"],"mtu":1500,"link_type":"ether","address":"02:4c:52:00:00:0a","linkinfo":{"info_kind":"vlan","info_data":{"protocol":"802.1Q","id":100,"flags":["REORDER_HDR"]}}}]"#,
            "gen0.100",
        )
        .unwrap();
        assert_eq!(v.vlan, Some((100, false, "gen0".to_string())));
        assert_eq!(l.vlan, None);
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
