//! Tests of the efficiency figures: cycles and energy per packet.

use super::*;

#[test]
fn steal_and_stalls_are_read_over_a_window_holding_the_step() {
    // Readings every 0.25 s; a step from 0.3 to 0.6 s is read from the
    // one at 0.25 to the one at 0.75.
    let stalls = [
        (0.0, 0),
        (0.25, 1_000_000),
        (0.5, 3_000_000),
        (0.75, 3_500_000),
    ];
    assert_eq!(stall_between(&stalls, 0.3, 0.6), Some(2.5));
    assert_eq!(stall_between(&stalls, 0.25, 0.5), Some(2.0));
    assert_eq!(stall_between(&stalls, 0.3, 0.8), None, "no reading after");
    assert_eq!(stall_between(&stalls, -0.1, 0.2), None, "none before");
    let steal: Vec<(f64, StealTicks)> =
        vec![(0.0, vec![(0, 0), (1, 0)]), (0.5, vec![(0, 1), (1, 3)])];
    assert_eq!(steal_between(&steal, 0.1, 0.4), Some(30.0));
}

#[test]
fn estimate_when_no_counters() {
    let m = Meter {
        perf: vec![],
        perf_error: Some("no PMU".into()),
        perf_start: 0,
        rapl_start: None,
    };
    let before = SystemCpu::default();
    let after = SystemCpu {
        softirq_s: 0.5,
        system_s: 0.5,
        ..Default::default()
    };
    let e = m.finish(1_000_000, &before, &after);
    assert_eq!(e.cycles_source, "estimate");
    assert_eq!(e.busy_cpu_s, 1.0);
    if let Some(hz) = e.nominal_hz {
        let c = e.cycles_per_packet.unwrap();
        assert!((c - hz / 1e6).abs() < 1e-6);
    }
    assert!(e.notes.iter().any(|n| n.contains("no PMU")));
    assert!(e.energy_uj_per_packet.is_none() || Path::new(RAPL).exists());
}

fn reading(t_s: f64, cpu_ns: f64, tx: f64) -> DutReading {
    DutReading {
        t_s,
        cpu_ns,
        tx_packets: tx,
        clock_hz: Some(2.0e9),
        energy_uj: None,
    }
}

#[test]
fn cycles_are_cpu_time_times_clock_over_packets() {
    // 0.5 s of DUT CPU for 1 M packets at 2 GHz: 500 ns, 1000 cycles.
    let s = dut_step(&reading(0.0, 0.0, 0.0), &reading(1.0, 5e8, 1e6), 7);
    assert_eq!(s.packets, 1_000_000);
    assert_eq!(s.packets_from, PacketsFrom::DutTx);
    assert_eq!(s.cpu_ns_per_packet, Some(500.0));
    assert_eq!(s.cycles_per_packet, Some(1000.0));
    assert_eq!(s.energy_uj_per_packet, None, "no RAPL, no energy");
    // Clocks of the two ends are averaged; energy is used over packets.
    let mut b = reading(1.0, 5e8, 1e6);
    b.clock_hz = Some(3.0e9);
    let mut a = reading(0.0, 0.0, 0.0);
    a.energy_uj = Some(100.0);
    b.energy_uj = Some(2_000_100.0);
    let s = dut_step(&a, &b, 0);
    assert_eq!(s.clock_hz, Some(2.5e9));
    assert_eq!(s.cycles_per_packet, Some(1250.0));
    assert_eq!(s.energy_uj_per_packet, Some(2.0));
}

#[test]
fn missing_data_leaves_figures_out() {
    // The DUT's interfaces counted nothing: received packets stand in.
    let s = dut_step(&reading(0.0, 0.0, 5.0), &reading(1.0, 1e6, 5.0), 1000);
    assert_eq!(s.packets_from, PacketsFrom::Received);
    assert_eq!(s.cpu_ns_per_packet, Some(1000.0));
    // No packets at all: no per-packet figure, not a division by zero.
    let s = dut_step(&reading(0.0, 0.0, 0.0), &reading(1.0, 1e6, 0.0), 0);
    assert_eq!((s.cpu_ns_per_packet, s.cycles_per_packet), (None, None));
    // No clock: ns per packet stays, cycles go.
    let mut a = reading(0.0, 0.0, 0.0);
    let mut b = reading(1.0, 1e6, 100.0);
    a.clock_hz = None;
    b.clock_hz = None;
    let s = dut_step(&a, &b, 0);
    assert_eq!(s.cpu_ns_per_packet, Some(10_000.0));
    assert_eq!(s.cycles_per_packet, None);
    // A counter that went backwards (a thread gone) is not negative time.
    let s = dut_step(&reading(0.0, 5e6, 0.0), &reading(1.0, 1e6, 10.0), 0);
    assert_eq!(s.cpu_ns, 0.0);
}

