//! `linerate serve`: its flags and the server configuration they describe.

use super::common::{secs, OutputArgs};
use super::parse::parse_size;
use crate::orchestrate::config::ServeConfig;
use crate::orchestrate::config::{ServeLimits as Limits, ServeSpec};
use crate::orchestrate::values::DEFAULT_MAX_PER_CLIENT;
use crate::proto::http::Content;
use anyhow::{bail, Result};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `linerate serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address and port to listen on (e.g. 198.18.0.2:8080, [::1]:8443, 127.0.0.1:0).
    #[arg(long, value_name = "ADDR:PORT", required_unless_present = "iperf3")]
    pub listen: Option<SocketAddr>,
    /// Be an iperf3 server instead: stock `iperf3 -c` clients (3.x; TCP, UDP, -R, --bidir,
    /// -P) test against linerate, one at a time unless --max-clients; a results directory
    /// per test.
    #[arg(long, conflicts_with_all = ["root", "size", "tls"])]
    pub iperf3: bool,
    /// With --iperf3: the port on every IPv4 address (default 5201); --listen picks an address.
    #[arg(long, requires = "iperf3", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// With --iperf3: the longest test a client may ask for (-t plus -O); longer ones
    /// are refused with iperf3's "test duration too long". At most 86400.
    #[arg(long, value_name = "SECS", requires = "iperf3",
          default_value_t = crate::orchestrate::values::DEFAULT_MAX_TIME_S,
          value_parser = super::parse::parse_secs)]
    pub max_test_time: f64,
    /// With --iperf3: the most UDP payload this server sends for one test (-u -R or
    /// --bidir, over all streams; -b 0 counts as more); over it the test is refused
    /// with iperf3's "total required bandwidth is larger than server limit". 0: no cap.
    /// TCP is not capped (its congestion control sends only what the client's path takes).
    #[arg(long, value_name = "RATE", requires = "iperf3", default_value = "10G",
          value_parser = super::parse::parse_bps)]
    pub max_udp_send_rate: f64,
    /// With --iperf3: stock iperf3 clients testing at once, each with its own results (1..=64);
    /// one more hears iperf3's "the server is busy running a test". Each test holds at most
    /// 393 open files and 3 threads plus one per stream.
    #[arg(long, value_name = "N", requires = "iperf3", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=crate::orchestrate::values::MAX_CLIENTS as i64))]
    pub max_clients: u32,
    /// Serve the files under this directory (never a path outside it).
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present_any = ["size", "iperf3"],
        conflicts_with = "size"
    )]
    pub root: Option<PathBuf>,
    /// Serve a generated object of this size from memory at every path (e.g. 1G, 100M, 4096).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// HTTPS (rustls, TLS 1.3 and 1.2); a self-signed certificate is made unless --cert/--key.
    #[arg(long)]
    pub tls: bool,
    /// Certificate chain (PEM) for --tls.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "key"])]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) for --tls.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "cert"])]
    pub key: Option<PathBuf>,
    /// Write the generated self-signed certificate (PEM) here, for `curl --cacert`.
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub write_cert: Option<PathBuf>,
    /// Do not hand TLS records to the kernel even where it has the tls ULP.
    #[arg(long)]
    pub no_ktls: bool,
    /// TCP congestion control of every connection (e.g. cubic, bbr; default: the kernel's).
    #[arg(long, conflicts_with = "iperf3")]
    pub cc: Option<String>,
    /// Evict --root files from the page cache first (measure the disk), instead of warming them.
    #[arg(long, requires = "root")]
    pub cold: bool,
    /// Connections open at once; more are refused (503, or a TLS alert on a TLS port) and logged.
    /// Default: the open-files limit (raised to its hard limit) minus a reserve.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65_000))]
    pub max_connections: Option<u32>,
    /// Connections open at once from one client address; more are refused and logged.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PER_CLIENT as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_per_client: u32,
    /// Event-loop threads (default: one per CPU linerate may run on).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: Option<u32>,
    /// Seconds a client has to send a complete request head (and body, and
    /// TLS handshake); idle keep-alive connections close after it too.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = super::parse::parse_secs)]
    pub request_timeout: f64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration: Option<f64>,
    /// The summary of the whole serving, written when it stops (summary.json).
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `linerate serve`: the validated server.
pub fn serve_config(a: &ServeArgs) -> Result<ServeConfig> {
    if let Some(cc) = &a.cc {
        super::tcp::check_cc(cc)?;
    }
    let content = match (&a.root, a.size) {
        (Some(r), _) => Content::Root(r.clone()),
        (None, Some(n)) => Content::Size(n),
        (None, None) => bail!("give --root DIR or --size BYTES"),
    };
    let listen = a
        .listen
        .ok_or_else(|| anyhow::anyhow!("give --listen ADDR:PORT (e.g. 198.18.0.2:8080)"))?;
    Ok(ServeConfig {
        listen,
        spec: ServeSpec {
            content,
            tls: a.tls.then(|| a.cert.clone().zip(a.key.clone())),
            ktls: !a.no_ktls,
            cold: a.cold,
            request_timeout: secs("--request-timeout", a.request_timeout)?,
            names: vec!["localhost".into(), listen.ip().to_string()],
            congestion: a.cc.clone(),
        },
        limits: Limits {
            max_connections: a.max_connections.map(|n| n as usize),
            max_per_client: a.max_per_client as usize,
            workers: a.workers.unwrap_or(0) as usize,
        },
        duration: a.duration.map(|d| secs("--duration", d)).transpose()?,
        write_cert: a.write_cert.clone(),
        json: a.output.json,
        progress: !a.output.no_progress,
    })
}

/// Serves, then writes the summary; returns the exit status.
pub fn run(a: &ServeArgs, cfg: &ServeConfig) -> i32 {
    crate::orchestrate::summary::serve(cfg, &a.output.summary_out())
}
