//! The UDP receiver: counts linerate datagrams per flow with recvmmsg
//! (sequence tracking, loss, reorder, duplicates). The senders are in
//! [`super::tx`] with their engines beside it.
//!
//! Every datagram is one packet at the DUT: the sender never uses UDP GSO and
//! the receiver never enables UDP GRO. Each payload starts with an 18-byte
//! header (it fits the smallest IPv4 frame, 64 B):
//!
//! ```text
//! 0      2        4                10                18
//! | 'LR' | flow id | sequence (u48) | send time (ns)  |
//! ```

use super::frame::frame_of_payload;
use super::workers::{self, Counters, Intervals, Totals};
use super::EngineError;
use super::{IntervalClock, JobCtx};
use crate::host::kernel;
use crate::model::stderr::errln;
use crate::proto::frame::{Header, HEADER_LEN};
use crate::proto::{EndpointSummary, FlowCounters, ThreadFigures};
use crate::sys::{self, Recvmmsg};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sequence numbers a [`FlowTracker`] remembers behind the highest seen:
/// an older packet is counted as reordered, never as a duplicate.
pub const WINDOW: u64 = 4096;
/// How long the receiver keeps polling after the last datagram, while
/// datagrams come densely.
const BUSY_POLL: Duration = Duration::from_millis(2);
/// Datagrams arriving at least this fast (per second, measured from one
/// batch to the next) keep the receiver polling; slower, it blocks in
/// recvmmsg. A blocking wake-up costs a few µs: at 1 kpps that is well under
/// 1 % of a core, while polling between datagrams would fill one. Not
/// higher: receivers woken per datagram at a few kpps each delayed paced
/// senders on a shared 2-core host (four 5 kpps flows fell 20-85 % short).
const DENSE_PPS: f64 = 2_000.0;

/// Whether `n` datagrams that arrived `gap` after the previous batch come
/// fast enough that polling beats sleeping.
fn dense(n: usize, gap: Duration) -> bool {
    n as f64 >= DENSE_PPS * gap.as_secs_f64()
}

/// Sequence accounting of one flow: unique, reordered and duplicate packets.
/// A bitmap of the last [`WINDOW`] sequence numbers tells a late packet (fills
/// a gap: reordered, not lost) from a duplicate.
#[derive(Clone)]
pub struct FlowTracker {
    next: u64,
    unique: u64,
    reordered: u64,
    duplicates: u64,
    bits: Box<[u64]>,
}

impl Default for FlowTracker {
    fn default() -> Self {
        FlowTracker {
            next: 0,
            unique: 0,
            reordered: 0,
            duplicates: 0,
            bits: vec![0u64; (WINDOW / 64) as usize].into_boxed_slice(),
        }
    }
}

impl FlowTracker {
    fn bit(s: u64) -> (usize, u64) {
        (((s % WINDOW) / 64) as usize, 1u64 << (s % 64))
    }
    fn set(&mut self, s: u64) {
        let (w, m) = Self::bit(s);
        self.bits[w] |= m;
    }
    fn clear(&mut self, s: u64) {
        let (w, m) = Self::bit(s);
        self.bits[w] &= !m;
    }
    fn get(&self, s: u64) -> bool {
        let (w, m) = Self::bit(s);
        self.bits[w] & m != 0
    }

    pub fn on_seq(&mut self, s: u64) {
        if s >= self.next {
            if s - self.next >= WINDOW {
                self.bits.fill(0);
            } else {
                for p in self.next..s {
                    self.clear(p);
                }
            }
            self.set(s);
            self.next = s + 1;
            self.unique += 1;
        } else if self.next - s > WINDOW {
            // Too old to tell a duplicate from a very late packet.
            self.unique += 1;
            self.reordered += 1;
        } else if self.get(s) {
            self.duplicates += 1;
        } else {
            self.set(s);
            self.unique += 1;
            self.reordered += 1;
        }
    }

