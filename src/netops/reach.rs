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

/// The first of `addrs` that this namespace reaches only through its
/// default route (no address of its own, no other route of its main
/// table covers it), with that route as `via GATEWAY dev DEV`. The
/// benchmarking ranges belong to isolated labs: a default route leads out
/// of one, unless its gateway is itself in a benchmarking range (a lab
/// namespace whose default route points at the DUT stays in the lab). One `ip route` per address family, whatever the number of
/// addresses.
pub fn only_default_route(addrs: &[IpAddr]) -> Option<(IpAddr, String)> {
    let table = |family: &str| {
        super::run_output("ip", &[family, "-j", "route", "show"])
            .ok()
            .map(|o| parse_routes(&o))
            .unwrap_or_default()
    };
    let (mut v4, mut v6) = (None, None);
    for &addr in addrs {
        if owned(addr) {
            continue;
        }
        let routes = if addr.is_ipv4() {
            v4.get_or_insert_with(|| table("-4"))
        } else {
            v6.get_or_insert_with(|| table("-6"))
        };
        if let Some(r) = default_only(routes, addr) {
            return Some((addr, r));
        }
    }
    None
}

/// One route of `ip -j route show`: its destination (`None` for the
/// default) and how it is written for a person.
#[derive(Debug, Clone, PartialEq)]
struct Route {
    dst: Option<Cidr>,
    /// The next hop, when the route has one.
    gateway: Option<IpAddr>,
    text: String,
}

fn parse_routes(json: &str) -> Vec<Route> {
    let Ok(Value::Array(routes)) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    routes
        .iter()
        .filter_map(|r| {
            let dst = r["dst"].as_str()?;
            let mut text = String::new();
            if let Some(g) = r["gateway"].as_str() {
                text.push_str(&format!("via {g} "));
            }
            if let Some(d) = r["dev"].as_str() {
                text.push_str(&format!("dev {d}"));
            }
            let text = format!("{dst} {}", text.trim_end());
            let gateway = r["gateway"].as_str().and_then(|g| g.parse().ok());
            if dst == "default" {
                return Some(Route {
                    dst: None,
                    gateway,
                    text,
                });
            }
            // A host route is written without its prefix length.
            let cidr = if dst.contains('/') {
                dst.parse().ok()?
            } else {
                let ip: IpAddr = dst.parse().ok()?;
                Cidr {
                    addr: ip,
                    prefix: if ip.is_ipv4() { 32 } else { 128 },
                }
            };
            Some(Route {
                dst: Some(cidr),
                gateway,
                text,
            })
        })
        .collect()
}

/// The default route `addr` would take when no other route covers it.
fn default_only(routes: &[Route], addr: IpAddr) -> Option<String> {
    if routes
        .iter()
        .any(|r| r.dst.as_ref().is_some_and(|c| c.contains(addr)))
    {
        return None;
    }
    routes
        .iter()
        .find(|r| r.dst.is_none())
        .filter(|r| !r.gateway.is_some_and(super::port::benchmarking_address))
        .map(|r| r.text.clone())
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
    fn a_target_reached_only_by_the_default_route_is_named_with_it() {
        let host = parse_routes(
            r#"[{"dst":"default","gateway":"192.0.2.1","dev":"eth0"},
                {"dst":"192.0.2.0/24","dev":"eth0"}]"#,
        );
        let r = default_only(&host, "198.18.0.2".parse().unwrap());
        assert_eq!(r.as_deref(), Some("default via 192.0.2.1 dev eth0"));
        assert_eq!(default_only(&host, "192.0.2.9".parse().unwrap()), None);
        // A lab namespace: a route via the DUT, or on-link, or a host route.
        let lab = parse_routes(
            r#"[{"dst":"default","gateway":"192.0.2.1","dev":"eth0"},
                {"dst":"198.19.0.0/16","gateway":"198.18.0.254","dev":"gen0"},
                {"dst":"198.18.0.0/24","dev":"gen0"},
                {"dst":"198.18.7.7","dev":"lo"}]"#,
        );
        for ok in ["198.19.3.4", "198.18.0.9", "198.18.7.7"] {
            assert_eq!(default_only(&lab, ok.parse().unwrap()), None, "{ok}");
        }
        assert!(default_only(&lab, "198.18.8.1".parse().unwrap()).is_some());
        // No route at all: the send fails by itself, nothing to name.
        assert_eq!(default_only(&[], "198.18.0.2".parse().unwrap()), None);
        // A lab namespace whose default route points at the DUT (a gateway
        // in a benchmarking range) stays inside the lab.
        let lab = parse_routes(r#"[{"dst":"default","gateway":"198.18.10.1","dev":"a0"}]"#);
        assert_eq!(default_only(&lab, "198.19.10.2".parse().unwrap()), None);
        let v6 = parse_routes(r#"[{"dst":"default","gateway":"fd00::1","dev":"eth0"}]"#);
        assert_eq!(
            default_only(&v6, "2001:2::2".parse().unwrap()).as_deref(),
            Some("default via fd00::1 dev eth0")
        );
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
