//! What one test is and where it runs, shared by every test body: the two
//! ends (fleet, agents, addressing), the UDP and TCP test specs, progress
//! reports, the legs a test is cut into, flow lists and the finishing touch
//! on a result. The test bodies (`tcp`, `udp`, `http`, `latency`) build on
//! this and on nothing of each other's, except latency, which runs a TCP or
//! UDP load beside its probes.

use crate::model::error::chain;
use crate::model::signals::{aborted, interrupted};
use crate::proto::{Cidr, Direction, FlowSpec, FrameSpec, RateProfile, RxEngine, TxEngine};
use crate::results::{FlowMode, TestResult, TestStatus};
use crate::runner::error::{err, fail, Result};
use crate::topology::{Addressing, Agents};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

static NEXT_TEST: AtomicU32 = AtomicU32::new(1);

pub(super) fn next_id() -> u32 {
    NEXT_TEST.fetch_add(1, Ordering::Relaxed)
}

/// One end of a test: an agent and the addresses it offers.
#[derive(Debug, Clone)]
pub struct Side {
    pub agent: usize,
    pub addr: Addressing,
}

/// The endpoints of a test and whoever else should be watched.
pub struct Ends<'a> {
    pub fleet: &'a mut dyn Agents,
    /// One or many generators; each runs `instances` parallel instances.
    pub gens: Vec<Side>,
    pub sink: Side,
    pub instances: u16,
    /// Agents whose kernel counters are recorded too (the DUT).
    pub observers: Vec<usize>,
    /// The lab's index in results.json, if the ends are a lab's.
    pub lab: Option<usize>,
}

impl<'a> Ends<'a> {
    /// Generator and sink (agent indexes), with the DUT's agent watched when
    /// there is one; `lab` is the lab's index in results.json, if any.
    pub fn new(
        fleet: &'a mut dyn Agents,
        (gen, sink, dut): (usize, usize, Option<usize>),
        (gen_addr, sink_addr): (Addressing, Addressing),
        lab: Option<usize>,
    ) -> Self {
        Ends {
            fleet,
            gens: vec![Side {
                agent: gen,
                addr: gen_addr,
            }],
            sink: Side {
                agent: sink,
                addr: sink_addr,
            },
            instances: 1,
            observers: dut.into_iter().collect(),
            lab,
        }
    }

    /// A lab's generator and sink (and DUT, watched) as test endpoints;
    /// `index` is the lab's place in results.json's `labs`.
    pub fn of_lab(l: &'a mut crate::lab::Lab, index: Option<usize>) -> Ends<'a> {
        let mut ends = Ends::new(
            &mut l.fleet,
            (l.gen, l.sink, l.dut),
            (l.gen_addr.clone(), l.sink_addr.clone()),
            index,
        );
        // After the DUT: the first observer is the DUT whose CPU is read.
        ends.observers.extend(l.switch);
        ends
    }

    /// The same endpoints, borrowed again for a callee that takes `Ends`.
    pub fn reborrow(&mut self) -> Ends<'_> {
        Ends {
            fleet: &mut *self.fleet,
            gens: self.gens.clone(),
            sink: self.sink.clone(),
            instances: self.instances,
            observers: self.observers.clone(),
            lab: self.lab,
        }
    }

    /// More than one sender per direction: results get an aggregate.
    pub(super) fn many(&self) -> bool {
        self.gens.len() > 1 || self.instances > 1
    }

    /// Every agent whose counters a test records: generators, observers, sink.
    pub(super) fn agents(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.gens.iter().map(|g| g.agent).collect();
        v.extend(self.observers.iter().copied());
        v.push(self.sink.agent);
        // An agent with two parts (an iperf3 test's client is its own
        // sink) is counted once.
        let mut seen = std::collections::HashSet::new();
        v.retain(|a| seen.insert(*a));
        v
    }

    pub(super) fn role(&self, idx: usize) -> String {
        self.fleet.agent(idx).role.clone()
    }

    /// Turns the stall watch ([`crate::host::stalls`]) on or off on every
    /// agent of these ends; one per host takes it. Searches and ramps turn
    /// it on for their trials: it costs each CPU about 2 % (a 1 ms wake of
    /// ~18 µs on a VM), which single tests need not pay. An agent that
    /// cannot watch leaves its trials with steal ticks alone. Observers are
    /// asked first, so on a host they share with the tester (the lab) the
    /// DUT's agent takes the watch, and its readings, which a ramp reads
    /// every quarter second, carry the host's stalls.
    pub fn watch_stalls(&mut self, on: bool) {
        let mut agents = self.agents();
        agents.sort_by_key(|a| !self.observers.contains(a));
        for agent in agents {
            let _ = self.fleet.call(
                agent,
                &crate::proto::Request::Configure {
                    ops: vec![crate::proto::NetOp::StallWatch { on }],
                },
                Duration::from_secs(5),
            );
        }
    }
}

