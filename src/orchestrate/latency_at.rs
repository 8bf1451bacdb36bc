//! `search --latency-at`: after a profile's search, one trial per load
//! point at a share of the throughput it found (RFC 2544 §26.2 at 100 %),
//! each recorded as a test, and the one-way latency of every frame its
//! receivers counted, per direction, from an HDR histogram.
//!
//! The frames carry their TX timestamp; the XDP sink counts each frame's
//! (arrival − stamp) in hdrhistogram's own layout (`model::hdr`, filled
//! in `sink.bpf.c`), which merges here into a histogram without loss.
//! One-way latency needs one clock: [`check_clock`] refuses a
//! configuration whose generator and sink are on different hosts before
//! anything runs.

use crate::lab::cores;
use crate::model::hdr::{self, OwdSummary};
use crate::model::signals::stop_requested;
use crate::orchestrate::config::{Command, PlanConfig, TestSpec};
use crate::orchestrate::run::Run;
use crate::results::latency_at::{LatencyAt, LatencyPoint, LatencyPointDirection};
use crate::results::{SearchResult, TestResult, TestStatus};
use crate::runner::{Ends, UdpTest};
use crate::topology::Endpoint;
use std::time::Duration;

/// What `clock` says when both ends read this host's CLOCK_MONOTONIC.
pub const SAME_HOST: &str = "same host";

/// `--latency-at` across hosts: one-way latency needs one clock.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error(
    "--latency-at measures one-way latency, which needs the generator's and the sink's \
     clocks to be one: {what} are on different hosts ({a} and {b}), and linerate does not \
     estimate the offset between two hosts' clocks. Run the search with --lab, or with both \
     ends on one host (local or ns: endpoints), or drop --latency-at"
)]
pub struct TwoClocks {
    pub what: String,
    pub a: String,
    pub b: String,
}

/// Why a `--latency-at` value is not a load point.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LoadPctError {
    #[error("'{0}' is not a number: give % of the throughput found, e.g. 10,50,90,100")]
    NotANumber(String),
    #[error(
        "{0} is outside (0, 100]: a load point is a share of the throughput the search \
         found, above 0 and at most 100 (RFC 2544 §26.2 measures at 100)"
    )]
    OutOfRange(String),
}

/// One `--latency-at` value: % of the throughput found, in (0, 100].
pub fn parse_load_pct(s: &str) -> Result<f64, LoadPctError> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| LoadPctError::NotANumber(s.into()))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(LoadPctError::OutOfRange(s.into()));
    }
    Ok(v)
}

/// The host an endpoint runs on, as a name to compare: every local and
/// namespace endpoint shares this host's clock.
fn host_of(e: &Endpoint) -> String {
    match e {
        Endpoint::Local | Endpoint::Netns(_) => "this host".into(),
        Endpoint::Ssh(t) => format!("ssh://{}", t.host),
    }
}

fn wants_latency(spec: &TestSpec) -> bool {
    matches!(spec, TestSpec::Search(s) if !s.plan.latency_at.is_empty())
}

fn same_host(what: &str, ends: &[&Endpoint]) -> Result<(), TwoClocks> {
    let Some(first) = ends.first() else {
        return Ok(());
    };
    let a = host_of(first);
    match ends.iter().map(|e| host_of(e)).find(|h| *h != a) {
        Some(b) => Err(TwoClocks {
            what: what.into(),
            a,
            b,
        }),
        None => Ok(()),
    }
}

fn check_plan(p: &PlanConfig) -> Result<(), TwoClocks> {
    for t in p.tests.iter().filter(|t| wants_latency(&t.spec)) {
        if t.lab.is_some() {
            continue;
        }
        if let Some(l) = &p.port_lab {
            if l.gen_host != l.sink_host {
                let (g, s) = (&p.hosts[l.gen_host], &p.hosts[l.sink_host]);
                return Err(TwoClocks {
                    what: format!("test '{}': the port lab's generator and sink", t.name),
                    a: g.name.clone(),
                    b: s.name.clone(),
                });
            }
        }
        let ends: Vec<&Endpoint> = t
            .from
            .iter()
            .chain(std::iter::once(&t.to))
            .filter_map(|&i| p.hosts.get(i).map(|h| &h.endpoint))
            .collect();
        same_host(
            &format!("test '{}': its generators and sink", t.name),
            &ends,
        )?;
    }
    Ok(())
}

