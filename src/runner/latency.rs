//! Latency under load: a probe session (responder on the sink, client on
//! the generator) around an ordinary TCP or UDP test, in rrul's shape: an
//! idle phase, the loaded phase (the test itself), an idle phase after.
//! The controller cuts the client's samples into the phases on the
//! client's clock and computes the statistics ([`crate::latency::stats`]).

use super::kind::TestKind;
use super::setup::{finish_test, Ends, OnProgress, TcpTest, UdpTest};
use crate::latency::responder;
use crate::latency::stats::{self, LatencyResult, OneWayClock, PhaseSpan, ResponderCounts};
use crate::model::error::{Context, Step};
use crate::model::signals::{aborted, interrupted, stop_requested};
use crate::proto::probe::{self, ProbeSample};
use crate::proto::{Cidr, EndpointSummary, Job, Request, Response};
use crate::results::{CrossCheck, RunDir, TestParams, TestResult, TestStatus};
use crate::runner::error::{err, fail, Result};
use crate::sys::realtime_ns;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// How probes run beside a test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeOpts {
    pub interval: Duration,
    /// UDP payload bytes per probe.
    pub payload: u16,
    /// Length of the idle phase before and of the one after the load.
    pub idle: Duration,
    /// The responder's rate cap for the session, probes per second.
    pub max_pps: u32,
    /// The client's address as the responder sees it, when a NAT between
    /// them rewrites it (the lab's NAT DUT); else the generator's address.
    pub client_seen_as: Option<(IpAddr, IpAddr)>,
}

impl Default for ProbeOpts {
    fn default() -> Self {
        ProbeOpts {
            interval: Duration::from_millis(10),
            payload: probe::DEFAULT_PAYLOAD,
            idle: Duration::from_secs(3),
            max_pps: responder::DEFAULT_MAX_PPS,
            client_seen_as: None,
        }
    }
}

impl ProbeOpts {
    /// The rate cap a session needs: twice the probe rate, at least the default.
    pub fn session_cap(&self) -> u32 {
        let pps = 1.0 / self.interval.as_secs_f64().max(1e-3);
        self.max_pps.max((pps * 2.0).ceil() as u32)
    }
}

/// The load of the loaded phase. (HTTP joins here once its engine exists.)
#[derive(Debug, Clone)]
pub enum Load {
    Tcp(TcpTest),
    Udp(UdpTest),
}

