//! The data streams of one iperf3 test on this end, measured as linerate
//! measures its own: TCP through `engine::tcp` (bytes and TCP_INFO per
//! stream per interval, CPU), UDP with iperf3's header counted per stream.
//! They run on a thread of their own while the caller speaks on the
//! control connection.

use super::udp::{self, UdpCounters};
use crate::engine::{tcp, EngineError, IntervalClock, JobCtx};
use crate::model::spill::Spill;
use crate::proto::{EndpointSummary, IntervalSample, Response, StreamSample};
use crate::sys;
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub enum Conn {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

/// One data stream: iperf3's stream id, whether this end sends on it.
pub struct Stream {
    pub id: u16,
    pub sends: bool,
    pub conn: Conn,
}

/// How this end runs its streams.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How long senders send (omitted seconds included).
    pub send_for: Duration,
    /// The first seconds, left out of the totals (iperf3 `-O`).
    pub omit: Duration,
    /// Bytes per write (TCP) or UDP payload bytes.
    pub len: usize,
    /// UDP: each sending stream's payload rate, bit/s (0: unpaced).
    pub rate_bps: u64,
    pub counters_64bit: bool,
    pub cpus: Vec<usize>,
    pub ipv6: bool,
    /// Where each interval goes as it is measured (an agent's job sends
    /// them to the controller); they are kept for the totals either way.
    pub live: Option<Live>,
}

/// A live destination for intervals: the agent's job id and its channel.
#[derive(Debug, Clone)]
pub struct Live {
    pub test: u32,
    pub out: SyncSender<Response>,
}

pub use crate::proto::iperf3::StreamTotals;

/// What this end measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub summary: EndpointSummary,
    pub intervals: Vec<IntervalSample>,
    pub streams: Vec<StreamTotals>,
}

/// What the streams' thread hands back: the summary and, for UDP, each
/// stream's totals (TCP's come from the intervals).
type StreamsResult = Result<(EndpointSummary, Vec<StreamTotals>), EngineError>;

pub struct Running {
    stop: Arc<AtomicBool>,
    started: Instant,
    /// When the test was ended (TEST_END): receivers that notice it a
    /// read timeout later must not count that wait as test time.
    stopped_at: std::sync::OnceLock<Instant>,
    handle: JoinHandle<StreamsResult>,
    /// Keeps (and forwards, when live) the intervals as they come.
    tee: JoinHandle<Vec<IntervalSample>>,
    omit_s: f64,
    /// A second handle on each sending TCP stream, to see when all it
    /// wrote has reached the far end's kernel.
    senders: Vec<TcpStream>,
}

/// How long the far end gets to read what reached its kernel before
/// TEST_END: a receive buffer of 32 MiB is read in a few milliseconds.
const READ_GRACE: Duration = Duration::from_millis(50);

/// UDP header bytes a frame adds to the payload: Ethernet (with FCS), IP, UDP.
fn udp_overhead(ipv6: bool) -> u64 {
    if ipv6 {
        14 + 40 + 8 + 4
    } else {
        14 + 20 + 8 + 4
    }
}

