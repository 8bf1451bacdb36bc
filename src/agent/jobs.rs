//! The jobs a `start` request asks for: each is opened synchronously (so the
//! controller learns its port and any set-up error at once), then run on a
//! named thread of its own that reports `Finished` or `Error` when it ends.
//!
//! One function per job kind opens it; `start` checks the agreed start time,
//! opens, and spawns. The engines' own errors are carried as they are.

use super::Limits;
use crate::agent::error::{err, fail, msg, AgentError, Result};
use crate::engine::{self, tcp, JobCtx};
use crate::host::kernel;
use crate::model::error::chain;
use crate::model::error::Context;
use crate::proto::{self, Dscp, Job, Response};
use crate::{latency, netops, sys};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The longest an agent waits for an agreed start time.
const MAX_START_DELAY: Duration = Duration::from_secs(30);

/// The body of a job's thread.
type JobFn = Box<dyn FnOnce(&JobCtx) -> Result<proto::EndpointSummary> + Send>;

/// A job opened and ready to run.
struct Opened {
    /// The port a listening job took (the controller tells its peer).
    port: Option<u16>,
    /// The thread's name: the bottleneck verdict reads it back from
    /// /proc/self/task to tell whose core is full.
    thread: &'static str,
    run: JobFn,
}

/// How often a job reports its counters, in milliseconds.
pub(super) fn interval_ms(job: &Job) -> u64 {
    match job {
        Job::TcpListen { interval_ms, .. }
        | Job::TcpConnect { interval_ms, .. }
        | Job::UdpReceive { interval_ms, .. }
        | Job::UdpSend { interval_ms, .. } => *interval_ms,
        Job::LatencyRespond { .. } | Job::LatencyProbe { .. } => 1000,
        Job::HttpServe(j) => j.interval_ms,
        Job::HttpGet(j) => j.interval_ms,
        Job::Iperf3Client(_) | Job::Iperf3Server(_) => 1000,
    }
}

/// Opens what a job needs, then runs the job on its own thread; the port it
/// listens on, if any.
pub(super) fn start(
    ctx: &JobCtx,
    job: Job,
    limits: &Limits,
    start_at_unix_ns: Option<u64>,
) -> Result<Option<u16>> {
    check_start_delay(start_at_unix_ns)?;
    let opened = open(ctx, job, limits)?;
    spawn(opened.thread, ctx.clone(), start_at_unix_ns, opened.run)?;
    Ok(opened.port)
}

fn check_start_delay(start_at_unix_ns: Option<u64>) -> Result<()> {
    if let Some(at) = start_at_unix_ns {
        let wait = Duration::from_nanos(at.saturating_sub(sys::realtime_ns()));
        if wait > MAX_START_DELAY {
            fail!(
                "asked to start {wait:?} from now, more than this agent waits ({MAX_START_DELAY:?}); \
                 is this host's clock far off the controller's?"
            );
        }
    }
    Ok(())
}