#[test]
fn readings_interpolate_inside_and_refuse_outside() {
    let r = [reading(10.0, 0.0, 0.0), reading(10.5, 1e6, 100.0)];
    let m = reading_at(&r, 10.25).unwrap();
    assert_eq!((m.cpu_ns, m.tx_packets), (5e5, 50.0));
    assert_eq!(reading_at(&r, 10.0).unwrap().cpu_ns, 0.0);
    assert_eq!(reading_at(&r, 10.5).unwrap().cpu_ns, 1e6);
    assert_eq!(reading_at(&r, 9.9), None);
    assert_eq!(reading_at(&r, 10.6), None);
    assert_eq!(reading_at(&[], 1.0), None);
}

fn ticks(cpu: u32, user: u64, system: u64, softirq: u64) -> crate::proto::CpuTicks {
    crate::proto::CpuTicks {
        cpu,
        user,
        system,
        softirq,
        ..Default::default()
    }
}

#[test]
fn napi_threads_and_their_cpus_softirq_are_the_dut() {
    use crate::proto::{CpuClock, IfCounters, NapiTime};
    let s = Snapshot {
        per_cpu: vec![ticks(0, 500, 500, 500), ticks(1, 7, 11, 3)],
        napi: vec![
            NapiTime {
                dev: "dut0".into(),
                pid: 10,
                cpus: vec![1],
                run_ns: Some(2_000),
                ticks: 99,
            },
            NapiTime {
                dev: "dut1".into(),
                pid: 11,
                cpus: vec![1],
                run_ns: None,
                ticks: 2,
            },
        ],
        interfaces: vec![
            IfCounters {
                name: "lo".into(),
                tx_packets: 1000,
                ..Default::default()
            },
            IfCounters {
                name: "dut1".into(),
                tx_packets: 40,
                ..Default::default()
            },
        ],
        clocks: vec![
            CpuClock { cpu: 0, khz: 1 },
            CpuClock {
                cpu: 1,
                khz: 3_000_000,
            },
        ],
        clock_source: "cpuinfo".into(),
        ..Default::default()
    };
    let r = dut_reading(&s, 5.0);
    // schedstat ns, stat ticks as the fallback, and CPU1's softirq
    // only: the user and system time of CPU1 are other tasks'.
    assert_eq!(r.cpu_ns, 2_000.0 + 2.0 * 1e7 + 3.0 * 1e7);
    assert_eq!(r.tx_packets, 40.0, "loopback is not forwarding");
    assert_eq!(r.clock_hz, Some(3.0e9), "the counted CPU's clock");
    let m = dut_method(&s);
    assert!(m.counted.contains("napi/dut0 (pid 10)"), "{}", m.counted);
    assert!(m.counted.contains("CPU1"), "{}", m.counted);
    assert_eq!(m.clock_source.as_deref(), Some("cpuinfo"));
    assert!(m.notes.iter().any(|n| n.contains("schedstat")));
    assert!(m.notes.iter().any(|n| n.contains("no RAPL")));
    // No NAPI threads known (a remote DUT): every CPU's busy time.
    let host = Snapshot {
        napi: vec![],
        clock_source: String::new(),
        ..s
    };
    let r = dut_reading(&host, 5.0);
    assert_eq!(r.cpu_ns, (1500.0 + 21.0) * 1e7);
    let m = dut_method(&host);
    assert!(m.counted.starts_with("busy time"), "{}", m.counted);
    assert_eq!(m.clock_source, None);
    assert!(m
        .notes
        .iter()
        .any(|n| n.contains("cycles per packet omitted")));
}

#[test]
fn nominal_clock_from_a_fixture() {
    let d = std::env::temp_dir().join(format!("lr-eff-{}", std::process::id()));
    std::fs::create_dir_all(d.join("proc")).unwrap();
    std::fs::write(
        d.join("proc/cpuinfo"),
        "processor : 0\ncpu MHz\t\t: 2445.430\n",
    )
    .unwrap();
    assert_eq!(nominal_hz(&d), Some(2_445_430_000.0));
    std::fs::create_dir_all(d.join("sys/devices/system/cpu/cpu0/cpufreq")).unwrap();
    std::fs::write(
        d.join("sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
        "3500000\n",
    )
    .unwrap();
    assert_eq!(nominal_hz(&d), Some(3.5e9));
    std::fs::remove_dir_all(&d).unwrap();
}
