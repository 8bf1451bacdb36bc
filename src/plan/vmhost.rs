//! A host's `vm` table: a guest linerate boots as the host, its agent
//! inside (`[hosts.r1] vm = { kernel = "debian:bookworm", nics = [...] }`).

use super::value::{span, Src, Value};
use super::PlanError;
use crate::vm::host::{VmHost, VmNic};
use crate::vm::{KernelSource, VmSpec};
use toml::de::DeValue;

const VM_KEYS: &[&str] = &["kernel", "cpus", "memory", "accel", "nics"];
const NIC_KEYS: &[&str] = &["netns", "bridge", "address", "peer", "gateway", "mtu"];
/// NICs one guest may have (PCI slots of q35 stay plenty).
const MAX_NICS: usize = 8;

/// The kind of host `name` whose table `t` has a `vm` key; `n` is its
/// number in a range (refused: every guest of a range would take the same
/// addresses).
pub(super) fn host_kind(
    src: Src,
    name: &str,
    n: Option<&str>,
    t: &toml::de::DeTable,
) -> Result<super::HostKind, PlanError> {
    let Some((key, v)) = t.get_key_value("vm") else {
        return Err(src.err(src.end(), format!("host '{name}' has no vm table")));
    };
    if n.is_some() {
        return Err(src.err(
            span(key),
            "a VM host cannot be a range: each guest needs NICs of its own; define each VM \
             host by name",
        ));
    }
    Ok(super::HostKind::Vm(Box::new(parse(src, name, v)?)))
}

/// Parses `vm = { ... }` of host `name`.
pub(super) fn parse(src: Src, name: &str, v: &Value) -> Result<VmHost, PlanError> {
    let place = format!("in host {name}'s vm table");
    let t = src.table(v, "vm")?;
    src.check_keys(t, VM_KEYS, &place)?;
    let mut spec = VmSpec::default();
    if let Some(k) = t.get("kernel") {
        let s = src.text_value(k, "kernel")?;
        spec.kernel = KernelSource::parse(&s).map_err(|e| src.err(span(k), e))?;
    }
    if let Some(c) = t.get("cpus") {
        spec.cpus = src.int(c, "cpus", 1, 64)? as u16;
    }
    if let Some(m) = t.get("memory") {
        spec.memory_mib = src.int(m, "memory (MiB)", 256, 65_536)? as u32;
    }
    if let Some(a) = t.get("accel") {
        let s = src.text_value(a, "accel")?;
        spec.accel = crate::vm::Accel::parse(&s).map_err(|e| src.err(span(a), e))?;
    }
    let Some(nv) = t.get("nics") else {
        return Err(src.err(
            span(v),
            format!(
                "host '{name}' is a VM with no NICs: add nics = [{{ netns = \"NAME\", address = \
                 \"198.18.5.1/24\", peer = \"198.18.5.2/24\" }}] (one table per NIC, in order)"
            ),
        ));
    };
    let list = match nv.get_ref() {
        DeValue::Array(a) => a,
        _ => {
            return Err(src.err(
                span(nv),
                "nics must be an array of tables: nics = [{ netns = \"gen\", address = \"198.18.5.1/24\" }]",
            ))
        }
    };
    if list.is_empty() || list.len() > MAX_NICS {
        return Err(src.err(
            span(nv),
            format!("a VM has 1 to {MAX_NICS} NICs; this one has {}", list.len()),
        ));
    }
    let nics = list
        .iter()
        .enumerate()
        .map(|(i, n)| nic(src, name, i, n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(VmHost { spec, nics })
}

/// A NIC's address with its prefix length (`key` is the field, `found`
/// its text and where it is), if given.
fn cidr(
    src: Src,
    key: &str,
    found: Option<(String, super::Span)>,
) -> Result<Option<crate::proto::Cidr>, PlanError> {
    let Some((s, at)) = found else {
        return Ok(None);
    };
    if !s.contains('/') {
        return Err(src.err(
            at,
            format!(
                "{key} '{s}' has no prefix length: write it as ADDRESS/LENGTH, e.g. 198.18.5.1/24"
            ),
        ));
    }
    s.parse().map(Some).map_err(|_| {
        src.err(
            at,
            format!("{key} '{s}' is not an address with a prefix length: write e.g. 198.18.5.1/24 or 2001:2:0:5::1/64"),
        )
    })
}

/// A NIC's namespace or bridge name, if given, checked as an interface
/// name; `bad` says what is wrong with one that is not.
fn ifname(
    src: Src,
    found: Option<(String, super::Span)>,
    bad: fn(&str) -> String,
) -> Result<Option<String>, PlanError> {
    let Some((name, at)) = found else {
        return Ok(None);
    };
    crate::netops::check_ifname(&name).map_err(|_| src.err(at, bad(&name)))?;
    Ok(Some(name))
}

fn nic(src: Src, name: &str, i: usize, v: &Value) -> Result<VmNic, PlanError> {
    let place = format!("in NIC {i} of host {name}'s vm table");
    let t = src.table(v, "a NIC")?;
    src.check_keys(t, NIC_KEYS, &place)?;
    let text = |key: &str| -> Result<Option<(String, super::Span)>, PlanError> {
        t.get(key)
            .map(|v| Ok((src.text_value(v, key)?, span(v))))
            .transpose()
    };
    let netns = ifname(src, text("netns")?, |ns| {
        format!("netns '{ns}' is not a namespace name: use 1 to 15 letters, digits, _ . - (as `ip netns` lists them)")
    })?;
    let bridge = ifname(src, text("bridge")?, |br| {
        format!("bridge '{br}' is not an interface name: use the name `ip link` shows (1 to 15 characters, no / : or spaces)")
    })?;
    let address = cidr(src, "address", text("address")?)?;
    let peer = cidr(src, "peer", text("peer")?)?;
    if let (Some(_), Some(p)) = (&bridge, t.get("peer")) {
        return Err(src.err(
            span(p),
            "a NIC's tap joins its bridge or has an address of its own (peer), not both: the \
             bridge's segment already reaches the guest",
        ));
    }
    if netns.is_none() && bridge.is_none() && peer.is_some() {
        return Err(src.err(
            span(v),
            "this NIC's tap would take its address (peer) in linerate's own namespace: name \
             the namespace it belongs in (netns = \"NAME\"), or a bridge to join",
        ));
    }
    if let (Some(a), Some(p)) = (&address, &peer) {
        if a.addr == p.addr || a.addr.is_ipv4() != p.addr.is_ipv4() {
            let at = t.get("peer").map(span).unwrap_or(span(v));
            return Err(src.err(
                at,
                format!(
                    "peer {p} must be another address of the guest's own family and subnet \
                     ({a}): it is this machine's end of the link"
                ),
            ));
        }
    }
    let gateway = match text("gateway")? {
        Some((g, at)) => Some(g.parse().map_err(|_| {
            src.err(
                at,
                format!("gateway '{g}' is not an IP address: write e.g. 198.18.5.2"),
            )
        })?),
        None => None,
    };
    let mtu = t
        .get("mtu")
        .map(|m| src.int(m, "mtu", 576, 65_535).map(|n| n as u32))
        .transpose()?;
    Ok(VmNic {
        netns,
        bridge,
        address,
        peer,
        gateway,
        mtu,
    })
}
