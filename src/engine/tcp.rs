//! TCP bulk streams: N connections, each one thread, sending from one
//! preallocated buffer or discarding what arrives without copying it
//! (MSG_TRUNC). A reporter samples bytes and TCP_INFO once per interval.
//!
//! A connection opens with an 8-byte hello from the connecting side:
//! `'LRT1' | stream id (u16) | 1 if the connecting side sends | 0`.

use super::EngineError;
use super::{IntervalClock, JobCtx};
use crate::proto::{Direction, EndpointSummary, IntervalSample, SocketBuffers, StreamSample};
use crate::sys;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAGIC: [u8; 4] = *b"LRT1";
const IO_TIMEOUT: Duration = Duration::from_millis(200);

mod stream_io;
use stream_io::{recv_loop, send_loop, send_many, Shared};

/// Listens on `port` of `bind` (0: any free port).
pub fn listen(bind: IpAddr, port: u16) -> io::Result<TcpListener> {
    let l = TcpListener::bind(SocketAddr::new(bind, port))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// What each stream's socket is set to, at both ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tuning<'a> {
    /// TCP congestion control (e.g. "bbr").
    pub congestion: Option<&'a str>,
    /// The highest rate a stream sends at, bytes/s (SO_MAX_PACING_RATE).
    pub pacing_bytes_per_s: Option<u64>,
    /// SO_SNDBUF and SO_RCVBUF, bytes (iperf3 -w); none: autotuning.
    pub window: Option<u32>,
    /// The DSCP of every segment (IP_TOS, IPV6_TCLASS): set before the
    /// client connects and on the listener, whose streams inherit it.
    pub dscp: Option<crate::proto::Dscp>,
}

impl Tuning<'_> {
    fn apply(&self, conn: &TcpStream) -> Result<(), EngineError> {
        if let Some(w) = self.window {
            // Past net.core.[rw]mem_max where the agent may (root), as
            // iperf3 as root cannot: the results say what the kernel gave.
            for receive in [false, true] {
                sys::set_buffer(conn.as_raw_fd(), receive, w as usize).map_err(EngineError::io(
                    format!("setting a TCP stream's socket buffers to {w} bytes (--window)"),
                ))?;
            }
        }
        if let Some(cc) = self.congestion {
            sys::set_congestion(conn.as_raw_fd(), cc).map_err(|e| {
                EngineError::Invalid(format!(
                    "congestion control '{cc}': {e}; this host's kernel lists what it has in \
                     /proc/sys/net/ipv4/tcp_available_congestion_control (load a module with \
                     modprobe tcp_{cc})"
                ))
            })?;
        }
        if let Some(rate) = self.pacing_bytes_per_s {
            sys::set_max_pacing_rate(conn.as_raw_fd(), rate).map_err(EngineError::io(format!(
                "pacing a TCP stream to {rate} bytes/s"
            )))?;
            // At most ~10 ms of the rate waits unsent in the socket: a full
            // send buffer would go on arriving, paced, for a second or more
            // after the test's end and inflate its goodput.
            let lowat = (rate / 100).clamp(16 << 10, 4 << 20) as u32;
            sys::set_notsent_lowat(conn.as_raw_fd(), lowat).map_err(EngineError::io(
                "limiting a paced TCP stream's unsent bytes",
            ))?;
        }
        Ok(())
    }
}

struct Stream {
    id: u16,
    sender: bool,
    conn: TcpStream,
}

fn hello(id: u16, client_sends: bool) -> [u8; 8] {
    let i = id.to_be_bytes();
    [
        MAGIC[0],
        MAGIC[1],
        MAGIC[2],
        MAGIC[3],
        i[0],
        i[1],
        u8::from(client_sends),
        0,
    ]
}

fn parse_hello(b: &[u8; 8]) -> Option<(u16, bool)> {
    (b[0..4] == MAGIC && b[6] <= 1).then(|| (u16::from_be_bytes([b[4], b[5]]), b[6] == 1))
}

/// How often a thread waiting for connections looks at the stop flag.
const STOP_LOOK: Duration = Duration::from_millis(100);

