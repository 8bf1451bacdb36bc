//! HTTP download tests: a server job on the sink (unless the test names a
//! server linerate did not start), a client job with N connections on the
//! generator, and the result: goodput, requests, latency, TLS/kTLS per
//! side, CPU split, and what bound the run.

use super::jobs::{collect, collect_stopped, Collected, Jobs, LiveSum};
use super::kind::TestKind;
use super::record::{self, delta_ns};
use super::sequence::{run_phases, Phases, Snapshots};
use super::setup::{unspecified, Ends, OnProgress, Progress, Side, INTERVAL_MS};
use super::slices::{sample_ms, LineStyle, Part, Slicer};
use crate::proto::http::Content;
use crate::proto::http::HttpSummary;
use crate::proto::http::Trust;
use crate::proto::http::{HttpGetJob, HttpServeJob};
use crate::proto::{Cidr, Direction, EndpointSummary, Job};
use crate::results::{
    pair_intervals, CrossCheck, DirectionResult, HttpResult, Protocol, RunDir, TestParams,
    TestResult,
};
use crate::runner::error::{err, fail, Result};
use std::net::SocketAddr;
use std::time::Duration;

/// The server side of a test linerate runs itself.
#[derive(Debug, Clone)]
pub struct HttpServerSide {
    pub content: Content,
    pub cold: bool,
    pub request_timeout: Duration,
    /// TCP congestion control of the server's sockets (`--cc`).
    pub congestion: Option<String>,
}

/// A server linerate did not start (`--url`).
#[derive(Debug, Clone)]
pub struct HttpUrl {
    pub url: String,
    pub target: SocketAddr,
    pub host: String,
    pub path: String,
}

#[derive(Debug, Clone)]
pub struct HttpTest {
    pub name: String,
    /// The matrix row (`T1.1` …), when the test is one.
    pub row: Option<String>,
    pub ipv6: bool,
    /// `Some`: linerate starts this server on the sink.
    pub server: Option<HttpServerSide>,
    /// `Some`: the client downloads from here instead.
    pub url: Option<HttpUrl>,
    /// What the client asks for on linerate's own server.
    pub path: String,
    pub tls: bool,
    pub trust: Trust,
    pub ktls: bool,
    pub connections: u16,
    pub duration: Duration,
    pub requests: Option<u64>,
    /// Requests per second in all (`--rate`), latency then measured from
    /// each request's intended send time.
    pub rate_per_s: Option<f64>,
    /// HTTP/2 (ALPN h2, or h2c with prior knowledge) instead of HTTP/1.1.
    pub http2: bool,
    pub allow: Vec<Cidr>,
    /// The DSCP of the client's and (linerate's) server's packets (`--dscp`).
    pub dscp: Option<crate::proto::Dscp>,
    /// Method, extra headers and body of every request.
    pub request: crate::proto::http::HttpRequest,
    /// `--ramp-connections`: the stages (`connections` is their peak,
    /// `duration` their sum).
    pub ramp: Vec<crate::proto::http::RampStage>,
    /// The interval lines' width (`-i`).
    pub interval: Duration,
}

impl TestKind for HttpTest {
    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self, ends: &Ends) -> TestParams {
        let duration_s = self.duration.as_secs_f64();
        TestParams {
            streams: Some(self.connections),
            congestion: self.server.as_ref().and_then(|s| s.congestion.clone()),
            lab: ends.lab,
            dscp: self.dscp,
            ..TestParams::new(Protocol::Http, self.ipv6, Direction::Reverse, duration_s)
        }
    }

    /// `--abort-on-fail` does not watch an HTTP test while it runs.
    fn interval(&self) -> Option<Duration> {
        None
    }

    fn body(
        &self,
        ends: &mut Ends,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()> {
        let gen = ends
            .gens
            .first()
            .map(|g| g.agent)
            .ok_or_else(|| err!("an HTTP test needs a client"))?;
        let ids = Ids {
            server: super::setup::next_id(),
            client: super::setup::next_id(),
        };
        let phases = HttpPhases {
            t: self,
            gen,
            sink: ends.sink.clone(),
            observers: ends.observers.clone(),
            ids,
        };
        run_phases(&phases, ends, dir, on_progress, result)
    }
}

