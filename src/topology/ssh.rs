//! TEMPORARY placeholder until the ssh transport lands (replaced at merge).
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}
impl SshTarget {
    pub fn parse_url(s: &str) -> Result<Self, String> {
        Self::parse_bare(s.trim_start_matches("ssh://"))
    }
    pub fn parse_bare(s: &str) -> Result<Self, String> {
        Ok(SshTarget {
            user: None,
            host: s.into(),
            port: None,
        })
    }
}
impl std::fmt::Display for SshTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ssh://{}", self.host)
    }
}
#[derive(Debug, Clone, Default)]
pub struct SshOptions {
    pub config: Option<PathBuf>,
    pub options: Vec<(String, String)>,
    pub accept_new: bool,
    pub connect_timeout: Duration,
    pub remote_binary: Option<String>,
    pub push: bool,
}
pub struct ControlDir;
impl ControlDir {
    pub fn new() -> std::io::Result<Self> {
        Ok(ControlDir)
    }
}
pub struct SshSession;
impl SshSession {
    pub fn open(_t: &SshTarget, _o: &SshOptions, _d: &ControlDir) -> Result<Self> {
        bail!("placeholder")
    }
    pub fn connect_time(&self) -> Duration {
        Duration::ZERO
    }
    pub fn command(&self, _argv: &[&str]) -> Command {
        Command::new("false")
    }
    pub fn resolve_binary(&self, _o: &SshOptions) -> Result<String> {
        bail!("placeholder")
    }
    pub fn close(&mut self) {}
}
