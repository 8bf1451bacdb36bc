//! RFC 2544 §26.4 back-to-back frames as RFC 9004 updates it: the longest
//! burst, sent at the tester's highest rate, that the DUT forwards whole,
//! found by a search over burst length and repeated (RFC: at least 50
//! times, the average reported), and the DUT buffer time it implies
//! (RFC 9004 §3.4).
//!
//! Pure logic over a "send a burst of N frames" interface ([`BurstRunner`]),
//! tested with a simulated DUT that has a buffer ([`super::sim::SimBuffer`]).

use super::{positive, ratio, SearchError, TrialError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// RFC 2544 §26.4 and RFC 9004 §3.3: the test "SHOULD be repeated at least
/// 50 times", and the average of the longest bursts reported.
pub const RFC_B2B_TRIALS: usize = 50;

/// RFC 9004 §3.3: after a burst has been received, at least 2 s more so the
/// DUT's buffers have drained before the next one.
pub const RFC9004_DRAIN_S: f64 = 2.0;

/// Re-runs of a burst the tester could not send whole at its rate before
/// the repetition ends at the tester's limit.
const SHORT_REPEATS: usize = 2;

/// What one burst measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BurstOutcome {
    /// Frames the burst was to have.
    pub frames: u64,
    /// Frames the tester sent.
    pub tx_packets: u64,
    /// Frames the sink counted (unique sequence numbers).
    pub rx_packets: u64,
    /// Frames the DUT lost (sequence numbers and the sender's totals, less
    /// the tester's own drops).
    pub lost: u64,
    /// Frames the tester itself dropped (its receiving interfaces).
    #[serde(default)]
    pub tester_drops: u64,
    /// How long the tester took to send the burst, seconds.
    pub send_s: f64,
    /// The tester could not send the burst whole at its rate: the burst
    /// says nothing of the DUT.
    pub tester_short: bool,
}

impl BurstOutcome {
    /// The DUT forwarded every frame of a whole burst.
    pub fn passed(&self) -> bool {
        !self.tester_short && self.lost == 0 && self.tester_drops == 0
    }
}

/// Sends bursts to a DUT. The I/O side implements it with the UDP engines;
/// [`super::sim::SimBuffer`] for tests.
pub trait BurstRunner {
    /// Sends `frames` frames back to back at the tester's rate and reports
    /// what arrived, counting up to the frames still queued in the DUT.
    fn burst(&mut self, frames: u64) -> Result<BurstOutcome, TrialError>;

    /// The wait after a burst for the DUT's buffers to drain.
    fn wait(&mut self, duration: Duration) -> Result<(), TrialError> {
        let _ = duration;
        Ok(())
    }
}

/// A back-to-back search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackToBackConfig {
    /// The rate the bursts are sent at, frames/s: the tester's highest for
    /// the frame size (or the --max-rate below it). RFC 9004's "Max
    /// Theoretical Frame Rate" in the buffer time formulas.
    pub burst_pps: f64,
    /// The smallest burst, frames.
    pub min_frames: u64,
    /// The longest burst (the search's ceiling), frames.
    pub max_frames: u64,
    /// The first burst of the first repetition, frames; later ones start
    /// from the previous answer.
    pub start_frames: u64,
    /// Repetitions of the whole search (RFC: at least 50).
    pub trials: usize,
    /// The search stops when the lowest failing and longest passing burst
    /// differ by at most this share of the passing one (at least a frame).
    pub resolution: f64,
    /// Wait after each burst, seconds (RFC 9004 §3.3: at least 2).
    pub wait_s: f64,
    /// The DUT's throughput, frames/s, for the corrected buffer time.
    pub throughput_pps: Option<f64>,
    /// Give up a repetition after this many bursts.
    pub max_bursts: usize,
}

impl BackToBackConfig {
    /// RFC defaults: 50 repetitions, 2 s waits, bursts of 64 frames up to
    /// 2 s at `burst_pps` (RFC 2544 §26.4's trial length), 1 % resolution.
    pub fn new(burst_pps: f64) -> Self {
        BackToBackConfig {
            burst_pps,
            min_frames: 1,
            max_frames: (burst_pps * 2.0).ceil().max(1.0) as u64,
            start_frames: 64,
            trials: RFC_B2B_TRIALS,
            resolution: 0.01,
            wait_s: RFC9004_DRAIN_S,
            throughput_pps: None,
            max_bursts: 64,
        }
    }