/// Starts the streams; they stop when senders reach `send_for`, receivers
/// at EOF (TCP), or all of them on [`Running::stop`].
pub fn start(streams: Vec<Stream>, plan: Plan) -> Result<Running, EngineError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = sync_channel(1024);
    let ctx = JobCtx {
        test: 0,
        stop: Arc::clone(&stop),
        out: tx,
        interval: Duration::from_secs(1),
        sender_totals: Arc::new(Mutex::new(None)),
        links: None,
    };
    let live = plan.live.clone();
    let tee = crate::host::kernel::spawn_named("lr-iperf3-iv", move || {
        // A long test's samples wait in a scratch file (a day at -P 128
        // would hold hundreds of MB here), read back when it ends.
        let mut kept = Spill::new("iperf3 interval samples", None);
        // Ends when the streams' thread drops the job context.
        for r in rx {
            if let Response::Interval { sample, .. } = r {
                if let Some(l) = &live {
                    let _ = l.out.send(Response::Interval {
                        test: l.test,
                        sample: sample.clone(),
                    });
                }
                kept.push(sample);
            }
        }
        let mut all = Vec::new();
        kept.for_each(|s| all.push(s));
        all
    })
    .map_err(EngineError::io("starting the iperf3 interval thread"))?;
    let omit_s = plan.omit.as_secs_f64();
    let tcp_streams = streams.iter().all(|s| matches!(s.conn, Conn::Tcp(_)));
    let senders = streams
        .iter()
        .filter(|s| s.sends)
        .filter_map(|s| match &s.conn {
            Conn::Tcp(c) => c.try_clone().ok(),
            Conn::Udp(_) => None,
        })
        .collect();
    let handle = crate::host::kernel::spawn_named("lr-iperf3", move || {
        if tcp_streams {
            let conns = streams
                .into_iter()
                .filter_map(|s| match s.conn {
                    Conn::Tcp(c) => Some((s.id, s.sends, c)),
                    Conn::Udp(_) => None,
                })
                .collect();
            let summary = tcp::run_connected(&ctx, conns, plan.send_for, &plan.cpus, plan.len)?;
            Ok((summary, vec![]))
        } else {
            run_udp(&ctx, streams, &plan)
        }
    })
    .map_err(EngineError::io("starting the iperf3 data streams"))?;
    Ok(Running {
        stop,
        started: Instant::now(),
        stopped_at: std::sync::OnceLock::new(),
        handle,
        tee,
        omit_s,
        senders,
    })
}