#[derive(Debug, Clone)]
pub struct UdpTest {
    pub name: String,
    pub ipv6: bool,
    pub frame: FrameSpec,
    pub flow_mode: FlowMode,
    pub flows: u16,
    pub direction: Direction,
    pub duration: Duration,
    pub rate_pps: Option<f64>,
    /// A rate that changes over time (ramps); overrides `rate_pps`.
    pub rate_profile: Option<RateProfile>,
    pub batch: u16,
    pub cpus: Vec<usize>,
    pub allow: Vec<Cidr>,
    /// How the senders put datagrams on the wire.
    pub tx_engine: TxEngine,
    /// How the receivers count them.
    pub rx_engine: RxEngine,
    /// The receivers' UDP port (0: any free one); legs after the first
    /// take the ports after it.
    pub port: u16,
    /// Worker threads per side (0: each agent chooses).
    pub threads: u16,
    /// The interval lines' width, which the agents' samples divide.
    pub interval: Duration,
    /// The first seconds, sent and shown but left out of the totals
    /// (iperf3 -O); the test runs `duration` after them.
    pub omit: Duration,
    /// SO_SNDBUF/SO_RCVBUF of the socket engines' sockets (`udp -w`).
    pub window: Option<u32>,
    /// The DSCP of every frame (`--dscp`); the receivers then count what
    /// arrived per DSCP value.
    pub dscp: Option<crate::proto::Dscp>,
    /// Send this many frames and stop (a back-to-back burst), or at the
    /// duration's end if that comes first.
    pub max_frames: Option<u64>,
    /// Both ends' frames carry these VLAN tags (`--vlan`), besides any an
    /// end's addressing gives (a `--target` pair's).
    pub vlan: Option<crate::proto::Vlan>,
}

#[derive(Debug, Clone)]
pub struct TcpTest {
    pub name: String,
    pub ipv6: bool,
    pub streams: u16,
    pub direction: Direction,
    pub duration: Duration,
    pub cpus: Vec<usize>,
    pub congestion: Option<String>,
    pub buffer_len: u32,
    pub allow: Vec<Cidr>,
    /// The servers' port (0: any free one); pairs after the first take
    /// the ports after it.
    pub port: u16,
    /// Each direction's rate in bit/s, split over its streams and set on
    /// each as SO_MAX_PACING_RATE; none: unpaced.
    pub rate_bps: Option<f64>,
    /// The interval lines' width, which the agents' samples divide.
    pub interval: Duration,
    /// The first seconds, sent and shown but left out of the totals
    /// (iperf3 -O); the test runs `duration` after them.
    pub omit: Duration,
    /// SO_SNDBUF and SO_RCVBUF of every stream's socket, bytes (iperf3 -w).
    pub window: Option<u32>,
    /// The DSCP of every segment both ends send (`--dscp`).
    pub dscp: Option<crate::proto::Dscp>,
    /// Both ends' streams carry these VLAN tags (`--vlan`): each agent
    /// puts its end on a VLAN sub-interface for the test.
    pub vlan: Option<crate::proto::Vlan>,
}

/// The port of the `i`-th receiver or server of a test whose first is
/// `port` (0: each picks a free one).
pub fn nth_port(port: u16, i: usize) -> Result<u16> {
    if port == 0 {
        return Ok(0);
    }
    u16::try_from(usize::from(port) + i).map_err(|_| {
        err!(
            "--port {port}: the test needs {} ports from it, past 65535; give a lower port",
            i + 1
        )
    })
}

impl TcpTest {
    /// Each stream's pacing rate, bytes/s.
    pub fn pacing_bytes_per_s(&self) -> Option<u64> {
        self.rate_bps.map(|bps| {
            (bps / 8.0 / f64::from(self.streams.max(1)))
                .round()
                .max(1.0) as u64
        })
    }
}

