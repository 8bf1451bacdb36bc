//! Whether this namespace can take traffic aimed at an address: it holds
//! the address (assigned, or in a local route: AnyIP), or a route other
//! than the default leads there (a server behind a router it knows).

use crate::proto::Cidr;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr, UdpSocket};

/// The benchmarking ranges (RFC 2544 App. C.2.2, RFC 5180): where test
/// traffic and lab hosts may be without an allow-list.
pub fn benchmark_ranges() -> [Cidr; 2] {
    [
        Cidr {
            addr: IpAddr::from([198, 18, 0, 0]),
            prefix: 15,
        },
        Cidr {
            addr: IpAddr::from([0x2001, 2, 0, 0, 0, 0, 0, 0]),
            prefix: 48,
        },
    ]
}

/// What this namespace knows of `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    pub owned: bool,
    pub routed: bool,
}

pub fn reach(addr: IpAddr) -> Reach {
    Reach {
        owned: owned(addr),
        routed: routed(addr),
    }
}

/// Binding a socket to an address succeeds only where it is local.
pub fn owned(addr: IpAddr) -> bool {
    match UdpSocket::bind(SocketAddr::new(addr, 0)) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::AddrInUse,
    }
}

/// The source address this namespace sends from towards `addr`: a UDP
/// socket connected to it (no packet leaves) is bound by the kernel's
/// route lookup, and getsockname reads the choice back.
pub fn source_towards(addr: IpAddr) -> std::io::Result<IpAddr> {
    let any: IpAddr = if addr.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let s = UdpSocket::bind(SocketAddr::new(any, 0))?;
    s.connect(SocketAddr::new(addr, 9))?;
    Ok(s.local_addr()?.ip())
}

/// A route of the main table, other than the default, that matches `addr`.
fn routed(addr: IpAddr) -> bool {
    let family = if addr.is_ipv6() { "-6" } else { "-4" };
    let Ok(out) = super::run_output(
        "ip",
        &[family, "-j", "route", "show", "match", &addr.to_string()],
    ) else {
        return false;
    };
    specific_route(&out)
}

/// Whether `ip -j route show match` output lists a route other than the
/// default one.
fn specific_route(json: &str) -> bool {
    serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|routes| {
            routes
                .iter()
                .any(|r| r["dst"].as_str().is_some_and(|d| d != "default"))
        })
}

/// The first of `addrs` whose route, as the kernel itself chooses it
/// (`ip route get`: every table and policy rule), leads out of any lab,
/// with that route as `via GATEWAY dev DEV`. A route leads out when its
/// next hop is a gateway outside the benchmarking ranges (a link-local
/// gateway counts as in a lab only when the source the kernel picks is in
/// one), whatever the prefix that matched: `0.0.0.0/1` and a default route
/// in a policy table are caught like the main table's default. Addresses
/// this namespace holds, on-link ones (the next hop is the address itself)
/// and ones without a route (nothing can be sent) pass.
pub fn only_default_route(addrs: &[IpAddr]) -> Option<(IpAddr, String)> {
    addrs.iter().find_map(|&addr| {
        let out = super::run_output("ip", &["-j", "route", "get", &addr.to_string()]).ok()?;
        leaves_the_lab(&out).map(|r| (addr, r))
    })
}

/// Whether `ip -j route get` output is a route whose next hop leaves the
/// lab (see [`only_default_route`]); the route, written for a person.
fn leaves_the_lab(json: &str) -> Option<String> {
    let v: Value = serde_json::from_str(json).ok()?;
    let r = v.as_array()?.first()?;
    if r["type"].as_str().is_some_and(|t| t != "unicast") {
        // local, broadcast, unreachable, prohibit, blackhole: nothing leaves.
        return None;
    }
    let gateway: IpAddr = r["gateway"].as_str()?.parse().ok()?;
    let prefsrc: Option<IpAddr> = r["prefsrc"].as_str().and_then(|p| p.parse().ok());
    let link_local = match gateway {
        IpAddr::V6(g) => g.segments()[0] & 0xffc0 == 0xfe80,
        IpAddr::V4(g) => g.is_link_local(),
    };
    let bench = |a: IpAddr| benchmark_ranges().iter().any(|c| c.contains(a));
    let in_lab = bench(gateway) || (link_local && prefsrc.is_some_and(bench));
    if in_lab {
        return None;
    }
    let mut text = format!("via {gateway}");
    if let Some(d) = r["dev"].as_str() {
        text.push_str(&format!(" dev {d}"));
    }
    if let Some(t) = r["table"].as_str() {
        text.push_str(&format!(" table {t}"));
    }
    Some(text)
}

