//! What one test needs of a set of agents, as a trait: the runner drives a
//! [`Fleet`] of agent processes through it in a run, and a fleet of
//! scripted agents on a virtual clock in its tests (`runner/harness.rs`),
//! so its logic is tested without root or namespaces.

use super::error::Result;
use super::fleet::{Agent, Fleet};
use crate::proto::{Request, Response};
use std::time::{Duration, Instant};

/// The agents of a test and the clock their reports are waited on. The
/// clock methods default to the controller's own clocks; a stand-in fleet
/// overrides them to run on a virtual clock.
pub trait Agents {
    /// Agent `idx`, as the fleet started it.
    fn agent(&self, idx: usize) -> &Agent;
    /// Every agent, by index.
    fn agents(&self) -> &[Agent];
    /// Sends a request without waiting for an answer.
    fn send(&self, idx: usize, req: &Request) -> Result<()>;
    /// Sends a request and waits up to `timeout` for the agent's direct
    /// answer; job reports that arrive meanwhile wait for
    /// [`Agents::next_event`]. An `Error` answer is an error.
    fn call(&mut self, idx: usize, req: &Request, timeout: Duration) -> Result<Response>;
    /// The next job report (interval, finished, job error) from any agent,
    /// or `None` once `timeout` passes without one. A lost agent is an
    /// error ([`super::AgentLost`]).
    fn next_event(&mut self, timeout: Duration) -> Result<Option<(usize, Response)>>;
    /// The controller's monotonic clock, which test deadlines count on.
    fn now(&self) -> Instant {
        Instant::now()
    }
    /// The controller's realtime clock, ns since the epoch: agreed start
    /// instants and counter spans.
    fn unix_ns(&self) -> u64 {
        crate::sys::realtime_ns()
    }
    /// Waits `d` (the last datagrams crossing before receivers stop).
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

impl Agents for Fleet {
    fn agent(&self, idx: usize) -> &Agent {
        Fleet::agent(self, idx)
    }
    fn agents(&self) -> &[Agent] {
        Fleet::agents(self)
    }
    fn send(&self, idx: usize, req: &Request) -> Result<()> {
        Fleet::send(self, idx, req)
    }
    fn call(&mut self, idx: usize, req: &Request, timeout: Duration) -> Result<Response> {
        Fleet::call(self, idx, req, timeout)
    }
    fn next_event(&mut self, timeout: Duration) -> Result<Option<(usize, Response)>> {
        Fleet::next_event(self, timeout)
    }
}
