//! Interrupt placement: finds each NIC's queue IRQs in `/proc/interrupts`,
//! reads their affinity from `/proc/irq/N/`, and compares it with the L3
//! domains and the test's cores. Also detects irqbalance, which moves IRQs
//! while a test runs.
//!
//! Why it matters: single-core receive results land in distinct buckets
//! (users measured 65 / 99 / 83 Gbit/s) depending on whether the queue's IRQ
//! runs on the receiving core, another core of the same L3 domain, or a core
//! of another L3 domain (CCD).

use std::collections::BTreeSet;

use crate::parse::{format_cpu_list, parse_cpu_list};
use crate::report::{Evidence, Finding, IrqFacts, Severity};
use crate::Ctx;

/// One `/proc/interrupts` line with a numeric IRQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IrqLine {
    pub(crate) irq: u32,
    /// Action names (several when an IRQ is shared), e.g. `eth0-TxRx-3`.
    pub(crate) actions: Vec<String>,
}

/// Parses `/proc/interrupts`. The header gives the number of CPU columns;
/// after the counts come the chip, the hardware IRQ with its trigger
/// (`1-edge`, or `IR-PCI-MSI-edge` on old kernels) and the action names.
pub(crate) fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let ncpus = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|t| t.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    let mut out = Vec::new();
    for line in lines {
        let mut tokens = line.split_whitespace().peekable();
        let Some(irq) = tokens
            .next()
            .and_then(|t| t.strip_suffix(':'))
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        for _ in 0..ncpus {
            if tokens.next_if(|t| t.parse::<u64>().is_ok()).is_none() {
                break;
            }
        }
        let rest: Vec<&str> = tokens.collect();
        // The names follow the last trigger token; chip names such as
        // `IR-PCI-MSIX-0000:01:00.0` carry the PCI address and must not match.
        let start = rest
            .iter()
            .rposition(|t| is_trigger(t))
            .map_or(rest.len().saturating_sub(1), |i| i + 1);
        let names = rest.get(start..).unwrap_or_default().join(" ");
        let actions = names
            .split(',')
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        out.push(IrqLine { irq, actions });
    }
    out
}

fn is_trigger(token: &str) -> bool {
    ["edge", "level", "fasteoi"]
        .iter()
        .any(|t| token == *t || token.ends_with(&format!("-{t}")))
}

/// Whether `needle` occurs in `hay` as a whole token (not inside a longer
/// name: `eth1` must not match `veth1` or `eth10`).
pub(crate) fn contains_token(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let bytes = hay.as_bytes();
    hay.match_indices(needle).any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i + needle.len()).copied();
        !before.is_some_and(|b| b.is_ascii_alphanumeric())
            && !after.is_some_and(|b| b.is_ascii_alphanumeric())
    })
}

/// Whether an action is a data queue of the NIC rather than its control,
/// async-event or link interrupt (mlx5_async, i40e ...:misc, ixgbe's plain
/// `eth0`, virtio's `virtio2-config`), which carry no packets and would
/// only blur the placement check. `alias` is another name the driver uses
/// for the NIC's IRQs: its PCI address (mlx5) or virtio device (virtio_net:
/// `virtio2-input.0`).
fn is_queue_action(action: &str, nic: &str, alias: &[&str]) -> bool {
    let ours = contains_token(action, nic) || alias.iter().any(|p| contains_token(action, p));
    let control = ["async", "config", "misc", "cmd", "ctrl", "lsc"]
        .iter()
        .any(|w| action.contains(w));
    ours && !control && action != nic
}

