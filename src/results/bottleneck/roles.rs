//! Which core plays which role in a linerate lab ([`CoreRoles`]), from
//! the lab's record or from its agents' snapshots, and how a verdict
//! names a core by its role.

use super::*;

/// Which of a linerate lab's work runs on which core, as the lab laid it
/// out (`lab/cores.rs`): the generator's senders, the tester's receive
/// (its NAPI threads, its receiver threads) and the DUT's receive and
/// forwarding. With it a verdict names a core with its role ("CPU0
/// (tester: generator and gen/sink NAPI)", "CPU1 (DUT)"), never calls a
/// full core of the tester's the DUT's limit, and calls a full core of the
/// DUT's the DUT's forwarding. Empty outside a lab.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreRoles {
    cores: Vec<CoreRole>,
}

/// What the layout put on one core.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct CoreRole {
    pub(super) host: String,
    pub(super) cpu: u32,
    pub(super) generator: bool,
    pub(super) receiver: bool,
    /// Roles whose receive NAPI threads are pinned here (gen, sink, switch).
    pub(super) tester_napi: Vec<String>,
    pub(super) dut: bool,
}

impl CoreRole {
    pub(super) fn tester(&self) -> bool {
        self.generator || self.receiver || !self.tester_napi.is_empty()
    }

    /// The tester's work here: "generator and gen/sink NAPI".
    pub(super) fn tester_work(&self) -> String {
        let mut parts = Vec::new();
        if self.generator {
            parts.push("generator".to_string());
        }
        if self.receiver {
            parts.push("receiver".to_string());
        }
        if !self.tester_napi.is_empty() {
            parts.push(format!("{} NAPI", self.tester_napi.join("/")));
        }
        match parts.as_slice() {
            [rest @ .., last] if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => parts.concat(),
        }
    }

    /// "DUT", "tester: generator and sink NAPI", or both.
    pub(super) fn label(&self) -> String {
        match (self.dut, self.tester()) {
            (true, true) => format!("DUT and tester: {}", self.tester_work()),
            (true, false) => "DUT".to_string(),
            (false, _) => format!("tester: {}", self.tester_work()),
        }
    }

    /// Only the tester's work runs here.
    pub(super) fn tester_only(&self) -> bool {
        self.tester() && !self.dut
    }

    /// Only the DUT's work runs here.
    pub(super) fn dut_only(&self) -> bool {
        self.dut && !self.tester()
    }
}

impl CoreRoles {
    /// The roles of the lab's record, its cores on `host`. `None` when an
    /// interface kept the kernel's receive (its work then runs in the
    /// softirq of whichever core raised it, so no core has one role).
    pub fn from_lab(host: &str, c: &LabCores) -> Option<CoreRoles> {
        if c.napi.iter().any(|n| n.error.is_some()) {
            return None;
        }
        let mut r = CoreRoles::default();
        for cpu in c.generator.iter().filter_map(|&c| u32::try_from(c).ok()) {
            r.at(host, cpu).generator = true;
        }
        for n in &c.napi {
            for cpu in n.cpus.iter().filter_map(|&c| u32::try_from(c).ok()) {
                r.napi(host, cpu, &n.role);
            }
        }
        Some(r)
    }

    /// The roles the lab's agents report: each pinned its namespace's NAPI
    /// threads as the layout said (its snapshots list them with their
    /// CPUs). `None` when a DUT's or a tester end's receive was not laid
    /// out (no NAPI threads of its own): the DUT's forwarding then runs in
    /// the softirq of whichever core raised it, the tester's own too. Where
    /// the tester's senders and receivers ran, [`analyse`] adds from their
    /// threads' time.
    pub fn from_agents(agents: &[AgentCpu]) -> Option<CoreRoles> {
        let laid_out = |a: &AgentCpu| !a.after.napi.is_empty();
        if agents.iter().any(|a| a.role == "dut") {
            let ends = ["dut", "gen", "sink"];
            if agents
                .iter()
                .any(|a| ends.contains(&a.role.as_str()) && !laid_out(a))
            {
                return None;
            }
        }
        let mut r = CoreRoles::default();
        for a in agents {
            for n in &a.after.napi {
                for &cpu in &n.cpus {
                    r.napi(&a.host, cpu, &a.role);
                }
            }
        }
        Some(r)
    }

    /// The tester's engine threads that used a share of a core worth
    /// listing: a sender makes it the generator's, a receiver the tester
    /// receiver's (a control thread waking now and then makes it neither).
    pub(super) fn with_threads(mut self, loads: &[CpuLoad]) -> CoreRoles {
        for c in loads {
            for t in c
                .threads
                .iter()
                .filter(|t| t.cpu_pct >= 1.0 && t.role != "dut")
            {
                if is_sender(&t.name) {
                    self.at(&c.host, c.cpu).generator = true;
                } else if is_receiver(&t.name) {
                    self.at(&c.host, c.cpu).receiver = true;
                }
            }
        }
        self
    }

    pub(super) fn at(&mut self, host: &str, cpu: u32) -> &mut CoreRole {
        let i = match self
            .cores
            .iter()
            .position(|c| c.host == host && c.cpu == cpu)
        {
            Some(i) => i,
            None => {
                self.cores.push(CoreRole {
                    host: host.to_string(),
                    cpu,
                    ..Default::default()
                });
                self.cores.len() - 1
            }
        };
        &mut self.cores[i]
    }

    /// A NAPI thread of `role`'s namespace pinned to `cpu`.
    pub(super) fn napi(&mut self, host: &str, cpu: u32, role: &str) {
        let c = self.at(host, cpu);
        if role == "dut" {
            c.dut = true;
        } else if !c.tester_napi.iter().any(|r| r == role) {
            c.tester_napi.push(role.to_string());
        }
    }

    pub(super) fn of(&self, c: &CpuLoad) -> Option<&CoreRole> {
        self.cores
            .iter()
            .find(|r| r.host == c.host && r.cpu == c.cpu)
            .filter(|r| r.dut || r.tester())
    }
}
