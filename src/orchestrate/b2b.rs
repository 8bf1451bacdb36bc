//! `search --method back-to-back`: RFC 2544 §26.4 back-to-back frames as
//! RFC 9004 updates it, over real bursts. One unpaced probe measures the
//! tester's highest rate for the frame size and what the DUT forwards under
//! that overload; then [`crate::search::back_to_back`] searches the burst
//! length through [`UdpBursts`], which sends each burst as a UDP test that
//! stops after its frames (the engines' `max_frames`) and counts them at the
//! sink by sequence number.

use crate::model::signals::stop_requested;
use crate::model::stderr::errln;
use crate::orchestrate::config::{Profile, SearchConfig};
use crate::orchestrate::error::{err, fail, Result};
use crate::orchestrate::run::Run;
use crate::report::terminal::ProgressLine;
use crate::results::{RunDir, TestResult, TestStatus};
use crate::runner::{self, Ends, UdpTest};
use crate::search::b2b::{BackToBackConfig, BackToBackEnd, BackToBackResult, RFC9004_DRAIN_S};
use crate::search::{self, BurstOutcome, BurstRunner, TrialError};
use std::time::{Duration, Instant};

/// Seconds of the unpaced probe before the bursts.
const PROBE_S: f64 = 1.0;

/// The tester is taken to reach `--max-rate` when its unpaced rate is
/// within this share of it (bursts then go unpaced).
const MAX_RATE_SLACK: f64 = 0.02;

/// Sends bursts of UDP frames through a DUT and counts them at the sink.
pub struct UdpBursts<'a, 'b> {
    ends: Ends<'a>,
    base: UdpTest,
    /// The rate bursts are paced at; `None`: unpaced, the tester's most.
    paced_pps: Option<f64>,
    /// The rate the bursts go at, pps (the deadline of a burst's test).
    burst_pps: f64,
    dir: Option<&'b mut RunDir>,
    progress: &'b ProgressLine,
}

impl BurstRunner for UdpBursts<'_, '_> {
    fn burst(&mut self, frames: u64) -> Result<BurstOutcome, TrialError> {
        if stop_requested() {
            return Err(TrialError::Interrupted);
        }
        // The count ends the burst; the duration only bounds a tester that
        // cannot send it (three times its time, and half a second).
        let d = Duration::try_from_secs_f64(3.0 * frames as f64 / self.burst_pps + 0.5)
            .map_err(|_| TrialError::BadDuration(frames as f64 / self.burst_pps))?;
        let t = UdpTest {
            name: format!("{} burst {frames} frames", self.base.name),
            rate_pps: self.paced_pps,
            duration: d,
            max_frames: Some(frames),
            ..self.base.clone()
        };
        let r = self.test(&t)?;
        let sum = |f: fn(&crate::results::DirectionResult) -> u64| {
            r.directions.iter().map(f).sum::<u64>()
        };
        let send_s = r
            .directions
            .iter()
            .map(|d| d.duration_s)
            .fold(0.0, f64::max);
        let o = BurstOutcome {
            frames,
            tx_packets: sum(|d| d.tx_packets),
            rx_packets: sum(|d| d.rx_packets),
            lost: sum(|d| d.dut_lost),
            tester_drops: sum(|d| d.tester_drops),
            send_s,
            // Frames the tester never sent by the deadline: not a burst at
            // its rate. Bidirectional tests send the burst each way.
            tester_short: sum(|d| d.tx_packets) < frames * r.directions.len().max(1) as u64,
        };
        if !self.progress.is_live() {
            errln!(
                "burst: {} frames, sent {} in {:.3} ms, {} arrived, DUT lost {}{}",
                frames,
                o.tx_packets,
                o.send_s * 1e3,
                o.rx_packets,
                o.lost,
                if o.tester_short {
                    " (tester short: it could not send the burst whole)"
                } else {
                    ""
                }
            );
        }
        Ok(o)
    }

    fn wait(&mut self, d: Duration) -> Result<(), TrialError> {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if stop_requested() {
                return Err(TrialError::Interrupted);
            }
            std::thread::sleep(Duration::from_millis(50).min(d));
        }
        Ok(())
    }
}

