//! A run's logic through the scripted fleet (`runner/harness.rs`): what
//! `--abort-on-fail` decides over a lossy test and when, on the virtual
//! clock; a criterion that holds lets the test run to its end; an agent
//! lost mid-run leaves a partial run (exit 3) with the intervals so far
//! and the lost agent's record. The real binary's exit status and what
//! the kernel cleans up stay in `tests/abort.rs` and `tests/faults.rs`.

use super::*;
use crate::model::criteria::parse;
use crate::orchestrate::config::AbortOpts;
use crate::proto::Request;
use crate::results::TestStatus;
use crate::runner::harness::FakeFleet;
use crate::runner::harness::Fault;
use crate::runner::harness_tests::{ends, udp_test};
use crate::topology::Agents;
use std::time::Duration;

const GEN: usize = 0;
const SINK: usize = 1;

fn opts(expect: &[&str], abort_after_s: Option<u64>) -> RunOpts {
    RunOpts {
        name: None,
        line_rate_bps: 10e9,
        results_dir: std::env::temp_dir(),
        write_results: false,
        json: false,
        progress: false,
        interval_s: None,
        allow_target: vec![],
        cpus: vec![],
        expect_loss: false,
        ssh: Default::default(),
        criteria: CriteriaOpts {
            expect: expect.iter().map(|c| parse(c).unwrap()).collect(),
            abort: abort_after_s.map(|s| AbortOpts {
                after: Some(Duration::from_secs(s)),
            }),
            ..Default::default()
        },
        line_rate_given: false,
    }
}

/// Agents sent a Stop, in order.
fn stopped(fleet: &FakeFleet) -> Vec<usize> {
    let stops = fleet.sent().into_iter();
    stops
        .filter(|(_, r)| matches!(r, Request::Stop { .. }))
        .map(|(a, _)| a)
        .collect()
}

/// Runs one UDP test of `secs` seconds in `run` on `fleet`.
fn udp(run: &mut Run, fleet: &mut FakeFleet, secs: u64) {
    let mut e = ends(fleet);
    run.test(&mut e, &udp_test(secs));
}

#[test]
fn a_lossy_test_is_aborted_once_its_grace_period_is_covered() {
    // 5 % loss against loss<=0.1%, 2 s of grace, in a 60 s test.
    let mut fleet = FakeFleet::new(&["gen", "sink"]);
    fleet.script.lost_per_s = 50;
    let mut run = Run::start(&opts(&["loss<=0.1%"], Some(2)), "abort").unwrap();
    udp(&mut run, &mut fleet, 60);
    let aborted = crate::model::signals::aborted();
    crate::model::signals::clear_abort();
    assert!(aborted, "the run was not asked to stop");
    // Decided when the lines covered the grace period: the line of the
    // second second is complete once a sample of the third arrives, at
    // 3 s on the virtual clock; the test stopped right then.
    let a = run.results.abort.clone().expect("an abort record");
    assert_eq!(
        (a.expect.as_str(), a.figure.as_str()),
        ("loss<=0.1%", "loss")
    );
    assert_eq!((a.test.as_str(), a.expected), ("udp", 0.001));
    assert!((a.measured - 0.05).abs() < 1e-9, "{a:?}");
    assert_eq!(a.over_s, 2.0);
    assert_eq!(a.after_s, 3.0, "{a:?}");
    assert!(
        fleet.elapsed() < Duration::from_secs(4),
        "{:?}",
        fleet.elapsed()
    );
    // Both jobs were stopped: the sender cut short, then the receiver.
    assert_eq!(stopped(&fleet), vec![GEN, SINK]);
    // The test is aborted with the intervals that ran and its figures.
    let t = &run.results.tests[0];
    assert_eq!(t.status, TestStatus::Aborted, "{:?}", t.error);
    let d = &t.directions[0];
    assert!((2.0..=3.0).contains(&d.duration_s), "{}", d.duration_s);
    assert!(d.intervals.len() >= 2, "{} intervals", d.intervals.len());
    let lost: u64 = d
        .intervals
        .iter()
        .filter_map(|i| i.receiver.as_ref())
        .map(|r| r.lost)
        .sum();
    assert!(lost >= 100, "{lost} lost in the intervals");
    assert!((d.loss_ratio - 0.05).abs() < 0.01, "{}", d.loss_ratio);
    // The run is aborted, the criterion failed with what the intervals
    // measured, and the exit status is 1.
    assert_eq!(run.conclude(None), None);
    assert_eq!(run.results.status, RunStatus::Aborted);
    let c = &run.results.criteria[0];
    assert_eq!((c.expect.as_str(), c.passed), ("loss<=0.1%", false));
    assert_eq!(c.measured, Some(a.measured));
    assert_eq!(run.exit_status(false, false), 1);
}

