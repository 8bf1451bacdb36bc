//! The controller's side of the control channel: starts agents, speaks the
//! protocol to them, keeps them alive with heartbeats, and tears them down.
//!
//! Local agents are child processes (`linerate agent --stdio`), optionally in
//! a fresh network namespace; a remote host over ssh differs only in the
//! command that starts the process. When the controller dies, even by
//! SIGKILL, its agents see EOF on stdin (and get SIGKILL from the kernel via
//! PR_SET_PDEATHSIG) and exit, which destroys their namespaces.

use crate::agent::Netns;
use crate::proto::{self, Request, Response, PROTO_VERSION};
use crate::sys;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::VecDeque;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM; long-running loops check it.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Installs the Ctrl-C/SIGTERM handlers: the first asks for a clean stop, the
/// second ends the process at once (agents and namespaces still go with it).
pub fn install_signal_handlers() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(flag))?;
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    let flag = Arc::clone(flag);
    std::thread::spawn(move || loop {
        if flag.load(Ordering::Relaxed) {
            INTERRUPTED.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    Ok(())
}

pub struct Agent {
    pub role: String,
    pub pid: u32,
    pub hostname: String,
    child: Child,
    stdin: Arc<Mutex<BufWriter<ChildStdin>>>,
}

type Event = (usize, std::result::Result<Response, String>);

/// A set of agents whose messages arrive on one channel.
pub struct Fleet {
    agents: Vec<Agent>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    pending: VecDeque<(usize, Response)>,
    stop_heartbeats: Arc<AtomicBool>,
}

impl Default for Fleet {
    fn default() -> Self {
        Self::new()
    }
}

impl Fleet {
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel();
        Fleet {
            agents: Vec::new(),
            tx,
            rx,
            pending: VecDeque::new(),
            stop_heartbeats: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn agent(&self, idx: usize) -> &Agent {
        &self.agents[idx]
    }

    /// Starts a local agent and completes the handshake with it.
    pub fn spawn_local(&mut self, role: &str, netns: &Netns, log: Option<&Path>) -> Result<usize> {
        let exe =
            std::env::current_exe().context("finding the linerate executable to start agents")?;
        let mut cmd = Command::new(exe);
        cmd.arg("agent").arg("--stdio");
        match netns {
            Netns::Current => {}
            Netns::New => {
                cmd.args(["--netns", "new"]);
            }
            Netns::Named(n) => {
                cmd.args(["--netns", n]);
            }
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        match log {
            Some(p) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("opening agent log {}", p.display()))?;
                cmd.stderr(f);
            }
            None => {
                cmd.stderr(Stdio::inherit());
            }
        }
        sys::die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting the {role} agent"))?;
        self.attach(role, child)
    }

    fn attach(&mut self, role: &str, mut child: Child) -> Result<usize> {
        let idx = self.agents.len();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("agent stdout not piped"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow!("agent stdin not piped"))?;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                match proto::read_message::<Response>(&mut r) {
                    Ok(Some(m)) => {
                        if tx.send((idx, Ok(m))).is_err() {
                            break;
                        }
                    }
                    Ok(None) => {
                        let _ = tx.send((idx, Err("agent closed its control channel".into())));
                        break;
                    }
                    Err(e) => {
                        let _ = tx.send((idx, Err(e.to_string())));
                        break;
                    }
                }
            }
        });
        let stdin = Arc::new(Mutex::new(BufWriter::new(stdin)));
        self.agents.push(Agent {
            role: role.to_string(),
            pid: child.id(),
            hostname: String::new(),
            child,
            stdin: Arc::clone(&stdin),
        });
        let ack = self.call(
            idx,
            &Request::Hello {
                proto_version: PROTO_VERSION,
                linerate_version: env!("CARGO_PKG_VERSION").into(),
            },
            Duration::from_secs(10),
        )?;
        match ack {
            Response::HelloAck { hostname, .. } => self.agents[idx].hostname = hostname,
            other => bail!("the {role} agent answered hello with {other:?}"),
        }
        // Heartbeats keep the agent from deciding its controller hung.
        let stop = Arc::clone(&self.stop_heartbeats);
        std::thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(proto::HEARTBEAT_EVERY);
                seq += 1;
                let Ok(mut w) = stdin.lock() else { break };
                if proto::write_frame(&mut *w, &Request::Heartbeat { seq }).is_err() {
                    break;
                }
            }
        });
        Ok(idx)
    }

    pub fn send(&self, idx: usize, req: &Request) -> Result<()> {
        let a = &self.agents[idx];
        let mut w = a
            .stdin
            .lock()
            .map_err(|_| anyhow!("agent {} writer poisoned", a.role))?;
        proto::write_frame(&mut *w, req).with_context(|| format!("sending to the {} agent", a.role))
    }

    /// Sends a request and waits for the agent's direct answer; interval and
    /// job reports that arrive meanwhile are kept for [`Fleet::next_event`].
    pub fn call(&mut self, idx: usize, req: &Request, timeout: Duration) -> Result<Response> {
        self.send(idx, req)?;
        let start_of = match req {
            Request::Start { test, .. } => Some(*test),
            _ => None,
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "the {} agent did not answer within {:?}",
                    self.agents[idx].role,
                    timeout
                );
            }
            match self.rx.recv_timeout(left) {
                Ok((i, Ok(Response::Heartbeat { .. }))) => {
                    let _ = i;
                }
                Ok((i, Ok(m))) if i == idx && is_direct_answer(&m, start_of) => {
                    if let Response::Error { message, .. } = &m {
                        bail!("the {} agent: {message}", self.agents[idx].role);
                    }
                    return Ok(m);
                }
                Ok((i, Ok(m))) => self.pending.push_back((i, m)),
                Ok((i, Err(e))) => bail!("the {} agent: {e}", self.agents[i].role),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => bail!("all agents are gone"),
            }
        }
    }

    /// The next job report (interval, finished, job error) from any agent.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<(usize, Response)>> {
        if let Some(e) = self.pending.pop_front() {
            return Ok(Some(e));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((_, Ok(Response::Heartbeat { .. }))) => continue,
                Ok((i, Ok(m))) => return Ok(Some((i, m))),
                Ok((i, Err(e))) => bail!("the {} agent: {e}", self.agents[i].role),
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => bail!("all agents are gone"),
            }
        }
    }

    /// Stops every agent: asks nicely, then kills what is left.
    pub fn shutdown(&mut self) {
        self.stop_heartbeats.store(true, Ordering::Relaxed);
        for i in 0..self.agents.len() {
            let _ = self.send(i, &Request::Shutdown);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for a in &mut self.agents {
            if let Ok(mut w) = a.stdin.lock() {
                let _ = w.flush();
            }
            loop {
                match a.child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = a.child.kill();
                        let _ = a.child.wait();
                        break;
                    }
                }
            }
        }
        self.agents.clear();
    }
}

/// Whether `m` answers the request just sent (rather than reporting on a
/// running job); a failed Start answers with an error naming its test.
fn is_direct_answer(m: &Response, start_of: Option<u32>) -> bool {
    match m {
        Response::HelloAck { .. } | Response::Configured | Response::Snapshot { .. } => true,
        Response::Started { test, .. } => Some(*test) == start_of,
        Response::Error { test: None, .. } => true,
        Response::Error { test: Some(t), .. } => Some(*t) == start_of,
        _ => false,
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown();
    }
}
