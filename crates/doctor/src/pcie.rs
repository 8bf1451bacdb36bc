//! PCIe link of each NIC: the trained link (`current_link_speed/width`)
//! against the device's capability (`max_link_speed/width`), and the usable
//! bandwidth of the trained link against the Ethernet link speed. A 100 GbE
//! card that trained at x4 in a slot wired for four lanes is the classic
//! "stuck at 25 Gbit/s" case.

use crate::parse::format_bps;
use crate::report::{Finding, PcieLink, Severity};
use crate::{Ctx, Evidence};

/// Usable bits per transfer after line encoding: 8b/10b up to 5 GT/s
/// (PCIe 1–2), 128b/130b from 8 GT/s (PCIe 3–5; PCIe 6's FLIT mode has a
/// similar efficiency, so it is treated alike). TLP/DLLP protocol overhead
/// comes on top and is not counted: these are upper bounds.
pub(crate) fn encoding_efficiency(gts: f64) -> f64 {
    if gts < 8.0 {
        8.0 / 10.0
    } else {
        128.0 / 130.0
    }
}

/// Usable Gbit/s of a link per direction.
pub(crate) fn usable_gbps(gts: f64, width: u32) -> f64 {
    gts * encoding_efficiency(gts) * f64::from(width)
}

/// Parses `8.0 GT/s PCIe`, `8 GT/s`, `2.5 GT/s`; `Unknown` and junk give None.
pub(crate) fn parse_link_speed(s: &str) -> Option<f64> {
    let mut tokens = s.split_whitespace();
    let value: f64 = tokens.next()?.parse().ok()?;
    if tokens.next()? != "GT/s" || !value.is_finite() || value <= 0.0 {
        return None;
    }
    Some(value)
}

/// Formats a Mbit/s link speed: `100 Gbit/s`, `2.5 Gbit/s`, `100 Mbit/s`.
pub(crate) fn format_link_mbps(mbps: u64) -> String {
    if mbps >= 1000 {
        format!("{} Gbit/s", mbps as f64 / 1000.0)
    } else {
        format!("{mbps} Mbit/s")
    }
}

/// Reads the PCIe link of every inspected NIC and reports downgrades.
pub(crate) fn check(ctx: &mut Ctx) {
    for i in 0..ctx.facts.nics.len() {
        if !ctx.facts.nics[i].inspected {
            continue;
        }
        let name = ctx.facts.nics[i].name.clone();
        let Some((link, evidence)) = read_link(ctx, &name) else {
            continue;
        };
        let speed_mbps = ctx.facts.nics[i].speed_mbps;
        let pci = ctx.facts.nics[i].pci_address.clone();
        ctx.facts.nics[i].pcie = Some(link.clone());
        judge(ctx, &name, pci.as_deref(), speed_mbps, &link, evidence);
    }
}

