//! The controller's side of the control channel: starts agents, speaks the
//! protocol to them, measures their clocks, keeps them alive with heartbeats,
//! notices when one goes silent, and tears them down.
//!
//! An agent is a child process speaking the protocol on its stdin/stdout:
//! `linerate agent --stdio` here (optionally in a network namespace), or the
//! same command run by `ssh` on another host. Only the command differs. When
//! the controller dies, even by SIGKILL, its agents see EOF on stdin (local
//! ones also get SIGKILL from the kernel via PR_SET_PDEATHSIG; remote ones
//! lose their ssh session) and exit, which destroys their namespaces.

use super::error::{err, fail, AgentLost, Result, TopologyError};
use crate::model::error::{Context, Step};
use crate::model::stderr::errprint;
use crate::proto::{self, Request, Response, PROTO_VERSION};
use crate::sys;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod clock;
pub use clock::{best_clock_sample, ClockSync};

/// How many NTP-style exchanges measure an agent's clock; the one with the
/// lowest round trip wins (its offset error is at most half that RTT).
const CLOCK_SAMPLES: usize = 8;
/// The last bytes of an agent's stderr kept for error messages (ssh's own
/// words when a connection fails).
const STDERR_TAIL: usize = 4096;

/// One agent as the runner sees it: where it runs, what it is, its clock.
/// The process and the channel behind it are the fleet's own (`Link`), so
/// a stand-in fleet (the runner's tests) can describe agents too.
pub struct Agent {
    pub role: String,
    /// Where it runs, as the user named it: `local`, `ns:NAME`, `ssh://…`.
    pub host: String,
    pub pid: u32,
    pub hostname: String,
    /// The agent's network namespace (hostname and namespace inode): agents
    /// with the same key read the same kernel counters.
    pub netns_key: (String, u64),
    pub linerate_version: String,
    pub clock: ClockSync,
    /// Seconds from spawning to a completed handshake.
    pub connect_s: f64,
    /// Why the agent was lost, once it is.
    pub lost: Option<String>,
}

/// An agent's process and control channel, beside its [`Agent`].
struct Link {
    child: Child,
    stdin: Arc<Mutex<BufWriter<ChildStdin>>>,
    stderr_tail: Arc<Mutex<String>>,
    /// When the agent's reader thread last read a message from it, in ms
    /// since [`Fleet::epoch`]: kept by that thread, so messages queued for
    /// the controller never make a live agent look silent.
    heard_ms: Arc<AtomicU64>,
}

impl Link {
    /// What the agent (or ssh carrying it) last wrote to stderr.
    fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    }
}

impl Agent {
    /// How messages name it: "the gen agent", "the gen agent on ssh://…".
    pub fn label(&self) -> String {
        if self.host == "local" {
            format!("the {} agent", self.role)
        } else {
            format!("the {} agent on {}", self.role, self.host)
        }
    }
}

type Event = (usize, std::result::Result<Response, ChannelLost>);

