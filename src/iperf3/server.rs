//! linerate as an iperf3 server: stock `iperf3 -c` clients (3.x: TCP, UDP,
//! -R, --bidir, -P N) run their tests against it, one at a time. Anyone
//! who connects while a test runs gets ACCESS_DENIED, as from iperf3.

use super::client::results_of;
use super::control::Control;
use super::data::{self, Conn, Plan, Stream};
use super::{Iperf3Error, Outcome};
use crate::model::stderr::errln;
use crate::model::units::si;
use crate::proto::iperf3::{self as wire, FarEnd, State, TestParams, Transport};
use crate::sys;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a new connection (control or stream) may take to send its
/// cookie: stock clients send it at once.
const COOKIE_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub cpus: Vec<usize>,
    /// How long a client may stay silent when an answer is due.
    pub answer_timeout: Duration,
    /// What an anonymous client may ask of this server.
    pub limits: ServerLimits,
}

/// Bounds on what a client may ask: anyone who reaches the port may start
/// a test, so a test's length and the UDP this server sends for it are
/// capped by defaults the user can raise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerLimits {
    /// Longest test (-t plus -O), seconds.
    pub max_time_s: f64,
    /// Most UDP this server sends for one test (-R, --bidir), bit/s of
    /// payload over all its streams; 0: no cap. TCP is not capped: its
    /// congestion control sends only what the client's path takes.
    pub max_udp_send_bps: u64,
}

/// One hour: longer tests need `--max-test-time`.
pub const DEFAULT_MAX_TIME_S: f64 = 3600.0;

impl ServerLimits {
    /// Why a test asking for `p` is over these limits (iperf3's error
    /// number to answer with, and the message for this end's log).
    pub fn refusal(&self, p: &TestParams) -> Option<wire::Refusal> {
        let time = p.time_s + p.omit_s;
        if time > self.max_time_s {
            return Some(wire::Refusal {
                errno: wire::IE_DURATION,
                message: format!(
                    "the test would last {time} s, longer than this server's --max-test-time {} s \
                     (raise it to allow longer tests)",
                    self.max_time_s
                ),
            });
        }
        let sending = (0..p.connections()).filter(|&k| !p.client_sends(k)).count() as u64;
        if p.transport != Transport::Udp || sending == 0 || self.max_udp_send_bps == 0 {
            return None;
        }
        let total = p.bandwidth_bps.saturating_mul(sending);
        if p.bandwidth_bps == 0 || total > self.max_udp_send_bps {
            let asked = if p.bandwidth_bps == 0 {
                "unpaced UDP (-b 0)".to_string()
            } else {
                format!("{}bit/s of UDP ({sending} streams)", si(total as f64))
            };
            return Some(wire::Refusal {
                errno: wire::IE_TOTALRATE,
                message: format!(
                    "the test asks this server to send {asked}, over its --max-udp-send-rate {}bit/s \
                     (raise it, or 0 for no cap, to allow it)",
                    si(self.max_udp_send_bps as f64)
                ),
            });
        }
        None
    }
}

/// Binds the control port (TCP; UDP tests use the same port number).
pub fn bind(listen: SocketAddr) -> Result<TcpListener, Iperf3Error> {
    let l = TcpListener::bind(listen).map_err(|e| {
        Iperf3Error::Io(format!(
            "listening on {listen} for iperf3 clients: {e}{}",
            if e.kind() == io::ErrorKind::AddrInUse {
                "; is an iperf3 server already running there? stop it or use --port"
            } else {
                ""
            }
        ))
    })?;
    l.set_nonblocking(true)
        .map_err(Iperf3Error::io("setting up the iperf3 listener"))?;
    Ok(l)
}

