//! TCP bulk tests: per generator instance one listener on the sink and one
//! client with N streams, started together; goodput per direction from the
//! receivers' byte counts, cross-checked against the kernel's.

use super::jobs::{collect, collect_stopped, Collected, Jobs, LiveSum};
use super::kind::TestKind;
use super::record;
use super::sequence::{run_phases, Phases, Snapshots};
use super::setup::{legs, unspecified, Ends, Leg, OnProgress, Progress, TcpTest};
use super::slices::{self, Part, Slicer};
use crate::proto::{Direction, IntervalSample, Job};
use crate::results::{Protocol, RunDir, TestParams, TestResult};
use crate::runner::error::{err, Result};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

mod direction;
use direction::{checks, direction};

impl TestKind for TcpTest {
    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self, ends: &Ends) -> TestParams {
        let duration_s = self.duration.as_secs_f64();
        TestParams {
            streams: Some(self.streams),
            congestion: self.congestion.clone(),
            rate_bps: self.rate_bps,
            cpus: self.cpus.clone(),
            lab: ends.lab,
            omit_s: self.omit.as_secs_f64(),
            window_bytes: self.window,
            dscp: self.dscp,
            ..TestParams::new(Protocol::Tcp, self.ipv6, self.direction, duration_s)
        }
    }

    fn interval(&self) -> Option<Duration> {
        Some(self.interval)
    }

    fn body(
        &self,
        ends: &mut Ends,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
        result: &mut TestResult,
    ) -> Result<()> {
        let target_ip = ends.sink.addr.main(self.ipv6).ok_or_else(|| {
            err!(
                "the server side has no IPv{} address",
                if self.ipv6 { 6 } else { 4 }
            )
        })?;
        let phases = TcpPhases {
            t: self,
            cpus: stream_cpus(self),
            pairs: pairs(ends, self.direction),
            agents: ends.agents(),
            sink: ends.sink.agent,
            target_ip,
        };
        run_phases(&phases, ends, dir, on_progress, result)
    }
}

/// One client (on a generator) and its server (on the sink); the client
/// sends, receives or both, as the test's direction says.
struct Pair {
    client_agent: usize,
    client_id: u32,
    server_id: u32,
    /// Forward leg (client sends), reverse leg (server sends), as present.
    legs: Vec<Leg>,
}

fn pairs(ends: &Ends, direction: Direction) -> Vec<Pair> {
    // The UDP legs' order: per generator, per instance, forward then reverse.
    let all = legs(ends, direction);
    let per = if direction == Direction::Both { 2 } else { 1 };
    all.chunks(per)
        .map(|c| Pair {
            client_agent: c[0].gen_agent,
            client_id: super::setup::next_id(),
            server_id: super::setup::next_id(),
            legs: c.to_vec(),
        })
        .collect()
}

/// A TCP test's phases in the shared sequence: a server per pair on the
/// sink, then the clients at one agreed instant.
struct TcpPhases<'t> {
    t: &'t TcpTest,
    cpus: Vec<usize>,
    pairs: Vec<Pair>,
    agents: Vec<usize>,
    sink: usize,
    target_ip: IpAddr,
}

impl Phases for TcpPhases<'_> {
    /// The servers' ports, a pair's at its index.
    type Opened = Vec<u16>;
    /// The agreed start (realtime ns).
    type Ran = Option<u64>;

    fn open(&self, jobs: &mut Jobs) -> Result<(Vec<u16>, Vec<usize>)> {
        let target = (self.sink, self.target_ip);
        let ports = start_servers(jobs, self.t, target, &self.pairs, &self.cpus)?;
        Ok((ports, self.agents.clone()))
    }

    fn start_and_collect(
        &self,
        jobs: &mut Jobs,
        ports: &Vec<u16>,
        dir: &mut Option<&mut RunDir>,
        on_progress: OnProgress,
    ) -> Result<(Collected, Option<u64>, bool)> {
        let targets: Vec<SocketAddr> = ports
            .iter()
            .map(|&p| SocketAddr::new(self.target_ip, p))
            .collect();
        let (t, cpus) = (self.t, &self.cpus);
        run_clients(
            jobs,
            t,
            self.sink,
            &self.pairs,
            &targets,
            cpus,
            dir,
            on_progress,
        )
    }

    fn record(
        &self,
        ends: &Ends,
        (ports, start_at): (&Vec<u16>, Option<u64>),
        col: &mut Collected,
        counters: (&Snapshots, &Snapshots),
        result: &mut TestResult,
    ) -> Result<()> {
        let (t, pairs) = (self.t, &self.pairs);
        record_vlan(ends, t, pairs, col, result);
        let start_ns = start_at.unwrap_or(0);
        record_pairs(ends, t, (pairs, ports), col, start_ns, counters, result);
        Ok(())
    }
}

