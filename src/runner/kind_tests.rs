//! The one interface of the test kinds ([`super::kind`]) through the
//! scripted fleet: the driver gives a kind's result its name and
//! parameters, runs its body, and turns a failed phase or a job's error
//! into a failed result; each kind keeps its own answers (watched or not,
//! total loss failed or not).

use super::harness::{FakeFleet, Fault};
use super::harness_tests::{run, tcp_test, udp_test};
use super::kind::{drive, TestKind};
use super::setup::{Ends, OnProgress};
use super::{HttpServerSide, HttpTest, LatencyTest, Load, ProbeOpts};
use crate::proto::http::{Content, Trust};
use crate::proto::{Direction, Request};
use crate::results::{Protocol, RunDir, TestParams, TestResult, TestStatus};
use crate::runner::error::{err, Result};
use std::time::Duration;

const SINK: usize = 1;

fn http_test() -> HttpTest {
    HttpTest {
        name: "http".into(),
        row: None,
        ipv6: false,
        server: Some(HttpServerSide {
            content: Content::Size(1_000_000),
            cold: false,
            request_timeout: Duration::from_secs(5),
            congestion: Some("cubic".into()),
        }),
        url: None,
        path: "/".into(),
        tls: false,
        trust: Trust::Insecure,
        ktls: false,
        connections: 4,
        duration: Duration::from_secs(2),
        requests: None,
        rate_per_s: None,
        http2: false,
        allow: vec![],
        dscp: None,
        request: Default::default(),
        ramp: vec![],
        interval: Duration::from_secs(1),
    }
}

fn json(p: &TestParams) -> serde_json::Value {
    serde_json::to_value(p).unwrap_or_default()
}

#[test]
fn tcp_through_the_driver_records_its_params_and_directions() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let t = tcp_test(10);
    let (r, updates) = run(&mut f, |e, p| super::run(e, &t, None, p));
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    assert_eq!(r.name, "tcp");
    let p = &r.params;
    assert_eq!(p.protocol, Protocol::Tcp);
    assert_eq!((p.ip_version, p.direction), (4, Direction::Forward));
    assert_eq!((p.duration_s, p.streams), (10.0, Some(1)));
    assert_eq!((p.frame, p.flows, p.lab), (None, None, None));
    assert_eq!(r.directions.len(), 1);
    let d = &r.directions[0];
    assert_eq!(d.direction, "gen_to_sink");
    assert_eq!((d.rx_l2_bps, d.retransmits), (1e9, Some(30)));
    assert_eq!(updates, 20 + 1);
    // The kernel counters of both agents were recorded, then the checks.
    assert!(!r.cross_checks.is_empty());
}

#[test]
fn udp_through_the_driver_records_its_params_and_loss() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let t = udp_test(10);
    let (r, _) = run(&mut f, |e, p| super::run(e, &t, None, p));
    assert_eq!(r.status, TestStatus::Ok, "{:?}", r.error);
    let p = &r.params;
    assert_eq!(p.protocol, Protocol::Udp);
    assert_eq!(
        (p.flows, p.rate_pps, p.streams),
        (Some(1), Some(1000.0), None)
    );
    assert_eq!(p.average_frame_bytes, Some(64.0));
    let d = &r.directions[0];
    assert_eq!((d.tx_packets, d.rx_packets, d.lost), (10_000, 9_900, 100));
}

#[test]
fn a_job_error_through_the_driver_is_a_failed_result_with_its_params() {
    let mut f = FakeFleet::new(&["gen", "sink"]).fault(Fault::JobError {
        agent: SINK,
        at: Duration::from_millis(1500),
        message: "accept: too many open files".into(),
    });
    let t = tcp_test(10);
    let (r, _) = run(&mut f, |e, p| super::run(e, &t, None, p));
    assert_eq!(r.status, TestStatus::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some("the sink agent: accept: too many open files")
    );
    assert!(r.directions.is_empty());
    assert_eq!(json(&r.params), json(&params_of(&t)));
}

/// The parameters `t` gives between a gen and a sink outside a lab.
fn params_of(t: &dyn TestKind) -> TestParams {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let addr = crate::topology::Addressing::default();
    let ends = Ends::new(&mut f, (0, SINK, None), (addr.clone(), addr), None);
    t.params(&ends)
}

#[test]
fn http_whose_server_gives_no_port_fails_and_its_server_is_stopped() {
    // The scripted agents give an HTTP server no port: the sequence's
    // first phase fails, and the job it started is stopped on the way out.
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let t = http_test();
    let (r, updates) = run(&mut f, |e, p| super::run(e, &t, None, p));
    assert_eq!(r.status, TestStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("the HTTP server reported no port"));
    assert_eq!(updates, 0);
    let p = &r.params;
    assert_eq!(
        (p.protocol, p.direction),
        (Protocol::Http, Direction::Reverse)
    );
    assert_eq!(
        (p.streams, p.congestion.as_deref()),
        (Some(4), Some("cubic"))
    );
    let stopped = f
        .sent()
        .into_iter()
        .filter(|(a, r)| *a == SINK && matches!(r, Request::Stop { .. }));
    assert_eq!(stopped.count(), 1);
}

/// A kind whose body fails after writing part of its result.
struct Broken;

impl TestKind for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn params(&self, ends: &Ends) -> TestParams {
        super::TcpTest::params(&tcp_test(1), ends)
    }
    fn interval(&self) -> Option<Duration> {
        None
    }
    fn body(
        &self,
        _: &mut Ends,
        _: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()> {
        on_progress(&Default::default());
        result.cross_checks.clear();
        Err(err!("the body gave up"))
    }
}

#[test]
fn the_driver_fails_a_body_that_errs_and_keeps_what_it_wrote() {
    let mut f = FakeFleet::new(&["gen", "sink"]);
    let (r, updates) = run(&mut f, |e, p| super::run(e, &Broken, None, p));
    assert_eq!((r.name.as_str(), r.status), ("broken", TestStatus::Failed));
    assert_eq!(r.error.as_deref(), Some("the body gave up"));
    assert_eq!(r.params.protocol, Protocol::Tcp);
    assert_eq!(updates, 1);
    // `run` is `drive` for a kind that does not override it.
    let (d, _) = run(&mut f, |e, p| drive(&Broken, e, None, p));
    assert_eq!(d.error, r.error);
}

#[test]
fn each_kind_keeps_its_watch_and_total_loss_answers() {
    let (tcp, udp, http) = (tcp_test(3), udp_test(3), http_test());
    assert_eq!(tcp.interval(), Some(Duration::from_secs(1)));
    assert_eq!(udp.interval(), Some(Duration::from_secs(1)));
    assert_eq!(http.interval(), None);
    assert!(udp.fails_on_total_loss());
    assert!(!tcp.fails_on_total_loss() && !http.fails_on_total_loss());
    // Latency is its load's test with probes around it: the load's name,
    // parameters and interval lines, but total loss under load is a
    // measurement, as before.
    let mut load = udp_test(3);
    load.interval = Duration::from_millis(500);
    let lat = LatencyTest {
        load: Load::Udp(load.clone()),
        probes: ProbeOpts::default(),
    };
    assert_eq!(lat.name(), "udp");
    assert_eq!(lat.interval(), Some(Duration::from_millis(500)));
    assert!(!lat.fails_on_total_loss());
    assert_eq!(json(&params_of(&lat)), json(&params_of(&load)));
}