#[test]
fn a_criterion_that_holds_does_not_abort() {
    let mut fleet = FakeFleet::new(&["gen", "sink"]);
    fleet.script.lost_per_s = 50;
    let mut run = Run::start(&opts(&["loss<=10%"], Some(1)), "hold").unwrap();
    udp(&mut run, &mut fleet, 3);
    let aborted = crate::model::signals::aborted();
    crate::model::signals::clear_abort();
    assert!(!aborted);
    assert!(run.results.abort.is_none());
    let t = &run.results.tests[0];
    assert_eq!(t.status, TestStatus::Ok, "{:?}", t.error);
    assert_eq!(t.directions[0].duration_s, 3.0);
    assert_eq!(run.conclude(None), None);
    assert_eq!(run.results.status, RunStatus::Complete);
    assert!(run.results.criteria[0].passed);
    assert_eq!(run.exit_status(false, false), 0);
}

#[test]
fn an_agent_lost_mid_run_leaves_a_partial_run_with_its_intervals() {
    let base = std::env::temp_dir().join(format!("lr-run-lost-{}", std::process::id()));
    let mut o = opts(&[], None);
    (o.results_dir, o.write_results) = (base.clone(), true);
    let mut fleet = FakeFleet::new(&["gen", "sink"]).fault(Fault::Lost {
        agent: SINK,
        at: Duration::from_millis(3500),
    });
    let mut run = Run::start(&o, "lost").unwrap();
    udp(&mut run, &mut fleet, 30);
    // As the commands do: the agents recorded, then the loss checked.
    run.record_fleet(fleet.agents(), &[], &[]);
    let lost = crate::topology::check_lost(fleet.agents()).map_err(OrchestrateError::from);
    let error = lost.expect_err("the sink was lost");
    // The test failed naming the agent; the sender was stopped at once.
    let t = &run.results.tests[0];
    assert_eq!(t.status, TestStatus::Failed);
    let e = t.error.as_deref().unwrap_or_default();
    assert_eq!(e, "the sink agent was lost: its control channel closed");
    assert_eq!(stopped(&fleet), vec![GEN]);
    assert_eq!(fleet.elapsed(), Duration::from_millis(3500));
    // Only the lost agent's record carries an error.
    let errors: Vec<Option<&str>> = run
        .results
        .agents
        .iter()
        .map(|a| a.error.as_deref())
        .collect();
    assert_eq!(errors, vec![None, Some(e)]);
    // The interval lines before the loss are in the run's directory.
    let dir = run.dir.as_ref().map(|d| d.path.clone()).unwrap();
    let log = std::fs::read_to_string(dir.join("intervals.ndjson")).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "{} interval lines", lines.len());
    // The run is partial, and the lost agent makes its exit status 3.
    assert_eq!(run.conclude(Some(&error)), None);
    assert_eq!(run.results.status, RunStatus::Partial);
    assert!(run
        .results
        .error
        .as_deref()
        .unwrap_or_default()
        .contains("was lost"));
    assert_eq!(run.exit_status(true, false), 3);
    let saved = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(doc["status"], "partial");
    let _ = std::fs::remove_dir_all(&base);
}
