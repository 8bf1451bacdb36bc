//! Fixture hosts under `tests/fixtures/<name>/`, each reproducing one case
//! users reported, with the exact finding ids and key evidence expected.
//! The live host, captures, odd files and the CLI are in `capture.rs`.

mod common;

use std::fs;
use std::time::Duration;

use common::{copy_tree, evidence, finding, fixture, ids, opts, TempDir};
use linerate_doctor::{exit_code, inspect, render_text, Options, Report, Severity};

#[test]
fn connectx5_x4_pcie_downgraded_is_critical() {
    let report = inspect(&opts("connectx5-x4")).unwrap();
    assert_eq!(ids(&report), ["pcie_link_downgraded"]);
    let f = finding(&report, "pcie_link_downgraded");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject.as_deref(), Some("eth0"));
    assert_eq!(
        evidence(f),
        [
            (
                "/sys/class/net/eth0/device/current_link_speed",
                "8.0 GT/s PCIe"
            ),
            ("/sys/class/net/eth0/device/current_link_width", "4"),
            (
                "/sys/class/net/eth0/device/max_link_speed",
                "16.0 GT/s PCIe"
            ),
            ("/sys/class/net/eth0/device/max_link_width", "16"),
        ]
    );
    assert!(
        f.impact
            .contains("PCIe 8 GT/s × 4 ≈ 31.5 Gbit/s usable, below the 100 Gbit/s link"),
        "{}",
        f.impact
    );
    assert!(f.title.contains("8 GT/s x4"), "{}", f.title);
    let pcie = report.facts.nics[0].pcie.as_ref().unwrap();
    assert_eq!(pcie.current_usable_gbps, 31.5);
    assert_eq!(pcie.max_usable_gbps, 252.1);
    assert_eq!(exit_code(&report), 1);
}

#[test]
fn two_ccd_irqs_spread_over_both_l3_domains() {
    let report = inspect(&opts("two-ccd")).unwrap();
    assert_eq!(ids(&report), ["irq_spread_across_l3"]);
    assert_eq!(
        report.facts.l3_domains,
        [vec![0, 1, 2, 3, 4, 5], vec![6, 7, 8, 9, 10, 11]]
    );
    let f = finding(&report, "irq_spread_across_l3");
    assert_eq!(f.severity, Severity::Warning);
    let ev = evidence(f);
    // Each L3 domain, then one line per queue IRQ (97..=108 on CPUs 0..=11).
    assert_eq!(ev.len(), 2 + 12);
    assert_eq!(
        ev[0],
        (
            "/sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list",
            "0-5"
        )
    );
    assert_eq!(
        ev[1],
        (
            "/sys/devices/system/cpu/cpu6/cache/index3/shared_cpu_list",
            "6-11"
        )
    );
    assert_eq!(ev[2], ("/proc/irq/97/effective_affinity_list", "0"));
    assert_eq!(ev[13], ("/proc/irq/108/effective_affinity_list", "11"));
    assert!(
        f.title.contains("2 L3 domains (CPUs 0-5 | 6-11)"),
        "{}",
        f.title
    );
    // The async (control) IRQ 96 is not a queue.
    assert!(!ev.iter().any(|(p, _)| p.contains("/96/")));
    assert_eq!(report.facts.nics[0].irqs.len(), 12);
}

#[test]
fn queue_irqs_all_on_one_core() {
    // The two-ccd host with every queue IRQ pinned to CPU 0 (seed 003's
    // single-core buckets).
    let report = inspect(&opts("irqs-one-core")).unwrap();
    assert_eq!(ids(&report), ["irq_single_core"]);
    let f = finding(&report, "irq_single_core");
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.title.contains("all 12 queue IRQs are delivered to CPU 0"),
        "{}",
        f.title
    );
    let ev = evidence(f);
    assert_eq!(ev.len(), 12);
    assert_eq!(ev[0], ("/proc/irq/97/effective_affinity_list", "0"));
    assert_eq!(ev[11], ("/proc/irq/108/effective_affinity_list", "0"));
    // Spread IRQs (the unmodified host) are not flagged.
    let spread = inspect(&opts("two-ccd")).unwrap();
    assert!(!ids(&spread).contains(&"irq_single_core"));
}

#[test]
fn two_ccd_irq_on_the_test_core() {
    let report = inspect(&Options {
        cpus: Some(vec![2]),
        ..opts("two-ccd")
    })
    .unwrap();
    assert_eq!(ids(&report), ["irq_on_test_cpu", "irq_spread_across_l3"]);
    let f = finding(&report, "irq_on_test_cpu");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(evidence(f), [("/proc/irq/99/effective_affinity_list", "2")]);
    assert!(f.title.contains("IRQ 99"), "{}", f.title);
    // Suggests the other cores of the test core's L3 domain.
    assert!(f.fix.contains("cores 0-1,3-5"), "{}", f.fix);
}

