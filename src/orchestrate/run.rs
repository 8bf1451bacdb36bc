//! One run from start to finish: the results document, its directory, the
//! progress line, and what happens on Ctrl-C. Shared by every command.

use crate::model::criteria::Criterion;
use crate::model::error::chain;
use crate::model::signals::{self, interrupted};
use crate::model::stderr::{errln, errprint};
use crate::model::stdout;
use crate::orchestrate::abort::{self, Watch};
use crate::orchestrate::config::{AbortOpts, CriteriaOpts, RunOpts};
use crate::orchestrate::error::{OrchestrateError, Result};
use crate::report::terminal::{self as report, ProgressLine};
use crate::results::criteria::Marks;
use crate::results::{self, RunDir, RunResults, RunStatus, TestResult, SCHEMA_VERSION};
use crate::runner;
use crate::topology::fleet::Agent;
use crate::topology::Hosts;

pub struct Run {
    pub results: RunResults,
    pub dir: Option<RunDir>,
    pub progress: ProgressLine,
    json: bool,
    expect_loss: bool,
    criteria: CriteriaOpts,
    /// Plan tests' own criteria and the results they added.
    scopes: Vec<(Vec<Criterion>, Marks, Marks)>,
    /// The running plan test's own criteria, when they abort the run
    /// (`abort_on_fail`).
    scope_abort: Option<(Vec<Criterion>, AbortOpts)>,
}

impl Run {
    pub fn start(common: &RunOpts, name: &str) -> Result<Self> {
        let dir = if common.write_results {
            Some(RunDir::create(&common.results_dir, name)?)
        } else {
            None
        };
        let doctor = linerate_doctor::inspect(&linerate_doctor::Options::default())
            .map(|report| {
                vec![results::DoctorEntry {
                    host: "local".into(),
                    report,
                }]
            })
            .unwrap_or_default();
        let results = RunResults {
            schema_version: SCHEMA_VERSION.into(),
            linerate_version: env!("CARGO_PKG_VERSION").into(),
            status: RunStatus::Partial,
            name: name.into(),
            command_line: std::env::args().collect(),
            started_at: crate::model::clock::now_rfc3339(),
            finished_at: None,
            host: results::host_facts(),
            line_rate_bps: common.line_rate_bps,
            line_rate_given: common.line_rate_given,
            labs: vec![],
            tests: vec![],
            doctor,
            ramps: vec![],
            searches: vec![],
            search_repeats: vec![],
            error: None,
            agents: vec![],
            repeat: common.criteria.repeat.max(1),
            criteria: vec![],
            baseline: None,
            sweeps: vec![],
            abort: None,
        };
        let run = Run {
            results,
            dir,
            progress: match common.interval_s {
                Some(s) => ProgressLine::new(common.progress).with_intervals(s, !common.json),
                None => ProgressLine::new(common.progress),
            },
            json: common.json,
            expect_loss: common.expect_loss,
            criteria: common.criteria.clone(),
            scopes: vec![],
            scope_abort: None,
        };
        run.save();
        if !common.allow_target.is_empty() {
            let list: Vec<String> = common.allow_target.iter().map(|c| c.to_string()).collect();
            errln!(
                "WARNING: --allow-target lets linerate send load-test traffic to {} in addition to \
                 loopback and the benchmarking ranges. Only do this on an isolated test network.",
                list.join(", ")
            );
        }
        Ok(run)
    }

    /// How many times each test runs (`--repeat`).
    pub fn repeat(&self) -> u32 {
        self.results.repeat.max(1)
    }

    /// Holds `expect` (a plan test's criteria) against what the run added
    /// since `from`.
    pub fn hold_to(&mut self, expect: &[Criterion], from: Marks) {
        if !expect.is_empty() {
            self.scopes
                .push((expect.to_vec(), from, Marks::of(&self.results)));
        }
    }

    /// Watches `expect` (a plan test's own criteria) while the tests up to
    /// the next call run, when `abort` says so; `None` stops watching.
    pub fn watch_scope(&mut self, expect: &[Criterion], abort: Option<AbortOpts>) {
        self.scope_abort = abort.map(|a| (expect.to_vec(), a));
    }

