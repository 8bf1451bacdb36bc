//! A fleet of scripted agents on a virtual clock, for the runner's tests:
//! it answers the jobs a test body starts as real agents would (started,
//! a sample a second, final summaries with counters), and injects faults
//! (an agent lost, a job that fails, a final report that never comes, a
//! slow stop). Waiting advances the virtual clock instead of sleeping, so
//! a 10 s test runs in milliseconds, without root or namespaces.

use crate::proto::{
    EndpointSummary, FlowCounters, IntervalSample, Job, Request, Response, Snapshot, StreamSample,
};
use crate::topology::fleet::{Agent, ClockSync};
use crate::topology::{AgentLost, Agents, TopologyError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, TopologyError>;

/// What the scripted agents report each second of a job.
#[derive(Debug, Clone)]
pub struct Script {
    /// Frames a UDP sender sends each second.
    pub pps: u64,
    /// Bytes of each UDP frame.
    pub frame_bytes: u64,
    /// Of those, frames the UDP receiver counts lost each second.
    pub lost_per_s: u64,
    /// Payload a TCP stream moves each second.
    pub tcp_bytes_per_s: u64,
    /// Retransmits of a TCP sender each second.
    pub retransmits_per_s: u64,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            pps: 1000,
            frame_bytes: 64,
            lost_per_s: 10,
            tcp_bytes_per_s: 125_000_000,
            retransmits_per_s: 3,
        }
    }
}

/// A fault to inject; times are on the virtual clock from the fleet's start.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The agent's control channel closes at `at`.
    Lost { agent: usize, at: Duration },
    /// The agent's latest running job fails at `at` with `message`.
    JobError {
        agent: usize,
        at: Duration,
        message: String,
    },
    /// The agent's jobs never send their final report.
    NoFinal { agent: usize },
    /// The agent answers a Stop only after `delay`.
    SlowStop { agent: usize, delay: Duration },
}

/// One job as the scripted agent runs it.
#[derive(Debug, Default)]
struct FakeJob {
    agent: usize,
    /// What it has reported so far, summed: its final report.
    done: EndpointSummary,
    ended: bool,
}

#[derive(Default)]
struct State {
    /// Virtual time since `base`.
    t: Duration,
    /// (when, agent, report), in no order; the earliest goes first.
    queue: Vec<(Duration, usize, Response)>,
    jobs: HashMap<u32, FakeJob>,
    /// A receiver's or server's port → (agent, job).
    ports: HashMap<u16, (usize, u32)>,
    next_port: u16,
    /// Every request sent, in order.
    sent: Vec<(usize, Request)>,
}

/// The scripted fleet: agents named by role, all local.
pub struct FakeFleet {
    agents: Vec<Agent>,
    base: Instant,
    unix0: u64,
    state: RefCell<State>,
    pub script: Script,
    faults: Vec<Fault>,
}

impl FakeFleet {
    /// Agents with these roles, indexed in this order.
    pub fn new(roles: &[&str]) -> Self {
        let agents = roles
            .iter()
            .enumerate()
            .map(|(i, r)| Agent {
                role: r.to_string(),
                host: "local".into(),
                pid: 0,
                hostname: "fake".into(),
                netns_key: ("fake".into(), i as u64),
                linerate_version: env!("CARGO_PKG_VERSION").into(),
                clock: ClockSync::default(),
                connect_s: 0.0,
                lost: None,
            })
            .collect();
        FakeFleet {
            agents,
            base: Instant::now(),
            unix0: 1_700_000_000_000_000_000,
            state: RefCell::new(State {
                next_port: 40_000,
                ..Default::default()
            }),
            script: Script::default(),
            faults: Vec::new(),
        }
    }

    /// Injects `f`.
    pub fn fault(mut self, f: Fault) -> Self {
        self.faults.push(f);
        self
    }

    /// Virtual time since the fleet started.
    pub fn elapsed(&self) -> Duration {
        self.state.borrow().t
    }

    /// Every request the runner sent, in order.
    pub fn sent(&self) -> Vec<(usize, Request)> {
        self.state.borrow().sent.clone()
    }

