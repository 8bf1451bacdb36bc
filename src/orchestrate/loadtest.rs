//! Ramps and searches over real UDP trials: the trex-loadtest method
//! (warmup, linear ramp, hold, saturation point) and throughput searches
//! (RFC 2544, MLRsearch-style NDR/PDR), against any [`Ends`]: a lab, two
//! named endpoints, or many generators of a plan.
//!
//! The search logic lives in [`crate::search`] and knows nothing of sockets;
//! this module gives it a [`TrialRunner`] that runs real UDP trials.

use crate::model::signals::stop_requested;
use crate::model::stderr::errln;
use crate::model::units;
use crate::orchestrate::config::{
    Method, Profile, RampConfig, SearchConfig, SearchPlan, Stream, TestSpec,
};
use crate::orchestrate::error::{err, fail, Result};
use crate::orchestrate::run::Run;
use crate::orchestrate::search_lines::{
    frame_loss_config, mlr_lines, rfc2544_config, rfc2544_line,
};
use crate::proto::Direction;
use crate::report::terminal::ProgressLine;
use crate::results::{RunDir, TestStatus};
use crate::runner::{self, Ends, UdpTest};
use crate::search::{self, TrialError, TrialOutcome, TrialRunner};
use std::time::Duration;

mod ramp;

pub use ramp::run_ramp;

/// Runs real UDP trials for the search logic.
pub struct UdpTrials<'a, 'b> {
    pub ends: Ends<'a>,
    pub base: UdpTest,
    pub dir: Option<&'b mut RunDir>,
    progress: &'b ProgressLine,
    /// Every trial's full test result, kept for results.json.
    pub log: Vec<crate::results::TestResult>,
    /// What the live line shows while trials run.
    pub fold: TrialFold,
}

/// Trials folded into the search's progress: on a terminal one redrawn
/// line (the goal, its bracket so far, the trial count); a line of its
/// own per trial only with `-v` (results.json has every trial anyway).
#[derive(Debug, Clone, Default)]
pub struct TrialFold {
    /// `search 64b NDR/PDR` and the like.
    pub goal: String,
    /// The strictest goal's loss ratio: a trial losing more is above it.
    pub loss_ratio: f64,
    pub verbose: bool,
    pub trials: usize,
    /// Highest load that met the goal, lowest that did not, pps.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

impl TrialFold {
    pub fn new(goal: String, loss_ratio: f64, verbose: bool) -> Self {
        TrialFold {
            goal,
            loss_ratio,
            verbose,
            ..Default::default()
        }
    }

    /// The live line's label during a trial at `rate_pps`.
    pub fn label(&self, rate_pps: f64) -> String {
        let pps = |v: Option<f64>| v.map_or("?".into(), |v| format!("{}pps", units::si(v)));
        format!(
            "{}: trial {} at {}pps, bracket {} .. {}",
            self.goal,
            self.trials,
            units::si(rate_pps),
            pps(self.lower),
            pps(self.upper)
        )
    }

