//! linerate as the client of a stock iperf3 server: cookie, parameters,
//! streams, the timed test, TEST_END and the results exchange. This end's
//! streams are measured as always; the server's own results are kept.

use super::control::Control;
use super::data::{self, Conn, Measured, Plan, Stream};
use super::{Iperf3Error, Outcome};
use crate::proto::iperf3::{self as wire, FarEnd, State, TestParams, Transport};
use crate::sys;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// A test against an iperf3 server.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub server: SocketAddr,
    pub params: TestParams,
    pub cpus: Vec<usize>,
    /// The longest the server may stay silent when an answer is due.
    pub answer_timeout: Duration,
    /// Where intervals go while the test runs (an agent's job).
    pub live: Option<data::Live>,
    /// The cookie to send (an agent's job picks it, to find the server's
    /// count of this test later); none: a new one.
    pub cookie: Option<[u8; wire::COOKIE_LEN]>,
}

/// Runs the test. `stop` (Ctrl-C) ends it early with CLIENT_TERMINATE.
/// The longest TEST_END waits for this end's TCP senders to drain.
const DRAIN_MAX: Duration = Duration::from_secs(3);

/// How long a server that answers ACCESS_DENIED is asked again. A stock
/// iperf3 server refuses for a moment after its last test ended, until it
/// has read that client's close: the next test of a plan lands there.
const BUSY_WAIT: Duration = Duration::from_secs(3);

pub fn run(cfg: &ClientConfig, stop: &AtomicBool) -> Result<Outcome, Iperf3Error> {
    let deadline = Instant::now() + BUSY_WAIT;
    let mut pause = Duration::from_millis(100);
    loop {
        match run_once(cfg, stop) {
            Err(Iperf3Error::Busy(m)) => {
                let now = Instant::now();
                if now + pause > deadline || stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return Err(Iperf3Error::Busy(format!(
                        "{m} (asked again for {} s)",
                        BUSY_WAIT.as_secs()
                    )));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(800));
            }
            other => return other,
        }
    }
}

