//! Bottleneck verdicts from core and thread ticks: the sender, the
//! receiver, the DUT, links that went down, shared cores, VMs and met
//! rates (issue 23). The 2-core lab with its roles is in [`lab`].

use super::*;
use crate::proto::NapiTime;

mod lab;

/// A core's ticks since boot; `busy` split as (user, system, softirq).
fn core(cpu: u32, user: u64, system: u64, softirq: u64, idle: u64, net_rx: u64) -> CpuTicks {
    CpuTicks {
        cpu,
        user,
        system,
        softirq,
        idle,
        net_rx,
        ..Default::default()
    }
}

#[test]
fn the_stall_watch_is_named_as_the_testers_own() {
    let c = CpuLoad {
        cpu: 1,
        busy_pct: 100.0,
        system_pct: 96.0,
        threads: vec![
            ThreadLoad {
                role: "dut".into(),
                name: "lr-stall1".into(),
                cpu_pct: 4.0,
            },
            ThreadLoad {
                role: "dut".into(),
                name: "lr-agent".into(),
                cpu_pct: 2.0,
            },
        ],
        ..CpuLoad::default()
    };
    let e = evidence(&c);
    assert!(
        e.ends_with("with linerate's stall watch at 4 %, dut's lr-agent at 2 %"),
        "{e}"
    );
}

fn thread(tid: u32, name: &str, ticks: u64, cpu: u32) -> ThreadTicks {
    ThreadTicks {
        tid,
        name: name.into(),
        utime: ticks / 4,
        stime: ticks - ticks / 4,
        cpu,
    }
}

fn snap(per_cpu: Vec<CpuTicks>, threads: Vec<ThreadTicks>) -> Snapshot {
    Snapshot {
        per_cpu,
        threads,
        ..Default::default()
    }
}

/// A 10 s test (1000 ticks per core) on two cores.
fn before() -> Snapshot {
    snap(
        vec![
            core(0, 1000, 1000, 100, 50_000, 10),
            core(1, 1000, 500, 100, 50_000, 10),
        ],
        vec![thread(7, "linerate", 5, 1)],
    )
}

#[test]
fn full_sender_core_names_the_sender() {
    let b = before();
    // CPU0: 580 softirq + 420 system ticks, no idle: full. The sender
    // thread (started after the first snapshot) used 970 ticks there.
    let a = snap(
        vec![
            core(0, 1000, 1420, 680, 50_000, 12_000_010),
            core(1, 1100, 600, 150, 50_750, 10),
        ],
        vec![
            thread(7, "linerate", 6, 1),
            thread(9, "lr-udp-send", 970, 0),
        ],
    );
    let sink_b = snap(b.per_cpu.clone(), vec![]);
    let sink_a = snap(a.per_cpu.clone(), vec![thread(11, "lr-udp-recv", 200, 1)]);
    let agents = [
        AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: &b,
            after: &a,
        },
        // Same host: its per-core times are not counted twice.
        AgentCpu {
            host: "lab".into(),
            role: "sink".into(),
            before: &sink_b,
            after: &sink_a,
        },
    ];
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.host_cpus.len(), 2, "one host, two cores");
    let c0 = &v.host_cpus[0];
    assert_eq!(c0.busy_pct, 100.0);
    assert_eq!(c0.softirq_pct, 58.0);
    assert_eq!(c0.system_pct, 42.0);
    assert_eq!(c0.net_rx_per_s, 1_200_000.0);
    assert_eq!(c0.threads[0].name, "lr-udp-send");
    assert_eq!(c0.threads[0].role, "gen");
    assert_eq!(c0.threads[0].cpu_pct, 97.0);
    let c1 = &v.host_cpus[1];
    assert_eq!(c1.busy_pct, 25.0);
    assert_eq!(c1.threads[0].name, "lr-udp-recv");
    assert_eq!(v.kind, BottleneckKind::TesterSender);
    assert_eq!(v.cpu, Some(0));
    assert!(
        v.verdict
            .starts_with("CPU0 100 %: 58 % softirq (NET_RX 1.2 M/s), 42 % system"),
        "{}",
        v.verdict
    );
    assert!(
        v.verdict.contains("with gen's lr-udp-send at 97 %"),
        "{}",
        v.verdict
    );
    assert!(
        v.verdict
            .ends_with("the tester's sender core is the limit (gen lr-udp-send)"),
        "{}",
        v.verdict
    );
}

