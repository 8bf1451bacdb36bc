//! Fixture hosts under `tests/fixtures/<name>/`, each reproducing one case
//! users reported, with the exact finding ids and key evidence expected.
//! Also: the live host, capture round trips, odd files and the CLI.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use linerate_doctor::{
    capture, exit_code, inspect, render_text, run_cli, run_cli_to, DoctorArgs, Finding, Options,
    Report, Severity,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn opts(name: &str) -> Options {
    Options {
        root: fixture(name),
        ..Options::default()
    }
}

fn ids(report: &Report) -> Vec<&str> {
    report.findings.iter().map(|f| f.id.as_str()).collect()
}

fn finding<'a>(report: &'a Report, id: &str) -> &'a Finding {
    report
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id} in {:?}", ids(report)))
}

/// The evidence pairs of a finding, for exact comparison.
fn evidence(f: &Finding) -> Vec<(&str, &str)> {
    f.evidence
        .iter()
        .map(|e| (e.path.as_str(), e.value.as_str()))
        .collect()
}

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "linerate-doctor-test-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("creating a temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn parse_args(argv: &[&str]) -> DoctorArgs {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        doctor: DoctorArgs,
    }
    let mut full = vec!["doctor"];
    full.extend_from_slice(argv);
    Cli::try_parse_from(full).expect("test flags parse").doctor
}

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

#[test]
fn live_host_inspects_without_error() {
    let report = inspect(&Options::default()).unwrap();
    assert_eq!(report.root, "/");
    let text = render_text(&report, false);
    assert!(text.starts_with("linerate doctor: /"));
    serde_json::to_string(&report).unwrap();
}

fn extract(archive: &Path, into: &Path) {
    let file = fs::File::open(archive).expect("opening the capture");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.unpack(into).expect("extracting the capture");
}

fn assert_round_trip(o: &Options, name: &str) {
    let dir = TempDir::new(name);
    let archive = dir.0.join("host.tar.gz");
    let summary = capture(o, &archive).expect("capture");
    assert!(summary.files > 0);
    // Atomic write: only the archive is left, no temporary file.
    let names: Vec<_> = fs::read_dir(&dir.0)
        .expect("listing the temp dir")
        .map(|e| e.expect("dir entry").file_name())
        .collect();
    assert_eq!(names, ["host.tar.gz"]);

    let root = dir.0.join("root");
    fs::create_dir(&root).expect("creating the extraction dir");
    extract(&archive, &root);
    let replay = inspect(&Options {
        root: root.clone(),
        ..o.clone()
    })
    .expect("inspecting the extracted capture");
    assert_eq!(replay.findings, summary.report.findings, "{name}");
    assert_eq!(replay.facts, summary.report.facts, "{name}");
    assert_eq!(replay.skipped, summary.report.skipped, "{name}");
}

#[test]
fn capture_round_trips_fixtures() {
    let before = inspect(&opts("two-ccd")).unwrap();
    assert_round_trip(
        &Options {
            cpus: Some(vec![2]),
            ..opts("two-ccd")
        },
        "two-ccd",
    );
    assert_round_trip(&opts("connectx5-x4"), "connectx5");
    assert_round_trip(&opts("hot-nic"), "hot-nic");
    assert_round_trip(&opts("irqbalance"), "irqbalance");
    // The capture reproduces the fixture's own report too.
    let dir = TempDir::new("two-ccd-plain");
    let archive = dir.0.join("c.tar.gz");
    capture(&opts("two-ccd"), &archive).unwrap();
    extract(&archive, &dir.0);
    let replay = inspect(&Options {
        root: dir.0.clone(),
        ..Options::default()
    })
    .unwrap();
    assert_eq!(replay.findings, before.findings);
}

#[test]
fn capture_round_trips_the_live_host() {
    assert_round_trip(&Options::default(), "live");
}