fn run_once(cfg: &ClientConfig, stop: &AtomicBool) -> Result<Outcome, Iperf3Error> {
    let peer = format!("iperf3 server {}", cfg.server);
    let conn = TcpStream::connect_timeout(&cfg.server, Duration::from_secs(5))
        .map_err(|e| connect_error(&cfg.server, e))?;
    let mut ctl = Control::new(conn, peer.clone())
        .map_err(Iperf3Error::io("setting up the control connection"))?;
    let cookie = match cfg.cookie {
        Some(c) => c,
        None => new_cookie()?,
    };
    ctl.write_all(&cookie, "the cookie")?;
    let p = &cfg.params;
    let mut running: Option<data::Running> = None;
    // Streams wait for TEST_RUNNING: a server reads them only from then on,
    // and UDP sent earlier would overflow its buffers and count as loss.
    let mut ready: Option<(Vec<Stream>, Plan)> = None;
    let mut test_end_sent = false;
    let mut wait = Instant::now() + cfg.answer_timeout;
    loop {
        let state = match ctl.read_state(wait, Some(stop)) {
            Ok(s) => s,
            Err(e) => return Err(give_up(&mut ctl, running, cfg, e, stop)),
        };
        let Some(state) = state else {
            let e = Iperf3Error::Lost {
                message: if running.is_some() {
                    format!(
                        "the {peer} closed the control connection in the middle of the test \
                         (was it stopped or restarted?)"
                    )
                } else {
                    format!(
                        "the {peer} closed the control connection before the test began: it was \
                         stopped or restarted, or it refused the test without saying why (a stock \
                         iperf3 does that for a rate over its --server-bitrate-limit); its log \
                         says which"
                    )
                },
                partial: None,
            };
            return Err(give_up(&mut ctl, running, cfg, e, stop));
        };
        match state {
            State::AccessDenied => {
                return Err(Iperf3Error::Busy(format!(
                    "the {peer} is busy with another test (it answered ACCESS_DENIED): iperf3 runs one \
                     test at a time; try again when that test is over"
                )))
            }
            State::ServerError => return Err(server_error(&mut ctl, &peer)),
            State::ServerTerminate => {
                let e = Iperf3Error::Lost {
                    message: format!("the {peer} ended the test (SERVER_TERMINATE: it was stopped)"),
                    partial: None,
                };
                return Err(give_up(&mut ctl, running, cfg, e, stop));
            }
            State::ParamExchange => ctl.write_json(&p.to_wire(), "the test parameters")?,
            State::CreateStreams => {
                let streams = connect_streams(cfg, &cookie)?;
                let plan = Plan {
                    send_for: Duration::from_secs_f64(p.time_s + p.omit_s),
                    omit: Duration::from_secs_f64(p.omit_s),
                    len: p.len as usize,
                    rate_bps: p.bandwidth_bps,
                    counters_64bit: p.counters_64bit,
                    cpus: cfg.cpus.clone(),
                    ipv6: cfg.server.is_ipv6(),
                    live: cfg.live.clone(),
                };
                ready = Some((streams, plan));
            }
            State::TestStart => {}
            State::TestRunning => {
                let Some((streams, plan)) = ready.take() else {
                    return Err(Iperf3Error::Protocol(format!(
                        "the {peer} started the test before asking for its streams"
                    )));
                };
                running = Some(
                    data::start(streams, plan).map_err(|e| Iperf3Error::Io(e.to_string()))?,
                );
                let started = Instant::now();
                let end = started + Duration::from_secs_f64(p.time_s + p.omit_s);
                // The server says nothing while the test runs, unless it stops.
                match ctl.read_state(end, Some(stop)) {
                    Err(Iperf3Error::Lost { .. }) => {}
                    Err(e) => return Err(give_up(&mut ctl, running, cfg, e, stop)),
                    Ok(None) => {
                        let e = Iperf3Error::Lost {
                            message: format!("the {peer} closed the control connection in the middle of the test (was it stopped?)"),
                            partial: None,
                        };
                        return Err(give_up(&mut ctl, running, cfg, e, stop));
                    }
                    Ok(Some(State::ServerTerminate)) => {
                        let e = Iperf3Error::Lost {
                            message: format!("the {peer} ended the test (SERVER_TERMINATE: it was stopped)"),
                            partial: None,
                        };
                        return Err(give_up(&mut ctl, running, cfg, e, stop));
                    }
                    Ok(Some(State::ServerError)) => return Err(server_error(&mut ctl, &peer)),
                    Ok(Some(s)) => {
                        return Err(Iperf3Error::Protocol(format!(
                            "the {peer} sent {s:?} while the test ran"
                        )))
                    }
                }
                // Senders stop on their own at the deadline; let them, and
                // let what they wrote reach the server before it stops
                // counting (TEST_END), so sent and received agree.
                if let Some(r) = &running {
                    if p.transport == Transport::Tcp {
                        r.drain(DRAIN_MAX);
                    } else if p.mode == wire::Mode::ClientSends {
                        let until = Instant::now() + Duration::from_millis(500);
                        while !r.finished() && Instant::now() < until {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    }
                }
                ctl.write_state(State::TestEnd)?;
                test_end_sent = true;
                wait = Instant::now() + cfg.answer_timeout;
            }
            State::ExchangeResults if test_end_sent => {
                let Some(r) = running.take() else {
                    return Err(Iperf3Error::Protocol(format!("the {peer} asked for results before any stream ran")));
                };
                let local = r.join(Duration::from_secs(2)).map_err(|e| Iperf3Error::Io(e.to_string()))?;
                ctl.write_json(&results_of(&local, p), "this end's results")?;
                let theirs: wire::WireResults = ctl.read_json(wait, "results")?;
                let far = far_end(&theirs, cfg, &peer)?;
                let outcome = Outcome {
                    params: p.clone(),
                    local,
                    far: Some(far),
                };
                // DISPLAY_RESULTS ends it; IPERF_DONE is our goodbye.
                let _ = ctl.read_state(Instant::now() + cfg.answer_timeout, None);
                let _ = ctl.write_state(State::IperfDone);
                return Ok(outcome);
            }
            other => {
                return Err(Iperf3Error::Protocol(format!(
                    "the {peer} sent {other:?} out of turn: it does not follow iperf3 3.x's protocol"
                )))
            }
        }
        if !test_end_sent {
            wait = Instant::now() + cfg.answer_timeout;
        }
    }
}

/// The error for a refused or unreachable server, with what to do.
fn connect_error(server: &SocketAddr, e: io::Error) -> Iperf3Error {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Iperf3Error::Refused(format!(
            "connecting to the iperf3 server at {server}: connection refused, nothing listens on \
             that port; start `iperf3 -s` there, or name its port (iperf3://HOST:PORT)"
        )),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Iperf3Error::Refused(format!(
            "connecting to the iperf3 server at {server}: no answer within 5 s; check the address, \
             routes and firewalls between here and there"
        )),
        _ => Iperf3Error::Refused(format!("connecting to the iperf3 server at {server}: {e}")),
    }
}

