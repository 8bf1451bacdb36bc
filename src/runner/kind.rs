//! One interface for every test kind that makes one result: what the
//! results document calls it, its parameters, whether `--abort-on-fail`
//! may watch its interval lines, and its body. [`run`] drives any of them
//! the same way: a [`TestResult`] with the kind's name and parameters, the
//! body, and an error turned into a failed (interrupted, aborted) result.
//!
//! The kinds: [`TcpTest`], [`UdpTest`], [`HttpTest`], [`LatencyTest`]
//! (which wraps its load's run in probe phases by overriding
//! [`TestKind::run`]) and [`Iperf3Test`] against a stock server. Tests
//! against linerate's own iperf3 server make one result per client and
//! have their own entry point (`run_iperf3_served`).
//!
//! [`TcpTest`]: super::TcpTest
//! [`UdpTest`]: super::UdpTest
//! [`HttpTest`]: super::HttpTest
//! [`LatencyTest`]: super::LatencyTest
//! [`Iperf3Test`]: super::Iperf3Test

use super::setup::{finish_test, Ends, OnProgress};
use crate::results::{RunDir, TestParams, TestResult};
use crate::runner::error::Result;
use std::time::Duration;

/// A kind of test that makes one result.
pub trait TestKind {
    /// The test's name in results, progress lines and the run directory.
    fn name(&self) -> &str;

    /// The results document's parameters of this test between `ends`.
    fn params(&self, ends: &Ends) -> TestParams;

    /// The width of the interval lines `--abort-on-fail` holds to the
    /// criteria while the test runs; `None`: the kind is not watched.
    fn interval(&self) -> Option<Duration>;

    /// Whether a direction that offered frames and received none fails
    /// the test (unless the user expects loss): 100 % loss is then a
    /// broken path, not a measurement. Only plain UDP tests say so.
    fn fails_on_total_loss(&self) -> bool {
        false
    }

    /// Starts, collects, stops and records the test into `result`, which
    /// already has its name, start time and parameters. An error fails
    /// the test with its words.
    fn body(
        &self,
        ends: &mut Ends,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()>;

    /// Runs the whole test. The default is [`drive`]; a kind that wraps
    /// another's run (latency: probe phases around its load) overrides it.
    fn run(
        &self,
        ends: &mut Ends,
        dir: Option<&mut RunDir>,
        on_progress: OnProgress,
    ) -> TestResult {
        drive(self, ends, dir, on_progress)
    }
}

/// Runs `test` between `ends`: the one entry point of every single-result
/// test kind.
pub fn run(
    ends: &mut Ends,
    test: &dyn TestKind,
    dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> TestResult {
    test.run(ends, dir, on_progress)
}

/// A result with `test`'s name, the time now and its parameters, filled in
/// by its body; an error marks it failed (or interrupted, or aborted).
pub fn drive<K: TestKind + ?Sized>(
    test: &K,
    ends: &mut Ends,
    mut dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> TestResult {
    let started_at = crate::model::clock::now_rfc3339();
    let params = test.params(ends);
    finish_test(TestResult::new(test.name(), started_at, params), |r| {
        test.body(ends, &mut dir, on_progress, r)
    })
}