/// The lab's live-engine case: the sender core is full generating,
/// the DUT's forwarding fills the other core, and most frames are lost
/// at the DUT. The frames name the DUT, not the busy sender.
#[test]
fn frames_lost_at_the_dut_name_the_dut_not_the_full_sender() {
    let (b, a) = sender_and_dut_full();
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "gen".into(),
        before: &b,
        after: &a,
    }];
    let dut = Traffic {
        offered: 13_000_000,
        dut_lost: 12_300_000,
        tester_drops: 0,
        received: 700_000,
        ..Default::default()
    };
    let v = analyse(&agents, 10.0, Some(dut), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::Dut, "{}", v.verdict);
    assert_eq!(v.cpu, Some(1), "the DUT's core, not the sender's");
    assert!(v.verdict.contains("12300000 of 13000000"), "{}", v.verdict);
    // The same cores with the loss at the tester's own receiver.
    let rx = Traffic {
        offered: 13_000_000,
        dut_lost: 0,
        tester_drops: 12_000_000,
        received: 1_000_000,
        ..Default::default()
    };
    let v = analyse(&agents, 10.0, Some(rx), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::TesterReceiver, "{}", v.verdict);
    // Loss within counting noise leaves the cores to decide.
    let noise = Traffic {
        offered: 13_000_000,
        dut_lost: 150,
        tester_drops: 0,
        received: 12_999_850,
        ..Default::default()
    };
    let v = analyse(&agents, 10.0, Some(noise), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::TesterSender, "{}", v.verdict);
}

/// Issue 22: the loss of a test fell while the sink's link to the DUT
/// was down. The verdict names that link, not the DUT's forwarding nor
/// the full sender core; loss mostly elsewhere still names the DUT.
#[test]
fn issue_22_loss_while_a_link_was_down_names_the_link() {
    let (b, a) = sender_and_dut_full();
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "gen".into(),
        before: &b,
        after: &a,
    }];
    let link = LinkDown {
        role: "sink".into(),
        ifname: "lrs0".into(),
    };
    let down = Traffic {
        offered: 180_000,
        dut_lost: 41_000,
        received: 139_000,
        link_down_lost: 40_500,
        links_down: vec![link.clone()],
        ..Default::default()
    };
    let v = analyse(&agents, 9.0, Some(down.clone()), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::LinkDown, "{}", v.verdict);
    assert!(v.verdict.contains("lrs0 at the sink"), "{}", v.verdict);
    assert!(v.verdict.contains("40500 of 180000"), "{}", v.verdict);
    assert_eq!((v.host.as_str(), v.cpu), ("sink", None));
    // Most of the loss outside the marked intervals: the DUT.
    let elsewhere = Traffic {
        dut_lost: 100_000,
        received: 80_000,
        ..down.clone()
    };
    let v = analyse(&agents, 9.0, Some(elsewhere), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::Dut, "{}", v.verdict);
    // A link down with loss within counting noise decides nothing.
    let blip = Traffic {
        dut_lost: 150,
        link_down_lost: 150,
        received: 179_850,
        ..down
    };
    let v = analyse(&agents, 9.0, Some(blip), None).unwrap();
    assert_ne!(v.kind, BottleneckKind::LinkDown, "{}", v.verdict);
}

#[test]
fn nothing_full_says_so_and_names_the_busiest() {
    let b = before();
    let a = snap(
        vec![
            core(0, 1100, 1100, 200, 50_700, 10),
            core(1, 1300, 630, 300, 50_370, 500_010),
        ],
        vec![thread(9, "lr-udp-send", 250, 0)],
    );
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "gen".into(),
        before: &b,
        after: &a,
    }];
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.kind, BottleneckKind::NoneSaturated);
    assert_eq!(v.cpu, Some(1));
    assert!(v.verdict.starts_with("no core saturated (busiest CPU1 63 %: 30 % user, 20 % softirq (NET_RX 50 k/s), 13 % system)"), "{}", v.verdict);
    assert!(v
        .verdict
        .ends_with("the limit is elsewhere (the DUT or the link)"));
}

#[test]
fn full_softirq_core_without_linerate_is_packet_processing() {
    let b = before();
    let a = snap(
        vec![
            core(0, 1010, 1100, 1000, 50_000, 900_010),
            core(1, 1100, 600, 150, 50_750, 10),
        ],
        vec![],
    );
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "dut".into(),
        before: &b,
        after: &a,
    }];
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.kind, BottleneckKind::Softirq);
    assert!(
        v.verdict.contains("packet processing (softirq) on CPU0"),
        "{}",
        v.verdict
    );
}

