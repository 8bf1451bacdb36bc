//! Where a test's CPU time went: the bottleneck verdict with every core
//! of every host and the guests' vCPUs, and each endpoint's CPU use.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a test stopped where it did: every core of every host its agents ran
/// on, and a verdict naming the first saturated core with its evidence.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct Bottleneck {
    /// One sentence, e.g. "CPU0 100 %: 58 % softirq (NET_RX 1.2 M/s), 42 %
    /// system; gen's lr-udp-send thread ran there (97 %): the tester's
    /// sender core is the limit".
    pub verdict: String,
    pub kind: BottleneckKind,
    /// The core the verdict names (a saturated one, else the busiest).
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub cpu: Option<u32>,
    /// Per host and core, in % of that core over the test.
    pub host_cpus: Vec<CpuLoad>,
    /// The vCPUs of the test's guests (VM agents), as this host's qemu
    /// threads used them: under TCG the guest's own /proc/stat is not the
    /// truth. Absent: no agent of the test ran in a VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpus: Vec<VcpuLoad>,
}

/// One vCPU of a guest over a test: its qemu thread on the host that ran
/// qemu, in % of one host core.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct VcpuLoad {
    /// The guest agent's role (`dut`, a plan's host name).
    pub role: String,
    /// Whether that guest is the test's DUT.
    pub dut: bool,
    /// The guest's host name, as `host_cpus` names its cores.
    pub host: String,
    /// The vCPU's number (the guest's CPU of that number).
    pub vcpu: u32,
    /// qemu's thread (`CPU 0/TCG`, `CPU 0/KVM`) and its id on the host.
    pub thread: String,
    pub tid: u32,
    /// The host CPU the thread last ran on.
    pub host_cpu: u32,
    /// % of one host core (user + system), 0..=100.
    pub cpu_pct: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BottleneckKind {
    /// A core running a linerate sender thread is full.
    TesterSender,
    /// A core running a linerate receiver thread is full, or the tester
    /// dropped frames before counting them.
    TesterReceiver,
    /// The frames were lost at the DUT while the senders offered more: the
    /// answer measures the DUT.
    Dut,
    /// A core full of softirq (packet processing) without linerate threads:
    /// the DUT's forwarding in a namespace lab, or interrupt placement.
    Softirq,
    /// A core full of something else (another process, the kernel).
    OtherWork,
    /// No core was full: the limit is the DUT or the link.
    #[default]
    NoneSaturated,
    /// A paced test offered what its rate asked for (within counting
    /// noise) and lost nothing beyond noise: `--rate` set the load.
    RateLimited,
    /// Frames were offered and none arrived: a wrong target or a path
    /// that drops everything, not a core.
    NothingArrived,
    /// Most frames lost were lost while a link to the DUT was down (the
    /// intervals' `links_down`): the link, not a core, limited the test.
    LinkDown,
}

/// One core of one host over a test, in % of that core.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct CpuLoad {
    /// The host's name (agents in one host's namespaces share its cores).
    pub host: String,
    pub cpu: u32,
    /// Everything but idle and iowait.
    pub busy_pct: f64,
    /// User time including nice.
    pub user_pct: f64,
    pub system_pct: f64,
    pub softirq_pct: f64,
    pub irq_pct: f64,
    /// Busy time not in linerate's threads, softirq or IRQs: other
    /// processes (or kernel threads) competing for the core.
    #[serde(default)]
    pub other_pct: f64,
    /// NET_RX / NET_TX softirqs handled on this core per second.
    pub net_rx_per_s: f64,
    pub net_tx_per_s: f64,
    /// linerate's threads whose last CPU was this core, busiest first.
    pub threads: Vec<ThreadLoad>,
}

/// One linerate thread's use of the core it ran on.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct ThreadLoad {
    /// The agent's role (`gen`, `sink`, ...).
    pub role: String,
    /// The thread's name (`lr-udp-send`, `lr-tcp-recv`, ...).
    pub name: String,
    /// % of one core (user + system).
    pub cpu_pct: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct CpuUse {
    pub role: String,
    /// User + system time of the agent process in % of all its host's
    /// CPUs (0-100 %: 100 % is every CPU busy).
    pub process_pct: f64,
    /// % of all the host's CPUs spent in softirq system-wide (packet
    /// processing, including the DUT's forwarding, which runs there on veth).
    pub softirq_pct: f64,
    /// The host's CPUs the shares are of (cores used = pct × cpus / 100).
    #[serde(default)]
    pub cpus: u32,
}
