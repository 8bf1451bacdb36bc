//! Network interfaces: which ones to inspect, their link facts (driver, PCI
//! address, speed, duplex, carrier, MTU, NUMA node, queues, offloads) and the
//! link-level checks (carrier down, half duplex, MTU mismatch, fewer RSS
//! queues than cores, offloads off). PCIe is `pcie.rs`, IRQs `irq.rs`.
//!
//! Offloads are not in sysfs. By this crate's convention a fixture or a
//! capture may provide `sys/class/net/IF/features` holding `ethtool -k IF`
//! output (`generic-receive-offload: on`); without it the check is skipped.

use std::collections::BTreeMap;

use crate::parse::{count, int};
use crate::report::{Finding, NicFacts, Severity};
use crate::{evidence, Ctx, Error};

const NET_DIR: &str = "sys/class/net";

/// The offloads that matter for TCP bulk throughput, by ethtool name.
const OFFLOADS: [(&str, &str); 3] = [
    ("generic-receive-offload", "GRO"),
    ("generic-segmentation-offload", "GSO"),
    ("tcp-segmentation-offload", "TSO"),
];

/// Finds the interfaces to inspect and reads their link facts.
pub(crate) fn collect(ctx: &mut Ctx) -> Result<(), Error> {
    let all = ctx.host.list_dirs(NET_DIR, |_| true);
    let explicit = !ctx.opts.nics.is_empty();
    let names: Vec<String> = if explicit {
        for name in &ctx.opts.nics {
            // A name with a slash would read outside sys/class/net.
            if name.contains('/') || name.starts_with('.') || !all.contains(name) {
                return Err(Error::UnknownNic {
                    name: name.clone(),
                    root: ctx.opts.root.clone(),
                    available: all,
                });
            }
        }
        ctx.opts.nics.clone()
    } else {
        // Physical-ish: has a `device` (a symlink on a live host, a plain
        // directory in fixtures and captures). Excludes lo, veth, bridges.
        all.into_iter()
            .filter(|n| ctx.host.is_dir(&format!("{NET_DIR}/{n}/device")))
            .collect()
    };
    if names.is_empty() {
        ctx.skip("nics: no interface with a device under /sys/class/net");
    }

    for name in names {
        let nic = read_nic(ctx, &name, explicit);
        if !nic.inspected {
            ctx.skip(format!(
                "nic {name}: link is not up, not checked (name it with --nic to check it)"
            ));
        }
        ctx.facts.nics.push(nic);
    }
    check_link(ctx);
    check_mtu(ctx);
    check_rss(ctx);
    check_offloads(ctx);
    Ok(())
}

fn read_nic(ctx: &mut Ctx, name: &str, explicit: bool) -> NicFacts {
    let dir = format!("{NET_DIR}/{name}");
    let host = ctx.host;
    let read = |file: &str| host.read_trimmed(&format!("{dir}/{file}"));
    let mut nic = NicFacts {
        name: name.to_string(),
        ..NicFacts::default()
    };
    // uevent instead of the `driver` symlink: it is a plain file, so it
    // survives a capture.
    if let Some(uevent) = read("device/uevent") {
        for line in uevent.lines() {
            if let Some(v) = line.strip_prefix("DRIVER=") {
                nic.driver = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("PCI_SLOT_NAME=") {
                nic.pci_address = Some(v.trim().to_string());
            }
        }
    }
    // The kernel reports -1 (or 4294967295 from old drivers) for unknown speed.
    nic.speed_mbps = read("speed")
        .and_then(|s| int::<i64>(&s))
        .filter(|&s| s > 0 && s < i64::from(u32::MAX))
        .map(|s| s as u64);
    nic.duplex = read("duplex");
    // `carrier` fails with EINVAL while the interface is administratively down.
    nic.carrier = read("carrier").and_then(|s| match s.as_str() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    });
    nic.operstate = read("operstate");
    nic.mtu = read("mtu").and_then(|s| int(&s));
    nic.numa_node = read("device/numa_node")
        .and_then(|s| int::<i64>(&s))
        .and_then(|n| u32::try_from(n).ok());
    let queues = format!("{dir}/queues");
    if host.is_dir(&queues) {
        nic.rx_queues = Some(host.list_dirs(&queues, |n| n.starts_with("rx-")).len());
        nic.tx_queues = Some(host.list_dirs(&queues, |n| n.starts_with("tx-")).len());
    }
    if let Some(text) = read("features") {
        nic.features = Some(parse_features(&text));
    }
    let up = nic.operstate.as_deref() == Some("up") || nic.carrier == Some(true);
    nic.inspected = explicit || up;
    nic
}

