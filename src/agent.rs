//! `linerate agent --stdio`: the process that owns a data plane.
//!
//! It reads control frames on stdin and writes them on stdout (logs go to
//! stderr), opens no control port, and exits as soon as its controller goes
//! away: EOF on stdin, a failed write, or silence past the peer timeout.

use crate::engine::{self, tcp, udp, JobCtx};
use crate::host::kernel;
use crate::proto::{self, Job, Liveness, Request, Response, PROTO_VERSION};
use crate::{latency, netops, sys};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the agent's data plane lives.
#[derive(Debug, Clone)]
pub enum Netns {
    /// The namespace the agent was started in.
    Current,
    /// A fresh anonymous namespace that dies with the agent.
    New,
    /// An existing named namespace (/run/netns/NAME).
    Named(String),
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_duration: Duration,
    pub max_rate_pps: Option<f64>,
}

struct Running {
    ctx: JobCtx,
}

pub fn run(netns: Netns, limits: Limits) -> anyhow::Result<()> {
    match &netns {
        Netns::Current => {}
        Netns::New => {
            // Physical ports are taken from, and given back to, this namespace.
            netops::port::remember_original_netns()
                .map_err(|e| anyhow::anyhow!("opening this namespace before leaving it: {e}"))?;
            sys::unshare_netns()
                .map_err(|e| anyhow::anyhow!("creating a network namespace: {e} (needs root)"))?;
            netops::apply(&proto::NetOp::LinkUp { dev: "lo".into() })?;
        }
        Netns::Named(name) => {
            let path = PathBuf::from("/run/netns").join(name);
            sys::enter_netns(&path).map_err(|e| {
                anyhow::anyhow!(
                    "entering network namespace {name} ({}): {e}; list them with `ip netns list`",
                    path.display()
                )
            })?;
        }
    }

    let outcome = serve(limits);
    // Every way out of `serve` gives held ports back (the control-channel
    // threads do the same before they exit the process).
    netops::port::restore_all();
    outcome
}

fn serve(limits: Limits) -> anyhow::Result<()> {
    let (req_tx, req_rx) = mpsc::channel::<Request>();
    let (resp_tx, resp_rx) = mpsc::channel::<Response>();
    std::thread::spawn(move || {
        let mut r = BufReader::new(std::io::stdin().lock());
        loop {
            match proto::read_message::<Request>(&mut r) {
                Ok(Some(m)) => {
                    if req_tx.send(m).is_err() {
                        break;
                    }
                }
                Ok(None) => {
                    netops::port::restore_all();
                    std::process::exit(0)
                }
                Err(e) => {
                    eprintln!("agent: {e}; exiting");
                    netops::port::restore_all();
                    std::process::exit(1);
                }
            }
        }
    });
    std::thread::spawn(move || {
        let mut w = BufWriter::new(std::io::stdout().lock());
        for m in resp_rx {
            if proto::write_frame(&mut w, &m).is_err() {
                netops::port::restore_all();
                std::process::exit(0);
            }
        }
    });

    let mut live = Liveness::new(Instant::now());
    let mut greeted = false;
    let mut jobs: HashMap<u32, Running> = HashMap::new();
    let mut beat = 0u64;
    loop {
        let msg = match req_rx.recv_timeout(Duration::from_millis(250)) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        if netops::port::signalled() {
            eprintln!("agent: signalled; giving ports back and exiting");
            for j in jobs.values() {
                j.ctx.stop.store(true, Ordering::Relaxed);
            }
            return Ok(());
        }
        let now = Instant::now();
        if live.heartbeat_due(now) && greeted {
            beat += 1;
            let _ = resp_tx.send(Response::Heartbeat { seq: beat });
            live.sent(now);
        }
        let Some(msg) = msg else {
            if live.peer_gone(now) {
                eprintln!(
                    "agent: controller silent for {:?}; exiting",
                    proto::PEER_TIMEOUT
                );
                return Ok(());
            }
            continue;
        };
        live.heard(now);
        let reply = match msg {
            Request::Hello {
                proto_version,
                linerate_version,
            } => match proto::check_version(proto_version)
                .map_err(|e| e.to_string())
                .and_then(|()| check_linerate_version(&linerate_version))
            {
                Ok(()) => {
                    greeted = true;
                    Response::HelloAck {
                        proto_version: PROTO_VERSION,
                        linerate_version: env!("CARGO_PKG_VERSION").into(),
                        pid: std::process::id(),
                        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                        netns_id: std::fs::metadata("/proc/self/ns/net")
                            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                            .unwrap_or(0),
                    }
                }
                Err(message) => {
                    let _ = resp_tx.send(Response::Error {
                        test: None,
                        message,
                    });
                    std::thread::sleep(Duration::from_millis(100));
                    return Ok(());
                }
            },
            _ if !greeted => Response::Error {
                test: None,
                message: "the first control message must be hello".into(),
            },
            Request::Heartbeat { .. } => continue,
            Request::Time { seq } => Response::Time {
                seq,
                unix_ns: sys::realtime_ns(),
            },
            Request::Shutdown => {
                for j in jobs.values() {
                    j.ctx.stop.store(true, Ordering::Relaxed);
                }
                return Ok(());
            }
            Request::Configure { ops } => match ops.iter().try_for_each(netops::apply) {
                Ok(()) => Response::Configured,
                Err(e) => Response::Error {
                    test: None,
                    message: format!("{e:#}"),
                },
            },
            Request::InspectPort { dev, force } => {
                match netops::port::inspect_original(&dev, force) {
                    Ok(st) => Response::PortState {
                        port: st.record(),
                        mac: st.mac,
                    },
                    Err(e) => Response::Error {
                        test: None,
                        message: format!("{e:#}"),
                    },
                }
            }
            Request::Snapshot => match kernel::snapshot() {
                Ok(snapshot) => Response::Snapshot { snapshot },
                Err(e) => Response::Error {
                    test: None,
                    message: format!("reading kernel counters: {e}"),
                },
            },
            Request::Stop {
                test,
                sender_totals,
            } => {
                if let Some(j) = jobs.get(&test) {
                    if let Ok(mut g) = j.ctx.sender_totals.lock() {
                        *g = Some(sender_totals);
                    }
                    j.ctx.stop.store(true, Ordering::Relaxed);
                }
                continue;
            }
            Request::Start {
                test,
                job,
                start_at_unix_ns,
            } => {
                let ctx = JobCtx {
                    test,
                    stop: Arc::new(AtomicBool::new(false)),
                    out: resp_tx.clone(),
                    interval: Duration::from_millis(job_interval(&job).max(10)),
                    sender_totals: Arc::new(Mutex::new(None)),
                };
                match start(&ctx, job, &limits, start_at_unix_ns) {
                    Ok(port) => {
                        jobs.retain(|_, j| !j.ctx.stopped());
                        jobs.insert(test, Running { ctx });
                        Response::Started { test, port }
                    }
                    Err(message) => Response::Error {
                        test: Some(test),
                        message,
                    },
                }
            }
        };
        if resp_tx.send(reply).is_err() {
            return Ok(());
        }
        live.sent(Instant::now());
    }
}

