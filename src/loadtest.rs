//! `linerate ramp` and `linerate search`: the trex-loadtest method (warmup,
//! linear ramp, hold, saturation point) and throughput searches (RFC 2544,
//! MLRsearch-style NDR/PDR), against a lab DUT or two endpoints a user names.
//!
//! The search logic lives in [`crate::search`] and knows nothing of sockets;
//! this module gives it a [`TrialRunner`] that runs real UDP trials.

use crate::adhoc::{addressing, endpoint};
use crate::cli::{parse_frame, Common, FlowModeArg};
use crate::controller::{interrupted, Fleet};
use crate::engine::{check_destination, udp};
use crate::lab::{self, Addressing, DutMode, LabSpec};
use crate::proto::{Direction, FrameSpec};
use crate::report::terminal::ProgressLine;
use crate::results::{FlowMode, RunDir, TestStatus};
use crate::runner::{self, Ends, UdpTest};
use crate::search::{self, TrialOutcome, TrialRunner};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use std::net::IpAddr;
use std::time::Duration;

/// Where the traffic goes: a lab built for the run, or endpoints you name.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Build a lab (gen -> DUT -> sink) and test its DUT.
    #[arg(long)]
    pub lab: bool,
    /// With --lab: no DUT, generator and sink back to back (measures the tester).
    #[arg(long)]
    pub back_to_back: bool,
    /// With --lab: what the DUT does.
    #[arg(long, value_enum, default_value = "route")]
    pub dut: DutMode,
    /// With --lab --dut fw: rules in the forward chain.
    #[arg(long, default_value_t = 100)]
    pub fw_rules: u32,
    /// With --lab: random loss the DUT applies, in %.
    #[arg(long, value_name = "PERCENT")]
    pub dut_loss: Option<f64>,
    /// With --lab: police the DUT to this many packets per second (a DUT of known capacity).
    #[arg(long, value_name = "PPS", value_parser = crate::cli::parse_pps_u64)]
    pub dut_police: Option<u64>,
    /// With --lab: test over IPv6.
    #[arg(long)]
    pub ipv6: bool,
    /// Without --lab: where the generator runs (`local` or `ns:NAME`).
    #[arg(long, default_value = "local")]
    pub client: String,
    /// Without --lab: where the sink runs (`local` or `ns:NAME`).
    #[arg(long, default_value = "local")]
    pub server: String,
    /// Without --lab: the sink's address.
    #[arg(long)]
    pub target: Option<IpAddr>,
    /// Without --lab: the generator's address (needed for --bidir).
    #[arg(long)]
    pub client_address: Option<IpAddr>,
}

/// What to send.
#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// A seed profile: bench-var2-1514b (1518 B frames with FCS), bench-var2-imix,
    /// bench-var2-64b (var2 = source and destination vary), bench (64 B, one flow).
    #[arg(long)]
    pub profile: Option<String>,
    /// Frame size with FCS, or imix (overrides the profile's).
    #[arg(long, value_parser = parse_frame)]
    pub frame_size: Option<FrameSpec>,
    /// How flows differ (overrides the profile's); var1/var2 need --lab.
    #[arg(long, value_enum)]
    pub flow_mode: Option<FlowModeArg>,
    /// Number of flows.
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// Send both directions at once (loss and results per direction).
    #[arg(long)]
    pub bidir: bool,
}

/// A profile resolved to frames and flows.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub frame: FrameSpec,
    pub flow_mode: FlowMode,
}

pub const SEED_PROFILES: [&str; 4] = [
    "bench-var2-1514b",
    "bench-var2-imix",
    "bench-var2-64b",
    "bench",
];

pub fn seed_profile(name: &str) -> Result<Profile> {
    let (frame, flow_mode) = match name {
        "bench-var2-1514b" => (FrameSpec::Fixed(1518), FlowMode::Var2),
        "bench-var2-imix" => (FrameSpec::Imix, FlowMode::Var2),
        "bench-var2-64b" => (FrameSpec::Fixed(64), FlowMode::Var2),
        "bench" => (FrameSpec::Fixed(64), FlowMode::One),
        other => bail!(
            "unknown profile '{other}': choose one of {}",
            SEED_PROFILES.join(", ")
        ),
    };
    Ok(Profile {
        name: name.into(),
        frame,
        flow_mode,
    })
}