    fn slow_stop(&self, agent: usize) -> Duration {
        self.faults
            .iter()
            .find_map(|f| match f {
                Fault::SlowStop { agent: a, delay } if *a == agent => Some(*delay),
                _ => None,
            })
            .unwrap_or(Duration::from_millis(5))
    }

    fn no_final(&self, agent: usize) -> bool {
        let me = |f: &Fault| matches!(f, Fault::NoFinal { agent: a } if *a == agent);
        self.faults.iter().any(me)
    }

    fn lost_error(&self, agent: usize) -> TopologyError {
        AgentLost {
            agent,
            message: self.agents[agent].lost.clone().unwrap_or_default(),
        }
        .into()
    }

    /// Starts a job: schedules its samples and (for jobs that end by
    /// themselves) its final report.
    fn start(&self, agent: usize, test: u32, job: &Job, at_ns: Option<u64>) -> Response {
        let mut st = self.state.borrow_mut();
        let t0 = at_ns
            .map(|ns| Duration::from_nanos(ns.saturating_sub(self.unix0)))
            .unwrap_or(st.t)
            .max(st.t);
        let started_unix_ns = self.unix0 + t0.as_nanos() as u64;
        let job_entry = FakeJob {
            agent,
            done: EndpointSummary {
                started_unix_ns,
                ..Default::default()
            },
            ended: false,
        };
        st.jobs.insert(test, job_entry);
        let mut listen = || {
            let p = st.next_port;
            st.next_port += 1;
            st.ports.insert(p, (agent, test));
            Response::Started {
                test,
                port: Some(p),
            }
        };
        let answer = match job {
            Job::UdpReceive { .. } | Job::TcpListen { .. } => listen(),
            _ => Response::Started { test, port: None },
        };
        let (peer, secs) = match job {
            Job::UdpSend {
                flows, duration_ms, ..
            } => (
                flows
                    .first()
                    .and_then(|f| st.ports.get(&f.dst.port()).copied()),
                duration_ms / 1000,
            ),
            Job::TcpConnect {
                target,
                duration_ms,
                ..
            } => (st.ports.get(&target.port()).copied(), duration_ms / 1000),
            _ => return answer,
        };
        let fwd_rev = match job {
            Job::TcpConnect { direction, .. } => Some(match direction {
                crate::proto::Direction::Forward => (true, false),
                crate::proto::Direction::Reverse => (false, true),
                crate::proto::Direction::Both => (true, true),
            }),
            _ => None,
        };
        for k in 1..=secs {
            let at = t0 + Duration::from_secs(k);
            let (mine, theirs) = second(&self.script, k, fwd_rev);
            st.queue
                .push((at, agent, Response::Interval { test, sample: mine }));
            if let Some((pa, pt)) = peer {
                let sample = theirs;
                st.queue
                    .push((at, pa, Response::Interval { test: pt, sample }));
            }
        }
        // Jobs that end by themselves: senders, and TCP's both ends.
        let end = t0 + Duration::from_secs(secs);
        st.queue.push((end, agent, finished(test)));
        if let (Some((pa, pt)), Some(_)) = (peer, fwd_rev) {
            st.queue.push((end, pa, finished(pt)));
        }
        answer
    }

    /// Stops a job: drops what it had still to report and schedules its
    /// final report with what it reported so far.
    fn stop(&self, agent: usize, test: u32, totals: &[crate::proto::FlowTotal]) {
        let delay = self.slow_stop(agent);
        let mut st = self.state.borrow_mut();
        let running = st.jobs.get(&test).is_some_and(|j| !j.ended);
        if !running {
            return;
        }
        cancel(&mut st, test);
        if let Some(j) = st.jobs.get_mut(&test) {
            // A receiver counts the frames that never came as lost.
            let sent: u64 = totals.iter().map(|f| f.tx_packets).sum();
            if sent > 0 {
                j.done.lost = sent.saturating_sub(j.done.rx_packets);
            }
        }
        let at = st.t + delay;
        st.queue.push((at, agent, finished(test)));
    }

