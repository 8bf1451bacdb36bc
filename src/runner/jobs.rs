//! Jobs on agents: starting them (senders together, at an agreed instant),
//! gathering their reports, and stopping whatever a failed test left running.

use super::intervals::IntervalStore;
use crate::model::signals::stop_requested;
use crate::proto::{EndpointSummary, IntervalSample, Job, Request, Response, Snapshot};
use crate::runner::error::{fail, Result};
use crate::topology::Agents;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The jobs a test started. Dropped before [`Jobs::disarm`] (an error, a
/// lost agent, Ctrl-C), it stops every job still known to run, so no
/// receiver or sender outlives its test on any host.
pub(super) struct Jobs<'f> {
    pub fleet: &'f mut dyn Agents,
    started: Vec<(usize, u32)>,
    armed: bool,
}

impl<'f> Jobs<'f> {
    pub fn new(fleet: &'f mut dyn Agents) -> Self {
        Jobs {
            fleet,
            started: Vec::new(),
            armed: true,
        }
    }

    /// Starts `job` on `agent` (at `start_at`, controller-clock ns, if given)
    /// and returns the port it opened.
    pub fn start(
        &mut self,
        agent: usize,
        test: u32,
        job: Job,
        start_at: Option<u64>,
    ) -> Result<Option<u16>> {
        let start_at_unix_ns = start_at.map(|t| self.fleet.agent(agent).clock.to_agent_ns(t));
        let answer = self.fleet.call(
            agent,
            &Request::Start {
                test,
                job,
                start_at_unix_ns,
            },
            Duration::from_secs(15),
        )?;
        self.started.push((agent, test));
        match answer {
            Response::Started { port, .. } => Ok(port),
            other => fail!("unexpected answer to start: {other:?}"),
        }
    }

    pub fn stop(&mut self, agent: usize, test: u32, sender_totals: Vec<crate::proto::FlowTotal>) {
        let _ = self.fleet.send(
            agent,
            &Request::Stop {
                test,
                sender_totals,
            },
        );
    }

    pub fn snapshot(&mut self, agents: &[usize]) -> Result<HashMap<usize, Snapshot>> {
        let mut out = HashMap::new();
        for &a in agents {
            match self
                .fleet
                .call(a, &Request::Snapshot, Duration::from_secs(10))?
            {
                Response::Snapshot { mut snapshot } => {
                    // A guest's vCPUs are threads of qemu on this host:
                    // read here, where they run.
                    let agent = self.fleet.agent(a);
                    if agent.host.starts_with("vm:") {
                        snapshot.vcpus = crate::host::kernel::vcpu_threads(agent.pid);
                    }
                    out.insert(a, snapshot);
                }
                other => fail!("unexpected answer to snapshot: {other:?}"),
            }
        }
        Ok(out)
    }

    /// A start instant every sender can meet: far enough ahead to reach the
    /// slowest agent, controller-clock ns. One sender starts at once.
    pub fn agree_start(&self, senders: &[usize]) -> Option<u64> {
        if senders.len() < 2 {
            return None;
        }
        let worst_rtt = senders
            .iter()
            .map(|&a| self.fleet.agent(a).clock.rtt_s)
            .fold(0.0, f64::max);
        // Each Start is one round trip, sent one after the other.
        let lead = 0.2 + worst_rtt * (senders.len() as f64 + 2.0);
        Some(self.fleet.unix_ns() + (lead.min(10.0) * 1e9) as u64)
    }

    /// The test ended as planned: nothing to stop on drop.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Jobs<'_> {
    fn drop(&mut self) {
        if self.armed {
            for &(agent, test) in &self.started {
                let _ = self.fleet.send(
                    agent,
                    &Request::Stop {
                        test,
                        sender_totals: vec![],
                    },
                );
            }
        }
    }
}

/// What a test's jobs reported: interval samples (kept on disk, see
/// [`IntervalStore`]), final summaries and errors.
pub(super) struct Collected {
    pub intervals: IntervalStore,
    pub finished: HashMap<u32, EndpointSummary>,
    pub errors: Vec<String>,
    /// Each failed job's error, by its id.
    pub failed: HashMap<u32, String>,
}

impl Collected {
    /// Collects into a scratch file in `results_dir` (the temp directory
    /// without one).
    pub fn new(results_dir: Option<&Path>) -> Self {
        Collected {
            intervals: IntervalStore::new(results_dir),
            finished: HashMap::new(),
            errors: Vec::new(),
            failed: HashMap::new(),
        }
    }

    /// Job `id`'s summary: its own, or, for a job that never finished (an
    /// interrupted run whose agent did not answer the stop in time), the
    /// sum of the intervals it reported, so figures are partial, not zero.
    pub fn summary(&self, id: u32) -> EndpointSummary {
        match self.finished.get(&id) {
            Some(s) => s.clone(),
            None => self
                .intervals
                .running_summary(id)
                .cloned()
                .unwrap_or_default(),
        }
    }
}

/// Gathers reports until every id in `wait_for` finished, the deadline
/// passes, or the user interrupts; `Ok(false)` when it stopped early. A lost
/// agent is an error. `on_sample` gets each interval sample with when it
/// arrived, on the fleet's clock (virtual in the runner's tests).
pub(super) fn collect(
    fleet: &mut dyn Agents,
    col: &mut Collected,
    wait_for: &[u32],
    deadline: Instant,
    on_sample: impl FnMut(u32, &IntervalSample, Instant),
) -> Result<bool> {
    gather(fleet, col, wait_for, deadline, true, on_sample, |_| {})
}

