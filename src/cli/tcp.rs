//! `linerate tcp`: its flags and the test they describe.

use super::common::{direction, duration, pair, Common, Endpoints, ProbeArgs};
use super::config::{Pair, TestSpec};
use crate::runner::TcpTest;
use anyhow::{bail, Result};
use clap::Args;

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
    /// Bytes per write.
    #[arg(long, default_value_t = 131072)]
    pub buffer: u32,
    #[command(flatten)]
    pub probes: ProbeArgs,
    #[command(flatten)]
    pub common: Common,
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
        ipv6: a.ends.target.is_ipv6(),
        streams: a.streams,
        direction: direction(&a.ends),
        duration: duration(a.ends.duration)?,
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        congestion: a.cc.clone(),
        buffer_len: a.buffer,
        allow: a.common.allow_target.clone(),
    };
    Ok((pair, a.probes.wrap(crate::runner::Load::Tcp(t))?))
}