fn open(ctx: &JobCtx, job: Job, limits: &Limits) -> Result<Opened> {
    match job {
        Job::TcpListen {
            bind,
            port,
            expect_streams,
            duration_ms,
            cpus,
            congestion,
            pacing_bytes_per_s,
            window,
            dscp,
            vlan,
            target,
            ..
        } => {
            let d = capped(duration_ms, limits)?;
            let vlan = match (vlan, target) {
                (Some(v), Some(t)) => {
                    Some(netops::vlan::holder(t).and_then(|dev| netops::vlan::hold(&dev, v))?)
                }
                (Some(v), None) => fail!(
                    "the controller named no target address, so the interface to put VLAN {v} on \
                     is unknown (an older controller): use the same linerate build on both"
                ),
                (None, _) => None,
            };
            tcp_listen(
                SocketAddr::new(bind, port),
                expect_streams,
                d,
                cpus,
                (congestion, pacing_bytes_per_s, window, dscp),
                vlan,
            )
        }
        Job::TcpConnect {
            target,
            streams,
            direction,
            duration_ms,
            cpus,
            congestion,
            buffer_len,
            allow,
            pacing_bytes_per_s,
            window,
            dscp,
            vlan,
            ..
        } => {
            let d = capped(duration_ms, limits)?;
            allowed(target.ip(), &allow)?;
            let vlan = vlan
                .map(|v| {
                    netops::vlan::egress(target.ip()).and_then(|dev| netops::vlan::hold(&dev, v))
                })
                .transpose()?;
            tcp_connect(
                target,
                streams,
                direction,
                d,
                cpus,
                (congestion, pacing_bytes_per_s, window, dscp),
                (buffer_len, vlan),
            )
        }
        Job::UdpReceive {
            bind,
            port,
            flows,
            cpus,
            threads,
            rx_engine,
            target,
            vlan,
            dscp,
            window,
            ..
        } => udp_receive(engine::rx::RxSpec {
            bind,
            port,
            flows,
            cpus,
            threads,
            rx_engine,
            target,
            vlan,
            dscp,
            window,
        }),
        Job::UdpSend {
            flows,
            frame,
            rate,
            duration_ms,
            batch,
            cpus,
            allow,
            tx_engine,
            threads,
            vlan,
            dscp,
            max_frames,
            window,
            ..
        } => {
            let spec = engine::frame::SendSpec {
                window,
                flows,
                frame,
                rate,
                duration: capped(duration_ms, limits)?,
                batch: usize::from(batch),
                cpus,
                allow,
                tx_engine,
                threads,
                vlan,
                dscp,
                max_frames,
            };
            udp_send(spec, limits)
        }
        Job::LatencyRespond {
            bind,
            token,
            client,
            duration_ms,
            max_pps,
            dscp,
        } => {
            let session = latency::responder::Session {
                token,
                client,
                duration: capped(duration_ms, limits)?,
                max_pps: max_pps.clamp(1, latency::responder::MAX_PPS_CEILING),
            };
            latency_respond(bind, session, dscp)
        }
        Job::LatencyProbe {
            target,
            token,
            interval_us,
            payload,
            duration_ms,
            allow,
            dscp,
        } => {
            let duration = capped(duration_ms, limits)?;
            allowed(target.ip(), &allow)?;
            let spec = latency::client::ProbeSpec {
                target,
                token,
                interval: Duration::from_micros(interval_us),
                payload: payload.clamp(
                    crate::proto::probe::HEADER_LEN as u16,
                    crate::proto::probe::MAX_PAYLOAD,
                ),
                duration,
            };
            latency_probe(target, spec, dscp)
        }
        Job::HttpServe(j) => {
            let d = capped(j.duration_ms, limits)?;
            http_serve(ctx, &j, d)
        }
        Job::HttpGet(j) => {
            let d = capped(j.duration_ms, limits)?;
            allowed(j.target.ip(), &j.allow)?;
            http_get(&j, d)
        }
        Job::Iperf3Client(j) => {
            let cfg = crate::iperf3::job::config(&j)?;
            capped(
                ((cfg.params.time_s + cfg.params.omit_s) * 1e3).ceil() as u64,
                limits,
            )?;
            allowed(j.server.ip(), &j.allow)?;
            Ok(Opened {
                port: None,
                thread: "lr-iperf3-client",
                run: Box::new(move |c| crate::iperf3::job::run(c, &cfg).map_err(msg)),
            })
        }
        Job::Iperf3Server(j) => {
            use crate::iperf3::server_job;
            let cfg = server_job::config(&j)?;
            let d = capped(j.duration_ms, limits)?;
            // Listening before the start is answered: the clients the
            // controller starts next find the port open.
            let listener = server_job::open(&cfg)?;
            Ok(Opened {
                port: Some(listener.local_addr()?.port()),
                thread: "lr-iperf3-serve",
                run: Box::new(move |c| server_job::run(c, &cfg, &listener, d).map_err(msg)),
            })
        }
    }
}

/// A TCP stream's congestion control, pacing rate (bytes/s), socket
/// buffers (bytes) and DSCP, as a job carries them.
type StreamTuning = (Option<String>, Option<u64>, Option<u32>, Option<Dscp>);

fn tuning(t: &StreamTuning) -> tcp::Tuning<'_> {
    tcp::Tuning {
        congestion: t.0.as_deref(),
        pacing_bytes_per_s: t.1,
        window: t.2,
        dscp: t.3,
    }
}

/// A TCP job's VLAN sub-interface (held while the job runs) and the
/// device its streams used.
type TcpVlan = (Option<netops::vlan::SubIf>, String);

/// The job's summary naming the VLAN device its streams used; the
/// sub-interface goes back when this returns.
fn with_vlan(
    s: Result<proto::EndpointSummary>,
    vlan: Option<TcpVlan>,
) -> Result<proto::EndpointSummary> {
    let mut s = s?;
    s.vlan_device = vlan.map(|(_held, dev)| dev);
    Ok(s)
}