pub fn new_cookie() -> Result<[u8; wire::COOKIE_LEN], Iperf3Error> {
    let mut r = [0u8; 36];
    getrandom::fill(&mut r)
        .map_err(|e| Iperf3Error::Io(format!("drawing a random cookie: {e}")))?;
    Ok(wire::make_cookie(&r))
}

/// SERVER_ERROR is followed by iperf3's error number (and errno, which a
/// server refusing authentication leaves out).
fn server_error(ctl: &mut Control, peer: &str) -> Iperf3Error {
    let deadline = Instant::now() + Duration::from_secs(2);
    let errno = ctl.read_u32(deadline).ok().flatten();
    let os = ctl.read_u32(deadline).ok().flatten().filter(|&e| e != 0);
    let os = os
        .map(|e| format!(" ({})", io::Error::from_raw_os_error(e as i32)))
        .unwrap_or_default();
    match errno {
        Some(wire::IE_AUTHTEST) => Iperf3Error::AuthRequired(format!(
            "the {peer} requires authentication (iperf3 --username / RSA keys, 3.7 and later); \
             linerate does not support iperf3 authentication: use a server started without \
             --rsa-private-key-path/--authorized-users-path"
        )),
        Some(n) => Iperf3Error::Rejected(format!(
            "the {peer} rejected the test: iperf3 error {n} ({}){os}; change the parameters it \
             refuses, or check its log",
            ie_name(n)
        )),
        None => Iperf3Error::Rejected(format!(
            "the {peer} reported an error (SERVER_ERROR) without its number; check its log"
        )),
    }
}

/// What an iperf3 error number means (iperf_api.h's i_errno), for the
/// ones a server sends after SERVER_ERROR.
fn ie_name(n: u32) -> &'static str {
    match n {
        wire::IE_DURATION => "test duration too long for the server",
        wire::IE_NUMSTREAMS => "too many parallel streams",
        wire::IE_BLOCKSIZE => "block size out of range",
        8 => "socket buffer size too large",
        10 => "MSS too large",
        12 => "bad --omit value",
        wire::IE_UNIMP => "not implemented by the server",
        16 => "more than one end condition (-t, -n, -k)",
        18 => "no SCTP support on the server",
        20 => "UDP datagram size out of range",
        25 => "reverse and bidirectional at once",
        wire::IE_TOTALRATE => "the total rate asked for is over the server's limit (iperf3's --server-bitrate-limit, linerate's --max-udp-send-rate)",
        102 => "the server could not listen for the streams",
        wire::IE_ACCESSDENIED => "the server is busy",
        124 => "the server could not set the socket buffer size",
        134 => "the server could not set that TCP congestion control (-C)",
        140 => "the server could not set the pacing rate",
        wire::IE_AUTHTEST => "authentication failed",
        144 => "no message from the client in time (the server's --rcv-timeout)",
        202 => "the server could not listen for a stream",
        203 => "the server could not connect a stream",
        _ => "see iperf_api.h of the server's iperf3",
    }
}

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// Opens the streams in iperf3's order (bidir: the client's sending ones
/// first), each announced with the cookie (TCP) or the UDP hello.
fn connect_streams(cfg: &ClientConfig, cookie: &[u8]) -> Result<Vec<Stream>, Iperf3Error> {
    let p = &cfg.params;
    let mut out = Vec::new();
    for k in 0..p.connections() {
        let id = wire::stream_id(k) as u16;
        let sends = p.client_sends(k);
        let conn = match p.transport {
            Transport::Tcp => {
                let c = TcpStream::connect_timeout(&cfg.server, Duration::from_secs(5)).map_err(
                    |e| {
                        Iperf3Error::Io(format!(
                            "opening data stream {id} to the iperf3 server {}: {e}",
                            cfg.server
                        ))
                    },
                )?;
                (&c).write_all(cookie)
                    .map_err(Iperf3Error::io(format!("starting data stream {id}")))?;
                if let Some(cc) = &p.congestion {
                    sys::set_congestion(c.as_raw_fd(), cc).map_err(Iperf3Error::io(format!(
                        "congestion control '{cc}' on stream {id}"
                    )))?;
                }
                Conn::Tcp(c)
            }
            Transport::Udp => Conn::Udp(udp_stream(cfg.server, id, sends)?),
        };
        out.push(Stream { id, sends, conn });
    }
    Ok(out)
}