impl ProfileArgs {
    /// The profile these flags describe; `lab` picks the default flow mode.
    pub fn resolve(&self, lab: bool) -> Result<Profile> {
        let mut p = match &self.profile {
            Some(n) => seed_profile(n)?,
            None => Profile {
                name: String::new(),
                frame: FrameSpec::Fixed(64),
                flow_mode: if lab { FlowMode::Var2 } else { FlowMode::One },
            },
        };
        if let Some(f) = self.frame_size {
            p.frame = f;
        }
        if let Some(m) = self.flow_mode {
            p.flow_mode = m.into();
        }
        if p.name.is_empty() || self.frame_size.is_some() || self.flow_mode.is_some() {
            p.name = format!("{} {:?}", frame_name(p.frame), p.flow_mode).to_lowercase();
        }
        Ok(p)
    }
}

pub fn frame_name(f: FrameSpec) -> String {
    match f {
        FrameSpec::Fixed(n) => format!("{n}B"),
        FrameSpec::Imix => "imix".into(),
    }
}

/// The agents a ramp or search drives, with their addresses.
pub struct Bench {
    pub fleet: Fleet,
    pub gen: usize,
    pub sink: usize,
    pub dut: Option<usize>,
    pub gen_addr: Addressing,
    pub sink_addr: Addressing,
    pub ipv6: bool,
    pub topology: Option<crate::results::LabTopology>,
}

impl Bench {
    pub fn open(
        t: &TargetArgs,
        common: &Common,
        log_dir: Option<&std::path::Path>,
    ) -> Result<Self> {
        if t.lab {
            if t.target.is_some() {
                bail!("--lab builds its own endpoints; drop --target (or drop --lab to test endpoints you name)");
            }
            let l = lab::build(
                LabSpec {
                    dut: (!t.back_to_back).then_some(t.dut),
                    fw_rules: t.fw_rules,
                    mtu: 1500,
                    dut_loss_pct: t.dut_loss,
                    dut_police_pps: t.dut_police,
                },
                log_dir,
            )?;
            return Ok(Bench {
                fleet: l.fleet,
                gen: l.gen,
                sink: l.sink,
                dut: l.dut,
                gen_addr: l.gen_addr,
                sink_addr: l.sink_addr,
                ipv6: t.ipv6,
                topology: Some(l.topology),
            });
        }
        let target = t.target.ok_or_else(|| {
            anyhow!("say where to send: --target ADDR (with --client/--server), or --lab")
        })?;
        check_destination(target, &common.allow_target).map_err(|m| anyhow!(m))?;
        let mut fleet = Fleet::new();
        let log = |role: &str| log_dir.map(|d| d.join(format!("{role}.log")));
        let gen = fleet.spawn_local("gen", &endpoint(&t.client)?, log("gen").as_deref())?;
        let sink = fleet.spawn_local("sink", &endpoint(&t.server)?, log("sink").as_deref())?;
        Ok(Bench {
            fleet,
            gen,
            sink,
            dut: None,
            gen_addr: addressing(t.client_address),
            sink_addr: addressing(Some(target)),
            ipv6: target.is_ipv6(),
            topology: None,
        })
    }

    pub fn ends(&mut self, lab: Option<usize>) -> Ends<'_> {
        Ends::new(
            &mut self.fleet,
            (self.gen, self.sink, self.dut),
            (self.gen_addr.clone(), self.sink_addr.clone()),
            lab,
        )
    }
}

/// Runs real UDP trials for the search logic.
pub struct UdpTrials<'a, 'b> {
    pub ends: Ends<'a>,
    pub base: UdpTest,
    pub dir: Option<&'b mut RunDir>,
    pub progress: &'b ProgressLine,
    /// Every trial's full test result, kept for results.json.
    pub log: Vec<crate::results::TestResult>,
}

