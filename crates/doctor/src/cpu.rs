//! CPU features and settings that change per-packet cost: the CPU model,
//! AES instructions (TLS cost), the cpufreq governor, and whether the kernel
//! accounts IRQ time (without it softirq work is billed to whichever task
//! was running, so per-process CPU figures are wrong). Topology is
//! `topology.rs`.

use std::collections::BTreeMap;
use std::io::Read;

use crate::parse::format_cpu_list;
use crate::report::{Evidence, Finding, Severity};
use crate::{evidence, Ctx};

/// Kernel configs are a few hundred kilobytes; the cap guards against a
/// corrupt or hostile `config.gz` expanding without bound.
const MAX_CONFIG_BYTES: u64 = 8 << 20;

pub(crate) fn check(ctx: &mut Ctx) {
    check_cpuinfo(ctx);
    check_governor(ctx);
    check_kernel_config(ctx);
}

/// What `/proc/cpuinfo` says about the first processor (all are alike).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct CpuInfo {
    pub(crate) model: Option<String>,
    /// The `flags` (x86) or `Features` (arm64) line, when present.
    pub(crate) flags: Option<Vec<String>>,
}

pub(crate) fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            if line.trim().is_empty() && info.flags.is_some() {
                break; // end of the first processor block
            }
            continue;
        };
        match key.trim() {
            "model name" if info.model.is_none() => info.model = Some(value.trim().to_string()),
            "flags" | "Features" if info.flags.is_none() => {
                info.flags = Some(value.split_whitespace().map(str::to_string).collect());
            }
            _ => {}
        }
    }
    info
}

fn check_cpuinfo(ctx: &mut Ctx) {
    let rel = "proc/cpuinfo";
    let Ok(text) = ctx.host.read_string(rel) else {
        ctx.skip_missing("cpu model and aes", rel);
        return;
    };
    let info = parse_cpuinfo(&text);
    ctx.facts.cpu_model = info.model;
    let Some(flags) = info.flags else {
        ctx.skip("aes: no flags/Features line in /proc/cpuinfo");
        return;
    };
    let has = |f: &str| flags.iter().any(|x| x == f);
    let aes = has("aes");
    let hypervisor = has("hypervisor");
    ctx.facts.cpu_aes = Some(aes);
    ctx.facts.cpu_hypervisor = Some(hypervisor);
    if aes {
        return;
    }
    let mut ev = vec![evidence(rel, "flags: no `aes`")];
    let (title, fix) = if hypervisor {
        ev.push(evidence(rel, "flags: hypervisor"));
        (
            "AES-NI is missing: the hypervisor hides it from this VM",
            "Expose the host CPU's features to the guest (libvirt/QEMU \
             <cpu mode='host-passthrough'/> or -cpu host, Proxmox CPU type `host`, or a \
             named model that includes aes).",
        )
    } else {
        (
            "the CPU has no AES instructions (AES-NI)",
            "Run TLS tests on a CPU with AES-NI, or prefer ChaCha20-Poly1305 cipher suites, \
             which are fast without it.",
        )
    };
    ctx.add(Finding {
        id: "aes_ni_missing".into(),
        severity: Severity::Warning,
        title: title.into(),
        evidence: ev,
        impact: "AES-GCM falls back to table-based software, several times slower per byte: \
                 HTTPS and other TLS throughput becomes CPU-bound far below the link rate."
            .into(),
        fix: fix.into(),
        subject: None,
    });
}

