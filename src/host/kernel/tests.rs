//! Tests of the kernel counter readers.

use super::*;

#[test]
fn vcpu_thread_names() {
    assert_eq!(vcpu_index("CPU 0/TCG"), Some(0));
    assert_eq!(vcpu_index("CPU 12/KVM"), Some(12));
    assert_eq!(vcpu_index("CPU 0/"), None);
    assert_eq!(vcpu_index("qemu-system-x86"), None);
    assert_eq!(vcpu_index("lr-udp-send"), None);
    // This test's own process is no qemu.
    assert!(vcpu_threads(std::process::id()).is_empty());
}

#[test]
fn cpuinfo_clocks_per_processor() {
    let text = "processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 2596.142\n\n\
                    processor\t: 1\ncpu MHz\t\t: 800.000\n";
    let c = parse_cpuinfo_mhz(text);
    assert_eq!(
        c,
        vec![
            CpuClock {
                cpu: 0,
                khz: 2_596_142
            },
            CpuClock {
                cpu: 1,
                khz: 800_000
            }
        ]
    );
    assert!(parse_cpuinfo_mhz("processor : 0\n").is_empty());
}

#[test]
fn net_dev() {
    let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0\n  \
gen0: 6000000  100000    1    7    0     0          0         0  1200   20    0    3    0     0       0          0\n";
    let c = parse_net_dev(text);
    assert_eq!(c.len(), 2);
    assert_eq!(c[1].name, "gen0");
    assert_eq!(c[1].rx_packets, 100_000);
    assert_eq!(c[1].rx_errors, 1);
    assert_eq!(c[1].rx_dropped, 7);
    assert_eq!(c[1].tx_packets, 20);
    assert_eq!(c[1].tx_dropped, 3);
}

#[test]
fn snmp_udp() {
    let text = "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 10 2 3 40 5 6 0 0 0\nUdpLite: InDatagrams NoPorts\nUdpLite: 0 0\n";
    let c = parse_snmp_udp(text);
    assert_eq!(c.in_datagrams, 10);
    assert_eq!(c.no_ports, 2);
    assert_eq!(c.in_errors, 3);
    assert_eq!(c.rcvbuf_errors, 5);
    assert_eq!(c.sndbuf_errors, 6);
}

#[test]
fn proc_stat() {
    let c = parse_proc_stat("cpu  100 0 50 1000 0 10 20 0 0 0\ncpu0 1 2 3\n");
    assert_eq!(c.user_s, 1.0);
    assert_eq!(c.softirq_s, 0.2);
    assert_eq!(c.idle_s, 10.0);
}

#[test]
fn proc_stat_cpus() {
    let text = "cpu  10132153 290696 3084719 46828483 16683 0 25195 0 0 0\n\
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0\n\
cpu1 1335962 30467 500934 13446024 3373 12 2303 7 0 0\n\
intr 114930548 113199788 3 0 5 263 0 4 [...]\n\
ctxt 1990473\nbtime 1062191376\nprocesses 2915\nprocs_running 1\n";
    let c = parse_proc_stat_cpus(text);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].cpu, 0);
    assert_eq!(c[0].user, 1_393_280);
    assert_eq!(c[0].softirq, 17_875);
    assert_eq!(c[1].cpu, 1);
    assert_eq!(c[1].irq, 12);
    assert_eq!(c[1].steal, 7);
    assert_eq!(
        c[1].total(),
        1335962 + 30467 + 500934 + 13446024 + 3373 + 12 + 2303 + 7
    );
}

#[test]
fn softirqs() {
    let text = "                    CPU0       CPU1       CPU2       CPU3\n\
          HI:          0          0          0          1\n\
       TIMER:    3326283    2801567    2765439    2689843\n\
      NET_TX:       1524        316         52      88888\n\
      NET_RX:    4271230     127643     155621    1200000\n\
       BLOCK:      61470      51042      64394      59433\n\
     SCHED:    1934532    1662290    1588436    1523487\n";
    let s = parse_softirqs(text);
    assert_eq!(s.len(), 4);
    assert_eq!(s[0], (0, 4_271_230, 1524));
    assert_eq!(s[3], (3, 1_200_000, 88_888));
    assert!(parse_softirqs("").is_empty());
    assert!(parse_softirqs("garbage\nNET_RX: x y\n").is_empty());
}

#[test]
fn task_stat() {
    let text = "4242 (lr-udp-send) R 4200 4200 4100 0 -1 4194368 120 0 0 0 \
581 212 0 0 20 0 5 0 123456 1234567 890 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
    let t = parse_task_stat(text).unwrap();
    assert_eq!(t.tid, 4242);
    assert_eq!(t.name, "lr-udp-send");
    assert_eq!((t.utime, t.stime), (581, 212));
    assert_eq!(t.cpu, 0);
    // A comm with spaces and parentheses; processor 3.
    let odd = format!(
        "7 (a) b (c) S 1 1 1 0 -1 0 0 0 0 0 5 6 {} 3 0\n",
        ["0"; 23].join(" ")
    );
    let t = parse_task_stat(&odd).unwrap();
    assert_eq!(t.name, "a) b (c");
    assert_eq!((t.utime, t.stime, t.cpu), (5, 6, 3));
    assert!(parse_task_stat("12 (short) R 1 2").is_none());
    assert!(parse_task_stat("").is_none());
}

#[test]
fn live_snapshot_reads() {
    let s = snapshot().unwrap();
    assert!(s.interfaces.iter().any(|i| i.name == "lo"));
    assert!(!s.per_cpu.is_empty(), "per-core times");
    assert!(!s.threads.is_empty(), "this test's own threads");
}

#[test]
fn finished_engine_threads_stay_in_snapshots() {
    let h = spawn_named("lr-test-done", || {
        // Burn a few ticks so the thread has something to report.
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        x
    })
    .unwrap();
    h.join().unwrap();
    let s = snapshot().unwrap();
    assert!(s.threads.iter().any(|t| t.name == "lr-test-done"));
}

#[test]
fn virtio_xdp_transmit_drops_add_up_over_the_queues() {
    let stats = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        v.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    };
    // 6.1: per queue only.
    let old = stats(&[
        ("rx_queue_0_packets", 10),
        ("rx_queue_0_xdp_tx", 5),
        ("tx_queue_0_xdp_tx", 900),
        ("tx_queue_0_xdp_tx_drops", 12),
        ("tx_queue_1_xdp_tx_drops", 30),
        ("tx_queue_1_kicks", 7),
    ]);
    assert_eq!(sum_xdp_tx_drops(&old), 42);
    // 6.18: a total and each queue; the total is not added twice.
    let new = stats(&[
        ("rx_xdp_drops", 3),
        ("tx_xdp_tx", 900),
        ("tx_xdp_tx_drops", 42),
        ("rx0_xdp_drops", 3),
        ("tx0_xdp_tx_drops", 12),
        ("tx1_xdp_tx_drops", 30),
    ]);
    assert_eq!(sum_xdp_tx_drops(&new), 42);
    assert_eq!(sum_xdp_tx_drops(&[]), 0);
}