    fn validate(&self) -> Result<(), SearchError> {
        positive("burst rate (pps)", self.burst_pps)?;
        if self.min_frames == 0 || self.min_frames > self.max_frames {
            return Err(SearchError::Config(format!(
                "bursts from {} to {} frames: give at least 1 frame and a ceiling above the \
                 smallest burst",
                self.min_frames, self.max_frames
            )));
        }
        if self.trials == 0 || self.max_bursts == 0 {
            return Err(SearchError::Config(
                "trials and max_bursts must be at least 1".into(),
            ));
        }
        ratio("resolution", self.resolution)?;
        if !(self.wait_s.is_finite() && self.wait_s >= 0.0) {
            return Err(SearchError::Config(format!(
                "the wait between bursts must be finite and >= 0 s, got {}",
                self.wait_s
            )));
        }
        if let Some(t) = self.throughput_pps {
            positive("throughput (pps)", t)?;
        }
        Ok(())
    }

    fn compliance_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.trials < RFC_B2B_TRIALS {
            notes.push(format!(
                "{} repetition(s); RFC 2544 §26.4 and RFC 9004 §3.3 ask for at least \
                 {RFC_B2B_TRIALS}, averaged",
                self.trials
            ));
        }
        if self.wait_s < RFC9004_DRAIN_S {
            notes.push(format!(
                "{} s between bursts; RFC 9004 §3.3 asks for at least {RFC9004_DRAIN_S} s for \
                 the DUT's buffers to drain",
                self.wait_s
            ));
        }
        if self.throughput_pps.is_none() {
            notes.push(
                "no throughput for the frame size: the corrected DUT buffer time (RFC 9004 \
                 §3.4) is not reported"
                    .into(),
            );
        }
        notes
    }
}

/// How one repetition of the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackToBackEnd {
    /// The longest passing and shortest failing burst are within the
    /// resolution.
    Found,
    /// The longest burst passed: the DUT takes at least that (it may
    /// forward at the tester's rate; RFC 9004 §3.1).
    MaxBurstPassed,
    /// Even the smallest burst lost frames.
    MinBurstFailed,
    /// The tester could not send a burst whole at its rate: the answer, if
    /// any, is a lower bound.
    TesterLimit,
    /// Stopped at `max_bursts` before the resolution.
    BurstLimit,
}

/// One burst the search sent, as it goes into results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BurstRecord {
    /// The repetition (0-based) it belongs to.
    pub trial: usize,
    pub outcome: BurstOutcome,
    pub passed: bool,
}

/// One repetition's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackToBackTrial {
    /// The longest burst that passed, frames.
    pub frames: Option<u64>,
    /// The shortest burst that failed, frames.
    pub lowest_failed_frames: Option<u64>,
    pub end: BackToBackEnd,
    pub bursts: usize,
}

/// A back-to-back result, as it goes into results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackToBackResult {
    pub config: BackToBackConfig,
    /// Where `config.burst_pps` came from (measured unpaced, or --max-rate).
    pub burst_rate_source: String,
    /// Where `config.throughput_pps` came from, when there is one.
    pub throughput_source: Option<String>,
    pub trials: Vec<BackToBackTrial>,
    /// The back-to-back frames benchmark: the average of the repetitions'
    /// longest bursts, frames.
    pub frames_avg: Option<f64>,
    pub frames_min: Option<u64>,
    pub frames_max: Option<u64>,
    pub frames_stddev: Option<f64>,
    /// The average burst's duration at the burst rate, seconds. RFC 9004
    /// §3.4's "Implied DUT Buffer Time" (average frames / the rate the
    /// bursts arrived at, which is the maximum theoretical frame rate when
    /// the tester reaches the line rate).
    pub implied_buffer_time_s: Option<f64>,
    /// RFC 9004 §3.4's "Corrected DUT Buffer Time": the implied time less
    /// what the DUT forwarded during the burst (implied × throughput /
    /// burst rate). Absent without a throughput.
    pub corrected_buffer_time_s: Option<f64>,
    /// Frames the DUT held when the burst ended: corrected time × burst
    /// rate.
    pub buffered_frames: Option<f64>,
    /// How long the DUT takes to forward what it held at its throughput:
    /// the delay a full buffer adds, seconds.
    pub drain_time_s: Option<f64>,
    /// Every repetition found an answer within the resolution.
    pub end: BackToBackEnd,
    /// 50 or more repetitions, the 2 s waits and a throughput.
    pub rfc_compliant: bool,
    /// Why the result is not RFC 2544 / RFC 9004 compliant.
    pub compliance_notes: Vec<String>,
    pub bursts: Vec<BurstRecord>,
    /// Time spent sending bursts and waiting, seconds.
    pub time_spent_s: f64,
}