    /// Adds another tracker's counts of the same flow (a flow that reached
    /// two receiver threads): exact for unique packets and loss, while
    /// reordering is then only what each thread saw.
    pub fn absorb(&mut self, o: &FlowTracker) {
        self.next = self.next.max(o.next);
        self.unique += o.unique;
        self.reordered += o.reordered;
        self.duplicates += o.duplicates;
    }

    /// A tracker that has counted what another (the XDP sink's per-CPU
    /// state of one flow) counted: `next` is the highest sequence seen + 1.
    /// Its window is empty: it merges, it does not track on.
    pub fn counted(next: u64, unique: u64, reordered: u64, duplicates: u64) -> FlowTracker {
        FlowTracker {
            next,
            unique,
            reordered,
            duplicates,
            bits: Box::default(),
        }
    }

    /// Whether any packet of the flow arrived.
    pub fn seen(&self) -> bool {
        self.next > 0
    }

    /// Sequence numbers below the highest seen that never arrived.
    pub fn missing(&self) -> u64 {
        self.next.saturating_sub(self.unique)
    }
    pub fn unique(&self) -> u64 {
        self.unique
    }
    pub fn reordered(&self) -> u64 {
        self.reordered
    }
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
}

/// Opens `threads` receiving sockets sharing `port` of `bind` (0: one
/// ephemeral port) (SO_REUSEPORT: the kernel spreads flows over them by
/// address hash, one flow always to the same socket).
/// `window`: SO_RCVBUF (`udp -w`), else 32 MiB.
pub fn bind_receivers(
    bind: IpAddr,
    port: u16,
    threads: usize,
    window: Option<u32>,
) -> io::Result<Vec<UdpSocket>> {
    let first = sys::udp_reuseport(SocketAddr::new(bind, port))?;
    let port = first.local_addr()?.port();
    let mut socks = vec![first];
    for _ in 1..threads.max(1) {
        socks.push(sys::udp_reuseport(SocketAddr::new(bind, port))?);
    }
    for s in &socks {
        sys::set_buffer(s.as_raw_fd(), true, window.map_or(32 << 20, |w| w as usize))?;
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
    }
    Ok(socks)
}

/// What a receiver worker hands back: its flow trackers, own figures and
/// frames per DSCP value (all 0 unless counted).
struct RxEnd {
    trackers: Vec<FlowTracker>,
    figures: ThreadFigures,
    dscp: [u64; 64],
}

/// The interval clock, once a worker has seen the first datagram: it
/// starts at that datagram's time.
fn clock_from_first(
    first_ns: &AtomicU64,
    now: Instant,
    interval: Duration,
) -> Option<IntervalClock> {
    let f = first_ns.load(Ordering::Relaxed);
    if f == 0 {
        return None;
    }
    let ago = Duration::from_nanos(sys::monotonic_ns().saturating_sub(f));
    Some(IntervalClock::new(
        now.checked_sub(ago).unwrap_or(now),
        interval,
    ))
}

/// The receiver threads' ends put together.
struct Joined {
    /// Per flow, the threads' trackers merged.
    merged: Vec<FlowTracker>,
    /// Per flow, how many threads saw it.
    seen_by: Vec<u32>,
    dscp: [u64; 64],
    per_thread: Vec<ThreadFigures>,
}

/// Joins the receiver threads and merges what they counted; the first
/// error if one failed.
fn join_receivers(
    handles: Vec<std::thread::JoinHandle<Result<RxEnd, EngineError>>>,
    flows: usize,
) -> Result<Joined, EngineError> {
    let mut merged: Vec<FlowTracker> = vec![FlowTracker::default(); flows];
    let mut seen_by = vec![0u32; flows];
    let mut dscp = [0u64; 64];
    let mut per_thread = Vec::with_capacity(handles.len());
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(end)) => {
                for (id, t) in end.trackers.iter().enumerate() {
                    if t.next > 0 {
                        seen_by[id] += 1;
                        merged[id].absorb(t);
                    }
                }
                per_thread.push(end.figures);
                for (sum, k) in dscp.iter_mut().zip(end.dscp) {
                    *sum += k;
                }
            }
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => {
                err = err.or(Some(EngineError::Failed(
                    "a receiver thread panicked".into(),
                )))
            }
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(Joined {
            merged,
            seen_by,
            dscp,
            per_thread,
        }),
    }
}