/// Server side: accepts `expect` connections, then runs them.
pub fn serve(
    ctx: &JobCtx,
    listener: TcpListener,
    expect: u16,
    duration: Duration,
    cpus: &[usize],
    tuning: Tuning,
) -> Result<EndpointSummary, EngineError> {
    let accept_deadline = Instant::now() + Duration::from_secs(10);
    // The listener is non-blocking: between connections the thread sleeps
    // in epoll until one is pending, looking at the stop flag at least
    // every STOP_LOOK.
    let mut pending = sys::Epoll::new(1).map_err(EngineError::io("waiting for TCP streams"))?;
    pending
        .add(listener.as_raw_fd(), 0, sys::Interest::READ)
        .map_err(EngineError::io("waiting for TCP streams"))?;
    let mut ready = Vec::with_capacity(1);
    let mut streams = Vec::new();
    while streams.len() < usize::from(expect) {
        if ctx.stopped() {
            return Err(EngineError::Failed(
                "stopped before all TCP streams connected".into(),
            ));
        }
        match listener.accept() {
            Ok((conn, _)) => {
                conn.set_nonblocking(false)
                    .map_err(EngineError::io("setting up a TCP stream"))?;
                conn.set_read_timeout(Some(Duration::from_secs(5)))
                    .map_err(EngineError::io("setting up a TCP stream"))?;
                let mut h = [0u8; 8];
                (&conn).read_exact(&mut h).map_err(|e| {
                    if e.kind() == io::ErrorKind::UnexpectedEof {
                        // The client closes a stream it could not set up:
                        // its own error says why.
                        EngineError::Failed(
                            "a TCP stream closed before its hello (the client side failed)".into(),
                        )
                    } else {
                        EngineError::io("reading a TCP stream hello")(e)
                    }
                })?;
                let (id, client_sends) = parse_hello(&h).ok_or_else(|| {
                    EngineError::Failed(
                        "a TCP connection on the test port did not speak linerate".into(),
                    )
                })?;
                tuning.apply(&conn)?;
                streams.push(Stream {
                    id,
                    sender: !client_sends,
                    conn,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let now = Instant::now();
                if now > accept_deadline {
                    return Err(EngineError::Failed(format!(
                        "only {} of {expect} TCP streams connected within 10 s",
                        streams.len()
                    )));
                }
                let wait = accept_deadline
                    .saturating_duration_since(now)
                    .min(STOP_LOOK);
                pending
                    .wait_into(Some(wait), &mut ready)
                    .map_err(EngineError::io("waiting for TCP streams"))?;
            }
            Err(e) => return Err(EngineError::io("accepting TCP streams")(e)),
        }
    }
    let buffers = socket_buffers(&streams, tuning.window);
    let mut sum = run_streams(ctx, streams, duration, cpus, 128 * 1024, Senders::PerStream)?;
    sum.socket_buffers = buffers;
    Ok(sum)
}

/// What the kernel gave a `--window` request, read from the first stream.
fn socket_buffers(streams: &[Stream], window: Option<u32>) -> Option<SocketBuffers> {
    let w = window?;
    let fd = streams.first()?.conn.as_raw_fd();
    let get = |receive| {
        sys::get_buffer(fd, receive)
            .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
            .unwrap_or(0)
    };
    Some(SocketBuffers {
        requested_bytes: w,
        sndbuf_bytes: get(false),
        rcvbuf_bytes: get(true),
    })
}

/// Client side: opens the streams a direction needs and runs them.
#[allow(clippy::too_many_arguments)]
pub fn connect(
    ctx: &JobCtx,
    target: SocketAddr,
    streams: u16,
    direction: Direction,
    duration: Duration,
    cpus: &[usize],
    tuning: Tuning,
    buffer_len: usize,
) -> Result<EndpointSummary, EngineError> {
    let mut roles = Vec::new();
    for i in 0..streams {
        match direction {
            Direction::Forward => roles.push((i, true)),
            Direction::Reverse => roles.push((i, false)),
            Direction::Both => {
                roles.push((i, true));
                roles.push((i + streams, false));
            }
        }
    }
    let mut out = Vec::new();
    for (id, client_sends) in roles {
        let wait = Duration::from_secs(5);
        let conn = match tuning.dscp {
            Some(d) => sys::connect_marked(target, d.tos(), wait),
            None => TcpStream::connect_timeout(&target, wait),
        }
        .map_err(EngineError::io(format!(
            "connecting TCP stream {id} to {target}"
        )))?;
        tuning.apply(&conn)?;
        (&conn)
            .write_all(&hello(id, client_sends))
            .map_err(EngineError::io(format!("starting TCP stream {id}")))?;
        out.push(Stream {
            id,
            sender: client_sends,
            conn,
        });
    }
    let buffers = socket_buffers(&out, tuning.window);
    let mut sum = run_streams(ctx, out, duration, cpus, buffer_len, Senders::PerStream)?;
    sum.socket_buffers = buffers;
    Ok(sum)
}

/// Runs streams another protocol set up (iperf3's cookie instead of the
/// hello): `(id, this end sends, connection)`. Senders stop at `duration`
/// or when `ctx.stop` is set; receivers at EOF or `ctx.stop`.
pub fn run_connected(
    ctx: &JobCtx,
    conns: Vec<(u16, bool, TcpStream)>,
    duration: Duration,
    cpus: &[usize],
    buffer_len: usize,
) -> Result<EndpointSummary, EngineError> {
    let streams = conns
        .into_iter()
        .map(|(id, sender, conn)| Stream { id, sender, conn })
        .collect();
    run_streams(ctx, streams, duration, cpus, buffer_len, Senders::OneLoop)
}

/// How a job's sending streams get their threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Senders {
    /// A blocking thread per stream (linerate's own far end).
    PerStream,
    /// One thread writes every sending stream as it becomes writable, as
    /// iperf3 does. Against a single-threaded far end (iperf3 before 3.16
    /// reads all its streams on one thread) fewer runnable senders leave the
    /// receiver its core: 4 streams to `iperf3 -s` on a 2-core host went
    /// from about 22 to about 31 Gbit/s (bench/README.md).
    OneLoop,
}

fn run_streams(
    ctx: &JobCtx,
    streams: Vec<Stream>,
    duration: Duration,
    cpus: &[usize],
    buffer_len: usize,
    senders: Senders,
) -> Result<EndpointSummary, EngineError> {
    let cpu0 = sys::process_cpu_seconds();
    let start = Instant::now();
    let plan = StreamPlan {
        deadline: start + duration,
        cpus,
        buffer_len: buffer_len.clamp(1024, 16 << 20),
        // The sampler (this thread) sleeps until the next interval is due;
        // a stream that ends wakes it, so the last interval closes on time.
        sampler: std::thread::current(),
    };
    let Started { handles, meta } = start_streams(ctx, streams, senders, &plan)?;
    let mut clock = IntervalClock::new(start, ctx.interval);
    let mut last: Vec<(u64, u32)> = vec![(0, 0); meta.len()];
    let base_retrans: Vec<u32> = meta
        .iter()
        .map(|m| sys::tcp_info(m.2).map(|t| t.total_retrans).unwrap_or(0))
        .collect();
    let mut total = EndpointSummary::default();
    // Running totals, not a list of every interval: a job may run for
    // days, and its memory must stay flat (the controller has the
    // intervals).
    let mut sums = Totals::new(meta.len());
    loop {
        let all_done = meta.iter().all(|m| m.3.done.load(Ordering::Acquire));
        let now = Instant::now();
        if all_done {
            break;
        }
        if let Some(span) = clock.due(now) {
            let iv = sample(&meta, span, &mut last, &base_retrans);
            sums.add(&iv);
            ctx.emit(iv);
        }
        // Until the next interval is due, or a stream ends and wakes this
        // thread (every 5 ms before: ~1,300 wakeups in a 4 s test on a
        // host whose cores the test keeps busy).
        std::thread::park_timeout(
            clock
                .until_due(Instant::now())
                .max(Duration::from_millis(1)),
        );
    }
    let span = clock.close(Instant::now());
    let iv = sample(&meta, span, &mut last, &base_retrans);
    sums.add(&iv);
    ctx.emit(iv);
    for h in handles {
        let _ = h.join();
    }
    total.elapsed_s = span.1;
    total.cpu_s = sys::process_cpu_seconds() - cpu0;
    total.max_rss_bytes = sys::peak_rss_bytes();
    total.tx_bytes += sums.tx_bytes;
    total.rx_bytes += sums.rx_bytes;
    total.streams = meta
        .iter()
        .enumerate()
        .map(|(k, (id, sender, _, _, _))| {
            let (bytes, retransmits, last_info) = &sums.streams[k];
            StreamSample {
                id: *id,
                sender: *sender,
                bytes: *bytes,
                retransmits: *retransmits,
                cwnd: last_info.cwnd,
                rtt_us: last_info.rtt_us,
            }
        })
        .collect();
    drop(meta);
    Ok(total)
}

/// What every stream of a job runs with.
struct StreamPlan<'a> {
    /// When senders stop.
    deadline: Instant,
    /// Stream i runs on `cpus[i % n]`.
    cpus: &'a [usize],
    buffer_len: usize,
    /// The thread woken when a stream ends.
    sampler: std::thread::Thread,
}

