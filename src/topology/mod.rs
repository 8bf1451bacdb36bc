//! Hosts and transports: where agents run (this namespace, a named network
//! namespace, another host over ssh) and how the controller reaches them.
//! Every topology, the lab included, is a set of agents started through
//! here; only the command that starts an agent differs.
//!
//! This layer knows nothing of tests or results; the runner drives the
//! agents it returns.

mod agents;
mod error;
pub mod fleet;
pub mod ssh;

pub use agents::Agents;
pub use error::{AgentLost, TopologyError};
pub use fleet::{ClockSync, Fleet};

use crate::model::error::Context;
use error::{err, fail, Result};
use ssh::{ControlDir, SshOptions, SshSession, SshTarget};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

/// Where an agent's data plane lives: the network namespace it serves in.
/// It belongs here, with the hosts and transports that start agents; the
/// agent itself only enters it.
#[derive(Debug, Clone)]
pub enum Netns {
    /// The namespace the agent was started in.
    Current,
    /// A fresh anonymous namespace that dies with the agent.
    New,
    /// An existing named namespace (/run/netns/NAME).
    Named(String),
}

/// Where an agent runs, as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// This host, this namespace.
    Local,
    /// An existing named network namespace on this host (`ip netns`).
    Netns(String),
    /// Another host, reached with the system's OpenSSH client.
    Ssh(SshTarget),
}

impl Endpoint {
    /// Parses `local`, `ns:NAME` or `ssh://[user@]host[:port]`.
    pub fn parse(spec: &str) -> Result<Self> {
        if spec == "local" {
            return Ok(Endpoint::Local);
        }
        if let Some(name) = spec
            .strip_prefix("ns:")
            .or_else(|| spec.strip_prefix("netns:"))
        {
            crate::netops::check_ifname(name)
                .map_err(|_| err!("'{name}' is not a namespace name"))?;
            return Ok(Endpoint::Netns(name.into()));
        }
        if spec.starts_with("ssh://") {
            return SshTarget::parse_url(spec)
                .map(Endpoint::Ssh)
                .map_err(|e| TopologyError::Other(e.into()));
        }
        fail!("'{spec}' is not an endpoint: use `local`, `ns:NAME` or `ssh://[user@]host[:port]`")
    }

    /// Checks what can be checked before anything starts.
    pub fn preflight(&self) -> Result<()> {
        if let Endpoint::Netns(name) = self {
            if !Path::new("/run/netns").join(name).exists() {
                fail!(
                    "network namespace '{name}' does not exist (see `ip netns list`); create it or name another"
                );
            }
            if !crate::sys::is_root() {
                fail!("entering network namespace '{name}' needs root; run as root");
            }
        }
        Ok(())
    }
}

/// An ssh host in a benchmarking range that this namespace reaches only
/// through its default route is refused, as test traffic there is: the
/// ranges belong to isolated labs (RFC 2544, RFC 6815), and a default
/// route leads out of one. `--allow-target` says that path is a lab.
fn check_ssh_route(
    target: &SshTarget,
    address: Option<IpAddr>,
    allow: &[crate::proto::Cidr],
) -> Result<()> {
    let Some(ip) = address else { return Ok(()) };
    let lab = crate::netops::reach::benchmark_ranges()
        .iter()
        .any(|c| c.contains(ip));
    if !lab || ip.is_loopback() || allow.iter().any(|c| c.contains(ip)) {
        return Ok(());
    }
    if let Some((_, route)) = crate::netops::reach::only_default_route(&[ip]) {
        let prefix = match ip {
            IpAddr::V4(a) => format!("{a}/32"),
            IpAddr::V6(a) => format!("{a}/128"),
        };
        fail!(
            "{target}: refusing to connect to {ip}: it is in a benchmarking range, but this \
             host's route to it ({route}) leads out of any isolated lab \
             (RFC 2544, RFC 6815: these ranges are for isolated test networks). Add a route to \
             the lab, or if that path is an isolated test network, pass --allow-target {prefix} \
             (or list it in the plan's allow_target)"
        );
    }
    Ok(())
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Local => f.write_str("local"),
            Endpoint::Netns(n) => write!(f, "ns:{n}"),
            Endpoint::Ssh(t) => write!(f, "{t}"),
        }
    }
}