/// An HTTP test's phases in the shared sequence: linerate's server on the
/// sink (unless the test names a URL), then the client's downloads.
struct HttpPhases<'t> {
    t: &'t HttpTest,
    gen: usize,
    sink: Side,
    observers: Vec<usize>,
    ids: Ids,
}

impl Phases for HttpPhases<'_> {
    type Opened = Target;
    type Ran = ();

    fn open(&self, jobs: &mut Jobs) -> Result<(Target, Vec<usize>)> {
        let (server, mut agents) = open_server(&self.sink, self.t, jobs, self.ids.server)?;
        agents.insert(0, self.gen);
        agents.extend(self.observers.iter().copied());
        Ok((server, agents))
    }

    fn start_and_collect(
        &self,
        jobs: &mut Jobs,
        server: &Target,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
    ) -> Result<(Collected, (), bool)> {
        let ends = (self.gen, self.sink.agent);
        let (col, done) = download(jobs, self.t, ends, server, self.ids, dir, on_progress)?;
        Ok((col, (), done))
    }

    fn record(
        &self,
        ends: &Ends,
        (server, ()): (&Target, ()),
        col: &mut Collected,
        counters: (&Snapshots, &Snapshots),
        result: &mut TestResult,
    ) -> Result<()> {
        let pair = (self.gen, self.sink.agent);
        record_download(ends, self.t, pair, server, self.ids, col, counters, result)
    }
}

/// The job ids of one HTTP test.
#[derive(Clone, Copy)]
struct Ids {
    server: u32,
    client: u32,
}

/// Where the client downloads from: linerate's own server (started here)
/// or a URL the user gave.
struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    url: String,
    /// The server is ours: stopped with the test, its figures recorded.
    ours: bool,
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Starts linerate's server on the sink unless the test names a URL;
/// returns the target and the agents whose counters the test reads.
fn open_server(
    side: &Side,
    t: &HttpTest,
    jobs: &mut Jobs,
    server_id: u32,
) -> Result<(Target, Vec<usize>)> {
    let sink = side.agent;
    match (&t.url, &t.server) {
        (Some(u), _) => Ok((
            Target {
                addr: u.target,
                host: u.host.clone(),
                path: u.path.clone(),
                url: u.url.clone(),
                ours: false,
            },
            vec![],
        )),
        (None, Some(s)) => {
            let ip = side.addr.main(t.ipv6).ok_or_else(|| {
                err!(
                    "the server side has no IPv{} address",
                    if t.ipv6 { 6 } else { 4 }
                )
            })?;
            let port = jobs
                .start(
                    sink,
                    server_id,
                    Job::HttpServe(HttpServeJob {
                        bind: SocketAddr::new(unspecified(t.ipv6), 0),
                        content: s.content.clone(),
                        tls: t.tls,
                        ktls: t.ktls,
                        cold: s.cold,
                        duration_ms: ms(t.duration),
                        interval_ms: INTERVAL_MS.min(sample_ms(t.interval)),
                        request_timeout_ms: ms(s.request_timeout),
                        congestion: s.congestion.clone(),
                        dscp: t.dscp,
                    }),
                    None,
                )?
                .ok_or_else(|| err!("the HTTP server reported no port"))?;
            let scheme = if t.tls { "https" } else { "http" };
            let host = match ip {
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                v4 => v4.to_string(),
            };
            Ok((
                Target {
                    addr: SocketAddr::new(ip, port),
                    host: ip.to_string(),
                    path: t.path.clone(),
                    url: format!("{scheme}://{host}:{port}{}", t.path),
                    ours: true,
                },
                vec![sink],
            ))
        }
        (None, None) => fail!("an HTTP test needs a server or a URL"),
    }
}

