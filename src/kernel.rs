//! Reads the kernel's own counters inside the current network namespace:
//! interface statistics, UDP counters and CPU time. `/proc/net/*` follows the
//! reading process's network namespace (unlike `/sys/class/net`, which shows
//! the namespace sysfs was mounted in), so agents read these.

use crate::proto::{IfCounters, Snapshot, SystemCpu, UdpCounters};
use std::fs;
use std::io;

pub fn snapshot() -> io::Result<Snapshot> {
    Ok(Snapshot {
        interfaces: parse_net_dev(&fs::read_to_string("/proc/net/dev")?),
        udp: parse_snmp_udp(&fs::read_to_string("/proc/net/snmp")?),
        process_cpu_s: crate::sys::process_cpu_seconds(),
        system_cpu: parse_proc_stat(&fs::read_to_string("/proc/stat")?),
    })
}

/// Parses /proc/net/dev: two header lines, then `name: rx(8 fields) tx(8)`.
pub fn parse_net_dev(text: &str) -> Vec<IfCounters> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect();
            if v.len() < 16 {
                return None;
            }
            Some(IfCounters {
                name: name.trim().to_string(),
                rx_bytes: v[0],
                rx_packets: v[1],
                rx_errors: v[2],
                rx_dropped: v[3],
                tx_bytes: v[8],
                tx_packets: v[9],
                tx_errors: v[10],
                tx_dropped: v[11],
            })
        })
        .collect()
}

/// Parses the `Udp:` header/value line pair of /proc/net/snmp.
pub fn parse_snmp_udp(text: &str) -> UdpCounters {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return UdpCounters::default();
    };
    let mut c = UdpCounters::default();
    for (n, v) in names
        .split_whitespace()
        .zip(values.split_whitespace())
        .skip(1)
    {
        let v: u64 = v.parse().unwrap_or(0);
        match n {
            "InDatagrams" => c.in_datagrams = v,
            "NoPorts" => c.no_ports = v,
            "InErrors" => c.in_errors = v,
            "OutDatagrams" => c.out_datagrams = v,
            "RcvbufErrors" => c.rcvbuf_errors = v,
            "SndbufErrors" => c.sndbuf_errors = v,
            "InCsumErrors" => c.in_csum_errors = v,
            _ => {}
        }
    }
    c
}

/// Parses the aggregate `cpu` line of /proc/stat (USER_HZ ticks, 100 per s).
pub fn parse_proc_stat(text: &str) -> SystemCpu {
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return SystemCpu::default();
    };
    let t: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<f64>().unwrap_or(0.0) / 100.0)
        .collect();
    let get = |i: usize| t.get(i).copied().unwrap_or(0.0);
    SystemCpu {
        user_s: get(0) + get(1),
        system_s: get(2),
        idle_s: get(3) + get(4),
        irq_s: get(5),
        softirq_s: get(6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn live_snapshot_reads() {
        let s = snapshot().unwrap();
        assert!(s.interfaces.iter().any(|i| i.name == "lo"));
    }
}