/// With `--vlan`: the tags and the VLAN device each end's agent used.
fn record_vlan(ends: &Ends, t: &TcpTest, pairs: &[Pair], col: &Collected, result: &mut TestResult) {
    let Some(tags) = t.vlan else { return };
    let mut devices = Vec::new();
    for p in pairs {
        for (agent, id) in [
            (p.client_agent, p.client_id),
            (ends.sink.agent, p.server_id),
        ] {
            if let Some(dev) = &col.summary(id).vlan_device {
                let d = format!("{}: {dev}", ends.role(agent));
                if !devices.contains(&d) {
                    devices.push(d);
                }
            }
        }
    }
    result.vlan = Some(crate::results::TestVlan { tags, devices });
}

/// The cores TCP streams use. Both ends of stream i share cpus[i % n]: on
/// veth the receive path runs in the sender's softirq, and a stream whose
/// ends sit on two cores has its segments delivered from two backlogs, out
/// of order, which the sender takes for loss (spurious retransmits).
/// Same-core ends avoid that.
fn stream_cpus(t: &TcpTest) -> Vec<usize> {
    if t.cpus.is_empty() {
        (0..std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1))
            .collect()
    } else {
        t.cpus.clone()
    }
}

/// Starts one listening server per pair on the sink; returns their ports.
fn start_servers(
    jobs: &mut Jobs,
    t: &TcpTest,
    (sink, target): (usize, IpAddr),
    pairs: &[Pair],
    cpus: &[usize],
) -> Result<Vec<u16>> {
    let streams = t.streams.max(1);
    let expect = if t.direction == Direction::Both {
        streams * 2
    } else {
        streams
    };
    let mut ports = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        let port = jobs
            .start(
                sink,
                p.server_id,
                Job::TcpListen {
                    bind: unspecified(t.ipv6),
                    port: super::setup::nth_port(t.port, i)?,
                    pacing_bytes_per_s: t.pacing_bytes_per_s(),
                    expect_streams: expect,
                    duration_ms: (t.duration + t.omit).as_millis() as u64,
                    interval_ms: slices::sample_ms(t.interval),
                    cpus: cpus.to_vec(),
                    congestion: t.congestion.clone(),
                    window: t.window,
                    dscp: t.dscp,
                    vlan: t.vlan,
                    target: Some(target),
                },
                None,
            )?
            .ok_or_else(|| err!("the TCP server reported no port"))?;
        ports.push(port);
    }
    Ok(ports)
}

/// Each client's and server's job id, with the name of its pair's leg.
fn roles_of(pairs: &[Pair]) -> HashMap<u32, String> {
    pairs
        .iter()
        .flat_map(|p| {
            let name = p.legs[0].name.clone();
            [(p.client_id, name.clone()), (p.server_id, name)]
        })
        .collect()
}

/// The client's job: `t`'s streams to `target`, on `cpus`.
fn connect_job(t: &TcpTest, target: SocketAddr, cpus: &[usize]) -> Job {
    Job::TcpConnect {
        target,
        streams: t.streams.max(1),
        direction: t.direction,
        duration_ms: (t.duration + t.omit).as_millis() as u64,
        interval_ms: slices::sample_ms(t.interval),
        cpus: cpus.to_vec(),
        congestion: t.congestion.clone(),
        buffer_len: t.buffer_len,
        allow: t.allow.clone(),
        pacing_bytes_per_s: t.pacing_bytes_per_s(),
        window: t.window,
        dscp: t.dscp,
        vlan: t.vlan,
    }
}

