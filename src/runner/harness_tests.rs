//! The runner's logic through the scripted fleet (`harness.rs`): what a
//! clean run records, the order of samples, what is stopped, and how an
//! agent lost, a failed job, a missing or slow final report end a test.

use super::harness::{FakeFleet, Fault};
use super::setup::{Ends, Progress, TcpTest, UdpTest};
use crate::proto::{Direction, FrameSpec, Request};
use crate::results::{FlowMode, TestResult, TestStatus};
use crate::topology::Addressing;
use std::time::{Duration, Instant};

const GEN: usize = 0;
const SINK: usize = 1;

pub(crate) fn udp_test(secs: u64) -> UdpTest {
    UdpTest {
        name: "udp".into(),
        ipv6: false,
        frame: FrameSpec::Fixed(64),
        flow_mode: FlowMode::One,
        flows: 1,
        direction: Direction::Forward,
        duration: Duration::from_secs(secs),
        rate_pps: Some(1000.0),
        rate_profile: None,
        batch: 64,
        cpus: vec![],
        allow: vec![],
        tx_engine: Default::default(),
        rx_engine: Default::default(),
        port: 0,
        threads: 0,
        interval: Duration::from_secs(1),
        omit: Duration::ZERO,
        window: None,
        dscp: None,
        max_frames: None,
        vlan: None,
    }
}

pub(crate) fn tcp_test(secs: u64) -> TcpTest {
    TcpTest {
        name: "tcp".into(),
        ipv6: false,
        streams: 1,
        direction: Direction::Forward,
        duration: Duration::from_secs(secs),
        cpus: vec![],
        congestion: None,
        buffer_len: 128 * 1024,
        allow: vec![],
        port: 0,
        rate_bps: None,
        interval: Duration::from_secs(1),
        omit: Duration::ZERO,
        window: None,
        dscp: None,
        vlan: None,
    }
}

/// The gen → sink pair of the fake fleet, as a command's ends.
pub(crate) fn ends(fleet: &mut FakeFleet) -> Ends<'_> {
    let addr = |ip: &str| Addressing::single(Some(ip.parse().unwrap()));
    Ends::new(
        fleet,
        (GEN, SINK, None),
        (addr("198.18.0.1"), addr("198.18.0.2")),
        None,
    )
}

/// Runs `body` on a gen → sink pair of the fake fleet; returns the result
/// and how many progress updates it made.
pub(crate) fn run(
    fleet: &mut FakeFleet,
    body: impl FnOnce(&mut Ends, &mut dyn FnMut(&Progress)) -> TestResult,
) -> (TestResult, usize) {
    let mut ends = ends(fleet);
    let mut updates = 0;
    let wall = Instant::now();
    let r = body(&mut ends, &mut |_| updates += 1);
    assert!(
        wall.elapsed() < Duration::from_secs(5),
        "the virtual clock slept: {:?}",
        wall.elapsed()
    );
    (r, updates)
}

fn udp(fleet: &mut FakeFleet, secs: u64) -> (TestResult, usize) {
    run(fleet, |e, p| super::run(e, &udp_test(secs), None, p))
}

fn tcp(fleet: &mut FakeFleet, secs: u64) -> (TestResult, usize) {
    run(fleet, |e, p| super::run(e, &tcp_test(secs), None, p))
}

/// The Stop requests sent: (agent, job, the senders' totals handed on).
fn stops(fleet: &FakeFleet) -> Vec<(usize, u32, u64)> {
    fleet
        .sent()
        .into_iter()
        .filter_map(|(a, r)| match r {
            Request::Stop {
                test,
                sender_totals,
            } => Some((a, test, sender_totals.iter().map(|f| f.tx_packets).sum())),
            _ => None,
        })
        .collect()
}

/// The job ids started, per agent, in order.
fn started(fleet: &FakeFleet, agent: usize) -> Vec<u32> {
    let jobs = fleet.sent().into_iter().filter(|(a, _)| *a == agent);
    jobs.filter_map(|(_, r)| match r {
        Request::Start { test, .. } => Some(test),
        _ => None,
    })
    .collect()
}

/// Where each interval's sender sample ends, as paired.
fn sample_ends(d: &crate::results::DirectionResult) -> Vec<f64> {
    let tx = d.intervals.iter().filter_map(|i| i.sender.as_ref());
    tx.map(|s| s.t_end).collect()
}