/// RFC 2544 §26.4 / RFC 9004 §3.3: for each repetition, bursts grow from
/// `start_frames` (later repetitions: from the previous answer) by steps
/// that double until one fails, then the bracket between the longest
/// passing and shortest failing burst is halved to the resolution. A burst
/// passes when every frame arrives; one the tester could not send whole is
/// sent again and, still short, ends the repetition at the tester's limit.
pub fn back_to_back(
    runner: &mut dyn BurstRunner,
    config: &BackToBackConfig,
) -> Result<BackToBackResult, SearchError> {
    config.validate()?;
    let mut bursts: Vec<BurstRecord> = Vec::new();
    let mut trials = Vec::new();
    let mut time_s = 0.0;
    let mut start = config.start_frames;
    for rep in 0..config.trials {
        let t = one_search(runner, config, rep, start, &mut bursts, &mut time_s)?;
        if let Some(f) = t.frames {
            start = f;
        }
        trials.push(t);
    }
    Ok(summarize(config, trials, bursts, time_s))
}

fn one_search(
    runner: &mut dyn BurstRunner,
    cfg: &BackToBackConfig,
    rep: usize,
    start: u64,
    log: &mut Vec<BurstRecord>,
    time_s: &mut f64,
) -> Result<BackToBackTrial, SearchError> {
    let (min, max) = (cfg.min_frames, cfg.max_frames);
    let mut next = start.clamp(min, max);
    // The first steps: the start itself when searching from scratch (so
    // bursts double), a tenth of the previous answer after.
    let mut step = if rep == 0 { next } else { (next / 10).max(1) };
    let (mut lo, mut hi): (Option<u64>, Option<u64>) = (None, None);
    let mut count = 0;
    let end = loop {
        if count >= cfg.max_bursts {
            break BackToBackEnd::BurstLimit;
        }
        let mut short = 0;
        let outcome = loop {
            let o = runner.burst(next).map_err(|e| failed(log, cfg, next, e))?;
            *time_s += o.send_s + cfg.wait_s;
            count += 1;
            let again = o.tester_short && short < SHORT_REPEATS;
            let passed = o.passed();
            log.push(BurstRecord {
                trial: rep,
                outcome: o.clone(),
                passed,
            });
            if cfg.wait_s > 0.0 {
                let d = Duration::try_from_secs_f64(cfg.wait_s)
                    .map_err(|_| failed(log, cfg, next, TrialError::BadDuration(cfg.wait_s)))?;
                runner.wait(d).map_err(|e| failed(log, cfg, next, e))?;
            }
            if !again {
                break o;
            }
            short += 1;
        };
        if outcome.tester_short {
            break BackToBackEnd::TesterLimit;
        }
        if outcome.passed() {
            lo = Some(lo.map_or(next, |l| l.max(next)));
        } else {
            hi = Some(hi.map_or(next, |h| h.min(next)));
        }
        next = match (lo, hi) {
            (Some(l), None) if l >= max => break BackToBackEnd::MaxBurstPassed,
            (Some(l), None) => {
                let n = l.saturating_add(step).min(max);
                step = step.saturating_mul(2);
                n
            }
            (None, Some(h)) if h <= min => break BackToBackEnd::MinBurstFailed,
            (None, Some(h)) => {
                let n = h.saturating_sub(step).max(min);
                step = step.saturating_mul(2);
                n
            }
            (Some(l), Some(h)) => {
                let width = ((l as f64 * cfg.resolution).ceil() as u64).max(1);
                if h <= l + width {
                    break BackToBackEnd::Found;
                }
                l + (h - l) / 2
            }
            // Cannot be: the burst above set one of them.
            (None, None) => break BackToBackEnd::BurstLimit,
        };
    };
    Ok(BackToBackTrial {
        frames: lo,
        lowest_failed_frames: hi,
        end,
        bursts: count,
    })
}

