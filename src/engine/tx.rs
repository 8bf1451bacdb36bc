//! The sending loop both UDP engines share: validation, engine choice, pacing
//! to a rate profile, sequence numbers per flow, interval reports, counters
//! and the sender's summary. How one batch reaches the wire is a
//! [`Transmit`]: UDP sockets ([`super::socket::SocketTx`]) or whole Ethernet
//! frames on an AF_PACKET socket ([`super::packet::PacketTx`]).

use super::frame::{check_frames, frame_sequence, Msg, Pacing, SendSpec, Transmit};
use super::workers::{self, Counters, Intervals, Totals};
use super::xdp::live::{LiveTx, PACED_RUN_S};
use super::EngineError;
use super::{afxdp, check_destination, packet, socket, IntervalClock, JobCtx};
use crate::host::kernel;
use crate::model::stderr::errln;
use crate::proto::frame::Header;
use crate::proto::{EndpointSummary, FlowCounters, RateProfile, ThreadFigures, TxEngine};
use crate::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One worker's part of a sending job: its flows (a sub-spec whose rate is
/// the flows' share of the job's rate) and its open engine.
struct Share {
    spec: SendSpec,
    tx: Box<dyn Transmit>,
    cpu: Option<usize>,
}

/// Frames per BPF_PROG_RUN of the live engine at an unlimited rate.
const LIVE_UNPACED_BATCH: usize = 8192;
/// Paced, an engine that paces in the kernel (live) is handed the frames
/// due within this horizon at a time; its runs last about
/// [`PACED_RUN_S`], so a run's frames are all inside it.
const KERNEL_PACED_HORIZON_S: f64 = 2.0 * PACED_RUN_S;
/// How late a kernel-paced frame may be and still be sent: the later of
/// [`KERNEL_PACED_LATE_FRAMES`] frames and this. The gap between two runs
/// (page pool set-up, the cursor written and read back) is 30-100 µs, and
/// with only 64 frames allowed a 3 Mpps run gave up 2.6 % of its frames at
/// those gaps (2-core VM, 6.18); with 100 µs, 0.04 %.
const KERNEL_PACED_LATE_S: f64 = 100e-6;
/// Frames a kernel-paced sender may fall behind and still catch up (at
/// once, or at [`KERNEL_PACED_CATCH_UP`] times the rate with
/// [`USE_CATCH_GAP`]): half a veth's 256-frame ring.
/// In the lab (2-core VM, 6.18) the paced generator is held off its core
/// for up to a few ms at a time (its own runs' set-up, the tester's
/// real-time receive threads). Caught up back to back, 128 frames made a
/// 320 kpps trial give up 2-3 % of its frames; 1024 frames at 1.1× the
/// rate gave up 0.35-0.67 %, but against a DUT policed to 120 kpps every
/// frame caught up is one the policer drops (its bucket holds 5): the NDR
/// came out 7 % low. A lag is only recovered by sending above the rate,
/// which a DUT at its limit cannot take, so the bound stays small and the
/// search counts a short trial at what it offered.
const KERNEL_PACED_LATE_FRAMES: f64 = 128.0;
/// How much faster than the rate a kernel-paced sender catches up: the
/// DUT sees at most this overspeed, never a burst, and a backlog of N
/// frames is sent within 10 N frame times.
const KERNEL_PACED_CATCH_UP: f64 = 1.1;
/// Whether kernel-paced runs bound their catch-up to
/// [`KERNEL_PACED_CATCH_UP`]; off until measured with the 128-frame bound.
const USE_CATCH_GAP: bool = false;
/// The most frames one kernel-paced run is handed.
const KERNEL_PACED_MOST: u64 = 65_536;
/// Below this peak rate auto leaves paced runs to the packet engine: live
/// spins a core for the whole run whatever the rate, the packet engine's
/// sleeps between batches pace a slow profile exactly for less.
const LIVE_PACED_FROM_PPS: f64 = 50_000.0;
/// A sender that paces itself (not the kernel) sends what falls due in
/// quanta of this many seconds' frames (a batch at most): at 20 kpps two
/// frames every 100 µs, at 100 kpps ten, instead of one frame whenever one
/// is due, which left the gaps too short to sleep in and spun a core.
const SEND_QUANTUM_S: f64 = 100e-6;
/// Waits longer than this sleep (with 1 µs of timer slack); shorter ones
/// spin.
const SLEEP_FROM_S: f64 = 20e-6;
/// SCHED_FIFO priority of a sender that sleeps between its quanta
/// ([`sleeps_between_quanta`]): the lowest, that of the lab's NAPI threads.
const SLEEPING_SENDER_PRIORITY: i32 = 1;
/// The sender thread's timer slack, ns: a sleep of 100 µs ends within a
/// few µs of its time rather than up to 50 µs late (the kernel's default).
const SENDER_TIMER_SLACK_NS: u64 = 1_000;

/// A sending job with its engines open, ready to run on its own thread.
pub struct Sender {
    spec: SendSpec,
    sizes: Vec<u32>,
    batch: usize,
    shares: Vec<Share>,
    note: Option<String>,
}

