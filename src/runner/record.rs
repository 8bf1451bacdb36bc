//! What a finished test records besides its directions: kernel counters,
//! cross-checks per agent, CPU use, and the aggregate of many senders.

use super::jobs::Collected;
use super::setup::{Ends, Leg};
use crate::proto::{CpuTicks, EndpointSummary, Snapshot, UdpCounters};
use crate::results::{CheckScope, CpuUse, CrossCheck, KernelCounters, TestResult};
use crate::topology::Agents;
use std::collections::{BTreeMap, HashMap};

mod senders;
pub(super) use senders::aggregate;

#[derive(Default)]
pub(super) struct NsDelta {
    pub tx_packets: u64,
    pub tx_dropped: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub udp_in_errors: u64,
    /// Frames the drivers' XDP transmit paths refused ([`crate::proto::IfCounters::xdp_tx_drops`]).
    pub xdp_tx_drops: u64,
    /// A tun/tap is among the namespace's interfaces ([`crate::proto::IfCounters::tun`]).
    pub tun: bool,
}

/// Sum of counter deltas over the interfaces of one agent's namespace.
pub(super) fn delta_ns(
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    agent: usize,
) -> NsDelta {
    let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
        return NsDelta::default();
    };
    let mut d = NsDelta {
        udp_in_errors: a.udp.in_errors.saturating_sub(b.udp.in_errors),
        ..Default::default()
    };
    // Loopback counts: tests between endpoints in one namespace run over it
    // (in the lab it stays quiet). A bridge only repeats its ports' counts.
    for ia in a.interfaces.iter().filter(|i| !i.name.starts_with("br")) {
        let Some(ib) = b.interfaces.iter().find(|i| i.name == ia.name) else {
            continue;
        };
        d.tx_packets += ia.tx_packets.saturating_sub(ib.tx_packets);
        d.tx_dropped += ia.tx_dropped.saturating_sub(ib.tx_dropped);
        d.rx_packets += ia.rx_packets.saturating_sub(ib.rx_packets);
        d.rx_bytes += ia.rx_bytes.saturating_sub(ib.rx_bytes);
        d.rx_dropped += ia.rx_dropped.saturating_sub(ib.rx_dropped);
        d.xdp_tx_drops += ia.xdp_tx_drops.saturating_sub(ib.xdp_tx_drops);
        d.tun |= ia.tun;
    }
    d
}

pub(super) fn counters(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    result: &mut TestResult,
) {
    for agent in ends.agents() {
        let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
            continue;
        };
        let udp = UdpCounters {
            in_datagrams: a.udp.in_datagrams.saturating_sub(b.udp.in_datagrams),
            no_ports: a.udp.no_ports.saturating_sub(b.udp.no_ports),
            in_errors: a.udp.in_errors.saturating_sub(b.udp.in_errors),
            out_datagrams: a.udp.out_datagrams.saturating_sub(b.udp.out_datagrams),
            rcvbuf_errors: a.udp.rcvbuf_errors.saturating_sub(b.udp.rcvbuf_errors),
            sndbuf_errors: a.udp.sndbuf_errors.saturating_sub(b.udp.sndbuf_errors),
            in_csum_errors: a.udp.in_csum_errors.saturating_sub(b.udp.in_csum_errors),
        };
        for ia in &a.interfaces {
            if let Some(ib) = b.interfaces.iter().find(|i| i.name == ia.name) {
                if ia.name == "lo" && ia == ib {
                    continue; // a quiet loopback says nothing
                }
                result.kernel_counters.push(KernelCounters {
                    role: ends.role(agent),
                    interface: ia.name.clone(),
                    before: ib.clone(),
                    after: ia.clone(),
                    udp_delta: udp.clone(),
                });
            }
        }
    }
    dut_bond(ends, before, after, result);
}

/// The DUT's bond (`lab --dut-bond`): its state after the test and what
/// each port counted over it.
fn dut_bond(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    result: &mut TestResult,
) {
    for agent in &ends.observers {
        let (Some(b), Some(a)) = (before.get(agent), after.get(agent)) else {
            continue;
        };
        // The bond with ports (a kernel with bonding built in also has
        // an empty bond0).
        let Some(bond) = a.bonds.iter().max_by_key(|b| b.ports.len()) else {
            continue;
        };
        let delta = |port: &str| {
            let ia = a.interfaces.iter().find(|i| i.name == port)?;
            let ib = b.interfaces.iter().find(|i| i.name == port)?;
            Some([
                ia.rx_packets.saturating_sub(ib.rx_packets),
                ia.tx_packets.saturating_sub(ib.tx_packets),
                ia.rx_bytes.saturating_sub(ib.rx_bytes),
                ia.tx_bytes.saturating_sub(ib.tx_bytes),
                ia.rx_dropped.saturating_sub(ib.rx_dropped),
            ])
        };
        result.dut_bond = Some(crate::results::bond::record(bond, &delta));
        return;
    }
}