#[test]
fn dual_socket_nic_on_the_other_numa_node() {
    let report = inspect(&Options {
        cpus: Some(vec![0, 1, 2, 3]),
        ..opts("dual-socket")
    })
    .unwrap();
    assert_eq!(ids(&report), ["irq_not_in_test_l3", "nic_numa_remote"]);
    let f = finding(&report, "nic_numa_remote");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        evidence(f),
        [
            ("/sys/class/net/eth0/device/numa_node", "1"),
            ("/sys/devices/system/node/node1/cpulist", "8-15"),
        ]
    );
    assert!(f.fix.contains("--cpus 8-15"), "{}", f.fix);
    let irq = finding(&report, "irq_not_in_test_l3");
    assert_eq!(irq.evidence.len(), 1 + 16);
    assert_eq!(
        evidence(irq)[0],
        (
            "/sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list",
            "0-7"
        )
    );
    // Without --cpus the host itself is fine: IRQs local to the NIC's node.
    let plain = inspect(&opts("dual-socket")).unwrap();
    assert_eq!(ids(&plain), Vec::<&str>::new());
    assert_eq!(plain.facts.nics[0].numa_node, Some(1));
}

#[test]
fn vm_without_aes_ni_blames_the_hypervisor() {
    let report = inspect(&opts("vm-no-aes")).unwrap();
    assert_eq!(ids(&report), ["aes_ni_missing"]);
    let f = finding(&report, "aes_ni_missing");
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.title.contains("the hypervisor hides it"), "{}", f.title);
    assert_eq!(
        evidence(f),
        [
            ("/proc/cpuinfo", "flags: no `aes`"),
            ("/proc/cpuinfo", "flags: hypervisor")
        ]
    );
    assert_eq!(report.facts.cpu_aes, Some(false));
    assert_eq!(report.facts.cpu_hypervisor, Some(true));
}

#[test]
fn hot_nic_above_its_critical_temperature() {
    let report = inspect(&opts("hot-nic")).unwrap();
    assert_eq!(ids(&report), ["nic_temperature_high"]);
    let f = finding(&report, "nic_temperature_high");
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.subject.as_deref(), Some("eth0"));
    assert_eq!(
        evidence(f),
        [
            ("/sys/class/hwmon/hwmon0/temp1_input", "74000"),
            ("/sys/class/hwmon/hwmon0/temp1_crit", "70000"),
        ]
    );
    assert!(f.title.contains("74.0 °C"), "{}", f.title);
    // The NVMe sensor is not a NIC or CPU and is ignored.
    assert!(report.facts.temperatures.iter().all(|t| t.sensor != "nvme"));
}

#[test]
fn irqbalance_process_is_found() {
    let report = inspect(&opts("irqbalance")).unwrap();
    assert_eq!(ids(&report), ["irqbalance_running"]);
    let f = finding(&report, "irqbalance_running");
    assert_eq!(evidence(f), [("/proc/123/comm", "irqbalance")]);
    assert_eq!(report.facts.irqbalance_running, Some(true));
}