/// The longest an agent waits for an agreed start time.
const MAX_START_DELAY: Duration = Duration::from_secs(30);

/// The controller and its agents must be the same build of linerate: the
/// control protocol and the results they produce are versioned together.
fn check_linerate_version(controller: &str) -> Result<(), String> {
    let mine = env!("CARGO_PKG_VERSION");
    if controller == mine {
        Ok(())
    } else {
        Err(format!(
            "linerate version mismatch: this agent is linerate {mine}, the controller is {controller}; \
             install the same version on both, or let the controller copy itself with --push"
        ))
    }
}

fn job_interval(job: &Job) -> u64 {
    match job {
        Job::TcpListen { interval_ms, .. }
        | Job::TcpConnect { interval_ms, .. }
        | Job::UdpReceive { interval_ms, .. }
        | Job::UdpSend { interval_ms, .. } => *interval_ms,
        Job::LatencyRespond { .. } | Job::LatencyProbe { .. } => 1000,
        Job::HttpServe(j) => j.interval_ms,
        Job::HttpGet(j) => j.interval_ms,
    }
}

fn capped(duration_ms: u64, limits: &Limits) -> Result<Duration, String> {
    let d = Duration::from_millis(duration_ms);
    if d > limits.max_duration {
        return Err(format!(
            "a {:?} test exceeds this agent's cap of {:?}; start the agent with a larger --max-duration",
            d, limits.max_duration
        ));
    }
    Ok(d)
}

type JobFn = Box<dyn FnOnce(&JobCtx) -> Result<proto::EndpointSummary, String> + Send>;