/// The interval lines' slicer over the pairs' jobs, a line per leg.
fn slicer_of(t: &TcpTest, pairs: &[Pair], all_ids: &[u32]) -> Slicer {
    let labels: Vec<String> = pairs
        .iter()
        .flat_map(|p| p.legs.iter().map(|l| slices::sum_label(&l.name)))
        .collect();
    Slicer::new(
        t.interval.as_secs_f64(),
        (t.duration + t.omit).as_secs_f64(),
        t.omit.as_secs_f64(),
        all_ids,
        &labels,
    )
}

/// Stops every pair's client and server.
fn stop_pairs(jobs: &mut Jobs, pairs: &[Pair], sink: usize) {
    for p in pairs {
        jobs.stop(p.client_agent, p.client_id, vec![]);
        jobs.stop(sink, p.server_id, vec![]);
    }
}

/// Starts every client at one agreed instant, reports progress while they
/// run and stops both sides if the run is cut short. Returns what was
/// collected, the agreed start (realtime ns) and whether the run ended on
/// its own.
#[allow(clippy::too_many_arguments)]
fn run_clients(
    jobs: &mut Jobs,
    t: &TcpTest,
    sink: usize,
    pairs: &[Pair],
    targets: &[SocketAddr],
    cpus: &[usize],
    dir: &mut Option<&mut RunDir>,
    on_progress: OnProgress,
) -> Result<(Collected, Option<u64>, bool)> {
    let roles = roles_of(pairs);
    let clients: Vec<usize> = pairs.iter().map(|p| p.client_agent).collect();
    let start_at = jobs.agree_start(&clients);
    let t0 = jobs.fleet.now();
    for (p, &target) in pairs.iter().zip(targets) {
        jobs.start(
            p.client_agent,
            p.client_id,
            connect_job(t, target, cpus),
            start_at,
        )?;
    }
    let mut col = Collected::new(dir.as_deref().map(|d| d.path.as_path()));
    let client_ids: Vec<u32> = pairs.iter().map(|p| p.client_id).collect();
    let server_ids: Vec<u32> = pairs.iter().map(|p| p.server_id).collect();
    let all_ids: Vec<u32> = client_ids.iter().chain(&server_ids).copied().collect();
    let whole = t.duration + t.omit;
    let dur = whole.as_secs_f64();
    let sides = stream_sides(pairs, t.direction);
    let mut slicer = slicer_of(t, pairs, &all_ids);
    // Live rates per job and side: key 2·id for what a job sends, 2·id+1
    // for what it receives (under -R the client receives).
    let tx_keys: Vec<u32> = all_ids.iter().map(|id| id * 2).collect();
    let rx_keys: Vec<u32> = all_ids.iter().map(|id| id * 2 + 1).collect();
    let mut live = LiveSum::default();
    let mut last = Progress {
        test: t.name.clone(),
        duration_s: dur,
        sliced: true,
        ..Default::default()
    };
    let lead = start_at
        .map(|s| Duration::from_nanos(s.saturating_sub(jobs.fleet.unix_ns())))
        .unwrap_or_default();
    let mut on_sample = |id: u32, s: &IntervalSample, now: Instant| {
        if let (Some(d), Some(role)) = (dir.as_deref_mut(), roles.get(&id)) {
            d.log_interval(&t.name, role, s);
        }
        let parts = tcp_parts(&sides, id, s);
        let sent: u64 = parts.iter().filter(|p| p.sender).map(|p| p.bytes).sum();
        let got: u64 = parts.iter().filter(|p| !p.sender).map(|p| p.bytes).sum();
        live.update(id * 2, s, sent, 0);
        live.update(id * 2 + 1, s, got, 0);
        (_, last.tx_bps, _) = live.sum(&tx_keys);
        (_, last.rx_bps, _) = live.sum(&rx_keys);
        last.slices = slicer.add(id, s.t_start, s.t_end, &parts);
        last.elapsed_s = now
            .saturating_duration_since(t0)
            .saturating_sub(lead)
            .as_secs_f64()
            .min(dur);
        on_progress(&last);
    };
    let done = collect(
        jobs.fleet,
        &mut col,
        &all_ids,
        t0 + lead + whole + Duration::from_secs(20),
        &mut on_sample,
    )?;
    if !done {
        stop_pairs(jobs, pairs, sink);
        let by = jobs.fleet.now() + Duration::from_secs(3);
        let _ = collect_stopped(jobs.fleet, &mut col, &all_ids, by, &mut on_sample);
    }
    last.slices = slicer.finish();
    if !last.slices.is_empty() {
        on_progress(&last);
    }
    Ok((col, start_at, done))
}