/// The receivers' check in one namespace `ns`: what they counted
/// (+ duplicates, socket drops) against the kernel's rx_packets; where an
/// XDP receiver sat on a tap, a note that the two do not compare.
fn received_check(
    ns: (String, u64),
    roles: &[String],
    n: u64,
    d: &NsDelta,
    in_xdp: bool,
) -> CrossCheck {
    if d.tun && in_xdp {
        // tun's native XDP ends frames before any counter of the
        // device: the kernel has no count to hold the receiver's to.
        let mut c = CrossCheck::new(
            format!(
                "{}: datagrams received vs kernel rx_packets: not comparable, a tap's \
                 native XDP program (the XDP receiver's) ends frames before its counters",
                roles.join("+")
            ),
            n,
            d.rx_packets,
        );
        c.flagged = false;
        return c;
    }
    let mut c = CrossCheck::new(
        format!(
            "{}: datagrams received (+ duplicates, socket drops) vs kernel rx_packets",
            roles.join("+")
        ),
        n + d.udp_in_errors,
        d.rx_packets,
    );
    c.scope = Some(CheckScope {
        netns: ns,
        tx: false,
    });
    c
}

/// Datagrams counted by linerate against the kernel's packets, per network
/// namespace: all legs sent (or received) by agents in one namespace add up
/// to its interface counters, which those agents share.
pub(super) fn udp_cross_checks(
    ends: &Ends,
    legs: &[Leg],
    col: &Collected,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    result: &mut TestResult,
) {
    // Namespace key -> (first agent there, roles, count).
    type Tally = BTreeMap<(String, u64), (usize, Vec<String>, u64)>;
    let key = |a: usize| ends.fleet.agent(a).netns_key.clone();
    let add = |t: &mut Tally, agent: usize, n: u64| {
        let e = t.entry(key(agent)).or_insert((agent, Vec::new(), 0));
        let role = ends.role(agent);
        if !e.1.contains(&role) {
            e.1.push(role);
        }
        e.2 += n;
    };
    let (mut sent, mut got) = (Tally::new(), Tally::new());
    // Namespaces where a receiver counted in XDP.
    let mut in_xdp = std::collections::BTreeSet::new();
    for l in legs {
        add(&mut sent, l.tx_agent, col.summary(l.tx_id).tx_packets);
        let rx = col.summary(l.rx_id);
        add(&mut got, l.rx_agent, rx.rx_packets + rx.duplicates);
        if rx.rx_engine == "xdp" {
            in_xdp.insert(key(l.rx_agent));
        }
    }
    // The live engine's egress check left by the same interfaces.
    let mut checked = BTreeMap::<(String, u64), u64>::new();
    for l in legs {
        *checked.entry(key(l.tx_agent)).or_default() += col.summary(l.tx_id).check_frames;
    }
    for (ns, (agent, roles, n)) in sent {
        // A frame the next hop's receive ring refused left the sender all
        // the same: veth counts it as the sender's tx_dropped (and the
        // receiver's rx_dropped, where the loss is accounted).
        let d = delta_ns(before, after, agent);
        let mut c = CrossCheck::new(
            format!(
                "{}: datagrams sent vs kernel tx_packets + tx_dropped",
                roles.join("+")
            ),
            n,
            d.tx_packets + d.tx_dropped,
        );
        c.scope = Some(CheckScope {
            netns: key(agent),
            tx: true,
        });
        c.add_own(
            checked.get(&ns).copied().unwrap_or(0),
            "frames of the live engine's egress check",
        );
        add_driver_xdp_drops(&mut c, d.xdp_tx_drops);
        refused_frames_sent_again(&mut c, d.tx_packets);
        result.cross_checks.push(c);
    }
    for (ns, (agent, roles, n)) in got {
        let d = delta_ns(before, after, agent);
        let xdp = in_xdp.contains(&ns);
        result
            .cross_checks
            .push(received_check(ns, &roles, n, &d, xdp));
    }
}

