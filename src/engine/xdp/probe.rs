//! Checks made before the live engine sends (issue 16, "detect the traps"):
//! the kernel has live frames (≥ 5.18) and the frames leave: a veth whose
//! peer has neither an XDP program nor GRO has no NAPI, and every frame
//! sent to it vanishes without an error; a driver without native XDP
//! (generic XDP only) cannot transmit them. Where a veth peer is visible
//! (same namespace) its settings are read; otherwise a short probe burst
//! of non-IP frames shows whether the interface's TX counter takes them.

use super::{consts, with_meta, Object};
use crate::engine::EngineError;
use crate::sys::{self, XdpRun};
use serde_json::Value;

/// Frames in the probe burst.
const PROBE_FRAMES: u32 = 16;
/// IEEE 802 local experimental ethertype: no stack on the way answers it.
const PROBE_ETHERTYPE: [u8; 2] = [0x88, 0xb5];

fn ip_json(args: &[&str]) -> Result<Vec<Value>, EngineError> {
    let out = crate::netops::run_output("ip", args)
        .map_err(|e| EngineError::Unavailable(format!("{e:#}")))?;
    serde_json::from_str(&out)
        .map_err(|e| EngineError::Unavailable(format!("parsing `ip {}`: {e}", args.join(" "))))
}

/// The name of interface `ifindex` in this namespace.
pub fn ifname(ifindex: u32) -> Result<String, EngineError> {
    ip_json(&["-j", "link", "show"])?
        .iter()
        .find(|l| l["ifindex"].as_u64() == Some(u64::from(ifindex)))
        .and_then(|l| l["ifname"].as_str().map(str::to_string))
        .ok_or_else(|| EngineError::Unavailable(format!("no interface with ifindex {ifindex}")))
}

/// Parses "6.18.44-fc" into (6, 18).
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Live frames (BPF_F_TEST_XDP_LIVE_FRAMES) came with kernel 5.18.
pub fn check_kernel() -> Result<(), EngineError> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    match parse_release(release.trim()) {
        Some(v) if v >= (5, 18) => Ok(()),
        _ => Err(EngineError::Unavailable(format!(
            "kernel {} has no XDP live frames (needs 5.18 or newer)",
            release.trim()
        ))),
    }
}

/// What `ip -d link` says about an interface and its veth peer.
#[derive(Debug, PartialEq, Eq)]
pub struct LinkFacts {
    pub kind: String,
    pub has_xdp: bool,
    /// The veth peer's ifindex, when the peer is in this namespace.
    pub local_peer: Option<u32>,
}