impl Load {
    pub fn kind(&self) -> &'static str {
        match self {
            Load::Tcp(_) => "tcp",
            Load::Udp(_) => "udp",
        }
    }
    fn ipv6(&self) -> bool {
        match self {
            Load::Tcp(t) => t.ipv6,
            Load::Udp(t) => t.ipv6,
        }
    }
    fn duration(&self) -> Duration {
        match self {
            Load::Tcp(t) => t.duration,
            Load::Udp(t) => t.duration,
        }
    }
    fn allow(&self) -> &[Cidr] {
        match self {
            Load::Tcp(t) => &t.allow,
            Load::Udp(t) => &t.allow,
        }
    }
    pub fn name(&self) -> &str {
        match self {
            Load::Tcp(t) => &t.name,
            Load::Udp(t) => &t.name,
        }
    }
    /// The load as a test kind.
    pub fn kind_of(&self) -> &dyn TestKind {
        match self {
            Load::Tcp(t) => t,
            Load::Udp(t) => t,
        }
    }
    /// The load's DSCP: the probes carry it too.
    fn dscp(&self) -> Option<crate::proto::Dscp> {
        match self {
            Load::Tcp(t) => t.dscp,
            Load::Udp(t) => t.dscp,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LatencyTest {
    pub load: Load,
    pub probes: ProbeOpts,
}

/// A running probe session.
struct Session {
    client_agent: usize,
    client_id: u32,
    resp_agent: usize,
    resp_id: u32,
    target: SocketAddr,
}

/// A latency test's result is its load's, with the probes' phases around
/// it: name, parameters, interval lines and body are the load's, and
/// [`TestKind::run`] wraps the load's run in the probe session.
impl TestKind for LatencyTest {
    fn name(&self) -> &str {
        self.load.kind_of().name()
    }

    fn params(&self, ends: &Ends) -> TestParams {
        self.load.kind_of().params(ends)
    }

    fn interval(&self) -> Option<Duration> {
        self.load.kind_of().interval()
    }

    fn body(
        &self,
        ends: &mut Ends,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()> {
        self.load.kind_of().body(ends, dir, on_progress, result)
    }

    fn run(
        &self,
        ends: &mut Ends,
        dir: Option<&mut RunDir>,
        on_progress: OnProgress,
    ) -> TestResult {
        run_latency(ends, self, dir, on_progress)
    }
}

/// Runs the test with probes around and through it.
fn run_latency(
    ends: &mut Ends,
    t: &LatencyTest,
    dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> TestResult {
    let session = open(ends, t);
    let t_start = realtime_ns();
    if session.is_ok() {
        pause(t.probes.idle);
    }
    let load_before = realtime_ns();
    let mut result = super::kind::drive(t, ends, dir, on_progress);
    let load_after = realtime_ns();
    let outcome = session.and_then(|s| {
        pause(t.probes.idle);
        let spans = load_span(ends, &result).unwrap_or((load_before, load_after));
        let l = finish(
            ends,
            t,
            &s,
            t_start,
            spans,
            realtime_ns(),
            result.counters_span_ns,
        )?;
        Ok((l, s))
    });
    match outcome {
        Ok(((l, own), s)) => {
            result.latency = Some(l);
            // The load's cross-checks read the interface counters the
            // probes crossed too: add them where they were sent and
            // received, so that a quiet lab agrees.
            if let Some(own) = own {
                let key = |a: usize| ends.fleet.agent(a).netns_key.clone();
                let (client, resp) = (key(s.client_agent), key(s.resp_agent));
                account_probes(&mut result.cross_checks, &client, &resp, &own);
            }
        }
        Err(e) => {
            let failed = finish_test(result, |_| Err(Step::new("latency probes", e).into()));
            result = failed;
        }
    }
    if result.status == TestStatus::Ok && interrupted() {
        result.status = TestStatus::Interrupted;
    } else if result.status == TestStatus::Ok && aborted() {
        result.status = TestStatus::Aborted;
    }
    result
}

fn pause(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end && !stop_requested() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn loopback(v6: bool) -> IpAddr {
    if v6 {
        Ipv6Addr::LOCALHOST.into()
    } else {
        Ipv4Addr::LOCALHOST.into()
    }
}

/// Opens the responder's session on the sink, then starts the client.
fn open(ends: &mut Ends, t: &LatencyTest) -> Result<Session> {
    let v6 = t.load.ipv6();
    let gen = ends
        .gens
        .first()
        .cloned()
        .ok_or_else(|| err!("a latency test needs a generator"))?;
    let target_ip = ends.sink.addr.main(v6).ok_or_else(|| {
        err!(
            "the server side has no IPv{} address",
            if v6 { 6 } else { 4 }
        )
    })?;
    let seen = t
        .probes
        .client_seen_as
        .map(|(a4, a6)| if v6 { a6 } else { a4 });
    let client_ip = match seen.or(gen.addr.main(v6)) {
        Some(a) => a,
        None if target_ip.is_loopback() => loopback(v6),
        None => fail!(
            "the latency responder answers only the client's address, and the client endpoint \
             could not tell its source address towards the server (see the warning above): \
             add --client-address ADDR"
        ),
    };
    let token = crate::latency::new_token().context("drawing a session token")?;
    let total = t.probes.idle * 2 + t.load.duration() + Duration::from_secs(60);
    let resp_id = super::setup::next_id();
    let client_id = super::setup::next_id();
    let sink = ends.sink.agent;
    let port = start(
        ends,
        sink,
        resp_id,
        Job::LatencyRespond {
            bind: super::setup::unspecified(v6),
            token,
            client: client_ip,
            duration_ms: (total + Duration::from_secs(10)).as_millis() as u64,
            max_pps: t.probes.session_cap(),
            dscp: t.load.dscp(),
        },
    )?
    .ok_or_else(|| err!("the latency responder reported no port"))?;
    let target = SocketAddr::new(target_ip, port);
    let started = start(
        ends,
        gen.agent,
        client_id,
        Job::LatencyProbe {
            target,
            token,
            interval_us: t.probes.interval.as_micros() as u64,
            payload: t.probes.payload,
            duration_ms: total.as_millis() as u64,
            allow: t.load.allow().to_vec(),
            dscp: t.load.dscp(),
        },
    );
    if let Err(e) = started {
        stop(ends, sink, resp_id);
        return Err(e);
    }
    Ok(Session {
        client_agent: gen.agent,
        client_id,
        resp_agent: sink,
        resp_id,
        target,
    })
}

fn start(ends: &mut Ends, agent: usize, test: u32, job: Job) -> Result<Option<u16>> {
    let req = Request::Start {
        test,
        job,
        start_at_unix_ns: None,
    };
    match ends.fleet.call(agent, &req, Duration::from_secs(15))? {
        Response::Started { port, .. } => Ok(port),
        Response::Error { message, .. } => fail!("{message}"),
        other => fail!("unexpected answer to start: {other:?}"),
    }
}

fn stop(ends: &mut Ends, agent: usize, test: u32) {
    let _ = ends.fleet.send(
        agent,
        &Request::Stop {
            test,
            sender_totals: vec![],
        },
    );
}

/// When the load ran, controller-clock ns: from its senders' own start
/// times and run lengths, mapped through their clocks.
fn load_span(ends: &Ends, r: &TestResult) -> Option<(u64, u64)> {
    let mut span: Option<(u64, u64)> = None;
    for d in &r.directions {
        let s = &d.sender_summary;
        if s.started_unix_ns == 0 {
            continue;
        }
        let agent = ends.fleet.agents().iter().find(|a| a.role == d.sender)?;
        let start = agent.clock.to_controller_ns(s.started_unix_ns).max(0) as u64;
        let end = start + (s.elapsed_s.max(0.0) * 1e9) as u64;
        span = Some(match span {
            None => (start, end),
            Some((a, b)) => (a.min(start), b.max(end)),
        });
    }
    span
}

/// How the client's and the responder's clocks compare: one clock when
/// both are on this host (or the same remote one), else the offset and
/// error of their syncs with the controller.
fn one_way_clock(
    ca: &crate::topology::fleet::Agent,
    ra: &crate::topology::fleet::Agent,
) -> OneWayClock {
    let same_clock =
        !ca.host.starts_with("ssh://") && !ra.host.starts_with("ssh://") || ca.host == ra.host;
    if same_clock {
        OneWayClock {
            same_clock: true,
            offset_s: 0.0,
            error_s: 0.0,
        }
    } else {
        OneWayClock {
            same_clock: false,
            offset_s: ra.clock.offset_s - ca.clock.offset_s,
            error_s: (ra.clock.rtt_s + ca.clock.rtt_s) / 2.0,
        }
    }
}

/// The idle, loaded and after phases from the test's start, the load's
/// start and end and the test's end on the client's clock; idle starts no
/// earlier than the first probe (`first`).
fn phase_spans(first: u64, [t_start, load_start, load_end, t_end]: [u64; 4]) -> [PhaseSpan; 3] {
    [
        ("idle", first.max(t_start), load_start),
        ("loaded", load_start, load_end),
        ("after", load_end, t_end),
    ]
    .map(|(name, start_ns, end_ns)| PhaseSpan {
        name: name.into(),
        start_ns,
        end_ns,
    })
}

/// The probe traffic within the load's counter window `(a, b)` (the
/// controller's clock), each end's on its own clock.
fn own_probes(
    samples: &[ProbeSample],
    ca: &crate::topology::fleet::Agent,
    ra: &crate::topology::fleet::Agent,
    (a, b): (u64, u64),
) -> ProbeTraffic {
    let client = |ns: u64| ca.clock.to_agent_ns(ns);
    let resp = |ns: u64| ra.clock.to_agent_ns(ns);
    probes_within(samples, (client(a), client(b)), (resp(a), resp(b)))
}

/// Stops the session, gathers the samples and computes the phases.
fn finish(
    ends: &mut Ends,
    t: &LatencyTest,
    s: &Session,
    t_start: u64,
    (load_start, load_end): (u64, u64),
    t_end: u64,
    counters: Option<(u64, u64)>,
) -> Result<(LatencyResult, Option<ProbeTraffic>)> {
    stop(ends, s.client_agent, s.client_id);
    let mut samples: Vec<ProbeSample> = Vec::new();
    let mut client: Option<EndpointSummary> = None;
    let mut resp: Option<EndpointSummary> = None;
    let deadline = ends.fleet.now() + client_grace();
    let mut resp_stopped = false;
    while client.is_none() || resp.is_none() {
        if ends.fleet.now() > deadline {
            stop(ends, s.resp_agent, s.resp_id);
            fail!("the latency client or responder did not report in time");
        }
        // The responder stays up until the client's late replies are in.
        if client.is_some() && !resp_stopped {
            stop(ends, s.resp_agent, s.resp_id);
            resp_stopped = true;
        }
        let Some((_, ev)) = ends.fleet.next_event(Duration::from_millis(100))? else {
            continue;
        };
        match ev {
            Response::LatencyProbes { test, probes } if test == s.client_id => {
                samples.extend(probes)
            }
            Response::Finished { test, summary } if test == s.client_id => client = Some(summary),
            Response::Finished { test, summary } if test == s.resp_id => resp = Some(summary),
            Response::Error {
                test: Some(test),
                message,
            } if test == s.client_id || test == s.resp_id => {
                stop(ends, s.resp_agent, s.resp_id);
                fail!("{message}");
            }
            _ => {}
        }
    }
    samples.sort_by_key(|p| p.seq());
    let resp = resp.unwrap_or_default();
    let ca = ends.fleet.agent(s.client_agent);
    let ra = ends.fleet.agent(s.resp_agent);
    let clock = one_way_clock(ca, ra);
    let to_client = |ns: u64| ca.clock.to_agent_ns(ns);
    let first = samples.first().map(|p| p.client_tx()).unwrap_or(0);
    let phases = phase_spans(first, [t_start, load_start, load_end, t_end].map(to_client));
    let (phases, series) = stats::analyze(&stats::Inputs {
        samples: &samples,
        offset_ns: (clock.offset_s * 1e9).round() as i64,
        phases: &phases,
        final_count: u32::try_from(resp.rx_packets).ok(),
    });
    let (added, added99) = stats::added_latency(&phases);
    let own = counters.map(|window| own_probes(&samples, ca, ra, window));
    let l = LatencyResult {
        target: s.target.to_string(),
        interval_s: t.probes.interval.as_secs_f64(),
        payload_bytes: t.probes.payload,
        load: t.load.kind().into(),
        clock,
        phases,
        added_latency_s: added,
        added_latency_p99_s: added99,
        series,
        responder: ResponderCounts {
            accepted: resp.rx_packets,
            replied: resp.tx_packets,
            refused: resp.foreign,
            rate_capped: resp.tx_errors,
        },
    };
    Ok((l, own))
}

/// Probe packets each end sent and received within a span (the client's
/// and the responder's clock): linerate's own packets on the interfaces a
/// load's cross-checks read. A reply lost on its way back is not seen at
/// the responder (its times never reach the client); that is loss, which
/// the probes' statistics report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ProbeTraffic {
    client_tx: u64,
    client_rx: u64,
    resp_rx: u64,
    resp_tx: u64,
}

fn probes_within(samples: &[ProbeSample], client: (u64, u64), resp: (u64, u64)) -> ProbeTraffic {
    let within = |ns: u64, (a, b): (u64, u64)| ns != 0 && (a..=b).contains(&ns);
    let mut t = ProbeTraffic::default();
    for p in samples {
        t.client_tx += u64::from(within(p.1, client));
        if within(p.2, client) {
            t.client_rx += 1 + u64::from(p.duplicates());
        }
        t.resp_rx += u64::from(within(p.3, resp));
        t.resp_tx += u64::from(within(p.4, resp));
    }
    t
}

/// Adds the probes to the cross-checks of the namespaces they crossed
/// (client and responder may share one); a check still disagrees by what
/// the probes do not explain.
fn account_probes(
    checks: &mut [CrossCheck],
    client: &(String, u64),
    resp: &(String, u64),
    own: &ProbeTraffic,
) {
    for c in checks.iter_mut() {
        let Some(scope) = c.scope.clone() else {
            continue;
        };
        let mut n = 0;
        if &scope.netns == client {
            n += if scope.tx {
                own.client_tx
            } else {
                own.client_rx
            };
        }
        if &scope.netns == resp {
            n += if scope.tx { own.resp_tx } else { own.resp_rx };
        }
        let what = if scope.tx {
            "latency probe packets sent"
        } else {
            "latency probe packets received"
        };
        c.add_own(n, what);
    }
}

fn client_grace() -> Duration {
    crate::latency::client::GRACE + Duration::from_secs(15)
}

#[cfg(test)]
mod tests;