/// The frames each leg's sending namespace's drivers refused on their XDP
/// transmit path, by the leg's sender job: a namespace's count shared
/// among the legs sent from it in proportion to what each sent. Those
/// frames never left the tester, so a receiver's loss of them is the
/// tester's, not the DUT's.
pub(super) fn sender_driver_drops(
    ends: &Ends,
    legs: &[Leg],
    col: &Collected,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
) -> HashMap<u32, u64> {
    let key = |a: usize| ends.fleet.agent(a).netns_key.clone();
    // Namespace -> (an agent there, frames its legs sent).
    let mut sent = BTreeMap::<(String, u64), (usize, u64)>::new();
    for l in legs {
        let e = sent.entry(key(l.tx_agent)).or_insert((l.tx_agent, 0));
        e.1 += col.summary(l.tx_id).tx_packets;
    }
    let mut out = HashMap::new();
    for l in legs {
        let Some(&(agent, total)) = sent.get(&key(l.tx_agent)) else {
            continue;
        };
        let drops = delta_ns(before, after, agent).xdp_tx_drops;
        if drops == 0 || total == 0 {
            continue;
        }
        let mine = col.summary(l.tx_id).tx_packets;
        let share = (u128::from(drops) * u128::from(mine) / u128::from(total)) as u64;
        out.insert(l.tx_id, share);
    }
    out
}

/// Frames a driver's XDP transmit path refused (virtio-net with a full
/// ring under the live engine) left linerate's count but neither of the
/// kernel's: they count on the kernel's side, said in the check.
fn add_driver_xdp_drops(c: &mut CrossCheck, drops: u64) {
    if drops == 0 {
        return;
    }
    let mut n = CrossCheck::new(
        format!(
            "{} (+ {drops} frames the driver's XDP transmit refused)",
            c.what
        ),
        c.application,
        c.kernel + drops,
    );
    n.scope = c.scope.take();
    *c = n;
}

/// A device that refuses a frame counts it in tx_dropped; veth does so and
/// the sender does not hear of it, so the frame left the sender (counted by
/// both sides); a tap (or veth under the packet engine, which bypasses the
/// qdisc) returns the refusal to the sender as ENOBUFS, which sends the
/// frame again (counted once by linerate, twice by the kernel). Either way
/// linerate's count lies between tx_packets and tx_packets + tx_dropped:
/// a count in that range is not a disagreement, and the check says which
/// bounds it was held to.
fn refused_frames_sent_again(c: &mut CrossCheck, tx_packets: u64) {
    if !c.flagged || c.kernel <= tx_packets {
        return;
    }
    let (low, high) = (tx_packets as f64 * 0.99, c.kernel as f64 * 1.01);
    let n = c.application as f64;
    if n >= low && n <= high {
        c.what = format!(
            "{} (between tx_packets {tx_packets} and that + tx_dropped: the device refused \
             frames back to the sender, which sent them again)",
            c.what
        );
        c.flagged = false;
    }
}

/// With the stick DUT: its XDP program's counts over the test, and what it
/// forwarded each way against what the generators (VLAN A) and the sink
/// (VLAN B) sent, which must be equal in a lab that loses nothing.
pub(super) fn stick_counts(
    ends: &Ends,
    legs: &[Leg],
    col: &Collected,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    result: &mut TestResult,
) {
    let Some(c) = ends.observers.iter().find_map(|a| {
        let now = after.get(a)?.stick?;
        Some(now.since(&before.get(a)?.stick?))
    }) else {
        return;
    };
    let gens: Vec<usize> = ends.gens.iter().map(|g| g.agent).collect();
    let (mut a_to_b, mut b_to_a) = (None, None);
    for l in legs {
        let sent = col.summary(l.tx_id).tx_packets;
        let side = if gens.contains(&l.tx_agent) {
            &mut a_to_b
        } else {
            &mut b_to_a
        };
        *side.get_or_insert(0) += sent;
    }
    for (sent, forwarded, from, to) in [
        (a_to_b, c.a_to_b_forwarded, c.vlan_a, c.vlan_b),
        (b_to_a, c.b_to_a_forwarded, c.vlan_b, c.vlan_a),
    ] {
        let Some(sent) = sent else { continue };
        result.cross_checks.push(CrossCheck::new(
            format!("dut: datagrams sent on VLAN {from} vs frames the stick's XDP forwarded to VLAN {to}"),
            sent,
            forwarded,
        ));
    }
    result.dut_stick = Some(c);
}