/// Parses `ethtool -k` output: `name: on|off [fixed]` lines; headers skipped.
pub(crate) fn parse_features(text: &str) -> BTreeMap<String, bool> {
    let mut features = BTreeMap::new();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let on = match value.split_whitespace().next() {
            Some("on") => true,
            Some("off") => false,
            _ => continue,
        };
        features.insert(name.trim().to_string(), on);
    }
    features
}

fn inspected(ctx: &Ctx) -> Vec<NicFacts> {
    ctx.facts
        .nics
        .iter()
        .filter(|n| n.inspected)
        .cloned()
        .collect()
}

fn check_link(ctx: &mut Ctx) {
    for nic in inspected(ctx) {
        let dir = format!("{NET_DIR}/{}", nic.name);
        let down = nic.carrier == Some(false)
            || (nic.carrier.is_none() && nic.operstate.as_deref() == Some("down"));
        if down {
            let mut ev = Vec::new();
            if let Some(c) = nic.carrier {
                ev.push(evidence(&format!("{dir}/carrier"), u8::from(c).to_string()));
            }
            if let Some(s) = &nic.operstate {
                ev.push(evidence(&format!("{dir}/operstate"), s.clone()));
            }
            ctx.add(Finding {
                id: "link_down".into(),
                severity: Severity::Warning,
                title: format!("{} has no carrier (link down)", nic.name),
                evidence: ev,
                impact: "No traffic can pass this interface; a test through it fails.".into(),
                fix: format!(
                    "Bring it up (ip link set {} up), check cable/transceiver and the peer \
                     port, and that both ends agree on speed and FEC.",
                    nic.name
                ),
                subject: Some(nic.name.clone()),
            });
        }
        if nic.duplex.as_deref() == Some("half") {
            ctx.add(Finding {
                id: "half_duplex".into(),
                severity: Severity::Warning,
                title: format!("{} negotiated half duplex", nic.name),
                evidence: vec![evidence(&format!("{dir}/duplex"), "half")],
                impact: "Half duplex shares the link between directions and collides; \
                         throughput collapses under bidirectional load."
                    .into(),
                fix: "Enable autonegotiation on both ends (ethtool -s IF autoneg on) or force \
                      full duplex on both; replace a faulty cable."
                    .into(),
                subject: Some(nic.name.clone()),
            });
        }
    }
}

/// Only between interfaces named with `--nic`: they carry one test, and a
/// smaller MTU on one of them fragments or drops the other's frames.
fn check_mtu(ctx: &mut Ctx) {
    if ctx.opts.nics.len() < 2 {
        return;
    }
    let nics = inspected(ctx);
    let with_mtu: Vec<(&str, u32)> = nics
        .iter()
        .filter_map(|n| Some((n.name.as_str(), n.mtu?)))
        .collect();
    let min = with_mtu.iter().map(|(_, m)| *m).min();
    let max = with_mtu.iter().map(|(_, m)| *m).max();
    let (Some(min), Some(max)) = (min, max) else {
        ctx.skip("mtu mismatch: no mtu readable");
        return;
    };
    if min == max {
        return;
    }
    let names: Vec<&str> = with_mtu.iter().map(|(n, _)| *n).collect();
    ctx.add(Finding {
        id: "mtu_mismatch".into(),
        severity: Severity::Warning,
        title: format!("MTU differs between {}: {min} vs {max}", names.join(", ")),
        evidence: with_mtu
            .iter()
            .map(|(n, m)| evidence(&format!("{NET_DIR}/{n}/mtu"), m.to_string()))
            .collect(),
        impact: format!(
            "Frames larger than {min} bytes are dropped or fragmented on the smaller-MTU \
             side; TCP falls back to the small MSS and throughput per packet drops."
        ),
        fix: format!("Set the same MTU on all test interfaces (ip link set IF mtu {max})."),
        subject: Some(names.join(",")),
    });
}