/// Runs the IRQ checks for every inspected NIC and the irqbalance check.
pub(crate) fn check(ctx: &mut Ctx) {
    check_irqbalance(ctx);
    let Some(text) = ctx.host.read_string("proc/interrupts").ok() else {
        ctx.skip_missing("irq placement", "proc/interrupts");
        return;
    };
    let lines = parse_interrupts(&text);
    for i in 0..ctx.facts.nics.len() {
        if !ctx.facts.nics[i].inspected {
            continue;
        }
        let nic = ctx.facts.nics[i].name.clone();
        let pci = ctx.facts.nics[i].pci_address.clone();
        let virtio = virtio_device(ctx, &nic);
        let alias: Vec<&str> = pci
            .iter()
            .chain(virtio.iter())
            .map(String::as_str)
            .collect();
        let mut irqs = Vec::new();
        let mut ev = Vec::new();
        for line in &lines {
            let Some(action) = line
                .actions
                .iter()
                .find(|a| is_queue_action(a, &nic, &alias))
            else {
                continue;
            };
            if let Some((facts, e)) = read_affinity(ctx, line.irq, action) {
                irqs.push(facts);
                ev.push(e);
            }
        }
        if irqs.is_empty() {
            // virtio-net names its IRQs after the virtio device (virtio2-input.0),
            // found under /sys/bus/virtio/devices (a capture without it cannot).
            let virtio_net = ctx.facts.nics[i].driver.as_deref() == Some("virtio_net");
            ctx.skip(format!(
                "irq placement {nic}: no queue IRQs named after {nic}{} in /proc/interrupts{}",
                alias.iter().map(|p| format!(" or {p}")).collect::<String>(),
                if virtio_net && virtio.is_none() {
                    " (virtio-net names them after its virtio device, and no \
                     /sys/bus/virtio/devices/virtioN/net/ names this NIC)"
                } else {
                    ""
                }
            ));
            continue;
        }
        check_spread(ctx, &nic, &irqs, &ev);
        check_single_core(ctx, &nic, &irqs, &ev);
        check_test_cpus(ctx, &nic, &irqs, &ev);
        ctx.facts.nics[i].irqs = irqs;
    }
}

/// The virtio device (`virtio2`) whose `net/` directory holds `nic`: the
/// name virtio_net gives the NIC's IRQs. Directory listings only, so a
/// capture and a fixture tree answer as the live host does.
fn virtio_device(ctx: &Ctx, nic: &str) -> Option<String> {
    const BUS: &str = "sys/bus/virtio/devices";
    ctx.host
        .list_dirs(BUS, |d| d.starts_with("virtio"))
        .into_iter()
        .find(|d| {
            !ctx.host
                .list_dirs(&format!("{BUS}/{d}/net"), |n| n == nic)
                .is_empty()
        })
}

fn read_affinity(ctx: &mut Ctx, irq: u32, action: &str) -> Option<(IrqFacts, Evidence)> {
    let dir = format!("proc/irq/{irq}");
    let Some((list, list_ev)) = ctx.read_ev(&format!("{dir}/smp_affinity_list")) else {
        ctx.skip_missing(&format!("irq {irq}"), &format!("{dir}/smp_affinity_list"));
        return None;
    };
    let affinity = parse_cpu_list(&list).ok()?;
    // The effective list is where the kernel really delivers (one CPU on
    // x86), so it is the better evidence when the kernel exposes it.
    let effective = ctx.read_ev(&format!("{dir}/effective_affinity_list"));
    let (effective_affinity, ev) = match effective {
        Some((v, e)) => match parse_cpu_list(&v) {
            Ok(cpus) if !cpus.is_empty() => (Some(cpus), e),
            _ => (None, list_ev),
        },
        None => (None, list_ev),
    };
    let facts = IrqFacts {
        irq,
        name: action.to_string(),
        affinity,
        effective_affinity,
    };
    Some((facts, ev))
}

