//! The sending loop both UDP engines share: validation, engine choice, pacing
//! to a rate profile, sequence numbers per flow, interval reports, counters
//! and the sender's summary. How one batch reaches the wire is a
//! [`Transmit`]: UDP sockets ([`super::udp::SocketTx`]) or whole Ethernet
//! frames on an AF_PACKET socket ([`super::packet::PacketTx`]).

use super::udp::{check_frames, emit, frame_sequence, Header};
use super::{check_destination, packet, udp, IntervalClock, JobCtx};
use crate::proto::{
    Cidr, EndpointSummary, FlowCounters, FlowSpec, FrameSpec, IntervalSample, RateProfile, TxEngine,
};
use crate::sys;
use std::io;
use std::time::{Duration, Instant};

/// Parameters of a sending job (from `Job::UdpSend`).
pub struct SendSpec {
    pub flows: Vec<FlowSpec>,
    pub frame: FrameSpec,
    pub rate: Option<RateProfile>,
    pub duration: Duration,
    pub batch: usize,
    pub cpus: Vec<usize>,
    pub allow: Vec<Cidr>,
    pub tx_engine: TxEngine,
}

/// One datagram of a batch: its flow (index into the job's flows), its frame
/// size (index into [`frame_sequence`]) and the linerate header it carries.
#[derive(Debug, Clone, Copy)]
pub struct Msg {
    pub flow: usize,
    pub size: usize,
    pub header: Header,
}

/// Puts batches of datagrams on the wire.
pub trait Transmit: Send {
    /// Flows per send group (one socket each); no group is empty.
    fn groups(&self) -> Vec<Vec<usize>>;
    /// Sends `msgs`, all of group `group`; returns how many the kernel took
    /// (a prefix of `msgs`). At most the batch size given at opening.
    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize>;
    /// "socket" or "packet", for results.
    fn name(&self) -> &'static str;
}

/// A sending job with its engine open, ready to run on its own thread.
pub struct Sender {
    spec: SendSpec,
    sizes: Vec<u32>,
    batch: usize,
    tx: Box<dyn Transmit>,
    note: Option<String>,
}

/// Validates a sending job and opens its engine: done before the agreed start
/// instant, so route and neighbour look-ups do not delay the first packet and
/// a refusal reaches the controller at once.
pub fn open(spec: SendSpec) -> Result<Sender, String> {
    if spec.flows.is_empty() {
        return Err("a UDP send job needs at least one flow".into());
    }
    let ipv6 = spec.flows[0].dst.is_ipv6();
    if spec.flows.iter().any(|f| f.dst.is_ipv6() != ipv6) {
        return Err("all flows of one job must use the same IP version".into());
    }
    for f in &spec.flows {
        check_destination(f.dst.ip(), &spec.allow)?;
    }
    check_frames(spec.frame, ipv6)?;
    let batch = spec.batch.clamp(1, 1024);
    let sizes = frame_sequence(spec.frame);
    let (tx, note): (Box<dyn Transmit>, Option<String>) = match spec.tx_engine {
        TxEngine::Socket => (Box::new(udp::SocketTx::open(&spec, ipv6, batch)?), None),
        TxEngine::Packet => (
            Box::new(
                packet::PacketTx::open(&spec.flows, &sizes, ipv6, batch).map_err(|e| {
                    format!(
                        "the packet engine cannot run here: {e}; use --tx-engine socket or auto"
                    )
                })?,
            ),
            None,
        ),
        TxEngine::Auto => match packet::PacketTx::open(&spec.flows, &sizes, ipv6, batch) {
            Ok(p) => (Box::new(p), None),
            Err(e) => (
                Box::new(udp::SocketTx::open(&spec, ipv6, batch)?),
                Some(format!("packet refused: {e}")),
            ),
        },
    };
    Ok(Sender {
        spec,
        sizes,
        batch,
        tx,
        note,
    })
}

impl Sender {
    /// Sends until the duration ends or the controller stops the job.
    pub fn run(mut self, ctx: &JobCtx) -> Result<EndpointSummary, String> {
        sys::pin_thread(&self.spec.cpus)
            .map_err(|e| format!("pinning the sender to CPUs {:?}: {e}", self.spec.cpus))?;
        let mut summary = run(ctx, &self.spec, &self.sizes, self.batch, self.tx.as_mut())?;
        summary.tx_engine = self.tx.name().into();
        summary.tx_engine_note = self.note;
        Ok(summary)
    }
}

/// Opens and runs a sending job in one go (tests, tools).
pub fn send(ctx: &JobCtx, spec: SendSpec) -> Result<EndpointSummary, String> {
    open(spec)?.run(ctx)
}

