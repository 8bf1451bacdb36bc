//! Efficiency of a test: CPU cycles and energy per packet. Cycles come from
//! hardware counters (perf_event_open, every CPU, kernel included) where the
//! kernel and hypervisor allow, else from busy CPU time × the nominal clock,
//! labelled as an estimate. Energy comes from RAPL (powercap) where present,
//! else it is omitted with the reason.
//!
//! The DUT's cost per load step ([`DutStep`]) comes from its agent's
//! snapshots: the CPU time of its NAPI threads and softirq where the lab laid
//! them out, else its host's busy time, over the packets it forwarded.

use crate::proto::{Snapshot, SystemCpu};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::Path;

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct Efficiency {
    /// CPU cycles (all cores) per received packet.
    pub cycles_per_packet: Option<f64>,
    /// `perf` (hardware counters) or `estimate` (busy CPU time × nominal clock).
    pub cycles_source: String,
    /// Busy CPU seconds of the whole host (user + system + irq + softirq).
    pub busy_cpu_s: f64,
    pub nominal_hz: Option<f64>,
    /// Microjoules per received packet (RAPL package energy).
    pub energy_uj_per_packet: Option<f64>,
    /// Why a figure is missing or estimated.
    pub notes: Vec<String>,
}

/// Counters opened before a test and read after it.
pub struct Meter {
    perf: Vec<File>,
    perf_error: Option<String>,
    perf_start: u64,
    rapl_start: Option<u64>,
}

pub(crate) const RAPL: &str = "/sys/class/powercap/intel-rapl:0/energy_uj";
pub(crate) const RAPL_RANGE: &str = "/sys/class/powercap/intel-rapl:0/max_energy_range_uj";

fn read_u64(p: &str) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

impl Meter {
    pub fn start() -> Self {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut perf = Vec::new();
        let mut perf_error = None;
        for c in 0..cpus {
            match crate::sys::perf_cycles_on_cpu(c) {
                Ok(f) => perf.push(f),
                Err(e) => {
                    perf_error = Some(format!(
                        "hardware cycle counters unavailable (perf_event_open on CPU {c}: {e})"
                    ));
                    perf.clear();
                    break;
                }
            }
        }
        let perf_start = perf
            .iter()
            .filter_map(|f| crate::sys::perf_read(f).ok())
            .sum();
        Meter {
            perf,
            perf_error,
            perf_start,
            rapl_start: read_u64(RAPL),
        }
    }

    /// Finishes the measurement for `packets` received over the test.
    pub fn finish(self, packets: u64, before: &SystemCpu, after: &SystemCpu) -> Efficiency {
        let busy = |c: &SystemCpu| c.user_s + c.system_s + c.irq_s + c.softirq_s;
        let busy_cpu_s = (busy(after) - busy(before)).max(0.0);
        let nominal_hz = nominal_hz(Path::new("/"));
        let mut notes = Vec::new();
        let pk = packets.max(1) as f64;
        let (cycles_per_packet, cycles_source) = if !self.perf.is_empty() {
            let end: u64 = self
                .perf
                .iter()
                .filter_map(|f| crate::sys::perf_read(f).ok())
                .sum();
            (
                Some(end.saturating_sub(self.perf_start) as f64 / pk),
                "perf".to_string(),
            )
        } else {
            if let Some(e) = self.perf_error {
                notes.push(e);
            }
            notes.push("cycles per packet estimated as busy CPU time × nominal clock".into());
            (
                nominal_hz.map(|hz| busy_cpu_s * hz / pk),
                "estimate".to_string(),
            )
        };
        let energy_uj_per_packet = match (self.rapl_start, read_u64(RAPL)) {
            (Some(a), Some(b)) => {
                let range = read_u64(RAPL_RANGE).unwrap_or(u64::MAX);
                let used = if b >= a { b - a } else { range - a + b };
                Some(used as f64 / pk)
            }
            _ => {
                notes.push(
                    "energy per packet omitted: no RAPL powercap interface on this host".into(),
                );
                None
            }
        };
        Efficiency {
            cycles_per_packet: if packets > 0 { cycles_per_packet } else { None },
            cycles_source,
            busy_cpu_s,
            nominal_hz,
            energy_uj_per_packet: if packets > 0 {
                energy_uj_per_packet
            } else {
                None
            },
            notes,
        }
    }
}

