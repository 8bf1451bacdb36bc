//! Physical ports on the agent's side: inspect a port, check that taking it
//! is safe, move it from the agent's original network namespace into its own,
//! and give it back in its old state when the agent ends.
//!
//! The agent does all of this itself, so it works the same when the agent
//! runs on another host over ssh. It opens its original namespace before it
//! unshares ([`remember_original_netns`]); commands that must run there run on
//! a thread that joined that namespace (namespaces are per thread, and a
//! child inherits its spawning thread's).
//!
//! Give-back paths: `Shutdown`, EOF or a broken control channel, an idle
//! controller, SIGINT/SIGTERM to the agent, and the controller's death
//! (the agent asks for SIGTERM as its parent-death signal once it holds a
//! port). After SIGKILL of the agent nothing can run: the kernel then moves a
//! real NIC back to the initial namespace, down and without addresses, and
//! destroys a veth (and its peer) with the namespace.
//!
//! This module must not touch any interface it was not asked to take.

use super::cmd::{check_ifname, mac_string, run, run_output, set_neighbour};
use super::error::{err, fail, Result};
use crate::model::error::{chain, Context};
use crate::model::stderr::errln;
use crate::proto::lab::LabPort;
use serde_json::Value;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A port's state before linerate took it: what is given back.
#[derive(Debug, Clone, PartialEq)]
pub struct PortState {
    pub name: String,
    pub mac: Option<[u8; 6]>,
    pub mtu: u32,
    pub up: bool,
    /// Addresses as configured (IPv6 link-local ones included; the kernel
    /// makes those again by itself, so they are not re-added).
    pub addresses: Vec<(IpAddr, u8)>,
    pub alias: Option<String>,
    /// Bridge or bond the port was a member of.
    pub master: Option<String>,
    /// Link kind (`veth`, `bridge`, ...), absent for plain NICs.
    pub kind: Option<String>,
    pub loopback: bool,
    /// Families whose default route leaves through this port.
    pub default_route: Vec<&'static str>,
}

