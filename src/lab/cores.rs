//! Where the lab's work runs. Three kinds of work share the host's cores:
//! the generator's senders (pinned by the tests to the first CPUs of
//! `--cpus`), the DUT's receive and forwarding, and the tester's own
//! receive work (the sink counting, and the generator in the reverse
//! direction). Left to the kernel, the DUT's forwarding runs as softirq on
//! whichever core raised it — the generator's — and the lab measures the
//! sum of both. So every veth of the lab gets NAPI (GRO on: a veth has none
//! without GRO or an XDP program, and frames sent to it with XDP_TX would
//! vanish) and threaded NAPI, whose `napi/DEV-ID` kernel threads are pinned:
//! the DUT's to cores of its own, the tester's receiving ends to the
//! generator's side (on two cores) or a core of their own (on three or
//! more). Back to back there is no DUT: the receiving ends keep unthreaded
//! NAPI (GRO on) and RPS sends their stack work to the other cores.

use crate::model::lab::{LabCores, LabNapi, LabNode};
use crate::proto::{NetOp, Request, Response};
use crate::topology::Fleet;
use std::time::Duration;

/// The CPUs the lab pins its tests to when the user names none: all this
/// process may use, when there are at least two (the senders take the
/// first, receive work the rest). Empty on one CPU: nothing to separate.
pub fn default_cpus() -> Vec<usize> {
    match crate::sys::allowed_cpus() {
        Ok(c) if c.len() >= 2 => c,
        _ => Vec::new(),
    }
}

/// Which CPUs each kind of work gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub generator: Vec<usize>,
    pub dut: Vec<usize>,
    pub tester_receive: Vec<usize>,
}

/// The plan for senders on `senders` and `rest` the host's other CPUs.
/// `None` when there is nothing to separate (no CPU beside the senders',
/// or senders not pinned).
pub fn plan(senders: &[usize], rest: &[usize], has_dut: bool) -> Option<Plan> {
    if senders.is_empty() || rest.is_empty() {
        return None;
    }
    let (dut, tester_receive) = if !has_dut {
        // Back to back the receive work stays in the softirq of the core
        // that sends to it (unthreaded NAPI): an XDP sink counts there at
        // the generator's pace (4.3-4.6 Mpps measured), where a NAPI
        // thread on the other core fell behind the generator and the ring
        // dropped 58 % before counting. A socket sink's stack work goes to
        // the other cores by RPS instead.
        (Vec::new(), Vec::new())
    } else if rest.len() >= 2 {
        (rest[1..].to_vec(), vec![rest[0]])
    } else {
        (rest.to_vec(), senders.to_vec())
    };
    Some(Plan {
        generator: senders.to_vec(),
        dut,
        tester_receive,
    })
}

fn cpu_list(c: &[usize]) -> String {
    c.iter()
        .map(|c| format!("CPU{c}"))
        .collect::<Vec<_>>()
        .join("+")
}