/// Live figures for the progress line.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub test: String,
    pub elapsed_s: f64,
    pub duration_s: f64,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub tx_bps: f64,
    pub rx_bps: f64,
    pub loss_ratio: f64,
    /// Interval lines completed since the last update, on the test's
    /// clock (tests that cut them: tcp and udp).
    pub slices: Vec<super::slices::Slice>,
    /// The test hands out `slices`: interval lines come from them, not
    /// from the rates of each update.
    pub sliced: bool,
    /// HTTP: the client's open connections and responses per second in
    /// its latest 1 s sample.
    pub connections: Option<u32>,
    pub requests_per_s: f64,
}

pub type OnProgress<'a> = &'a mut dyn FnMut(&Progress);

pub(super) const INTERVAL_MS: u64 = 1000;

pub(super) fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// One sender job and the receiver job it sends to.
#[derive(Debug, Clone)]
pub(super) struct Leg {
    pub(super) name: String,
    pub(super) tx_agent: usize,
    pub(super) rx_agent: usize,
    pub(super) tx_id: u32,
    pub(super) rx_id: u32,
    pub(super) from: Addressing,
    pub(super) to: Addressing,
    /// Which instance of its generator (1-based) when there are several.
    pub(super) instance: Option<u16>,
    /// The generator this leg belongs to (sender forward, receiver reverse).
    pub(super) gen_agent: usize,
}

/// The legs of a test: per generator, per instance, per direction.
pub(super) fn legs(ends: &Ends, direction: Direction) -> Vec<Leg> {
    let s = ends.role(ends.sink.agent);
    let mut out = Vec::new();
    for g in &ends.gens {
        let gr = ends.role(g.agent);
        for i in 1..=ends.instances.max(1) {
            let (instance, tag) = if ends.instances > 1 {
                (Some(i), format!("{gr}#{i}"))
            } else {
                (None, gr.clone())
            };
            let fwd = Leg {
                name: format!("{tag}_to_{s}"),
                tx_agent: g.agent,
                rx_agent: ends.sink.agent,
                tx_id: next_id(),
                rx_id: next_id(),
                from: g.addr.clone(),
                to: ends.sink.addr.clone(),
                instance,
                gen_agent: g.agent,
            };
            let rev = Leg {
                name: format!("{s}_to_{tag}"),
                tx_agent: ends.sink.agent,
                rx_agent: g.agent,
                tx_id: next_id(),
                rx_id: next_id(),
                from: ends.sink.addr.clone(),
                to: g.addr.clone(),
                instance,
                gen_agent: g.agent,
            };
            match direction {
                Direction::Forward => out.push(fwd),
                Direction::Reverse => out.push(rev),
                Direction::Both => out.extend([fwd, rev]),
            }
        }
    }
    out
}

/// Builds the flows of one direction towards a receiver's port.
pub fn build_flows(
    mode: FlowMode,
    n: u16,
    v6: bool,
    from: &Addressing,
    to: &Addressing,
    port: u16,
) -> Result<Vec<FlowSpec>> {
    let dst_main = to
        .main(v6)
        .ok_or_else(|| err!("the receiver has no IPv{} address", if v6 { 6 } else { 4 }))?;
    let need_prefix = |a: &Addressing, side: &str| -> Result<()> {
        if a.flow_v4.is_none() && a.flow_v6.is_none() {
            fail!(
                "flow mode {mode:?} varies {side} addresses, which needs a locally accepted prefix \
                 (the lab sets one up); between named endpoints use --flow-mode one or ports"
            );
        }
        Ok(())
    };
    let n = if mode == FlowMode::One { 1 } else { n.max(1) };
    if mode == FlowMode::Ports && n > 4096 {
        fail!("--flows {n}: the ports flow mode opens one socket per flow; use at most 4096");
    }
    let mut flows = Vec::with_capacity(usize::from(n));
    for i in 0..n {
        let (src, src_port, dst) = match mode {
            FlowMode::One => (None, 0, dst_main),
            FlowMode::Ports => (None, 10_000 + i, dst_main),
            FlowMode::Var1 => {
                need_prefix(from, "source")?;
                (from.flow(v6, i), 0, dst_main)
            }
            FlowMode::Var2 => {
                need_prefix(from, "source")?;
                need_prefix(to, "destination")?;
                (from.flow(v6, i), 0, to.flow(v6, i).unwrap_or(dst_main))
            }
        };
        flows.push(FlowSpec {
            id: i,
            src,
            src_port,
            dst: SocketAddr::new(dst, port),
        });
    }
    Ok(flows)
}

