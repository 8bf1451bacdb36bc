//! Reads the kernel's own counters inside the current network namespace:
//! interface statistics, UDP counters and CPU time. `/proc/net/*` follows the
//! reading process's network namespace (unlike `/sys/class/net`, which shows
//! the namespace sysfs was mounted in), so agents read these. Per-core CPU
//! time, softirq counts and the agent's own threads feed the bottleneck
//! verdict (`crate::results::bottleneck`).

use crate::proto::{
    CpuClock, CpuTicks, IfCounters, NapiTime, Snapshot, SystemCpu, ThreadTicks, UdpCounters,
};
use std::fs;
use std::io;
use std::sync::Mutex;
use std::thread::JoinHandle;

pub fn snapshot() -> io::Result<Snapshot> {
    let stat = fs::read_to_string("/proc/stat")?;
    let mut per_cpu = parse_proc_stat_cpus(&stat);
    // Softirq counts are evidence, not a requirement: a kernel without
    // /proc/softirqs still gets per-core times.
    if let Ok(text) = fs::read_to_string("/proc/softirqs") {
        for (cpu, rx, tx) in parse_softirqs(&text) {
            if let Some(c) = per_cpu.iter_mut().find(|c| c.cpu == cpu) {
                c.net_rx = rx;
                c.net_tx = tx;
            }
        }
    }
    for (cpu, held, stalls) in super::stalls::counters().unwrap_or_default() {
        if let Some(c) = per_cpu.iter_mut().find(|c| c.cpu == cpu) {
            c.stalled_ns = Some(held);
            c.stalls = Some(stalls);
        }
    }
    let mut interfaces = parse_net_dev(&fs::read_to_string("/proc/net/dev")?);
    link_speeds(&mut interfaces);
    xdp_tx_drops(&mut interfaces);
    let (clocks, clock_source) = cpu_clocks();
    Ok(Snapshot {
        interfaces,
        udp: parse_snmp_udp(&fs::read_to_string("/proc/net/snmp")?),
        process_cpu_s: crate::sys::process_cpu_seconds(),
        system_cpu: parse_proc_stat(&stat),
        per_cpu,
        threads: own_threads(),
        napi: napi_times(),
        clocks,
        clock_source: clock_source.into(),
        energy_uj: read_u64(super::efficiency::RAPL),
        energy_range_uj: read_u64(super::efficiency::RAPL_RANGE),
        stick: None,
        vcpus: Vec::new(),
        bonds: super::bond::read_all(),
    })
}

fn read_u64(path: &str) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Threaded-NAPI kernel threads this process turned on, by interface:
/// (dev, pid, pinned CPUs). Names repeat across namespaces (every lab has
/// a `dut0`), so a thread is known by the pid that appeared when its
/// interface went threaded, never by its name alone.
static NAPI: Mutex<Vec<(String, u32, Vec<u32>)>> = Mutex::new(Vec::new());

/// Records `dev`'s NAPI threads (replacing any it had), so snapshots carry
/// their CPU time.
pub fn remember_napi(dev: &str, pids: &[u32], cpus: &[usize]) {
    if let Ok(mut v) = NAPI.lock() {
        v.retain(|(d, _, _)| d != dev);
        let cpus: Vec<u32> = cpus.iter().filter_map(|&c| u32::try_from(c).ok()).collect();
        v.extend(pids.iter().map(|&p| (dev.to_string(), p, cpus.clone())));
    }
}

/// The remembered NAPI threads' CPU time; a thread that is gone (its
/// interface removed or made unthreaded), or whose pid now names another
/// task, is left out.
fn napi_times() -> Vec<NapiTime> {
    let list = NAPI.lock().map(|v| v.clone()).unwrap_or_default();
    list.into_iter()
        .filter_map(|(dev, pid, cpus)| {
            let t = parse_task_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
            if !t.name.starts_with("napi/") {
                return None;
            }
            let run_ns = fs::read_to_string(format!("/proc/{pid}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok());
            Some(NapiTime {
                dev,
                pid,
                cpus,
                run_ns,
                ticks: t.utime + t.stime,
            })
        })
        .collect()
}

/// Each CPU's current clock: cpufreq's `scaling_cur_freq` where the host
/// has cpufreq, else /proc/cpuinfo's "cpu MHz" (which a VM may fix at the
/// nominal clock); empty with neither.
fn cpu_clocks() -> (Vec<CpuClock>, &'static str) {
    let mut v: Vec<CpuClock> = fs::read_dir("/sys/devices/system/cpu")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| {
                    let cpu = e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()?;
                    let khz = fs::read_to_string(e.path().join("cpufreq/scaling_cur_freq"))
                        .ok()?
                        .trim()
                        .parse()
                        .ok()?;
                    Some(CpuClock { cpu, khz })
                })
                .collect()
        })
        .unwrap_or_default();
    if !v.is_empty() {
        v.sort_by_key(|c| c.cpu);
        return (v, "scaling_cur_freq");
    }
    let v = fs::read_to_string("/proc/cpuinfo")
        .map(|t| parse_cpuinfo_mhz(&t))
        .unwrap_or_default();
    if v.is_empty() {
        (v, "")
    } else {
        (v, "cpuinfo")
    }
}