impl Running {
    pub fn stop(&self) {
        let _ = self.stopped_at.set(Instant::now());
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits, up to `max`, until every sending TCP stream has stopped and
    /// the far end has acknowledged all it wrote, then a moment more for
    /// the far end to read it. An iperf3 server stops counting at TEST_END:
    /// sent then, data still queued here or unread there (up to tcp_rmem's
    /// maximum, 32 MiB on some hosts) would count as sent and not received.
    /// Returns whether they drained.
    pub fn drain(&self, max: Duration) -> bool {
        if self.senders.is_empty() {
            return true;
        }
        let until = Instant::now() + max;
        loop {
            let done = self
                .senders
                .iter()
                .all(|c| sys::fin_acked(c.as_raw_fd()).unwrap_or(true));
            if done {
                std::thread::sleep(READ_GRACE);
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits for the streams (stopping them after `grace`) and gathers
    /// what they measured.
    pub fn join(self, grace: Duration) -> Result<Measured, EngineError> {
        let until = Instant::now() + grace;
        while !self.handle.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop();
        let (summary, udp) = self
            .handle
            .join()
            .map_err(|_| EngineError::Failed("an iperf3 data stream thread panicked".into()))??;
        let intervals = self
            .tee
            .join()
            .map_err(|_| EngineError::Failed("the iperf3 interval thread panicked".into()))?;
        let mut streams = if udp.is_empty() {
            tcp_totals(&summary, &intervals, self.omit_s)
        } else {
            udp
        };
        if let Some(at) = self.stopped_at.get() {
            let test_s = (at.duration_since(self.started).as_secs_f64() - self.omit_s).max(0.0);
            for s in &mut streams {
                s.seconds = s.seconds.min(test_s);
            }
        }
        Ok(Measured {
            summary,
            intervals,
            streams,
        })
    }
}

/// Each TCP stream's bytes and retransmits in the intervals after the
/// omitted seconds.
fn tcp_totals(summary: &EndpointSummary, iv: &[IntervalSample], omit_s: f64) -> Vec<StreamTotals> {
    let kept: Vec<&IntervalSample> = iv.iter().filter(|s| s.t_start >= omit_s - 0.05).collect();
    let seconds = kept
        .iter()
        .map(|s| s.t_end - s.t_start)
        .sum::<f64>()
        .max(0.0);
    summary
        .streams
        .iter()
        .enumerate()
        .map(|(k, st)| {
            let per: Vec<&StreamSample> = kept.iter().filter_map(|s| s.streams.get(k)).collect();
            StreamTotals {
                id: st.id,
                sends: st.sender,
                bytes: per.iter().map(|s| s.bytes).sum(),
                retransmits: per.iter().map(|s| s.retransmits).sum(),
                seconds,
                ..Default::default()
            }
        })
        .collect()
}

fn run_udp(ctx: &JobCtx, streams: Vec<Stream>, plan: &Plan) -> StreamsResult {
    let cpu0 = sys::process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + plan.send_for;
    let mut shared = Vec::new();
    let mut handles = Vec::new();
    for (k, s) in streams.into_iter().enumerate() {
        let Conn::Udp(sock) = s.conn else {
            return Err(EngineError::Invalid(
                "one iperf3 test mixes TCP and UDP streams".into(),
            ));
        };
        let c = Arc::new(UdpCounters::default());
        shared.push((s.id, s.sends, Arc::clone(&c)));
        let stop = Arc::clone(&ctx.stop);
        let (len, rate, c64) = (plan.len, plan.rate_bps, plan.counters_64bit);
        let pin: Vec<usize> = plan
            .cpus
            .get(k % plan.cpus.len().max(1))
            .copied()
            .into_iter()
            .collect();
        let name = if s.sends {
            "lr-udp-send"
        } else {
            "lr-udp-recv"
        };
        let h = crate::host::kernel::spawn_named(name, move || {
            let _ = sys::pin_thread(&pin);
            if s.sends {
                udp::send(&sock, len, rate, c64, deadline, &stop, &c);
            } else {
                udp::receive(&sock, c64, &stop, &c);
            }
        })
        .map_err(EngineError::io("starting an iperf3 UDP stream thread"))?;
        handles.push(h);
    }
    let over = udp_overhead(plan.ipv6);
    let mut clock = IntervalClock::new(start, ctx.interval);
    let mut last = vec![[0u64; 6]; shared.len()];
    let sample = |span: (f64, f64), last: &mut Vec<[u64; 6]>| {
        let mut iv = IntervalSample {
            t_start: span.0,
            t_end: span.1,
            ..Default::default()
        };
        for (k, (_, sends, c)) in shared.iter().enumerate() {
            let now = [
                c.packets.load(Ordering::Relaxed),
                c.bytes.load(Ordering::Relaxed),
                c.errors.load(Ordering::Relaxed),
                c.lost.load(Ordering::Relaxed),
                c.reordered.load(Ordering::Relaxed),
                c.duplicates.load(Ordering::Relaxed),
            ];
            let d: Vec<u64> = (0..6).map(|i| now[i].saturating_sub(last[k][i])).collect();
            // Loss can shrink when a late datagram comes: keep the level.
            last[k] = now;
            if *sends {
                iv.tx_packets += d[0];
                iv.tx_bytes += d[1] + d[0] * over;
                iv.tx_errors += d[2];
            } else {
                iv.rx_packets += d[0];
                iv.rx_bytes += d[1] + d[0] * over;
                iv.lost += d[3];
                iv.reordered += d[4];
                iv.duplicates += d[5];
            }
        }
        iv
    };
    let omit_s = plan.omit.as_secs_f64();
    loop {
        let now = Instant::now();
        if now.duration_since(start).as_secs_f64() >= omit_s {
            for (_, _, c) in &shared {
                c.mark_omit();
            }
        }
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if let Some(span) = clock.due(now) {
            ctx.emit(sample(span, &mut last));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let span = clock.close(Instant::now());
    ctx.emit(sample(span, &mut last));
    for h in handles {
        let _ = h.join();
    }
    let mut total = EndpointSummary {
        elapsed_s: span.1,
        cpu_s: sys::process_cpu_seconds() - cpu0,
        max_rss_bytes: sys::peak_rss_bytes(),
        tx_engine: "socket".into(),
        rx_engine: "socket".into(),
        ..Default::default()
    };
    let mut totals = Vec::new();
    for (id, sends, c) in &shared {
        let (p, b) = (
            c.packets.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
        );
        if *sends {
            total.tx_packets += p;
            total.tx_bytes += b + p * over;
            total.tx_errors += c.errors.load(Ordering::Relaxed);
        } else {
            total.rx_packets += p;
            total.rx_bytes += b + p * over;
            total.lost += c.lost.load(Ordering::Relaxed);
            total.reordered += c.reordered.load(Ordering::Relaxed);
            total.duplicates += c.duplicates.load(Ordering::Relaxed);
        }
        let [packets, bytes, lost, highest] = c.after_omit();
        totals.push(StreamTotals {
            id: *id,
            sends: *sends,
            bytes,
            packets: if *sends { packets } else { highest },
            lost,
            jitter_s: c.jitter_s(),
            seconds: (span.1 - omit_s).max(0.0),
            ..Default::default()
        });
    }
    Ok((total, totals))
}