impl UdpBursts<'_, '_> {
    /// One UDP test through the runner, failed unless it ran.
    fn test(&mut self, t: &UdpTest) -> Result<TestResult, TrialError> {
        let progress = self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        let r = runner::run(&mut self.ends, t, self.dir.as_deref_mut(), &mut cb);
        progress.clear();
        if r.status != TestStatus::Ok {
            return Err(TrialError::Failed(
                r.error.clone().unwrap_or_else(|| "burst failed".into()),
            ));
        }
        Ok(r)
    }
}

/// What the unpaced probe showed, pps per direction.
struct Probe {
    tester_pps: f64,
    forwarded_pps: f64,
    dut_lost: u64,
}

/// The throughput RFC 9004's correction uses and where it came from: the
/// one given (--b2b-throughput, pps), else what the DUT forwarded under the
/// probe's overload; none when the DUT lost nothing.
fn throughput(given: Option<f64>, probe: &Probe) -> (Option<f64>, Option<String>) {
    match given {
        Some(t) => (Some(t), Some("given (--b2b-throughput)".to_string())),
        // RFC 9004 §3.4 wants the RFC 2544 throughput; without one, what
        // the DUT forwarded while overloaded is its forwarding rate.
        None if probe.dut_lost > 0 => (
            Some(probe.forwarded_pps),
            Some(format!(
                "the DUT's forwarding rate under the probe's overload ({:.0} pps), not an \
                 RFC 2544 throughput: pass --b2b-throughput with that for RFC 9004's correction",
                probe.forwarded_pps
            )),
        ),
        None => (None, None),
    }
}

/// Notes where the result departs from RFC 9004: a throughput that is a
/// forwarding rate under overload (none was `given`), a DUT that lost
/// nothing.
fn compliance(r: &mut BackToBackResult, given: bool, probe: &Probe) {
    if r.throughput_source.is_some() && !given {
        r.compliance_notes.push(
            "the throughput in the corrected buffer time is a forwarding rate under overload, \
             not the RFC 2544 throughput RFC 9004 §3.4 asks for"
                .into(),
        );
        r.rfc_compliant = false;
    }
    if probe.dut_lost == 0 {
        r.compliance_notes.push(format!(
            "the DUT lost nothing of the tester's {:.0} pps: RFC 9004 §3.1 says the test then \
             measures no buffer",
            probe.tester_pps
        ));
    }
}

/// Runs the back-to-back search of one profile (with the UDP test its
/// bursts repeat and its line rate, pps) and records it; returns the
/// summary lines.
pub fn run_back_to_back(
    ends: Ends,
    (p, base, lr_pps): (&Profile, UdpTest, f64),
    cfg: &SearchConfig,
    run: &mut Run,
) -> Result<Vec<String>> {
    let plan = &cfg.plan;
    let frame = crate::engine::frame::average_frame(p.frame);
    let mut max_pps = plan.max_rate.pps(frame, cfg.line_rate_bps);
    if let Some(cap) = plan.cap_pps {
        max_pps = max_pps.min(cap);
    }
    let mut bursts = UdpBursts {
        ends,
        base,
        paced_pps: None,
        burst_pps: max_pps,
        dir: run.dir.as_mut(),
        progress: &run.progress,
    };
    let probe = probe(&mut bursts).map_err(|e| err!("the back-to-back probe: {e}"))?;
    // The tester's highest rate, or --max-rate where that is lower: bursts
    // at --max-rate are paced to it.
    let (burst_pps, rate_source) = if max_pps < probe.tester_pps * (1.0 - MAX_RATE_SLACK) {
        bursts.paced_pps = Some(max_pps);
        (
            max_pps,
            format!(
                "--max-rate, {max_pps:.0} pps (below the tester's unpaced {:.0} pps); bursts paced to it",
                probe.tester_pps
            ),
        )
    } else {
        (
            probe.tester_pps,
            format!(
                "the tester's unpaced rate, {:.0} pps, measured over a {PROBE_S} s probe",
                probe.tester_pps
            ),
        )
    };
    bursts.burst_pps = burst_pps;
    let given = plan.b2b.throughput.map(|t| t.pps(frame, cfg.line_rate_bps));
    let (throughput_pps, throughput_source) = throughput(given, &probe);
    let mut b2b = BackToBackConfig {
        trials: plan.b2b.trials,
        wait_s: if plan.rfc_waits { RFC9004_DRAIN_S } else { 0.0 },
        throughput_pps,
        ..BackToBackConfig::new(burst_pps)
    };
    if let Some(m) = plan.b2b.max_burst {
        b2b.max_frames = m;
        b2b.start_frames = b2b.start_frames.min(m);
    }
    let mut r = search::back_to_back(&mut bursts, &b2b)?;
    drop(bursts);
    r.burst_rate_source = rate_source;
    r.throughput_source = throughput_source;
    compliance(&mut r, given.is_some(), &probe);
    let lines = summary_lines(&p.name, &r);
    run.results.searches.push(crate::results::SearchResult {
        name: format!("search {}", p.name),
        profile: p.name.clone(),
        frame: p.frame,
        flow_mode: p.flow_mode,
        direction: cfg_direction(&cfg.stream),
        line_rate_pps: lr_pps,
        mlr: None,
        rfc2544: None,
        frame_loss: None,
        back_to_back: Some(r),
        latency_at: None,
        sweep: None,
    });
    run.save();
    Ok(lines)
}