    /// Narrows the bracket with a finished trial.
    pub fn record(&mut self, rate_pps: f64, loss_ratio: f64) {
        if loss_ratio <= self.loss_ratio {
            self.lower = Some(self.lower.map_or(rate_pps, |l| l.max(rate_pps)));
        } else {
            self.upper = Some(self.upper.map_or(rate_pps, |u| u.min(rate_pps)));
        }
    }
}

impl TrialRunner for UdpTrials<'_, '_> {
    fn trial(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome, TrialError> {
        if stop_requested() {
            return Err(TrialError::Interrupted);
        }
        let t = UdpTest {
            name: format!("{} trial {:.0} pps", self.base.name, rate_pps),
            rate_pps: Some(rate_pps),
            rate_profile: None,
            duration,
            ..self.base.clone()
        };
        let progress = self.progress;
        self.fold.trials += 1;
        let label = self.fold.label(rate_pps);
        let mut cb = |p: &runner::Progress| {
            if progress.is_live() {
                progress.update(&runner::Progress {
                    test: label.clone(),
                    ..p.clone()
                });
            } else {
                progress.update(p);
            }
        };
        let r = runner::run(&mut self.ends, &t, self.dir.as_deref_mut(), &mut cb);
        progress.clear();
        if r.status != TestStatus::Ok {
            return Err(TrialError::Failed(
                r.error.clone().unwrap_or_else(|| "trial failed".into()),
            ));
        }
        let outcome = trial_outcome(rate_pps, &r);
        self.fold.record(rate_pps, outcome.loss_ratio());
        if self.fold.verbose {
            errln!(
                "trial: {} asked {:.0} pps, offered {:.0}{}, DUT lost {}{}{}",
                self.base.name,
                rate_pps,
                outcome.offered_pps,
                match (outcome.tester_limited, outcome.tester_short) {
                    (true, _) => " (tester limit: short of the rate asked, no DUT loss)",
                    (false, true) => " (tester short of the rate asked; the DUT's loss counts at the rate offered)",
                    _ => "",
                },
                outcome.lost,
                counters_note(
                    outcome.lost,
                    outcome.dut_counted_lost,
                    outcome.tx_packets
                ),
                outcome
                    .disturbance()
                    .map(|d| format!("; {d} meanwhile"))
                    .unwrap_or_default()
            );
        }
        self.log.push(r);
        Ok(outcome)
    }
}

/// The goals a search looks for, for its live line: `NDR/PDR`, `RFC 2544`.
fn goal_names(plan: &SearchPlan) -> String {
    let mlr: Vec<String> = plan.goals.iter().map(|g| g.name.to_uppercase()).collect();
    match plan.method {
        Method::Rfc2544 => "RFC 2544".into(),
        Method::Both => format!("{} + RFC 2544", mlr.join("/")),
        _ => mlr.join("/"),
    }
}

/// The loss ratio the bracket of the live line is kept for: the
/// strictest goal's (NDR's 0 when it is searched).
fn strictest_loss(plan: &SearchPlan) -> f64 {
    let mlr = plan.goals.iter().map(|g| g.loss_ratio);
    match plan.method {
        Method::Rfc2544 => plan.rfc_acceptable_loss,
        Method::Both => mlr.fold(plan.rfc_acceptable_loss, f64::min),
        _ => mlr.fold(f64::INFINITY, f64::min).min(1.0),
    }
}

/// The DUT's own count of what it did not forward, for a trial's line:
/// said only when it disagrees with the sequence numbers' loss by more
/// than 0.1 % of the frames sent (the cross-check's rule), with what the
/// figure is; when they agree it says nothing the loss did not.
fn counters_note(lost: u64, counted: Option<u64>, tx_packets: u64) -> String {
    match counted {
        Some(n) if n.abs_diff(lost) as f64 > 0.001 * tx_packets.max(1) as f64 => format!(
            "; but the DUT's own interface counters say {n} (received and not sent on): \
             traffic besides the test's crossed it, or frames were lost where the sequence \
             numbers cannot see"
        ),
        _ => String::new(),
    }
}

/// Runs one test of any kind against `ends` as many times as `--repeat`
/// says, recording each in `run` (repetitions share the test's name).
pub fn exec_test(run: &mut Run, ends: &mut Ends, spec: &TestSpec) -> Result<()> {
    let n = run.repeat();
    let first_search = run.results.searches.len();
    for i in 1..=n {
        if stop_requested() {
            break;
        }
        if n > 1 {
            errln!("repetition {i} of {n}");
        }
        exec_once(run, ends, spec)?;
    }
    if n > 1 {
        let spreads = search_spreads(&run.results.searches[first_search..]);
        for s in &spreads {
            errln!("{}", s.line());
        }
        run.results.search_repeats.extend(spreads);
        run.save();
    }
    Ok(())
}

/// Each search goal's answer over the repetitions among `searches` that
/// share a name, in first-seen order.
fn search_spreads(searches: &[crate::results::SearchResult]) -> Vec<search::GoalSpread> {
    let mut out = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for s in searches {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    for name in names {
        let same: Vec<&crate::results::SearchResult> =
            searches.iter().filter(|s| s.name == name).collect();
        let goals: Vec<String> = same
            .iter()
            .filter_map(|s| s.mlr.as_ref())
            .flat_map(|m| m.goals.iter().map(|g| g.goal.name.clone()))
            .fold(Vec::new(), |mut v, g| {
                if !v.contains(&g) {
                    v.push(g);
                }
                v
            });
        for goal in goals {
            let values: Vec<f64> = same
                .iter()
                .filter_map(|s| s.mlr.as_ref())
                .filter_map(|m| m.goals.iter().find(|g| g.goal.name == goal))
                .filter_map(|g| g.conditional_throughput_pps.or(g.relevant_lower_bound_pps))
                .collect();
            out.extend(search::GoalSpread::of(name, &goal, &values));
        }
        let rfc: Vec<f64> = same
            .iter()
            .filter_map(|s| s.rfc2544.as_ref()?.throughput_pps)
            .collect();
        out.extend(search::GoalSpread::of(name, "rfc2544 throughput", &rfc));
    }
    out
}

fn exec_once(run: &mut Run, ends: &mut Ends, spec: &TestSpec) -> Result<()> {
    if let Some(test) = spec.as_kind() {
        run.test(ends, test);
        return Ok(());
    }
    match spec {
        TestSpec::Ramp(r) => {
            for l in run_ramp(ends, r, run)? {
                errln!("{l}");
            }
        }
        TestSpec::Http(tests) => {
            for t in tests {
                if stop_requested() {
                    break;
                }
                run.test(ends, t);
            }
        }
        TestSpec::Search(s) => {
            for p in &s.profiles {
                if stop_requested() {
                    break;
                }
                for l in run_search(ends.reborrow(), p, s, run)? {
                    errln!("{l}");
                }
            }
        }
        TestSpec::Iperf3(t) => {
            if let Some(server) = &t.serve {
                run.iperf3_served(ends, t, server);
            }
        }
        // Single-result kinds: run above, through `as_kind`.
        TestSpec::Tcp(_) | TestSpec::Udp(_) | TestSpec::Latency(_) => {}
    }
    Ok(())
}

/// The lowest load a search tries unless told otherwise, pps.
pub const DEFAULT_MIN_PPS: f64 = 1_000.0;

/// The UDP test a ramp or search repeats, at the profile's frames and flows.
pub fn base_test(p: &Profile, s: &Stream) -> Result<UdpTest> {
    crate::engine::frame::check_frames(p.frame, s.ipv6, None)?;
    Ok(UdpTest {
        name: p.name.clone(),
        ipv6: s.ipv6,
        frame: p.frame,
        flow_mode: p.flow_mode,
        flows: s.flows.max(1),
        direction: if s.bidir {
            Direction::Both
        } else {
            Direction::Forward
        },
        duration: Duration::from_secs(1),
        rate_pps: None,
        rate_profile: None,
        batch: 32,
        cpus: s.cpus.clone(),
        allow: s.allow.clone(),
        tx_engine: s.tx_engine,
        rx_engine: s.rx_engine,
        threads: s.threads,
        port: 0,
        // Ramps and searches read their trials in 1 s samples.
        interval: Duration::from_secs(1),
        omit: Duration::ZERO,
        dscp: None,
        max_frames: None,
        vlan: None,
        window: None,
    })
}

/// Per-second ramp samples of one direction, from a test's interval pairs.
pub fn ramp_samples(
    d: &crate::results::DirectionResult,
    spec: &search::RampSpec,
) -> Vec<search::RampSample> {
    d.intervals
        .iter()
        .filter_map(|p| {
            let s = p.sender.as_ref()?;
            let span = (s.t_end - s.t_start).max(1e-6);
            let (rx, lost) = p
                .receiver
                .as_ref()
                .map(|r| (r.rx_packets, r.lost))
                .unwrap_or((0, 0));
            let mid = (s.t_start + s.t_end) / 2.0;
            Some(search::RampSample {
                t_s: s.t_end,
                phase: spec.phase_at(mid).unwrap_or(search::RampPhase::Hold),
                intended_pps: s.tx_target as f64 / span,
                offered_pps: s.tx_packets as f64 / span,
                received_pps: rx as f64 / span,
                loss_ratio: if rx + lost > 0 {
                    lost as f64 / (rx + lost) as f64
                } else {
                    0.0
                },
                // Short of the schedule with no DUT loss: the tester's limit.
                // Short with DUT loss: the DUT's, at the rate offered.
                tester_limited: crate::results::bottleneck::sender_short(s.tx_packets, s.tx_target)
                    && lost == 0,
                dut: p.dut,
                rerun: false,
            })
        })
        .collect()
}

fn line_rate_pps(line_rate_bps: f64, p: &Profile) -> f64 {
    crate::model::units::line_rate_pps(line_rate_bps, crate::engine::frame::average_frame(p.frame))
}

/// A trial's outcome for the search, summed over the test's directions.
fn trial_outcome(rate_pps: f64, r: &crate::results::TestResult) -> TrialOutcome {
    let sum =
        |f: fn(&crate::results::DirectionResult) -> u64| r.directions.iter().map(f).sum::<u64>();
    let duration_s = r
        .directions
        .iter()
        .map(|d| d.duration_s)
        .fold(0.0, f64::max)
        .max(1e-6);
    TrialOutcome {
        rate_pps,
        offered_pps: sum(|d| d.tx_packets) as f64 / duration_s / r.directions.len().max(1) as f64,
        duration_s,
        tx_packets: sum(|d| d.tx_packets),
        rx_packets: sum(|d| d.rx_packets),
        // The tester's own drops (socket overruns) are not the DUT's loss.
        lost: sum(|d| d.dut_lost),
        tester_short: r.directions.iter().any(|d| d.tester_short()),
        tester_limited: TrialOutcome::tester_verdict(
            r.directions.iter().any(|d| d.tester_short()),
            sum(|d| d.dut_lost),
        ),
        dut_counted_lost: r.dut_counted_lost,
        dut: r.dut_efficiency.as_ref().and_then(|e| e.test),
        steal_ms: r.steal_ms,
        stall_ms: r.stall_ms,
        host_lost: None,
    }
}

impl UdpTrials<'_, '_> {
    fn sleep(&mut self, d: Duration) -> Result<(), TrialError> {
        let end = std::time::Instant::now() + d;
        while std::time::Instant::now() < end {
            if stop_requested() {
                return Err(TrialError::Interrupted);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl TrialRunner for UdpTrialsWait<'_, '_, '_> {
    fn trial(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome, TrialError> {
        self.0.trial(rate_pps, duration)
    }
    /// Learning needs no frames in a linerate lab (static neighbours), so
    /// every §23 wait is a plain wait.
    fn wait(&mut self, _phase: search::WaitPhase, d: Duration) -> Result<(), TrialError> {
        self.0.sleep(d)
    }
}

/// [`UdpTrials`] with the §23 waits honoured.
pub struct UdpTrialsWait<'x, 'a, 'b>(pub &'x mut UdpTrials<'a, 'b>);

/// A search's result before its searches ran: the profile it searches.
fn search_result(p: &Profile, direction: Direction, lr_pps: f64) -> crate::results::SearchResult {
    crate::results::SearchResult {
        name: format!("search {}", p.name),
        profile: p.name.clone(),
        frame: p.frame,
        flow_mode: p.flow_mode,
        direction,
        line_rate_pps: lr_pps,
        mlr: None,
        rfc2544: None,
        frame_loss: None,
        latency_at: None,
        back_to_back: None,
        sweep: None,
    }
}

/// Runs the searches of one profile and records them; returns summary lines.
pub fn run_search(
    ends: Ends,
    p: &Profile,
    cfg: &SearchConfig,
    run: &mut Run,
) -> Result<Vec<String>> {
    let plan: &SearchPlan = &cfg.plan;
    let base = base_test(p, &cfg.stream)?;
    if plan.method == Method::BackToBack {
        let lr_pps = line_rate_pps(cfg.line_rate_bps, p);
        return super::b2b::run_back_to_back(ends, (p, base, lr_pps), cfg, run);
    }
    let lr_pps = line_rate_pps(cfg.line_rate_bps, p);
    let frame = crate::engine::frame::average_frame(p.frame);
    let mut max = plan.max_rate.pps(frame, cfg.line_rate_bps);
    if let Some(cap) = plan.cap_pps {
        max = max.min(cap);
    }
    let min = match &plan.min_rate {
        Some(m) => m.pps(frame, cfg.line_rate_bps),
        // Low enough that a 10 kpps DUT is found from a 10G line rate.
        None => DEFAULT_MIN_PPS.min(max / 2.0),
    };
    if min >= max {
        fail!("--min-rate ({min:.0} pps) must be below --max-rate ({max:.0} pps)");
    }
    let mut trials = UdpTrials {
        ends,
        base,
        dir: run.dir.as_mut(),
        progress: &run.progress,
        log: Vec::new(),
        fold: TrialFold::new(
            format!("search {} {}", p.name, goal_names(plan)),
            strictest_loss(plan),
            plan.verbose,
        ),
    };
    // The trials' disturbed rule reads the stall watch: on for the search.
    trials.ends.watch_stalls(true);
    let mut result = search_result(p, trials.base.direction, lr_pps);
    let mut lines = Vec::new();
    if matches!(plan.method, Method::Mlr | Method::Both) {
        let cfg = search::MlrConfig {
            goals: plan.goals.clone(),
            ..search::MlrConfig::new(min, max)
        };
        let r = search::mlr_search(&mut trials, &cfg)?;
        lines.extend(mlr_lines(&p.name, &r, min, lr_pps));
        result.mlr = Some(r);
    }
    if matches!(plan.method, Method::Rfc2544 | Method::Both) {
        let cfg = rfc2544_config(plan, min, max);
        let r = search::rfc2544_throughput(&mut UdpTrialsWait(&mut trials), &cfg)?;
        lines.push(rfc2544_line(&p.name, &r, min, lr_pps));
        if plan.frame_loss {
            let fl = frame_loss_config(plan, max);
            result.frame_loss = Some(search::frame_loss_rate(
                &mut UdpTrialsWait(&mut trials),
                &fl,
            )?);
        }
        result.rfc2544 = Some(r);
    }
    let UdpTrials { mut ends, base, .. } = trials;
    ends.watch_stalls(false);
    result.latency_at = crate::orchestrate::latency_at::run_points(
        &mut ends,
        &base,
        &plan.latency_at,
        run,
        &result,
    );
    if let Some(l) = &result.latency_at {
        lines.extend(crate::report::latency_at::table(&result.name, l));
    }
    run.results.searches.push(result);
    run.save();
    Ok(lines)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod counters_tests {
    use super::counters_note;

    #[test]
    fn the_dut_counters_are_said_only_when_they_disagree() {
        assert_eq!(counters_note(0, Some(0), 150_000), "");
        assert_eq!(counters_note(868, Some(870), 150_000), "");
        assert_eq!(counters_note(0, None, 150_000), "");
        // 32 unexplained frames of 1 000: over 0.1 %.
        let n = counters_note(0, Some(32), 1_000);
        assert!(n.contains("DUT's own interface counters say 32"), "{n}");
        let n = counters_note(5000, Some(100), 150_000);
        assert!(n.contains("say 100"), "{n}");
    }
}
