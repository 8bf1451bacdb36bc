//! The sequence the TCP and HTTP bodies share: open the listening side,
//! read every agent's counters, start the other side and collect its
//! reports, read the counters again, disarm the jobs, fail on a job's
//! error, record the kernel counters and then the kind's own figures, and
//! fail a run that was cut short. A kind supplies its phases
//! ([`Phases`]); [`run_phases`] keeps their order.
//!
//! UDP's body does not use it: it reads the DUT between the phases, meters
//! the generator's efficiency, takes the counters' span from the middle of
//! each snapshot, stops the receivers with the senders' totals and checks
//! that every receiver reported, all interleaved with this sequence's
//! steps. The iperf3 client reads its counters before its one job and
//! turns the far end's report into the result before the counters.

use super::jobs::{Collected, Jobs};
use super::record;
use super::setup::{cut_short, Ends, OnProgress};
use crate::proto::Snapshot;
use crate::results::{RunDir, TestResult};
use crate::runner::error::{fail, Result};
use std::collections::HashMap;

/// Every agent's kernel counters, by agent index.
pub(super) type Snapshots = HashMap<usize, Snapshot>;

/// The phases of one test in the shared sequence.
pub(super) trait Phases {
    /// What opening the listening side gives the later phases (the
    /// servers' ports, the address the clients go to).
    type Opened;
    /// What starting and collecting gives the record besides the reports
    /// (the agreed start).
    type Ran;

    /// Starts the listening side; returns what it gives and the agents
    /// whose counters the test reads.
    fn open(&self, jobs: &mut Jobs) -> Result<(Self::Opened, Vec<usize>)>;

    /// Starts the other side, reports progress while it runs and stops
    /// what has to be stopped; returns what was collected, what the record
    /// needs and whether the run ended on its own.
    fn start_and_collect(
        &self,
        jobs: &mut Jobs,
        opened: &Self::Opened,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
    ) -> Result<(Collected, Self::Ran, bool)>;

    /// The kind's own figures, after the kernel counters are recorded.
    fn record(
        &self,
        ends: &Ends,
        phases: (&Self::Opened, Self::Ran),
        col: &mut Collected,
        counters: (&Snapshots, &Snapshots),
        result: &mut TestResult,
    ) -> Result<()>;
}

/// Runs `phases` in the sequence's order into `result`.
pub(super) fn run_phases<P: Phases>(
    phases: &P,
    ends: &mut Ends,
    dir: &mut Option<&mut RunDir>,
    on_progress: OnProgress,
    result: &mut TestResult,
) -> Result<()> {
    let mut jobs = Jobs::new(ends.fleet);
    let (opened, agents) = phases.open(&mut jobs)?;
    let before = jobs.snapshot(&agents)?;
    let (mut col, ran, done) = phases.start_and_collect(&mut jobs, &opened, dir, on_progress)?;
    let after = jobs.snapshot(&agents)?;
    jobs.disarm();
    if !col.errors.is_empty() {
        fail!("{}", col.errors.join("; "));
    }
    record::counters(ends, &before, &after, result);
    phases.record(ends, (&opened, ran), &mut col, (&before, &after), result)?;
    if !done {
        fail!("{}", cut_short());
    }
    Ok(())
}