fn cfg_direction(s: &crate::orchestrate::config::Stream) -> crate::proto::Direction {
    if s.bidir {
        crate::proto::Direction::Both
    } else {
        crate::proto::Direction::Forward
    }
}

/// One unpaced second: what the tester sends at most and what the DUT
/// forwards of it.
fn probe(b: &mut UdpBursts) -> Result<Probe> {
    let t = UdpTest {
        name: format!("{} back-to-back probe", b.base.name),
        rate_pps: None,
        duration: Duration::from_secs_f64(PROBE_S),
        ..b.base.clone()
    };
    let r = b.test(&t)?;
    let n = r.directions.len().max(1) as f64;
    let dur = r
        .directions
        .iter()
        .map(|d| d.duration_s)
        .fold(0.0, f64::max);
    if dur <= 0.0 {
        fail!("it sent nothing; check the path with `linerate udp` first");
    }
    let tx: u64 = r.directions.iter().map(|d| d.tx_packets).sum();
    let rx: u64 = r.directions.iter().map(|d| d.rx_packets).sum();
    if rx == 0 {
        fail!("no frame of the {tx} sent arrived; check --target and the path with `linerate udp`");
    }
    Ok(Probe {
        tester_pps: tx as f64 / dur / n,
        forwarded_pps: rx as f64 / dur / n,
        dut_lost: r.directions.iter().map(|d| d.dut_lost).sum(),
    })
}

/// The terminal lines of a back-to-back result.
pub fn summary_lines(profile: &str, r: &BackToBackResult) -> Vec<String> {
    let c = &r.config;
    let mut lines = Vec::new();
    let answer = match (r.frames_avg, r.end) {
        (None, BackToBackEnd::MinBurstFailed) => {
            format!("even a burst of {} frame(s) lost frames", c.min_frames)
        }
        (None, _) => "no burst passed".into(),
        (Some(avg), end) => {
            let bound = match end {
                BackToBackEnd::MaxBurstPassed => ">= ",
                BackToBackEnd::TesterLimit => ">= (tester limit) ",
                _ => "",
            };
            format!(
                "{bound}{avg:.0} frames (min {}, max {}, sd {:.1} over {} trials), a burst of \
                 {:.3} ms at {:.0} pps",
                r.frames_min.unwrap_or(0),
                r.frames_max.unwrap_or(0),
                r.frames_stddev.unwrap_or(0.0),
                r.trials.len(),
                r.implied_buffer_time_s.unwrap_or(0.0) * 1e3,
                c.burst_pps
            )
        }
    };
    lines.push(format!(
        "{profile} back-to-back: {answer}{} ({} bursts, {:.1} s)",
        if r.rfc_compliant {
            ""
        } else {
            " [not RFC 2544/9004 compliant: see compliance_notes]"
        },
        r.bursts.len(),
        r.time_spent_s
    ));
    if let (Some(i), Some(t)) = (r.implied_buffer_time_s, c.throughput_pps) {
        lines.push(format!(
            "  implied DUT buffer time {:.3} ms; corrected (RFC 9004 §3.4, at {t:.0} pps) {:.3} ms \
             = {:.0} frames held, {:.3} ms to drain at that rate",
            i * 1e3,
            r.corrected_buffer_time_s.unwrap_or(0.0) * 1e3,
            r.buffered_frames.unwrap_or(0.0),
            r.drain_time_s.unwrap_or(0.0) * 1e3
        ));
    }
    lines.push(format!("  burst rate: {}", r.burst_rate_source));
    if let Some(s) = &r.throughput_source {
        lines.push(format!("  throughput: {s}"));
    }
    lines
}