#[test]
fn receiver_core_and_hosts_apart() {
    let b = before();
    let a = snap(
        vec![
            core(0, 1000, 1100, 200, 50_800, 10),
            core(1, 1400, 900, 300, 50_000, 10),
        ],
        vec![thread(12, "lr-tcp-recv", 800, 1)],
    );
    let other_b = before();
    let other_a = snap(
        vec![
            core(0, 1100, 1100, 200, 50_700, 10),
            core(1, 1100, 600, 150, 50_750, 10),
        ],
        vec![],
    );
    let agents = [
        AgentCpu {
            host: "a".into(),
            role: "gen".into(),
            before: &other_b,
            after: &other_a,
        },
        AgentCpu {
            host: "b".into(),
            role: "sink".into(),
            before: &b,
            after: &a,
        },
    ];
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.host_cpus.len(), 4);
    assert_eq!(v.kind, BottleneckKind::TesterReceiver);
    assert_eq!((v.host.as_str(), v.cpu), ("b", Some(1)));
    assert!(v.verdict.starts_with("b CPU1 100 %"), "{}", v.verdict);
}

#[test]
fn a_shared_core_is_called_out() {
    let b = before();
    // CPU0 full, but the sender got 300 of its 1000 ticks and softirq 100:
    // the other 600 belong to someone else.
    let a = snap(
        vec![
            core(0, 1650, 1250, 200, 50_000, 10),
            core(1, 1100, 600, 150, 50_750, 10),
        ],
        vec![thread(9, "lr-udp-send", 300, 0)],
    );
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "gen".into(),
        before: &b,
        after: &a,
    }];
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.kind, BottleneckKind::TesterSender);
    assert_eq!(v.host_cpus[0].other_pct, 60.0);
    assert!(
        v.verdict.contains("60 % of it went to other processes"),
        "{}",
        v.verdict
    );
}

#[test]
fn old_agents_give_no_verdict() {
    let s = Snapshot::default();
    let agents = [AgentCpu {
        host: "x".into(),
        role: "gen".into(),
        before: &s,
        after: &s,
    }];
    assert!(analyse(&agents, 1.0, None, None).is_none());
}

/// The lab's live-engine cores: the sender fills CPU0, the DUT's
/// forwarding CPU1.
fn sender_and_dut_full() -> (Snapshot, Snapshot) {
    let a = snap(
        vec![
            core(0, 1000, 1420, 680, 50_000, 10),
            core(1, 1100, 1530, 150, 50_000, 10),
        ],
        vec![thread(9, "lr-udp-send", 970, 0)],
    );
    (before(), a)
}

/// The lab's tester ("gen") and a DUT in a VM ("dut-vm"), each with its
/// snapshots before and after.
fn gen_and_vm<'a>(
    b: &'a Snapshot,
    a: &'a Snapshot,
    gb: &'a Snapshot,
    ga: &'a Snapshot,
) -> [AgentCpu<'a>; 2] {
    [
        AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: b,
            after: a,
        },
        AgentCpu {
            host: "dut-vm".into(),
            role: "dut".into(),
            before: gb,
            after: ga,
        },
    ]
}

/// A DUT in a VM (TCG): the tester's sender core is full, the guest's
/// own /proc/stat shows its one CPU half idle, but qemu's vCPU thread
/// on the host ran the whole test. Frames were lost at the DUT: the
/// verdict names the DUT's vCPU, never the tester's full core.
#[test]
fn a_saturated_vcpu_names_the_virtual_dut() {
    let (b, a) = sender_and_dut_full();
    let guest = |idle: u64, vcpu_ticks: u64| Snapshot {
        per_cpu: vec![core(0, 100, 200, 100, idle, 10)],
        vcpus: vec![thread(4242, "CPU 0/TCG", vcpu_ticks, 1)],
        ..Default::default()
    };
    let (gb, ga) = (guest(1000, 300), guest(1500, 1290));
    let agents = gen_and_vm(&b, &a, &gb, &ga);
    let lost = Traffic {
        offered: 13_000_000,
        dut_lost: 12_300_000,
        received: 700_000,
        ..Default::default()
    };
    let v = analyse_with_dut(&agents, 10.0, Some(lost.clone()), None, Some("dut")).unwrap();
    assert_eq!(v.kind, BottleneckKind::Dut, "{}", v.verdict);
    assert_eq!(
        (v.host.as_str(), v.cpu),
        ("dut-vm", Some(0)),
        "{}",
        v.verdict
    );
    assert!(
        v.verdict
            .starts_with("the DUT is the limit: 12300000 of 13000000"),
        "{}",
        v.verdict
    );
    assert!(
        v.verdict.ends_with(
            "DUT vCPU 0 (qemu thread CPU 0/TCG, tid 4242 on host CPU1) 99 % busy: the \
             virtual DUT's forwarding is the limit"
        ),
        "{}",
        v.verdict
    );
    assert!(
        !v.verdict.contains("lr-udp-send") && !v.verdict.contains("tester"),
        "never the tester's core: {}",
        v.verdict
    );
    assert_eq!(v.vcpus.len(), 1);
    assert!(v.vcpus[0].dut);
    assert_eq!(v.vcpus[0].cpu_pct, 99.0);
    // A vCPU with room to spare is recorded, but names nothing.
    let (gb, ga) = (guest(1000, 300), guest(1500, 600));
    let idle = gen_and_vm(&b, &a, &gb, &ga);
    let v = analyse_with_dut(&idle, 10.0, Some(lost.clone()), None, Some("dut")).unwrap();
    assert_eq!(v.kind, BottleneckKind::Dut, "{}", v.verdict);
    assert!(!v.verdict.contains("vCPU"), "{}", v.verdict);
    assert_eq!(v.vcpus[0].cpu_pct, 30.0);
    // A full vCPU of a guest that is not the DUT names nothing either.
    let v = analyse_with_dut(&agents, 10.0, Some(lost), None, Some("gen")).unwrap();
    assert!(!v.verdict.contains("vCPU"), "{}", v.verdict);
    assert!(!v.vcpus[0].dut);
}

