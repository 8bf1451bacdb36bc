//! `linerate agent`: its flags and the namespace and limits they describe.

use crate::orchestrate::config::AgentConfig;
use clap::Args;
use std::time::Duration;

/// Flags of `linerate agent`.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// Speak the control protocol on stdin/stdout (the only transport).
    #[arg(long, required = true)]
    pub stdio: bool,
    /// Network namespace: `new` (anonymous, dies with the agent) or the name of an existing one.
    #[arg(long)]
    pub netns: Option<String>,
    /// Longest test this agent accepts, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub max_duration: u64,
    /// Highest UDP send rate this agent accepts, in pps (default: no cap).
    #[arg(long)]
    pub max_rate: Option<f64>,
}

/// `linerate agent`: where the data plane lives and what the agent accepts.
pub fn agent(a: &AgentArgs) -> AgentConfig {
    AgentConfig {
        netns: a.netns.clone(),
        max_duration: Duration::from_secs(a.max_duration),
        max_rate_pps: a.max_rate,
    }
}