    /// Loses `agent`: its channel closed, its reports never come.
    fn lose(&mut self, agent: usize) -> TopologyError {
        let label = self.agents[agent].label();
        self.agents[agent].lost = Some(format!("{label} was lost: its control channel closed"));
        let mut st = self.state.borrow_mut();
        st.queue.retain(|(_, a, _)| *a != agent);
        drop(st);
        self.lost_error(agent)
    }

    /// Pops the earliest report due by `until`, with the clock moved to
    /// it; a fault due first comes first.
    fn pop(&mut self, until: Duration) -> Result<Option<(usize, Response)>> {
        loop {
            let mut st = self.state.borrow_mut();
            let next = st
                .queue
                .iter()
                .enumerate()
                .min_by_key(|(_, (at, _, _))| *at)
                .map(|(i, (at, _, _))| (i, *at));
            let lost = self.faults.iter().find_map(|f| match f {
                Fault::Lost { agent, at } if self.agents[*agent].lost.is_none() => {
                    Some((*agent, *at))
                }
                _ => None,
            });
            let failing = self.faults.iter().find_map(|f| match f {
                Fault::JobError { agent, at, message } if *at <= until => {
                    let job = st
                        .jobs
                        .iter()
                        .filter(|(_, j)| j.agent == *agent && !j.ended)
                        .map(|(id, _)| *id)
                        .max()?;
                    Some((*agent, *at, job, message.clone()))
                }
                _ => None,
            });
            let due = next.map(|(_, at)| at).filter(|at| *at <= until);
            if let Some((agent, at)) =
                lost.filter(|(_, at)| *at <= until && due.is_none_or(|d| *at <= d))
            {
                st.t = st.t.max(at);
                drop(st);
                return Err(self.lose(agent));
            }
            if let Some((agent, at, job, message)) =
                failing.filter(|(_, at, _, _)| due.is_none_or(|d| *at <= d))
            {
                st.t = st.t.max(at);
                cancel(&mut st, job);
                if let Some(j) = st.jobs.get_mut(&job) {
                    j.ended = true;
                }
                self.faults
                    .retain(|f| !matches!(f, Fault::JobError { agent: a, .. } if *a == agent));
                return Ok(Some((agent, failed(job, message))));
            }
            let Some((i, at)) = next.filter(|(_, at)| *at <= until) else {
                st.t = st.t.max(until);
                return Ok(None);
            };
            // In order among equals: a job's last sample before its end.
            let (_, agent, report) = st.queue.remove(i);
            st.t = st.t.max(at);
            match &report {
                Response::Interval { test, sample } => {
                    if let Some(j) = st.jobs.get_mut(test) {
                        add(&mut j.done, sample);
                    }
                }
                Response::Finished { test, .. } => {
                    let no_final = self.no_final(agent);
                    let Some(j) = st.jobs.get_mut(test) else {
                        continue;
                    };
                    if j.ended || no_final {
                        continue;
                    }
                    j.ended = true;
                    let summary = j.done.clone();
                    let test = *test;
                    return Ok(Some((agent, Response::Finished { test, summary })));
                }
                _ => {}
            }
            return Ok(Some((agent, report)));
        }
    }
}

/// Second `k` of a job as (its own sample, its peer's): a UDP sender and
/// its receiver, or (with `fwd_rev`: which way data flows) a TCP client
/// and its server.
fn second(s: &Script, k: u64, fwd_rev: Option<(bool, bool)>) -> (IntervalSample, IntervalSample) {
    let base = IntervalSample {
        t_start: (k - 1) as f64,
        t_end: k as f64,
        ..Default::default()
    };
    let Some((fwd, rev)) = fwd_rev else {
        let got = s.pps - s.lost_per_s;
        return (
            IntervalSample {
                tx_packets: s.pps,
                tx_bytes: s.pps * s.frame_bytes,
                tx_target: s.pps,
                ..base.clone()
            },
            IntervalSample {
                rx_packets: got,
                rx_bytes: got * s.frame_bytes,
                lost: s.lost_per_s,
                ..base
            },
        );
    };
    let stream = |sender: bool| StreamSample {
        id: 0,
        sender,
        bytes: s.tcp_bytes_per_s,
        retransmits: if sender { s.retransmits_per_s } else { 0 },
        cwnd: k as u32,
        rtt_us: 100,
    };
    let side = |sends: bool, gets: bool| IntervalSample {
        streams: [(sends, true), (gets, false)]
            .iter()
            .filter(|(on, _)| *on)
            .map(|&(_, tx)| stream(tx))
            .collect(),
        ..base.clone()
    };
    (side(fwd, rev), side(rev, fwd))
}

