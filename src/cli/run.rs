//! One run from start to finish: the results document, its directory, the
//! progress line, and what happens on Ctrl-C. Shared by every command.

use crate::cli::config::RunOpts;
use crate::model::signals::interrupted;
use crate::model::stdout;
use crate::report::terminal::{self as report, ProgressLine};
use crate::results::{self, RunDir, RunResults, RunStatus, TestResult, SCHEMA_VERSION};
use crate::runner;
use crate::topology::Hosts;
use anyhow::Result;

pub struct Run {
    pub results: RunResults,
    pub dir: Option<RunDir>,
    pub progress: ProgressLine,
    json: bool,
    expect_loss: bool,
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
            labs: vec![],
            tests: vec![],
            doctor,
            ramps: vec![],
            searches: vec![],
            error: None,
            agents: vec![],
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
        };
        run.save();
        if !common.allow_target.is_empty() {
            let list: Vec<String> = common.allow_target.iter().map(|c| c.to_string()).collect();
            eprintln!(
                "WARNING: --allow-target lets linerate send load-test traffic to {} in addition to \
                 loopback and the benchmarking ranges. Only do this on an isolated test network.",
                list.join(", ")
            );
        }
        Ok(run)
    }

    /// Records every agent of `hosts`: where it runs, connect time, clock.
    pub fn record_agents(&mut self, hosts: &Hosts) {
        let ssh = hosts.ssh_connect_times();
        for a in hosts.fleet.agents() {
            let rec = results::AgentRecord {
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
                    eprintln!("warning: could not write results.json: {e:#}");
                }
            }
        }
    }

    pub fn add_test(&mut self, mut t: TestResult) {
        runner::apply_line_rate(&mut t, self.results.line_rate_bps);
        runner::fail_if_nothing_sent(&mut t);
        self.progress.clear();
        self.progress.finished(&t);
        self.results.tests.push(t);
        self.save();
    }

    pub fn udp(&mut self, ends: &mut runner::Ends, t: &runner::UdpTest) {
        let progress = &self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        let mut r = runner::run_udp(ends, t, self.dir.as_mut(), &mut cb);
        if !self.expect_loss {
            runner::fail_if_nothing_arrived(&mut r);
        }
        self.add_test(r);
    }

    pub fn tcp(&mut self, ends: &mut runner::Ends, t: &runner::TcpTest) {
        let progress = &self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        let r = runner::run_tcp(ends, t, self.dir.as_mut(), &mut cb);
        self.add_test(r);
    }

    pub fn latency(&mut self, ends: &mut runner::Ends, t: &runner::LatencyTest) {
        let progress = &self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        let r = runner::run_latency(ends, t, self.dir.as_mut(), &mut cb);
        self.add_test(r);
    }

    pub fn http(&mut self, ends: &mut runner::Ends, t: &runner::HttpTest) {
        let progress = &self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        let r = runner::run_http(ends, t, self.dir.as_mut(), &mut cb);
        self.add_test(r);
    }

    /// Marks the run done, writes the final files and prints the table.
    /// Returns the process exit status.
    pub fn finish(mut self, error: Option<anyhow::Error>) -> i32 {
        self.progress.clear();
        self.results.finished_at = Some(crate::model::clock::now_rfc3339());
        self.results.status = if interrupted() {
            RunStatus::Interrupted
        } else if error.is_some() {
            RunStatus::Partial
        } else {
            RunStatus::Complete
        };
        self.results.error = error.as_ref().map(|e| format!("{e:#}"));
        self.save();
        let mut table = report::table(&self.results);
        if let Some(t) = crate::report::profiles::summary_table(&self.results) {
            table.push_str(&t);
        }
        if let Some(t) = crate::report::matrix::table(&self.results) {
            table.push_str(&t);
        }
        if self.json {
            eprint!("{table}");
            match serde_json::to_string_pretty(&self.results) {
                Ok(json) => stdout::println(&json),
                Err(e) => eprintln!("error: encoding the results document as JSON: {e}"),
            }
        } else {
            stdout::print(&table);
        }
        let mut unwritten = None;
        if let Some(d) = &self.dir {
            if d.write_error().is_none() {
                if let Err(e) = crate::report::write_run_report(&d.path) {
                    d.failed(format!("{e:#}"));
                }
            }
            match d.write_error() {
                None => eprintln!("results: {}", d.path.display()),
                Some(e) => {
                    unwritten = Some(format!(
                        "the results of this run could not be written to {}: {e}; what is printed \
                     above is all that remains of it: free space there or choose another \
                     --results-dir, and run again",
                        d.path.display()
                    ))
                }
            }
        }
        let failed = self
            .results
            .tests
            .iter()
            .any(|t| t.status != results::TestStatus::Ok);
        if let Some(u) = &unwritten {
            eprintln!("error: {u}");
        }
        match (&error, interrupted()) {
            (_, true) => {
                eprintln!("{}", self.results.interrupted_note(self.dir.is_some()));
                130
            }
            (Some(e), _) => {
                eprintln!("error: {e:#}");
                run_failed_code(e)
            }
            (None, _) if unwritten.is_some() => 1,
            (None, _) if failed => 1,
            _ => 0,
        }
    }
}

/// The exit status of a run that ended with `e`: 3 ("the run itself
/// failed") when an agent was lost (killed, its host gone, its transport
/// stalled), since the figures then say nothing about the device; 1 for
/// other failures.
fn run_failed_code(e: &anyhow::Error) -> i32 {
    let lost = e
        .chain()
        .any(|c| c.downcast_ref::<crate::topology::AgentLost>().is_some());
    if lost {
        3
    } else {
        1
    }
}