fn read_link(ctx: &mut Ctx, nic: &str) -> Option<(PcieLink, Vec<Evidence>)> {
    let dir = format!("sys/class/net/{nic}/device");
    let mut evidence = Vec::new();
    let mut values = Vec::new();
    for file in [
        "current_link_speed",
        "current_link_width",
        "max_link_speed",
        "max_link_width",
    ] {
        let rel = format!("{dir}/{file}");
        let Some((value, ev)) = ctx.read_ev(&rel) else {
            ctx.skip(format!(
                "pcie {nic}: {} not readable (not a PCIe device, or a VM)",
                crate::host::Host::host_path(&rel)
            ));
            return None;
        };
        values.push(value);
        evidence.push(ev);
    }
    let width = |s: &str| s.trim().parse::<u32>().ok().filter(|w| *w > 0);
    let parsed = (
        parse_link_speed(&values[0]),
        width(&values[1]),
        parse_link_speed(&values[2]),
        width(&values[3]),
    );
    let (Some(current_gts), Some(current_width), Some(max_gts), Some(max_width)) = parsed else {
        ctx.skip(format!(
            "pcie {nic}: link values not understood ({} x{}, max {} x{})",
            values[0], values[1], values[2], values[3]
        ));
        return None;
    };
    let link = PcieLink {
        current_gts,
        current_width,
        max_gts,
        max_width,
        current_usable_gbps: round1(usable_gbps(current_gts, current_width)),
        max_usable_gbps: round1(usable_gbps(max_gts, max_width)),
    };
    Some((link, evidence))
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn judge(
    ctx: &mut Ctx,
    nic: &str,
    pci: Option<&str>,
    speed_mbps: Option<u64>,
    link: &PcieLink,
    evidence: Vec<Evidence>,
) {
    let downgraded = link.current_gts < link.max_gts || link.current_width < link.max_width;
    let cap_bps = usable_gbps(link.current_gts, link.current_width) * 1e9;
    let link_bps = speed_mbps.map(|m| m as f64 * 1e6);
    let below_link = link_bps.is_some_and(|l| cap_bps < l);
    if !downgraded && !below_link {
        return;
    }
    let cap = format_bps(cap_bps);
    let arithmetic = format!(
        "PCIe {} GT/s × {} ≈ {cap} usable",
        link.current_gts, link.current_width
    );
    let versus_link = match (speed_mbps, below_link) {
        (Some(m), true) => format!(", below the {} link", format_link_mbps(m)),
        (Some(m), false) => format!(", still above the {} link", format_link_mbps(m)),
        (None, _) => String::new(),
    };
    let lspci = match pci {
        Some(addr) => format!("lspci -vv -s {addr}"),
        None => "lspci -vv".to_string(),
    };
    if downgraded {
        let impact = downgrade_impact(
            &format!("{arithmetic}{versus_link}"),
            nic,
            &cap,
            link,
            below_link,
        );
        ctx.add(Finding {
            id: "pcie_link_downgraded".into(),
            severity: if below_link {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{nic}: PCIe link trained at {} GT/s x{}, below its {} GT/s x{} capability",
                link.current_gts, link.current_width, link.max_gts, link.max_width
            ),
            evidence,
            impact,
            fix: format!(
                "Move the card to a slot wired for x{} at {} GT/s (many x16-sized slots are \
                 electrically x4 or share lanes with M.2 or other slots; see the board \
                 manual), reseat it, check the BIOS PCIe speed and bifurcation settings, and \
                 confirm with `{lspci}` (LnkSta vs LnkCap). A lower speed alone that recovers \
                 under load is power management, not a fault.",
                link.max_width, link.max_gts
            ),
            subject: Some(nic.to_string()),
        });
    } else {
        ctx.add(Finding {
            id: "pcie_bandwidth_below_link".into(),
            severity: Severity::Warning,
            title: format!(
                "{nic}: PCIe {} GT/s x{} cannot carry its Ethernet link rate",
                link.current_gts, link.current_width
            ),
            evidence,
            impact: format!(
                "{arithmetic}{versus_link}: the card itself is the bottleneck even at its \
                 full PCIe capability."
            ),
            fix: "Use a NIC with a wider or faster PCIe interface for this link rate, or \
                  expect at most the PCIe figure."
                .into(),
            subject: Some(nic.to_string()),
        });
    }
}

/// What a downgraded link means, after `lead` (its arithmetic against the
/// Ethernet link): a cap below the link rate, or less headroom.
fn downgrade_impact(lead: &str, nic: &str, cap: &str, link: &PcieLink, below_link: bool) -> String {
    if below_link {
        format!(
            "{lead}: traffic through {nic} cannot exceed ≈{cap} per \
             direction (less after PCIe protocol overhead), whatever the CPUs do. The \
             card's full link would give ≈{}.",
            format_bps(link.max_usable_gbps * 1e9)
        )
    } else {
        format!(
            "{lead}, so line rate is still reachable, but with less \
             headroom for descriptors and small packets than the ≈{} the card supports.",
            format_bps(link.max_usable_gbps * 1e9)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_per_generation() {
        assert!((usable_gbps(2.5, 1) - 2.0).abs() < 1e-9);
        assert!((usable_gbps(5.0, 8) - 32.0).abs() < 1e-9);
        assert_eq!(format_bps(usable_gbps(8.0, 4) * 1e9), "31.5 Gbit/s");
        assert_eq!(format_bps(usable_gbps(16.0, 16) * 1e9), "252.1 Gbit/s");
        assert_eq!(format_bps(usable_gbps(32.0, 16) * 1e9), "504.1 Gbit/s");
    }

    #[test]
    fn link_speed_strings() {
        assert_eq!(parse_link_speed("8.0 GT/s PCIe"), Some(8.0));
        assert_eq!(parse_link_speed("8 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe\n"), Some(2.5));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("8.0"), None);
        assert_eq!(parse_link_speed("-8 GT/s"), None);
        assert_eq!(parse_link_speed(""), None);
    }

    #[test]
    fn link_speed_formatting() {
        assert_eq!(format_link_mbps(100_000), "100 Gbit/s");
        assert_eq!(format_link_mbps(2_500), "2.5 Gbit/s");
        assert_eq!(format_link_mbps(100), "100 Mbit/s");
    }
}