fn udp_stream(server: SocketAddr, id: u16, sends: bool) -> Result<UdpSocket, Iperf3Error> {
    let what = format!("UDP stream {id} to the iperf3 server {server}");
    let s = UdpSocket::bind(SocketAddr::new(unspecified(server.is_ipv6()), 0))
        .map_err(Iperf3Error::io(format!("opening {what}")))?;
    s.connect(server)
        .map_err(Iperf3Error::io(format!("opening {what}")))?;
    // Best effort: a receiver's buffer holds bursts; the kernel caps it.
    let _ = sys::set_buffer(s.as_raw_fd(), !sends, 4 << 20);
    s.send(&wire::UDP_HELLO)
        .map_err(Iperf3Error::io(format!("starting {what}")))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(Iperf3Error::io(format!("starting {what}")))?;
    let mut b = [0u8; 64];
    match s.recv(&mut b) {
        Ok(n) if wire::is_udp_reply(&b[..n]) => Ok(s),
        Ok(n) => Err(Iperf3Error::Protocol(format!(
            "{what}: the server answered the hello with {n} unexpected bytes"
        ))),
        Err(e) => Err(Iperf3Error::Lost {
            message: format!(
                "{what}: no answer to the stream's hello within 10 s ({e}); a firewall may drop UDP \
                 to port {}",
                server.port()
            ),
            partial: None,
        }),
    }
}

/// This process's user and system CPU seconds (USER_HZ is 100 in the
/// /proc ABI).
fn cpu_split() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line, the 12th and 13th after it.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    match f.as_slice() {
        [u, s] => (u / 100.0, s / 100.0),
        _ => (0.0, 0.0),
    }
}

/// This end's results in iperf3's form (omitted seconds left out).
pub(super) fn results_of(m: &Measured, p: &TestParams) -> wire::WireResults {
    let elapsed = m.summary.elapsed_s.max(1e-6);
    let (user, system) = cpu_split();
    let whole = (user + system).max(1e-9);
    let total = m.summary.cpu_s / elapsed * 100.0;
    let sends = m.streams.iter().any(|s| s.sends);
    let tcp = p.transport == Transport::Tcp;
    wire::WireResults {
        cpu_util_total: total,
        cpu_util_user: total * user / whole,
        cpu_util_system: total * system / whole,
        sender_has_retransmits: if tcp && sends { 1.0 } else { -1.0 },
        congestion_used: p.congestion.clone(),
        streams: m
            .streams
            .iter()
            .map(|s| wire::WireStream {
                id: f64::from(s.id),
                bytes: s.bytes as f64,
                retransmits: if tcp && s.sends {
                    s.retransmits as f64
                } else {
                    -1.0
                },
                jitter: s.jitter_s,
                errors: s.lost as f64,
                packets: s.packets as f64,
                start_time: 0.0,
                end_time: s.seconds,
            })
            .collect(),
    }
}

fn far_end(w: &wire::WireResults, cfg: &ClientConfig, peer: &str) -> Result<FarEnd, Iperf3Error> {
    let p = &cfg.params;
    let streams = FarEnd::from_wire(w, p.transport, |id| {
        wire::stream_index(id)
            .filter(|&k| k < p.connections())
            .map(|k| !p.client_sends(k))
    })
    .map_err(|e| Iperf3Error::Protocol(format!("the {peer}'s results: {e}")))?;
    let mut f = FarEnd {
        role: "server".into(),
        address: cfg.server.to_string(),
        version: None,
        transport: p.transport,
        omit_s: p.omit_s,
        cpu_util_total: w.cpu_util_total,
        cpu_util_user: w.cpu_util_user,
        cpu_util_system: w.cpu_util_system,
        congestion: w.congestion_used.clone(),
        streams,
        ..Default::default()
    };
    f.total();
    Ok(f)
}

/// Ends a test that cannot finish: tells the server (CLIENT_TERMINATE),
/// stops the streams and keeps what they measured in the error.
fn give_up(
    ctl: &mut Control,
    running: Option<data::Running>,
    cfg: &ClientConfig,
    e: Iperf3Error,
    stop: &AtomicBool,
) -> Iperf3Error {
    let _ = ctl.write_state(State::ClientTerminate);
    let local = running.and_then(|r| r.join(Duration::ZERO).ok());
    let interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    let message = if interrupted {
        "interrupted: the test was ended early (CLIENT_TERMINATE sent to the server)".to_string()
    } else {
        match &e {
            Iperf3Error::Lost { message, .. } => format!(
                "{message}; this end's figures up to then are kept (partial), the server's are lost"
            ),
            other => other.to_string(),
        }
    };
    match local {
        Some(local) => Iperf3Error::Lost {
            message,
            partial: Some(Box::new(Outcome {
                params: cfg.params.clone(),
                local,
                far: None,
            })),
        },
        None if interrupted => Iperf3Error::Lost {
            message,
            partial: None,
        },
        None => e,
    }
}
