//! Verdicts in the 2-core lab with its roles (issue 33): which cores are
//! the tester's and which the DUT's, and a row that is never both.

use super::*;

/// The 2-core lab's layout as its agents report it: the generator's
/// sender and the gen and sink NAPI threads on CPU0, the DUT's NAPI
/// threads on CPU1. `cpu0`/`cpu1` are the cores' ticks after the test
/// (before is [`before`]); the sender used `send` ticks on CPU0.
struct Lab {
    gen_b: Snapshot,
    gen_a: Snapshot,
    dut_b: Snapshot,
    dut_a: Snapshot,
    sink_b: Snapshot,
    sink_a: Snapshot,
}

fn napi(dev: &str, cpu: u32) -> NapiTime {
    NapiTime {
        dev: dev.into(),
        pid: 100,
        cpus: vec![cpu],
        run_ns: None,
        ticks: 0,
    }
}

impl Lab {
    fn new(cpu0: CpuTicks, cpu1: CpuTicks, send: u64) -> Lab {
        let b = before();
        let laid = |devs: &[(&str, u32)], mut s: Snapshot| {
            s.napi = devs.iter().map(|(d, c)| napi(d, *c)).collect();
            s
        };
        Lab {
            gen_b: laid(&[("gen0", 0)], b.clone()),
            gen_a: laid(
                &[("gen0", 0)],
                snap(vec![cpu0, cpu1], vec![thread(9, "lr-udp-send", send, 0)]),
            ),
            dut_b: laid(&[("dut0", 1), ("dut1", 1)], Snapshot::default()),
            dut_a: laid(&[("dut0", 1), ("dut1", 1)], Snapshot::default()),
            sink_b: laid(&[("sink0", 0)], Snapshot::default()),
            sink_a: laid(&[("sink0", 0)], Snapshot::default()),
        }
    }

    fn agents(&self) -> Vec<AgentCpu<'_>> {
        [
            ("gen", &self.gen_b, &self.gen_a),
            ("dut", &self.dut_b, &self.dut_a),
            ("sink", &self.sink_b, &self.sink_a),
        ]
        .into_iter()
        .map(|(role, before, after)| AgentCpu {
            host: "lab".into(),
            role: role.into(),
            before,
            after,
        })
        .collect()
    }

    fn analyse(&self, traffic: Option<Traffic>) -> Bottleneck {
        let agents = self.agents();
        let roles = CoreRoles::from_agents(&agents).expect("laid out");
        analyse(&agents, 10.0, traffic, Some(&roles)).unwrap()
    }
}

/// CPU0 full, mostly softirq (the sink's NAPI and the sender), the
/// sender thread under an engine's share; CPU1 (the DUT's) 40 %.
fn tester_core_full() -> Lab {
    Lab::new(
        core(0, 1050, 1300, 750, 50_000, 9_000_010),
        core(1, 1000, 800, 200, 50_600, 10),
        150,
    )
}

/// Texts by which a verdict makes the DUT the limit.
const DUT_BLAME: [&str; 4] = [
    "the DUT is the limit",
    "the DUT's receive and forwarding (its NAPI threads and softirq) is the limit",
    "— the DUT's forwarding in a namespace lab",
    "(the DUT or the link)",
];

fn blames_dut(v: &Bottleneck) -> bool {
    v.kind == BottleneckKind::Dut || DUT_BLAME.iter().any(|d| v.verdict.contains(d))
}

/// Issue 33 (b): in the 2-core lab CPU0 is the generator's and the
/// tester's receive NAPI core. Full of softirq, it was called "the
/// DUT's forwarding in a namespace lab"; with the lab's roles it is
/// the tester's, named so, and never the DUT's limit.
#[test]
fn issue_33_a_tester_core_is_never_called_the_dut_s_limit() {
    let lab = tester_core_full();
    let v = lab.analyse(None);
    assert_eq!(v.cpu, Some(0));
    assert_eq!(v.kind, BottleneckKind::TesterReceiver, "{}", v.verdict);
    assert!(
        v.verdict
            .starts_with("CPU0 (tester: generator and gen/sink NAPI) 100 %: 65 % softirq"),
        "{}",
        v.verdict
    );
    assert!(
        v.verdict.ends_with(
            "its packet processing (softirq) is the tester's own work, not the DUT's \
             forwarding: the tester is the limit"
        ),
        "{}",
        v.verdict
    );
    assert!(!blames_dut(&v), "{}", v.verdict);
    // Outside a lab (no layout) the wording stays as it was.
    let agents = lab.agents();
    let v = analyse(&agents, 10.0, None, None).unwrap();
    assert_eq!(v.kind, BottleneckKind::Softirq, "{}", v.verdict);
    assert!(
        v.verdict.contains(
            "packet processing (softirq) on CPU0 is the limit — the DUT's forwarding in \
             a namespace lab, or interrupt placement"
        ),
        "{}",
        v.verdict
    );
    // Frames lost at the DUT name the DUT's core, not the full tester's.
    let lost = Traffic {
        offered: 9_000_000,
        dut_lost: 3_000_000,
        received: 6_000_000,
        ..Default::default()
    };
    let v = lab.analyse(Some(lost));
    assert_eq!(
        (v.kind, v.cpu),
        (BottleneckKind::Dut, Some(1)),
        "{}",
        v.verdict
    );
    assert!(v.verdict.contains("; CPU1 (DUT) 40 %: "), "{}", v.verdict);
    assert!(!v.verdict.contains("CPU0"), "{}", v.verdict);
}