impl PortState {
    /// The record results.json keeps of this port.
    pub fn record(&self) -> LabPort {
        LabPort {
            name: self.name.clone(),
            mac: self.mac.as_ref().map(mac_string).unwrap_or_default(),
            previous_mtu: self.mtu,
            previous_up: self.up,
            previous_addresses: self
                .addresses
                .iter()
                .map(|(a, p)| format!("{a}/{p}"))
                .collect(),
            previous_alias: self.alias.clone(),
            previous_master: self.master.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// Whether an address may sit on a port linerate takes: the benchmarking
/// ranges, and IPv6 link-local (every IPv6 interface has one).
pub fn benchmarking_address(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => (u32::from(v) & 0xfffe_0000) == u32::from(Ipv4Addr::new(198, 18, 0, 0)),
        IpAddr::V6(v) => {
            let s = v.segments();
            (s[0] == 0x2001 && s[1] == 2 && s[2] == 0) || (s[0] & 0xffc0) == 0xfe80
        }
    }
}

/// Reads a port's state in the calling thread's namespace.
pub fn inspect(dev: &str) -> Result<PortState> {
    check_ifname(dev)?;
    let link = run_output("ip", &["-j", "-d", "link", "show", "dev", dev]).map_err(|e| {
        err!(
            "port {dev}: no such interface here ({}); list the interfaces with `ip link`",
            chain(&e)
        )
    })?;
    let addrs = run_output("ip", &["-j", "addr", "show", "dev", dev])
        .with_context(|| format!("reading the addresses of port {dev}"))?;
    let mut default_route = Vec::new();
    for (fam, name) in [("-4", "IPv4"), ("-6", "IPv6")] {
        let routes = run_output("ip", &[fam, "-j", "route", "show", "default"])
            .with_context(|| format!("reading the {name} default routes"))?;
        if routes_use(&routes, dev) {
            default_route.push(name);
        }
    }
    parse_state(dev, &link, &addrs, default_route)
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    Ok(serde_json::from_str(text).with_context(|| format!("parsing `ip -j` output for {what}"))?)
}

fn routes_use(json: &str, dev: &str) -> bool {
    let Ok(Value::Array(routes)) = serde_json::from_str::<Value>(json) else {
        return false;
    };
    routes.iter().any(|r| {
        r["dev"] == dev
            || r["nexthops"]
                .as_array()
                .is_some_and(|n| n.iter().any(|h| h["dev"] == dev))
    })
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn parse_state(
    dev: &str,
    link: &str,
    addrs: &str,
    default_route: Vec<&'static str>,
) -> Result<PortState> {
    let link = parse_json(link, dev)?;
    let l = link
        .get(0)
        .ok_or_else(|| err!("port {dev}: `ip link` printed nothing for it"))?;
    let flags: Vec<&str> = l["flags"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let addrs = parse_json(addrs, dev)?;
    let mut addresses = Vec::new();
    for info in addrs
        .get(0)
        .and_then(|a| a["addr_info"].as_array())
        .into_iter()
        .flatten()
    {
        let (Some(local), Some(prefix)) = (info["local"].as_str(), info["prefixlen"].as_u64())
        else {
            continue;
        };
        let addr: IpAddr = local
            .parse()
            .with_context(|| format!("port {dev}: address '{local}'"))?;
        addresses.push((addr, u8::try_from(prefix).unwrap_or(128)));
    }
    Ok(PortState {
        name: dev.to_string(),
        mac: l["address"].as_str().and_then(parse_mac),
        mtu: l["mtu"]
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(1500),
        up: flags.contains(&"UP"),
        addresses,
        alias: l["ifalias"].as_str().map(str::to_string),
        master: l["master"].as_str().map(str::to_string),
        kind: l["linkinfo"]["info_kind"].as_str().map(str::to_string),
        loopback: flags.contains(&"LOOPBACK") || l["link_type"] == "loopback",
        default_route,
    })
}

/// Refuses a port that looks in use. `force` skips every check but the ones
/// no port can pass (loopback cannot leave its namespace).
pub fn check(s: &PortState, force: bool) -> Result<()> {
    let dev = &s.name;
    if s.loopback {
        fail!("port {dev} is the loopback interface; name a NIC cabled to the DUT");
    }
    if force {
        return Ok(());
    }
    let fix = "pick a port used only for testing, or pass --force-port if you are sure";
    if let Some(fam) = s.default_route.first() {
        fail!(
            "port {dev} carries this host's default {fam} route: moving it would cut the host off \
             its network; {fix}"
        );
    }
    if let Some(m) = &s.master {
        fail!(
            "port {dev} is a member of {m} (bridge or bond); release it with \
             `ip link set dev {dev} nomaster`, or {fix}"
        );
    }
    if matches!(s.kind.as_deref(), Some("bridge" | "bond" | "team")) {
        fail!(
            "port {dev} is a {} device, not a NIC; {fix}",
            s.kind.as_deref().unwrap_or_default()
        );
    }
    if let Some((a, p)) = s.addresses.iter().find(|(a, _)| !benchmarking_address(*a)) {
        fail!(
            "port {dev} has address {a}/{p}, outside the benchmarking ranges (198.18.0.0/15, \
             2001:2::/48): it is probably in use. Remove it with `ip addr del {a}/{p} dev {dev}`, \
             or {fix}"
        );
    }
    Ok(())
}

/// The namespace the agent started in, opened before it unshared.
static ORIGINAL: OnceLock<File> = OnceLock::new();
/// Ports this agent holds, in the order taken.
static TAKEN: Mutex<Vec<PortState>> = Mutex::new(Vec::new());
/// Set by SIGINT/SIGTERM once the agent holds a port.
static SIGNALLED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Call before leaving the original namespace: ports are taken from there.
pub fn remember_original_netns() -> std::io::Result<()> {
    let f = File::open("/proc/self/ns/net")?;
    let _ = ORIGINAL.set(f);
    Ok(())
}

/// Runs `f` on a thread inside the agent's original namespace.
fn in_original<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let ns = ORIGINAL
        .get()
        .ok_or_else(|| err!("ports need an agent started in a new namespace (--netns new)"))?;
    let ns = ns
        .try_clone()
        .context("duplicating the original namespace fd")?;
    std::thread::spawn(move || {
        crate::sys::enter_netns_file(&ns)
            .map_err(|e| err!("entering the agent's original network namespace: {e}"))?;
        f()
    })
    .join()
    .map_err(|_| err!("the thread working in the original namespace panicked"))?
}

/// Inspects and checks a port in the agent's original namespace.
pub fn inspect_original(dev: &str, force: bool) -> Result<PortState> {
    check_ifname(dev)?;
    let name = dev.to_string();
    in_original(move || {
        let s = inspect(&name)?;
        check(&s, force)?;
        Ok(s)
    })
}

/// Checks a port in the original namespace and moves it into this one.
pub fn take(dev: &str, force: bool) -> Result<()> {
    check_ifname(dev)?;
    let mut taken = TAKEN.lock().map_err(|_| err!("port registry poisoned"))?;
    if taken.iter().any(|p| p.name == dev) {
        fail!("port {dev} is already taken by this agent; name each port once");
    }
    watch_signals()?;
    let pid = std::process::id().to_string();
    let name = dev.to_string();
    let state = in_original(move || {
        let s = inspect(&name)?;
        check(&s, force)?;
        run("ip", &["link", "set", "dev", &name, "netns", &pid], None)
            .with_context(|| format!("moving port {name} into the lab namespace"))?;
        Ok(s)
    })?;
    taken.push(state);
    Ok(())
}

/// Once a port is held, signals and the controller's death must give it back
/// rather than kill the agent outright.
pub(super) fn watch_signals() -> Result<()> {
    if SIGNALLED.get().is_some() {
        return Ok(());
    }
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("installing the agent's signal handlers")?;
    }
    crate::sys::set_parent_death_signal(signal_hook::consts::SIGTERM)
        .context("asking for SIGTERM when the controller dies")?;
    let _ = SIGNALLED.set(flag);
    Ok(())
}

/// Whether SIGINT/SIGTERM asked an agent holding ports to give them back and end.
pub fn signalled() -> bool {
    SIGNALLED.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Gives every held port back to the original namespace in its old state.
/// Safe to call from any thread, any number of times; errors go to stderr
/// (the agent log), since the agent is on its way out.
pub fn restore_all() {
    let mut taken = match TAKEN.lock() {
        Ok(t) => t,
        Err(p) => p.into_inner(),
    };
    while let Some(s) = taken.pop() {
        match restore(&s) {
            Ok(()) => errln!("agent: port {} given back", s.name),
            Err(e) => errln!("agent: giving port {} back: {}", s.name, chain(&e)),
        }
    }
}

fn restore(s: &PortState) -> Result<()> {
    let ns = ORIGINAL
        .get()
        .ok_or_else(|| err!("the original namespace is unknown"))?;
    let dev = s.name.as_str();
    // Down first, so nothing is sent while the port changes hands.
    let _ = run("ip", &["link", "set", "dev", dev, "down"], None);
    let target = format!("/proc/{}/fd/{}", std::process::id(), raw_fd(ns));
    run("ip", &["link", "set", "dev", dev, "netns", &target], None)
        .with_context(|| format!("moving port {dev} back to its namespace"))?;
    let s = s.clone();
    in_original(move || apply_state(&s))
}

fn raw_fd(f: &File) -> i32 {
    use std::os::fd::AsRawFd;
    f.as_raw_fd()
}

/// Applies a recorded state to a port in the calling thread's namespace.
fn apply_state(s: &PortState) -> Result<()> {
    let dev = s.name.as_str();
    let mut errors = Vec::new();
    let mut step = |args: &[&str]| {
        if let Err(e) = run("ip", args, None) {
            errors.push(chain(&e));
        }
    };
    step(&["link", "set", "dev", dev, "mtu", &s.mtu.to_string()]);
    if let Some(a) = &s.alias {
        step(&["link", "set", "dev", dev, "alias", a]);
    }
    for (addr, prefix) in &s.addresses {
        if let IpAddr::V6(v) = addr {
            if (v.segments()[0] & 0xffc0) == 0xfe80 {
                continue;
            }
        }
        let cidr = format!("{addr}/{prefix}");
        step(&["addr", "replace", &cidr, "dev", dev]);
    }
    if let Some(m) = &s.master {
        step(&["link", "set", "dev", dev, "master", m]);
    }
    if s.up {
        step(&["link", "set", "dev", dev, "up"]);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        fail!(
            "port {dev} is back but not all of its state: {}",
            errors.join("; ")
        )
    }
}

/// Finds the MAC of `addr` behind `dev` (a datagram to the discard port makes
/// the kernel ask by ARP/ND) and pins it, for `addr` and `also`.
pub fn resolve(dev: &str, addr: IpAddr, also: &[IpAddr]) -> Result<[u8; 6]> {
    check_ifname(dev)?;
    if !benchmarking_address(addr) {
        fail!("refusing to probe {addr}: not in the benchmarking ranges");
    }
    let bind: IpAddr = if addr.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let sock = UdpSocket::bind((bind, 0)).context("opening a socket to probe the DUT")?;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mac = loop {
        // A send error (no route, unreachable) is the same as no answer yet.
        let _ = sock.send_to(b"linerate neighbour probe", (addr, 9));
        std::thread::sleep(Duration::from_millis(200));
        let out = run_output(
            "ip",
            &["-j", "neigh", "show", "to", &addr.to_string(), "dev", dev],
        )?;
        if let Some(mac) = neighbour_mac(&out) {
            break mac;
        }
        if Instant::now() >= deadline {
            fail!(
                "nothing answered ARP/ND for {addr} on port {dev} within 3 s: is the DUT cabled to \
                 {dev}, up, and addressed {addr}? Give its MAC with --dut-gen-mac/--dut-sink-mac to \
                 skip the lookup"
            );
        }
    };
    for a in std::iter::once(&addr).chain(also) {
        set_neighbour(dev, *a, &mac)?;
    }
    Ok(mac)
}

fn neighbour_mac(json: &str) -> Option<[u8; 6]> {
    let v: Value = serde_json::from_str(json).ok()?;
    v.as_array()?.iter().find_map(|n| {
        let failed = n["state"]
            .as_array()
            .is_some_and(|s| s.iter().any(|x| x == "FAILED" || x == "INCOMPLETE"));
        if failed {
            return None;
        }
        n["lladdr"].as_str().and_then(parse_mac)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: &str = r#"[{"ifindex":7,"ifname":"enp1s0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1400,"address":"fa:04:ef:3c:6f:90","ifalias":"to dut","linkinfo":{"info_kind":"veth"},"link_type":"ether"}]"#;
    const ADDRS: &str = r#"[{"ifname":"enp1s0","addr_info":[{"family":"inet","local":"198.18.9.1","prefixlen":24},{"family":"inet6","local":"fe80::1","prefixlen":64}]}]"#;

    #[test]
    fn parses_and_accepts_a_test_port() {
        let s = parse_state("enp1s0", LINK, ADDRS, vec![]).unwrap();
        assert_eq!(s.mtu, 1400);
        assert!(s.up);
        assert_eq!(s.alias.as_deref(), Some("to dut"));
        assert_eq!(s.mac, Some([0xfa, 4, 0xef, 0x3c, 0x6f, 0x90]));
        assert_eq!(s.addresses.len(), 2);
        check(&s, false).unwrap();
    }

    #[test]
    fn refuses_ports_in_use() {
        let mut s = parse_state("enp1s0", LINK, ADDRS, vec![]).unwrap();
        s.addresses.push(("192.0.2.2".parse().unwrap(), 24));
        let e = check(&s, false).unwrap_err().to_string();
        assert!(
            e.contains("192.0.2.2/24") && e.contains("--force-port"),
            "{e}"
        );
        check(&s, true).unwrap();
        s.addresses.pop();
        s.default_route = vec!["IPv6"];
        assert!(check(&s, false)
            .unwrap_err()
            .to_string()
            .contains("default IPv6 route"));
        s.default_route.clear();
        s.master = Some("br0".into());
        assert!(check(&s, false)
            .unwrap_err()
            .to_string()
            .contains("nomaster"));
        s.master = None;
        s.loopback = true;
        assert!(check(&s, true).is_err());
    }

    #[test]
    fn benchmarking_ranges() {
        for ok in [
            "198.18.0.1",
            "198.19.255.254",
            "2001:2::1",
            "2001:2:0:ffff::1",
            "fe80::1",
        ] {
            assert!(benchmarking_address(ok.parse().unwrap()), "{ok}");
        }
        for bad in ["198.20.0.1", "10.0.0.1", "2001:2:1::1", "2001:db8::1"] {
            assert!(!benchmarking_address(bad.parse().unwrap()), "{bad}");
        }
    }

    #[test]
    fn default_routes_and_neighbours() {
        assert!(routes_use(
            r#"[{"dst":"default","gateway":"192.0.2.1","dev":"eth0"}]"#,
            "eth0"
        ));
        assert!(routes_use(
            r#"[{"dst":"default","nexthops":[{"dev":"a"},{"dev":"eth1"}]}]"#,
            "eth1"
        ));
        assert!(!routes_use("[]", "eth0"));
        assert_eq!(
            neighbour_mac(
                r#"[{"dst":"198.18.0.254","lladdr":"02:00:00:00:00:01","state":["REACHABLE"]}]"#
            ),
            Some([2, 0, 0, 0, 0, 1])
        );
        assert_eq!(
            neighbour_mac(r#"[{"dst":"198.18.0.254","state":["FAILED"]}]"#),
            None
        );
        assert_eq!(parse_mac("02:00:00:00:00"), None);
    }
}
