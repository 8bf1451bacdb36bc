//! CPU topology: online CPUs, SMT siblings, L3 (last-level cache) domains and
//! NUMA nodes, and the checks that compare the test's cores (`--cpus`) with
//! them: offline cores, cores sharing a physical core, and a NIC on another
//! NUMA node. IRQ placement is `irq.rs`; this module only provides lookups.

use std::collections::{BTreeMap, BTreeSet};

use crate::parse::{format_cpu_list, parse_cpu_list};
use crate::report::{Evidence, Finding, NumaNode, Severity};
use crate::{evidence, Ctx};

const CPU_DIR: &str = "sys/devices/system/cpu";
const NODE_DIR: &str = "sys/devices/system/node";

/// Lookups derived from sysfs that the checks share.
#[derive(Debug, Default)]
pub(crate) struct Topology {
    /// CPU id to its index in `Facts::l3_domains`.
    pub(crate) l3_of: BTreeMap<usize, usize>,
    /// Per L3 domain, the `shared_cpu_list` file that defines it.
    pub(crate) l3_evidence: Vec<Evidence>,
    /// CPU id to its SMT siblings (including itself) and the evidence.
    pub(crate) siblings: BTreeMap<usize, (Vec<usize>, Evidence)>,
    /// NUMA node id to the evidence of its `cpulist`.
    pub(crate) node_evidence: BTreeMap<u32, Evidence>,
}

impl Topology {
    /// Indices of the L3 domains touched by `cpus`.
    pub(crate) fn l3_domains_of(&self, cpus: &[usize]) -> BTreeSet<usize> {
        cpus.iter()
            .filter_map(|c| self.l3_of.get(c).copied())
            .collect()
    }
}

/// Reads online CPUs, SMT state, L3 domains and NUMA nodes into the facts.
pub(crate) fn collect(ctx: &mut Ctx) {
    let online_rel = format!("{CPU_DIR}/online");
    let online = match ctx.host.read_trimmed(&online_rel) {
        Some(list) => parse_cpu_list(&list).unwrap_or_default(),
        None => {
            // Fall back to the cpuN directories, which fixtures may have alone.
            ctx.host
                .list_dirs(CPU_DIR, |n| cpu_id(n).is_some())
                .iter()
                .filter_map(|n| cpu_id(n))
                .collect()
        }
    };
    if online.is_empty() {
        ctx.skip_missing("cpu topology", &online_rel);
        return;
    }
    ctx.facts.cpu_count = Some(online.len());
    ctx.facts.online_cpus = online.clone();
    ctx.facts.smt_active = ctx
        .host
        .read_trimmed(&format!("{CPU_DIR}/smt/active"))
        .and_then(|v| match v.as_str() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        });

    collect_l3(ctx, &online);
    for &cpu in &online {
        let rel = format!("{CPU_DIR}/cpu{cpu}/topology/thread_siblings_list");
        if let Some((value, ev)) = ctx.read_ev(&rel) {
            if let Ok(list) = parse_cpu_list(&value) {
                ctx.topo.siblings.insert(cpu, (list, ev));
            }
        }
    }
    if ctx.topo.siblings.is_empty() {
        ctx.skip("smt siblings: no topology/thread_siblings_list readable");
    }

    for node in ctx.host.list_dirs(NODE_DIR, |n| node_id(n).is_some()) {
        let Some(id) = node_id(&node) else { continue };
        let rel = format!("{NODE_DIR}/{node}/cpulist");
        if let Some((value, ev)) = ctx.read_ev(&rel) {
            let cpus = parse_cpu_list(&value).unwrap_or_default();
            ctx.facts.numa_nodes.push(NumaNode { id, cpus });
            ctx.topo.node_evidence.insert(id, ev);
        }
    }
    if ctx.facts.numa_nodes.is_empty() {
        ctx.skip(format!("numa nodes: no /{NODE_DIR}/nodeN/cpulist readable"));
    }
}

/// Groups CPUs by the `shared_cpu_list` of their level-3 cache.
fn collect_l3(ctx: &mut Ctx, online: &[usize]) {
    let mut domains: BTreeMap<Vec<usize>, Evidence> = BTreeMap::new();
    for &cpu in online {
        let cache = format!("{CPU_DIR}/cpu{cpu}/cache");
        // index3 is L3 on x86, but the `level` file is the authority when
        // present (some ARM parts number their caches differently).
        let by_level = ctx
            .host
            .list_dirs(&cache, |n| n.starts_with("index"))
            .into_iter()
            .find(|idx| {
                ctx.host
                    .read_trimmed(&format!("{cache}/{idx}/level"))
                    .as_deref()
                    == Some("3")
            });
        let idx = by_level.unwrap_or_else(|| "index3".to_string());
        let rel = format!("{cache}/{idx}/shared_cpu_list");
        if let Some((value, ev)) = ctx.read_ev(&rel) {
            if let Ok(list) = parse_cpu_list(&value) {
                if !list.is_empty() {
                    domains.entry(list).or_insert(ev);
                }
            }
        }
    }
    if domains.is_empty() {
        ctx.skip(format!(
            "l3 domains: no /{CPU_DIR}/cpuN/cache/index3/shared_cpu_list readable"
        ));
        return;
    }
    for (i, (cpus, ev)) in domains.into_iter().enumerate() {
        for &c in &cpus {
            ctx.topo.l3_of.insert(c, i);
        }
        ctx.facts.l3_domains.push(cpus);
        ctx.topo.l3_evidence.push(ev);
    }
}