fn tcp_listen(
    bind: SocketAddr,
    expect_streams: u16,
    d: Duration,
    cpus: Vec<usize>,
    tune: StreamTuning,
    vlan: Option<TcpVlan>,
) -> Result<Opened> {
    let l = tcp::listen(bind.ip(), bind.port()).with_context(|| match bind.port() {
        0 => format!("listening on {}", bind.ip()),
        p => format!("listening on {bind} (--port {p}: is another program using it?)"),
    })?;
    if let Some(d) = tune.3 {
        // Accepted streams inherit it; the SYN-ACK carries it too.
        sys::set_tos(l.as_raw_fd(), d.tos()).context("marking the TCP listener (--dscp)")?;
    }
    let port = l.local_addr()?.port();
    Ok(Opened {
        port: Some(port),
        thread: "lr-tcp-serve",
        run: Box::new(move |c| {
            let s = tcp::serve(c, l, expect_streams, d, &cpus, tuning(&tune));
            with_vlan(s.map_err(msg), vlan)
        }),
    })
}

fn tcp_connect(
    target: SocketAddr,
    streams: u16,
    direction: proto::Direction,
    d: Duration,
    cpus: Vec<usize>,
    tune: StreamTuning,
    (buffer_len, vlan): (u32, Option<TcpVlan>),
) -> Result<Opened> {
    let run: JobFn = Box::new(move |c| {
        let buffer_len = buffer_len as usize;
        let s = tcp::connect(
            c,
            target,
            streams,
            direction,
            d,
            &cpus,
            tuning(&tune),
            buffer_len,
        );
        with_vlan(s.map_err(msg), vlan)
    });
    Ok(Opened {
        port: None,
        thread: "lr-tcp-client",
        run,
    })
}

fn udp_receive(spec: engine::rx::RxSpec) -> Result<Opened> {
    let bind = spec.bind;
    let r = engine::rx::open(spec)
        .map_err(msg)
        .with_context(|| format!("opening the UDP receiver on {bind}"))?;
    Ok(Opened {
        port: Some(r.port()),
        thread: "lr-udp-recv",
        run: Box::new(move |c| r.run(c).map_err(msg)),
    })
}

/// Checks a sender against this agent's limits and the allowed
/// destinations, then opens it.
fn udp_send(spec: engine::frame::SendSpec, limits: &Limits) -> Result<Opened> {
    if let Some(r) = &spec.rate {
        r.validate().map_err(msg)?;
    }
    if let (Some(cap), r) = (limits.max_rate_pps, spec.rate.as_ref().map(|r| r.max_pps())) {
        if r.is_none_or(|r| r > cap) {
            fail!("this agent caps UDP senders at {cap} pps; ask for a rate at or below it");
        }
    }
    let dsts: Vec<IpAddr> = spec.flows.iter().map(|f| f.dst.ip()).collect();
    allowed_all(&dsts, &spec.allow)?;
    let ipv6 = spec.flows.first().is_some_and(|f| f.dst.is_ipv6());
    engine::frame::check_frames(spec.frame, ipv6, spec.vlan).map_err(msg)?;
    let sender = engine::tx::open(spec).map_err(msg)?;
    Ok(Opened {
        port: None,
        thread: "lr-udp-send",
        run: Box::new(move |c| sender.run(c).map_err(msg)),
    })
}

fn latency_respond(
    bind: IpAddr,
    session: latency::responder::Session,
    dscp: Option<Dscp>,
) -> Result<Opened> {
    let sock = latency::responder::bind(bind)
        .with_context(|| format!("binding the latency responder on {bind}"))?;
    mark(&sock, dscp)?;
    let port = sock.local_addr()?.port();
    Ok(Opened {
        port: Some(port),
        thread: "lr-lat-respond",
        run: Box::new(move |c| latency::responder::serve(c, sock, session).map_err(msg)),
    })
}

fn latency_probe(
    target: SocketAddr,
    spec: latency::client::ProbeSpec,
    dscp: Option<Dscp>,
) -> Result<Opened> {
    let sock = latency::client::open(target)
        .with_context(|| format!("opening the latency prober towards {target}"))?;
    mark(&sock, dscp)?;
    Ok(Opened {
        port: None,
        thread: "lr-lat-probe",
        run: Box::new(move |c| latency::client::run(c, sock, spec).map_err(msg)),
    })
}

