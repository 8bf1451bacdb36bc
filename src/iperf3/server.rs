//! linerate as an iperf3 server: stock `iperf3 -c` clients (3.x: TCP, UDP,
//! -R, --bidir, -P N) run their tests against it, up to `max_clients` at
//! once (one unless raised), each on a thread of its own. A client that
//! connects while every slot is taken gets ACCESS_DENIED, as from iperf3.
//! The front door (`front`) routes connections by cookie; this file holds
//! one test's conversation.

use super::client::results_of;
use super::control::Control;
use super::data::{self, Conn, Plan, Stream};
use super::front::{self, Admitted, Slot};
use super::slots::{FDS_PER_TEST, MAX_CLIENTS};
use super::{Iperf3Error, Outcome};
use crate::model::stderr::errln;
use crate::model::units::si;
use crate::proto::iperf3::{self as wire, FarEnd, State, TestParams, Transport};
use crate::sys;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    /// Tests at once (1..=64); one more client hears "busy". Each test
    /// holds at most [`FDS_PER_TEST`] descriptors and 3 threads plus one
    /// per stream; [`check_descriptors`] makes sure all of them fit.
    pub max_clients: usize,
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

/// Descriptors the front door holds besides the tests': the listener,
/// connections waiting for their cookie, epoll, the waker, UDP sockets,
/// stdio and a served test's results files.
const DOOR_FDS: u64 = front::MAX_PENDING as u64 + 32;

/// Raises the open-files limit to what `max_clients` tests may hold at
/// most, or says why that does not fit.
pub fn check_descriptors(max_clients: usize) -> Result<(), Iperf3Error> {
    let need = max_clients.clamp(1, MAX_CLIENTS) as u64 * FDS_PER_TEST + DOOR_FDS;
    let have =
        sys::raise_nofile_limit().map_err(Iperf3Error::io("reading the open-files limit"))?;
    if have < need {
        return Err(Iperf3Error::Refused(format!(
            "--max-clients {max_clients}: that many tests may hold {need} open files \
             ({FDS_PER_TEST} each at iperf3's most streams, -P 128 --bidir), but this process \
             may open {have} (ulimit -n); raise the hard limit (e.g. `ulimit -n {need}` as root, \
             or LimitNOFILE= in a systemd unit) or lower --max-clients"
        )));
    }
    Ok(())
}

/// Serves tests until `stop`, up to `max_clients` at once, each on a
/// thread of its own; each one's outcome (or why it failed) goes to
/// `on_test`, on this thread, with the client's address and cookie.
/// Returns when `stop` is set and every running test has ended, with the
/// number of new tests it answered busy.
pub fn serve(
    cfg: &ServerConfig,
    listener: &TcpListener,
    stop: &AtomicBool,
    mut on_test: impl FnMut(SocketAddr, String, Result<Outcome, Iperf3Error>),
) -> Result<u64, Iperf3Error> {
    let (shared, wakee) = front::Shared::new(cfg.limits.max_clients)
        .map_err(Iperf3Error::io("setting up the iperf3 server"))?;
    let port = listener
        .local_addr()
        .map_err(Iperf3Error::io("reading the listener's port"))?
        .port();
    // UDP streams come to the control port's number.
    let udp_listen = SocketAddr::new(cfg.listen.ip(), port);
    let (done, finished) = std::sync::mpsc::channel();
    let shared = &shared;
    std::thread::scope(|s| {
        let door = s.spawn(move || {
            front::run(listener, udp_listen, shared, wakee, stop, |a: Admitted| {
                let done = done.clone();
                let peer = a.peer;
                let cookie = cookie_text(&a.cookie);
                let started = std::thread::Builder::new()
                    .name("lr-iperf3-test".into())
                    .spawn_scoped(s, move || {
                        let _ = done.send((peer, cookie, one_test(cfg, a, stop)));
                    });
                if let Err(e) = started {
                    errln!("iperf3: {peer}: no thread for its test ({e}); closed");
                }
            })
        });
        // Tests are recorded here, one after another, as they end.
        for (peer, cookie, r) in finished {
            on_test(peer, cookie, r);
        }
        door.join()
            .map_err(|_| Iperf3Error::Io("the iperf3 server's front door panicked".into()))?
    })?;
    Ok(shared.busy())
}

/// A cookie as text, without its NUL (checked by the front door already:
/// iperf3's cookie characters only).
pub fn cookie_text(c: &[u8]) -> String {
    String::from_utf8_lossy(c)
        .trim_end_matches('\0')
        .to_string()
}