/// Fewer receive queues than cores caps how many cores RSS can spread a
/// multi-flow test over.
fn check_rss(ctx: &mut Ctx) {
    let cores = ctx.facts.cpu_count;
    for nic in inspected(ctx) {
        ctx.skip(format!(
            "ring sizes {}: not in sysfs (ethtool -g {})",
            nic.name, nic.name
        ));
        let (Some(rx), Some(cores)) = (nic.rx_queues, cores) else {
            ctx.skip(format!(
                "rss {}: queues/rx-* or online CPUs not readable",
                nic.name
            ));
            continue;
        };
        if rx >= cores {
            continue;
        }
        ctx.add(Finding {
            id: "rss_queues_fewer_than_cpus".into(),
            severity: Severity::Info,
            title: format!(
                "{} has {} for {cores} online CPUs",
                nic.name,
                count(rx, "receive queue", "receive queues")
            ),
            evidence: vec![
                evidence(
                    &format!("{NET_DIR}/{}/queues", nic.name),
                    format!("{rx} rx-* queues"),
                ),
                evidence(
                    "sys/devices/system/cpu/online",
                    crate::parse::format_cpu_list(&ctx.facts.online_cpus),
                ),
            ],
            impact: format!(
                "RSS can spread receive processing over at most {}; multi-flow \
                 tests stop scaling there. Single-flow tests are unaffected.",
                count(rx, "core", "cores")
            ),
            fix: format!(
                "Raise the queue count if the NIC allows (ethtool -L {} combined N; see \
                 ethtool -l for the maximum).",
                nic.name
            ),
            subject: Some(nic.name.clone()),
        });
    }
}

fn check_offloads(ctx: &mut Ctx) {
    for nic in inspected(ctx) {
        let Some(features) = &nic.features else {
            ctx.skip(format!(
                "offloads {}: GRO/GSO/TSO are not in sysfs; provide \
                 sys/class/net/{}/features (ethtool -k output) to check them",
                nic.name, nic.name
            ));
            continue;
        };
        let off: Vec<(&str, &str)> = OFFLOADS
            .iter()
            .filter(|(name, _)| features.get(*name) == Some(&false))
            .copied()
            .collect();
        if off.is_empty() {
            continue;
        }
        let rel = format!("{NET_DIR}/{}/features", nic.name);
        let short: Vec<&str> = off.iter().map(|(_, s)| *s).collect();
        ctx.add(Finding {
            id: "offloads_disabled".into(),
            severity: Severity::Info,
            title: format!("{}: {} off", nic.name, short.join(", ")),
            evidence: off
                .iter()
                .map(|(name, _)| evidence(&rel, format!("{name}: off")))
                .collect(),
            impact: "Without segmentation/receive offloads the stack handles every MTU-sized \
                     packet itself; TCP bulk throughput per core drops several-fold. (Packet \
                     tests want GRO off on purpose, so every packet is real.)"
                .into(),
            fix: format!(
                "For TCP throughput tests enable them: ethtool -K {} gro on gso on tso on.",
                nic.name
            ),
            subject: Some(nic.name.clone()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_parse_ethtool_output() {
        let text = "Features for eth0:\nrx-checksumming: on\n\
                    tcp-segmentation-offload: off\n\ttx-tcp-segmentation: off [fixed]\n\
                    generic-receive-offload: on\nweird line\n";
        let f = parse_features(text);
        assert_eq!(f.get("generic-receive-offload"), Some(&true));
        assert_eq!(f.get("tcp-segmentation-offload"), Some(&false));
        assert_eq!(f.get("tx-tcp-segmentation"), Some(&false));
        assert!(!f.contains_key("Features for eth0"));
    }
}