fn http_serve(ctx: &JobCtx, j: &proto::http::HttpServeJob, d: Duration) -> Result<Opened> {
    let (server, port) = crate::http::job::open_server(ctx, j).map_err(msg)?;
    Ok(Opened {
        port: Some(port),
        thread: "lr-http-server",
        run: Box::new(move |c| Ok(crate::http::job::serve(c, server, d))),
    })
}

fn http_get(j: &proto::http::HttpGetJob, d: Duration) -> Result<Opened> {
    let spec = crate::http::job::get_spec(j, d).map_err(msg)?;
    Ok(Opened {
        port: None,
        thread: "lr-http-client",
        run: Box::new(move |c| crate::http::job::get(c, spec).map_err(msg)),
    })
}

/// Marks a socket's packets with the job's DSCP, if it has one.
fn mark(sock: &impl AsRawFd, dscp: Option<Dscp>) -> Result<()> {
    match dscp {
        Some(d) => sys::set_tos(sock.as_raw_fd(), d.tos())
            .with_context(|| format!("marking the socket's packets with DSCP {d} (--dscp)"))
            .map_err(AgentError::from),
        None => Ok(()),
    }
}

/// The job's duration, refused past this agent's cap.
fn capped(duration_ms: u64, limits: &Limits) -> Result<Duration> {
    let d = Duration::from_millis(duration_ms);
    if d > limits.max_duration {
        fail!(
            "a {:?} test exceeds this agent's cap of {:?}; start the agent with a larger --max-duration",
            d,
            limits.max_duration
        );
    }
    Ok(d)
}

/// The agent checks every destination itself, whatever the controller did.
fn allowed(ip: IpAddr, allow: &[proto::Cidr]) -> Result<()> {
    allowed_all(&[ip], allow)
}

/// Every destination passes the address policy, and one in a benchmarking
/// range is reached through a route of this namespace's own, not the
/// default route out of the lab (the ranges belong to isolated test
/// networks); `--allow-target` says a path is one.
fn allowed_all(ips: &[IpAddr], allow: &[proto::Cidr]) -> Result<()> {
    let mut lab = std::collections::BTreeSet::new();
    for &ip in ips {
        engine::check_destination(ip, allow).map_err(msg)?;
        if !ip.is_loopback() && !allow.iter().any(|c| c.contains(ip)) {
            lab.insert(ip);
        }
    }
    let lab: Vec<IpAddr> = lab.into_iter().collect();
    if let Some((ip, route)) = crate::netops::reach::only_default_route(&lab) {
        fail!(
            "refusing to send test traffic to {ip}: it is in a benchmarking range, but this \
             endpoint's route to it ({route}) leads out of any isolated \
             lab (RFC 2544, RFC 6815: these ranges are for isolated test networks). Add a route \
             to the lab there, or if that path is an isolated test network, pass \
             --allow-target {} (or its prefix)",
            engine::host_prefix(ip)
        );
    }
    Ok(())
}

/// Runs `f` on a thread named `name`: it waits for the agreed start, runs,
/// and reports `Finished` or `Error` for the job.
fn spawn(name: &str, ctx: JobCtx, start_at_unix_ns: Option<u64>, f: JobFn) -> Result<()> {
    kernel::spawn_named(name, move || {
        // Senders on many hosts begin together at the agreed instant.
        if let Some(at) = start_at_unix_ns {
            while !ctx.stopped() {
                let left = at.saturating_sub(sys::realtime_ns());
                if left == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_nanos(left).min(Duration::from_millis(50)));
            }
        }
        let started_unix_ns = sys::realtime_ns();
        // A panicking job must still answer, or its test would wait for
        // counts that never come.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&ctx)))
            .unwrap_or_else(|_| Err(err!("the job panicked; see the agent log")));
        let msg = match outcome {
            Ok(mut summary) => {
                summary.started_unix_ns = started_unix_ns;
                Response::Finished {
                    test: ctx.test,
                    summary,
                }
            }
            Err(e) => Response::Error {
                test: Some(ctx.test),
                message: chain(&e),
            },
        };
        ctx.stop.store(true, Ordering::Relaxed);
        let _ = ctx.out.send(msg);
    })
    .map(drop)
    .with_context(|| format!("starting the {name} thread"))
    .map_err(AgentError::from)
}
