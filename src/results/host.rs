//! The facts about this host that every result carries: kernel, CPU
//! model and count, memory, and the sysctls that shape results.

use super::HostFacts;
use std::fs;

/// Facts about this host that every result carries.
pub fn host_facts() -> HostFacts {
    let read = |p: &str| {
        fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let memory_bytes = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0);
    let mut sysctls = std::collections::BTreeMap::new();
    for key in [
        "net.ipv4.tcp_congestion_control",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.core.netdev_max_backlog",
        "net.core.default_qdisc",
    ] {
        let v = read(&format!("/proc/sys/{}", key.replace('.', "/")));
        if !v.is_empty() {
            sysctls.insert(
                key.to_string(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            );
        }
    }
    HostFacts {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model,
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        memory_bytes,
        sysctls,
    }
}