/// A burst or its wait failed: the error, naming the burst.
fn failed(log: &[BurstRecord], cfg: &BackToBackConfig, frames: u64, e: TrialError) -> SearchError {
    SearchError::Trial {
        index: log.len(),
        rate_pps: cfg.burst_pps,
        duration_s: frames as f64 / cfg.burst_pps,
        message: format!("a burst of {frames} frames: {e}"),
        completed: Vec::new(),
    }
}

fn summarize(
    cfg: &BackToBackConfig,
    trials: Vec<BackToBackTrial>,
    bursts: Vec<BurstRecord>,
    time_spent_s: f64,
) -> BackToBackResult {
    let values: Vec<u64> = trials.iter().filter_map(|t| t.frames).collect();
    let n = values.len() as f64;
    let avg = (!values.is_empty()).then(|| values.iter().sum::<u64>() as f64 / n);
    let stddev = avg
        .map(|a| (values.iter().map(|&v| (v as f64 - a).powi(2)).sum::<f64>() / n.max(1.0)).sqrt());
    // RFC 9004 §3.4: Implied DUT Buffer Time = average back-to-back frames
    // / Max Theoretical Frame Rate; Corrected DUT Buffer Time = Implied −
    // Implied × Measured Throughput / Max Theoretical Frame Rate (what the
    // DUT forwarded while the burst came in was never in its buffer). The
    // rate here is the one the bursts were sent at.
    let implied = avg.map(|a| a / cfg.burst_pps);
    let corrected = implied
        .zip(cfg.throughput_pps)
        .map(|(i, t)| (i - i * t / cfg.burst_pps).max(0.0));
    let buffered = corrected.map(|c| c * cfg.burst_pps);
    let drain = buffered.zip(cfg.throughput_pps).map(|(b, t)| b / t);
    let end = [
        BackToBackEnd::TesterLimit,
        BackToBackEnd::MinBurstFailed,
        BackToBackEnd::BurstLimit,
        BackToBackEnd::MaxBurstPassed,
    ]
    .into_iter()
    .find(|e| trials.iter().any(|t| t.end == *e))
    .unwrap_or(BackToBackEnd::Found);
    let mut notes = cfg.compliance_notes();
    if end == BackToBackEnd::MaxBurstPassed {
        notes.push(format!(
            "bursts of the ceiling ({} frames) passed: the benchmark is at least that; RFC 9004 \
             §3.5 asks that a tester's longest burst be reported",
            cfg.max_frames
        ));
    }
    BackToBackResult {
        config: *cfg,
        burst_rate_source: String::new(),
        throughput_source: None,
        frames_avg: avg,
        frames_min: values.iter().min().copied(),
        frames_max: values.iter().max().copied(),
        frames_stddev: stddev,
        implied_buffer_time_s: implied,
        corrected_buffer_time_s: corrected,
        buffered_frames: buffered,
        drain_time_s: drain,
        end,
        rfc_compliant: notes.is_empty(),
        compliance_notes: notes,
        trials,
        bursts,
        time_spent_s,
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::SimBuffer;
    use super::*;

    fn quick(burst_pps: f64) -> BackToBackConfig {
        BackToBackConfig {
            trials: 3,
            wait_s: 0.0,
            resolution: 0.001,
            ..BackToBackConfig::new(burst_pps)
        }
    }

    #[test]
    fn the_search_finds_the_buffer_within_its_resolution() {
        // 1,000 frames of buffer drained at 100 kpps while bursts come at
        // 1 Mpps: a burst of N leaves N × 0.9 queued, so 1,111 pass.
        let mut dut = SimBuffer::new(1_000.0, 100_000.0, 1_000_000.0);
        let cfg = BackToBackConfig {
            throughput_pps: Some(100_000.0),
            ..quick(1_000_000.0)
        };
        let r = back_to_back(&mut dut, &cfg).unwrap();
        assert_eq!(r.end, BackToBackEnd::Found);
        for t in &r.trials {
            let (f, h) = (t.frames.unwrap(), t.lowest_failed_frames.unwrap());
            assert!(f <= 1_111 && h > 1_111, "{t:?}");
            assert!(h - f <= 2, "bracket wider than the resolution: {t:?}");
        }
        // Later repetitions start from the answer: fewer bursts.
        assert!(r.trials[1].bursts < r.trials[0].bursts, "{:?}", r.trials);
        let avg = r.frames_avg.unwrap();
        assert!((avg - 1_111.0).abs() <= 2.0, "{avg}");
        // Implied: the burst at 1 Mpps; corrected: less the 10 % the DUT
        // forwarded meanwhile, which is the buffer (1,000 frames) in time.
        assert!((r.implied_buffer_time_s.unwrap() - avg / 1e6).abs() < 1e-12);
        let buffered = r.buffered_frames.unwrap();
        assert!((buffered - 1_000.0).abs() <= 2.0, "{buffered}");
        // Drained at 100 kpps, 1,000 frames take 10 ms.
        assert!((r.drain_time_s.unwrap() - 0.010).abs() < 0.0001);
        assert!(!r.rfc_compliant);
        assert!(r.compliance_notes[0].contains("3 repetition(s)"));
    }

    #[test]
    fn doubling_the_buffer_doubles_the_result() {
        let run = |buffer: f64| {
            let mut dut = SimBuffer::new(buffer, 50_000.0, 800_000.0);
            back_to_back(&mut dut, &quick(800_000.0))
                .unwrap()
                .frames_avg
                .unwrap()
        };
        let ratio = run(4_000.0) / run(2_000.0);
        assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn a_dut_at_the_testers_rate_passes_the_ceiling_and_a_short_tester_is_said() {
        // Forwards all it gets: every burst passes, up to the ceiling.
        let mut dut = SimBuffer::new(10.0, 1_000_000.0, 1_000_000.0);
        let cfg = BackToBackConfig {
            max_frames: 100_000,
            ..quick(1_000_000.0)
        };
        let r = back_to_back(&mut dut, &cfg).unwrap();
        assert_eq!(r.end, BackToBackEnd::MaxBurstPassed);
        assert_eq!(r.frames_min, Some(100_000));
        assert!(r.compliance_notes.iter().any(|n| n.contains("ceiling")));
        // A tester that cannot send more than 5,000 frames whole.
        let mut dut = SimBuffer::new(10_000.0, 100_000.0, 1_000_000.0);
        dut.tester_most = Some(5_000);
        let r = back_to_back(&mut dut, &quick(1_000_000.0)).unwrap();
        assert_eq!(r.end, BackToBackEnd::TesterLimit);
        assert!(r.trials[0].frames.unwrap() <= 5_000);
    }

    #[test]
    fn fifty_repetitions_and_the_waits_are_compliant() {
        let mut dut = SimBuffer::new(100.0, 10_000.0, 100_000.0);
        let cfg = BackToBackConfig {
            throughput_pps: Some(10_000.0),
            ..BackToBackConfig::new(100_000.0)
        };
        let r = back_to_back(&mut dut, &cfg).unwrap();
        assert_eq!(r.trials.len(), 50);
        assert!(r.rfc_compliant, "{:?}", r.compliance_notes);
        // Every burst is followed by its 2 s wait.
        assert!(r.time_spent_s >= r.bursts.len() as f64 * 2.0);
        assert!(back_to_back(
            &mut dut,
            &BackToBackConfig {
                min_frames: 0,
                ..cfg
            }
        )
        .is_err());
    }
}