/// Reads kind, XDP and veth peer from one `ip -j -d link show` entry.
pub fn link_facts(l: &Value) -> LinkFacts {
    let kind = l["linkinfo"]["info_kind"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let local_peer = if l.get("link_netnsid").is_none() {
        l["link_index"].as_u64().map(|i| i as u32)
    } else {
        None
    };
    LinkFacts {
        kind,
        has_xdp: l.get("xdp").is_some(),
        local_peer,
    }
}

fn gro_on(ifname: &str) -> Result<bool, EngineError> {
    let out = crate::netops::run_output("ethtool", &["-k", ifname])
        .map_err(|e| EngineError::Unavailable(format!("{e:#}")))?;
    Ok(out
        .lines()
        .any(|l| l.trim_start().starts_with("generic-receive-offload: on")))
}

fn no_napi(ifname: &str, peer: &str) -> EngineError {
    EngineError::Unavailable(format!(
        "{ifname} is a veth whose peer {peer} has no NAPI (no XDP program and GRO off): frames \
         sent with XDP_TX would vanish without an error; run `ethtool -K {peer} gro on` in the \
         peer's namespace, or attach an XDP program to {peer} (--rx-engine xdp)"
    ))
}

/// Refuses an egress that would drop the live engine's frames silently;
/// returns how many frames the check itself put on the wire (the probe
/// burst, 0 when the veth peer was in sight): the next hop's counters see
/// them, and they are not the test's.
pub fn check_egress(ifname: &str, ifindex: u32) -> Result<u64, EngineError> {
    let links = ip_json(&["-j", "-d", "link", "show"])?;
    let me = links
        .iter()
        .find(|l| l["ifindex"].as_u64() == Some(u64::from(ifindex)))
        .ok_or_else(|| EngineError::Unavailable(format!("interface {ifname} vanished")))?;
    let facts = link_facts(me);
    // No test attach of a program to learn whether the driver has native
    // XDP: on physical NICs (mlx5, i40e…) attaching resets the rings. A
    // driver without it (ndo_xdp_xmit) sends none of the probe frames.
    if facts.kind == "veth" {
        if let Some(peer) = facts.local_peer {
            let p = links
                .iter()
                .find(|l| l["ifindex"].as_u64() == Some(u64::from(peer)));
            if let Some(p) = p {
                let name = p["ifname"].as_str().unwrap_or("?").to_string();
                if link_facts(p).has_xdp || gro_on(&name)? {
                    return Ok(0);
                }
                return Err(no_napi(ifname, &name));
            }
        }
    }
    // The peer is out of sight (another namespace, a physical link): send
    // a burst of frames no stack answers and see whether they are dropped.
    probe_burst(
        ifname,
        ifindex,
        me["address"].as_str().and_then(mac_bytes),
        facts.kind == "veth",
    )
}

/// Whether interface `ifindex` is a driver's NIC (not a veth) with no XDP
/// program of its own: most drivers (virtio_net, i40e, mlx5…) allocate
/// their XDP send queues, and so transmit XDP frames, only while a program
/// is attached to the device itself.
pub fn bare_driver(ifindex: u32) -> Result<bool, EngineError> {
    let links = ip_json(&["-j", "-d", "link", "show"])?;
    Ok(links
        .iter()
        .find(|l| l["ifindex"].as_u64() == Some(u64::from(ifindex)))
        .map(link_facts)
        .is_some_and(|f| f.kind != "veth" && !f.has_xdp))
}

/// "02:4c:52:00:00:0a" as bytes.
fn mac_bytes(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

fn tx_packets(ifname: &str) -> Result<u64, EngineError> {
    let l = ip_json(&["-j", "-s", "link", "show", "dev", ifname])?;
    l.first()
        .and_then(|l| l["stats64"]["tx"]["packets"].as_u64())
        .ok_or_else(|| EngineError::Unavailable(format!("no TX counters for {ifname}")))
}

fn probe_burst(
    ifname: &str,
    ifindex: u32,
    mac: Option<[u8; 6]>,
    veth: bool,
) -> Result<u64, EngineError> {
    let mut frame = vec![0u8; 60];
    // To our own MAC: a learning switch keeps it on our port, a peer
    // drops it as not its own.
    if let Some(m) = mac {
        frame[0..6].copy_from_slice(&m);
        frame[6..12].copy_from_slice(&m);
    }
    frame[12..14].copy_from_slice(&PROBE_ETHERTYPE);
    let frame = with_meta(&frame);
    let before = tx_packets(ifname)?;
    let mut obj = Object::load("floor", &[])?;
    let fd = obj.prog_fd("lr_floor")?;
    sys::xdp_test_run(
        fd,
        XdpRun {
            data_in: &frame,
            meta_len: consts::META_LEN as u32,
            data_out: None,
            repeat: PROBE_FRAMES,
            ingress_ifindex: ifindex,
            flags: sys::BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: consts::BATCH as u32,
        },
    )
    .map_err(|e| {
        EngineError::Unavailable(format!(
            "sending live XDP frames on {ifname}: {e} (BPF_PROG_RUN with live frames)"
        ))
    })?;
    // A veth counts XDP frames its peer took as its own TX; frames the
    // peer refused (no NAPI) are counted nowhere. Drivers count XDP
    // transmits as TX too.
    let sent = tx_packets(ifname)?.saturating_sub(before);
    if sent < u64::from(PROBE_FRAMES) {
        let why = if veth {
            "its veth peer cannot take XDP frames and would drop every frame silently (the \
             peer needs NAPI: run `ethtool -K PEER gro on` in the peer's namespace or attach \
             an XDP program to it, e.g. --rx-engine xdp)"
        } else {
            "its driver cannot transmit XDP frames (it needs native XDP with ndo_xdp_xmit, \
             e.g. mlx5, i40e, ice, ixgbe; generic XDP cannot send them); use --tx-engine packet"
        };
        return Err(EngineError::Unavailable(format!(
            "only {sent} of {PROBE_FRAMES} probe frames sent with XDP_TX on {ifname} left it: \
             {why}"
        )));
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases() {
        assert_eq!(parse_release("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(parse_release("5.4.0-150-generic"), Some((5, 4)));
        assert!(parse_release("5.4.0").is_some_and(|v| v < (5, 18)));
        assert_eq!(parse_release("x"), None);
    }

    #[test]
    fn veth_facts_from_ip_json() {
        let v: Value = serde_json::from_str(
            r#"{"ifindex":5,"link_index":4,"ifname":"gen0","linkinfo":{"info_kind":"veth"},
                "xdp":{"mode":1,"prog":{"id":3}}}"#,
        )
        .unwrap();
        assert_eq!(
            link_facts(&v),
            LinkFacts {
                kind: "veth".into(),
                has_xdp: true,
                local_peer: Some(4)
            }
        );
        let v: Value = serde_json::from_str(
            r#"{"ifindex":5,"link_index":4,"link_netnsid":0,"ifname":"gen0","linkinfo":{"info_kind":"veth"}}"#,
        )
        .unwrap();
        let f = link_facts(&v);
        assert_eq!((f.has_xdp, f.local_peer), (false, None));
    }
}
