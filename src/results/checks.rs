//! Kernel cross-checks: a test's interface counters and the application's
//! figures held against what the kernel counted.

use crate::proto::{IfCounters, UdpCounters};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct KernelCounters {
    pub role: String,
    pub interface: String,
    pub before: IfCounters,
    pub after: IfCounters,
    /// UDP counters of the namespace (same for each interface in it).
    pub udp_delta: UdpCounters,
}

#[derive(Serialize, Deserialize, Debug, Clone, JsonSchema)]
pub struct CrossCheck {
    pub what: String,
    pub application: u64,
    pub kernel: u64,
    /// |kernel - application| / max(application, 1).
    pub difference_ratio: f64,
    pub flagged: bool,
    /// Whose interface counters the check read, for a runner that adds
    /// linerate's own other packets there afterwards (the latency probes
    /// beside a load); not part of the results.
    #[serde(skip)]
    #[schemars(skip)]
    pub scope: Option<CheckScope>,
}

/// A namespace's interface counters, one way: what a kernel-side figure of
/// a [`CrossCheck`] counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckScope {
    /// The namespace's key (host, netns id), as the fleet knows it.
    pub netns: (String, u64),
    /// Sent (tx_packets) rather than received (rx_packets).
    pub tx: bool,
}

impl CrossCheck {
    pub fn new(what: impl Into<String>, application: u64, kernel: u64) -> Self {
        let diff = (kernel as f64 - application as f64).abs() / (application.max(1) as f64);
        CrossCheck {
            what: what.into(),
            application,
            kernel,
            difference_ratio: diff,
            flagged: diff > 0.01,
            scope: None,
        }
    }

    /// The check with `n` more on the application's side, said in `what`
    /// (`because`: e.g. "latency probes"), judged again by [`CrossCheck::new`]'s
    /// rule: packets linerate sent or received there that are not the
    /// test's, which the kernel's counters include.
    pub fn add_own(&mut self, n: u64, because: &str) {
        if n == 0 {
            return;
        }
        let mut c = CrossCheck::new(
            format!("{} (+ {n} {because})", self.what),
            self.application + n,
            self.kernel,
        );
        c.scope = self.scope.take();
        *self = c;
    }

    /// A check where the kernel may count more than the application for a
    /// reason nobody here can measure (a far end's retransmits, when the
    /// far end is not a linerate agent): flagged only when the kernel saw
    /// over 1 % less than the application, which nothing explains.
    pub fn kernel_at_least(what: impl Into<String>, application: u64, kernel: u64) -> Self {
        let mut c = CrossCheck::new(what, application, kernel);
        c.flagged = (kernel as f64) < application as f64 * 0.99;
        c
    }
}
