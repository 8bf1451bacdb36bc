//! `linerate monitor`: its flags and the monitor configuration they describe.

use super::common::{OutputArgs, SshArgs};
use crate::proto::Cidr;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of `linerate monitor`.
#[derive(Args, Debug, Clone)]
pub struct MonitorArgs {
    /// A latency responder to probe, ENDPOINT=ADDR: linerate starts an agent at ENDPOINT
    /// (`local`, `ns:NAME`, `ssh://[user@]host[:port]`) and probes ADDR. Repeatable.
    #[arg(long = "responder", value_name = "ENDPOINT=ADDR")]
    pub responders: Vec<String>,
    /// A host to probe with ICMP echo (no responder needed). Repeatable.
    #[arg(long = "icmp", value_name = "ADDR")]
    pub icmp: Vec<IpAddr>,
    /// Seconds per window: one NDJSON line per window and target [default: 300, or the
    /// --duration when shorter (at least 1)]. A run's last window, cut short, is summarised too.
    #[arg(long, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub window: Option<f64>,
    /// Probes per window, spread evenly over it.
    #[arg(long, default_value_t = 20)]
    pub probes: u32,
    /// Stop after this many seconds (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration: Option<f64>,
    /// Directory of the journal (monitor.ndjson, rotated to .1, .2, ...).
    #[arg(long, short = 'o', default_value = "linerate-monitor")]
    pub out: PathBuf,
    /// Write an annotation event at the start (e.g. "firmware 1.2 installed"). Repeatable.
    #[arg(long, value_name = "TEXT")]
    pub annotate: Vec<String>,
    /// Watch this file for annotations: each new line `TEXT` or `UNIX_SECONDS TEXT`.
    #[arg(long, value_name = "FILE")]
    pub annotations: Option<PathBuf>,
    /// Serve Prometheus metrics on ADDR:PORT (or PORT, on 127.0.0.1) at /metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
    /// Write Prometheus metrics to this file (atomically) after every window, for
    /// node_exporter's textfile collector.
    #[arg(long, value_name = "PATH")]
    pub metrics_textfile: Option<PathBuf>,
    /// Rotate the journal when it reaches this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 16.0)]
    pub max_file_mib: f64,
    /// Journal files kept (the current one included).
    #[arg(long, default_value_t = 8)]
    pub max_files: u32,
    /// UDP payload bytes of responder probes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::proto::probe::DEFAULT_PAYLOAD)]
    pub probe_size: u16,
    /// Also allow probing this prefix (outside loopback, 198.18.0.0/15 and 2001:2::/48). Repeatable.
    #[arg(long = "allow-target", value_name = "CIDR")]
    pub allow_target: Vec<Cidr>,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// The summary of the whole run, written when it stops (summary.json); the journal
    /// (--out) keeps every window.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The default window: 300 s, or the whole run when it is shorter (at
/// least 1 s, so the default 20 probes stay within 100 per second).
const DEFAULT_WINDOW_S: f64 = 300.0;

/// The window `--window` gives, else the default for `duration`.
fn window_s(a: &MonitorArgs) -> f64 {
    a.window.unwrap_or_else(|| match a.duration {
        Some(d) if d.is_finite() && d > 0.0 => d.clamp(1.0, DEFAULT_WINDOW_S),
        _ => DEFAULT_WINDOW_S,
    })
}

/// A warning when the user's window is longer than the run: it would never
/// complete, and the summary holds one partial window.
fn window_warning(a: &MonitorArgs) -> Option<String> {
    let (w, d) = (a.window?, a.duration?);
    (w > d).then(|| {
        format!(
            "warning: --window {w} s is longer than the run (--duration {d} s): the summary covers \
             the whole run as one partial window; give --window {d} or less for complete windows"
        )
    })
}

/// Monitors, then prints the per-target table and writes the summary;
/// returns the exit status.
pub fn run(a: &MonitorArgs, cfg: crate::orchestrate::config::MonitorConfig) -> i32 {
    crate::orchestrate::summary::monitor(cfg, window_warning(a), &a.output.summary_out())
}

/// `linerate monitor`'s flags, validated.
pub fn monitor_config(a: &MonitorArgs) -> Result<crate::orchestrate::config::MonitorConfig> {
    let responders = a
        .responders
        .iter()
        .map(|r| crate::orchestrate::values::parse_responder(r))
        .collect::<Result<Vec<_>, _>>()?;
    if responders.is_empty() && a.icmp.is_empty() {
        bail!("nothing to monitor: give --responder ENDPOINT=ADDR and/or --icmp ADDR");
    }
    for ip in responders.iter().map(|r| r.1).chain(a.icmp.iter().copied()) {
        crate::orchestrate::values::check_probe_target(ip, &a.allow_target)?;
    }
    let window = window_s(a);
    if !(0.1..=86_400.0).contains(&window) {
        bail!("--window {window} is outside 0.1..=86400 s");
    }
    if !(1..=10_000).contains(&a.probes) || f64::from(a.probes) / window > 100.0 {
        bail!(
            "--probes {}: give 1..=10000 probes per window, at most 100 per second",
            a.probes
        );
    }
    let duration = match a.duration {
        Some(d) if d > 0.0 && d.is_finite() => Some(Duration::from_secs_f64(d)),
        Some(d) => bail!("--duration {d} must be a positive number of seconds"),
        None => None,
    };
    let metrics_listen = match &a.metrics_listen {
        None => None,
        Some(s) => {
            Some(match s.parse::<std::net::SocketAddr>() {
                Ok(a) => a,
                Err(_) => {
                    let port: u16 = s.parse().map_err(|_| {
                    anyhow!("--metrics-listen '{s}': write ADDR:PORT (e.g. 127.0.0.1:9109) or a port")
                })?;
                    std::net::SocketAddr::from(([127, 0, 0, 1], port))
                }
            })
        }
    };
    let (lo, hi) = (
        crate::proto::probe::HEADER_LEN as u16,
        crate::proto::probe::MAX_PAYLOAD,
    );
    if !(lo..=hi).contains(&a.probe_size) {
        bail!("--probe-size {} is outside {lo}..={hi} bytes", a.probe_size);
    }
    if !(0.01..=4096.0).contains(&a.max_file_mib) || !(1..=1000).contains(&a.max_files) {
        bail!("--max-file-mib must be 0.01..=4096 and --max-files 1..=1000");
    }
    Ok(crate::orchestrate::config::MonitorConfig {
        responders,
        icmp: a.icmp.clone(),
        window: Duration::from_secs_f64(window),
        probes: a.probes,
        duration,
        out: a.out.clone(),
        annotate: a.annotate.clone(),
        annotations: a.annotations.clone(),
        metrics_listen,
        metrics_textfile: a.metrics_textfile.clone(),
        max_file_bytes: (a.max_file_mib * 1048576.0) as u64,
        max_files: a.max_files,
        probe_size: a.probe_size,
        ssh: a.ssh.options()?,
        allow_target: a.allow_target.clone(),
        progress: !a.output.no_progress,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        m: MonitorArgs,
    }

    fn args(extra: &[&str]) -> MonitorArgs {
        let mut v = vec!["monitor", "--responder", "local=127.0.0.1"];
        v.extend(extra);
        Cmd::parse_from(v).m
    }

    #[test]
    fn the_default_window_is_the_run_when_shorter() {
        assert_eq!(window_s(&args(&[])), 300.0);
        assert_eq!(window_s(&args(&["--duration", "30"])), 30.0);
        assert_eq!(window_s(&args(&["--duration", "3600"])), 300.0);
        assert_eq!(window_s(&args(&["--duration", "0.2"])), 1.0);
        assert_eq!(
            window_s(&args(&["--duration", "30", "--window", "10"])),
            10.0
        );
        let c = monitor_config(&args(&["--duration", "30"])).unwrap();
        assert_eq!(c.window, Duration::from_secs(30));
    }

    #[test]
    fn only_an_explicit_window_longer_than_the_run_is_warned_of() {
        assert!(window_warning(&args(&["--duration", "30"])).is_none());
        assert!(window_warning(&args(&["--window", "300"])).is_none());
        assert!(window_warning(&args(&["--duration", "30", "--window", "30"])).is_none());
        let w = window_warning(&args(&["--duration", "30", "--window", "300"])).unwrap();
        assert!(
            w.contains("300 s is longer than the run") && w.contains("one partial window"),
            "{w}"
        );
    }
}