/// Why a test that did not run to its end stopped early: the user's signal,
/// or jobs that never reported their end.
pub(super) fn cut_short() -> String {
    if interrupted() {
        "interrupted before the test ended (Ctrl-C or SIGTERM); the figures cover the time it ran"
            .into()
    } else if aborted() {
        "aborted before the test ended: a criterion had clearly failed (--abort-on-fail); the \
         figures cover the time it ran"
            .into()
    } else {
        "the test's jobs did not report their end in time (the agents stalled or the host is \
         overloaded); the figures cover what they reported"
            .into()
    }
}

/// Runs a test body; an error marks the result failed (or interrupted).
pub(super) fn finish_test(
    mut result: TestResult,
    body: impl FnOnce(&mut TestResult) -> Result<()>,
) -> TestResult {
    if let Err(e) = body(&mut result) {
        result.status = if interrupted() {
            TestStatus::Interrupted
        } else if aborted() {
            TestStatus::Aborted
        } else {
            TestStatus::Failed
        };
        result.error = Some(chain(&e));
    }
    result.note_links_down();
    result
}

/// A test that sent nothing measured nothing: it fails, whatever else
/// went right (a rate of 100 bit/s asks for less than one frame a
/// second; a sender that never started sends none). Tests with no
/// traffic of their own (latency probes alone) have no directions and
/// are left alone.
pub fn fail_if_nothing_sent(result: &mut TestResult) {
    let idle = |d: &crate::results::DirectionResult| {
        d.tx_packets == 0 && d.rx_packets == 0 && d.rx_l2_bps == 0.0
    };
    // HEAD (or 204) responses carry no body: answered requests are traffic.
    let answered = result.http.as_ref().is_some_and(|h| h.client.requests > 0);
    if result.status != TestStatus::Ok
        || result.directions.is_empty()
        || answered
        || !result.directions.iter().all(idle)
    {
        return;
    }
    let asked: u64 = result.directions.iter().map(|d| d.tx_target).sum();
    let secs = result
        .directions
        .iter()
        .map(|d| d.duration_s)
        .fold(0.0, f64::max);
    let why = if asked == 0 && result.params.rate_pps.is_some_and(|r| r * secs < 1.0) {
        "the rate asked for comes to less than one frame in the whole test; \
         check --rate's unit (100bps is 100 bit/s; 100kpps is packets)"
            .to_string()
    } else {
        "see the notes for what the sender said; check --rate and the sender's endpoint".to_string()
    };
    result.status = TestStatus::Failed;
    result.error = Some(format!(
        "nothing was sent: 0 frames and 0 bytes in {secs:.1} s in every direction, so the \
         test measured nothing; {why}"
    ));
}

/// Fills in "% of line rate" once the line rate is known.
pub fn apply_line_rate(result: &mut TestResult, user_line_rate_bps: Option<f64>) {
    for i in 0..result.directions.len() {
        let d = &result.directions[i];
        let line = receiving_link_bps(result, &d.receiver).or(user_line_rate_bps);
        let bps = d.rx_l1_bps.unwrap_or(d.rx_l2_bps);
        result.directions[i].line_rate_pct = line.filter(|l| *l > 0.0).map(|l| bps / l * 100.0);
    }
}

/// The speed of the interface `role` received the most bytes on, in
/// bit/s, when the kernel reports a real one for it (see
/// `IfCounters::speed_mbps`): no veth or loopback has a line rate.
fn receiving_link_bps(result: &TestResult, role: &str) -> Option<f64> {
    let busiest = result
        .kernel_counters
        .iter()
        .filter(|k| k.role == role)
        .max_by_key(|k| k.after.rx_bytes.saturating_sub(k.before.rx_bytes))?;
    busiest.after.speed_mbps.map(|m| m as f64 * 1e6)
}

/// Sender threads go on the first CPU given, receivers on the second.
/// The CPUs a sender gets of those given: the first one, or the first N
/// with N worker threads (one each).
pub(super) fn pick_tx_cpus(cpus: &[usize], threads: u16) -> Vec<usize> {
    let n = usize::from(threads.max(1)).min(cpus.len());
    cpus[..n].to_vec()
}
/// The CPUs a receiver gets: those after the senders', else the senders'.
pub(super) fn pick_rx_cpus(cpus: &[usize], threads: u16) -> Vec<usize> {
    let n = usize::from(threads.max(1));
    let rest: Vec<usize> = cpus.iter().skip(n).copied().collect();
    if !rest.is_empty() {
        rest.into_iter().take(n).collect()
    } else {
        cpus.first().map(|&c| vec![c]).unwrap_or_default()
    }
}