/// USER_HZ: /proc/stat and /proc/PID/stat count in 1/100 s on every Linux.
const TICK_NS: f64 = 1e7;

/// The DUT's CPU cost of the packets it forwarded over one step: a ramp
/// interval or a search trial. Which CPU time counts is said once per test
/// ([`DutEfficiency::counted`]).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, JsonSchema)]
pub struct DutStep {
    /// Length of the step, seconds.
    pub duration_s: f64,
    /// DUT CPU time in the step, ns.
    pub cpu_ns: f64,
    /// Packets the DUT forwarded in the step.
    pub packets: u64,
    /// Where `packets` came from.
    pub packets_from: PacketsFrom,
    /// ns of DUT CPU time per packet (needs no hardware counter).
    pub cpu_ns_per_packet: Option<f64>,
    /// Mean clock of the counted CPUs over the step, Hz (absent: the DUT
    /// host shows none).
    pub clock_hz: Option<f64>,
    /// DUT CPU time × clock / packets.
    pub cycles_per_packet: Option<f64>,
    /// RAPL package energy over the step / packets, µJ (absent: no RAPL).
    pub energy_uj_per_packet: Option<f64>,
    /// The most time one CPU of the DUT's host was held by the hypervisor
    /// around the step (steal, `/proc/stat`, 10 ms ticks; read from the
    /// DUT's readings just outside the step), ms. Absent: not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ms: Option<f64>,
    /// The time the stall watch saw the DUT's host's CPUs held around the
    /// step, summed over them (1 ms resolution; the same window as
    /// `steal_ms`), ms. Absent: no watch on the DUT's host (it runs during
    /// searches and ramps, as root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<f64>,
}

/// Which count a step's packets are.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PacketsFrom {
    /// Frames the DUT sent on (its interfaces' tx counters, loopback aside).
    DutTx,
    /// The DUT's interfaces counted none: packets the receivers counted.
    Received,
}

/// The DUT's figures of one test: what was counted and how, the whole
/// sending phase as one step, and what the host hides.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct DutEfficiency {
    /// Which CPU time is the DUT's, in words.
    pub counted: String,
    /// Where the clock came from: `scaling_cur_freq` (cpufreq) or
    /// `cpuinfo` (/proc/cpuinfo "cpu MHz"); absent: no clock, no cycles.
    pub clock_source: Option<String>,
    /// The sending phase as one step.
    pub test: Option<DutStep>,
    /// What is missing or estimated, and why.
    pub notes: Vec<String>,
}

/// A DUT agent's cumulative counters at one instant, reduced from a
/// snapshot: what steps are differences of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DutReading {
    /// When the snapshot was read, controller clock, seconds since the epoch.
    pub t_s: f64,
    /// CPU time counted as the DUT's so far, ns.
    pub cpu_ns: f64,
    /// Frames its interfaces sent so far.
    pub tx_packets: f64,
    /// Mean clock of the counted CPUs, Hz.
    pub clock_hz: Option<f64>,
    pub energy_uj: Option<f64>,
}

/// The CPUs whose time counts: those the NAPI threads are pinned to, or
/// every CPU of the host when the agent knows no NAPI thread.
fn counted_cpus(s: &Snapshot) -> Vec<u32> {
    let mut c: Vec<u32> = s.napi.iter().flat_map(|n| n.cpus.iter().copied()).collect();
    c.sort_unstable();
    c.dedup();
    if c.is_empty() {
        c = s.per_cpu.iter().map(|t| t.cpu).collect();
    }
    c
}

/// Reduces a DUT agent's snapshot taken at `t_s` to its cumulative figures.
/// With NAPI threads: their time on CPU plus the softirq time of the CPUs
/// they are pinned to; without: the busy time of every CPU of the host.
pub fn dut_reading(s: &Snapshot, t_s: f64) -> DutReading {
    let cpus = counted_cpus(s);
    let ticks = s.per_cpu.iter().filter(|t| cpus.contains(&t.cpu));
    let cpu_ns = if s.napi.is_empty() {
        ticks
            .map(|t| (t.user + t.nice + t.system + t.irq + t.softirq) as f64 * TICK_NS)
            .sum()
    } else {
        let threads: f64 = s
            .napi
            .iter()
            .map(|n| n.run_ns.map_or(n.ticks as f64 * TICK_NS, |ns| ns as f64))
            .sum();
        threads + ticks.map(|t| t.softirq as f64 * TICK_NS).sum::<f64>()
    };
    let khz: Vec<f64> = s
        .clocks
        .iter()
        .filter(|c| cpus.contains(&c.cpu) && c.khz > 0)
        .map(|c| c.khz as f64)
        .collect();
    DutReading {
        t_s,
        cpu_ns,
        tx_packets: s
            .interfaces
            .iter()
            .filter(|i| i.name != "lo")
            .map(|i| i.tx_packets as f64)
            .sum(),
        clock_hz: (!khz.is_empty()).then(|| khz.iter().sum::<f64>() / khz.len() as f64 * 1e3),
        energy_uj: s.energy_uj.map(|e| e as f64),
    }
}

