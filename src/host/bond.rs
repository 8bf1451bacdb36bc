//! Bonds as the bonding driver shows them in /proc/net/bonding: the mode,
//! the 802.3ad aggregator that carries the traffic and its LACP partner,
//! and each port's aggregator and partner. Read with every snapshot of a
//! namespace that has bonds (the lab's `--dut-bond` DUT).

use crate::proto::{BondHead, BondPortState, BondState};
use std::path::Path;

const DIR: &str = "/proc/net/bonding";

/// Every bond of this namespace; none where the driver is not loaded.
pub fn read_all() -> Vec<BondState> {
    read_dir(Path::new(DIR))
}

fn read_dir(dir: &Path) -> Vec<BondState> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut bonds: Vec<BondState> = entries
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some(parse(&e.file_name().to_string_lossy(), &text))
        })
        .collect();
    bonds.sort_by(|a, b| a.head.name.cmp(&b.head.name));
    bonds
}

/// Where in the file a line is.
#[derive(PartialEq)]
enum Part {
    Bond,
    ActiveAggregator,
    Port,
    PortPartner,
    PortOther,
}

/// One bond's file. Unknown lines are skipped: the driver's text grows
/// between kernel releases.
pub fn parse(name: &str, text: &str) -> BondState {
    let mut b = BondState {
        head: BondHead {
            name: name.to_string(),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut part = Part::Bond;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed == "Active Aggregator Info:" {
            part = Part::ActiveAggregator;
            continue;
        }
        if let Some(port) = trimmed.strip_prefix("Slave Interface:") {
            b.ports.push(BondPortState {
                name: port.trim().to_string(),
                ..Default::default()
            });
            part = Part::Port;
            continue;
        }
        if part != Part::Bond && part != Part::ActiveAggregator {
            match trimmed {
                "details partner lacp pdu:" => {
                    part = Part::PortPartner;
                    continue;
                }
                "details actor lacp pdu:" => {
                    part = Part::PortOther;
                    continue;
                }
                _ => {}
            }
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let number = || value.split_whitespace().next()?.parse::<u32>().ok();
        match part {
            Part::Bond => match key {
                "Bonding Mode" => b.head.mode = value.to_string(),
                "MII Status" => b.head.mii_status = value.to_string(),
                "MII Polling Interval (ms)" => b.head.miimon_ms = number(),
                "LACP rate" => b.head.lacp_rate = Some(value.to_string()),
                _ => {}
            },
            Part::ActiveAggregator => match key {
                "Aggregator ID" => b.head.active_aggregator = number(),
                "Partner Mac Address" => b.head.partner_mac = Some(value.to_lowercase()),
                _ => {}
            },
            Part::Port | Part::PortPartner | Part::PortOther => {
                let Some(p) = b.ports.last_mut() else {
                    continue;
                };
                match (&part, key) {
                    (Part::Port, "MII Status") => p.mii_status = value.to_string(),
                    (Part::Port, "Speed") => p.speed_mbps = number(),
                    (Part::Port, "Aggregator ID") => p.aggregator = number(),
                    (Part::PortPartner, "system mac address") => {
                        p.partner_mac = Some(value.to_lowercase())
                    }
                    _ => {}
                }
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian 12's 6.1 kernel in a guest: bond of two virtio NICs in
    /// 802.3ad, no LACP partner (each port its own aggregator).
    const NO_PARTNER: &str = "Ethernet Channel Bonding Driver: v6.1.0-31-amd64

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer2 (0)
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 0
Down Delay (ms): 0
Peer Notification Delay (ms): 0

802.3ad info
LACP active: on
LACP rate: slow
Min links: 0
Aggregator selection policy (ad_select): stable
System priority: 65535
System MAC address: 02:4c:00:00:00:11
Active Aggregator Info:
	Aggregator ID: 1
	Number of ports: 1
	Actor Key: 15
	Partner Key: 1
	Partner Mac Address: 00:00:00:00:00:00

Slave Interface: dut0a
MII Status: up
Speed: 10000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: 02:4c:00:00:00:11
Slave queue ID: 0
Aggregator ID: 1
Actor Churn State: none
Partner Churn State: churned
Actor Churned Count: 0
Partner Churned Count: 1
details actor lacp pdu:
    system priority: 65535
    system mac address: 02:4c:00:00:00:11
    port key: 15
    port priority: 255
    port number: 1
    port state: 77
details partner lacp pdu:
    system priority: 65535
    system mac address: 00:00:00:00:00:00
    oper key: 1
    port priority: 255
    port number: 1
    port state: 1

Slave Interface: dut0b
MII Status: up
Speed: 10000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: 02:4c:00:00:00:13
Slave queue ID: 0
Aggregator ID: 2
Actor Churn State: churned
Partner Churn State: churned
Actor Churned Count: 1
Partner Churned Count: 1
details actor lacp pdu:
    system priority: 65535
    system mac address: 02:4c:00:00:00:11
    port key: 15
    port priority: 255
    port number: 2
    port state: 69
details partner lacp pdu:
    system priority: 65535
    system mac address: 00:00:00:00:00:00
    oper key: 1
    port priority: 255
    port number: 1
    port state: 1
";

    #[test]
    fn an_8023ad_bond_without_partner() {
        let b = parse("dut0", NO_PARTNER);
        assert_eq!(b.head.name, "dut0");
        assert_eq!(b.head.mode, "IEEE 802.3ad Dynamic link aggregation");
        assert_eq!(b.head.mii_status, "up");
        assert_eq!(b.head.miimon_ms, Some(100));
        assert_eq!(b.head.lacp_rate.as_deref(), Some("slow"));
        assert_eq!(b.head.active_aggregator, Some(1));
        assert_eq!(b.head.partner_mac.as_deref(), Some("00:00:00:00:00:00"));
        assert_eq!(b.ports.len(), 2);
        let (a, c) = (&b.ports[0], &b.ports[1]);
        assert_eq!((a.name.as_str(), a.aggregator), ("dut0a", Some(1)));
        assert_eq!((c.name.as_str(), c.aggregator), ("dut0b", Some(2)));
        assert_eq!(a.speed_mbps, Some(10000));
        assert_eq!(a.mii_status, "up");
        // The partner's MAC, not the actor's (which comes first).
        assert_eq!(a.partner_mac.as_deref(), Some("00:00:00:00:00:00"));
    }

    #[test]
    fn an_active_backup_bond_has_no_aggregators() {
        let text = "Bonding Mode: fault-tolerance (active-backup)\nPrimary Slave: None\n\
                    Currently Active Slave: eth0\nMII Status: up\nMII Polling Interval (ms): 0\n\n\
                    Slave Interface: eth0\nMII Status: up\nSpeed: Unknown\n";
        let b = parse("bond1", text);
        assert_eq!(b.head.mode, "fault-tolerance (active-backup)");
        assert_eq!(b.head.miimon_ms, Some(0));
        assert_eq!(b.head.active_aggregator, None);
        assert_eq!(b.ports[0].speed_mbps, None);
        assert!(read_dir(Path::new("/nonexistent/bonding")).is_empty());
    }
}