impl TrialRunner for UdpTrials<'_, '_> {
    fn trial(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome, String> {
        if interrupted() {
            return Err("interrupted".into());
        }
        let t = UdpTest {
            name: format!("{} trial {:.0} pps", self.base.name, rate_pps),
            rate_pps: Some(rate_pps),
            rate_profile: None,
            duration,
            ..self.base.clone()
        };
        let progress = self.progress;
        let mut cb = |p: &runner::Progress| progress.update(p);
        let r = runner::run_udp(&mut self.ends, &t, self.dir.as_deref_mut(), &mut cb);
        progress.clear();
        if r.status != TestStatus::Ok {
            return Err(r.error.clone().unwrap_or_else(|| "trial failed".into()));
        }
        let sum = |f: fn(&crate::results::DirectionResult) -> u64| {
            r.directions.iter().map(f).sum::<u64>()
        };
        let duration_s = r
            .directions
            .iter()
            .map(|d| d.duration_s)
            .fold(0.0, f64::max)
            .max(1e-6);
        let outcome = TrialOutcome {
            rate_pps,
            offered_pps: sum(|d| d.tx_packets) as f64
                / duration_s
                / r.directions.len().max(1) as f64,
            duration_s,
            tx_packets: sum(|d| d.tx_packets),
            rx_packets: sum(|d| d.rx_packets),
            // The tester's own drops (socket overruns) are not the DUT's loss.
            lost: sum(|d| d.dut_lost),
            tester_limited: r.directions.iter().any(|d| d.tester_limited),
        };
        self.log.push(r);
        Ok(outcome)
    }
}

/// The UDP test a ramp or search repeats, at the profile's frames and flows.
pub fn base_test(p: &Profile, pa: &ProfileArgs, ipv6: bool, common: &Common) -> Result<UdpTest> {
    udp::check_frames(p.frame, ipv6).map_err(|m| anyhow!(m))?;
    Ok(UdpTest {
        name: p.name.clone(),
        ipv6,
        frame: p.frame,
        flow_mode: p.flow_mode,
        flows: pa.flows.max(1),
        direction: if pa.bidir {
            Direction::Both
        } else {
            Direction::Forward
        },
        duration: Duration::from_secs(1),
        rate_pps: None,
        rate_profile: None,
        batch: 32,
        cpus: common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        allow: common.allow_target.clone(),
    })
}

/// Flags of `linerate ramp`.
#[derive(Args, Debug, Clone)]
pub struct RampArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Warmup rate: pps (10kpps), L1 bit/s (100M) or % of the line rate (1%).
    #[arg(long, default_value = "1%")]
    pub warmup_rate: String,
    /// Warmup seconds.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Rate the ramp ends at: pps, L1 bit/s or % of the line rate.
    #[arg(long, default_value = "100%")]
    pub ramp_to: String,
    /// Ramp seconds (linear from 0 to --ramp-to).
    #[arg(long, default_value_t = 30.0)]
    pub ramp: f64,
    /// Seconds to hold --ramp-to after the ramp.
    #[arg(long, default_value_t = 5.0)]
    pub hold: f64,
    /// Loss (%) above which a one-second sample counts as lossy.
    #[arg(long, default_value_t = 0.1)]
    pub loss_threshold: f64,
    /// Also write the samples for another tool: `--export trex-loadtest-viz FILE`.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"])]
    pub export: Option<Vec<String>>,
    #[command(flatten)]
    pub common: Common,
}

fn line_rate_pps(common: &Common, frame: FrameSpec) -> f64 {
    crate::units::line_rate_pps(common.line_rate, udp::average_frame(frame))
}

fn rate(s: &str, frame: FrameSpec, common: &Common, flag: &str) -> Result<f64> {
    crate::cli::parse_rate(s, udp::average_frame(frame), common.line_rate)
        .map_err(|e| anyhow!("{flag}: {e}"))
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
                tester_limited: s.tx_target > 0
                    && (s.tx_packets as f64) < 0.99 * s.tx_target as f64,
            })
        })
        .collect()
}

