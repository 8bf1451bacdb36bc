//! `linerate agent --stdio`: the process that owns a data plane.
//!
//! It reads control frames on stdin and writes them on stdout (logs go to
//! stderr), opens no control port, and exits as soon as its controller goes
//! away: EOF on stdin, a failed write, or silence past the peer timeout.
//!
//! This file holds the control loop (enter the namespace → serve requests →
//! give ports back); `jobs` opens and runs what a `start` request asks for.

use crate::model::stderr::errln;
pub mod error;
mod jobs;

use crate::agent::error::{err, fail, msg, Result};
use crate::engine::JobCtx;
use crate::host::kernel;
use crate::model::error::chain;
use crate::model::error::Context;
use crate::proto::{self, Liveness, Request, Response, PROTO_VERSION};
use crate::topology::Netns;
use crate::{netops, sys};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What this agent accepts from a controller.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_duration: Duration,
    pub max_rate_pps: Option<f64>,
}

struct Running {
    ctx: JobCtx,
}

pub fn run(netns: Netns, limits: Limits) -> Result<()> {
    // Over ssh the parent is the session's sshd: when the session ends
    // (the controller gone, or it gave up on a stalled transport) the
    // agent must end too, even stopped (SIGSTOP) or wedged, where EOF on
    // stdin would never be read. Agents holding physical ports replace
    // this with SIGTERM, to give the ports back first.
    if let Err(e) = sys::set_parent_death_signal(libc::SIGKILL) {
        errln!("agent: asking for SIGKILL when the ssh session ends: {e}");
    }
    enter(&netns)?;
    let outcome = serve(limits);
    // Every way out of `serve` gives held ports back (the control-channel
    // threads do the same before they exit the process).
    netops::restore_all();
    outcome
}

/// Moves this process into the namespace its data plane lives in.
fn enter(netns: &Netns) -> Result<()> {
    match netns {
        Netns::Current => {}
        Netns::New => {
            // Physical ports are taken from, and given back to, this namespace.
            netops::port::remember_original_netns()
                .map_err(|e| err!("opening this namespace before leaving it: {e}"))?;
            sys::unshare_netns()
                .map_err(|e| err!("creating a network namespace: {e} (needs root)"))?;
            netops::apply(&proto::NetOp::LinkUp { dev: "lo".into() })?;
        }
        Netns::Named(name) => {
            let path = PathBuf::from("/run/netns").join(name);
            sys::enter_netns(&path).map_err(|e| {
                err!(
                    "entering network namespace {name} ({}): {e}; list them with `ip netns list`",
                    path.display()
                )
            })?;
        }
    }
    Ok(())
}

/// Messages each way that may wait between the control channel and the
/// agent's loop.
const CHANNEL_DEPTH: usize = 1024;

/// Starts the two control-channel threads: requests from stdin, responses to
/// stdout. Either ends the process when its side of the channel closes.
fn spawn_io() -> (Receiver<Request>, SyncSender<Response>) {
    // Bounded both ways: a controller that stops reading stops the agent's
    // work (its sends wait), and one that floods requests waits for the
    // agent, instead of either growing the agent's memory.
    let (req_tx, req_rx) = mpsc::sync_channel::<Request>(CHANNEL_DEPTH);
    let (resp_tx, resp_rx) = mpsc::sync_channel::<Response>(CHANNEL_DEPTH);
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
                    netops::restore_all();
                    std::process::exit(0)
                }
                Err(e) => {
                    errln!("agent: {e}; exiting");
                    netops::restore_all();
                    std::process::exit(1);
                }
            }
        }
    });
    std::thread::spawn(move || {
        let mut w = BufWriter::new(std::io::stdout().lock());
        for m in resp_rx {
            if proto::write_frame(&mut w, &m).is_err() {
                netops::restore_all();
                std::process::exit(0);
            }
        }
    });
    (req_rx, resp_tx)
}

/// What the loop does after a request.
enum Step {
    /// Send this response (boxed: a snapshot makes it large).
    Reply(Box<Response>),
    /// Nothing to answer.
    Quiet,
    /// Stop serving.
    Exit,
}