/// One line for tables and reports: which CPU does what.
pub fn describe(c: &LabCores) -> String {
    let ifaces = |role: &str| {
        let v: Vec<&str> = c
            .napi
            .iter()
            .filter(|n| n.role == role && n.error.is_none())
            .map(|n| n.dev.as_str())
            .collect();
        v.join(", ")
    };
    let mut parts = vec![format!("generator on {}", cpu_list(&c.generator))];
    if !c.dut.is_empty() {
        parts.push(format!(
            "DUT receive and forwarding ({} NAPI threads, real-time priority) on {}",
            ifaces("dut"),
            cpu_list(&c.dut)
        ));
    }
    // The stick DUT's switch is the tester's too: its ports' receive work
    // stays off the DUT's cores, so they measure the DUT's program alone.
    let tester_ifaces: Vec<String> = ["gen", "switch", "sink"]
        .iter()
        .map(|r| ifaces(r))
        .filter(|s| !s.is_empty())
        .collect();
    if c.tester_receive.is_empty() {
        parts.push(format!(
            "tester receive ({}) in the softirq of the sending core (NAPI unthreaded)",
            tester_ifaces.join(", ")
        ));
    } else {
        parts.push(format!(
            "tester receive ({} NAPI threads{}) on {}",
            tester_ifaces.join(", "),
            if c.tester_receive == c.generator {
                ", real-time priority"
            } else {
                ""
            },
            cpu_list(&c.tester_receive)
        ));
    }
    if polls(c, |_| true) {
        parts.push(format!(
            "the NAPI threads poll {} ms past an empty ring",
            poll_window_ms()
        ));
    }
    let mut s = parts.join("; ");
    let failed: Vec<String> = c
        .napi
        .iter()
        .filter_map(|n| Some(format!("{}/{}: {}", n.role, n.dev, n.error.as_ref()?)))
        .collect();
    if !failed.is_empty() {
        s.push_str(&format!(
            " — not laid out, kernel's choice: {}",
            failed.join("; ")
        ));
    }
    s
}

/// After a ring runs empty, each lab NAPI thread polls it again from a
/// timer on its own core, `(times, every ns)`, before it sleeps until a
/// frame wakes it, as a NIC's interrupt coalescing would: the DUT's every
/// 50 µs, the tester's every 100 µs (it shares the generator's core on two
/// CPUs, and polls that come more often cost the generator its rate), each
/// for 2 ms. A veth has no coalescing: each frame after an empty poll woke
/// the receiving thread from the sending core, an inter-processor
/// interrupt that on a VM exits to the hypervisor, paid by the DUT's core
/// for every wake of the tester's receive and by the generator's for every
/// wake of the DUT. How often that happened depended on how busy each side
/// already was, so the DUT's capacity moved with its history. Four rounds
/// of 2 s lab tests (64 B, var2) on a 2-core VM: at 750 kpps 0.49-13.1 %
/// lost without it, 0.015-0.058 % with it; unpaced, the DUT forwarded
/// 646-821 kpps without it, 1.12-1.19 Mpps with it (bench/README.md).
pub const DUT_POLL: (u32, u64) = (40, 50_000);
pub const TESTER_POLL: (u32, u64) = (20, 100_000);

/// The roles whose interfaces forward for the DUT: its own, and a VM
/// DUT's host side (its bridges and taps). Every other role is the tester's.
pub fn is_dut_role(role: &str) -> bool {
    role == "dut" || role == "vmnet"
}

/// Whether the lab laid out polling NAPI threads on an interface of a role
/// `of` picks (pinned, no error).
pub fn polls(c: &LabCores, of: impl Fn(&str) -> bool) -> bool {
    c.napi
        .iter()
        .any(|n| of(&n.role) && !n.cpus.is_empty() && n.error.is_none())
}

/// How long, ms, the lab's NAPI threads poll past an empty ring (the
/// longer of the DUT's and the tester's).
pub fn poll_window_ms() -> u64 {
    let ms = |(n, every_ns): (u32, u64)| u64::from(n) * every_ns / 1_000_000;
    ms(DUT_POLL).max(ms(TESTER_POLL))
}