/// [`collect`], calling `tick` with the fleet between reports (at least
/// every 100 ms) so a watcher can ask agents for snapshots meanwhile.
pub(super) fn collect_ticking(
    fleet: &mut dyn Agents,
    col: &mut Collected,
    wait_for: &[u32],
    deadline: Instant,
    on_sample: impl FnMut(u32, &IntervalSample, Instant),
    tick: impl FnMut(&mut dyn Agents),
) -> Result<bool> {
    gather(fleet, col, wait_for, deadline, true, on_sample, tick)
}

/// Gathers the final reports of jobs that were told to stop, until each in
/// `wait_for` finished or the deadline passes. A Ctrl-C does not cut this
/// short: it is what collects the counts of an interrupted test (a second
/// Ctrl-C still ends the process at once).
pub(super) fn collect_stopped(
    fleet: &mut dyn Agents,
    col: &mut Collected,
    wait_for: &[u32],
    deadline: Instant,
    on_sample: impl FnMut(u32, &IntervalSample, Instant),
) -> Result<bool> {
    gather(fleet, col, wait_for, deadline, false, on_sample, |_| {})
}

fn gather(
    fleet: &mut dyn Agents,
    col: &mut Collected,
    wait_for: &[u32],
    deadline: Instant,
    interruptible: bool,
    mut on_sample: impl FnMut(u32, &IntervalSample, Instant),
    mut tick: impl FnMut(&mut dyn Agents),
) -> Result<bool> {
    loop {
        tick(fleet);
        if wait_for.iter().all(|id| col.finished.contains_key(id)) {
            return Ok(true);
        }
        if (interruptible && stop_requested()) || fleet.now() > deadline {
            return Ok(false);
        }
        let Some((idx, ev)) = fleet.next_event(Duration::from_millis(100))? else {
            continue;
        };
        match ev {
            Response::Interval { test, sample } => {
                on_sample(test, &sample, fleet.now());
                col.intervals.push(test, sample);
            }
            Response::Finished { test, summary } => {
                col.finished.insert(test, summary);
            }
            Response::Error {
                test: Some(test),
                message,
            } => {
                col.failed.insert(test, message.clone());
                // The test's error names the agent, as a failed call does.
                col.errors
                    .push(format!("{}: {message}", fleet.agent(idx).label()));
                col.finished.insert(test, EndpointSummary::default());
            }
            _ => {}
        }
    }
}

/// Live rates summed over many jobs: each job's latest interval counts.
#[derive(Default)]
pub(super) struct LiveSum {
    latest: HashMap<u32, (f64, f64, u64, u64)>,
}

impl LiveSum {
    /// Records a job's interval: (pps, bit/s, packets, lost).
    pub fn update(&mut self, id: u32, s: &IntervalSample, bytes: u64, packets: u64) {
        let span = (s.t_end - s.t_start).max(1e-6);
        self.latest.insert(
            id,
            (
                packets as f64 / span,
                bytes as f64 * 8.0 / span,
                packets,
                s.lost,
            ),
        );
    }
    /// Sum over `ids`: (pps, bit/s, loss ratio).
    pub fn sum(&self, ids: &[u32]) -> (f64, f64, f64) {
        let (mut pps, mut bps, mut got, mut lost) = (0.0, 0.0, 0u64, 0u64);
        for id in ids {
            if let Some(&(p, b, n, l)) = self.latest.get(id) {
                pps += p;
                bps += b;
                got += n;
                lost += l;
            }
        }
        let loss = if got + lost > 0 {
            lost as f64 / (got + lost) as f64
        } else {
            0.0
        };
        (pps, bps, loss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::StreamSample;

    fn sample(t: f64, tx: u64, rx: u64, stream_bytes: u64) -> IntervalSample {
        IntervalSample {
            t_start: t - 1.0,
            t_end: t,
            tx_packets: tx,
            rx_packets: rx,
            lost: tx - rx,
            streams: vec![StreamSample {
                id: 0,
                sender: true,
                bytes: stream_bytes,
                retransmits: 1,
                cwnd: t as u32,
                rtt_us: 0,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn an_unfinished_job_is_summed_from_its_intervals() {
        let mut col = Collected::new(None);
        col.intervals.push(7, sample(1.0, 100, 90, 1000));
        col.intervals.push(7, sample(2.0, 100, 100, 500));
        let s = col.summary(7);
        assert_eq!((s.tx_packets, s.rx_packets, s.lost), (200, 190, 10));
        assert_eq!(s.elapsed_s, 2.0);
        assert_eq!(s.streams.len(), 1);
        assert_eq!((s.streams[0].bytes, s.streams[0].retransmits), (1500, 2));
        assert_eq!(s.streams[0].cwnd, 2);
        // A finished job's own summary wins; an unknown one is empty.
        col.finished.insert(
            7,
            EndpointSummary {
                tx_packets: 5,
                ..Default::default()
            },
        );
        assert_eq!(col.summary(7).tx_packets, 5);
        assert_eq!(col.summary(8), EndpointSummary::default());
    }
}
