//! Efficiency of a test: CPU cycles and energy per packet. Cycles come from
//! hardware counters (perf_event_open, every CPU, kernel included) where the
//! kernel and hypervisor allow, else from busy CPU time × the nominal clock,
//! labelled as an estimate. Energy comes from RAPL (powercap) where present,
//! else it is omitted with the reason.

use crate::proto::SystemCpu;
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

const RAPL: &str = "/sys/class/powercap/intel-rapl:0/energy_uj";
const RAPL_RANGE: &str = "/sys/class/powercap/intel-rapl:0/max_energy_range_uj";

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
mod tests {
    use super::*;

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
}