/// The agent's state between requests.
struct Agent {
    limits: Limits,
    out: SyncSender<Response>,
    live: Liveness,
    greeted: bool,
    jobs: HashMap<u32, Running>,
    beat: u64,
    /// The router-on-a-stick DUT's program, when this agent runs it: its
    /// BPF link lives exactly as long as this agent.
    stick: Option<crate::engine::xdp::stick::Stick>,
    /// Pass-all XDP programs this agent holds (the stick DUT's switch).
    passes: Vec<crate::engine::xdp::stick::PassHold>,
}

fn serve(limits: Limits) -> Result<()> {
    let (requests, out) = spawn_io();
    let mut agent = Agent {
        limits,
        out,
        live: Liveness::new(Instant::now()),
        greeted: false,
        jobs: HashMap::new(),
        beat: 0,
        stick: None,
        passes: Vec::new(),
    };
    loop {
        let msg = match requests.recv_timeout(Duration::from_millis(250)) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        if netops::port::signalled() {
            errln!("agent: signalled; giving ports back and exiting");
            agent.stop_all();
            return Ok(());
        }
        let now = Instant::now();
        agent.heartbeat(now);
        let Some(msg) = msg else {
            if agent.live.peer_gone(now) {
                errln!(
                    "agent: controller silent for {:?}; exiting",
                    proto::PEER_TIMEOUT
                );
                return Ok(());
            }
            continue;
        };
        agent.live.heard(now);
        match agent.handle(msg) {
            Step::Reply(reply) => {
                if agent.out.send(*reply).is_err() {
                    return Ok(());
                }
                agent.live.sent(Instant::now());
            }
            Step::Quiet => {}
            Step::Exit => return Ok(()),
        }
    }
}