/// One stream as the sampler sees it: id, whether it sends, its socket,
/// its counters, and its connection (kept open until the job ends).
type Meta = (u16, bool, std::os::fd::RawFd, Arc<Shared>, TcpStream);

/// The streams' threads, started, and what the sampler reads of each.
struct Started {
    handles: Vec<std::thread::JoinHandle<()>>,
    meta: Vec<Meta>,
}

/// Starts a thread per stream, or (`Senders::OneLoop`, where epoll takes
/// them) one thread for all sending streams.
fn start_streams(
    ctx: &JobCtx,
    streams: Vec<Stream>,
    senders: Senders,
    plan: &StreamPlan,
) -> Result<Started, EngineError> {
    let (deadline, cpus, buffer_len) = (plan.deadline, plan.cpus, plan.buffer_len);
    let mut handles = Vec::new();
    let mut meta = Vec::new();
    let mut pooled: Vec<(TcpStream, Arc<Shared>)> = Vec::new();
    // Without epoll (or for a stream it refuses) a sender gets its own
    // blocking thread, as with `Senders::PerStream`.
    let pool = match senders {
        Senders::OneLoop => sys::Epoll::new(streams.len().max(1)).ok(),
        Senders::PerStream => None,
    };
    for s in streams {
        let shared = Arc::new(Shared::new());
        let fd = s.conn.as_raw_fd();
        let conn = s
            .conn
            .try_clone()
            .map_err(EngineError::io("setting up a TCP stream"))?;
        meta.push((s.id, s.sender, fd, Arc::clone(&shared), conn));
        // Stream i runs on cpus[i % n] at both ends, so a stream's sender
        // and receiver share a core when both ends get the same list.
        let pin: Vec<usize> = if cpus.is_empty() {
            vec![]
        } else {
            vec![cpus[usize::from(s.id) % cpus.len()]]
        };
        if let (true, Some(ep)) = (s.sender, &pool) {
            let token = pooled.len() as u64;
            let added = s
                .conn
                .set_nonblocking(true)
                .and_then(|()| ep.add(fd, token, sys::Interest::WRITE));
            if added.is_ok() {
                pooled.push((s.conn, shared));
                continue;
            }
            let _ = s.conn.set_nonblocking(false);
        }
        let stop = Arc::clone(&ctx.stop);
        let waker = plan.sampler.clone();
        // Named for the bottleneck verdict, which reads thread names back.
        let name = if s.sender {
            "lr-tcp-send"
        } else {
            "lr-tcp-recv"
        };
        let handle = crate::host::kernel::spawn_named(name, move || {
            // Pinning is best effort per stream; a bad CPU was checked by the controller.
            let _ = sys::pin_thread(&pin);
            let _ = s.conn.set_read_timeout(Some(IO_TIMEOUT));
            let _ = s.conn.set_write_timeout(Some(IO_TIMEOUT));
            if s.sender {
                send_loop(&s.conn, &shared, &stop, deadline, buffer_len);
            } else {
                recv_loop(&s.conn, &shared, &stop);
            }
            shared.end(&waker);
        });
        // Streams already started stop with the job (the agent sets `stop`).
        handles.push(handle.map_err(EngineError::io("starting a TCP stream thread"))?);
    }
    if let (false, Some(ep)) = (pooled.is_empty(), pool) {
        let stop = Arc::clone(&ctx.stop);
        let pin: Vec<usize> = cpus.first().map(|c| vec![*c]).unwrap_or_default();
        let waker = plan.sampler.clone();
        let handle = crate::host::kernel::spawn_named("lr-tcp-send", move || {
            let _ = sys::pin_thread(&pin);
            send_many(ep, &pooled, &stop, deadline, buffer_len, &waker);
        });
        handles.push(handle.map_err(EngineError::io("starting the TCP sending thread"))?);
    }
    Ok(Started { handles, meta })
}