/// Says when flows reached more than one receiver thread: their
/// reordering counts are then per thread.
fn warn_split(seen_by: &[u32]) {
    let split = seen_by.iter().filter(|&&k| k > 1).count();
    if split > 0 {
        errln!(
            "linerate agent: {split} flow(s) reached more than one receiver thread; \
             their reordering counts are per thread"
        );
    }
}

/// Counts datagrams per flow until the controller stops the job: one worker
/// per socket, this thread reporting the sum of their counters.
/// `(flows, vlan, count_dscp)`: the flow ids counted, the tags in each
/// frame's bytes, and whether to count frames per DSCP (the sockets asked
/// for each datagram's TOS: [`sys::set_recv_tos`]).
pub fn receive(
    ctx: &JobCtx,
    socks: Vec<UdpSocket>,
    (flows, vlan, count_dscp): (u16, Option<crate::proto::Vlan>, bool),
    cpus: &[usize],
) -> Result<EndpointSummary, EngineError> {
    sys::pin_thread(cpus).map_err(EngineError::io(format!(
        "pinning the receiver to CPUs {cpus:?}"
    )))?;
    let flows = usize::from(flows.max(1));
    let cpu0 = sys::process_cpu_seconds();
    // Monotonic ns of the first datagram any worker saw (0: none yet): the
    // job's intervals start there.
    let first_ns = Arc::new(AtomicU64::new(0));
    let n = socks.len();
    let mut handles = Vec::with_capacity(n);
    let mut counters = Vec::with_capacity(n);
    for (i, sock) in socks.into_iter().enumerate() {
        let c = Arc::new(Counters::default());
        counters.push(c.clone());
        let (ctx, first_ns) = (ctx.clone(), first_ns.clone());
        // Workers take the job's CPUs in turn; with none given they follow
        // the softirq work (RPS) wherever the scheduler puts them.
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let sampler = std::thread::current();
        let h = kernel::spawn_named("lr-udp-recv", move || {
            let out = rx_worker(&ctx, sock, (flows, vlan, count_dscp), &c, &first_ns, i, cpu);
            // The sampler sleeps until an interval is due: wake it to join.
            sampler.unpark();
            out
        })
        .map_err(EngineError::io("starting a receiver thread"))?;
        handles.push(h);
    }
    let mut clock: Option<IntervalClock> = None;
    let mut iv = Intervals::default();
    while handles.iter().any(|h| !h.is_finished()) {
        // Until the first datagram the clock has no start: look every
        // 10 ms (the start is the datagram's own timestamp, so looking
        // late loses nothing); then asleep until an interval is due. A
        // worker that ends unparks this thread.
        let wait = clock
            .as_ref()
            .map_or(Duration::from_millis(10), |c| c.until_due(Instant::now()));
        std::thread::park_timeout(wait.max(Duration::from_micros(100)));
        let now = Instant::now();
        if clock.is_none() {
            clock = clock_from_first(&first_ns, now, ctx.interval);
        }
        if let Some(c) = clock.as_mut() {
            if let Some((a, b)) = c.due(now) {
                let t = Totals::of(counters.iter().map(|c| c.as_ref()));
                ctx.emit(iv.sample(t, a, b, 0));
            }
        }
    }
    let joined = join_receivers(handles, flows)?;
    let (flows_out, lost_total) = flow_results(ctx, &joined.merged);
    let (a, b) = clock
        .as_mut()
        .map_or((0.0, 0.0), |c| c.close(Instant::now()));
    let t = Totals::of(counters.iter().map(|c| c.as_ref()));
    // The last interval also carries the tail loss the sequence numbers
    // could not see, so the intervals' loss adds up to the total.
    ctx.emit(iv.last(t, a, b, 0, lost_total));
    warn_split(&joined.seen_by);
    Ok(EndpointSummary {
        elapsed_s: b,
        cpu_s: sys::process_cpu_seconds() - cpu0,
        max_rss_bytes: sys::peak_rss_bytes(),
        rx_packets: t.rx_packets,
        rx_bytes: t.rx_bytes,
        lost: lost_total,
        reordered: t.reordered,
        duplicates: t.duplicates,
        foreign: t.foreign,
        flows: flows_out,
        per_thread: joined.per_thread,
        rx_engine: "socket".into(),
        dscp_received: if count_dscp {
            dscp_counts(&joined.dscp)
        } else {
            Default::default()
        },
        ..Default::default()
    })
}