/// What a test's DUT figures count and what its host hides, from one of
/// its snapshots.
pub fn dut_method(s: &Snapshot) -> DutEfficiency {
    let mut notes = Vec::new();
    let counted = if s.napi.is_empty() {
        notes.push(
            "the DUT agent pinned no threaded-NAPI threads (not a lab DUT): its CPU time is the \
             busy time of all its host's CPUs, the agent's own work and anything else running \
             there included"
                .to_string(),
        );
        "busy time (user + nice + system + irq + softirq, /proc/stat) of every CPU of the DUT's host"
            .to_string()
    } else {
        let threads: Vec<String> = s
            .napi
            .iter()
            .map(|n| format!("napi/{} (pid {})", n.dev, n.pid))
            .collect();
        let cpus: Vec<String> = counted_cpus(s).iter().map(|c| format!("CPU{c}")).collect();
        let run = if s.napi.iter().all(|n| n.run_ns.is_some()) {
            "time on CPU from /proc/PID/schedstat (ns)"
        } else {
            notes.push(
                "no /proc/PID/schedstat on the DUT host: NAPI thread time is utime + stime in \
                 10 ms ticks, coarse at low loads"
                    .into(),
            );
            "utime + stime from /proc/PID/stat (10 ms ticks)"
        };
        format!(
            "the DUT's NAPI threads {} ({run}) plus the softirq time of {} (/proc/stat, 10 ms \
             ticks; any other traffic those CPUs handle included)",
            threads.join(", "),
            cpus.join("+")
        )
    };
    let clock_source = match s.clock_source.as_str() {
        "" => {
            notes.push(
                "cycles per packet omitted: the DUT host shows no CPU clock (no cpufreq, no \
                 \"cpu MHz\" in /proc/cpuinfo); ns of DUT CPU time per packet stands"
                    .into(),
            );
            None
        }
        "cpuinfo" => {
            notes.push(
                "cycles = DUT CPU time × the clock /proc/cpuinfo reports (\"cpu MHz\", no cpufreq \
                 on the DUT host: a VM often shows a fixed nominal clock), not hardware counters"
                    .into(),
            );
            Some("cpuinfo".to_string())
        }
        other => {
            notes.push(format!(
                "cycles = DUT CPU time × the mean {other} of the counted CPUs, not hardware counters"
            ));
            Some(other.to_string())
        }
    };
    if s.energy_uj.is_none() {
        notes.push("energy per packet omitted: no RAPL powercap interface on the DUT host".into());
    } else {
        notes.push(
            "energy is the whole CPU package's (RAPL intel-rapl:0): on a shared host it \
             includes the tester's"
                .into(),
        );
    }
    DutEfficiency {
        counted,
        clock_source,
        test: None,
        notes,
    }
}

/// The DUT's figures between two readings; `received` stands in for the
/// DUT's forwarded packets when its interfaces counted none.
pub fn dut_step(a: &DutReading, b: &DutReading, received: u64) -> DutStep {
    let cpu_ns = (b.cpu_ns - a.cpu_ns).max(0.0);
    let tx = (b.tx_packets - a.tx_packets).max(0.0).round() as u64;
    let (packets, packets_from) = if tx > 0 {
        (tx, PacketsFrom::DutTx)
    } else {
        (received, PacketsFrom::Received)
    };
    let per = |v: f64| (packets > 0).then(|| v / packets as f64);
    let clock_hz = match (a.clock_hz, b.clock_hz) {
        (Some(x), Some(y)) => Some((x + y) / 2.0),
        (x, y) => x.or(y),
    };
    let energy = match (a.energy_uj, b.energy_uj) {
        (Some(x), Some(y)) if y >= x => Some(y - x),
        _ => None,
    };
    DutStep {
        duration_s: (b.t_s - a.t_s).max(0.0),
        cpu_ns,
        packets,
        packets_from,
        cpu_ns_per_packet: per(cpu_ns),
        clock_hz,
        cycles_per_packet: clock_hz.and_then(|hz| per(cpu_ns * 1e-9 * hz)),
        energy_uj_per_packet: energy.and_then(per),
        steal_ms: None,
        stall_ms: None,
    }
}