impl Agent {
    fn stop_all(&self) {
        for j in self.jobs.values() {
            j.ctx.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Sends a heartbeat when one is due, once the controller has said hello.
    fn heartbeat(&mut self, now: Instant) {
        if self.live.heartbeat_due(now) && self.greeted {
            self.beat += 1;
            let _ = self.out.send(Response::Heartbeat { seq: self.beat });
            self.live.sent(now);
        }
    }

    fn handle(&mut self, msg: Request) -> Step {
        let reply = match msg {
            Request::Hello {
                proto_version,
                linerate_version,
            } => return self.hello(proto_version, &linerate_version),
            _ if !self.greeted => error("the first control message must be hello".into()),
            Request::Heartbeat { .. } => return Step::Quiet,
            Request::Time { seq } => Response::Time {
                seq,
                unix_ns: sys::realtime_ns(),
            },
            Request::Shutdown => {
                self.stop_all();
                return Step::Exit;
            }
            Request::Configure { ops } => match ops.iter().try_for_each(|op| self.configure(op)) {
                Ok(()) => Response::Configured,
                Err(e) => error(chain(&e)),
            },
            Request::InspectPort { dev, force } => {
                match netops::port::inspect_original(&dev, force) {
                    Ok(st) => Response::PortState {
                        port: st.record(),
                        mac: st.mac,
                    },
                    Err(e) => error(chain(&e)),
                }
            }
            Request::CheckTarget { addr } => {
                let r = netops::reach::reach(addr);
                Response::TargetCheck {
                    addr,
                    owned: r.owned,
                    routed: r.routed,
                }
            }
            Request::SourceAddress { towards } => match netops::reach::source_towards(towards) {
                Ok(source) => Response::Source { towards, source },
                Err(e) => error(format!(
                    "finding the source address towards {towards} (a route lookup): {e}"
                )),
            },
            Request::Snapshot => match self.snapshot() {
                Ok(snapshot) => Response::Snapshot { snapshot },
                Err(e) => error(chain(&e)),
            },
            Request::Stop {
                test,
                sender_totals,
            } => {
                if let Some(j) = self.jobs.get(&test) {
                    if let Ok(mut g) = j.ctx.sender_totals.lock() {
                        *g = Some(sender_totals);
                    }
                    j.ctx.stop.store(true, Ordering::Relaxed);
                }
                return Step::Quiet;
            }
            Request::Start {
                test,
                job,
                start_at_unix_ns,
            } => self.start(test, job, start_at_unix_ns),
        };
        Step::Reply(Box::new(reply))
    }

    /// One configuration step: the stick DUT's program is held here, the
    /// rest is stateless (netops).
    fn configure(&mut self, op: &proto::NetOp) -> Result<()> {
        if let proto::NetOp::XdpPass { dev } = op {
            let hold = crate::engine::xdp::stick::PassHold::open(dev).map_err(|e| {
                err!("the stick DUT's switch receives the DUT's XDP_TX frames only so: {e}")
            })?;
            self.passes.push(hold);
            return Ok(());
        }
        let proto::NetOp::Stick {
            dev,
            dut_mac,
            vlan_a,
            mac_a,
            vlan_b,
            mac_b,
        } = op
        else {
            return Ok(netops::apply(op)?);
        };
        if let Some(on) = self.stick.as_ref().and_then(|s| s.ifname()) {
            fail!(
                "this agent already routes VLANs {vlan_a} and {vlan_b} on {on}: one router-on-a-stick program per DUT agent"
            );
        }
        let spec = crate::engine::xdp::stick::StickSpec {
            dut_mac: *dut_mac,
            vlan_a: *vlan_a,
            mac_a: *mac_a,
            vlan_b: *vlan_b,
            mac_b: *mac_b,
        };
        let stick = crate::engine::xdp::stick::Stick::open(spec, dev).map_err(|e| err!("{e}"))?;
        self.stick = Some(stick);
        Ok(())
    }

    /// Kernel counters now, with the stick DUT's when this agent runs it.
    fn snapshot(&self) -> Result<proto::Snapshot> {
        let mut snap = kernel::snapshot().context("reading kernel counters")?;
        if let Some(s) = &self.stick {
            snap.stick = Some(
                s.counters()
                    .map_err(|e| err!("reading the stick DUT's counters: {e}"))?,
            );
        }
        Ok(snap)
    }

    /// The handshake: the same protocol and the same build, or the agent
    /// says why not and exits.
    fn hello(&mut self, proto_version: u16, linerate_version: &str) -> Step {
        let checked = proto::check_version(proto_version)
            .map_err(msg)
            .and_then(|()| check_linerate_version(linerate_version));
        if let Err(e) = checked {
            let _ = self.out.send(error(chain(&e)));
            std::thread::sleep(Duration::from_millis(100));
            return Step::Exit;
        }
        self.greeted = true;
        Step::Reply(Box::new(Response::HelloAck {
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
        }))
    }

    fn start(&mut self, test: u32, job: proto::Job, start_at_unix_ns: Option<u64>) -> Response {
        let ctx = JobCtx {
            test,
            stop: Arc::new(AtomicBool::new(false)),
            out: self.out.clone(),
            interval: Duration::from_millis(jobs::interval_ms(&job).max(10)),
            sender_totals: Arc::new(Mutex::new(None)),
            links: crate::host::links::LinkWatch::get()
                .map(|w| (w.clone(), Arc::new(Mutex::new((w.mark(), w.mark()))))),
        };
        match jobs::start(&ctx, job, &self.limits, start_at_unix_ns) {
            Ok(port) => {
                self.jobs.retain(|_, j| !j.ctx.stopped());
                self.jobs.insert(test, Running { ctx });
                Response::Started { test, port }
            }
            Err(e) => Response::Error {
                test: Some(test),
                message: chain(&e),
            },
        }
    }
}

/// An error that belongs to no test.
fn error(message: String) -> Response {
    Response::Error {
        test: None,
        message,
    }
}

/// The controller and its agents must be the same build of linerate: the
/// control protocol and the results they produce are versioned together.
fn check_linerate_version(controller: &str) -> Result<()> {
    let mine = env!("CARGO_PKG_VERSION");
    if controller == mine {
        return Ok(());
    }
    Err(err!(
        "linerate version mismatch: this agent is linerate {mine}, the controller is {controller}; \
         install the same version on both, or let the controller copy itself with --push"
    ))
}