/// Opens what a job needs synchronously (so the controller learns the port and
/// any set-up error at once), then runs the job on its own thread.
fn start(
    ctx: &JobCtx,
    job: Job,
    limits: &Limits,
    start_at_unix_ns: Option<u64>,
) -> Result<Option<u16>, String> {
    if let Some(at) = start_at_unix_ns {
        let wait = Duration::from_nanos(at.saturating_sub(sys::realtime_ns()));
        if wait > MAX_START_DELAY {
            return Err(format!(
                "asked to start {wait:?} from now, more than this agent waits ({MAX_START_DELAY:?}); \
                 is this host's clock far off the controller's?"
            ));
        }
    }
    // Engine threads carry names (`lr-udp-send`, ...) that the bottleneck
    // verdict reads back from /proc/self/task to tell whose core is full.
    let spawn = |name: &str, ctx: JobCtx, f: JobFn| -> Result<(), String> {
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
                .unwrap_or_else(|_| Err("the job panicked; see the agent log".into()));
            let msg = match outcome {
                Ok(mut summary) => {
                    summary.started_unix_ns = started_unix_ns;
                    Response::Finished {
                        test: ctx.test,
                        summary,
                    }
                }
                Err(message) => Response::Error {
                    test: Some(ctx.test),
                    message,
                },
            };
            ctx.stop.store(true, Ordering::Relaxed);
            let _ = ctx.out.send(msg);
        })
        .map(drop)
        .map_err(|e| format!("starting the {name} thread: {e}"))
    };
    match job {
        Job::TcpListen {
            bind,
            expect_streams,
            duration_ms,
            cpus,
            congestion,
            ..
        } => {
            let d = capped(duration_ms, limits)?;
            let l = tcp::listen(bind).map_err(|e| format!("listening on {bind}: {e}"))?;
            let port = l.local_addr().map_err(|e| e.to_string())?.port();
            spawn(
                "lr-tcp-serve",
                ctx.clone(),
                Box::new(move |c| {
                    tcp::serve(c, l, expect_streams, d, &cpus, congestion.as_deref())
                        .map_err(String::from)
                }),
            )?;
            Ok(Some(port))
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
            ..
        } => {
            let d = capped(duration_ms, limits)?;
            engine::check_destination(target.ip(), &allow)?;
            spawn(
                "lr-tcp-client",
                ctx.clone(),
                Box::new(move |c| {
                    tcp::connect(
                        c,
                        target,
                        streams,
                        direction,
                        d,
                        &cpus,
                        congestion.as_deref(),
                        buffer_len as usize,
                    )
                    .map_err(String::from)
                }),
            )?;
            Ok(None)
        }
        Job::UdpReceive {
            bind,
            flows,
            cpus,
            threads,
            ..
        } => {
            let n = engine::workers::thread_count(threads, &cpus, usize::from(flows));
            let socks = udp::bind_receivers(bind, n)
                .map_err(|e| format!("binding UDP receiver on {bind}: {e}"))?;
            let port = socks
                .first()
                .ok_or("no receiver socket")?
                .local_addr()
                .map_err(|e| e.to_string())?
                .port();
            spawn(
                "lr-udp-recv",
                ctx.clone(),
                Box::new(move |c| udp::receive(c, socks, flows, &cpus).map_err(String::from)),
            )?;
            Ok(Some(port))
        }
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
            ..
        } => {
            let d = capped(duration_ms, limits)?;
            if let Some(r) = &rate {
                r.validate()?;
            }
            if let (Some(cap), r) = (limits.max_rate_pps, rate.as_ref().map(|r| r.max_pps())) {
                if r.is_none_or(|r| r > cap) {
                    return Err(format!(
                        "this agent caps UDP senders at {cap} pps; ask for a rate at or below it"
                    ));
                }
            }
            for f in &flows {
                engine::check_destination(f.dst.ip(), &allow)?;
            }
            crate::engine::frame::check_frames(
                frame,
                flows.first().is_some_and(|f| f.dst.is_ipv6()),
            )?;
            let spec = engine::frame::SendSpec {
                flows,
                frame,
                rate,
                duration: d,
                batch: usize::from(batch),
                cpus,
                allow,
                tx_engine,
                threads,
            };
            let sender = engine::tx::open(spec)?;
            spawn(
                "lr-udp-send",
                ctx.clone(),
                Box::new(move |c| sender.run(c).map_err(String::from)),
            )?;
            Ok(None)
        }
        Job::LatencyRespond {
            bind,
            token,
            client,
            duration_ms,
            max_pps,
        } => {
            let duration = capped(duration_ms, limits)?;
            let session = latency::responder::Session {
                token,
                client,
                duration,
                max_pps: max_pps.clamp(1, latency::responder::MAX_PPS_CEILING),
            };
            let sock = latency::responder::bind(bind)
                .map_err(|e| format!("binding the latency responder on {bind}: {e}"))?;
            let port = sock.local_addr().map_err(|e| e.to_string())?.port();
            spawn(
                "lr-lat-respond",
                ctx.clone(),
                Box::new(move |c| latency::responder::serve(c, sock, session)),
            )?;
            Ok(Some(port))
        }
        Job::LatencyProbe {
            target,
            token,
            interval_us,
            payload,
            duration_ms,
            allow,
        } => {
            let duration = capped(duration_ms, limits)?;
            engine::check_destination(target.ip(), &allow)?;
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
            let sock = latency::client::open(target)
                .map_err(|e| format!("opening the latency prober towards {target}: {e}"))?;
            spawn(
                "lr-lat-probe",
                ctx.clone(),
                Box::new(move |c| latency::client::run(c, sock, spec)),
            )?;
            Ok(None)
        }
        Job::HttpServe(j) => {
            let d = capped(j.duration_ms, limits)?;
            let (server, port) = crate::http::job::open_server(ctx, &j)?;
            spawn(
                "lr-http-server",
                ctx.clone(),
                Box::new(move |c| Ok(crate::http::job::serve(c, server, d))),
            )?;
            Ok(Some(port))
        }
        Job::HttpGet(j) => {
            let d = capped(j.duration_ms, limits)?;
            engine::check_destination(j.target.ip(), &j.allow)?;
            let spec = crate::http::job::get_spec(&j, d)?;
            spawn(
                "lr-http-client",
                ctx.clone(),
                Box::new(move |c| crate::http::job::get(c, spec)),
            )?;
            Ok(None)
        }
    }
}