/// One CPU's steal so far, as the DUT's readings keep it: (cpu, ticks).
pub type StealTicks = Vec<(u32, u64)>;

/// The most steal one CPU counted from the last reading at or before
/// `from` to the first at or after `to` (`readings` in time order, each
/// `(t_s, ticks)`), ms: the window holds the step whole, so a stall in it
/// is never missed (one beside it may be counted). `None` without a
/// reading on both sides.
pub fn steal_between(readings: &[(f64, StealTicks)], from: f64, to: f64) -> Option<f64> {
    let (a, b) = around(readings, from, to)?;
    let most = b
        .iter()
        .map(|&(cpu, after)| {
            let before = a.iter().find(|(c, _)| *c == cpu).map_or(after, |(_, t)| *t);
            after.saturating_sub(before)
        })
        .max()
        .unwrap_or(0);
    Some(most as f64 * TICK_NS / 1e6)
}

/// The time the stall watch saw the DUT's host's CPUs held, summed over
/// them ([`crate::host::stalls`]), from the last reading at or before
/// `from` to the first at or after `to` (`readings` in time order, each
/// `(t_s, ns so far)`), ms: the same window as [`steal_between`]. `None`
/// without a reading on both sides (the DUT's agent did not watch).
pub fn stall_between(readings: &[(f64, u64)], from: f64, to: f64) -> Option<f64> {
    let (a, b) = around(readings, from, to)?;
    Some(b.saturating_sub(*a) as f64 / 1e6)
}

/// The last reading at or before `from` and the first at or after `to`
/// (`readings` in time order): a window that holds the step whole.
fn around<T>(readings: &[(f64, T)], from: f64, to: f64) -> Option<(&T, &T)> {
    let i = readings
        .partition_point(|(t, _)| *t <= from)
        .checked_sub(1)?;
    let j = readings.partition_point(|(t, _)| *t < to);
    Some((&readings[i].1, &readings.get(j)?.1))
}

/// The DUT's counters at `t_s`, interpolated between the readings around
/// it (sorted by time). `None` outside the readings: a step needs both of
/// its ends measured.
pub fn reading_at(readings: &[DutReading], t_s: f64) -> Option<DutReading> {
    // Readings come in time order: a binary search keeps a long test's
    // thousands of interval edges from scanning them all, each.
    let i = readings.partition_point(|r| r.t_s < t_s);
    let b = *readings.get(i)?;
    if b.t_s == t_s || i == 0 {
        return (b.t_s == t_s).then_some(b);
    }
    let a = readings[i - 1];
    let f = (t_s - a.t_s) / (b.t_s - a.t_s);
    let lerp = |x: f64, y: f64| x + (y - x) * f;
    Some(DutReading {
        t_s,
        cpu_ns: lerp(a.cpu_ns, b.cpu_ns),
        tx_packets: lerp(a.tx_packets, b.tx_packets),
        clock_hz: if f < 0.5 { a.clock_hz } else { b.clock_hz },
        energy_uj: match (a.energy_uj, b.energy_uj) {
            (Some(x), Some(y)) if y >= x => Some(lerp(x, y)),
            _ => None,
        },
    })
}

/// Nominal clock: cpufreq's base or max frequency, else /proc/cpuinfo's MHz.
pub fn nominal_hz(root: &Path) -> Option<f64> {
    for f in ["base_frequency", "cpuinfo_max_freq"] {
        let p = root.join("sys/devices/system/cpu/cpu0/cpufreq").join(f);
        if let Some(khz) = std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            return Some(khz * 1e3);
        }
    }
    std::fs::read_to_string(root.join("proc/cpuinfo"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|mhz| mhz * 1e6)
}

#[cfg(test)]
mod tests;
