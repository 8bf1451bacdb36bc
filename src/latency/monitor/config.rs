//! What `linerate monitor` runs.

use crate::topology::ssh::SshOptions;
use crate::topology::Endpoint;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// What `linerate monitor` runs, validated.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub responders: Vec<(Endpoint, IpAddr)>,
    pub icmp: Vec<IpAddr>,
    pub window: Duration,
    pub probes: u32,
    pub duration: Option<Duration>,
    pub out: PathBuf,
    pub annotate: Vec<String>,
    pub annotations: Option<PathBuf>,
    pub metrics_listen: Option<SocketAddr>,
    pub metrics_textfile: Option<PathBuf>,
    pub max_file_bytes: u64,
    pub max_files: u32,
    pub probe_size: u16,
    pub ssh: SshOptions,
    /// `--allow-target`: ssh responders there may be reached through the
    /// default route.
    pub allow_target: Vec<crate::proto::Cidr>,
    /// A live line of the counts so far on a terminal's stderr.
    pub progress: bool,
}