/// The client's job: `t`'s downloads from `server`.
fn get_job(t: &HttpTest, server: &Target) -> HttpGetJob {
    HttpGetJob {
        target: server.addr,
        host: server.host.clone(),
        path: server.path.clone(),
        tls: t.tls.then(|| t.trust.clone()),
        ktls: t.ktls,
        connections: t.connections.max(1),
        duration_ms: ms(t.duration),
        requests: t.requests,
        rate_per_s: t.rate_per_s,
        http2: t.http2,
        dscp: t.dscp,
        interval_ms: sample_ms(t.interval),
        allow: t.allow.clone(),
        request: t.request.clone(),
        ramp: t.ramp.clone(),
    }
}

/// A client sample's part of the interval lines: the bytes and responses
/// it received and the connections open in it.
fn client_part(label: &str, s: &crate::proto::IntervalSample) -> Part {
    Part {
        direction: label.to_string(),
        sender: false,
        bytes: s.rx_bytes,
        requests: s.requests,
        // Open in the sample: at its end, or moving bytes in it (the
        // last sample's closed at the test's end).
        connections: s.connections.max(s.streams.len() as u32),
        ..Default::default()
    }
}

/// How long the client may run: its duration, or up to an hour for a
/// test of N requests (it ends when they are done).
fn longest_run(t: &HttpTest) -> Duration {
    if t.requests.is_some() {
        Duration::from_secs(3600)
    } else {
        t.duration
    }
}

/// Runs the client for the test's time (or its request count), reporting
/// progress, then stops both sides and gathers their summaries. `done` is
/// false when the run was cut short.
fn download(
    jobs: &mut Jobs,
    t: &HttpTest,
    (gen, sink): (usize, usize),
    server: &Target,
    ids: Ids,
    dir: &mut Option<&mut RunDir>,
    on_progress: OnProgress,
) -> Result<(Collected, bool)> {
    let t0 = jobs.fleet.now();
    jobs.start(gen, ids.client, Job::HttpGet(get_job(t, server)), None)?;
    let mut col = Collected::new(dir.as_deref().map(|d| d.path.as_path()));
    let dur = t.duration.as_secs_f64();
    let mut live = LiveSum::default();
    let cap = longest_run(t);
    let label = "sink_to_gen".to_string();
    // Lines on the client's clock: goodput, responses and the connections
    // open in each slice (a test of N requests ends when they are done).
    let mut slicer = Slicer::new(
        t.interval.as_secs_f64(),
        cap.as_secs_f64(),
        0.0,
        &[ids.client],
        std::slice::from_ref(&label),
    )
    .styled(LineStyle::Http);
    let mut last = Progress {
        test: t.name.clone(),
        duration_s: dur,
        sliced: true,
        ..Default::default()
    };
    let client_id = ids.client;
    let mut ended_s = 0.0f64;
    let done = collect(
        jobs.fleet,
        &mut col,
        &[client_id],
        t0 + cap + Duration::from_secs(20),
        |id, s, now| {
            if let Some(d) = dir.as_deref_mut() {
                d.log_interval(&t.name, if id == client_id { "gen" } else { "sink" }, s);
            }
            if id == client_id {
                live.update(id, s, s.rx_bytes, 0);
                (_, last.rx_bps, _) = live.sum(&[client_id]);
                last.connections = Some(s.connections);
                last.requests_per_s = s.requests as f64 / (s.t_end - s.t_start).max(1e-3);
                last.elapsed_s = now.saturating_duration_since(t0).as_secs_f64().min(dur);
                ended_s = ended_s.max(s.t_end);
                last.slices = slicer.add(id, s.t_start, s.t_end, &[client_part(&label, s)]);
                on_progress(&last);
            }
        },
    )?;
    if !done {
        jobs.stop(gen, ids.client, vec![]);
    }
    let wait = if server.ours {
        jobs.stop(sink, ids.server, vec![]);
        vec![ids.client, ids.server]
    } else {
        vec![ids.client]
    };
    let by = jobs.fleet.now() + Duration::from_secs(5);
    let _ = collect_stopped(jobs.fleet, &mut col, &wait, by, |_, _, _| {});
    if t.requests.is_some() || !done {
        slicer.end_at(ended_s);
    }
    last.slices = slicer.finish();
    if !last.slices.is_empty() {
        on_progress(&last);
    }
    Ok((col, done))
}

