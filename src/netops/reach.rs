//! Whether this namespace can take traffic aimed at an address: it holds
//! the address (assigned, or in a local route: AnyIP), or a route other
//! than the default leads there (a server behind a router it knows).

use serde_json::Value;
use std::net::{IpAddr, SocketAddr, UdpSocket};

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