/// Opens the engine `spec.tx_engine` asks for over `spec`'s flows; with
/// auto, the live engine where it runs (unless the profile is slow), else
/// the packet engine, else the socket engine, and why the faster ones were
/// refused.
fn open_engine(
    spec: &SendSpec,
    sizes: &[u32],
    ipv6: bool,
    batch: usize,
) -> Result<(Box<dyn Transmit>, Option<String>), EngineError> {
    Ok(match spec.tx_engine {
        TxEngine::Socket => (Box::new(socket::SocketTx::open(spec, ipv6, batch)?), None),
        TxEngine::Packet => (
            Box::new(
                packet::PacketTx::open(&spec.flows, sizes, ipv6, spec.marks(), batch).map_err(
                    |e| {
                        EngineError::Unavailable(format!(
                        "the packet engine cannot run here: {e}; use --tx-engine socket or auto"
                    ))
                    },
                )?,
            ),
            None,
        ),
        TxEngine::Xdp => (
            Box::new(
                afxdp::XdpTx::open(&spec.flows, sizes, ipv6, spec.marks()).map_err(|e| {
                    EngineError::Unavailable(format!(
                    "the xdp engine cannot run here: {e}; use --tx-engine packet, socket or auto"
                ))
                })?,
            ),
            None,
        ),
        TxEngine::Live => {
            let t = LiveTx::open(&spec.flows, sizes, ipv6, spec.marks()).map_err(|e| {
                EngineError::Unavailable(format!(
                    "the live engine cannot run here: {e}; use --tx-engine packet, socket or auto"
                ))
            })?;
            let note = join_notes(t.note(), spin_note(spec));
            (Box::new(t), note)
        }
        // Auto: live frames where the kernel, permissions and egress allow
        // (the kernel's own floor); then AF_XDP where the driver runs it
        // zero-copy; its copy mode (veth, most drivers) is not reliably
        // faster than the packet engine, which comes next, then the socket
        // engine.
        TxEngine::Auto => {
            let slow = below_live_pacing(spec);
            let live = if slow {
                format!(
                    "live is used from {} kpps: below, the packet engine paces without \
                     spinning a core",
                    LIVE_PACED_FROM_PPS / 1e3
                )
            } else {
                match LiveTx::open(&spec.flows, sizes, ipv6, spec.marks()) {
                    Ok(t) => {
                        let note = join_notes(t.note(), spin_note(spec));
                        return Ok((Box::new(t), note));
                    }
                    Err(e) => format!("live refused: {e}"),
                }
            };
            match packet::open_fastest(&spec.flows, sizes, ipv6, spec.marks(), batch) {
                Ok(t) => (t, Some(live)),
                Err(e) => (
                    Box::new(socket::SocketTx::open(spec, ipv6, batch)?),
                    Some(format!("{live}; packet refused: {e}")),
                ),
            }
        }
    })
}

/// Up to this peak rate a paced live run says that it spins a core: the
/// packet engine would pace it for a fraction of one (0.83 s of CPU in a
/// 3 s run at 100 kpps against live's 2.55 s, on the 2-core test VM beside
/// other work).
const SPIN_NOTE_BELOW_PPS: f64 = 500_000.0;

/// Why a paced live run keeps a core busy at a rate that looks low, and
/// what paces it without spinning: its frames are closer together than a
/// sleep and a wakeup take (about 25 µs on a 2-core VM, where sleeps of 10
/// and 20 µs fell behind and 50 µs ones held), so the pacer waits for each
/// in the kernel.
fn spin_note(spec: &SendSpec) -> Option<String> {
    let pps = spec.rate.as_ref()?.max_pps();
    if !(pps > 0.0 && pps < SPIN_NOTE_BELOW_PPS) {
        return None;
    }
    Some(format!(
        "paced by a core that spins in the kernel for the whole run: frames {:.0} µs apart \
         are closer together than a sleep and its wakeup take; --tx-engine packet sends \
         them in 100 µs bursts ({} frames) and sleeps in between, for less CPU and \
         burstier traffic",
        1e6 / pps,
        (pps * SEND_QUANTUM_S).ceil() as u64
    ))
}