/// Refuses `--latency-at` (or a plan's `latency_at`) where the generator
/// and the sink are on different hosts.
pub fn check_clock(cmd: &Command) -> Result<(), TwoClocks> {
    match cmd {
        Command::Pair(p, spec, _) if wants_latency(spec) => {
            same_host("the client and the server", &[&p.client, &p.server])
        }
        Command::Plan(p, _) => check_plan(p),
        Command::Sweep(s, _) => s.points.iter().try_for_each(|(_, c)| check_clock(c)),
        _ => Ok(()),
    }
}

/// The throughput the points are shares of, its name, and the trial
/// length: RFC 2544's throughput when that method ran (§26.2 refers to
/// it), else the lower bound of the first MLRsearch goal that allows no
/// loss (the NDR by default), else of the first goal. Trials are the
/// method's trial length (MLRsearch: the goal's final trials), at least 1 s.
fn basis(r: &SearchResult) -> Option<(String, f64, f64)> {
    if let Some(v) = r
        .rfc2544
        .as_ref()
        .and_then(|x| x.throughput_pps.map(|v| (x, v)))
    {
        return Some((
            "rfc2544 throughput".into(),
            v.1,
            v.0.config.trial_duration_s.max(1.0),
        ));
    }
    let m = r.mlr.as_ref()?;
    let g = m
        .goals
        .iter()
        .find(|g| g.goal.loss_ratio == 0.0)
        .or(m.goals.first())?;
    let v = g.relevant_lower_bound_pps.filter(|v| *v > 0.0)?;
    Some((
        format!("mlr {} lower bound", g.goal.name),
        v,
        g.goal.final_trial_duration_s.max(1.0),
    ))
}

/// One direction of a point's trial: its counts and its latency.
pub fn point_direction(d: &crate::results::DirectionResult) -> LatencyPointDirection {
    let r = &d.receiver_summary;
    let (latency, note) = match hdr::merge(&r.one_way_latency_hdr) {
        Ok(h) => match OwdSummary::of(&h) {
            Some(s) => (Some(s), None),
            None if d.rx_packets == 0 => (None, Some("no frame arrived".into())),
            None => (
                None,
                Some(format!(
                    "the {} receiver does not time frames; use --rx-engine xdp",
                    if r.rx_engine.is_empty() {
                        "socket"
                    } else {
                        &r.rx_engine
                    }
                )),
            ),
        },
        Err(e) => (None, Some(format!("the receiver's latency counts: {e}"))),
    };
    LatencyPointDirection {
        direction: d.direction.clone(),
        tx_packets: d.tx_packets,
        rx_packets: d.rx_packets,
        dut_lost: d.dut_lost,
        loss_ratio: if d.tx_packets > 0 {
            d.dut_lost as f64 / d.tx_packets as f64
        } else {
            0.0
        },
        latency,
        note,
    }
}

fn point(load_pct: f64, rate_pps: f64, test: usize, r: &TestResult) -> LatencyPoint {
    LatencyPoint {
        load_pct,
        rate_pps,
        test,
        directions: r.directions.iter().map(point_direction).collect(),
    }
}

/// Runs a trial of `base` (the search's frames and flows) at each of
/// `loads` % of what the search `result` found, each recorded as a test,
/// and returns what goes into the search's `latency_at` (`None` when no
/// load was asked).
pub fn run_points(
    ends: &mut Ends,
    base: &UdpTest,
    loads: &[f64],
    run: &mut Run,
    result: &SearchResult,
) -> Option<LatencyAt> {
    if loads.is_empty() {
        return None;
    }
    let Some((basis, basis_pps, trial_s)) = basis(result) else {
        return Some(LatencyAt {
            basis: "none".into(),
            basis_pps: 0.0,
            trial_s: 0.0,
            clock: SAME_HOST.into(),
            significant_digits: hdr::SIGFIG,
            points: Vec::new(),
            note: Some(
                "no latency points: the search found no throughput to take shares of".into(),
            ),
        });
    };
    let mut at = LatencyAt {
        basis,
        basis_pps,
        trial_s,
        clock: SAME_HOST.into(),
        significant_digits: hdr::SIGFIG,
        points: Vec::new(),
        note: None,
    };
    for &pct in loads {
        if stop_requested() {
            at.note = Some("interrupted before every point ran".into());
            break;
        }
        let rate = basis_pps * pct / 100.0;
        let t = UdpTest {
            name: format!("{} latency at {pct} %", result.name),
            rate_pps: Some(rate),
            rate_profile: None,
            duration: Duration::from_secs_f64(trial_s),
            ..base.clone()
        };
        let i = run.results.tests.len();
        run.ramp_udp(ends, &t);
        let r = &run.results.tests[i];
        if r.status != TestStatus::Ok && r.directions.is_empty() {
            at.note = Some(format!(
                "the trial at {pct} % failed: {}",
                r.error.clone().unwrap_or_default()
            ));
            continue;
        }
        at.points.push(point(pct, rate, i, r));
    }
    if let Some(n) = polling_note(run, ends.lab) {
        at.note = Some(match at.note.take() {
            Some(first) => format!("{first}; {n}"),
            None => n,
        });
    }
    Some(at)
}