/// The DUT namespace's own view of its loss (received on its interfaces,
/// not sent on; bridges repeat their ports and are skipped), checked
/// against the DUT loss the sequence numbers found.
pub(super) fn dut_loss(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    result: &mut TestResult,
) {
    let mut counted: Option<u64> = None;
    for &agent in &ends.observers {
        let d = delta_ns(before, after, agent);
        // What reached the DUT's interfaces, including what its own
        // receive rings and backlog refused, less what it sent on.
        let dropped = (d.rx_packets + d.rx_dropped).saturating_sub(d.tx_packets);
        *counted.get_or_insert(0) += dropped;
    }
    let Some(mut counted) = counted else { return };
    // A veth the DUT sends on counts a frame the receiving end's backlog
    // refused as the DUT's tx_dropped (so received − sent includes it), and
    // the receiving end counts it as its rx_dropped: a tester drop, already
    // in the directions' tester drops. In the lab those receiving ends are
    // linerate's own namespaces; take their drops back out.
    if ends.lab.is_some() {
        let ends_dropped: u64 = ends
            .agents()
            .into_iter()
            .filter(|a| !ends.observers.contains(a))
            .map(|a| delta_ns(before, after, a).rx_dropped)
            .sum();
        counted = counted.saturating_sub(ends_dropped);
    }
    let by_sequence: u64 = result.directions.iter().map(|d| d.dut_lost).sum();
    // The live engine's egress check sends a burst of non-IP frames to the
    // sender's own MAC before the test's: in the lab the DUT is the next
    // hop, counts them as received and drops them. Taken out, but never
    // below the sequence numbers' figure (where they did not reach it).
    let checked: u64 = result
        .directions
        .iter()
        .map(|d| d.sender_summary.check_frames)
        .sum();
    let own = if ends.lab.is_some() {
        checked.min(counted.saturating_sub(by_sequence))
    } else {
        0
    };
    counted -= own;
    // Judged against the traffic, not the (often tiny) loss: a few control
    // packets (ND, ARP) must not read as a disagreement.
    let sent: u64 = result.directions.iter().map(|d| d.tx_packets).sum();
    let diff = counted.abs_diff(by_sequence) as f64 / sent.max(1) as f64;
    let less = if own > 0 {
        format!(", less {own} frames of the live engine's egress check")
    } else {
        String::new()
    };
    result.cross_checks.push(CrossCheck {
        what: format!(
            "dut: packets lost by sequence numbers vs the DUT's own counters (received − sent{less})"
        ),
        application: by_sequence,
        kernel: counted,
        difference_ratio: diff,
        flagged: diff > 0.001,
        scope: None,
    });
    result.dut_counted_lost = Some(counted);
}

/// How long the senders ran (the longest of them), at least 1 ms.
fn traffic_s(col: &Collected, legs: &[Leg]) -> f64 {
    legs.iter()
        .filter_map(|l| col.finished.get(&l.tx_id))
        .map(|s| s.elapsed_s)
        .fold(0.0, f64::max)
        .max(1e-3)
}

/// Per-core load on every host of the test and the verdict naming the
/// first full core ([`crate::results::bottleneck`]), with each core's role
/// in a lab. Agents on one host share its /proc/stat and are counted once;
/// their threads are each their own.
pub(super) fn bottleneck(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    col: &Collected,
    legs: &[Leg],
    result: &mut TestResult,
) {
    let mut agents = Vec::new();
    for agent in ends.agents() {
        let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
            continue;
        };
        let ag = ends.fleet.agent(agent);
        let host = if ag.netns_key.0.is_empty() {
            ag.host.clone()
        } else {
            ag.netns_key.0.clone()
        };
        agents.push(crate::results::bottleneck::AgentCpu {
            host,
            role: ag.role.clone(),
            before: b,
            after: a,
        });
    }
    let offered: u64 = result.directions.iter().map(|d| d.tx_packets).sum();
    let (link_down_lost, links_down) = links_down_loss(result);
    let traffic = (offered > 0).then(|| crate::results::bottleneck::Traffic {
        offered,
        dut_lost: result.directions.iter().map(|d| d.dut_lost).sum(),
        tester_drops: result.directions.iter().map(|d| d.tester_drops).sum(),
        asked: result.directions.iter().map(|d| d.tx_target).sum(),
        received: result.directions.iter().map(|d| d.rx_packets).sum(),
        link_down_lost,
        links_down,
    });
    // In a linerate lab the agents' snapshots carry the core layout each
    // applied (its NAPI threads' pinned CPUs, the tester's pinned
    // threads): the verdict names each core's role. Elsewhere no core has
    // one.
    let roles = ends
        .lab
        .and_then(|_| crate::results::bottleneck::CoreRoles::from_agents(&agents));
    // The first observer watches the DUT: a VM DUT's vCPUs are its limit's
    // evidence.
    let dut_role = ends
        .observers
        .first()
        .map(|&a| ends.fleet.agent(a).role.clone());
    result.bottleneck = crate::results::bottleneck::analyse_with_dut(
        &agents,
        traffic_s(col, legs),
        traffic,
        roles.as_ref(),
        dut_role.as_deref(),
    );
}