pub fn ramp(a: &RampArgs) -> i32 {
    let p = match a.profile.resolve(a.target.lab) {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let spec = match (|| -> Result<search::RampSpec> {
        let s = search::RampSpec {
            warmup_pps: rate(&a.warmup_rate, p.frame, &a.common, "--warmup-rate")?,
            warmup_s: a.warmup,
            target_pps: rate(&a.ramp_to, p.frame, &a.common, "--ramp-to")?,
            ramp_s: a.ramp,
            hold_s: a.hold,
        };
        s.validate().map_err(|e| anyhow!("{e}"))?;
        if !(0.0..100.0).contains(&a.loss_threshold) {
            bail!(
                "--loss-threshold {} must be a percentage in 0..100",
                a.loss_threshold
            );
        }
        if let Some(ex) = &a.export {
            if ex.first().map(String::as_str) != Some("trex-loadtest-viz") {
                bail!("--export knows one format: trex-loadtest-viz (e.g. --export trex-loadtest-viz ramp.json)");
            }
        }
        Ok(s)
    })() {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let name = a.common.name.clone().unwrap_or_else(|| "ramp".into());
    let mut run = match crate::run::Run::start(&a.common, &name, true) {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    let err = ramp_in(a, &p, &spec, &mut run).err();
    run.finish(err)
}

fn usage(e: anyhow::Error) -> i32 {
    eprintln!("error: {e:#}");
    2
}

fn ramp_in(
    a: &RampArgs,
    p: &Profile,
    spec: &search::RampSpec,
    run: &mut crate::run::Run,
) -> Result<()> {
    let log_dir = run.dir.as_ref().map(|d| d.path.join("agents"));
    let mut bench = Bench::open(&a.target, &a.common, log_dir.as_deref())?;
    let lab_idx = bench.topology.take().map(|t| {
        run.results.labs.push(t);
        run.results.labs.len() - 1
    });
    let ipv6 = bench.ipv6;
    let mut ends = bench.ends(lab_idx);
    let summary = run_ramp(
        &mut ends,
        p,
        &a.profile,
        spec,
        a.loss_threshold / 100.0,
        ipv6,
        &a.common,
        run,
    )?;
    drop(ends);
    bench.fleet.shutdown();
    if let Some(ex) = &a.export {
        let file = ex.get(1).ok_or_else(|| anyhow!("--export needs a file"))?;
        let r = run
            .results
            .ramps
            .last()
            .ok_or_else(|| anyhow!("no ramp to export"))?;
        let samples = r.directions_samples();
        let forward = samples.first().map(Vec::as_slice).unwrap_or(&[]);
        let reverse = samples.get(1).map(Vec::as_slice);
        let v = crate::search::viz_export(&r.spec, forward, reverse, &p.name, r.line_rate_pps);
        crate::results::write_atomic(
            std::path::Path::new(file),
            serde_json::to_string_pretty(&v)?.as_bytes(),
        )?;
        eprintln!("wrote {file} (trex-loadtest-viz vars/stats)");
    }
    for s in summary {
        eprintln!("{s}");
    }
    Ok(())
}

/// Runs one ramp and records it; returns a verdict line per direction.
#[allow(clippy::too_many_arguments)]
pub fn run_ramp(
    ends: &mut Ends,
    p: &Profile,
    pa: &ProfileArgs,
    spec: &search::RampSpec,
    loss_threshold: f64,
    ipv6: bool,
    common: &Common,
    run: &mut crate::run::Run,
) -> Result<Vec<String>> {
    let mut t = base_test(p, pa, ipv6, common)?;
    t.name = format!("ramp {}", p.name);
    t.duration = Duration::from_secs_f64(spec.total_s());
    t.rate_profile = Some(crate::proto::RateProfile {
        points: spec
            .breakpoints()
            .into_iter()
            .map(|(t_s, pps)| crate::proto::RatePoint { t_s, pps })
            .collect(),
    });
    let test_index = run.results.tests.len();
    run.udp(ends, &t);
    let r = &run.results.tests[test_index];
    if r.status != TestStatus::Ok {
        bail!("ramp {}: {}", p.name, r.error.clone().unwrap_or_default());
    }
    let lr_pps = line_rate_pps(common, p.frame);
    let mut lines = Vec::new();
    let mut dirs = Vec::new();
    for d in &r.directions {
        let samples = ramp_samples(d, spec);
        let summary = search::summarize_ramp(&samples, loss_threshold, lr_pps);
        let mut verdict = format!("ramp {} {}: {}", p.name, d.direction, summary.verdict);
        if summary.tester_limited_samples > 0 {
            verdict.push_str(&format!(
                "; the tester could not offer the asked rate in {} of {} samples (those measure the tester, not the DUT)",
                summary.tester_limited_samples, summary.samples
            ));
        }
        lines.push(verdict);
        dirs.push(crate::results::RampDirection {
            direction: d.direction.clone(),
            samples,
            summary,
        });
    }
    run.results.ramps.push(crate::results::RampResult {
        name: t.name.clone(),
        profile: p.name.clone(),
        frame: p.frame,
        flow_mode: p.flow_mode,
        test: test_index,
        spec: *spec,
        line_rate_pps: lr_pps,
        directions: dirs,
    });
    run.save();
    Ok(lines)
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// MLRsearch: NDR and PDR (and any --goal) in one search.
    Mlr,
    /// RFC 2544 throughput: binary search for the highest zero-loss rate.
    Rfc2544,
    /// Both, one after the other.
    Both,
}

/// Flags of `linerate search`.
#[derive(Args, Debug, Clone)]
pub struct SearchArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Frame sizes to search one after the other, e.g. 64,128,256,512,1024,1280,1518,imix.
    #[arg(long, value_delimiter = ',', value_parser = parse_frame)]
    pub sizes: Vec<FrameSpec>,
    #[arg(long, value_enum, default_value = "mlr")]
    pub method: Method,
    /// Lowest rate to try: pps, L1 bit/s or % of the line rate (default 1 % of --max-rate).
    #[arg(long)]
    pub min_rate: Option<String>,
    /// Highest rate to try: pps, L1 bit/s or % of the line rate.
    #[arg(long, default_value = "100%")]
    pub max_rate: String,
    /// RFC 2544 trial seconds (the RFC asks for 60; shorter is labelled non-compliant).
    #[arg(long, default_value_t = 60.0)]
    pub trial: f64,
    /// RFC 2544: skip the §23 waits around trials (labelled non-compliant).
    #[arg(long)]
    pub no_waits: bool,
    /// RFC 2544 method: loss (%) a trial may have and still pass (RFC 2544 itself
    /// allows none; above 0 the result is a partial drop rate, labelled so).
    #[arg(long, default_value_t = 0.0)]
    pub acceptable_loss: f64,
    /// RFC 2544: also measure the frame loss rate at 100 %, 90 % … of --max-rate.
    #[arg(long)]
    pub frame_loss: bool,
    /// MLRsearch goal NAME=LOSS% (repeatable; default ndr=0 and pdr=0.5).
    #[arg(long = "goal", value_name = "NAME=LOSS%")]
    pub goals: Vec<String>,
    /// MLRsearch: final trial seconds.
    #[arg(long, default_value_t = 1.0)]
    pub final_trial: f64,
    /// MLRsearch: trial seconds summed at a load before it is decided.
    #[arg(long, default_value_t = 21.0)]
    pub duration_sum: f64,
    /// Relative width of the answer, % (MLRsearch goals; RFC 2544 resolution).
    #[arg(long, default_value_t = 0.5)]
    pub width: f64,
    /// MLRsearch: share of trial time allowed to exceed the loss ratio.
    #[arg(long, default_value_t = 0.5)]
    pub exceed_ratio: f64,
    #[command(flatten)]
    pub common: Common,
}

impl UdpTrials<'_, '_> {
    fn sleep(&mut self, d: Duration) -> Result<(), String> {
        let end = std::time::Instant::now() + d;
        while std::time::Instant::now() < end {
            if interrupted() {
                return Err("interrupted".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

pub fn parse_goal(s: &str, base: &search::MlrGoal) -> Result<search::MlrGoal> {
    let (name, loss) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("--goal '{s}': write NAME=LOSS%, e.g. ndr=0 or pdr=0.5"))?;
    let loss: f64 = loss
        .trim_end_matches('%')
        .parse()
        .map_err(|_| anyhow!("--goal '{s}': the loss must be a percentage, e.g. 0.5"))?;
    Ok(search::MlrGoal {
        name: name.trim().into(),
        loss_ratio: loss / 100.0,
        ..base.clone()
    })
}

/// Resolved settings of one search, shared by `linerate search` and the lab.
#[derive(Debug, Clone)]
pub struct SearchPlan {
    pub method: Method,
    pub min_rate: Option<String>,
    pub max_rate: String,
    pub goals: Vec<search::MlrGoal>,
    pub rfc_trial_s: f64,
    pub rfc_waits: bool,
    /// Loss ratio (0..1) an RFC 2544 trial may have and still pass.
    pub rfc_acceptable_loss: f64,
    /// RFC 2544 binary search resolution, relative (0..1).
    pub rfc_resolution: f64,
    pub frame_loss: bool,
    /// Upper bound from elsewhere (e.g. the tester's self-test), pps.
    pub cap_pps: Option<f64>,
}

impl SearchArgs {
    pub fn plan(&self) -> Result<SearchPlan> {
        let base = search::MlrGoal {
            final_trial_duration_s: self.final_trial,
            initial_trial_duration_s: self.final_trial.min(1.0),
            duration_sum_s: self.duration_sum,
            relative_width: self.width / 100.0,
            exceed_ratio: self.exceed_ratio,
            ..search::MlrGoal::ndr()
        };
        let goals = if self.goals.is_empty() {
            vec![
                base.clone(),
                search::MlrGoal {
                    name: "pdr".into(),
                    loss_ratio: 0.005,
                    ..base.clone()
                },
            ]
        } else {
            self.goals
                .iter()
                .map(|g| parse_goal(g, &base))
                .collect::<Result<_>>()?
        };
        Ok(SearchPlan {
            method: self.method,
            min_rate: self.min_rate.clone(),
            max_rate: self.max_rate.clone(),
            goals,
            rfc_trial_s: self.trial,
            rfc_waits: !self.no_waits,
            rfc_acceptable_loss: self.acceptable_loss / 100.0,
            rfc_resolution: self.width / 100.0,
            frame_loss: self.frame_loss,
            cap_pps: None,
        })
    }
}

impl TrialRunner for UdpTrialsWait<'_, '_, '_> {
    fn trial(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome, String> {
        self.0.trial(rate_pps, duration)
    }
    /// Learning needs no frames in a linerate lab (static neighbours), so
    /// every §23 wait is a plain wait.
    fn wait(&mut self, _phase: search::WaitPhase, d: Duration) -> Result<(), String> {
        self.0.sleep(d)
    }
}

/// [`UdpTrials`] with the §23 waits honoured.
pub struct UdpTrialsWait<'x, 'a, 'b>(pub &'x mut UdpTrials<'a, 'b>);

/// Runs the searches of one profile and records them; returns summary lines.
#[allow(clippy::too_many_arguments)]
pub fn run_search(
    ends: Ends,
    p: &Profile,
    pa: &ProfileArgs,
    plan: &SearchPlan,
    ipv6: bool,
    common: &Common,
    run: &mut crate::run::Run,
) -> Result<Vec<String>> {
    let base = base_test(p, pa, ipv6, common)?;
    let lr_pps = line_rate_pps(common, p.frame);
    let mut max = rate(&plan.max_rate, p.frame, common, "--max-rate")?;
    if let Some(cap) = plan.cap_pps {
        max = max.min(cap);
    }
    let min = match &plan.min_rate {
        Some(m) => rate(m, p.frame, common, "--min-rate")?,
        None => max / 100.0,
    };
    let mut trials = UdpTrials {
        ends,
        base,
        dir: run.dir.as_mut(),
        progress: &run.progress,
        log: Vec::new(),
    };
    let mut result = crate::results::SearchResult {
        name: format!("search {}", p.name),
        profile: p.name.clone(),
        frame: p.frame,
        flow_mode: p.flow_mode,
        direction: trials.base.direction,
        line_rate_pps: lr_pps,
        mlr: None,
        rfc2544: None,
        frame_loss: None,
    };
    let mut lines = Vec::new();
    let pct = |pps: f64| pps / lr_pps * 100.0;
    if matches!(plan.method, Method::Mlr | Method::Both) {
        let cfg = search::MlrConfig {
            goals: plan.goals.clone(),
            ..search::MlrConfig::new(min, max)
        };
        let r = search::mlr_search(&mut trials, &cfg).map_err(|e| anyhow!("{e}"))?;
        for g in &r.goals {
            let v = g.conditional_throughput_pps.or(g.relevant_lower_bound_pps);
            lines.push(format!(
                "{} {}: {} ({} trials, {:.1} s)",
                p.name,
                g.goal.name,
                v.map(|v| format!("{v:.0} pps, {:.2} % of line rate", pct(v)))
                    .unwrap_or_else(|| "not found".into()),
                g.trials_used,
                g.time_spent_s
            ));
        }
        result.mlr = Some(r);
    }
    if matches!(plan.method, Method::Rfc2544 | Method::Both) {
        let mut cfg = search::Rfc2544Config::new(min, max);
        cfg.trial_duration_s = plan.rfc_trial_s;
        cfg.acceptable_loss_ratio = plan.rfc_acceptable_loss;
        cfg.resolution = search::rfc2544::Resolution::Relative(plan.rfc_resolution);
        if !plan.rfc_waits {
            cfg.waits = search::TrialWaits::NONE;
        }
        let r = search::rfc2544_throughput(&mut UdpTrialsWait(&mut trials), &cfg)
            .map_err(|e| anyhow!("{e}"))?;
        lines.push(format!(
            "{} RFC 2544 throughput: {}{} ({} trials, {:.1} s)",
            p.name,
            r.throughput_pps
                .map(|v| format!("{v:.0} pps, {:.2} % of line rate", pct(v)))
                .unwrap_or_else(|| "none found".into()),
            if r.rfc2544_compliant {
                ""
            } else {
                " [not RFC 2544 compliant: see compliance_notes]"
            },
            r.trials.len(),
            r.time_spent_s
        ));
        if plan.frame_loss {
            let mut fl = search::FrameLossConfig::new(max);
            fl.trial_duration_s = plan.rfc_trial_s;
            if !plan.rfc_waits {
                fl.waits = search::TrialWaits::NONE;
            }
            result.frame_loss = Some(
                search::frame_loss_rate(&mut UdpTrialsWait(&mut trials), &fl)
                    .map_err(|e| anyhow!("{e}"))?,
            );
        }
        result.rfc2544 = Some(r);
    }
    drop(trials);
    run.results.searches.push(result);
    run.save();
    Ok(lines)
}

pub fn search_cmd(a: &SearchArgs) -> i32 {
    let (p, plan) = match (|| -> Result<(Profile, SearchPlan)> {
        let p = a.profile.resolve(a.target.lab)?;
        let plan = a.plan()?;
        Ok((p, plan))
    })() {
        Ok(v) => v,
        Err(e) => return usage(e),
    };
    let name = a.common.name.clone().unwrap_or_else(|| "search".into());
    let mut run = match crate::run::Run::start(&a.common, &name, true) {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    let err = (|| -> Result<()> {
        let log_dir = run.dir.as_ref().map(|d| d.path.join("agents"));
        let mut bench = Bench::open(&a.target, &a.common, log_dir.as_deref())?;
        let lab_idx = bench.topology.take().map(|t| {
            run.results.labs.push(t);
            run.results.labs.len() - 1
        });
        let profiles: Vec<Profile> = if a.sizes.is_empty() {
            vec![p.clone()]
        } else {
            a.sizes
                .iter()
                .map(|&frame| Profile {
                    name: format!("{} {:?}", frame_name(frame), p.flow_mode).to_lowercase(),
                    frame,
                    flow_mode: p.flow_mode,
                })
                .collect()
        };
        let ipv6 = bench.ipv6;
        for prof in &profiles {
            if interrupted() {
                break;
            }
            let lines = run_search(
                bench.ends(lab_idx),
                prof,
                &a.profile,
                &plan,
                ipv6,
                &a.common,
                &mut run,
            )?;
            for l in lines {
                eprintln!("{l}");
            }
        }
        bench.fleet.shutdown();
        Ok(())
    })()
    .err();
    run.finish(err)
}

/// The seed write-ups' summary: profile × direction → where the ramp
/// saturated and the NDR/PDR rates, in pps, L1 bit/s and % of line rate.
pub fn summary_table(r: &crate::results::RunResults) -> Option<String> {
    if r.ramps.is_empty() && r.searches.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = r.ramps.iter().map(|x| x.profile.as_str()).collect();
    for s in &r.searches {
        if !names.contains(&s.profile.as_str()) {
            names.push(&s.profile);
        }
    }
    let header = [
        "Profile",
        "Dir",
        "Ramp saturation",
        "NDR pps",
        "NDR L1 Gbit/s",
        "NDR % line",
        "PDR pps",
        "PDR % line",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for name in names {
        let ramp = r.ramps.iter().find(|x| x.profile == name);
        let srch = r.searches.iter().find(|x| x.profile == name);
        let frame = ramp
            .map(|x| x.frame)
            .or(srch.map(|x| x.frame))
            .unwrap_or(FrameSpec::Fixed(64));
        let l1 = |pps: f64| crate::units::l1_bps(pps, udp::average_frame(frame));
        // A goal's rate, and whether it is only a lower bound (the tester's
        // limit or the search's maximum), which the table marks with ">=".
        let goal = |g: &str| -> Option<(f64, bool)> {
            let mlr = srch
                .and_then(|s| s.mlr.as_ref())
                .and_then(|m| m.goals.iter().find(|x| x.goal.name == g));
            if let Some(x) = mlr {
                let bound_only = matches!(
                    x.irregular,
                    Some(search::mlr::Irregular::TesterLimitIsLowerBound)
                        | Some(search::mlr::Irregular::MaxLoadIsLowerBound)
                );
                return x
                    .conditional_throughput_pps
                    .or(x.relevant_lower_bound_pps)
                    .map(|v| (v, bound_only));
            }
            if g != "ndr" {
                return None;
            }
            let r = srch.and_then(|s| s.rfc2544.as_ref())?;
            let bound_only = !matches!(r.end, search::rfc2544::ThroughputEnd::Found);
            r.throughput_pps.map(|v| (v, bound_only))
        };
        let dirs: Vec<String> = ramp
            .map(|x| x.directions.iter().map(|d| d.direction.clone()).collect())
            .unwrap_or_else(|| vec!["-".into()]);
        for d in dirs {
            let sat = ramp
                .and_then(|x| x.directions.iter().find(|y| y.direction == d))
                .map(|y| match &y.summary.saturation {
                    Some(s) => format!(
                        "{:.0} pps ({:.2} %)",
                        s.offered_pps, s.offered_line_rate_pct
                    ),
                    None if y.summary.tester_limited_samples > 0 => "none (tester limit)".into(),
                    None => "none".into(),
                })
                .unwrap_or_else(|| "-".into());
            let lr = ramp
                .map(|x| x.line_rate_pps)
                .or(srch.map(|x| x.line_rate_pps))
                .unwrap_or(1.0);
            let cell = |v: Option<(f64, bool)>, f: &dyn Fn(f64) -> String| {
                v.map(|(x, bound)| format!("{}{}", if bound { ">=" } else { "" }, f(x)))
                    .unwrap_or_else(|| "-".into())
            };
            rows.push(vec![
                name.to_string(),
                d.replace("_to_", "→"),
                sat,
                cell(goal("ndr"), &|v| format!("{v:.0}")),
                cell(goal("ndr"), &|v| format!("{:.3}", l1(v) / 1e9)),
                cell(goal("ndr"), &|v| format!("{:.2}", v / lr * 100.0)),
                cell(goal("pdr"), &|v| format!("{v:.0}")),
                cell(goal("pdr"), &|v| format!("{:.2}", v / lr * 100.0)),
            ]);
        }
    }
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let fmt = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = w[i].saturating_sub(c.chars().count());
                if i < 3 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = String::from(
        "\nPer profile (ramp: first sample of the final lossy run above 0.1 % loss; NDR 0 %, PDR 0.5 % loss;\n\
         >= marks a lower bound: the tester's limit or the highest rate tried, not the DUT's):\n",
    );
    out.push_str(&fmt(header.iter().map(|s| s.to_string()).collect()));
    out.push('\n');
    out.push_str(&fmt(w.iter().map(|n| "-".repeat(*n)).collect()));
    out.push('\n');
    for row in rows {
        out.push_str(&fmt(row));
        out.push('\n');
    }
    Some(out)
}