/// The client's run as a leg of the test: the leg CPU is measured over.
fn client_leg(ends: &Ends, t: &HttpTest, gen: usize, client: u32) -> super::setup::Leg {
    super::setup::Leg {
        name: t.name.clone(),
        tx_agent: gen,
        rx_agent: gen,
        tx_id: client,
        rx_id: client,
        from: ends.gens[0].addr.clone(),
        to: ends.sink.addr.clone(),
        instance: None,
        gen_agent: gen,
    }
}

/// The test's HTTP figures from the client's (and linerate's server's)
/// summary over `elapsed` seconds; without them (no download completed),
/// zero rates and no verdict.
fn download_result(
    t: &HttpTest,
    url: String,
    chttp: HttpSummary,
    shttp: Option<HttpSummary>,
    elapsed: Option<f64>,
) -> HttpResult {
    let Some(elapsed) = elapsed else {
        return HttpResult {
            row: t.row.clone(),
            url,
            tls: t.tls,
            connections: t.connections,
            goodput_bps: 0.0,
            requests_per_s: 0.0,
            client: chttp,
            server: shttp,
            bound: None,
            bound_reason: None,
            retransmit_note: None,
        };
    };
    let (bound, why) = bound(t, &chttp, shttp.as_ref());
    let retransmit_note = retransmit_note(shttp.as_ref().unwrap_or(&chttp));
    HttpResult {
        row: t.row.clone(),
        url,
        tls: t.tls,
        connections: t.connections,
        goodput_bps: chttp.body_bytes as f64 * 8.0 / elapsed,
        requests_per_s: chttp.requests as f64 / elapsed,
        client: chttp,
        server: shttp,
        bound,
        bound_reason: why,
        retransmit_note,
    }
}

/// Turns the two sides' summaries into the test's direction, checks, CPU
/// figures and HTTP result.
#[allow(clippy::too_many_arguments)]
fn record_download(
    ends: &Ends,
    t: &HttpTest,
    (gen, sink): (usize, usize),
    server: &Target,
    ids: Ids,
    col: &mut Collected,
    (before, after): (&Snapshots, &Snapshots),
    result: &mut TestResult,
) -> Result<()> {
    let ours = server.ours;
    let url = server.url.clone();
    let client = col.summary(ids.client);
    let server_summary = ours.then(|| col.summary(ids.server));
    let chttp = client
        .http
        .as_deref()
        .cloned()
        .ok_or_else(|| err!("the HTTP client reported no figures"))?;
    if chttp.requests == 0 && chttp.body_bytes == 0 {
        let why = chttp
            .connections
            .iter()
            .find_map(|c| c.error.clone())
            .unwrap_or_else(|| "no response".into());
        // The failed requests by kind stay in the results.
        result.http = Some(download_result(t, url, chttp, None, None));
        fail!("no download completed: {why}");
    }
    let shttp = server_summary
        .as_ref()
        .and_then(|s| s.http.as_deref().cloned());
    let client_iv = col.intervals.take(ids.client);
    let server_iv = col.intervals.take(ids.server);
    let elapsed = chttp.elapsed_s.max(1e-6);
    let goodput = chttp.body_bytes as f64 * 8.0 / elapsed;
    let retransmits = shttp
        .as_ref()
        .unwrap_or(&chttp)
        .connections
        .iter()
        .map(|c| c.retransmits)
        .sum();
    let d = DirectionResult {
        direction: format!("{}_to_{}", ends.role(sink), ends.role(gen)),
        sender: if ours { ends.role(sink) } else { url.clone() },
        receiver: ends.role(gen),
        duration_s: chttp.elapsed_s,
        rx_l2_bps: goodput,
        retransmits: Some(retransmits),
        intervals: pair_intervals(server_iv, client_iv),
        sender_summary: server_summary.clone().unwrap_or_default(),
        receiver_summary: EndpointSummary {
            streams: vec![],
            ..client.clone()
        },
        dscp_note: t.dscp.map(|_| crate::results::TCP_DSCP_NOTE.into()),
        ..Default::default()
    };
    result.directions.push(d);
    checks(
        ends,
        t,
        gen,
        sink,
        &chttp,
        shttp.as_ref(),
        (before, after),
        result,
    );
    // CPU over the client's run: the client is this test's timing leg.
    let timing = vec![client_leg(ends, t, gen, ids.client)];
    record::cpu(ends, before, after, col, &timing, result);
    result.http = Some(download_result(t, url, chttp, shttp, Some(elapsed)));
    Ok(())
}