fn secs(fleet: &FakeFleet) -> f64 {
    fleet.elapsed().as_secs_f64()
}

#[test]
fn udp_clean_run_records_the_agents_counts() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let (r, updates) = udp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    assert_eq!(r.directions.len(), 1);
    let d = &r.directions[0];
    assert_eq!(d.direction, "gen_to_sink");
    assert_eq!((d.tx_packets, d.rx_packets, d.lost), (10_000, 9_900, 100));
    assert_eq!(d.duration_s, 10.0);
    assert_eq!((d.tx_pps, d.rx_pps), (1000.0, 990.0));
    assert!((d.loss_ratio - 0.01).abs() < 1e-12, "{}", d.loss_ratio);
    // One sample a second from each end, in order.
    assert_eq!(sample_ends(d), (1..=10).map(f64::from).collect::<Vec<_>>());
    let rx = d.intervals.iter().filter_map(|i| i.receiver.as_ref());
    assert!(rx.map(|s| s.rx_packets).eq([990; 10]));
    assert_eq!(
        updates,
        20 + 1,
        "a progress update per sample, and the last lines"
    );
    // The sender ended by itself; the receiver is stopped with its totals.
    let rx = started(&f, SINK);
    assert_eq!(stops(&f), vec![(SINK, rx[0], 10_000)]);
    // 10 s of test, 200 ms for the last datagrams, the stop's answer.
    assert!((10.2..10.3).contains(&secs(&f)), "{}", secs(&f));
}

#[test]
fn udp_agent_lost_mid_run_fails_naming_it_and_stops_the_rest() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::Lost {
        agent: SINK,
        at: Duration::from_millis(4500),
    });
    let (r, updates) = udp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Failed);
    let e = r.error.unwrap_or_default();
    assert_eq!(e, "the sink agent was lost: its control channel closed");
    // What came before the loss reached the caller: 4 s from each end.
    assert_eq!(updates, 8);
    // It ends at the loss, and the sender still running is stopped.
    assert_eq!(secs(&f), 4.5);
    assert_eq!(stops(&f), vec![(GEN, started(&f, GEN)[0], 0)]);
}

#[test]
fn udp_job_error_fails_the_test_with_the_agents_words() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::JobError {
        agent: GEN,
        at: Duration::from_millis(3500),
        message: "sendmmsg: Network is unreachable".into(),
    });
    let (r, _) = udp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some("the gen agent: sendmmsg: Network is unreachable")
    );
    assert!(r.directions.is_empty());
    // The receiver is still stopped (with no totals: the sender failed).
    assert_eq!(stops(&f), vec![(SINK, started(&f, SINK)[0], 0)]);
    assert!((3.7..3.8).contains(&secs(&f)), "{}", secs(&f));
}

#[test]
fn udp_receiver_that_never_reports_fails_within_its_timeout() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::NoFinal { agent: SINK });
    let (r, _) = udp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some(
            "the sink receiver did not report its counts within 5 s of Stop; this test has no \
             loss figure"
        )
    );
    // 10 s, 200 ms, then the 5 s the stop is given (and one 100 ms wait).
    assert!((15.2..15.35).contains(&secs(&f)), "{}", secs(&f));
}

#[test]
fn udp_slow_stop_within_its_timeout_still_records() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::SlowStop {
        agent: SINK,
        delay: Duration::from_secs(3),
    });
    let (r, _) = udp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    assert_eq!(r.directions[0].rx_packets, 9_900);
    assert!((13.2..13.3).contains(&secs(&f)), "{}", secs(&f));
}

#[test]
fn udp_sender_that_never_ends_is_stopped_and_its_samples_kept() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::NoFinal { agent: GEN });
    let (r, _) = udp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Failed);
    let e = r.error.unwrap_or_default();
    assert!(e.contains("did not report their end in time"), "{e}");
    // Partial, not zero: the sender's figures are its samples' sum.
    let d = &r.directions[0];
    assert_eq!((d.tx_packets, d.rx_packets), (10_000, 9_900));
    // Without its final report the sender's per-flow totals are unknown:
    // the receiver is stopped without them.
    let (tx, rx) = (started(&f, GEN)[0], started(&f, SINK)[0]);
    assert_eq!(stops(&f), vec![(GEN, tx, 0), (SINK, rx, 0)]);
    // The 15 s grace past the end, 5 s for the stopped sender, 200 ms,
    // and 5 s more for the receivers' stop, which waits for it too.
    assert!((35.3..35.5).contains(&secs(&f)), "{}", secs(&f));
}