/// Frames per DSCP value, the values that counted none left out.
pub fn dscp_counts(per_value: &[u64]) -> std::collections::BTreeMap<u8, u64> {
    (0u8..)
        .zip(per_value)
        .filter(|(_, &n)| n > 0)
        .map(|(v, &n)| (v, n))
        .collect()
}

/// Per-flow counters of a receiver's merged trackers and the job's total
/// loss: a flow's loss is what its senders sent (handed over at Stop)
/// minus what arrived, so tail loss the sequence numbers could not see is
/// in; without the senders' totals, the gaps below the highest sequence.
pub fn flow_results(ctx: &JobCtx, merged: &[FlowTracker]) -> (Vec<FlowCounters>, u64) {
    let totals = ctx
        .sender_totals
        .lock()
        .map(|g| g.clone())
        .unwrap_or_default()
        .unwrap_or_default();
    let mut flows_out = Vec::new();
    let mut lost_total = 0u64;
    for (id, t) in merged.iter().enumerate() {
        let sent = totals
            .iter()
            .find(|f| usize::from(f.id) == id)
            .map(|f| f.tx_packets);
        let lost = match sent {
            Some(s) => s.saturating_sub(t.unique()),
            None => t.missing(),
        };
        lost_total += lost;
        if t.unique() > 0 || sent.unwrap_or(0) > 0 {
            flows_out.push(FlowCounters {
                id: id as u16,
                tx_packets: sent.unwrap_or(0),
                rx_packets: t.unique(),
                lost,
                reordered: t.reordered(),
                duplicates: t.duplicates(),
            });
        }
    }
    (flows_out, lost_total)
}

/// A receiver thread's flows across batches: each flow's sequence
/// tracker, what arrived under each DSCP, and the flows' missing total.
struct RxFlows {
    trackers: Vec<FlowTracker>,
    dscp: [u64; 64],
    missing: u64,
}

/// What one batch of datagrams added.
#[derive(Default)]
struct BatchCounts {
    pkts: u64,
    bytes: u64,
    reord: u64,
    dups: u64,
    foreign: u64,
}

impl RxFlows {
    /// Counts the batch's `n` datagrams against their flows; a datagram
    /// without linerate's header, or of an unknown flow, is foreign.
    fn count(
        &mut self,
        mm: &Recvmmsg,
        n: usize,
        ipv6: bool,
        vlan: Option<crate::proto::Vlan>,
    ) -> BatchCounts {
        let mut b = BatchCounts::default();
        for i in 0..n {
            let (head, full) = mm.datagram(i);
            match Header::parse(head) {
                Some(h) if usize::from(h.flow) < self.trackers.len() => {
                    let t = &mut self.trackers[usize::from(h.flow)];
                    let (r0, d0, m0) = (t.reordered(), t.duplicates(), t.missing());
                    t.on_seq(h.seq);
                    b.reord += t.reordered() - r0;
                    b.dups += t.duplicates() - d0;
                    self.missing = self.missing + t.missing() - m0;
                    if t.duplicates() == d0 {
                        b.pkts += 1;
                        b.bytes += frame_of_payload(full, ipv6, vlan);
                        if let Some(tos) = mm.tos(i) {
                            self.dscp[usize::from(tos >> 2)] += 1;
                        }
                    }
                }
                _ => b.foreign += 1,
            }
        }
        b
    }
}