/// Why an agent's control channel ended.
#[derive(Debug, thiserror::Error)]
enum ChannelLost {
    #[error("its control channel closed")]
    Closed,
    #[error(transparent)]
    Decode(#[from] proto::DecodeError),
}

/// A set of agents whose messages arrive on one channel.
pub struct Fleet {
    agents: Vec<Agent>,
    /// Each agent's process and channel, by the same index.
    links: Vec<Link>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    pending: VecDeque<(usize, Response)>,
    stop_heartbeats: Arc<AtomicBool>,
    /// What the agents' `heard_ms` count from.
    epoch: Instant,
    /// Processes that live as long as the agents and end with them (a
    /// user's router VM, which has no agent of its own).
    companions: Vec<std::process::Child>,
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
            links: Vec::new(),
            tx,
            rx,
            pending: VecDeque::new(),
            stop_heartbeats: Arc::new(AtomicBool::new(false)),
            epoch: Instant::now(),
            companions: Vec::new(),
        }
    }

    pub fn agent(&self, idx: usize) -> &Agent {
        &self.agents[idx]
    }

    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// Records how long starting agent `idx` took, transport included.
    pub fn set_connect_time(&mut self, idx: usize, seconds: f64) {
        if let Some(a) = self.agents.get_mut(idx) {
            a.connect_s = seconds;
        }
    }

    /// Starts an agent with `cmd` (which must run `linerate agent --stdio`
    /// with its stdin/stdout as the control channel), completes the
    /// handshake and measures its clock. `host` names where it runs.
    pub fn spawn(
        &mut self,
        role: &str,
        host: &str,
        cmd: Command,
        log: Option<&Path>,
    ) -> Result<usize> {
        self.spawn_within(role, host, cmd, log, Duration::from_secs(15))
    }

    /// [`Fleet::spawn`] for an agent that takes `hello` to answer: one in a
    /// guest that boots first (a VM's qemu is the command).
    pub fn spawn_within(
        &mut self,
        role: &str,
        host: &str,
        mut cmd: Command,
        log: Option<&Path>,
        hello: Duration,
    ) -> Result<usize> {
        let began = Instant::now();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        sys::die_with_parent(&mut cmd);
        // Its own process group: a Ctrl-C at the terminal signals the whole
        // foreground group, and must reach the controller alone, which then
        // stops the agents' jobs and collects their counts (as iperf3 does).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let what = if host == "local" {
            format!("the {role} agent")
        } else {
            format!("the {role} agent on {host}")
        };
        let log_file = match log {
            // Never through a symlink planted where the log goes.
            Some(p) => Some(
                crate::model::files::open_log(p)
                    .with_context(|| format!("opening agent log {}", p.display()))?,
            ),
            None => None,
        };
        let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        if let Some(err) = child.stderr.take() {
            let tail = Arc::clone(&stderr_tail);
            std::thread::spawn(move || forward_stderr(err, log_file, &tail));
        }
        let idx = self.attach(role, host, child, stderr_tail)?;
        // An agent that boots first (a VM) is silent until it is up: count
        // its silence from where the hello deadline leaves one peer
        // timeout, not from now.
        let grace = hello.saturating_sub(proto::PEER_TIMEOUT).as_millis() as u64;
        self.links[idx]
            .heard_ms
            .store(since(self.epoch) + grace, Ordering::Relaxed);
        let handshake = self
            .handshake(idx, hello)
            .and_then(|()| self.sync_clock(idx));
        if let Err(e) = handshake {
            // Give ssh a moment to print why it closed the channel.
            std::thread::sleep(Duration::from_millis(200));
            let tail = self.links[idx].stderr_tail();
            self.agents[idx].lost = Some(format!("{what}: {e:#}"));
            let _ = self.links[idx].child.kill();
            let _ = self.links[idx].child.wait();
            if tail.is_empty() {
                return Err(e);
            }
            return Err(Step::new(format!("{what} failed to start; it said: {tail}"), e).into());
        }
        self.agents[idx].connect_s = began.elapsed().as_secs_f64();
        self.start_heartbeats(idx);
        Ok(idx)
    }

    fn attach(
        &mut self,
        role: &str,
        host: &str,
        mut child: Child,
        stderr_tail: Arc<Mutex<String>>,
    ) -> Result<usize> {
        let idx = self.agents.len();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| err!("agent stdout not piped"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| err!("agent stdin not piped"))?;
        let tx = self.tx.clone();
        let epoch = self.epoch;
        let heard_ms = Arc::new(AtomicU64::new(since(epoch)));
        let heard = Arc::clone(&heard_ms);
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                match proto::read_message::<Response>(&mut r) {
                    Ok(Some(m)) => {
                        heard.store(since(epoch), Ordering::Relaxed);
                        if tx.send((idx, Ok(m))).is_err() {
                            break;
                        }
                    }
                    Ok(None) => {
                        let _ = tx.send((idx, Err(ChannelLost::Closed)));
                        break;
                    }
                    Err(e) => {
                        let _ = tx.send((idx, Err(ChannelLost::Decode(e))));
                        break;
                    }
                }
            }
        });
        self.agents.push(Agent {
            role: role.to_string(),
            host: host.to_string(),
            pid: child.id(),
            hostname: String::new(),
            netns_key: (String::new(), 0),
            linerate_version: String::new(),
            clock: ClockSync::default(),
            connect_s: 0.0,
            lost: None,
        });
        self.links.push(Link {
            child,
            stdin: Arc::new(Mutex::new(BufWriter::new(stdin))),
            stderr_tail,
            heard_ms,
        });
        Ok(idx)
    }

    fn handshake(&mut self, idx: usize, hello: Duration) -> Result<()> {
        let mine = env!("CARGO_PKG_VERSION");
        let ack = self.call(
            idx,
            &Request::Hello {
                proto_version: PROTO_VERSION,
                linerate_version: mine.into(),
            },
            hello,
        )?;
        match ack {
            Response::HelloAck {
                hostname,
                linerate_version,
                netns_id,
                ..
            } => {
                if linerate_version != mine {
                    fail!(
                        "{} runs linerate {linerate_version}, this controller is {mine}; install the \
                         same version there, or pass --push to copy this one",
                        self.agents[idx].label()
                    );
                }
                self.agents[idx].netns_key = (hostname.clone(), netns_id);
                self.agents[idx].hostname = hostname;
                self.agents[idx].linerate_version = linerate_version;
                Ok(())
            }
            other => fail!("{} answered hello with {other:?}", self.agents[idx].label()),
        }
    }

    /// Measures the agent's clock offset and RTT over the control channel.
    fn sync_clock(&mut self, idx: usize) -> Result<()> {
        let mut samples = Vec::with_capacity(CLOCK_SAMPLES);
        for seq in 0..CLOCK_SAMPLES as u64 {
            let t0 = sys::realtime_ns();
            let r = self.call(idx, &Request::Time { seq }, Duration::from_secs(10))?;
            let t1 = sys::realtime_ns();
            if let Response::Time { unix_ns, seq: s } = r {
                if s == seq {
                    samples.push((t0, unix_ns, t1));
                }
            }
        }
        self.agents[idx].clock = best_clock_sample(&samples)
            .ok_or_else(|| err!("{}: no clock sample", self.agents[idx].label()))?;
        Ok(())
    }

    /// Heartbeats keep the agent from deciding its controller hung.
    fn start_heartbeats(&self, idx: usize) {
        let stop = Arc::clone(&self.stop_heartbeats);
        let stdin = Arc::clone(&self.links[idx].stdin);
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
    }

    pub fn send(&self, idx: usize, req: &Request) -> Result<()> {
        let a = &self.agents[idx];
        if let Some(l) = &a.lost {
            return Err(AgentLost {
                agent: idx,
                message: l.clone(),
            }
            .into());
        }
        let mut w = self.links[idx]
            .stdin
            .lock()
            .map_err(|_| err!("agent {} writer poisoned", a.role))?;
        Ok(
            proto::write_frame(&mut *w, req)
                .with_context(|| format!("sending to {}", a.label()))?,
        )
    }

    /// Marks an agent lost and returns the error to propagate.
    fn lose(&mut self, idx: usize, why: &str) -> TopologyError {
        let tail = self.links[idx].stderr_tail();
        let a = &mut self.agents[idx];
        let mut message = format!("{} was lost: {why}", a.label());
        if !tail.is_empty() {
            let last = tail.lines().last().unwrap_or_default();
            message.push_str(&format!(" (it said: {last})"));
        }
        a.lost = Some(message.clone());
        AgentLost {
            agent: idx,
            message,
        }
        .into()
    }

    /// An agent silent for longer than the peer timeout counts as lost.
    fn check_silence(&mut self) -> Result<()> {
        let now = since(self.epoch);
        let timeout = proto::PEER_TIMEOUT.as_millis() as u64;
        let silent = self.agents.iter().zip(&self.links).position(|(a, l)| {
            a.lost.is_none() && now.saturating_sub(l.heard_ms.load(Ordering::Relaxed)) > timeout
        });
        if let Some(i) = silent {
            let why = format!("silent for more than {:?}", proto::PEER_TIMEOUT);
            return Err(self.lose(i, &why));
        }
        Ok(())
    }

    /// One message from any agent, with liveness bookkeeping; heartbeats are
    /// consumed here.
    fn recv(&mut self, left: Duration) -> Result<Option<(usize, Response)>> {
        // Checked on every call, not only when nothing arrives: the other
        // agents' reports must not hide one that went silent.
        self.check_silence()?;
        let wait = left.min(Duration::from_millis(250));
        match self.rx.recv_timeout(wait) {
            Ok((i, Ok(m))) => {
                if matches!(m, Response::Heartbeat { .. }) {
                    return Ok(None);
                }
                Ok(Some((i, m)))
            }
            Ok((i, Err(e))) => Err(self.lose(i, &e.to_string())),
            Err(RecvTimeoutError::Timeout) => {
                self.check_silence()?;
                Ok(None)
            }
            Err(RecvTimeoutError::Disconnected) => fail!("all agents are gone"),
        }
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
                fail!(
                    "{} did not answer within {:?}",
                    self.agents[idx].label(),
                    timeout
                );
            }
            match self.recv(left)? {
                Some((i, m)) if i == idx && is_direct_answer(&m, start_of) => {
                    if let Response::Error { message, .. } = &m {
                        fail!("{}: {message}", self.agents[idx].label());
                    }
                    return Ok(m);
                }
                Some((i, m)) => self.pending.push_back((i, m)),
                None => {}
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
            if left.is_zero() {
                return Ok(None);
            }
            if let Some(ev) = self.recv(left)? {
                return Ok(Some(ev));
            }
        }
    }

    /// Keeps `child` until the fleet shuts down, then ends it (SIGKILL)
    /// before the agents: a process without an agent that runs in a
    /// namespace an agent holds.
    pub fn adopt(&mut self, child: std::process::Child) {
        self.companions.push(child);
    }

    /// Stops every agent: asks nicely, then kills what is left.
    pub fn shutdown(&mut self) {
        self.stop_heartbeats.store(true, Ordering::Relaxed);
        for mut c in self.companions.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
        for i in 0..self.agents.len() {
            let _ = self.send(i, &Request::Shutdown);
        }
        // Agents restoring physical ports need a moment; ssh needs a round trip.
        let deadline = Instant::now() + Duration::from_secs(5);
        for a in &mut self.links {
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
        self.links.clear();
    }
}

/// Milliseconds from `epoch` to now.
fn since(epoch: Instant) -> u64 {
    epoch.elapsed().as_millis() as u64
}

/// Copies an agent's stderr into its log (or ours) and keeps the tail.
fn forward_stderr(
    err: std::process::ChildStderr,
    mut log: Option<std::fs::File>,
    tail: &Mutex<String>,
) {
    let mut r = BufReader::new(err);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match log.as_mut() {
            Some(f) => {
                let _ = f.write_all(line.as_bytes());
            }
            None => errprint!("{line}"),
        }
        if let Ok(mut t) = tail.lock() {
            t.push_str(&line);
            if t.len() > STDERR_TAIL {
                let cut = t.len() - STDERR_TAIL;
                let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                t.drain(..cut);
            }
        }
    }
}

/// Whether `m` answers the request just sent (rather than reporting on a
/// running job); a failed Start answers with an error naming its test.
fn is_direct_answer(m: &Response, start_of: Option<u32>) -> bool {
    match m {
        Response::HelloAck { .. }
        | Response::Configured
        | Response::Snapshot { .. }
        | Response::PortState { .. }
        | Response::TargetCheck { .. }
        | Response::Source { .. }
        | Response::Time { .. } => true,
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