/// Copies a tree, then replaces every file with junk: doctor must still
/// produce a report, never an error or a panic.
#[test]
fn odd_files_do_not_panic() {
    fn copy(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for e in fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                fs::copy(e.path(), target).unwrap();
            }
        }
    }
    fn spoil(dir: &Path, junk: &[u8]) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                spoil(&e.path(), junk);
            } else {
                fs::write(e.path(), junk).unwrap();
            }
        }
    }
    let junks: [&[u8]; 6] = [
        b"",
        b"\xff\xfe\x00garbage",
        b"-1\n",
        b"99999999999999999999999 GT/s\n",
        b"0-4000000000\n",
        b"1:\n:\n\n 2: 3 4-edge ,,\n",
    ];
    for (i, junk) in junks.iter().enumerate() {
        let dir = TempDir::new(&format!("odd-{i}"));
        copy(&fixture("two-ccd"), &dir.0);
        spoil(&dir.0, junk);
        let report = inspect(&Options {
            root: dir.0.clone(),
            cpus: Some(vec![2]),
            target_rate_bps: Some(1e9),
            rtt: Some(Duration::from_millis(1)),
            ..Options::default()
        })
        .unwrap();
        render_text(&report, true);
    }
}

#[test]
fn bad_cpus_list_exits_2_with_a_clear_message() {
    let args = parse_args(&["--root", "/", "--cpus", "0-x"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run_cli_to(&args, &mut out, &mut err), 2);
    let err = String::from_utf8(err).unwrap();
    assert!(out.is_empty());
    assert!(err.contains("invalid --cpus `0-x`"), "{err}");
    assert!(err.contains("not a number"), "{err}");
    assert!(err.contains("0-3,8"), "{err}");
    // The stderr-writing entry point agrees on the status.
    assert_eq!(run_cli(&args, &mut Vec::new()), 2);
}

#[test]
fn cli_prints_json_and_returns_the_exit_code() {
    let root = fixture("connectx5-x4");
    let args = parse_args(&["--root", root.to_str().unwrap(), "--json"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run_cli_to(&args, &mut out, &mut err), 1);
    let report: Report = serde_json::from_slice(&out).unwrap();
    assert_eq!(ids(&report), ["pcie_link_downgraded"]);

    let healthy = fixture("healthy");
    let args = parse_args(&["--root", healthy.to_str().unwrap(), "--color", "never"]);
    let mut out = Vec::new();
    assert_eq!(run_cli_to(&args, &mut out, &mut Vec::new()), 0);
    assert!(String::from_utf8(out).unwrap().contains("no findings"));
}

#[test]
fn cli_unknown_nic_and_root_exit_2() {
    let root = fixture("healthy");
    let args = parse_args(&["--root", root.to_str().unwrap(), "--nic", "eht0"]);
    let mut err = Vec::new();
    assert_eq!(run_cli_to(&args, &mut Vec::new(), &mut err), 2);
    let err = String::from_utf8(err).unwrap();
    assert!(err.contains("no network interface `eht0`"), "{err}");
    assert!(err.contains("eth0, lo"), "{err}");

    let args = parse_args(&["--root", "/nonexistent/doctor-root"]);
    let mut err = Vec::new();
    assert_eq!(run_cli_to(&args, &mut Vec::new(), &mut err), 2);
    assert!(String::from_utf8(err).unwrap().contains("--root"));
}

#[test]
fn cli_capture_writes_the_archive() {
    let dir = TempDir::new("cli-capture");
    let archive = dir.0.join("host.tar.gz");
    let root = fixture("hot-nic");
    let args = parse_args(&[
        "--root",
        root.to_str().unwrap(),
        "--capture",
        archive.to_str().unwrap(),
        "--json",
    ]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run_cli_to(&args, &mut out, &mut err), 1);
    assert!(archive.is_file());
    assert!(String::from_utf8(err).unwrap().contains("wrote"));
    let report: Report = serde_json::from_slice(&out).unwrap();
    assert_eq!(ids(&report), ["nic_temperature_high"]);
}

/// Copies a fixture tree into `to` (plain files and directories).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("creating a copy's directory");
    for e in fs::read_dir(from)
        .expect("listing a fixture directory")
        .flatten()
    {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).expect("copying a fixture file");
        }
    }
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