/// The pacing loop: what the profile has made due, in batches, through `tx`.
fn run(
    ctx: &JobCtx,
    spec: &SendSpec,
    sizes: &[u32],
    batch: usize,
    tx: &mut dyn Transmit,
) -> Result<EndpointSummary, String> {
    let groups = tx.groups();
    if groups.is_empty() || groups.iter().any(|g| g.is_empty()) {
        return Err("the sender has a send group without flows".into());
    }
    let mut msgs: Vec<Msg> = Vec::with_capacity(batch);
    let mut seq = vec![0u64; spec.flows.len()];
    let mut rr = vec![0usize; groups.len()];
    let mut size_idx = 0usize;
    let mut group = 0usize;

    let cpu0 = sys::process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + spec.duration;
    let mut clock = IntervalClock::new(start, ctx.interval);
    let mut total = IntervalSample::default();
    let mut cur = IntervalSample::default();
    let mut hard_errors = 0u32;
    let mut missed = 0u64;

    loop {
        let now = Instant::now();
        if now >= deadline || ctx.stopped() {
            break;
        }
        if let Some((a, b)) = clock.due(now) {
            cur.tx_target = target_between(spec.rate.as_ref(), a, b);
            emit(ctx, &mut cur, &mut total, a, b);
        }
        let mut n = batch;
        if let Some(profile) = &spec.rate {
            // Send what the profile has made due by now, in bursts of at most
            // one batch; sleep while nothing is due.
            let t = clock.elapsed(now);
            let due = profile.due(t) as u64;
            // `missed` counts packets the sender fell behind by and gave up
            // on: a tester that stalls must not catch up later with a burst
            // above the asked rate (it shows as offered < target instead).
            let sent = total.tx_packets + cur.tx_packets + missed;
            let rate = profile.rate_at(t);
            let slack = (batch as f64).max(rate * 0.002) as u64;
            if due > sent + slack {
                missed += due - sent - slack;
                continue;
            }
            if due <= sent {
                let wait = if rate > 0.0 {
                    Duration::from_secs_f64(((sent + 1) as f64 - profile.due(t)).max(0.0) / rate)
                } else {
                    Duration::from_millis(1)
                };
                if wait > Duration::from_micros(100) {
                    std::thread::sleep(wait.min(Duration::from_millis(2)));
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            n = n.min((due - sent) as usize);
        }
        let g = group % groups.len();
        group = group.wrapping_add(1);
        let flows = &groups[g];
        let now_ns = sys::monotonic_ns();
        msgs.clear();
        for _ in 0..n {
            let fi = flows[rr[g] % flows.len()];
            rr[g] = rr[g].wrapping_add(1);
            let sz = size_idx % sizes.len();
            size_idx = size_idx.wrapping_add(1);
            msgs.push(Msg {
                flow: fi,
                size: sz,
                header: Header {
                    flow: spec.flows[fi].id,
                    seq: seq[fi],
                    sent_ns: now_ns,
                },
            });
            seq[fi] += 1;
        }
        let sent = match tx.send(g, &msgs) {
            Ok(k) => {
                hard_errors = 0;
                k.min(n)
            }
            Err(e) => {
                cur.tx_errors += 1;
                match e.raw_os_error() {
                    // A full socket buffer or device queue.
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {}
                    // ICMP errors reported on a connected socket, a filter's reject.
                    Some(libc::ECONNREFUSED) | Some(libc::EPERM) | Some(libc::EHOSTUNREACH) => {}
                    _ => {
                        hard_errors += 1;
                        if hard_errors > 1000 {
                            return Err(format!(
                                "sending UDP datagrams ({} engine) keeps failing: {e}",
                                tx.name()
                            ));
                        }
                    }
                }
                0
            }
        };
        for m in &msgs[sent..] {
            // Unsent datagrams keep their sequence numbers for the next batch.
            seq[m.flow] -= 1;
        }
        let unsent = n - sent;
        rr[g] = rr[g].wrapping_sub(unsent);
        size_idx = size_idx.wrapping_sub(unsent);
        for m in &msgs[..sent] {
            cur.tx_packets += 1;
            cur.tx_bytes += u64::from(sizes[m.size]);
        }
    }
    let (a, b) = clock.close(Instant::now());
    cur.tx_target = target_between(spec.rate.as_ref(), a, b);
    emit(ctx, &mut cur, &mut total, a, b);
    Ok(EndpointSummary {
        elapsed_s: b,
        cpu_s: sys::process_cpu_seconds() - cpu0,
        max_rss_bytes: sys::peak_rss_bytes(),
        tx_packets: total.tx_packets,
        tx_bytes: total.tx_bytes,
        tx_errors: total.tx_errors,
        tx_target: total.tx_target,
        flows: spec
            .flows
            .iter()
            .zip(&seq)
            .map(|(f, &n)| FlowCounters {
                id: f.id,
                tx_packets: n,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

/// Packets a profile asks for between two instants (0 when unpaced).
fn target_between(rate: Option<&RateProfile>, a: f64, b: f64) -> u64 {
    rate.map(|r| (r.due(b) - r.due(a)).round().max(0.0) as u64)
        .unwrap_or(0)
}