/// Two cores with the sender's full: the 200 kpps case of issue 23.
fn full_sender(threads: Vec<ThreadTicks>) -> (Snapshot, Snapshot) {
    let a = snap(
        vec![
            core(0, 1000, 1420, 680, 50_000, 10),
            core(1, 1100, 600, 150, 50_750, 10),
        ],
        threads,
    );
    (before(), a)
}

#[test]
fn issue_23_a_met_rate_is_limited_by_the_rate_not_the_sender() {
    let (b, a) = full_sender(vec![thread(9, "lr-udp-send", 970, 0)]);
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "gen".into(),
        before: &b,
        after: &a,
    }];
    // 199,999 of 200,000 pps asked over 10 s, no loss.
    let met = Traffic {
        offered: 1_999_990,
        asked: 2_000_000,
        received: 1_999_990,
        ..Default::default()
    };
    let v = analyse(&agents, 10.0, Some(met.clone()), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::RateLimited, "{}", v.verdict);
    assert!(
        v.verdict
            .starts_with("limited by --rate: the asked rate was met"),
        "{}",
        v.verdict
    );
    assert!(
        !v.verdict.contains("sender core is the limit"),
        "{}",
        v.verdict
    );
    // A real shortfall with the sender core full: the tester.
    let short = Traffic {
        offered: 1_500_000,
        received: 1_500_000,
        ..met.clone()
    };
    let v = analyse(&agents, 10.0, Some(short), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::TesterSender, "{}", v.verdict);
    // Everything lost: no core is blamed, the path is.
    let none = Traffic {
        dut_lost: 1_999_990,
        received: 0,
        ..met
    };
    let v = analyse(&agents, 10.0, Some(none), None).unwrap();
    assert_eq!(v.kind, BottleneckKind::NothingArrived, "{}", v.verdict);
    assert!(!v.verdict.contains("sender"), "{}", v.verdict);
}

#[test]
fn issue_23_a_shortfall_within_counting_noise_is_not_a_limit() {
    // 1 kpps for 3 s, one packet short: noise.
    assert!(!sender_short(2_999, 3_000));
    // Below 10 packets short is noise whatever the share.
    assert!(!sender_short(91, 100));
    // 10 short but under 1 %: noise.
    assert!(!sender_short(599_000, 600_000));
    // Both: a limit.
    assert!(sender_short(590_000, 600_000));
    assert!(sender_short(80, 100));
    // Unpaced (nothing asked) is never short; more than asked is not.
    assert!(!sender_short(5, 0));
    assert!(!sender_short(3_001, 3_000));
}

#[test]
fn issue_23_linerate_threads_that_moved_are_not_another_process() {
    let b = before();
    // CPU1 full with nothing listed; the receiver's 950 ticks are
    // listed on CPU0 (where it was last seen), which was only 20 % busy.
    let a = snap(
        vec![
            core(0, 1100, 1100, 100, 50_800, 10),
            core(1, 1600, 1000, 100, 50_000, 10),
        ],
        vec![thread(11, "lr-udp-recv", 950, 0)],
    );
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "sink".into(),
        before: &b,
        after: &a,
    }];
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.cpu, Some(1));
    assert_eq!(v.kind, BottleneckKind::TesterReceiver, "{}", v.verdict);
    assert!(
        v.verdict.contains("linerate's own sink lr-udp-recv"),
        "{}",
        v.verdict
    );
    assert!(!v.verdict.contains("other than linerate"), "{}", v.verdict);
    assert!(!v.verdict.contains("other processes"), "{}", v.verdict);
}