/// The namespace under /run/netns whose interfaces hold `addr`, if one
/// does (`ip -n NAME`; needs root, else none is found).
pub fn namespace_holding(addr: IpAddr) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir("/run/netns")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    names.into_iter().find(|ns| {
        super::run_output("ip", &["-n", ns, "-j", "addr", "show"])
            .ok()
            .and_then(|o| serde_json::from_str::<Value>(&o).ok())
            .is_some_and(|v| holds(&v, addr))
    })
}

/// Whether `ip -j addr show` output has `addr` on an interface.
fn holds(v: &Value, addr: IpAddr) -> bool {
    v.as_array().is_some_and(|links| {
        links.iter().any(|l| {
            l["addr_info"].as_array().is_some_and(|a| {
                a.iter().any(|i| {
                    i["local"].as_str().and_then(|s| s.parse::<IpAddr>().ok()) == Some(addr)
                })
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_route_other_than_the_default_counts() {
        assert!(!specific_route(
            r#"[{"dst":"default","gateway":"10.0.0.1","dev":"eth0"}]"#
        ));
        assert!(specific_route(
            r#"[{"dst":"default","gateway":"10.0.0.1"},{"dst":"198.18.0.0/15","gateway":"198.19.1.1"}]"#
        ));
        assert!(!specific_route("[]"));
        assert!(!specific_route("not json"));
    }

    #[test]
    fn a_route_whose_gateway_leaves_the_lab_is_named_whatever_its_prefix() {
        // The host's uplink: by the default route, by 0.0.0.0/1, by a
        // policy table's default: the kernel's answer is the same shape.
        let r = leaves_the_lab(
            r#"[{"dst":"198.18.0.2","gateway":"192.0.2.1","dev":"eth0","prefsrc":"192.0.2.5","flags":[],"uid":0,"cache":[]}]"#,
        );
        assert_eq!(r.as_deref(), Some("via 192.0.2.1 dev eth0"));
        let r = leaves_the_lab(
            r#"[{"dst":"198.18.0.2","gateway":"10.0.0.1","dev":"eth0","table":"100","prefsrc":"10.0.0.5"}]"#,
        );
        assert_eq!(r.as_deref(), Some("via 10.0.0.1 dev eth0 table 100"));
        // A lab namespace: via the DUT, on-link, its own address.
        for ok in [
            r#"[{"dst":"198.19.3.4","gateway":"198.18.0.254","dev":"gen0","prefsrc":"198.18.0.1"}]"#,
            r#"[{"dst":"198.18.0.9","dev":"gen0","prefsrc":"198.18.0.1"}]"#,
            r#"[{"type":"local","dst":"198.18.7.7","dev":"lo","prefsrc":"198.18.7.7"}]"#,
            r#"[{"dst":"2001:2::2","gateway":"fe80::1","dev":"gen0","prefsrc":"2001:2:0:1::1"}]"#,
            "not json",
            "[]",
        ] {
            assert_eq!(leaves_the_lab(ok), None, "{ok}");
        }
        // A link-local gateway from a host address is the uplink.
        let v6 = leaves_the_lab(
            r#"[{"dst":"2001:2::2","gateway":"fe80::1","dev":"eth0","prefsrc":"2001:db8::5"}]"#,
        );
        assert_eq!(v6.as_deref(), Some("via fe80::1 dev eth0"));
    }

    #[test]
    fn finds_the_interface_address() {
        let v: Value = serde_json::from_str(
            r#"[{"ifname":"lrs0","addr_info":[{"local":"198.18.0.2","prefixlen":24}]}]"#,
        )
        .unwrap();
        assert!(holds(&v, "198.18.0.2".parse().unwrap()));
        assert!(!holds(&v, "198.18.0.1".parse().unwrap()));
    }

    #[test]
    fn loopback_is_owned_and_a_foreign_address_is_not() {
        assert!(owned("127.0.0.1".parse().unwrap()));
        // TEST-NET-3 is never assigned to a test host.
        assert!(!owned("203.0.113.77".parse().unwrap()));
    }
}