#[test]
fn healthy_host_has_no_findings() {
    let all_checks = Options {
        nics: vec!["eth0".into()],
        // IRQs are pinned to 0-3; the test runs beside them in the same L3.
        cpus: Some(vec![4, 5, 6, 7]),
        target_rate_bps: Some(100e9),
        rtt: Some(Duration::from_millis(1)),
        ..opts("healthy")
    };
    for o in [opts("healthy"), all_checks] {
        let report = inspect(&o).unwrap();
        assert_eq!(ids(&report), Vec::<&str>::new(), "{o:?}");
        assert_eq!(exit_code(&report), 0);
        let text = render_text(&report, false);
        assert!(text.contains("no findings"), "{text}");
    }
    let report = inspect(&opts("healthy")).unwrap();
    let f = &report.facts;
    assert_eq!(f.cpu_count, Some(8));
    assert_eq!(f.smt_active, Some(false));
    assert_eq!(f.irq_time_accounting, Some(true));
    assert_eq!(f.kernel_config_source.as_deref(), Some("/proc/config.gz"));
    assert_eq!(f.tcp.congestion_control.as_deref(), Some("bbr"));
    assert_eq!(f.tcp.tcp_rmem, Some([4096, 131072, 67108864]));
    let nic = &f.nics[0];
    assert_eq!(nic.name, "eth0");
    assert_eq!(nic.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(nic.pci_address.as_deref(), Some("0000:01:00.0"));
    assert_eq!((nic.speed_mbps, nic.mtu), (Some(100_000), Some(9000)));
    assert_eq!((nic.rx_queues, nic.irqs.len()), (Some(8), 8));
    assert_eq!(f.nics.len(), 1, "lo has no device and is not a NIC");
}

#[test]
fn buffers_below_the_bdp_and_unknown_rate_skip() {
    // 100 Gbit/s over 10 ms needs 125 MB in flight; the fixture allows 64 MiB.
    let report = inspect(&Options {
        target_rate_bps: Some(100e9),
        rtt: Some(Duration::from_millis(10)),
        ..opts("healthy")
    })
    .unwrap();
    assert_eq!(ids(&report), ["socket_buffer_below_bdp"]);
    assert_eq!(
        finding(&report, "socket_buffer_below_bdp").evidence.len(),
        4
    );
    let no_rtt = inspect(&Options {
        target_rate_bps: Some(100e9),
        ..opts("healthy")
    })
    .unwrap();
    assert!(no_rtt.skipped.iter().any(|s| s.contains("--rtt")));
}

#[test]
fn text_report_is_sorted_and_complete() {
    let report = inspect(&Options {
        cpus: Some(vec![2]),
        ..opts("two-ccd")
    })
    .unwrap();
    let text = render_text(&report, false);
    assert!(text.contains("WARNING  eth0: IRQ 99 runs on the test core 2 [irq_on_test_cpu]"));
    assert!(text.contains("evidence: /proc/irq/99/effective_affinity_list = 2"));
    assert!(text.contains("impact:"));
    assert!(text.contains("fix:"));
    let hot = render_text(&inspect(&opts("hot-nic")).unwrap(), false);
    assert!(hot.contains("CRITICAL"), "{hot}");
}

#[test]
fn report_json_round_trips() {
    let report = inspect(&opts("connectx5-x4")).unwrap();
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains("\"severity\":\"critical\""));
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report);
}

/// A guest's virtio_net NIC: its queue IRQs are named after the virtio
/// device (`virtio2-input.0`), not the NIC, and doctor finds that device
/// by the NIC's directory under /sys/bus/virtio/devices/virtio2/net/; its
/// config IRQ carries no packets and is left out. Without the bus entry
/// the IRQs cannot be mapped and the skip says why.
#[test]
fn virtio_net_irqs_map_to_their_nic() {
    let tmp = TempDir::new("virtio");
    let root = tmp.0.join("host");
    copy_tree(&fixture("vm-no-aes"), &root);
    let nic = root.join("sys/class/net/eth0/device");
    fs::write(
        nic.join("uevent"),
        "DRIVER=virtio_net\nMODALIAS=virtio:d00000001v00001AF4\n",
    )
    .expect("writing the fixture copy");
    for f in [
        "current_link_speed",
        "current_link_width",
        "max_link_speed",
        "max_link_width",
    ] {
        let _ = fs::remove_file(nic.join(f));
    }
    let irqs = fs::read_to_string(root.join("proc/interrupts")).expect("writing the fixture copy");
    let mut renamed = irqs.replace("mlx5_async0@pci:0000:01:00.0", "virtio2-config");
    for q in 0..8 {
        let kind = if q % 2 == 0 { "input" } else { "output" };
        renamed = renamed.replace(
            &format!("mlx5_comp{q}@pci:0000:01:00.0"),
            &format!("virtio2-{kind}.{}", q / 2),
        );
    }
    fs::write(root.join("proc/interrupts"), renamed).expect("writing the fixture copy");
    let opts = || Options {
        root: root.clone(),
        ..Options::default()
    };

    let before = inspect(&opts()).expect("inspecting the copy");
    assert!(before.facts.nics[0].irqs.is_empty());
    let skip = before
        .skipped
        .iter()
        .find(|s| s.contains("irq placement eth0"))
        .expect("a skip for eth0's IRQs");
    assert!(
        skip.contains("virtio-net names them after its virtio device"),
        "{skip}"
    );

    fs::create_dir_all(root.join("sys/bus/virtio/devices/virtio1/block"))
        .expect("writing the fixture copy");
    fs::create_dir_all(root.join("sys/bus/virtio/devices/virtio2/net/eth0"))
        .expect("writing the fixture copy");
    let after = inspect(&opts()).expect("inspecting the copy");
    let irqs: Vec<u32> = after.facts.nics[0].irqs.iter().map(|i| i.irq).collect();
    assert_eq!(
        irqs,
        (97..=104).collect::<Vec<_>>(),
        "{:?}",
        after.facts.nics[0]
    );
    assert!(!after
        .skipped
        .iter()
        .any(|s| s.contains("irq placement eth0")));
}