/// Serves tests until `stop`; each one's outcome (or why it failed) goes to
/// `on_test` with the client's address.
pub fn serve(
    cfg: &ServerConfig,
    listener: &TcpListener,
    stop: &AtomicBool,
    mut on_test: impl FnMut(SocketAddr, Result<Outcome, Iperf3Error>),
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, peer)) => {
                let r = one_test(cfg, listener, conn, peer, stop);
                match r {
                    // A connection that said nothing iperf3 is not a test.
                    Err(Iperf3Error::Protocol(m)) if m.starts_with("no-test:") => {
                        errln!("iperf3: {peer}: {}", &m[8..]);
                    }
                    r => on_test(peer, r),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => {
                errln!("iperf3: accepting a connection: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Answers a connection that arrives while a test runs: ACCESS_DENIED,
/// without reading from it (as iperf3 does).
fn deny(conn: TcpStream) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = (&conn).write_all(&[State::AccessDenied.byte()]);
}

fn deny_waiting(listener: &TcpListener) {
    while let Ok((c, _)) = listener.accept() {
        deny(c);
    }
}

fn one_test(
    cfg: &ServerConfig,
    listener: &TcpListener,
    conn: TcpStream,
    peer: SocketAddr,
    stop: &AtomicBool,
) -> Result<Outcome, Iperf3Error> {
    conn.set_nonblocking(false)
        .map_err(Iperf3Error::io("setting up a control connection"))?;
    let mut ctl = Control::new(conn, format!("iperf3 client {peer}"))
        .map_err(Iperf3Error::io("setting up a control connection"))?;
    let mut cookie = [0u8; wire::COOKIE_LEN];
    let soon = || Instant::now() + cfg.answer_timeout;
    // A client writes its cookie as soon as it connects: a peer that
    // trickles it holds the (one-test-at-a-time) server for at most this.
    ctl.read_exact_by(&mut cookie, Instant::now() + COOKIE_WAIT, "cookie")
        .map_err(|e| Iperf3Error::Protocol(format!("no-test: {e}")))?;
    wire::check_cookie(&cookie).map_err(|e| {
        Iperf3Error::Protocol(format!("no-test: not an iperf3 client ({e}); closed"))
    })?;
    ctl.write_state(State::ParamExchange)?;
    let asked: wire::WireParams = ctl.read_json(soon(), "test parameters")?;
    let p = match asked
        .validate()
        .and_then(|p| cfg.limits.refusal(&p).map_or(Ok(p), Err))
    {
        Ok(p) => p,
        Err(r) => {
            ctl.write_state(State::ServerError)?;
            ctl.write_all(&r.errno.to_be_bytes(), "the error number")?;
            ctl.write_all(&0u32.to_be_bytes(), "the error number")?;
            return Err(Iperf3Error::Rejected(format!(
                "refused the test of {peer}: {} (iperf3 error {} sent)",
                r.message, r.errno
            )));
        }
    };
    let port = listener
        .local_addr()
        .map_err(Iperf3Error::io("reading the listener's port"))?
        .port();
    let udp_listen = SocketAddr::new(cfg.listen.ip(), port);
    let mut udp = match p.transport {
        Transport::Udp => Some(sys::udp_reuseport(udp_listen).map_err(Iperf3Error::io(
            format!("opening UDP port {udp_listen} for the streams"),
        ))?),
        Transport::Tcp => None,
    };
    ctl.write_state(State::CreateStreams)?;
    let streams = accept_streams(cfg, listener, &mut udp, &cookie, &p, udp_listen, peer)?;
    drop(udp);
    ctl.write_state(State::TestStart)?;
    let plan = Plan {
        // The client says when the test ends (TEST_END); this bound only
        // stops senders whose client vanished.
        send_for: Duration::from_secs_f64(p.time_s + p.omit_s) + cfg.answer_timeout,
        omit: Duration::from_secs_f64(p.omit_s),
        len: p.len as usize,
        rate_bps: p.bandwidth_bps,
        counters_64bit: p.counters_64bit,
        cpus: cfg.cpus.clone(),
        ipv6: peer.is_ipv6(),
        live: None,
    };
    let running = data::start(streams, plan).map_err(|e| Iperf3Error::Io(e.to_string()))?;
    ctl.write_state(State::TestRunning)?;
    let end = Instant::now() + Duration::from_secs_f64(p.time_s + p.omit_s) + cfg.answer_timeout;
    let ended = loop {
        deny_waiting(listener);
        let poll = (Instant::now() + Duration::from_millis(100)).min(end);
        match ctl.read_state(poll, Some(stop)) {
            Err(Iperf3Error::Lost { .. }) if Instant::now() < end => continue,
            Ok(Some(State::TestEnd)) => break Ok(()),
            Ok(Some(State::ClientTerminate)) => {
                break Err("the client ended the test early (CLIENT_TERMINATE)".to_string())
            }
            Ok(None) => break Err("the client closed the control connection mid-test".into()),
            Ok(Some(s)) => break Err(format!("the client sent {s:?} while the test ran")),
            Err(e) => break Err(e.to_string()),
        }
    };
    running.stop();
    let local = running
        .join(Duration::ZERO)
        .map_err(|e| Iperf3Error::Io(e.to_string()))?;
    if let Err(why) = ended {
        if stop.load(Ordering::Relaxed) {
            let _ = ctl.write_state(State::ServerTerminate);
        }
        return Err(Iperf3Error::Lost {
            message: format!("test of {peer}: {why}; this end's figures up to then are kept"),
            partial: Some(Box::new(Outcome {
                params: p,
                local,
                far: None,
            })),
        });
    }
    ctl.write_state(State::ExchangeResults)?;
    let theirs: wire::WireResults = ctl.read_json(soon(), "results")?;
    ctl.write_json(&results_of(&local, &p), "this end's results")?;
    ctl.write_state(State::DisplayResults)?;
    // IPERF_DONE; a client that just closes is fine too.
    let _ = ctl.read_state(soon(), None);
    let far = far_end(&theirs, &p, peer)?;
    Ok(Outcome {
        params: p,
        local,
        far: Some(far),
    })
}

/// Accepts the client's streams in its order: TCP connections on the
/// control port that bring the test's cookie, or UDP hellos on the same
/// port number. Strangers get ACCESS_DENIED.
fn accept_streams(
    cfg: &ServerConfig,
    listener: &TcpListener,
    udp: &mut Option<UdpSocket>,
    cookie: &[u8],
    p: &TestParams,
    udp_listen: SocketAddr,
    peer: SocketAddr,
) -> Result<Vec<Stream>, Iperf3Error> {
    let congestion = p.congestion.as_deref().filter(|c| offered_congestion(c));
    let deadline = Instant::now() + cfg.answer_timeout;
    let mut out = Vec::new();
    while out.len() < p.connections() as usize {
        if Instant::now() > deadline {
            return Err(Iperf3Error::Lost {
                message: format!(
                    "only {} of {} streams connected within {:?}",
                    out.len(),
                    p.connections(),
                    cfg.answer_timeout
                ),
                partial: None,
            });
        }
        let k = out.len() as u32;
        let id = wire::stream_id(k) as u16;
        let sends = !p.client_sends(k);
        match listener.accept() {
            Ok((c, _)) if p.transport == Transport::Tcp => {
                c.set_nonblocking(false)
                    .map_err(Iperf3Error::io("setting up a data stream"))?;
                let mut got = [0u8; wire::COOKIE_LEN];
                if read_by(&c, &mut got, Instant::now() + COOKIE_WAIT) && got == cookie {
                    if let Some(cc) = congestion {
                        // The client's choice where this host already
                        // offers it (never a module loaded for a peer).
                        let _ = sys::set_congestion(c.as_raw_fd(), cc);
                    }
                    out.push(Stream {
                        id,
                        sends,
                        conn: Conn::Tcp(c),
                    });
                } else {
                    deny(c);
                }
                continue;
            }
            Ok((c, _)) => deny(c),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(Iperf3Error::Io(format!("accepting a data stream: {e}"))),
        }
        if let Some(s) = udp.take() {
            s.set_read_timeout(Some(Duration::from_millis(20)))
                .map_err(Iperf3Error::io("setting up a UDP stream"))?;
            let mut b = [0u8; 64];
            match s.recv_from(&mut b) {
                // Only the test's own client, saying iperf3's hello, gets a
                // stream: anyone else's datagram (a spoofed source would
                // make this server a reflector) is dropped.
                Ok((n, from))
                    if from.ip().to_canonical() == peer.ip().to_canonical()
                        && wire::is_udp_hello(&b[..n]) =>
                {
                    s.connect(from).map_err(Iperf3Error::io(format!(
                        "connecting UDP stream {id} to {from}"
                    )))?;
                    let _ = sys::set_buffer(s.as_raw_fd(), !sends, 4 << 20);
                    // The next stream's hello goes to a fresh socket: the
                    // connected one now takes only this client port's.
                    *udp = Some(sys::udp_reuseport(udp_listen).map_err(Iperf3Error::io(
                        format!("opening UDP port {udp_listen} for the next stream"),
                    ))?);
                    s.set_read_timeout(None)
                        .map_err(Iperf3Error::io("setting up a UDP stream"))?;
                    s.send(&wire::UDP_REPLY).map_err(Iperf3Error::io(format!(
                        "answering UDP stream {id}'s hello"
                    )))?;
                    out.push(Stream {
                        id,
                        sends,
                        conn: Conn::Udp(s),
                    });
                }
                Ok(_) | Err(_) => *udp = Some(s),
            }
        } else {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(out)
}

/// Fills `buf` from `c` by `deadline` (however the peer trickles it).
fn read_by(mut c: &TcpStream, buf: &mut [u8], deadline: Instant) -> bool {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || c.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match c.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    true
}

/// Whether this host offers congestion control `name` already
/// (`tcp_available_congestion_control`: built in or loaded).
fn offered_congestion(name: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|a| a.split_whitespace().any(|n| n == name))
}

fn far_end(w: &wire::WireResults, p: &TestParams, peer: SocketAddr) -> Result<FarEnd, Iperf3Error> {
    let streams = FarEnd::from_wire(w, p.transport, |id| {
        wire::stream_index(id)
            .filter(|&k| k < p.connections())
            .map(|k| p.client_sends(k))
    })
    .map_err(|e| Iperf3Error::Protocol(format!("the client {peer}'s results: {e}")))?;
    let mut f = FarEnd {
        role: "client".into(),
        address: peer.to_string(),
        version: wire::capped(&p.client_version),
        transport: p.transport,
        omit_s: p.omit_s,
        cpu_util_total: w.cpu_util_total,
        cpu_util_user: w.cpu_util_user,
        cpu_util_system: w.cpu_util_system,
        congestion: wire::capped(&w.congestion_used),
        streams,
        ..Default::default()
    };
    f.total();
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::iperf3::Mode;

    fn params(transport: Transport, mode: Mode, streams: u32, bps: u64, t: f64) -> TestParams {
        TestParams {
            transport,
            streams,
            mode,
            time_s: t,
            omit_s: 0.0,
            len: 1400,
            bandwidth_bps: bps,
            counters_64bit: false,
            congestion: None,
            client_version: None,
        }
    }

    #[test]
    fn limits_refuse_long_tests_and_udp_this_end_would_send_too_fast() {
        let l = ServerLimits {
            max_time_s: 60.0,
            max_udp_send_bps: 100_000_000,
        };
        let errno = |p: &TestParams| l.refusal(p).map(|r| r.errno);
        use Mode::*;
        use Transport::*;
        assert_eq!(errno(&params(Tcp, Reverse, 8, 0, 60.0)), None);
        let mut omit = params(Tcp, ClientSends, 1, 0, 58.0);
        omit.omit_s = 3.0;
        assert_eq!(errno(&omit), Some(wire::IE_DURATION));
        assert_eq!(
            errno(&params(Tcp, Reverse, 1, 0, 61.0)),
            Some(wire::IE_DURATION)
        );
        // What the client sends is its own business; unpaced too.
        assert_eq!(errno(&params(Udp, ClientSends, 4, 0, 10.0)), None);
        assert_eq!(errno(&params(Udp, Reverse, 4, 25_000_000, 10.0)), None);
        let over = [
            params(Udp, Reverse, 5, 25_000_000, 10.0),
            params(Udp, Reverse, 1, 0, 10.0),
            // --bidir: the server sends on half of the 2 × 3 streams.
            params(Udp, Bidir, 3, 40_000_000, 10.0),
            params(Udp, Reverse, 128, u64::MAX / 2, 10.0),
        ];
        for p in &over {
            let r = l.refusal(p).expect("over the cap");
            assert_eq!(r.errno, wire::IE_TOTALRATE, "{p:?}");
            assert!(
                r.message.contains("--max-udp-send-rate 100.00 Mbit/s"),
                "{}",
                r.message
            );
        }
        assert_eq!(errno(&params(Udp, Bidir, 2, 40_000_000, 10.0)), None);
        let open = ServerLimits {
            max_udp_send_bps: 0,
            ..l
        };
        assert_eq!(open.refusal(&params(Udp, Reverse, 1, 0, 10.0)), None);
    }
}
