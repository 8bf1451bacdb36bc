//! An 802.3ad bond of two NICs (`lab --dut-vm --dut-bond`): made with
//! iproute2 like every other step; a kernel without the bonding driver is
//! refused with what to do instead.

use super::cmd::{check_ifname, run};
use anyhow::{bail, Result};

/// Makes `name` an 802.3ad bond (MII link monitoring every 100 ms) of
/// `ports`: each is taken down and enslaved, in order, so the bond takes
/// the first one's MAC. The bond stays down; its MTU, addresses and link
/// are the next steps'.
pub fn bond(name: &str, ports: &[String]) -> Result<()> {
    check_ifname(name)?;
    if ports.is_empty() {
        bail!("bond {name}: give it at least one port");
    }
    let made = run(
        "ip",
        &[
            "link", "add", name, "type", "bond", "mode", "802.3ad", "miimon", "100",
        ],
        None,
    );
    if let Err(e) = made {
        let text = e.to_string();
        if text.contains("Unknown device type") || text.contains("not supported") {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            bail!(
                "the DUT's 802.3ad bond needs the bonding driver, and this kernel ({}) has none \
                 (neither built in nor a module it can load): give the DUT VM a kernel that has \
                 it, e.g. --dut-kernel debian:bookworm (Debian's kernels do), or drop --dut-bond",
                release.trim()
            );
        }
        return Err(e);
    }
    for p in ports {
        check_ifname(p)?;
        run("ip", &["link", "set", "dev", p, "down"], None)?;
        run("ip", &["link", "set", "dev", p, "master", name], None)?;
    }
    Ok(())
}