/// Gives every veth of the placed nodes GRO and pinned threaded NAPI as
/// `plan` says, polling past an empty ring (`DUT_POLL`, `TESTER_POLL`). A host that refuses keeps the kernel's defaults for that
/// interface; the record says which and why.
pub fn lay_out(fleet: &mut Fleet, placed: &[usize], nodes: &[LabNode], plan: &Plan) -> LabCores {
    let mut napi = Vec::new();
    for (&idx, node) in placed.iter().zip(nodes) {
        // A VM DUT's host side (its bridges and taps) forwards for it.
        let (cpus, poll) = if is_dut_role(&node.role) {
            (&plan.dut, DUT_POLL)
        } else {
            (&plan.tester_receive, TESTER_POLL)
        };
        // Bridges (no MAC here) have no NAPI of their own.
        for i in node.interfaces.iter().filter(|i| !i.mac.is_empty()) {
            let mut ops = vec![NetOp::Offload {
                dev: i.name.clone(),
                feature: "gro".into(),
                on: true,
            }];
            if !cpus.is_empty() {
                ops.push(NetOp::NapiThreads {
                    dev: i.name.clone(),
                    cpus: cpus.clone(),
                    // Beside the generator, the tester's receive must run
                    // when frames arrive, not after the sender's time
                    // slice: its 256-frame veth ring overflowed (counted
                    // as the DUT's tx_dropped) while a packet-engine
                    // sender held the core. The DUT's forwarding too, as
                    // a router's softirq comes before its processes: at
                    // normal priority it shared its core with the
                    // tester's own processes and lost frames from rings
                    // that overflowed while they ran.
                    realtime: node.role == "dut" || plan.tester_receive == plan.generator,
                    defer_hard_irqs: poll.0,
                    gro_flush_timeout_ns: poll.1,
                });
            }
            let error = match fleet.call(idx, &Request::Configure { ops }, Duration::from_secs(10))
            {
                Ok(Response::Configured) => None,
                Ok(Response::Error { message, .. }) => Some(message),
                Ok(other) => Some(format!("unexpected answer {other:?}")),
                Err(e) => Some(format!("{e:#}")),
            };
            napi.push(LabNapi {
                role: node.role.clone(),
                dev: i.name.clone(),
                cpus: cpus.clone(),
                error,
            });
        }
    }
    let mut c = LabCores {
        generator: plan.generator.clone(),
        dut: plan.dut.clone(),
        tester_receive: plan.tester_receive.clone(),
        napi,
        summary: String::new(),
    };
    c.summary = describe(&c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cores_give_the_dut_a_core_of_its_own() {
        let p = plan(&[0], &[1], true).unwrap();
        assert_eq!(p.dut, vec![1]);
        assert_eq!(
            p.tester_receive,
            vec![0],
            "sink counts beside the generator"
        );
        let p = plan(&[0], &[1, 2, 3], true).unwrap();
        assert_eq!(p.tester_receive, vec![1]);
        assert_eq!(p.dut, vec![2, 3]);
        let p = plan(&[0, 1], &[2], false).unwrap();
        assert!(p.dut.is_empty());
        assert!(p.tester_receive.is_empty(), "back to back: unthreaded");
        assert_eq!(plan(&[], &[1], true), None, "unpinned senders");
        assert_eq!(plan(&[0], &[], true), None, "one CPU");
    }

    #[test]
    fn the_summary_names_cores_and_failures() {
        let c = LabCores {
            generator: vec![0],
            dut: vec![1],
            tester_receive: vec![0],
            napi: vec![
                LabNapi {
                    role: "dut".into(),
                    dev: "dut0".into(),
                    cpus: vec![1],
                    error: None,
                },
                LabNapi {
                    role: "sink".into(),
                    dev: "sink0".into(),
                    cpus: vec![0],
                    error: Some("no threaded NAPI".into()),
                },
            ],
            summary: String::new(),
        };
        let s = describe(&c);
        assert!(s.contains("generator on CPU0"), "{s}");
        assert!(
            s.contains(
                "DUT receive and forwarding (dut0 NAPI threads, real-time priority) on CPU1"
            ),
            "{s}"
        );
        assert!(s.contains("sink/sink0: no threaded NAPI"), "{s}");
        assert!(
            s.contains("the NAPI threads poll 2 ms past an empty ring"),
            "{s}"
        );
        // Unthreaded (back to back): nothing polls.
        let mut c = c;
        for n in &mut c.napi {
            n.cpus.clear();
        }
        assert!(!describe(&c).contains("poll"), "{}", describe(&c));
    }
}