/// /proc/cpuinfo's `processor` and `cpu MHz` lines as clocks per CPU.
pub fn parse_cpuinfo_mhz(text: &str) -> Vec<CpuClock> {
    let mut out = Vec::new();
    let mut cpu = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "processor" => cpu = value.trim().parse::<u32>().ok(),
            "cpu MHz" => {
                if let (Some(c), Ok(mhz)) = (cpu, value.trim().parse::<f64>()) {
                    out.push(CpuClock {
                        cpu: c,
                        khz: (mhz * 1e3).round() as u64,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// Link speeds of this namespace's interfaces and whether each is a tun,
/// looked up once per name.
static SPEEDS: Mutex<std::collections::BTreeMap<String, (Option<u64>, bool)>> =
    Mutex::new(std::collections::BTreeMap::new());

/// Fills in each interface's real link speed (see [`IfCounters::speed_mbps`])
/// and whether it is a tun/tap ([`IfCounters::tun`]).
/// /sys/class/net shows the namespace sysfs was mounted in, so the lookup
/// runs on a thread of its own with this namespace's sysfs mounted; without
/// that mount (not root) /sys is trusted only in the namespace of pid 1.
fn link_speeds(ifs: &mut [IfCounters]) {
    let Ok(mut cache) = SPEEDS.lock() else {
        return;
    };
    let missing: Vec<String> = ifs
        .iter()
        .filter(|i| !cache.contains_key(&i.name))
        .map(|i| i.name.clone())
        .collect();
    if !missing.is_empty() {
        let found = std::thread::spawn(move || {
            let own_sysfs = crate::sys::private_sysfs().is_ok();
            let same_ns = || {
                let ns = |p: &str| fs::read_link(p).ok();
                ns("/proc/self/ns/net").is_some_and(|a| Some(a) == ns("/proc/1/ns/net"))
            };
            let trusted = own_sysfs || same_ns();
            missing
                .into_iter()
                .map(|n| {
                    let kind = if trusted {
                        (read_speed(&n), is_tun(&n))
                    } else {
                        (None, false)
                    };
                    (n, kind)
                })
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap_or_default();
        cache.extend(found);
    }
    for i in ifs.iter_mut() {
        let (speed, tun) = cache.get(&i.name).copied().unwrap_or((None, false));
        i.speed_mbps = speed;
        i.tun = tun;
    }
}

/// The frames each interface's driver refused on its XDP transmit path
/// ([`IfCounters::xdp_tx_drops`]), from its `ethtool -S` statistics. The
/// ioctl answers for this thread's namespace, so no sysfs is needed.
fn xdp_tx_drops(ifs: &mut [IfCounters]) {
    for i in ifs.iter_mut().filter(|i| i.name != "lo") {
        i.xdp_tx_drops = crate::sys::ethtool_stats(&i.name)
            .map(|stats| sum_xdp_tx_drops(&stats))
            .unwrap_or(0);
    }
}

/// A virtio-net driver's XDP transmit drops: its total where it gives one
/// (`tx_xdp_tx_drops`, 6.x kernels that also list `txN_xdp_tx_drops` per
/// queue), else the sum of its queues' (`tx_queue_N_xdp_tx_drops`, 5.x
/// and 6.1).
pub fn sum_xdp_tx_drops(stats: &[(String, u64)]) -> u64 {
    if let Some((_, total)) = stats.iter().find(|(n, _)| n == "tx_xdp_tx_drops") {
        return *total;
    }
    let per_queue = |name: &str| {
        name.strip_suffix("_xdp_tx_drops")
            .and_then(|q| q.strip_prefix("tx_queue_").or_else(|| q.strip_prefix("tx")))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    stats
        .iter()
        .filter(|(name, _)| per_queue(name))
        .map(|(_, v)| v)
        .sum()
}

/// Whether `name` is a tun/tap device (only those have `tun_flags`).
fn is_tun(name: &str) -> bool {
    std::path::Path::new("/sys/class/net")
        .join(name)
        .join("tun_flags")
        .exists()
}

/// A physical interface's speed from sysfs; virtual ones (no `device`)
/// and unknown speeds (-1) have none.
fn read_speed(name: &str) -> Option<u64> {
    let dir = std::path::Path::new("/sys/class/net").join(name);
    if !dir.join("device").exists() {
        return None;
    }
    let v: i64 = fs::read_to_string(dir.join("speed"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (v > 0 && v < 100_000_000).then_some(v as u64)
}

/// How many finished engine threads a snapshot still reports.
const FINISHED_KEPT: usize = 256;

/// The last ticks of engine threads that have ended: a job's threads exit
/// before the runner's closing snapshot, which must still count them.
static FINISHED: Mutex<Vec<ThreadTicks>> = Mutex::new(Vec::new());

/// Spawns a named engine thread (`lr-udp-send`, ...) that leaves its final
/// CPU ticks behind for later snapshots when it ends, even by panicking.
pub fn spawn_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    struct Remember;
    impl Drop for Remember {
        fn drop(&mut self) {
            let Some(t) = fs::read_to_string("/proc/thread-self/stat")
                .ok()
                .and_then(|text| parse_task_stat(&text))
            else {
                return;
            };
            if let Ok(mut done) = FINISHED.lock() {
                if done.len() >= FINISHED_KEPT {
                    done.remove(0);
                }
                done.push(t);
            }
        }
    }
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _remember = Remember;
            f()
        })
}

/// Every thread of this process, and the engine threads that have ended;
/// threads that exit while being read are left out.
fn own_threads() -> Vec<ThreadTicks> {
    let mut out: Vec<ThreadTicks> = fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| fs::read_to_string(e.path().join("stat")).ok())
                .filter_map(|text| parse_task_stat(&text))
                .collect()
        })
        .unwrap_or_default();
    if let Ok(done) = FINISHED.lock() {
        for t in done.iter() {
            if !out.iter().any(|o| o.tid == t.tid) {
                out.push(t.clone());
            }
        }
    }
    out.sort_by_key(|t| t.tid);
    out
}

/// qemu's vCPU threads of process `pid` on this host (qemu names them
/// `CPU N/TCG` or `CPU N/KVM`), by vCPU number; none when `pid` is not a
/// running qemu.
pub fn vcpu_threads(pid: u32) -> Vec<ThreadTicks> {
    let mut out: Vec<ThreadTicks> = fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| fs::read_to_string(e.path().join("stat")).ok())
                .filter_map(|text| parse_task_stat(&text))
                .filter(|t| vcpu_index(&t.name).is_some())
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|t| vcpu_index(&t.name));
    out
}

/// The vCPU number of a qemu vCPU thread's name (`CPU 3/TCG` is 3).
pub fn vcpu_index(name: &str) -> Option<u32> {
    let (n, accel) = name.strip_prefix("CPU ")?.split_once('/')?;
    (!accel.is_empty()).then_some(())?;
    n.parse().ok()
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
                speed_mbps: None,
                tun: false,
                xdp_tx_drops: 0,
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

/// The host's CPUs (the `cpuN` lines of /proc/stat; all of them, whatever
/// this process's affinity): what a share of the host's CPUs is of.
pub fn host_cpus() -> u32 {
    let n = std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat_cpus(&t).len())
        .unwrap_or(0);
    if n > 0 {
        n as u32
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    }
}

/// Parses the `cpuN` lines of /proc/stat (ticks: user nice system idle
/// iowait irq softirq steal ...); the aggregate `cpu` line is skipped.
pub fn parse_proc_stat_cpus(text: &str) -> Vec<CpuTicks> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
            let get = |i: usize| v.get(i).copied().unwrap_or(0);
            Some(CpuTicks {
                cpu,
                user: get(0),
                nice: get(1),
                system: get(2),
                idle: get(3),
                iowait: get(4),
                irq: get(5),
                softirq: get(6),
                steal: get(7),
                net_rx: 0,
                net_tx: 0,
                stalled_ns: None,
                stalls: None,
            })
        })
        .collect()
}