/// What the lab's NAPI polling adds to one-way latency, when the lab laid
/// it out: while frames come closer together than the polling window, a
/// frame waits in a ring for the next timer poll, at the DUT and at the
/// tester's receive, where the sink takes its timestamp.
fn polling_note(run: &Run, lab: Option<usize>) -> Option<String> {
    let laid = run.results.labs.get(lab?)?.cores.as_ref()?;
    let every_us = |(_, every_ns): (u32, u64)| every_ns / 1_000;
    let mut parts = Vec::new();
    if cores::polls(laid, cores::is_dut_role) {
        parts.push(format!("the DUT's every {} µs", every_us(cores::DUT_POLL)));
    }
    if cores::polls(laid, |r| !cores::is_dut_role(r)) {
        parts.push(format!(
            "the tester's receive every {} µs",
            every_us(cores::TESTER_POLL)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "the lab's NAPI threads poll ({}) while frames come less than {} ms apart, so at such \
         loads a frame may wait up to that long in a ring: part of each figure above a \
         point whose frames are further apart",
        parts.join(", "),
        cores::poll_window_ms()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ssh::SshTarget;

    fn ssh(host: &str) -> Endpoint {
        Endpoint::Ssh(SshTarget {
            user: None,
            host: host.into(),
            port: None,
        })
    }

    #[test]
    fn load_points_are_shares_of_the_throughput() {
        assert_eq!(parse_load_pct("10"), Ok(10.0));
        assert_eq!(parse_load_pct("100%"), Ok(100.0));
        assert_eq!(parse_load_pct("0.5"), Ok(0.5));
        for bad in ["0", "150", "-5", "abc", "NaN", ""] {
            assert!(parse_load_pct(bad).is_err(), "{bad}");
        }
        let e = parse_load_pct("150").unwrap_err();
        assert_eq!(e, LoadPctError::OutOfRange("150".into()));
        assert!(e.to_string().contains("outside (0, 100]"));
    }

    #[test]
    fn one_clock_is_one_host() {
        let local = Endpoint::Local;
        let ns = Endpoint::Netns("x".into());
        assert_eq!(same_host("ends", &[&local, &ns]), Ok(()));
        assert_eq!(same_host("ends", &[&ssh("a"), &ssh("a")]), Ok(()));
        let e = same_host("the client and the server", &[&local, &ssh("b")]).unwrap_err();
        assert_eq!((e.a.as_str(), e.b.as_str()), ("this host", "ssh://b"));
        let m = e.to_string();
        assert!(
            m.contains("needs the generator's and the sink's clocks to be one"),
            "{m}"
        );
        assert!(m.contains("--lab"), "{m}");
    }

    #[test]
    fn a_receiver_without_timing_says_why() {
        let d = crate::results::DirectionResult {
            direction: "gen_to_sink".into(),
            tx_packets: 100,
            rx_packets: 98,
            dut_lost: 2,
            ..Default::default()
        };
        let p = point_direction(&d);
        assert_eq!(p.latency, None);
        assert!(p.note.unwrap().contains("--rx-engine xdp"));
        assert!((p.loss_ratio - 0.02).abs() < 1e-12);
        let mut d = d;
        d.receiver_summary.one_way_latency_hdr = vec![(hdr::slot(20_000) as u32, 98)];
        let p = point_direction(&d);
        let s = p.latency.unwrap();
        assert_eq!(s.frames, 98);
        assert_eq!(hdr::slot(s.p99_ns), hdr::slot(20_000));
    }
}