    /// What `--abort-on-fail` watches over a test cut every `interval`:
    /// the run's criteria and the plan test's own, each with its grace
    /// period; `None` without any.
    fn watch(&self, interval: std::time::Duration) -> Option<Watch> {
        let mut list = Vec::new();
        if let Some(a) = self.criteria.abort {
            let g = abort::grace(a.after, interval);
            list.extend(self.criteria.expect.iter().map(|c| (c.clone(), g)));
        }
        if let Some((expect, a)) = &self.scope_abort {
            let g = abort::grace(a.after, interval);
            list.extend(expect.iter().map(|c| (c.clone(), g)));
        }
        Watch::new(&list)
    }

    /// Runs `body` (a test) with its progress shown and, with
    /// `--abort-on-fail`, its interval lines held to the criteria: the
    /// first that has clearly failed stops the test and the run as Ctrl-C
    /// does, and is recorded.
    fn watched(
        &mut self,
        interval: std::time::Duration,
        body: impl FnOnce(Option<&mut RunDir>, runner::OnProgress) -> TestResult,
    ) -> TestResult {
        let mut watch = self.watch(interval);
        let mut hit: Option<results::criteria::AbortRecord> = None;
        let progress = &self.progress;
        let mut cb = |p: &runner::Progress| {
            progress.update(p);
            if hit.is_some() {
                return;
            }
            if let Some(a) = watch.as_mut().and_then(|w| w.check(&p.slices, p.elapsed_s)) {
                signals::abort();
                hit = Some(a);
            }
        };
        let r = body(self.dir.as_mut(), &mut cb);
        if let Some(mut a) = hit {
            a.test = r.name.clone();
            self.results.abort = Some(a);
        }
        r
    }

    /// Every criterion held against its tests, and the baseline
    /// comparison, recorded in the results. Returns a message when the
    /// baseline could not be read.
    fn decide(&mut self) -> Option<String> {
        let all = crate::results::criteria::subjects(
            &self.results,
            Marks::default(),
            Marks::of(&self.results),
        );
        let mut out = crate::results::criteria::evaluate(&self.criteria.expect, &all);
        for (expect, from, to) in &self.scopes {
            let subjects = crate::results::criteria::subjects(&self.results, *from, *to);
            out.extend(crate::results::criteria::evaluate(expect, &subjects));
        }
        if let Some(a) = &self.results.abort {
            // The aborted test has no final figures: the criterion that
            // stopped it says what its intervals measured, and the others
            // say why nothing measured them.
            out.retain(|c| !(c.expect == a.expect && (c.measured.is_none() || c.test == a.test)));
            for c in out.iter_mut().filter(|c| c.measured.is_none()) {
                c.detail = format!(
                    "not measured: the run was aborted ({} failed in {}) before a test measured {}",
                    a.expect, a.test, c.figure
                );
            }
            out.insert(0, a.as_result());
        }
        self.results.criteria = out;
        let base = self.criteria.baseline.as_ref()?;
        match crate::report::baseline::compare_with(
            &self.results,
            base,
            self.criteria.tolerance_pct,
        ) {
            Ok(c) => {
                self.results.baseline = Some(c);
                None
            }
            Err(e) => Some(chain(&e)),
        }
    }

    /// Records every agent of `hosts`: where it runs, connect time, clock.
    pub fn record_agents(&mut self, hosts: &Hosts) {
        let ssh = hosts.ssh_connect_times();
        self.record_fleet(hosts.fleet.agents(), &ssh, &hosts.vms);
    }

    /// Records `agents` (with their ssh connect times and VMs, by agent
    /// index), each replacing its earlier record: a lost agent's record
    /// carries why it was lost.
    fn record_fleet(
        &mut self,
        agents: &[Agent],
        ssh: &[(String, f64)],
        vms: &[(usize, crate::model::lab::LabVm)],
    ) {
        for (idx, a) in agents.iter().enumerate() {
            let rec = results::AgentRecord {
                vm: vms.iter().find(|(i, _)| *i == idx).map(|(_, v)| v.clone()),
                role: a.role.clone(),
                endpoint: a.host.clone(),
                hostname: a.hostname.clone(),
                linerate_version: a.linerate_version.clone(),
                connect_s: a.connect_s,
                ssh_connect_s: ssh.iter().find(|(h, _)| *h == a.host).map(|(_, s)| *s),
                clock_offset_s: a.clock.offset_s,
                clock_rtt_s: a.clock.rtt_s,
                error: a.lost.clone(),
            };
            match self
                .results
                .agents
                .iter_mut()
                .find(|r| r.role == rec.role && r.endpoint == rec.endpoint)
            {
                Some(r) => *r = rec,
                None => self.results.agents.push(rec),
            }
        }
        self.save();
    }