/// Queue IRQs over several L3 domains make single-flow results depend on
/// which queue the flow hashes to.
fn check_spread(ctx: &mut Ctx, nic: &str, irqs: &[IrqFacts], ev: &[Evidence]) {
    if ctx.topo.l3_of.is_empty() {
        ctx.skip(format!("irq l3 spread {nic}: L3 domains unknown"));
        return;
    }
    let domains: BTreeSet<usize> = irqs
        .iter()
        .flat_map(|i| ctx.topo.l3_domains_of(i.cpus()))
        .collect();
    if domains.len() < 2 {
        return;
    }
    let described: Vec<String> = domains
        .iter()
        .filter_map(|d| ctx.facts.l3_domains.get(*d))
        .map(|cpus| format_cpu_list(cpus))
        .collect();
    // The domains first: with many queues the IRQ list is long.
    let mut evidence: Vec<Evidence> = domains
        .iter()
        .filter_map(|d| ctx.topo.l3_evidence.get(*d).cloned())
        .collect();
    evidence.extend_from_slice(ev);
    ctx.add(Finding {
        id: "irq_spread_across_l3".into(),
        severity: Severity::Warning,
        title: format!(
            "{nic}: queue IRQs are spread over {} L3 domains (CPUs {})",
            domains.len(),
            described.join(" | ")
        ),
        evidence,
        impact: "A flow is received on whichever queue RSS hashes it to, so its cost depends \
                 on where that IRQ runs relative to the receiving thread: the same core \
                 (slowest), another core of the same L3 domain (fastest), or another L3 \
                 domain/CCD (cache lines cross the fabric). Users measured 65 / 99 / 83 \
                 Gbit/s single-core buckets for these cases; results vary run to run."
            .into(),
        fix: format!(
            "For single-flow tests, stop irqbalance and pin {nic}'s queue IRQs to cores of \
             one L3 domain (echo CPUS > /proc/irq/N/smp_affinity_list), then run the test \
             threads on other cores of that domain (--cpus). Multi-flow tests may keep the \
             spread."
        ),
        subject: Some(nic.to_string()),
    });
}

/// Every queue IRQ of a multi-queue NIC on one core: RSS spreads flows over
/// queues, but all their receive processing lands on that core, which
/// saturates first (linerate's bottleneck verdict then shows it full of
/// softirq).
fn check_single_core(ctx: &mut Ctx, nic: &str, irqs: &[IrqFacts], ev: &[Evidence]) {
    if irqs.len() < 2 || ctx.facts.online_cpus.len() == 1 {
        return;
    }
    let [cpu] = irqs[0].cpus() else { return };
    if !irqs.iter().all(|i| i.cpus() == [*cpu]) {
        return;
    }
    ctx.add(Finding {
        id: "irq_single_core".into(),
        severity: Severity::Warning,
        title: format!(
            "{nic}: all {} queue IRQs are delivered to CPU {cpu}",
            irqs.len()
        ),
        evidence: ev.to_vec(),
        impact: format!(
            "Receive processing (NET_RX softirq) of every queue runs on CPU {cpu}, so \
             multi-flow tests stop scaling at what one core forwards, and a test thread \
             on that core competes with it; results fall into single-core buckets."
        ),
        fix: format!(
            "Spread {nic}'s queue IRQs over cores (start irqbalance, or echo a CPU to each \
             /proc/irq/N/smp_affinity_list), and keep the test threads (--cpus) off the \
             cores that take them."
        ),
        subject: Some(nic.to_string()),
    });
}