fn cpu_id(name: &str) -> Option<usize> {
    name.strip_prefix("cpu")?.parse().ok()
}

fn node_id(name: &str) -> Option<u32> {
    name.strip_prefix("node")?.parse().ok()
}

/// Checks the test's cores (`--cpus`) against the topology and the NICs.
pub(crate) fn check_test_cpus(ctx: &mut Ctx) {
    let Some(test_cpus) = ctx.opts.cpus.clone() else {
        ctx.skip("test cores (offline, SMT sharing, NUMA): no --cpus given");
        return;
    };
    let list = format_cpu_list(&test_cpus);

    let online = &ctx.facts.online_cpus;
    let offline: Vec<usize> = test_cpus
        .iter()
        .copied()
        .filter(|c| !online.is_empty() && !online.contains(c))
        .collect();
    if !offline.is_empty() {
        let online_list = format_cpu_list(online);
        ctx.add(Finding {
            id: "test_cpu_offline".into(),
            severity: Severity::Warning,
            title: format!(
                "test {} {} {} not online (online: {online_list})",
                if offline.len() == 1 { "core" } else { "cores" },
                format_cpu_list(&offline),
                if offline.len() == 1 { "is" } else { "are" }
            ),
            evidence: vec![evidence(&format!("{CPU_DIR}/online"), online_list)],
            impact: "Threads pinned there cannot run; the test fails or runs unpinned.".into(),
            fix: "Pick --cpus from the online CPUs, or bring the cores online \
                  (echo 1 > /sys/devices/system/cpu/cpuN/online)."
                .into(),
            subject: None,
        });
    }

    // Pairs of test cores that are hyperthreads of one physical core.
    let mut shared = Vec::new();
    let mut seen = BTreeSet::new();
    for &cpu in &test_cpus {
        if let Some((siblings, ev)) = ctx.topo.siblings.get(&cpu) {
            let others: Vec<usize> = siblings
                .iter()
                .copied()
                .filter(|s| *s != cpu && test_cpus.contains(s))
                .collect();
            if !others.is_empty() && seen.insert(siblings.clone()) {
                shared.push(ev.clone());
            }
        }
    }
    if !shared.is_empty() {
        ctx.add(Finding {
            id: "test_cpus_share_core".into(),
            severity: Severity::Warning,
            title: format!("test cores {list} include SMT siblings of one physical core"),
            evidence: shared,
            impact: "Two hyperthreads share one core's execution units and L1/L2; each gets \
                     roughly half a core, so per-core results are understated."
                .into(),
            fix: "Choose one thread per core for --cpus (see thread_siblings_list), or \
                  disable SMT for the test (echo off > /sys/devices/system/cpu/smt/control)."
                .into(),
            subject: None,
        });
    }

    check_numa(ctx, &test_cpus, &list);
}

/// A NIC attached to another NUMA node than the test's cores makes every
/// packet's DMA and descriptor traffic cross the socket interconnect.
fn check_numa(ctx: &mut Ctx, test_cpus: &[usize], list: &str) {
    let nics: Vec<(String, u32)> = ctx
        .facts
        .nics
        .iter()
        .filter(|n| n.inspected)
        .filter_map(|n| Some((n.name.clone(), n.numa_node?)))
        .collect();
    for (nic, node) in nics {
        let Some(node_cpus) = ctx
            .facts
            .numa_nodes
            .iter()
            .find(|n| n.id == node)
            .map(|n| n.cpus.clone())
        else {
            ctx.skip(format!("numa {nic}: node {node} has no readable cpulist"));
            continue;
        };
        let remote: Vec<usize> = test_cpus
            .iter()
            .copied()
            .filter(|c| !node_cpus.contains(c))
            .collect();
        if remote.is_empty() {
            continue;
        }
        let mut ev = vec![evidence(
            &format!("sys/class/net/{nic}/device/numa_node"),
            node.to_string(),
        )];
        ev.extend(ctx.topo.node_evidence.get(&node).cloned());
        let local = format_cpu_list(&node_cpus);
        ctx.add(Finding {
            id: "nic_numa_remote".into(),
            severity: Severity::Warning,
            title: format!(
                "{nic} is on NUMA node {node} (CPUs {local}) but test {} {} {} not",
                if remote.len() == 1 { "core" } else { "cores" },
                format_cpu_list(&remote),
                if remote.len() == 1 { "is" } else { "are" }
            ),
            evidence: ev,
            impact: format!(
                "Packets are DMAed into node {node}'s memory and read by cores on another \
                 socket: every buffer crosses the interconnect, costing throughput per core \
                 and adding latency (test cores: {list})."
            ),
            fix: format!(
                "Run the test on node {node}'s cores (--cpus {local}), or move the NIC to a \
                 slot attached to the socket the test runs on."
            ),
            subject: Some(nic),
        });
    }
}