/// Body bytes sent vs received; bytes read from the socket (heads and TLS
/// framing included) vs the client namespace's kernel rx_bytes, when the
/// client has its namespace to itself (not over loopback).
#[allow(clippy::too_many_arguments)]
fn checks(
    ends: &Ends,
    t: &HttpTest,
    gen: usize,
    sink: usize,
    c: &HttpSummary,
    s: Option<&HttpSummary>,
    (before, after): (&Snapshots, &Snapshots),
    result: &mut TestResult,
) {
    if let Some(s) = s {
        result.cross_checks.push(CrossCheck::new(
            format!(
                "{}: HTTP body bytes sent by {} vs received",
                ends.role(gen),
                ends.role(sink)
            ),
            s.body_bytes,
            c.body_bytes,
        ));
    }
    let shared = ends.fleet.agent(gen).netns_key == ends.fleet.agent(sink).netns_key;
    let lo = t.url.as_ref().is_some_and(|u| u.target.ip().is_loopback());
    if shared || lo {
        return;
    }
    let rx = delta_ns(before, after, gen);
    let retr: u64 = s
        .map(|s| s.connections.iter().map(|c| c.retransmits).sum())
        .unwrap_or(0);
    let header: u64 = if t.ipv6 { 14 + 40 + 32 } else { 14 + 20 + 32 };
    let mss: u64 = if t.ipv6 { 1428 } else { 1448 };
    let application = c.wire_bytes + c.unread_at_close_bytes + rx.rx_packets * header;
    let role = ends.role(gen);
    result.cross_checks.push(if s.is_some() {
        CrossCheck::new(
            format!(
                "{role}: HTTP bytes read from the sockets + left unread at close + headers + \
                 the server's retransmitted segments vs kernel rx_bytes"
            ),
            application + retr * mss,
            rx.rx_bytes,
        )
    } else {
        // A server that is not a linerate agent (nginx, a URL) does not
        // say what it retransmitted, and on a reordering path (veth on
        // few cores) it retransmits spuriously: the kernel then counts
        // more than was read, by an amount unknown here.
        CrossCheck::kernel_at_least(
            format!(
                "{role}: HTTP bytes read from the sockets + left unread at close + headers vs \
                 kernel rx_bytes (the server's retransmits are unknown: only a kernel count \
                 below the sockets' is flagged)"
            ),
            application,
            rx.rx_bytes,
        )
    });
}

/// What limited the run: a side's CPU, the disk (cold cache and the data
/// came from storage), or else the network.
fn bound(
    t: &HttpTest,
    c: &HttpSummary,
    s: Option<&HttpSummary>,
) -> (Option<String>, Option<String>) {
    // A side is CPU-bound when its threads (one per connection) keep 85 %
    // of the CPUs they can use busy; figures in % of all the host's CPUs.
    let busy = |h: &HttpSummary| {
        let cpus = f64::from(h.cpu.cpus.max(1));
        f64::from(t.connections.max(1)).min(cpus) / cpus * 85.0
    };
    let pct = |h: &HttpSummary| h.cpu.user_pct + h.cpu.system_pct;
    let cold = s.and_then(|s| s.cache.as_ref()).filter(|c| c.cold);
    if let Some(cache) = cold {
        if cache.storage_read_bytes * 2 >= c.body_bytes.max(1) {
            return (
                Some("disk".into()),
                Some(format!(
                    "cold cache: the server read {} bytes from storage ({:.2} Gbit/s) for {} body bytes",
                    cache.storage_read_bytes,
                    cache.storage_read_bps / 1e9,
                    c.body_bytes
                )),
            );
        }
    }
    for (side, h) in [("client", Some(c)), ("server", s)] {
        if let Some(h) = h {
            if pct(h) >= busy(h) {
                return (
                    Some("cpu".into()),
                    Some(format!(
                        "the {side} used {:.0} % of the host's {} CPUs ({:.0} % user, {:.0} % system) \
                         with {} connection(s)",
                        pct(h),
                        h.cpu.cpus,
                        h.cpu.user_pct,
                        h.cpu.system_pct,
                        t.connections
                    )),
                );
            }
        }
    }
    let why = match cold {
        Some(cache) => format!(
            "neither side's CPU was full and only {} of {} body bytes came from storage \
             (the rest from the page cache)",
            cache.storage_read_bytes, c.body_bytes
        ),
        None => "neither side's CPU was full and the data came from memory".into(),
    };
    (Some("network".into()), Some(why))
}

