//! `linerate tcp`: its flags and the test they describe.

use super::common::{direction, duration, pair, Common, Endpoints, ProbeArgs};
use crate::model::units::Rate;
use crate::orchestrate::config::TcpTest;
use crate::orchestrate::config::{Pair, TestSpec};
use anyhow::{bail, Result};
use clap::Args;
use std::time::Duration;

/// Flags of `linerate tcp`.
#[derive(Args, Debug, Clone)]
pub struct TcpArgs {
    #[command(flatten)]
    pub ends: Endpoints,
    /// Parallel streams (per direction).
    #[arg(long, short = 'P', default_value_t = 1)]
    pub streams: u16,
    /// TCP congestion control (e.g. cubic, bbr).
    #[arg(long)]
    pub cc: Option<String>,
    /// Bytes per write (default 131072). Towards an iperf3:// server it is also what the
    /// server reads or writes at a time, and the default there is 786432 without --rate,
    /// less where the server's blocks would pass 32 MiB in all (README).
    #[arg(long)]
    pub buffer: Option<u32>,
    /// The highest rate of each direction, in bit/s (100M, 1Gbps) or % of --line-rate,
    /// shared by its streams: each stream is paced by the kernel to its share
    /// (SO_MAX_PACING_RATE). It counts the bytes TCP sends, headers included, so goodput
    /// comes out a few % below it. Default: as fast as TCP goes.
    #[arg(long, short = 'b', value_parser = super::parse::parse_rate_arg)]
    pub rate: Option<crate::model::units::Rate>,
    /// Send for SECS seconds more at the start and leave them out of the totals (iperf3 -O),
    /// e.g. TCP's slow start: their interval lines say "(omitted)"; the test runs -t after
    /// them. Against an iperf3:// server, both ends' totals.
    #[arg(long, short = 'O', value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub omit: Option<f64>,
    /// Socket buffer size of every stream, both ends (iperf3 -w): SO_SNDBUF and SO_RCVBUF,
    /// in bytes or with K, M, G (1024-based: 256K, 4M). The results say what the kernel
    /// gave (Linux reports twice the request).
    #[arg(long, short = 'w', value_name = "SIZE", value_parser = super::parse::parse_window)]
    pub window: Option<u32>,
    /// Run the streams over VLAN ID (or QinQ OUTER.INNER): each end puts its address on a
    /// VLAN sub-interface for the test (needs 802.1Q in its kernel; docs/vlans.md).
    #[arg(long, value_name = "ID[.INNER]", value_parser = super::udp::parse_vlan)]
    pub vlan: Option<crate::proto::Vlan>,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: super::common::SweepArgs,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

/// Bytes per write when `--buffer` is not given (iperf3's default block).
pub const DEFAULT_BUFFER: u32 = crate::proto::iperf3::DEFAULT_TCP_LEN;

/// Where this kernel lists the congestion controls it has loaded.
const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// Checks `--cc NAME` before the run, on this host's kernel (the one
/// `local` and `ns:` endpoints share), so a typo fails in a line instead
/// of mid-test. A name the kernel has not loaded yet is fine when a module
/// `tcp_NAME` is installed: setting it as root loads it.
pub fn check_cc(name: &str) -> Result<()> {
    let available = std::fs::read_to_string(AVAILABLE_CC).unwrap_or_default();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let deps = std::fs::read_to_string(format!("/lib/modules/{}/modules.dep", release.trim()))
        .unwrap_or_default();
    check_cc_in(name, &available, &deps)
}

/// [`check_cc`] on the text of the available list and of modules.dep.
pub fn check_cc_in(name: &str, available: &str, modules_dep: &str) -> Result<()> {
    let list: Vec<&str> = available.split_whitespace().collect();
    if list.is_empty() || list.contains(&name) {
        // No list to check against (not Linux's procfs): the agent says.
        return Ok(());
    }
    let module = format!("/tcp_{name}.ko");
    if modules_dep
        .lines()
        .filter_map(|l| l.split(':').next())
        .any(|m| m.contains(&module))
    {
        return Ok(());
    }
    bail!(
        "--cc {name}: this kernel has no congestion control '{name}' (available: {}, from {AVAILABLE_CC}); \
         choose one of those, or load its module first if your kernel ships one: modprobe tcp_{name}",
        list.join(", ")
    )
}

/// A TCP `--rate` in bit/s: TCP paces bytes, so a packet rate has no
/// meaning here.
pub fn tcp_rate_bps(r: Rate, line_rate_bps: f64) -> Result<f64> {
    match r {
        Rate::L1Bps(bps) => Ok(bps),
        Rate::LinePct(pct) => Ok(line_rate_bps * pct / 100.0),
        Rate::Pps(_) => bail!(
            "--rate in packets per second does not apply to TCP, which paces bytes: \
             give bit/s (100M, 1Gbps) or % of --line-rate"
        ),
    }
}

/// `linerate tcp`: the pair and the test.
pub fn tcp(a: &TcpArgs) -> Result<(Pair, TestSpec)> {
    let pair = pair(&a.ends, &a.common)?;
    if a.streams == 0 || a.streams > 1024 {
        bail!("--streams {} is outside 1..=1024", a.streams);
    }
    let t = TcpTest {
        name: format!(
            "tcp {} stream{}",
            a.streams,
            if a.streams == 1 { "" } else { "s" }
        ),
        ipv6: pair.target.is_ipv6(),
        streams: a.streams,
        direction: direction(&a.ends),
        duration: duration(a.ends.duration)?,
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        congestion: a.cc.clone(),
        buffer_len: a.buffer.unwrap_or(DEFAULT_BUFFER),
        allow: a.common.allow_target.clone(),
        port: a.ends.port.unwrap_or(0),
        rate_bps: a
            .rate
            .map(|r| tcp_rate_bps(r, a.common.line_rate_bps()))
            .transpose()?,
        interval: a.common.line_interval()?,
        omit: Duration::from_secs_f64(super::parse::omit_secs(a.omit)?),
        window: a.window,
        dscp: a.ends.dscp,
        vlan: a.vlan,
    };
    Ok((
        pair,
        a.probes.wrap(crate::orchestrate::config::Load::Tcp(t))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_control_is_checked_before_the_run() {
        let avail = "reno bbr cubic\n";
        assert!(check_cc_in("bbr", avail, "").is_ok());
        let e = check_cc_in("foo", avail, "").unwrap_err().to_string();
        assert!(e.contains("available: reno, bbr, cubic"), "{e}");
        assert!(e.contains("modprobe tcp_foo"), "{e}");
        let dep = "kernel/net/ipv4/tcp_vegas.ko.zst: \nkernel/net/ipv4/tcp_dctcp.ko:\n";
        assert!(check_cc_in("vegas", avail, dep).is_ok());
        assert!(check_cc_in("dctcp", avail, dep).is_ok());
        assert!(check_cc_in("veg", avail, dep).is_err());
        assert!(check_cc_in("foo", "", "").is_ok());
    }
}