    /// Writes results.json (atomically) if this run has a directory.
    pub fn save(&self) {
        if let Some(d) = &self.dir {
            // Said once: the run goes on measuring, and finish() fails it.
            let first = d.write_error().is_none();
            if let Err(e) = d.write_results(&self.results) {
                if first {
                    errln!("warning: could not write results.json: {}", chain(&e));
                }
            }
        }
    }

    pub fn add_test(&mut self, mut t: TestResult) {
        let given = self.results.line_rate_given;
        runner::apply_line_rate(&mut t, given.then_some(self.results.line_rate_bps));
        runner::fail_if_nothing_sent(&mut t);
        self.progress.clear();
        self.progress.finished(&t);
        self.results.tests.push(t);
        self.save();
    }

    /// One test of any single-result kind: its progress shown, watched by
    /// `--abort-on-fail` when the kind has interval lines to watch
    /// ([`runner::TestKind::interval`]), a plain UDP test's total loss
    /// failed unless `--expect-loss`, and the result added.
    pub fn test(&mut self, ends: &mut runner::Ends, t: &dyn runner::TestKind) {
        self.run_kind(ends, t, true);
    }

    /// A UDP test a ramp is made of (its probe, itself, its reruns): a
    /// ramp loses by design past the DUT's limit, so no criterion watches it.
    pub fn ramp_udp(&mut self, ends: &mut runner::Ends, t: &runner::UdpTest) {
        self.run_kind(ends, t, false);
    }

    /// [`Run::test`], watched only when `watch` says so and the kind can be.
    fn run_kind(&mut self, ends: &mut runner::Ends, t: &dyn runner::TestKind, watch: bool) {
        let mut r = match t.interval().filter(|_| watch) {
            Some(interval) => self.watched(interval, |dir, cb| runner::run(ends, t, dir, cb)),
            None => {
                let progress = &self.progress;
                let mut cb = |p: &runner::Progress| progress.update(p);
                runner::run(ends, t, self.dir.as_mut(), &mut cb)
            }
        };
        if t.fails_on_total_loss() && !self.expect_loss {
            runner::fail_if_nothing_arrived(&mut r);
        }
        self.add_test(r);
    }

    /// A test against linerate's own iperf3 server (a plan's
    /// `iperf3_server` host): a result per client, so not a
    /// [`runner::TestKind`]; its stock-server tests go through
    /// [`Run::test`].
    pub fn iperf3_served(
        &mut self,
        ends: &mut runner::Ends,
        t: &runner::Iperf3Test,
        server: &crate::proto::iperf3::ServerJob,
    ) {
        let progress = &self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        for r in runner::run_iperf3_served(ends, t, server, self.dir.as_mut(), &mut cb) {
            self.add_test(r);
        }
    }

    /// The table printed at the end of a run: the tests, the profiles'
    /// summary, the matrix, the sweep's points and the criteria's verdicts.
    fn final_table(&self) -> String {
        let mut table = report::table(&self.results);
        if let Some(t) = crate::report::profiles::summary_table(&self.results) {
            table.push_str(&t);
        }
        if let Some(t) = crate::report::matrix::table(&self.results) {
            table.push_str(&t);
        }
        if let Some(t) = crate::orchestrate::sweep::points_list(
            &self.results,
            self.dir.as_ref().map(|d| d.path.as_path()),
        ) {
            table.push_str(&t);
        }
        table.push_str(&crate::report::verdicts::terminal(&self.results));
        table
    }