/// With `--cpus`: IRQs on the test's own cores compete with the receiver,
/// and IRQs only outside the test's L3 domains pull every packet across it.
fn check_test_cpus(ctx: &mut Ctx, nic: &str, irqs: &[IrqFacts], ev: &[Evidence]) {
    let Some(test_cpus) = ctx.opts.cpus.clone() else {
        return;
    };
    let list = format_cpu_list(&test_cpus);
    let on_test: Vec<usize> = irqs
        .iter()
        .enumerate()
        .filter(|(_, i)| i.cpus().iter().any(|c| test_cpus.contains(c)))
        .map(|(n, _)| n)
        .collect();
    let test_domains = ctx.topo.l3_domains_of(&test_cpus);
    let target = irq_target(ctx, &test_cpus, &test_domains);
    if !on_test.is_empty() {
        let numbers: Vec<String> = on_test.iter().map(|&n| irqs[n].irq.to_string()).collect();
        ctx.add(Finding {
            id: "irq_on_test_cpu".into(),
            severity: Severity::Warning,
            title: format!(
                "{nic}: {} {} {} on the test {} {list}",
                if numbers.len() == 1 { "IRQ" } else { "IRQs" },
                numbers.join(", "),
                if numbers.len() == 1 { "runs" } else { "run" },
                if test_cpus.len() == 1 {
                    "core"
                } else {
                    "cores"
                }
            ),
            evidence: on_test.iter().map(|&n| ev[n].clone()).collect(),
            impact: "Softirq receive processing and the test thread share one core; in users' \
                     measurements this is the slowest placement (65 vs 99 Gbit/s single-core \
                     with the IRQ on a neighbour core of the same L3)."
                .into(),
            fix: format!(
                "Move these IRQs to {target}: echo CPU > /proc/irq/N/smp_affinity_list with \
                 irqbalance stopped, or run the test on cores without {nic}'s IRQs."
            ),
            subject: Some(nic.to_string()),
        });
    }
    if test_domains.is_empty() {
        return;
    }
    let all_remote = irqs
        .iter()
        .all(|i| ctx.topo.l3_domains_of(i.cpus()).is_disjoint(&test_domains));
    if all_remote {
        let irq_cpus: BTreeSet<usize> = irqs.iter().flat_map(|i| i.cpus().to_vec()).collect();
        let irq_cpus: Vec<usize> = irq_cpus.into_iter().collect();
        // The test's own L3 domain first, then where the IRQs are.
        let mut evidence: Vec<Evidence> = test_domains
            .iter()
            .filter_map(|d| ctx.topo.l3_evidence.get(*d).cloned())
            .collect();
        evidence.extend_from_slice(ev);
        ctx.add(Finding {
            id: "irq_not_in_test_l3".into(),
            severity: Severity::Warning,
            title: format!(
                "{nic}: no queue IRQ runs in the L3 domain of the test cores ({list}); IRQs on \
                 CPUs {}",
                format_cpu_list(&irq_cpus)
            ),
            evidence,
            impact: "Every received packet is processed in one L3 domain and consumed in \
                     another; the data crosses the fabric between CCDs or sockets (the middle, \
                     83 Gbit/s bucket in users' single-core measurements)."
                .into(),
            fix: format!(
                "Pin {nic}'s queue IRQs to {target} with irqbalance stopped, or run the test \
                 on cores of the L3 domain the IRQs are in."
            ),
            subject: Some(nic.to_string()),
        });
    }
}

/// Where the IRQs serving the test belong: the test's L3 domains, minus the
/// test cores and their hyperthread siblings (the 99 Gbit/s placement).
fn irq_target(ctx: &Ctx, test_cpus: &[usize], test_domains: &BTreeSet<usize>) -> String {
    let busy: BTreeSet<usize> = test_cpus
        .iter()
        .flat_map(|c| {
            ctx.topo
                .siblings
                .get(c)
                .map(|(s, _)| s.clone())
                .unwrap_or_else(|| vec![*c])
        })
        .collect();
    let candidates: Vec<usize> = ctx
        .topo
        .l3_of
        .iter()
        .filter(|(c, d)| test_domains.contains(d) && !busy.contains(c))
        .map(|(c, _)| *c)
        .collect();
    if candidates.is_empty() {
        "other cores sharing L3 with the test cores".to_string()
    } else {
        format!(
            "cores {} (same L3 as the test, not test cores)",
            format_cpu_list(&candidates)
        )
    }
}

