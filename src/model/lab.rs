//! The lab as results record it: nodes, their interfaces and addresses,
//! links (with any physical ports and the state they go back to), DUT mode
//! and how offloads and receive work were arranged. Built by `lab`, stored
//! by `results`, drawn by `report`.

use crate::proto::lab::LabPort;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabTopology {
    /// `back_to_back` or `dut`.
    pub kind: String,
    /// DUT mode: route, bridge, nat, fw, stick (absent back to back).
    pub dut_mode: Option<String>,
    /// Rules in the DUT's forward chain in fw mode.
    pub fw_rules: Option<u32>,
    /// The DUT's egress shaper towards the sink (`--dut-shape`), described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_shape: Option<String>,
    /// Tx and rx queues of each veth the lab created (`--queues`), each rx
    /// queue with a NAPI of its own; absent with physical ports, which
    /// keep the queues their driver gives them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// The DUT's DSCP rewrite (`--dut-remark`), described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_remark: Option<String>,
    /// The DUT's delay, jitter and reordering (`--dut-delay`,
    /// `--dut-jitter`, `--dut-reorder`: tc netem on both its egresses),
    /// described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_netem: Option<String>,
    pub nodes: Vec<LabNode>,
    pub links: Vec<LabLink>,
    /// How GSO/GRO were handled so that each datagram is one packet.
    pub offloads: String,
    /// Where receive work was steered (RPS), or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steering: Option<String>,
    /// Which CPUs ran the generator, the DUT and the tester's receive work
    /// (absent: not laid out, e.g. one CPU or physical ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<LabCores>,
    /// The router-on-a-stick DUT (`dut_mode: "stick"`): its trunk, VLANs
    /// and what its XDP program does, in a line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stick: Option<String>,
    /// What the suite left out on this lab and why (e.g. socket rows
    /// that cannot carry the stick DUT's VLAN tags), and what it cannot
    /// measure there (a user's router VM has no agent inside).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The VM the DUT runs in (`--dut-vm`): absent when the DUT is a
    /// namespace of the tester's own kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<LabVm>,
}

/// A VM linerate booted for a lab role: what it ran on, so that figures
/// measured through it are never read as a hardware DUT's.
#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabVm {
    /// The lab role it plays (`dut`).
    pub role: String,
    /// `kvm` or `tcg` (emulated: figures are far below hardware's).
    pub accel: String,
    /// Why that accelerator (asked for, the KVM probe's outcome).
    pub accel_reason: String,
    pub vcpus: u16,
    pub memory_mib: u32,
    /// The guest's NIC model (`virtio-net-pci`, on taps bridged into the
    /// lab).
    pub nic_model: String,
    /// `uname -r` of the guest kernel.
    pub kernel_release: String,
    /// Where the kernel came from (package and mirror, or a path).
    pub kernel_origin: String,
    /// Kernel modules loaded at boot, in order.
    pub modules: Vec<String>,
    /// Modules the tests may use that this kernel has neither built in
    /// nor as modules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_modules: Vec<String>,
    /// Seconds from starting qemu to the guest agent's answer.
    pub boot_s: f64,
    /// qemu's process id on this host and the host CPUs its threads
    /// (vCPUs included) are pinned to (empty: not pinned).
    pub qemu_pid: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_cpus: Vec<usize>,
    /// The user's own router (`--dut-image`, `--dut-initrd`): what was
    /// booted. No linerate agent runs in it, so the DUT's own counters
    /// and CPU are not read; its loss is what the sequence numbers and
    /// this host's taps show. Absent: linerate's agent configured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_router: Option<String>,
}

impl LabVm {
    /// One line for footers and reports: "virtual (TCG-emulated) — a VM
    /// with kernel K, N vCPU, M MiB, MODEL NICs on taps; booted in S s
    /// (why that accelerator)".
    pub fn describe(&self) -> String {
        format!(
            "{} — a VM with kernel {}, {} vCPU, {} MiB, {} NICs on taps; booted in {:.1} s ({})",
            self.kind(),
            self.kernel_release,
            self.vcpus,
            self.memory_mib,
            self.nic_model,
            self.boot_s,
            self.accel_reason
        )
    }

    /// "virtual (TCG-emulated)" or "virtual (KVM)": how the terminal, the
    /// report and the verdict name such a DUT.
    pub fn kind(&self) -> &'static str {
        if self.accel == "kvm" {
            "virtual (KVM)"
        } else {
            "virtual (TCG-emulated)"
        }
    }
}

/// The lab's core layout: threaded NAPI of each veth pinned by role.
#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabCores {
    /// CPUs the senders are pinned to.
    pub generator: Vec<usize>,
    /// CPUs of the DUT's receive and forwarding (its NAPI threads); empty
    /// back to back.
    pub dut: Vec<usize>,
    /// CPUs of the tester's receive work (the sink's counting, the
    /// generator's receive in the reverse direction); empty: NAPI
    /// unthreaded, in the softirq of the core that sends to it.
    pub tester_receive: Vec<usize>,
    /// Per interface: GRO on and threaded NAPI pinned, or why not.
    pub napi: Vec<LabNapi>,
    /// One line: which CPU does what.
    pub summary: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabNapi {
    /// gen, dut or sink.
    pub role: String,
    pub dev: String,
    /// Where its NAPI threads are pinned; empty: GRO on, NAPI unthreaded.
    pub cpus: Vec<usize>,
    /// Why the interface kept the kernel's defaults (absent: laid out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabNode {
    /// gen, dut or sink.
    pub role: String,
    /// Pid of the agent holding the namespace (`nsenter -t PID -n` enters it).
    pub pid: u32,
    pub interfaces: Vec<LabInterface>,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabInterface {
    pub name: String,
    pub mac: String,
    pub mtu: u32,
    pub addresses: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct LabLink {
    pub a: String,
    pub b: String,
    /// `veth`, or `physical` for a real port (`--gen-port`/`--sink-port`).
    pub kind: String,
    /// The physical ports on this link and the state each is given back in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<LabPort>,
}
