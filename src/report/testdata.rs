//! Results documents for unit tests, from the committed fixtures of real
//! runs in `tests/fixtures/report/` (a lab run with TCP and bidirectional
//! UDP, and a paced loopback UDP run with flagged cross-checks).
#![allow(clippy::unwrap_used)]

use super::run::Run;
use crate::proto::FrameSpec;
use crate::results::{Protocol, RunResults, TestResult};
use std::path::PathBuf;

pub fn lab() -> RunResults {
    serde_json::from_str(include_str!("../../tests/fixtures/report/lab-both.json")).unwrap()
}

/// A 64 B ramp through a DUT policed to 60 kpps: saturates, with
/// tester-limited samples.
pub fn ramp() -> RunResults {
    serde_json::from_str(include_str!("../../tests/fixtures/report/ramp.json")).unwrap()
}

/// MLRsearch NDR/PDR at 64 and 512 B through a DUT policed to 60 kpps.
pub fn search() -> RunResults {
    serde_json::from_str(include_str!("../../tests/fixtures/report/search.json")).unwrap()
}

pub fn paced() -> RunResults {
    serde_json::from_str(include_str!("../../tests/fixtures/report/udp-paced.json")).unwrap()
}

/// As `figures::is_tcp`, kept here so the fixtures need no report module
/// (the modules' tests use the fixtures).
fn is_tcp(t: &TestResult) -> bool {
    matches!(t.params.protocol, Protocol::Tcp | Protocol::Http)
}

/// The fixture's UDP test, renamed, with fixed frames of `frame` bytes and
/// one direction.
pub fn udp_test(name: &str, frame: u32) -> TestResult {
    let mut t = lab().tests.into_iter().find(|t| !is_tcp(t)).unwrap();
    t.name = name.into();
    t.params.frame = Some(FrameSpec::Fixed(frame));
    t.params.average_frame_bytes = Some(f64::from(frame));
    t.directions.truncate(1);
    t
}

pub fn tcp_test(name: &str) -> TestResult {
    let mut t = lab().tests.into_iter().find(is_tcp).unwrap();
    t.name = name.into();
    t
}

/// The lab fixture as three runs through route, nat and fw, the later ones
/// forwarding less (received rates scaled by 1, 0.8, 0.5).
pub fn three_runs() -> Vec<Run> {
    ["route", "nat", "fw"]
        .iter()
        .zip([1.0, 0.8, 0.5])
        .map(|(mode, k)| {
            let mut r = lab();
            r.name = format!("lab-{mode}");
            for l in &mut r.labs {
                if l.kind == "dut" {
                    l.dut_mode = Some(mode.to_string());
                }
            }
            for t in &mut r.tests {
                for d in &mut t.directions {
                    d.rx_pps *= k;
                    d.rx_l2_bps *= k;
                    d.rx_l1_bps = d.rx_l1_bps.map(|v| v * k);
                    for p in &mut d.intervals {
                        if let Some(s) = &mut p.receiver {
                            s.rx_packets = (s.rx_packets as f64 * k) as u64;
                            s.rx_bytes = (s.rx_bytes as f64 * k) as u64;
                        }
                    }
                }
            }
            Run {
                label: mode.to_string(),
                dir: PathBuf::from(format!("/runs/{mode}")),
                results: r,
            }
        })
        .collect()
}

/// The lab run with its first agent a plan's VM host `r1` under TCG.
pub fn with_vm_host() -> RunResults {
    let mut r = lab();
    let vm: crate::model::lab::LabVm = serde_json::from_value(serde_json::json!({
        "role": "r1",
        "accel": "tcg",
        "accel_reason": "asked for",
        "vcpus": 2,
        "memory_mib": 512,
        "nic_model": "virtio-net-pci",
        "kernel_release": "6.1.0-41-amd64",
        "kernel_origin": "debian:bookworm",
        "modules": ["virtio_net"],
        "boot_s": 6.2,
        "qemu_pid": 4242
    }))
    .unwrap();
    r.agents.push(crate::results::AgentRecord {
        role: "r1".into(),
        endpoint: "vm".into(),
        vm: Some(vm),
        ..Default::default()
    });
    r
}