/// Addresses one endpoint offers to tests.
#[derive(Debug, Clone, Default)]
pub struct Addressing {
    pub v4: Option<IpAddr>,
    pub v6: Option<IpAddr>,
    /// First address of a /24 (v4) or /64 (v6) accepted locally (AnyIP) and
    /// usable as varying source addresses: flows vary addresses within it.
    pub flow_v4: Option<Ipv4Addr>,
    pub flow_v6: Option<Ipv6Addr>,
    /// The VLAN tags this end's UDP frames carry (`--vlan`, a plan host's
    /// `vlan`); none: untagged.
    pub vlan: Option<crate::proto::Vlan>,
}

impl Addressing {
    /// One address, no flow prefix: an endpoint linerate did not build.
    pub fn single(ip: Option<IpAddr>) -> Self {
        Addressing {
            v4: ip.filter(|a| a.is_ipv4()),
            v6: ip.filter(|a| a.is_ipv6()),
            ..Default::default()
        }
    }
    pub fn main(&self, v6: bool) -> Option<IpAddr> {
        if v6 {
            self.v6
        } else {
            self.v4
        }
    }
    /// The i-th varying address (1-based host part), if this side has a flow prefix.
    pub fn flow(&self, v6: bool, i: u16) -> Option<IpAddr> {
        if v6 {
            self.flow_v6
                .map(|b| IpAddr::V6(Ipv6Addr::from(u128::from(b) + u128::from(i) + 1)))
        } else {
            self.flow_v4
                .map(|b| IpAddr::V4(Ipv4Addr::from(u32::from(b) + u32::from(i % 254) + 1)))
        }
    }
}

/// The hosts of one run: ssh connections (one ControlMaster per host) and
/// the agents started on them.
pub struct Hosts {
    pub fleet: Fleet,
    ssh: SshOptions,
    /// `--allow-target` and a plan's `allow_target`: ssh hosts in these
    /// prefixes may be reached through the default route.
    allow_target: Vec<crate::proto::Cidr>,
    control: Option<ControlDir>,
    sessions: Vec<(SshTarget, SshSession, String)>,
    /// The guests booted as hosts (`crate::vm::host`), by agent index:
    /// what the results record of each.
    pub vms: Vec<(usize, crate::model::lab::LabVm)>,
}

impl Hosts {
    pub fn new(ssh: SshOptions) -> Self {
        Hosts {
            fleet: Fleet::new(),
            ssh,
            allow_target: Vec::new(),
            control: None,
            sessions: Vec::new(),
            vms: Vec::new(),
        }
    }

    /// Prefixes the user allowed (`--allow-target`, a plan's
    /// `allow_target`): ssh hosts there pass the route check.
    pub fn allowing(mut self, allow_target: &[crate::proto::Cidr]) -> Self {
        self.allow_target = allow_target.to_vec();
        self
    }

    /// Starts an agent with role `role` at `endpoint`; on an ssh host the
    /// agent may run in a fresh namespace there (`netns`), e.g. for ports.
    /// `binary` overrides the remote linerate path for this host.
    pub fn spawn(
        &mut self,
        role: &str,
        endpoint: &Endpoint,
        netns: Netns,
        binary: Option<&str>,
        log: Option<&Path>,
    ) -> Result<usize> {
        endpoint.preflight()?;
        let began = std::time::Instant::now();
        let netns = match (endpoint, netns) {
            (Endpoint::Netns(n), _) => Netns::Named(n.clone()),
            (_, n) => n,
        };
        let cmd = match endpoint {
            Endpoint::Local | Endpoint::Netns(_) => local_command(&netns)?,
            Endpoint::Ssh(target) => self.ssh_command(target, &netns, binary)?,
        };
        let idx = self.fleet.spawn(role, &endpoint.to_string(), cmd, log)?;
        // Connecting includes the ssh login and any push, not only the agent.
        self.fleet
            .set_connect_time(idx, began.elapsed().as_secs_f64());
        Ok(idx)
    }

