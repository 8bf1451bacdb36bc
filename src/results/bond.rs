//! A DUT's bond in a test's results (`lab --dut-bond`): its state after
//! the test as the bonding driver shows it, what each port carried during
//! the test (interface counters), and a sentence on what that means, so
//! nobody reads an 802.3ad bond without an LACP partner as two ports
//! sharing the load.

use crate::proto::{BondHead, BondPortState, BondState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The MAC a port reports for its LACP partner when none answered.
pub const NO_PARTNER: &str = "00:00:00:00:00:00";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct BondRecord {
    /// The bond's interface, its mode, MII status, LACP rate, active
    /// aggregator and that aggregator's partner MAC, after the test.
    #[serde(flatten)]
    pub state: BondHead,
    /// An LACP partner answered (the active aggregator's partner MAC is
    /// not 00:00:00:00:00:00).
    pub lacp_partner: bool,
    pub ports: Vec<BondPortRecord>,
    /// What carried the traffic, in a sentence.
    pub note: String,
}

/// One port: its state after the test and its counters over the test.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct BondPortRecord {
    #[serde(flatten)]
    pub state: BondPortState,
    /// In the active aggregator (802.3ad), so it may carry traffic.
    pub active: bool,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Frames the port received and dropped (a port outside the active
    /// aggregator drops what arrives on it).
    pub rx_dropped: u64,
}

/// A port's counters over the test: rx and tx packets, rx and tx bytes,
/// rx dropped.
pub type PortDelta = [u64; 5];

/// The record of `state` with each port's counters over the test
/// (`delta`, by port name; none read: zeros).
pub fn record(state: &BondState, delta: &dyn Fn(&str) -> Option<PortDelta>) -> BondRecord {
    let lacp = state.head.mode.contains("802.3ad");
    let lacp_partner = state
        .head
        .partner_mac
        .as_deref()
        .is_some_and(|m| m != NO_PARTNER);
    let ports: Vec<BondPortRecord> = state
        .ports
        .iter()
        .map(|p| {
            let [rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped] =
                delta(&p.name).unwrap_or_default();
            BondPortRecord {
                state: p.clone(),
                active: !lacp
                    || (p.aggregator.is_some() && p.aggregator == state.head.active_aggregator),
                rx_packets,
                tx_packets,
                rx_bytes,
                tx_bytes,
                rx_dropped,
            }
        })
        .collect();
    let carried: Vec<String> = ports
        .iter()
        .filter(|p| p.rx_packets + p.tx_packets > 0)
        .map(|p| {
            format!(
                "{} ({} rx, {} tx)",
                p.state.name, p.rx_packets, p.tx_packets
            )
        })
        .collect();
    let carried = if carried.is_empty() {
        "no port counted any packet".to_string()
    } else {
        format!("packets went through {}", carried.join(", "))
    };
    let active: Vec<&str> = ports
        .iter()
        .filter(|p| p.active)
        .map(|p| p.state.name.as_str())
        .collect();
    let agg = state
        .head
        .active_aggregator
        .map_or("none".to_string(), |a| a.to_string());
    let note = match (lacp, lacp_partner) {
        (true, false) => format!(
            "{}: 802.3ad without an LACP partner (partner MAC {NO_PARTNER}: nothing on the \
             other side answers LACP), so each port is an aggregator of its own and only the \
             active one, aggregator {agg} ({}), sends and receives; this is not load sharing. \
             Over the test {carried}",
            state.head.name,
            active.join(", ")
        ),
        (true, true) => format!(
            "{}: 802.3ad with LACP partner {}: aggregator {agg} of {} port{} ({}) carries the \
             traffic, spread by the transmit hash; over the test {carried}",
            state.head.name,
            state.head.partner_mac.as_deref().unwrap_or_default(),
            active.len(),
            if active.len() == 1 { "" } else { "s" },
            active.join(", ")
        ),
        (false, _) => format!(
            "{}: mode {}; over the test {carried}",
            state.head.name, state.head.mode
        ),
    };
    BondRecord {
        state: state.head.clone(),
        lacp_partner,
        ports,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, agg: u32, partner: &str) -> BondPortState {
        BondPortState {
            name: name.into(),
            mii_status: "up".into(),
            speed_mbps: Some(10_000),
            aggregator: Some(agg),
            partner_mac: Some(partner.into()),
        }
    }

    fn bond(partner: &str, aggs: [u32; 2]) -> BondState {
        BondState {
            head: BondHead {
                name: "dut0".into(),
                mode: "IEEE 802.3ad Dynamic link aggregation".into(),
                mii_status: "up".into(),
                miimon_ms: Some(100),
                lacp_rate: Some("slow".into()),
                active_aggregator: Some(1),
                partner_mac: Some(partner.into()),
            },
            ports: vec![
                port("dut0a", aggs[0], partner),
                port("dut0b", aggs[1], partner),
            ],
        }
    }

    #[test]
    fn without_a_partner_one_port_carries_and_the_note_says_so() {
        let delta = |p: &str| match p {
            "dut0a" => Some([1000, 900, 1_500_000, 60_000, 0]),
            _ => Some([0, 0, 0, 0, 3]),
        };
        let r = record(&bond(NO_PARTNER, [1, 2]), &delta);
        assert!(!r.lacp_partner);
        assert_eq!(r.state.active_aggregator, Some(1));
        assert!(r.ports[0].active && !r.ports[1].active);
        assert_eq!(r.ports[0].rx_packets, 1000);
        assert_eq!(r.ports[1].rx_dropped, 3);
        for want in [
            "without an LACP partner",
            "aggregator 1 (dut0a)",
            "not load sharing",
            "dut0a (1000 rx, 900 tx)",
        ] {
            assert!(r.note.contains(want), "{want}: {}", r.note);
        }
        assert!(!r.note.contains("dut0b ("), "{}", r.note);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["name"], "dut0");
        assert_eq!(json["ports"][1]["aggregator"], 2);
    }

    #[test]
    fn with_a_partner_both_ports_aggregate() {
        let r = record(&bond("52:54:00:aa:bb:cc", [1, 1]), &|_| None);
        assert!(r.lacp_partner);
        assert!(r.ports.iter().all(|p| p.active));
        assert!(
            r.note.contains("aggregator 1 of 2 ports (dut0a, dut0b)"),
            "{}",
            r.note
        );
        assert!(r.note.contains("no port counted"), "{}", r.note);
    }
}