/// Parses /proc/softirqs into (cpu, NET_RX, NET_TX) per column of its
/// `CPU0 CPU1 ...` header.
pub fn parse_softirqs(text: &str) -> Vec<(u32, u64, u64)> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpus: Vec<u32> = header
        .split_whitespace()
        .filter_map(|h| h.strip_prefix("CPU")?.parse().ok())
        .collect();
    let row = |name: &str| -> Vec<u64> {
        text.lines()
            .find_map(|l| {
                let (n, rest) = l.split_once(':')?;
                (n.trim() == name).then(|| {
                    rest.split_whitespace()
                        .map(|x| x.parse().unwrap_or(0))
                        .collect()
                })
            })
            .unwrap_or_default()
    };
    let (rx, tx) = (row("NET_RX"), row("NET_TX"));
    cpus.iter()
        .enumerate()
        .map(|(i, &c)| {
            (
                c,
                rx.get(i).copied().unwrap_or(0),
                tx.get(i).copied().unwrap_or(0),
            )
        })
        .collect()
}

/// Parses one /proc/PID/task/TID/stat line: `tid (comm) state ...`, where
/// comm may hold spaces and parentheses, so fields count from the last `)`:
/// utime is field 14, stime 15, processor 39.
pub fn parse_task_stat(text: &str) -> Option<ThreadTicks> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let tid = text.get(..open)?.trim().parse().ok()?;
    let name = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state).
    let field = |n: usize| rest.get(n - 3).and_then(|x| x.parse::<u64>().ok());
    Some(ThreadTicks {
        tid,
        name,
        utime: field(14)?,
        stime: field(15)?,
        cpu: u32::try_from(field(39)?).ok()?,
    })
}

#[cfg(test)]
mod tests;