    fn ssh_command(
        &mut self,
        target: &SshTarget,
        netns: &Netns,
        binary: Option<&str>,
    ) -> Result<Command> {
        if !self.sessions.iter().any(|(t, _, _)| t == target) {
            check_ssh_route(target, self.ssh.address_of(target), &self.allow_target)?;
            if self.control.is_none() {
                self.control =
                    Some(ControlDir::new().context("creating the ssh control directory")?);
            }
            let mut opts = self.ssh.clone();
            if let Some(b) = binary {
                opts.remote_binary = Some(b.to_string());
            }
            let dir = self.control.as_ref().context("ssh control directory")?;
            let session = SshSession::open(target, &opts, dir)?;
            let bin = session.resolve_binary(&opts)?;
            self.sessions.push((target.clone(), session, bin));
        }
        let (_, session, bin) = self
            .sessions
            .iter()
            .find(|(t, _, _)| t == target)
            .context("ssh session")?;
        let mut argv = vec![bin.as_str(), "agent", "--stdio"];
        match netns {
            Netns::Current => {}
            Netns::New => argv.extend(["--netns", "new"]),
            Netns::Named(n) => argv.extend(["--netns", n.as_str()]),
        }
        // Fleet::spawn puts it in its own process group: a Ctrl-C at the
        // terminal goes to the controller alone, not to ssh.
        Ok(session.command(&argv))
    }

    /// Seconds each ssh connection took to come up, by host.
    pub fn ssh_connect_times(&self) -> Vec<(String, f64)> {
        self.sessions
            .iter()
            .map(|(t, s, _)| (t.to_string(), s.connect_time().as_secs_f64()))
            .collect()
    }

    /// A host lost mid-run ends the run partial (its tests already say why).
    pub fn check_lost(&self) -> Result<()> {
        check_lost(self.fleet.agents())
    }

    /// Stops every agent, then closes the ssh connections.
    pub fn shutdown(&mut self) {
        self.fleet.shutdown();
        for (_, s, _) in &mut self.sessions {
            s.close();
        }
        self.sessions.clear();
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Fails naming the first of `agents` that was lost, with why each lost
/// one was; typed, so the command can tell a lost agent (exit 3, the run
/// failed) from a test that failed.
pub fn check_lost(agents: &[fleet::Agent]) -> Result<()> {
    let lost: Vec<String> = agents.iter().filter_map(|a| a.lost.clone()).collect();
    match agents.iter().position(|a| a.lost.is_some()) {
        Some(agent) => Err(TopologyError::AgentLost(AgentLost {
            agent,
            message: lost.join("; "),
        })),
        None => Ok(()),
    }
}

impl Fleet {
    /// Starts an agent on this host, in `netns` (the lab's way).
    pub fn spawn_local(&mut self, role: &str, netns: &Netns, log: Option<&Path>) -> Result<usize> {
        let host = match netns {
            Netns::Named(n) => format!("ns:{n}"),
            _ => "local".to_string(),
        };
        self.spawn(role, &host, local_command(netns)?, log)
    }
}

/// `linerate agent --stdio` here, in `netns`.
fn local_command(netns: &Netns) -> Result<Command> {
    let exe = std::env::current_exe().context("finding the linerate executable to start agents")?;
    let mut cmd = Command::new(exe);
    cmd.arg("agent").arg("--stdio");
    match netns {
        Netns::Current => {}
        Netns::New => {
            cmd.args(["--netns", "new"]);
        }
        Netns::Named(n) => {
            cmd.args(["--netns", n]);
        }
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(Endpoint::parse("local").unwrap(), Endpoint::Local);
        assert_eq!(
            Endpoint::parse("ns:gen").unwrap(),
            Endpoint::Netns("gen".into())
        );
        assert!(matches!(
            Endpoint::parse("ssh://root@198.18.0.1:2222").unwrap(),
            Endpoint::Ssh(_)
        ));
        let e = Endpoint::parse("gen").unwrap_err().to_string();
        assert!(e.contains("ssh://"), "{e}");
    }

    #[test]
    fn flow_addresses() {
        let a = Addressing {
            flow_v4: Some(Ipv4Addr::new(198, 19, 1, 0)),
            flow_v6: Some(Ipv6Addr::new(0x2001, 2, 0, 0x21, 0, 0, 0, 0)),
            ..Default::default()
        };
        assert_eq!(a.flow(false, 0), Some("198.19.1.1".parse().unwrap()));
        assert_eq!(a.flow(false, 253), Some("198.19.1.254".parse().unwrap()));
        assert_eq!(a.flow(false, 254), Some("198.19.1.1".parse().unwrap()));
        assert_eq!(a.flow(true, 15), Some("2001:2:0:21::10".parse().unwrap()));
        assert_eq!(Addressing::default().flow(false, 0), None);
    }
}