/// The parameter exchange: the client's test, validated and held against
/// this server's limits; a refused test gets iperf3's error number back.
fn exchange_params(
    cfg: &ServerConfig,
    ctl: &mut Control,
    peer: SocketAddr,
) -> Result<TestParams, Iperf3Error> {
    ctl.write_state(State::ParamExchange)?;
    let asked: wire::WireParams =
        ctl.read_json(Instant::now() + cfg.answer_timeout, "test parameters")?;
    match asked
        .validate()
        .and_then(|p| cfg.limits.refusal(&p).map_or(Ok(p), Err))
    {
        Ok(p) => Ok(p),
        Err(r) => {
            ctl.write_state(State::ServerError)?;
            ctl.write_all(&r.errno.to_be_bytes(), "the error number")?;
            ctl.write_all(&0u32.to_be_bytes(), "the error number")?;
            Err(Iperf3Error::Rejected(format!(
                "refused the test of {peer}: {} (iperf3 error {} sent)",
                r.message, r.errno
            )))
        }
    }
}

/// One test's conversation on its control connection, its cookie already
/// read by the front door; its slot is freed when this returns.
fn one_test(
    cfg: &ServerConfig,
    a: Admitted<'_>,
    stop: &AtomicBool,
) -> Result<Outcome, Iperf3Error> {
    let Admitted {
        conn, peer, slot, ..
    } = a;
    let mut ctl = Control::new(conn, format!("iperf3 client {peer}"))
        .map_err(Iperf3Error::io("setting up a control connection"))?;
    let soon = || Instant::now() + cfg.answer_timeout;
    let p = exchange_params(cfg, &mut ctl, peer)?;
    let streams = accept_streams(cfg, &slot, &mut ctl, &p, peer, stop)?;
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
    let ended = match ctl.read_state(end, Some(stop)) {
        Ok(Some(State::TestEnd)) => Ok(()),
        Ok(Some(State::ClientTerminate)) => {
            Err("the client ended the test early (CLIENT_TERMINATE)".to_string())
        }
        Ok(None) => Err("the client closed the control connection mid-test".into()),
        Ok(Some(s)) => Err(format!("the client sent {s:?} while the test ran")),
        Err(e) => Err(e.to_string()),
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

/// Takes the client's streams in its order, then says CREATE_STREAMS:
/// TCP connections that bring the test's cookie, or UDP sockets the front
/// door connected to a hello from the control connection's address (one
/// test per address takes UDP streams at a time; waiting for that turn is
/// bounded too).
fn accept_streams(
    cfg: &ServerConfig,
    slot: &Slot<'_>,
    ctl: &mut Control,
    p: &TestParams,
    peer: SocketAddr,
    stop: &AtomicBool,
) -> Result<Vec<Stream>, Iperf3Error> {
    let congestion = p.congestion.as_deref().filter(|c| offered_congestion(c));
    let incoming = match p.transport {
        Transport::Tcp => slot.tcp_streams(),
        Transport::Udp => {
            // Each test ahead holds the turn at most an answer timeout.
            let ahead = cfg.limits.max_clients.clamp(1, MAX_CLIENTS) as u32;
            slot.udp_streams(peer, Instant::now() + cfg.answer_timeout * ahead, stop)?
        }
    };
    ctl.write_state(State::CreateStreams)?;
    let deadline = Instant::now() + cfg.answer_timeout;
    let mut out = Vec::new();
    while out.len() < p.connections() as usize {
        let k = out.len() as u32;
        let id = wire::stream_id(k) as u16;
        let sends = !p.client_sends(k);
        let Some(conn) = incoming.next(deadline, stop) else {
            return Err(Iperf3Error::Lost {
                message: format!(
                    "only {} of {} streams of {peer} connected within {:?}",
                    out.len(),
                    p.connections(),
                    cfg.answer_timeout
                ),
                partial: None,
            });
        };
        match &conn {
            Conn::Tcp(c) => {
                if let Some(cc) = congestion {
                    // The client's choice where this host already offers
                    // it (never a module loaded for a peer).
                    let _ = sys::set_congestion(c.as_raw_fd(), cc);
                }
            }
            Conn::Udp(s) => {
                let _ = sys::set_buffer(s.as_raw_fd(), !sends, 4 << 20);
                s.send(&wire::UDP_REPLY).map_err(Iperf3Error::io(format!(
                    "answering UDP stream {id}'s hello from {peer}"
                )))?;
            }
        }
        out.push(Stream { id, sends, conn });
    }
    Ok(out)
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
            max_clients: 1,
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