#[test]
fn tcp_clean_run_records_goodput_and_retransmits() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let (r, updates) = tcp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    assert_eq!(r.directions.len(), 1);
    let d = &r.directions[0];
    assert_eq!((d.sender.as_str(), d.receiver.as_str()), ("gen", "sink"));
    assert_eq!(d.rx_l2_bps, 1e9);
    assert_eq!(d.retransmits, Some(30));
    assert_eq!(d.sender_summary.tx_bytes, 1_250_000_000);
    assert_eq!(d.receiver_summary.rx_bytes, 1_250_000_000);
    assert_eq!(sample_ends(d), (1..=10).map(f64::from).collect::<Vec<_>>());
    assert_eq!(updates, 20 + 1);
    // Both ends ended by themselves: nothing to stop.
    assert_eq!(stops(&f), vec![]);
    assert_eq!(secs(&f), 10.0);
}

#[test]
fn tcp_agent_lost_mid_run_stops_the_other_end() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::Lost {
        agent: GEN,
        at: Duration::from_millis(2500),
    });
    let (r, updates) = tcp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some("the gen agent was lost: its control channel closed")
    );
    assert_eq!(updates, 4);
    assert_eq!(stops(&f), vec![(SINK, started(&f, SINK)[0], 0)]);
}

#[test]
fn tcp_server_error_fails_the_test() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::JobError {
        agent: SINK,
        at: Duration::from_millis(1500),
        message: "accept: too many open files".into(),
    });
    let (r, _) = tcp(&mut f, 10);
    assert_eq!(r.status, TestStatus::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some("the sink agent: accept: too many open files")
    );
    assert!(r.directions.is_empty());
}

/// Runs `t` (with `omit`) and returns its result and the interval lines
/// it made, as (from, to, omitted).
fn with_omit(
    fleet: &mut FakeFleet,
    t: &dyn super::TestKind,
) -> (TestResult, Vec<(f64, f64, bool)>) {
    let mut lines = Vec::new();
    let mut e = ends(fleet);
    let r = super::run(&mut e, t, None, &mut |p: &Progress| {
        lines.extend(p.slices.iter().map(|s| (s.from_s, s.to_s, s.omitted)));
    });
    (r, lines)
}

#[test]
fn udp_omit_shows_the_first_second_and_leaves_it_out_of_the_totals() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let t = UdpTest {
        omit: Duration::from_secs(1),
        ..udp_test(2)
    };
    let (r, lines) = with_omit(&mut f, &t);
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    // As iperf3 -O: the omitted second comes before the 2 counted ones.
    let want = [(0.0, 1.0, true), (1.0, 2.0, false), (2.0, 3.0, false)];
    assert_eq!(lines, want);
    let d = &r.directions[0];
    let omitted: Vec<bool> = d.intervals.iter().map(|i| i.omitted).collect();
    assert_eq!(omitted, vec![true, false, false]);
    // The totals count the 2 s after it; the agents' summaries all 3.
    assert_eq!((d.tx_packets, d.rx_packets, d.lost), (2_000, 1_980, 20));
    assert_eq!(d.duration_s, 2.0);
    assert_eq!(d.sender_summary.tx_packets, 3_000);
    assert_eq!(r.params.omit_s, 1.0);
}

#[test]
fn tcp_omit_leaves_the_first_second_out_of_the_goodput() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let t = TcpTest {
        omit: Duration::from_secs(1),
        ..tcp_test(3)
    };
    let (r, lines) = with_omit(&mut f, &t);
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    let want = [
        (0.0, 1.0, true),
        (1.0, 2.0, false),
        (2.0, 3.0, false),
        (3.0, 4.0, false),
    ];
    assert_eq!(lines, want);
    let d = &r.directions[0];
    assert!(d.intervals[0].omitted && !d.intervals[1].omitted);
    assert_eq!(d.duration_s, 3.0);
    // The goodput covers the 3 counted seconds; the summary all 4.
    assert_eq!(d.rx_l2_bps, 1e9);
    assert_eq!(d.receiver_summary.rx_bytes, 500_000_000);
    assert_eq!(d.retransmits, Some(9));
}