/// Reads the governor of the test cores (or all online cores). Only
/// `powersave` under a driver that really pins the lowest frequency is a
/// warning: intel_pstate and amd-pstate call their dynamic mode `powersave`.
fn check_governor(ctx: &mut Ctx) {
    let cpus = ctx
        .opts
        .cpus
        .clone()
        .unwrap_or_else(|| ctx.facts.online_cpus.clone());
    let mut governors: BTreeMap<String, (Vec<usize>, Evidence)> = BTreeMap::new();
    let mut driver_ev = None;
    for cpu in cpus {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        if let Some((gov, ev)) = ctx.read_ev(&format!("{dir}/scaling_governor")) {
            governors.entry(gov).or_insert((Vec::new(), ev)).0.push(cpu);
        }
        if driver_ev.is_none() {
            driver_ev = ctx.read_ev(&format!("{dir}/scaling_driver"));
        }
    }
    if governors.is_empty() {
        ctx.skip("cpufreq governor: no cpufreq/scaling_governor readable (no cpufreq, or a VM)");
        return;
    }
    let driver = driver_ev.as_ref().map(|(d, _)| d.clone());
    ctx.facts.cpufreq_driver = driver.clone();
    ctx.facts.cpufreq_governors = governors
        .iter()
        .map(|(g, (cpus, _))| (g.clone(), cpus.clone()))
        .collect();
    let pstate = driver.as_deref().is_some_and(|d| d.contains("pstate"));
    for (gov, (cpus, ev)) in governors {
        if gov == "performance" {
            continue;
        }
        let pinned_low = gov == "powersave" && !pstate;
        let mut evidence = vec![ev];
        evidence.extend(driver_ev.as_ref().map(|(_, e)| e.clone()));
        ctx.add(Finding {
            id: "cpufreq_governor_not_performance".into(),
            severity: if pinned_low {
                Severity::Warning
            } else {
                Severity::Info
            },
            title: format!(
                "CPUs {} use the `{gov}` cpufreq governor",
                format_cpu_list(&cpus)
            ),
            evidence,
            impact: if pinned_low {
                "This governor holds the lowest frequency: per-core packet rates and \
                 throughput drop in proportion."
                    .into()
            } else {
                "Frequency follows load, so short tests and bursty load run partly at low \
                 clocks; results vary more between runs."
                    .into()
            },
            fix: "Use the performance governor for the test: cpupower frequency-set -g \
                  performance (or write `performance` to cpufreq/scaling_governor)."
                .into(),
            subject: None,
        });
    }
}

fn check_kernel_config(ctx: &mut Ctx) {
    let Some((rel, config)) = read_kernel_config(ctx) else {
        ctx.skip(
            "irq time accounting: kernel config not readable (/proc/config.gz, \
             /boot/config-RELEASE)",
        );
        return;
    };
    ctx.facts.kernel_config_source = Some(crate::host::Host::host_path(&rel));
    let line = config
        .lines()
        .find(|l| {
            l.starts_with("CONFIG_IRQ_TIME_ACCOUNTING=")
                || l.starts_with("# CONFIG_IRQ_TIME_ACCOUNTING ")
        })
        .map(str::to_string);
    let enabled = line.as_deref() == Some("CONFIG_IRQ_TIME_ACCOUNTING=y");
    ctx.facts.irq_time_accounting = Some(enabled);
    if enabled {
        return;
    }
    ctx.add(Finding {
        id: "irq_time_accounting_disabled".into(),
        severity: Severity::Info,
        title: "the kernel does not account IRQ time (CONFIG_IRQ_TIME_ACCOUNTING)".into(),
        evidence: vec![evidence(
            &rel,
            line.unwrap_or_else(|| "CONFIG_IRQ_TIME_ACCOUNTING absent".into()),
        )],
        impact: "Softirq packet processing is billed to whatever task was running: the \
                 receiver's CPU% includes other work and the softirq column understates it, \
                 so CPU-per-packet figures are approximate."
            .into(),
        fix: "Treat per-process CPU figures as approximate, or use a kernel built with \
              CONFIG_IRQ_TIME_ACCOUNTING=y."
            .into(),
        subject: None,
    });
}

/// `/proc/config.gz` (gzip) first, then `/boot/config-<osrelease>`.
fn read_kernel_config(ctx: &mut Ctx) -> Option<(String, String)> {
    let release = ctx.host.read_trimmed("proc/sys/kernel/osrelease");
    ctx.facts.kernel_release = release.clone();
    if let Ok(gz) = ctx.host.read_bytes("proc/config.gz") {
        let mut text = String::new();
        let decoder = flate2::read::GzDecoder::new(gz.as_slice());
        if decoder
            .take(MAX_CONFIG_BYTES)
            .read_to_string(&mut text)
            .is_ok()
        {
            return Some(("proc/config.gz".into(), text));
        }
        ctx.skip("kernel config: /proc/config.gz is not valid gzip text");
    }
    // A release with a slash would name a path outside /boot.
    let release = release.filter(|r| !r.contains('/') && !r.is_empty())?;
    let rel = format!("boot/config-{release}");
    let text = ctx.host.read_string(&rel).ok()?;
    Some((rel, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_x86_and_arm() {
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC 7543\nflags\t\t: fpu aes hypervisor\n\n\
                   processor\t: 1\nflags\t\t: fpu\n";
        let info = parse_cpuinfo(x86);
        assert_eq!(info.model.as_deref(), Some("AMD EPYC 7543"));
        assert_eq!(
            info.flags.unwrap(),
            ["fpu", "aes", "hypervisor"].map(String::from)
        );
        let arm = "processor\t: 0\nFeatures\t: fp asimd aes pmull\n";
        assert!(parse_cpuinfo(arm)
            .flags
            .unwrap()
            .contains(&"aes".to_string()));
        assert_eq!(parse_cpuinfo("garbage\0\n:::\n"), CpuInfo::default());
    }
}