/// Two optional notes as one.
fn join_notes(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// Validates a sending job and opens its engines, one per worker thread:
/// done before the agreed start instant, so route and neighbour look-ups do
/// not delay the first packet and a refusal reaches the controller at once.
pub fn open(spec: SendSpec) -> Result<Sender, EngineError> {
    if spec.flows.is_empty() {
        return Err(EngineError::Invalid(
            "a UDP send job needs at least one flow".into(),
        ));
    }
    let ipv6 = spec.flows[0].dst.is_ipv6();
    if spec.flows.iter().any(|f| f.dst.is_ipv6() != ipv6) {
        return Err(EngineError::Invalid(
            "all flows of one job must use the same IP version".into(),
        ));
    }
    for f in &spec.flows {
        check_destination(f.dst.ip(), &spec.allow)?;
    }
    check_frames(spec.frame, ipv6, spec.vlan)?;
    let batch = spec.batch.clamp(1, 1024);
    let sizes = frame_sequence(spec.frame);
    let n = workers::thread_count(spec.threads, &spec.cpus, spec.flows.len());
    if spec.tx_engine == TxEngine::Xdp && n > 1 {
        return Err(EngineError::Invalid(format!(
            "--tx-engine xdp binds one AF_XDP socket to queue 0 of each interface, so it runs \
             one sender thread, not {n}; use --threads 1, or --tx-engine packet for several"
        )));
    }
    let total_flows = spec.flows.len() as f64;
    let mut shares = Vec::with_capacity(n);
    let mut note = None;
    let split = workers::shares(spec.flows.len(), n);
    let counts = spec.max_frames.map(|m| frame_shares(m, &split));
    for (i, idx) in split.into_iter().enumerate() {
        let mut sub = spec.clone();
        sub.flows = idx.iter().map(|&f| spec.flows[f].clone()).collect();
        // Each worker paces its flows' share of the job's rate, so every
        // flow gets the same rate however the flows divide.
        let part = sub.flows.len() as f64 / total_flows;
        sub.rate = spec.rate.as_ref().map(|r| r.scaled(part));
        sub.max_frames = counts.as_ref().map(|c| c[i]);
        let (tx, why) = open_engine(&sub, &sizes, ipv6, batch)?;
        note = note.or(why);
        shares.push(Share {
            spec: sub,
            tx,
            cpu: workers::worker_cpu(i, n, &spec.cpus),
        });
    }
    // The live engine sends a batch in one BPF_PROG_RUN whose fixed cost
    // (a page pool per call) is tens of µs: unpaced, it takes long runs;
    // paced, it spaces the frames itself (pace()).
    let batch = match shares.first() {
        Some(s) if s.tx.name() == "live" && spec.rate.is_none() => LIVE_UNPACED_BATCH,
        _ => batch,
    };
    Ok(Sender {
        spec,
        sizes,
        batch,
        shares,
        note,
    })
}

impl Sender {
    /// Sends until the duration ends or the controller stops the job: one
    /// worker per share, this thread reporting the sum of their counters.
    pub fn run(self, ctx: &JobCtx) -> Result<EndpointSummary, EngineError> {
        let Sender {
            spec,
            sizes,
            batch,
            shares,
            note,
        } = self;
        let engine = shares.first().map(|s| s.tx.name()).unwrap_or("socket");
        let socket_buffers = shares.first().and_then(|s| s.tx.socket_buffers());
        let check_frames = shares.iter().map(|s| s.tx.own_frames()).sum();
        let cpu0 = sys::process_cpu_seconds();
        let abort = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let mut handles = Vec::with_capacity(shares.len());
        let mut counters = Vec::with_capacity(shares.len());
        for (i, share) in shares.into_iter().enumerate() {
            let c = Arc::new(Counters::default());
            counters.push(c.clone());
            let (ctx, abort, sizes) = (ctx.clone(), abort.clone(), sizes.clone());
            let sampler = std::thread::current();
            let h = kernel::spawn_named("lr-udp-send", move || {
                let out = worker(&ctx, &abort, share, &sizes, batch, &c, start, i);
                if out.is_err() {
                    abort.store(true, Ordering::Relaxed);
                }
                // The sampler below sleeps until an interval is due: a
                // worker that ends wakes it to join.
                sampler.unpark();
                out
            })
            .map_err(EngineError::io("starting a sender thread"))?;
            handles.push(h);
        }
        let mut clock = IntervalClock::new(start, ctx.interval);
        let mut iv = Intervals::default();
        let deadline = start + spec.duration;
        let target = |a: f64, b: f64| {
            // Nothing is asked for after the job's duration.
            let d = spec.duration.as_secs_f64();
            target_between(spec.rate.as_ref(), a.min(d), b.min(d))
        };
        while handles.iter().any(|h| !h.is_finished()) {
            let now = Instant::now();
            // Intervals that end by the deadline; the last one is closed
            // when the workers have stopped, at the instant they did.
            if now < deadline {
                if let Some((a, b)) = clock.due(now) {
                    let t = Totals::of(counters.iter().map(|c| c.as_ref()));
                    ctx.emit(iv.sample(t, a, b, target(a, b)));
                }
            }
            // Asleep until the next interval is due (at most 100 ms past
            // the deadline, should a wakeup be lost); a worker that ends
            // unparks this thread. No short polling beside the senders.
            let wait = if now < deadline {
                clock.until_due(now).min(deadline - now)
            } else {
                Duration::from_millis(100)
            };
            std::thread::park_timeout(wait.max(Duration::from_micros(100)));
        }
        let (mut flows, per_thread, ended) = join_workers(handles)?;
        let (a, b) = clock.close(start + ended);
        let t = Totals::of(counters.iter().map(|c| c.as_ref()));
        ctx.emit(iv.sample(t, a, b, target(a, b)));
        flows.sort_by_key(|f: &FlowCounters| f.id);
        Ok(EndpointSummary {
            elapsed_s: b,
            cpu_s: sys::process_cpu_seconds() - cpu0,
            max_rss_bytes: sys::peak_rss_bytes(),
            tx_packets: t.tx_packets,
            tx_bytes: t.tx_bytes,
            tx_errors: t.tx_errors,
            tx_target: iv.total.tx_target,
            flows,
            tx_engine: engine.into(),
            tx_engine_note: note,
            check_frames,
            per_thread,
            socket_buffers,
            ..Default::default()
        })
    }
}

/// Opens and runs a sending job in one go (tests, tools).
pub fn send(ctx: &JobCtx, spec: SendSpec) -> Result<EndpointSummary, EngineError> {
    open(spec)?.run(ctx)
}

/// Joins the sending workers: their flows, their threads' figures and
/// when the last one stopped; the first error if one failed.
fn join_workers(
    handles: Vec<std::thread::JoinHandle<Result<WorkerEnd, EngineError>>>,
) -> Result<(Vec<FlowCounters>, Vec<ThreadFigures>, Duration), EngineError> {
    let mut per_thread = Vec::new();
    let mut flows = Vec::new();
    let mut err = None;
    let mut ended = Duration::ZERO;
    for h in handles {
        match h.join() {
            Ok(Ok(w)) => {
                flows.extend(w.flows);
                per_thread.push(w.figures);
                ended = ended.max(w.ended);
            }
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some(EngineError::Failed("a sender thread panicked".into()))),
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok((flows, per_thread, ended)),
    }
}

/// What a worker hands back: its flows' counters and its own figures.
struct WorkerEnd {
    flows: Vec<FlowCounters>,
    figures: ThreadFigures,
    /// When the worker stopped sending, since the job's start.
    ended: Duration,
}

#[allow(clippy::too_many_arguments)]
fn worker(
    ctx: &JobCtx,
    abort: &AtomicBool,
    mut share: Share,
    sizes: &[u32],
    batch: usize,
    c: &Counters,
    start: Instant,
    index: usize,
) -> Result<WorkerEnd, EngineError> {
    if let Some(cpu) = share.cpu {
        sys::pin_thread(&[cpu]).map_err(EngineError::io(format!(
            "pinning a sender thread to CPU {cpu}"
        )))?;
    } else {
        sys::pin_thread(&share.spec.cpus).map_err(|e| {
            EngineError::Invalid(format!(
                "pinning the sender to CPUs {:?}: {e}",
                share.spec.cpus
            ))
        })?;
    }
    // Precise sleeps between paced quanta; a host that refuses only wakes
    // the sender later, which the pacer's catch-up covers.
    let _ = sys::set_timer_slack_ns(SENDER_TIMER_SLACK_NS);
    if sleeps_between_quanta(&share.spec, share.tx.as_ref()) {
        // Lowest real-time priority: it wakes on time beside other work.
        // Refused without CAP_SYS_NICE: the sender then wakes as a normal
        // thread, and a late wake shows as frames given up.
        let _ = sys::set_fifo_self(SLEEPING_SENDER_PRIORITY);
    }
    let cpu0 = sys::thread_cpu_seconds();
    let stopped = || ctx.stopped() || abort.load(Ordering::Relaxed);
    let seq = pace(
        &stopped,
        &share.spec,
        sizes,
        batch,
        share.tx.as_mut(),
        c,
        start,
    )?;
    let ended = start.elapsed();
    let flows: Vec<FlowCounters> = share
        .spec
        .flows
        .iter()
        .zip(&seq)
        .map(|(f, &n)| FlowCounters {
            id: f.id,
            tx_packets: n,
            ..Default::default()
        })
        .collect();
    let ids = flows.iter().map(|f| f.id).collect();
    Ok(WorkerEnd {
        figures: workers::figures(index, share.cpu, ids, c, sys::thread_cpu_seconds() - cpu0),
        flows,
        ended,
    })
}

/// Whether a sender sleeps between its quanta: paced by itself (not by the
/// kernel) below [`LIVE_PACED_FROM_PPS`]. Such a sender wakes up to
/// thousands of times a second for a few frames each. As a normal thread it
/// waited behind other work on its CPU when it woke, at times longer than
/// its slack (32 frames, 32 ms at 1 kpps), and gave those frames up: on a
/// 2-core VM (6.18) running the test suite beside `stress-ng --cpu 1`, four
/// 3 s runs at 1 kpps sent 2,313 to 2,963 of 3,000 frames; at SCHED_FIFO 1
/// four runs sent 2,999 each (the last one is still due at the end).
/// Mostly asleep, it costs the others little at real-time priority, and
/// the kernel's RT throttling leaves them 5 % of the CPU whatever it does.
fn sleeps_between_quanta(spec: &SendSpec, tx: &dyn Transmit) -> bool {
    !tx.paces_itself() && below_live_pacing(spec)
}

/// Whether `spec` is paced with a peak below [`LIVE_PACED_FROM_PPS`]: auto
/// leaves it to the packet engine, whose sender then sleeps between quanta.
fn below_live_pacing(spec: &SendSpec) -> bool {
    spec.rate
        .as_ref()
        .is_some_and(|r| r.max_pps() < LIVE_PACED_FROM_PPS)
}

/// The pacing loop: what the profile has made due, in batches, through `tx`.
/// Returns the packets sent per flow (the next sequence numbers).
fn pace(
    stopped: &dyn Fn() -> bool,
    spec: &SendSpec,
    sizes: &[u32],
    batch: usize,
    tx: &mut dyn Transmit,
    c: &Counters,
    start: Instant,
) -> Result<Vec<u64>, EngineError> {
    let groups = tx.groups();
    if groups.is_empty() || groups.iter().any(|g| g.is_empty()) {
        return Err(EngineError::Invalid(
            "the sender has a send group without flows".into(),
        ));
    }
    let mut msgs: Vec<Msg> = Vec::with_capacity(batch);
    let kernel_paced = tx.paces_itself();
    let mut seq = vec![0u64; spec.flows.len()];
    let mut rr = vec![0usize; groups.len()];
    let mut size_idx = 0usize;
    // Packets tried per group, for picking the group furthest behind: paced
    // batches vary in size, so plain round-robin over groups would give
    // flows in different groups different rates.
    let mut group_sent = vec![0u64; groups.len()];

    let deadline = start + spec.duration;
    let duration_s = spec.duration.as_secs_f64();
    // The start instant on the clock kernel pacing reads (CLOCK_MONOTONIC,
    // as Instant is on Linux).
    let start_ns = sys::monotonic_ns().saturating_sub(start.elapsed().as_nanos() as u64);
    // Packets this worker has sent, kept locally; the shared counters get
    // the same numbers once per batch.
    let mut sent_total = 0u64;
    let mut hard_errors = 0u32;
    let mut missed = 0u64;
    // All the profile makes due over the run: the last quantum may be short.
    let due_at_end = spec
        .rate
        .as_ref()
        .map_or(u64::MAX, |p| p.due(duration_s) as u64);

    // A burst's frames: the loop stops when they are all sent.
    let limit = spec.max_frames.unwrap_or(u64::MAX);
    loop {
        let now = Instant::now();
        if now >= deadline || stopped() || sent_total >= limit {
            break;
        }
        let mut n = batch;
        let mut pacing = None;
        if let Some(profile) = &spec.rate {
            // Send what the profile has made due by now, in bursts of at most
            // one batch (or spaced by the engine); sleep while nothing is due.
            let t = now.saturating_duration_since(start).as_secs_f64();
            let due_f = profile.due(t);
            let due = due_f as u64;
            // `missed` counts packets the sender fell behind by and gave up
            // on: a tester that stalls must not catch up later with a burst
            // above the asked rate (it shows as offered < target instead).
            // What is still within the slack goes on in this same pass: a
            // pass that only gave up would find more due by its next one
            // whenever a pass takes longer than a frame's time (at line
            // rate, 67 ns), and would give up every frame from then on.
            let rate = profile.rate_at(t);
            let slack = (batch as f64).max(rate * 0.002) as u64;
            missed += due.saturating_sub(sent_total + missed + slack);
            let sent = sent_total + missed;
            if kernel_paced {
                // Hand the engine what falls due within the horizon, with
                // the instant the first is due and the spacing; it sends
                // each frame at its time.
                let end = (t + KERNEL_PACED_HORIZON_S).min(duration_s);
                let due_end = profile.due(end);
                let ahead = (due_end as u64).saturating_sub(sent).min(KERNEL_PACED_MOST);
                // The horizon's mean rate: a ramp's step inside it spreads.
                let pps = if end > t && due_end > due_f {
                    (due_end - due_f) / (end - t)
                } else {
                    rate
                };
                let wait = if ahead == 0 || pps <= 0.0 {
                    // Nothing within the horizon: wake for the next frame.
                    if rate > 0.0 {
                        ((sent + 1) as f64 - due_f) / rate
                    } else {
                        0.001
                    }
                } else {
                    ((sent + 1) as f64 - due_f) / pps
                };
                // Sleep until shortly before the first frame is due; the
                // engine waits the rest out itself.
                if ahead == 0 || pps <= 0.0 || wait > 200e-6 {
                    let w = (wait - 100e-6).clamp(10e-6, 0.002);
                    std::thread::sleep(Duration::from_secs_f64(w));
                    continue;
                }
                n = ahead as usize;
                let gap_ns = 1e9 / pps;
                pacing = Some(Pacing {
                    first_due_ns: start_ns.saturating_add_signed(((t + wait) * 1e9) as i64),
                    gap_ns,
                    // Late frames go out at once up to half a veth ring or
                    // the gap between two runs; later ones are given up.
                    late_ns: (KERNEL_PACED_LATE_FRAMES * gap_ns).max(KERNEL_PACED_LATE_S * 1e9)
                        as u64,
                    // Off: with the bound of 128 frames, catching up at
                    // 1.1× left the lag high for longer and later stalls
                    // pushed it past the bound (a 450 kpps interval fell
                    // 1.4 % short in the suite); KERNEL_PACED_CATCH_UP is
                    // kept for when the bound is measured anew.
                    catch_gap_ns: if USE_CATCH_GAP {
                        (gap_ns / KERNEL_PACED_CATCH_UP) as u64
                    } else {
                        0
                    },
                });
            } else {
                // Wait for a quantum of frames (the last ones of the run
                // may be fewer), sleeping rather than spinning when it is
                // further away than a wakeup costs.
                let quantum = ((rate * SEND_QUANTUM_S).ceil() as u64)
                    .clamp(1, batch as u64)
                    .min(due_at_end.saturating_sub(sent).max(1));
                let wait = if rate > 0.0 {
                    ((sent + quantum) as f64 - due_f).max(0.0) / rate
                } else {
                    1e-3
                };
                // What is due goes now when the run ends before the quantum.
                let last = due > sent && now + Duration::from_secs_f64(wait.min(1e3)) >= deadline;
                if due < sent + quantum && !last {
                    if wait > SLEEP_FROM_S {
                        std::thread::sleep(Duration::from_secs_f64(wait.min(2e-3)));
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                n = batch.min((due - sent) as usize);
            }
        }
        n = n.min(usize::try_from(limit - sent_total).unwrap_or(usize::MAX));
        if let (Some(p), Some(_)) = (pacing.as_mut(), spec.max_frames) {
            // A burst is its frames at the rate from whenever it starts: a
            // run cut to the burst's last frames must not be due in the
            // past, where the engine gives up what is late.
            p.first_due_ns = p.first_due_ns.max(sys::monotonic_ns());
        }
        let g = behind(&group_sent, &groups);
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
        let r = match pacing {
            Some(p) => tx.send_paced(g, &msgs, p).map(|(k, skipped)| {
                missed += skipped;
                k
            }),
            None => tx.send(g, &msgs),
        };
        let sent = match r {
            Ok(k) => {
                hard_errors = 0;
                k.min(n)
            }
            Err(e) => {
                Counters::add(&c.tx_errors, 1);
                match e.raw_os_error() {
                    // A full socket buffer or device queue.
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {}
                    // ICMP errors reported on a connected socket, a filter's reject.
                    Some(libc::ECONNREFUSED) | Some(libc::EPERM) | Some(libc::EHOSTUNREACH) => {}
                    _ => {
                        hard_errors += 1;
                        if hard_errors > 1000 {
                            return Err(EngineError::Invalid(format!(
                                "sending UDP datagrams ({} engine) keeps failing: {e}",
                                tx.name()
                            )));
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
        // Attempts, not successes: a group whose socket keeps failing must
        // not be picked forever.
        group_sent[g] += n as u64;
        let bytes: u64 = msgs[..sent].iter().map(|m| u64::from(sizes[m.size])).sum();
        sent_total += sent as u64;
        Counters::add(&c.tx_packets, sent as u64);
        Counters::add(&c.tx_bytes, bytes);
    }
    let stuck = tx.finish();
    if stuck > 0 {
        Counters::add(&c.tx_errors, stuck);
        errln!(
            "linerate agent: {stuck} frame(s) queued to the {} engine never left",
            tx.name()
        );
    }
    Ok(seq)
}

/// A burst of `frames` divided among workers in proportion to their
/// flows (`split`: each worker's flow indices), the remainder to the first
/// ones, so the workers' counts add up to the burst.
fn frame_shares(frames: u64, split: &[Vec<usize>]) -> Vec<u64> {
    let total: u64 = split.iter().map(|s| s.len() as u64).sum::<u64>().max(1);
    let mut counts: Vec<u64> = split
        .iter()
        .map(|s| frames * s.len() as u64 / total)
        .collect();
    let mut left = frames - counts.iter().sum::<u64>();
    for c in counts.iter_mut() {
        if left == 0 {
            break;
        }
        *c += 1;
        left -= 1;
    }
    counts
}

/// The group whose flows have had the fewest packets each so far (the
/// first of equals), so every flow gets the same share over time.
fn behind(sent: &[u64], groups: &[Vec<usize>]) -> usize {
    let mut best = 0;
    for g in 1..groups.len() {
        // sent[g] / len[g] < sent[best] / len[best], without division.
        let (mine, theirs) = (groups[g].len() as u128, groups[best].len() as u128);
        if u128::from(sent[g]) * theirs < u128::from(sent[best]) * mine {
            best = g;
        }
    }
    best
}

/// Packets a profile asks for between two instants (0 when unpaced).
fn target_between(rate: Option<&RateProfile>, a: f64, b: f64) -> u64 {
    rate.map(|r| (r.due(b) - r.due(a)).round().max(0.0) as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{FlowSpec, FrameSpec};

    /// A sender that takes every frame and remembers each call's size.
    struct Recorder {
        calls: Vec<usize>,
    }

    impl Transmit for Recorder {
        fn groups(&self) -> Vec<Vec<usize>> {
            vec![vec![0]]
        }
        fn send(&mut self, _group: usize, msgs: &[Msg]) -> std::io::Result<usize> {
            self.calls.push(msgs.len());
            Ok(msgs.len())
        }
        fn name(&self) -> &'static str {
            "recorder"
        }
    }

    fn paced(pps: f64, secs: f64) -> (u64, Vec<usize>, f64) {
        paced_burst(Some(pps), secs, None)
    }

    fn spec(pps: Option<f64>, secs: f64, frames: Option<u64>) -> SendSpec {
        SendSpec {
            flows: vec![FlowSpec {
                id: 0,
                src: None,
                src_port: 0,
                dst: "198.18.0.2:9".parse().unwrap(),
            }],
            frame: FrameSpec::Fixed(64),
            rate: pps.map(RateProfile::constant),
            duration: Duration::from_secs_f64(secs),
            batch: 32,
            cpus: Vec::new(),
            allow: Vec::new(),
            tx_engine: TxEngine::Packet,
            threads: 1,
            vlan: None,
            dscp: None,
            max_frames: frames,
            window: None,
        }
    }

    fn paced_burst(pps: Option<f64>, secs: f64, frames: Option<u64>) -> (u64, Vec<usize>, f64) {
        // On a thread of its own, as a sender runs: the priority below
        // ends with it.
        std::thread::spawn(move || {
            let spec = spec(pps, secs, frames);
            let mut tx = Recorder { calls: Vec::new() };
            let c = Counters::default();
            let _ = sys::set_timer_slack_ns(SENDER_TIMER_SLACK_NS);
            // As a sender does (`sleeps_between_quanta`): a normal thread
            // woke late beside other work and gave frames up, which failed
            // this test beside a loaded suite.
            if sleeps_between_quanta(&spec, &tx) {
                let _ = sys::set_fifo_self(SLEEPING_SENDER_PRIORITY);
            }
            let cpu0 = sys::thread_cpu_seconds();
            let seq = pace(&|| false, &spec, &[64], 32, &mut tx, &c, Instant::now()).unwrap();
            (seq[0], tx.calls, sys::thread_cpu_seconds() - cpu0)
        })
        .join()
        .unwrap()
    }

    #[test]
    fn only_a_sender_that_sleeps_between_quanta_asks_for_real_time() {
        let rec = Recorder { calls: Vec::new() };
        assert!(sleeps_between_quanta(&spec(Some(1e3), 1.0, None), &rec));
        assert!(sleeps_between_quanta(&spec(Some(49e3), 1.0, None), &rec));
        // From the live engine's floor up the sender spins or the kernel
        // paces; unpaced it sends flat out: a normal thread.
        assert!(!sleeps_between_quanta(&spec(Some(50e3), 1.0, None), &rec));
        assert!(!sleeps_between_quanta(&spec(None, 1.0, None), &rec));
        let kernel_paced = Stalling {
            stale: 0,
            runs: Vec::new(),
        };
        assert!(!sleeps_between_quanta(
            &spec(Some(1e3), 1.0, None),
            &kernel_paced
        ));
    }

    #[test]
    fn a_paced_live_run_below_half_a_mpps_says_it_spins_and_what_does_not() {
        let spec = |rate: Option<f64>| SendSpec {
            flows: Vec::new(),
            frame: FrameSpec::Fixed(64),
            rate: rate.map(RateProfile::constant),
            duration: Duration::from_secs(1),
            batch: 32,
            cpus: Vec::new(),
            allow: Vec::new(),
            tx_engine: TxEngine::Live,
            threads: 1,
            vlan: None,
            dscp: None,
            max_frames: None,
            window: None,
        };
        let n = spin_note(&spec(Some(100_000.0))).unwrap();
        assert!(n.contains("frames 10 µs apart"), "{n}");
        assert!(
            n.contains("--tx-engine packet") && n.contains("(10 frames)"),
            "{n}"
        );
        // Unpaced, or fast enough that any engine keeps a core busy: none.
        assert!(spin_note(&spec(None)).is_none());
        assert!(spin_note(&spec(Some(1_200_000.0))).is_none());
        assert_eq!(
            join_notes(Some("a".into()), Some("b".into())).as_deref(),
            Some("a; b")
        );
        assert_eq!(join_notes(None, Some("b".into())).as_deref(), Some("b"));
        assert_eq!(join_notes(None, None), None);
    }

    #[test]
    fn a_burst_stops_at_its_frame_count() {
        // Unpaced: 1,000 frames in batches of 32, the last one cut to fit,
        // long before the 5 s deadline.
        let t = Instant::now();
        let (sent, calls, _) = paced_burst(None, 5.0, Some(1_000));
        assert_eq!(sent, 1_000);
        assert_eq!(calls.iter().sum::<usize>(), 1_000);
        assert_eq!(calls.last(), Some(&(1_000 % 32)));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        // Paced at 100 kpps: 500 frames take about 5 ms, not the 5 s.
        let t = Instant::now();
        let (sent, _, _) = paced_burst(Some(100_000.0), 5.0, Some(500));
        assert_eq!(sent, 500);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn a_burst_divides_among_workers_by_their_flows() {
        let split = vec![vec![0, 1, 2], vec![3, 4], vec![5]];
        assert_eq!(frame_shares(600, &split), vec![300, 200, 100]);
        let c = frame_shares(7, &split);
        assert_eq!(c.iter().sum::<u64>(), 7);
        assert_eq!(c, vec![4, 2, 1]);
        assert_eq!(frame_shares(1, &split), vec![1, 0, 0]);
    }

    #[test]
    fn a_self_paced_sender_sends_quanta_and_sleeps_between_them() {
        // 20 kpps: a frame every 50 µs, too short to sleep in one by one;
        // in quanta of 100 µs (2 frames) the sender sleeps between them.
        let (sent, calls, cpu) = paced(20_000.0, 0.5);
        // Never more than was due; on a busy host a wakeup later than the
        // pacer's slack (2 ms of frames) gives frames up, so the floor is
        // loose: what is checked is how they went.
        // (Beside a parallel test run on 2 busy cores whole quanta are
        // late: a floor of 30 % still fails a pacer that sends nothing.)
        assert!((3_000..=10_000).contains(&sent), "sent {sent} of 10000");
        let single = calls.iter().filter(|&&n| n == 1).count();
        assert!(
            calls.len() as u64 <= sent * 6 / 10,
            "{} sends for {sent} frames: one frame per send is a spinning pacer",
            calls.len()
        );
        assert!(
            single * 4 < calls.len(),
            "{single} of {} sends carried one frame",
            calls.len()
        );
        // Sleeping, not spinning: a spinning pacer spends the whole 0.5 s.
        assert!(cpu < 0.35, "the pacer used {cpu:.3} s of CPU in 0.5 s");
        // 1 kpps: one frame per quantum, the last included.
        let (sent, calls, _) = paced(1_000.0, 0.3);
        assert!((90..=300).contains(&sent), "sent {sent} of 300");
        // (A late wakeup sends what fell due meanwhile at once, so on a
        // loaded host some sends carry two or more; a pacer batching by
        // quantum alone would carry one in none.)
        let ones = calls.iter().filter(|&&n| n == 1).count();
        assert!(ones * 10 >= calls.len() * 6, "{calls:?}");
    }

    /// An engine the kernel paces (it gets a horizon's frames with times),
    /// whose first `stale` runs come too late and give up every frame (as
    /// runs do whose preparation outlasted their frames' span); later runs
    /// send every frame at its time.
    struct Stalling {
        stale: usize,
        runs: Vec<usize>,
    }

    impl Transmit for Stalling {
        fn groups(&self) -> Vec<Vec<usize>> {
            vec![vec![0]]
        }
        fn send(&mut self, _group: usize, msgs: &[Msg]) -> std::io::Result<usize> {
            Ok(msgs.len())
        }
        fn paces_itself(&self) -> bool {
            true
        }
        fn send_paced(
            &mut self,
            _group: usize,
            msgs: &[Msg],
            p: Pacing,
        ) -> std::io::Result<(usize, u64)> {
            if self.stale > 0 {
                // Its preparation took 5 ms, longer than the slack.
                std::thread::sleep(Duration::from_millis(5));
                self.stale -= 1;
                self.runs.push(0);
                return Ok((0, msgs.len() as u64));
            }
            let last = p.first_due_ns + (msgs.len().saturating_sub(1) as f64 * p.gap_ns) as u64;
            let now = sys::monotonic_ns();
            if last > now {
                std::thread::sleep(Duration::from_nanos(last - now));
            }
            self.runs.push(msgs.len());
            Ok((msgs.len(), 0))
        }
        fn name(&self) -> &'static str {
            "stalling"
        }
    }

    #[test]
    fn a_sender_that_gave_a_run_up_sends_the_next_one() {
        // 100 Mpps: a frame every 10 ns, less than one pass of the loop
        // takes. A loop that only gave up what it missed on a pass found
        // more due on its next one, gave that up too, and never sent
        // again until the deadline (a debug build at line rate: offered 0).
        let spec = spec(Some(1e8), 0.05, None);
        let mut tx = Stalling {
            stale: 1,
            runs: Vec::new(),
        };
        let c = Counters::default();
        let seq = pace(&|| false, &spec, &[64], 32, &mut tx, &c, Instant::now()).unwrap();
        assert_eq!(tx.runs.first(), Some(&0), "{:?}", tx.runs);
        assert!(
            tx.runs.len() >= 3,
            "runs after the stale one: {:?}",
            tx.runs
        );
        let sent: usize = tx.runs.iter().sum();
        assert_eq!(seq[0], sent as u64);
        // Never more than the 5,000,000 due.
        assert!(sent > 0 && sent <= 5_000_000, "{sent}");
    }

    #[test]
    fn the_group_furthest_behind_per_flow_goes_next() {
        let groups = vec![vec![0, 1], vec![2], vec![3]];
        assert_eq!(behind(&[0, 0, 0], &groups), 0);
        assert_eq!(behind(&[64, 0, 0], &groups), 1);
        // 64 over two flows is 32 each: behind the 40 of group 1.
        assert_eq!(behind(&[64, 40, 50], &groups), 0);
        assert_eq!(behind(&[80, 40, 30], &groups), 2);
    }
}