/// Retransmits above this on one HTTP test get a note with their cause.
const RETRANSMITS_NOTED: u64 = 10;

/// Why the sender retransmitted, when it did more than a handful of times:
/// how many of its retransmits the receiver reported as duplicates (D-SACK:
/// the segment had arrived, the resend was not needed), and whether the
/// sender saw its segments arrive out of order, which makes SACK recovery
/// resend segments that were only late.
fn retransmit_note(sender: &HttpSummary) -> Option<String> {
    let sum = |f: fn(&crate::proto::http::HttpConnection) -> u64| -> u64 {
        sender.connections.iter().map(f).sum()
    };
    let retr = sum(|c| c.retransmits);
    if retr <= RETRANSMITS_NOTED {
        return None;
    }
    let dup = sum(|c| c.spurious_retransmits).min(retr);
    let reord = sum(|c| c.reorder_events);
    let mut note = format!(
        "{retr} retransmits (TCP_INFO total_retrans of the sender); the receiver reported {dup} \
         of them as duplicates (D-SACK: the segment had arrived, the resend was not needed)"
    );
    if reord > 0 {
        note.push_str(&format!(
            "; the sender saw its segments arrive out of order {reord} times, and SACK recovery \
             resends segments that are only late: on a veth path with no interface drops this \
             is data leaving from two cores (the sending thread's and the one that handles \
             the ACKs), each with its own backlog queue"
        ));
    }
    let rest = retr - dup;
    if rest > 0 {
        note.push_str(&format!(
            "; {rest} were not reported as duplicates: lost on the way (compare the interfaces' \
             drop counters in results.json) or resends the receiver merged with the late \
             original before it could D-SACK them"
        ));
    }
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::http::HttpConnection;

    fn sender(conns: &[(u64, u64, u64)]) -> HttpSummary {
        HttpSummary {
            connections: conns
                .iter()
                .map(
                    |&(retransmits, spurious_retransmits, reorder_events)| HttpConnection {
                        retransmits,
                        spurious_retransmits,
                        reorder_events,
                        ..Default::default()
                    },
                )
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_handful_of_retransmits_gets_no_note() {
        assert_eq!(retransmit_note(&sender(&[(6, 0, 0), (4, 0, 0)])), None);
    }

    #[test]
    fn reordering_and_duplicates_are_named_with_their_counts() {
        let n = retransmit_note(&sender(&[(300, 250, 40), (100, 50, 2)])).unwrap();
        assert!(n.starts_with("400 retransmits"), "{n}");
        assert!(n.contains("reported 300 of them as duplicates"), "{n}");
        assert!(n.contains("out of order 42 times"), "{n}");
        assert!(n.contains("100 were not reported as duplicates"), "{n}");
    }

    #[test]
    fn loss_without_reordering_points_at_drop_counters() {
        let n = retransmit_note(&sender(&[(50, 0, 0)])).unwrap();
        assert!(!n.contains("out of order"), "{n}");
        assert!(n.contains("50 were not reported as duplicates"), "{n}");
        // More D-SACKs than retransmits (a kernel counting both ways) never
        // gives a negative remainder.
        let n = retransmit_note(&sender(&[(20, 30, 1)])).unwrap();
        assert!(
            n.contains("reported 20 of them") && !n.contains("were not"),
            "{n}"
        );
    }
}
