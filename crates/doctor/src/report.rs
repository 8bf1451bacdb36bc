//! The serialisable output of `doctor`: findings with their evidence, the
//! facts collected on the way, and what could not be checked. Pure data, no
//! I/O; the JSON shape here is part of linerate's results schema, so fields
//! are snake_case and only ever added, never renamed.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Everything `inspect` learned about one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// The directory the host was read from (`/` for the live host).
    pub root: String,
    /// Findings, most severe first, then by id and subject.
    pub findings: Vec<Finding>,
    /// What was collected, whether or not it led to a finding.
    pub facts: Facts,
    /// Checks that could not run, each with the reason (usually a missing file).
    pub skipped: Vec<String>,
}

/// One explained problem (or noteworthy setting) on the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// Stable machine id, e.g. `pcie_link_downgraded`; see the crate README.
    pub id: String,
    pub severity: Severity,
    /// One line saying what is wrong, naming the subject.
    pub title: String,
    /// The files and values the finding rests on.
    pub evidence: Vec<Evidence>,
    /// What it does to a loadtest result.
    pub impact: String,
    /// What to do about it.
    pub fix: String,
    /// What the finding is about, e.g. an interface name; `None` for the host.
    pub subject: Option<String>,
}

/// A file as it would be named on the host, and what it contained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Evidence {
    /// Absolute path on the host, e.g. `/sys/class/net/eth0/device/current_link_width`,
    /// independent of the root the report was read from.
    pub path: String,
    /// The value read, trimmed (or the relevant line of a larger file).
    pub value: String,
}

/// How much a finding matters for a loadtest.
///
/// Ordered by gravity (`Info < Warning < Critical`); `Report::findings` is
/// sorted with the greatest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; not expected to limit results on its own.
    Info,
    /// Likely to cost throughput or make results vary between runs.
    Warning,
    /// Caps throughput below what the test asks for.
    Critical,
}

impl Severity {
    /// Lowercase name as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// Facts collected from the host. Every field is optional or may be empty:
/// a missing file leaves it unset and adds a line to `Report::skipped`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Facts {
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Number of online CPUs (logical).
    pub cpu_count: Option<usize>,
    /// Online CPU ids from `/sys/devices/system/cpu/online`.
    pub online_cpus: Vec<usize>,
    /// `/sys/devices/system/cpu/smt/active`.
    pub smt_active: Option<bool>,
    /// CPU sets sharing one last-level (L3) cache, e.g. one per AMD CCD.
    pub l3_domains: Vec<Vec<usize>>,
    /// NUMA nodes with their CPUs.
    pub numa_nodes: Vec<NumaNode>,
    /// `aes` flag in `/proc/cpuinfo` (AES-NI on x86, AES on arm64).
    pub cpu_aes: Option<bool>,
    /// `hypervisor` flag in `/proc/cpuinfo`: running in a VM.
    pub cpu_hypervisor: Option<bool>,
    /// cpufreq governor name mapped to the CPUs using it.
    pub cpufreq_governors: BTreeMap<String, Vec<usize>>,
    /// `scaling_driver` of the first CPU that has one.
    pub cpufreq_driver: Option<String>,
    /// `CONFIG_IRQ_TIME_ACCOUNTING=y` in the kernel config, when readable.
    pub irq_time_accounting: Option<bool>,
    /// Where the kernel config was read from.
    pub kernel_config_source: Option<String>,
    /// Whether an `irqbalance` process was found.
    pub irqbalance_running: Option<bool>,
    /// The interfaces inspected (and physical ones found but not inspected).
    pub nics: Vec<NicFacts>,
    pub tcp: TcpFacts,
    /// NIC and CPU temperature sensors found under hwmon.
    pub temperatures: Vec<Temperature>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: Vec<usize>,
}

/// What was read about one network interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NicFacts {
    pub name: String,
    /// Whether the checks ran on it (named with `--nic`, or found up).
    pub inspected: bool,
    /// Kernel driver, from `device/uevent` `DRIVER=`.
    pub driver: Option<String>,
    /// PCI address, from `device/uevent` `PCI_SLOT_NAME=`.
    pub pci_address: Option<String>,
    /// Link speed in Mbit/s (`speed`), `None` when unknown or down.
    pub speed_mbps: Option<u64>,
    pub duplex: Option<String>,
    pub carrier: Option<bool>,
    pub operstate: Option<String>,
    pub mtu: Option<u32>,
    /// NUMA node of the device, `None` when the kernel says -1 (unknown).
    pub numa_node: Option<u32>,
    pub pcie: Option<PcieLink>,
    /// Number of `queues/rx-*` directories (RSS queues).
    pub rx_queues: Option<usize>,
    pub tx_queues: Option<usize>,
    /// Queue interrupts of this NIC with their affinity.
    pub irqs: Vec<IrqFacts>,
    /// Offload features from the `features` fixture convention (ethtool -k names).
    pub features: Option<BTreeMap<String, bool>>,
}

/// Trained and maximum PCIe link of a NIC, with the usable bandwidth after
/// line encoding (before TLP/DLLP protocol overhead).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PcieLink {
    pub current_gts: f64,
    pub current_width: u32,
    pub max_gts: f64,
    pub max_width: u32,
    pub current_usable_gbps: f64,
    pub max_usable_gbps: f64,
}

/// One interrupt of a NIC queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IrqFacts {
    pub irq: u32,
    /// Action name from `/proc/interrupts`, e.g. `mlx5_comp3@pci:0000:01:00.0`.
    pub name: String,
    /// `smp_affinity_list`.
    pub affinity: Vec<usize>,
    /// `effective_affinity_list`, where the kernel really delivers it.
    pub effective_affinity: Option<Vec<usize>>,
}

impl IrqFacts {
    /// CPUs the interrupt is delivered to: the effective set when known.
    pub fn cpus(&self) -> &[usize] {
        match &self.effective_affinity {
            Some(cpus) if !cpus.is_empty() => cpus,
            _ => &self.affinity,
        }
    }
}

/// TCP stack settings that bound throughput.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TcpFacts {
    pub congestion_control: Option<String>,
    pub available_congestion_control: Vec<String>,
    /// `tcp_available_ulp`; contains `tls` when kTLS is loaded.
    pub available_ulp: Vec<String>,
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
    /// `tcp_rmem` min, default, max.
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
}

/// One hwmon temperature sensor of a NIC or CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Temperature {
    /// hwmon `name`, e.g. `mlx5` or `k10temp`.
    pub sensor: String,
    /// `nic` or `cpu`.
    pub kind: String,
    /// The NIC it belongs to, when known.
    pub nic: Option<String>,
    /// `tempN_label` when present, else `tempN`.
    pub label: String,
    pub celsius: f64,
    pub crit_celsius: Option<f64>,
    pub max_celsius: Option<f64>,
}