/// Receives a batch (`block`: sleeping in the kernel until one comes); 0
/// when none came or a signal interrupted.
fn recv_batch(mm: &mut Recvmmsg, fd: RawFd, block: bool) -> Result<usize, EngineError> {
    match mm.recv(fd, block) {
        Ok(n) => Ok(n),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(0)
        }
        Err(e) => Err(EngineError::io("receiving UDP datagrams")(e)),
    }
}

/// One receiver socket's loop: counts datagrams per flow into its own
/// trackers and counters until the job stops and its queue is drained.
fn rx_worker(
    ctx: &JobCtx,
    sock: UdpSocket,
    (flows, vlan, count_dscp): (usize, Option<crate::proto::Vlan>, bool),
    c: &Counters,
    first_ns: &AtomicU64,
    index: usize,
    cpu: Option<usize>,
) -> Result<RxEnd, EngineError> {
    if let Some(cpu) = cpu {
        sys::pin_thread(&[cpu]).map_err(EngineError::io(format!(
            "pinning a receiver thread to CPU {cpu}"
        )))?;
    }
    let cpu0 = sys::thread_cpu_seconds();
    let ipv6 = sock.local_addr().map(|a| a.is_ipv6()).unwrap_or(false);
    let fd = sock.as_raw_fd();
    // With control buffers only when asked: each datagram then brings its
    // TOS byte as a cmsg (bench/README.md: what that costs).
    let mut mm = if count_dscp {
        Recvmmsg::with_tos(64, HEADER_LEN)
    } else {
        Recvmmsg::new(64, HEADER_LEN)
    };
    let mut rx = RxFlows {
        trackers: vec![FlowTracker::default(); flows],
        dscp: [0u64; 64],
        missing: 0,
    };
    let mut stop_seen: Option<Instant> = None;
    // While datagrams flow densely, poll without sleeping: a sleeping
    // receiver costs the sender's core a wakeup per batch, which caps the
    // rate we measure. At low rates it sleeps in recvmmsg between them, so
    // its CPU figure is honest.
    let mut poll_until = Instant::now();
    let mut last_batch = Instant::now();
    loop {
        if stop_seen.is_none() && ctx.stopped() {
            stop_seen = Some(Instant::now());
        }
        let n = recv_batch(&mut mm, fd, Instant::now() >= poll_until)?;
        let now = Instant::now();
        if n > 0 {
            if dense(n, now.duration_since(last_batch)) {
                poll_until = now + BUSY_POLL;
            }
            last_batch = now;
        }
        let b = rx.count(&mm, n, ipv6, vlan);
        if b.pkts > 0 && first_ns.load(Ordering::Relaxed) == 0 {
            let _ = first_ns.compare_exchange(
                0,
                sys::monotonic_ns(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        // Counters before `missing`: the reporter never sees loss for
        // packets whose arrival it has not seen yet.
        Counters::add(&c.rx_packets, b.pkts);
        Counters::add(&c.rx_bytes, b.bytes);
        Counters::add(&c.reordered, b.reord);
        Counters::add(&c.duplicates, b.dups);
        Counters::add(&c.foreign, b.foreign);
        if n > 0 {
            c.missing.store(rx.missing, Ordering::Relaxed);
        }
        // After Stop, drain what is still queued, then finish.
        if let Some(t) = stop_seen {
            if n == 0 || now.duration_since(t) > Duration::from_millis(500) {
                break;
            }
        }
    }
    let RxFlows { trackers, dscp, .. } = rx;
    let ids = trackers
        .iter()
        .enumerate()
        .filter(|(_, t)| t.next > 0)
        .map(|(id, _)| id as u16)
        .collect();
    Ok(RxEnd {
        figures: workers::figures(index, cpu, ids, c, sys::thread_cpu_seconds() - cpu0),
        trackers,
        dscp,
    })
}

#[cfg(test)]
mod tests;