/// One interval over `span`: each stream's bytes and retransmits since
/// `last` (retransmits counted from `base`), with its TCP_INFO (the one
/// kept at its close once it has ended).
fn sample(
    meta: &[Meta],
    clock_span: (f64, f64),
    last: &mut [(u64, u32)],
    base: &[u32],
) -> IntervalSample {
    let mut iv = IntervalSample {
        t_start: clock_span.0,
        t_end: clock_span.1,
        ..Default::default()
    };
    for (k, (id, sender, fd, shared, _)) in meta.iter().enumerate() {
        let bytes = shared.bytes.load(Ordering::Relaxed);
        let mut info = sys::tcp_info(*fd).unwrap_or_default();
        if shared.done.load(Ordering::Acquire) && shared.last_rtt_us.load(Ordering::Relaxed) > 0 {
            info = sys::TcpInfo {
                total_retrans: shared.last_retrans.load(Ordering::Relaxed),
                snd_cwnd: shared.last_cwnd.load(Ordering::Relaxed),
                rtt_us: shared.last_rtt_us.load(Ordering::Relaxed),
                ..Default::default()
            };
        }
        let retrans = info.total_retrans.saturating_sub(base[k]);
        let d_bytes = bytes - last[k].0;
        let d_retr = retrans.saturating_sub(last[k].1);
        last[k] = (bytes, retrans);
        if *sender {
            iv.tx_bytes += d_bytes;
        } else {
            iv.rx_bytes += d_bytes;
        }
        iv.streams.push(StreamSample {
            id: *id,
            sender: *sender,
            bytes: d_bytes,
            retransmits: u64::from(d_retr),
            cwnd: info.snd_cwnd,
            rtt_us: info.rtt_us,
        });
    }
    iv
}

/// A TCP job's totals over its intervals: bytes each way and, per stream
/// (by its place in the interval's list), bytes, retransmits and the last
/// sample with TCP_INFO (the one after the close may have none).
struct Totals {
    tx_bytes: u64,
    rx_bytes: u64,
    streams: Vec<(u64, u64, StreamSample)>,
}

impl Totals {
    fn new(n: usize) -> Self {
        Totals {
            tx_bytes: 0,
            rx_bytes: 0,
            streams: vec![(0, 0, StreamSample::default()); n],
        }
    }

    fn add(&mut self, iv: &IntervalSample) {
        self.tx_bytes += iv.tx_bytes;
        self.rx_bytes += iv.rx_bytes;
        for (t, s) in self.streams.iter_mut().zip(&iv.streams) {
            t.0 += s.bytes;
            t.1 += s.retransmits;
            if s.rtt_us > 0 {
                t.2 = s.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip() {
        assert_eq!(parse_hello(&hello(7, true)), Some((7, true)));
        assert_eq!(parse_hello(&hello(65535, false)), Some((65535, false)));
        assert_eq!(parse_hello(b"GET / HT"), None);
    }
}