/// Which direction each job's streams count in: per job id, the label of
/// what it sends and of what it receives (a client sends forward and
/// receives the reverse leg; its server the other way round).
type StreamSides = HashMap<u32, (Option<String>, Option<String>)>;

fn stream_sides(pairs: &[Pair], direction: Direction) -> StreamSides {
    let mut out = StreamSides::new();
    for p in pairs {
        // A pair's legs are [forward], [reverse] or [forward, reverse].
        let name = |i: usize| p.legs.get(i).map(|l| slices::sum_label(&l.name));
        let (fwd, rev) = match direction {
            Direction::Forward => (name(0), None),
            Direction::Reverse => (None, name(0)),
            Direction::Both => (name(0), name(1)),
        };
        out.insert(p.client_id, (fwd.clone(), rev.clone()));
        out.insert(p.server_id, (rev, fwd));
    }
    out
}

/// One TCP sample as the slicer's parts: the bytes of the job's sending
/// streams (with their retransmits) and of its receiving ones.
fn tcp_parts(sides: &StreamSides, id: u32, s: &IntervalSample) -> Vec<Part> {
    let Some((sends, receives)) = sides.get(&id) else {
        return vec![];
    };
    let mut out = Vec::new();
    for (label, sender) in [(sends, true), (receives, false)] {
        let Some(label) = label else { continue };
        let streams = s.streams.iter().filter(|x| x.sender == sender);
        out.push(Part {
            direction: label.clone(),
            sender,
            bytes: streams.clone().map(|x| x.bytes).sum(),
            retransmits: streams.map(|x| x.retransmits).sum(),
            ..Default::default()
        });
    }
    out
}

/// Each pair's legs as directions with their checks, then CPU, the
/// bottleneck verdict and, with several generators, the aggregate.
fn record_pairs(
    ends: &Ends,
    t: &TcpTest,
    pairs: (&[Pair], &[u16]),
    col: &mut Collected,
    start_ns: u64,
    (before, after): (&Snapshots, &Snapshots),
    result: &mut TestResult,
) {
    let sink = ends.sink.agent;
    let (pairs, ports) = pairs;
    let mut legs_done = Vec::new();
    for (p, &port) in pairs.iter().zip(ports) {
        let client = col.summary(p.client_id);
        let server = col.summary(p.server_id);
        let client_iv = col.intervals.take(p.client_id);
        let server_iv = col.intervals.take(p.server_id);
        for leg in &p.legs {
            let fwd = leg.tx_agent == p.client_agent && leg.rx_agent == sink;
            let (txs, rxs, tx_iv, rx_iv) = if fwd {
                (&client, &server, &client_iv, &server_iv)
            } else {
                (&server, &client, &server_iv, &client_iv)
            };
            let mut d = direction(leg, (txs, rxs), (tx_iv, rx_iv), ends, t.omit.as_secs_f64());
            d.start_offset_s = record::start_offset(ends.fleet, p.client_agent, &client, start_ns);
            d.port = Some(port);
            if t.dscp.is_some() {
                d.dscp_note = Some(crate::results::TCP_DSCP_NOTE.into());
            }
            let kernel = !ends.many() && t.direction != Direction::Both;
            checks(
                ends,
                leg,
                &d,
                kernel.then_some((t.ipv6, before, after)),
                result,
            );
            result.directions.push(d);
            legs_done.push(leg.clone());
        }
    }
    // CPU over the clients' run time: the clients are the legs' "senders"
    // for timing purposes.
    let timing: Vec<Leg> = pairs
        .iter()
        .map(|p| Leg {
            tx_id: p.client_id,
            ..p.legs[0].clone()
        })
        .collect();
    record::cpu(ends, before, after, col, &timing, result);
    record::bottleneck(ends, before, after, col, &timing, result);
    if ends.many() {
        result.aggregate = Some(record::aggregate(ends, &legs_done, result, None));
    }
}