/// irqbalance rewrites IRQ affinities every few seconds, so placement seen
/// now is not placement during the test.
fn check_irqbalance(ctx: &mut Ctx) {
    let pids = ctx
        .host
        .list_dirs("proc", |n| n.bytes().all(|b| b.is_ascii_digit()));
    if pids.is_empty() {
        ctx.facts.irqbalance_running = None;
        ctx.skip("irqbalance: no process directories under /proc");
        return;
    }
    let mut found = Vec::new();
    for pid in pids {
        let rel = format!("proc/{pid}/comm");
        if let Some((comm, ev)) = ctx.read_ev(&rel) {
            if comm == "irqbalance" {
                found.push(ev);
            }
        }
    }
    ctx.facts.irqbalance_running = Some(!found.is_empty());
    if found.is_empty() {
        return;
    }
    ctx.add(Finding {
        id: "irqbalance_running".into(),
        severity: Severity::Warning,
        title: "irqbalance is running".into(),
        evidence: found,
        impact: "It moves NIC IRQs between cores every few seconds, so IRQ placement (and \
                 with it single-flow throughput) can change in the middle of a test; the \
                 placement doctor reports now may not hold."
            .into(),
        fix: "Stop it for the test (systemctl stop irqbalance) and pin IRQs explicitly, or \
              keep the test cores out of its reach (IRQBALANCE_BANNED_CPULIST in \
              /etc/default/irqbalance)."
            .into(),
        subject: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       CPU2
  24:          1          0          0  IO-APIC   5-edge      ACPI:Ged
 120:          0       1000          0  IR-PCI-MSIX-0000:01:00.0    0-edge      mlx5_async0@pci:0000:01:00.0
 121:        500          0          0  IR-PCI-MSIX-0000:01:00.0    1-edge      mlx5_comp0@pci:0000:01:00.0
 130:          5          0          0  IR-PCI-MSI-edge      eth1-TxRx-0
 131:          5          0          0  IR-PCI-MSI-edge      eth1
  17:          5          0          0  IO-APIC  17-fasteoi   ehci_hcd:usb1, veth1-TxRx-0
 NMI:          0          0          0   Non-maskable interrupts
 ERR:          0
";

    #[test]
    fn parses_actions_after_the_trigger() {
        let lines = parse_interrupts(INTERRUPTS);
        assert_eq!(lines.len(), 6);
        assert_eq!(lines[1].irq, 120);
        assert_eq!(lines[1].actions, ["mlx5_async0@pci:0000:01:00.0"]);
        assert_eq!(lines[3].actions, ["eth1-TxRx-0"]);
        assert_eq!(lines[5].actions, ["ehci_hcd:usb1", "veth1-TxRx-0"]);
    }

    #[test]
    fn queue_actions_match_by_name_or_pci_address() {
        let pci = &["0000:01:00.0"];
        assert!(is_queue_action("mlx5_comp0@pci:0000:01:00.0", "eth0", pci));
        assert!(!is_queue_action(
            "mlx5_async0@pci:0000:01:00.0",
            "eth0",
            pci
        ));
        assert!(!is_queue_action("mlx5_comp0@pci:0000:01:00.1", "eth0", pci));
        assert!(is_queue_action("eth1-TxRx-0", "eth1", &[]));
        assert!(!is_queue_action("eth1", "eth1", &[]));
        assert!(!is_queue_action("veth1-TxRx-0", "eth1", &[]));
        assert!(!is_queue_action("eth10-TxRx-0", "eth1", &[]));
        assert!(is_queue_action("ice-ens1f0-TxRx-0", "ens1f0", &[]));
        // virtio_net: queues named after the virtio device, not the NIC.
        let virtio = &["virtio2"];
        assert!(is_queue_action("virtio2-input.0", "eth0", virtio));
        assert!(is_queue_action("virtio2-output.3", "eth0", virtio));
        assert!(!is_queue_action("virtio2-config", "eth0", virtio));
        assert!(!is_queue_action("virtio21-input.0", "eth0", virtio));
        assert!(!is_queue_action("virtio2-input.0", "eth0", &[]));
    }

    #[test]
    fn garbage_interrupts_do_not_panic() {
        for text in ["", "\n\n", "CPU0\n:\n1:\n 2: x y\n", "1: 2 3 4-edge"] {
            let _ = parse_interrupts(text);
        }
    }
}
