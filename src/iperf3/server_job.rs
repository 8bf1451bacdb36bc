//! linerate's iperf3 server as an agent job (`Job::Iperf3Server`): a
//! plan's `iperf3_server` host serves every generator of a test at once.
//! The job listens when it opens (so the clients that start next find it),
//! serves until the controller stops it or its duration ends, and hands
//! back each served test as the server counted it, with the client's
//! cookie, so the controller can set the server's count beside each
//! client's own.

use super::server::{self, ServerConfig, ServerLimits};
use super::slots::MAX_CLIENTS;
use super::{Iperf3Error, Outcome};
use crate::engine::JobCtx;
use crate::proto::iperf3::{self as wire, ServedTest, ServerJob, ServerReport};
use crate::proto::EndpointSummary;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the job looks at the controller's stop and its deadline.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The job's server, checked as the command line checks `serve --iperf3`:
/// a controller is not trusted to have sent a valid one.
pub fn config(j: &ServerJob) -> Result<ServerConfig, Iperf3Error> {
    let clients = usize::from(j.max_clients);
    if !(1..=MAX_CLIENTS).contains(&clients) {
        return Err(Iperf3Error::Rejected(format!(
            "an iperf3 server for {clients} clients at once: linerate serves 1 to {MAX_CLIENTS}"
        )));
    }
    if !(j.max_time_s > 0.0 && j.max_time_s <= wire::MAX_TIME_S) {
        return Err(Iperf3Error::Rejected(format!(
            "the iperf3 server's longest test {} s is outside (0, {}] s",
            j.max_time_s,
            wire::MAX_TIME_S
        )));
    }
    if j.answer_timeout_ms == 0 {
        return Err(Iperf3Error::Rejected(
            "the iperf3 server's answer timeout is 0 ms".into(),
        ));
    }
    Ok(ServerConfig {
        listen: j.listen,
        cpus: j.cpus.clone(),
        answer_timeout: Duration::from_millis(j.answer_timeout_ms),
        limits: ServerLimits {
            max_time_s: j.max_time_s,
            max_udp_send_bps: j.max_udp_send_bps,
            max_clients: clients,
        },
    })
}

/// Makes room for the clients' descriptors and binds the port: every
/// refusal is said when the job starts, not when the first client comes.
pub fn open(cfg: &ServerConfig) -> Result<TcpListener, Iperf3Error> {
    server::check_descriptors(cfg.limits.max_clients)?;
    server::bind(cfg.listen)
}

/// Serves until the controller stops the job or `duration` has passed;
/// each served test comes back in the summary's `iperf3_served`.
pub fn run(
    ctx: &JobCtx,
    cfg: &ServerConfig,
    listener: &TcpListener,
    duration: Duration,
) -> Result<EndpointSummary, Iperf3Error> {
    let started = Instant::now();
    let until = started + duration;
    let stop = AtomicBool::new(false);
    let served_all = AtomicBool::new(false);
    let mut served = Vec::new();
    let busy = std::thread::scope(|s| {
        s.spawn(|| {
            while !served_all.load(Ordering::Relaxed) {
                if ctx.stopped() || Instant::now() >= until {
                    stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(STOP_POLL);
            }
        });
        let r = server::serve(cfg, listener, &stop, |peer, cookie, r| {
            served.push(served_test(peer, cookie, r));
        });
        served_all.store(true, Ordering::Relaxed);
        r
    })?;
    Ok(EndpointSummary {
        elapsed_s: started.elapsed().as_secs_f64(),
        iperf3_served: Some(Box::new(ServerReport { served, busy })),
        ..Default::default()
    })
}

/// One served test as the server counted it; a test that failed keeps
/// what was counted up to then, with the reason.
fn served_test(peer: SocketAddr, cookie: String, r: Result<Outcome, Iperf3Error>) -> ServedTest {
    let (outcome, error) = match r {
        Ok(o) => (Some(o), None),
        Err(Iperf3Error::Lost { message, partial }) => (partial.map(|o| *o), Some(message)),
        Err(e) => (None, Some(e.to_string())),
    };
    ServedTest {
        peer: peer.to_string(),
        cookie: Some(cookie),
        transport: outcome
            .as_ref()
            .map(|o| o.params.transport)
            .unwrap_or_default(),
        streams: outcome.map(|o| o.local.streams).unwrap_or_default(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> ServerJob {
        ServerJob {
            listen: "198.18.0.2:5201".parse().unwrap(),
            max_clients: 12,
            max_time_s: 60.0,
            max_udp_send_bps: 0,
            answer_timeout_ms: 10_000,
            cpus: vec![],
            duration_ms: 70_000,
        }
    }

    #[test]
    fn the_agent_checks_the_servers_limits_itself() {
        let c = config(&job()).expect("valid");
        assert_eq!(c.limits.max_clients, 12);
        assert_eq!(c.answer_timeout, Duration::from_secs(10));
        for bad in [
            ServerJob {
                max_clients: 0,
                ..job()
            },
            ServerJob {
                max_clients: MAX_CLIENTS as u16 + 1,
                ..job()
            },
            ServerJob {
                max_time_s: wire::MAX_TIME_S + 1.0,
                ..job()
            },
            ServerJob {
                max_time_s: f64::NAN,
                ..job()
            },
            ServerJob {
                answer_timeout_ms: 0,
                ..job()
            },
        ] {
            assert!(config(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_lost_test_keeps_what_the_server_counted() {
        let peer: SocketAddr = "198.18.0.1:40000".parse().unwrap();
        let t = served_test(peer, "abc".into(), Err(Iperf3Error::Busy("busy".into())));
        assert_eq!(t.peer, "198.18.0.1:40000");
        assert_eq!(t.cookie.as_deref(), Some("abc"));
        assert!(t.streams.is_empty());
        assert_eq!(t.error.as_deref(), Some("busy"));
    }
}