/// A full core of the DUT's alone is the DUT's forwarding, whether its
/// NAPI threads show as softirq or as system time (threaded NAPI),
/// and never "another process" sharing it.
#[test]
fn issue_33_a_full_dut_core_is_the_dut_s_forwarding() {
    for cpu1 in [
        core(1, 1000, 700, 900, 50_000, 10),
        core(1, 1000, 1400, 200, 50_000, 10),
    ] {
        let lab = Lab::new(core(0, 1100, 1200, 200, 50_600, 10), cpu1, 300);
        let v = lab.analyse(None);
        assert_eq!(
            (v.kind, v.cpu),
            (BottleneckKind::Softirq, Some(1)),
            "{}",
            v.verdict
        );
        assert!(v.verdict.starts_with("CPU1 (DUT) 100 %: "), "{}", v.verdict);
        assert!(
            v.verdict.ends_with(
                "the DUT's receive and forwarding (its NAPI threads and softirq) is the limit"
            ),
            "{}",
            v.verdict
        );
    }
}

/// Issue 33 (a): a row (here a test of one direction) whose sender
/// fell short carried "this row measures the tester" beside a verdict
/// making the DUT the limit. The row's rule ([`tester_limited`]) and
/// the verdict agree on every mix of shortfall, loss and full cores.
#[test]
fn issue_33_a_row_is_never_both_tester_and_dut() {
    let asked = 10_000_000;
    let traffics = [
        // Short, nothing lost: the tester's.
        (9_000_000, 0),
        // Short, a few frames lost at the DUT (counting noise in the
        // verdict's terms): the DUT's evidence at the rate offered.
        (9_000_000, 5),
        // Short, a quarter lost at the DUT: the DUT's.
        (9_000_000, 2_250_000),
        // The rate met, nothing lost.
        (10_000_000, 0),
    ];
    let layouts = [
        tester_core_full(),
        // CPU1 (the DUT's) full, CPU0 not.
        Lab::new(
            core(0, 1100, 1200, 200, 50_600, 10),
            core(1, 1000, 700, 900, 50_000, 10),
            300,
        ),
        // Nothing full.
        Lab::new(
            core(0, 1100, 1200, 200, 50_600, 10),
            core(1, 1000, 700, 300, 50_600, 10),
            300,
        ),
    ];
    for lab in &layouts {
        for with_roles in [true, false] {
            for (offered, dut_lost) in traffics {
                let t = Traffic {
                    offered,
                    asked,
                    dut_lost,
                    received: offered - dut_lost,
                    ..Default::default()
                };
                let v = if with_roles {
                    lab.analyse(Some(t))
                } else {
                    analyse(&lab.agents(), 10.0, Some(t), None).unwrap()
                };
                let row = tester_limited(offered, asked, dut_lost);
                let tester = matches!(
                    v.kind,
                    BottleneckKind::TesterSender | BottleneckKind::TesterReceiver
                );
                let case = format!("{offered} of {asked}, {dut_lost} lost: {}", v.verdict);
                assert!(!(row && blames_dut(&v)), "tester row, DUT verdict: {case}");
                assert_eq!(row, tester, "row and verdict disagree: {case}");
                if sender_short(offered, asked) && dut_lost > 0 {
                    assert_eq!(v.kind, BottleneckKind::Dut, "{case}");
                }
            }
        }
    }
}

/// The lab's record and its agents' snapshots give one layout; a
/// layout with an interface left to the kernel, or a DUT without NAPI
/// threads of its own, gives no roles.
#[test]
fn issue_33_roles_from_the_lab_record_and_from_its_agents_agree() {
    let n = |role: &str, dev: &str, cpu: usize| crate::model::lab::LabNapi {
        role: role.into(),
        dev: dev.into(),
        cpus: vec![cpu],
        error: None,
    };
    let mut cores = LabCores {
        generator: vec![0],
        dut: vec![1],
        tester_receive: vec![0],
        napi: vec![
            n("gen", "gen0", 0),
            n("dut", "dut0", 1),
            n("dut", "dut1", 1),
            n("sink", "sink0", 0),
        ],
        summary: String::new(),
    };
    let lab = tester_core_full();
    let agents = lab.agents();
    // The agents report the NAPI layout; the generator's core is where
    // its sender ran.
    let loads = analyse(&agents, 10.0, None, None).unwrap().host_cpus;
    let from_agents = CoreRoles::from_agents(&agents)
        .unwrap()
        .with_threads(&loads);
    let from_lab = CoreRoles::from_lab("lab", &cores).unwrap();
    for cpu in [0, 1] {
        let load = CpuLoad {
            host: "lab".into(),
            cpu,
            ..Default::default()
        };
        let label = |r: &CoreRoles| r.of(&load).map(CoreRole::label);
        assert_eq!(label(&from_lab), label(&from_agents), "CPU{cpu}");
    }
    let load0 = CpuLoad {
        host: "lab".into(),
        cpu: 0,
        ..Default::default()
    };
    assert_eq!(
        from_lab.of(&load0).map(CoreRole::label).as_deref(),
        Some("tester: generator and gen/sink NAPI")
    );
    cores.napi[1].error = Some("no threaded NAPI".into());
    assert_eq!(CoreRoles::from_lab("lab", &cores), None);
    let mut unlaid = tester_core_full();
    unlaid.dut_a.napi.clear();
    assert_eq!(CoreRoles::from_agents(&unlaid.agents()), None);
}