    /// Writes the run's HTML report into its directory and says where the
    /// results are; the error when they could not all be written.
    fn write_report(&self) -> Option<String> {
        let d = self.dir.as_ref()?;
        if d.write_error().is_none() {
            if let Err(e) = crate::report::write_run_report(&d.path) {
                d.failed(chain(&e));
            }
        }
        match d.write_error() {
            None => {
                errln!("results: {}", d.path.display());
                None
            }
            Some(e) => Some(format!(
                "the results of this run could not be written to {}: {e}; what is printed \
                 above is all that remains of it: free space there or choose another \
                 --results-dir, and run again",
                d.path.display()
            )),
        }
    }

    /// Marks the run done, writes the final files and prints the table.
    /// Returns the process exit status.
    pub fn finish(mut self, error: Option<OrchestrateError>) -> i32 {
        self.progress.clear();
        let baseline_error = self.conclude(error.as_ref());
        let table = self.final_table();
        if self.json {
            errprint!("{table}");
            match serde_json::to_string_pretty(&self.results) {
                Ok(json) => stdout::println(&json),
                Err(e) => errln!("error: encoding the results document as JSON: {e}"),
            }
        } else {
            stdout::print(&table);
        }
        let unwritten = self.write_report();
        if let Some(u) = &unwritten {
            errln!("error: {u}");
        }
        if let Some(e) = &baseline_error {
            errln!("error: {e}");
        }
        if let Some(path) = &self.criteria.junit {
            match crate::report::junit::write(path, &self.results) {
                Ok(()) => errln!("junit: {}", path.display()),
                Err(e) => errln!("error: writing the JUnit report: {}", chain(&e)),
            }
        }
        if interrupted() {
            errln!("{}", self.results.interrupted_note(self.dir.is_some()));
            return 130;
        }
        if let Some(e) = &error {
            errln!("error: {}", chain(e));
        }
        let code = self.exit_status(
            error.is_some() || unwritten.is_some(),
            baseline_error.is_some(),
        );
        if let Some(a) = &self.results.abort {
            errln!("{}", a.detail);
            errln!("{}", self.results.aborted_note(self.dir.is_some()));
        }
        code
    }

    /// Marks the run done: its status (interrupted, aborted, partial when
    /// `error` ended it, else complete), its error and the criteria's
    /// verdicts, saved. Returns a message when the baseline could not be
    /// read.
    fn conclude(&mut self, error: Option<&OrchestrateError>) -> Option<String> {
        self.results.finished_at = Some(crate::model::clock::now_rfc3339());
        self.results.status = if interrupted() {
            RunStatus::Interrupted
        } else if self.results.abort.is_some() {
            RunStatus::Aborted
        } else if error.is_some() {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        };
        self.results.error = error.map(|e| chain(e));
        let baseline_error = self.decide();
        self.save();
        baseline_error
    }

    /// The exit status of a concluded run that was not interrupted
    /// ([`exit_code`]); an abort is a failed criterion: at least 1 (3 if
    /// the run itself failed).
    fn exit_status(&self, run_error: bool, baseline_error: bool) -> i32 {
        let code = exit_code(&self.results, run_error, baseline_error);
        if self.results.abort.is_some() {
            code.max(1)
        } else {
            code
        }
    }
}

/// The exit status of a finished run (see `criteria_args::EXIT_CODES`): 3
/// when the run itself failed (an error ended it, its results could not be
/// written, a test failed for a
/// reason other than what the path did to the traffic, the baseline could
/// not be read); else 1 when a criterion failed, a regression was found or
/// nothing arrived; else 0.
pub fn exit_code(r: &results::RunResults, run_error: bool, baseline_error: bool) -> i32 {
    let verdict = |t: &TestResult| {
        t.bottleneck.as_ref().map(|b| b.kind) == Some(results::BottleneckKind::NothingArrived)
    };
    let broken = r
        .tests
        .iter()
        .any(|t| t.status == results::TestStatus::Failed && !verdict(t));
    let missed = r
        .tests
        .iter()
        .any(|t| t.status == results::TestStatus::Failed)
        || r.criteria.iter().any(|c| !c.passed)
        || r.baseline.as_ref().is_some_and(|b| b.regressions > 0);
    if run_error || broken || baseline_error {
        3
    } else if missed {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