/// Frames lost (by sequence, at the receiver) in the intervals an endpoint
/// marked `links_down`, and the links named there, each once.
fn links_down_loss(result: &TestResult) -> (u64, Vec<crate::results::bottleneck::LinkDown>) {
    let mut lost = 0;
    let mut links: Vec<crate::results::bottleneck::LinkDown> = Vec::new();
    for d in &result.directions {
        for p in &d.intervals {
            let sides = [(&p.sender, &d.sender), (&p.receiver, &d.receiver)];
            let mut marked = false;
            for (sample, role) in sides {
                for ifname in sample.iter().flat_map(|s| &s.links_down) {
                    marked = true;
                    if !links.iter().any(|l| l.role == *role && l.ifname == *ifname) {
                        links.push(crate::results::bottleneck::LinkDown {
                            role: role.clone(),
                            ifname: ifname.clone(),
                        });
                    }
                }
            }
            if marked {
                lost += p.receiver.as_ref().map_or(0, |r| r.lost);
            }
        }
    }
    (lost, links)
}

pub(super) fn cpu(
    ends: &Ends,
    before: &HashMap<usize, Snapshot>,
    after: &HashMap<usize, Snapshot>,
    col: &Collected,
    legs: &[Leg],
    result: &mut TestResult,
) {
    let wall = traffic_s(col, legs);
    for agent in ends.agents() {
        let (Some(b), Some(a)) = (before.get(&agent), after.get(&agent)) else {
            continue;
        };
        if let Some(ms) = steal_ms(&b.per_cpu, &a.per_cpu) {
            result.steal_ms = Some(result.steal_ms.map_or(ms, |m: f64| m.max(ms)));
        }
        // One agent per host watches (the others report none): the sum
        // over agents is the sum over hosts.
        if let Some(ms) = crate::host::stalls::held_ms_between(&b.per_cpu, &a.per_cpu) {
            result.stall_ms = Some(result.stall_ms.unwrap_or(0.0) + ms);
        }
        // The agent's own host's CPUs (its snapshot lists them), so every
        // figure is a share of one host, 0-100 %, whatever its threads.
        let cpus = if a.per_cpu.is_empty() {
            crate::host::kernel::host_cpus() as usize
        } else {
            a.per_cpu.len()
        };
        let capacity = wall * cpus as f64;
        let softirq = (a.system_cpu.softirq_s - b.system_cpu.softirq_s).max(0.0);
        result.cpu.push(CpuUse {
            role: ends.role(agent),
            process_pct: (a.process_cpu_s - b.process_cpu_s).max(0.0) / capacity * 100.0,
            softirq_pct: softirq / capacity * 100.0,
            cpus: cpus as u32,
        });
    }
}

/// The most steal one CPU counted between two snapshots, ms (USER_HZ is
/// 100 on Linux: a tick is 10 ms). `None` without per-CPU times.
pub(crate) fn steal_ms(before: &[CpuTicks], after: &[CpuTicks]) -> Option<f64> {
    if after.is_empty() {
        return None;
    }
    let most = after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.cpu == a.cpu)
                .map_or(a.steal, |b| b.steal);
            a.steal.saturating_sub(b)
        })
        .max()
        .unwrap_or(0);
    Some(most as f64 * 10.0)
}

/// When a sender began, seconds after the agreed start, on the controller's
/// clock. `None` for a sender that never reported or a test without an
/// agreed start.
pub(super) fn start_offset(
    fleet: &dyn Agents,
    agent: usize,
    s: &EndpointSummary,
    start_ns: u64,
) -> Option<f64> {
    if s.started_unix_ns == 0 || start_ns == 0 {
        return None;
    }
    let ours = fleet.agent(agent).clock.to_controller_ns(s.started_unix_ns);
    Some((ours - start_ns as i128) as f64 / 1e9)
}

#[cfg(test)]
mod tests;