/// Drops what job `test` had still to report.
fn cancel(st: &mut State, test: u32) {
    st.queue.retain(|(_, _, r)| match r {
        Response::Interval { test: t, .. } | Response::Finished { test: t, .. } => *t != test,
        _ => true,
    });
}

/// Job `test` failed, in the agent's words.
fn failed(test: u32, message: String) -> Response {
    Response::Error {
        test: Some(test),
        message,
    }
}

/// A placeholder final report; [`FakeFleet::pop`] fills in the counts.
fn finished(test: u32) -> Response {
    Response::Finished {
        test,
        summary: EndpointSummary::default(),
    }
}

/// Adds one sample to a job's running totals, as its summary counts them.
fn add(s: &mut EndpointSummary, i: &IntervalSample) {
    s.elapsed_s = i.t_end;
    s.tx_packets += i.tx_packets;
    s.tx_bytes += i.tx_bytes;
    s.tx_target += i.tx_target;
    s.rx_packets += i.rx_packets;
    s.rx_bytes += i.rx_bytes;
    s.lost += i.lost;
    if i.tx_packets > 0 {
        match s.flows.first_mut() {
            Some(f) => f.tx_packets += i.tx_packets,
            None => s.flows.push(FlowCounters {
                id: 0,
                tx_packets: i.tx_packets,
                ..Default::default()
            }),
        }
    }
    for x in &i.streams {
        match s.streams.iter_mut().find(|y| y.sender == x.sender) {
            Some(y) => {
                y.bytes += x.bytes;
                y.retransmits += x.retransmits;
                y.cwnd = x.cwnd;
            }
            None => s.streams.push(x.clone()),
        }
    }
}

impl Agents for FakeFleet {
    fn agent(&self, idx: usize) -> &Agent {
        &self.agents[idx]
    }
    fn agents(&self) -> &[Agent] {
        &self.agents
    }
    fn send(&self, idx: usize, req: &Request) -> Result<()> {
        if self.agents[idx].lost.is_some() {
            return Err(self.lost_error(idx));
        }
        self.state.borrow_mut().sent.push((idx, req.clone()));
        if let Request::Stop {
            test,
            sender_totals,
        } = req
        {
            self.stop(idx, *test, sender_totals);
        }
        Ok(())
    }
    fn call(&mut self, idx: usize, req: &Request, _timeout: Duration) -> Result<Response> {
        self.send(idx, req)?;
        Ok(match req {
            Request::Start {
                test,
                job,
                start_at_unix_ns,
            } => self.start(idx, *test, job, *start_at_unix_ns),
            Request::Snapshot => Response::Snapshot {
                snapshot: Snapshot::default(),
            },
            Request::Configure { .. } => Response::Configured,
            other => {
                let what = format!("{other:?}");
                return Err(TopologyError::Failed(format!(
                    "the fake fleet cannot answer {what}"
                )));
            }
        })
    }
    fn next_event(&mut self, timeout: Duration) -> Result<Option<(usize, Response)>> {
        let until = self.state.borrow().t + timeout;
        self.pop(until)
    }
    fn now(&self) -> Instant {
        self.base + self.state.borrow().t
    }
    fn unix_ns(&self) -> u64 {
        self.unix0 + self.state.borrow().t.as_nanos() as u64
    }
    fn sleep(&mut self, d: Duration) {
        self.state.borrow_mut().t += d;
    }
}
