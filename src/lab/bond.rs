//! The VM DUT's gen side as an 802.3ad bond (`lab --dut-vm --dut-bond`).
//!
//! ```text
//!  gen ns            vmnet ns (this host)                  guest (qemu)
//!  gen0 ── veth ── hv0 ─ br0 ┬ tap0 ══ virtio-net ══ dut0a ┐
//!                            └ tap2 ══ virtio-net ══ dut0b ┴ dut0 (bond) ┐
//!  sink0 ─ veth ── hv1 ─ br1 ─ tap1 ══ virtio-net ══ dut1 ───────────────┘
//! ```
//!
//! The bond is named `dut0` and takes its first port's MAC (the namespace
//! DUT's), so the lab's addresses, routes and static neighbours are
//! unchanged. Both taps sit in the gen side's bridge, so whichever port
//! the bond transmits on reaches the tester, and the bridge learns the
//! bond's MAC there. No LACP partner answers on this side (a Linux bridge
//! does not forward LACPDUs): each port is an aggregator of its own and
//! the active one carries all the traffic; the test's `dut_bond` record
//! says so.

use super::{LabInterface, LabLink, Node, MAC_DUT0, MAC_DUT1};
use crate::proto::NetOp;
use crate::vm::Nic;

/// The second port's MAC (the guest renames its NIC by it).
const MAC_DUT0B: [u8; 6] = [0x02, 0x4c, 0x52, 0, 0, 0x07];

/// The bond's ports in the guest, in the order they are enslaved.
const PORTS: [&str; 2] = ["dut0a", "dut0b"];

/// The guest's NICs: gen side first, the bond's two ports, then the
/// sink side's.
pub(super) fn nics() -> Vec<Nic> {
    let nic = |tap: &str, mac, name: &str| Nic {
        tap: tap.into(),
        mac,
        guest_name: name.into(),
    };
    vec![
        nic("tap0", MAC_DUT0, PORTS[0]),
        nic("tap2", MAC_DUT0B, PORTS[1]),
        nic("tap1", MAC_DUT1, "dut1"),
    ]
}

/// A guest kernel without the bonding driver (`release`), refused at boot.
#[derive(Debug, thiserror::Error)]
#[error(
    "--dut-bond needs the bonding driver in the DUT VM's kernel, and {0} has none (no bonding \
     module, not built in): give --dut-kernel a kernel that has it, e.g. debian:bookworm, or \
     drop --dut-bond"
)]
pub struct NoBonding(String);

/// A guest kernel without the bonding driver is refused at boot, before
/// any step: the initramfs found no `bonding` module and it is not built in.
pub(super) fn check_modules(missing: &[String], release: &str) -> Result<(), NoBonding> {
    if missing.iter().any(|m| m == "bonding") {
        return Err(NoBonding(release.to_string()));
    }
    Ok(())
}

/// The bond step, first of the guest's: `dut0` made of both ports, before
/// `dut0`'s MTU, addresses and link; the ports are recorded beside it.
pub(super) fn guest_ops(d: &mut Node, mtu: u32) {
    d.ops.push(NetOp::Bond {
        name: "dut0".into(),
        ports: PORTS.iter().map(|p| p.to_string()).collect(),
    });
    for (name, mac) in PORTS.iter().zip([MAC_DUT0, MAC_DUT0B]) {
        d.ifaces.push(LabInterface {
            name: (*name).into(),
            mac: crate::netops::mac_string(&mac),
            mtu,
            addresses: vec![],
        });
    }
}

/// The lab's note on the bond.
pub(super) const NOTE: &str = "The DUT VM's gen side is dut0, an 802.3ad bond (miimon 100) of \
     dut0a (tap0) and dut0b (tap2), both taps in the gen side's bridge. No LACP partner answers \
     there (a bridge does not forward LACPDUs): each port is an aggregator of its own and the \
     active one carries all the traffic, no load sharing; each test's dut_bond says which.";

/// The tap of the bond's second port, in the gen side's bridge.
pub(super) const TAP: &str = "tap2";

/// The links of the gen side: one per port of the bond.
pub(super) fn links() -> Vec<LabLink> {
    [("vmnet/tap0", "dut/dut0a"), ("vmnet/tap2", "dut/dut0b")]
        .iter()
        .map(|(a, b)| LabLink {
            a: (*a).into(),
            b: (*b).into(),
            kind: "tap, virtio-net (802.3ad bond dut0)".into(),
            ports: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bond_comes_first_and_keeps_the_dut_mac() {
        let n = nics();
        assert_eq!(n.len(), 3);
        assert_eq!((n[0].tap.as_str(), n[0].mac), ("tap0", MAC_DUT0));
        assert_eq!(n[1].tap, TAP);
        assert!(n[1].mac != MAC_DUT0 && n[1].mac != MAC_DUT1);
        let mut d = Node::new();
        guest_ops(&mut d, 1500);
        assert!(matches!(&d.ops[0], NetOp::Bond { name, ports }
            if name == "dut0" && ports == &["dut0a", "dut0b"]));
        assert!(check_modules(&["bonding".into()], "6.1.0").is_err());
        assert!(check_modules(&["sch_netem".into()], "6.1.0").is_ok());
    }
}
