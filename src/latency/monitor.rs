//! `linerate monitor`: latency for hours or days, smokeping's way. Every
//! target gets `probes` probes spread over each `window`; each window ends
//! in one NDJSON line with its percentiles, loss and the sorted RTTs (the
//! "smoke"). Targets are latency responders (an agent at an endpoint
//! answering one session at a time, renewed before the agent's duration
//! cap) or, for hosts without one, ICMP echo.
//!
//! Disk and memory stay flat: NDJSON files rotate by size and count, a
//! window's samples are dropped once its line is written, and the
//! Prometheus state is a fixed set of counters per target.

use super::icmp::Pinger;
use super::metrics::{self, Metrics};
use crate::engine::check_destination;
use crate::latency::error::LatencyError;
use crate::latency::error::{err, fail, Result};
use crate::model::error::{chain, Context, Step};
use crate::model::signals::interrupted;
use crate::model::stderr::{errln, errprint};
use crate::proto::probe;
use crate::proto::{Job, Request, Response};
use crate::topology::Netns;
use crate::topology::{Endpoint, Hosts};
use serde_json::json;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod config;
mod journal;
mod probers;
mod shared;
mod window;
pub use config::MonitorConfig;
pub use journal::{journal_files, Journal, JOURNAL};
use probers::{IcmpProber, SessionSlot, UdpProber};
use shared::{annotation, start_textfile_writer, unix_s, Shared};
use window::{target_loop, STOP_GRACE};

/// A responder session is renewed this long before its end.
const RENEW_BEFORE: Duration = Duration::from_secs(300);
/// Longest session asked for (agents cap jobs at an hour by default).
const SESSION_LEN: Duration = Duration::from_secs(3000);
/// Job ids of the monitor's own agents.
static NEXT_SESSION: AtomicU32 = AtomicU32::new(1);

/// What a monitor run saw, from start to stop (the journal has it window
/// by window).
#[derive(Debug, Clone, serde::Serialize)]
pub struct MonitorSummary {
    pub started_at: String,
    pub finished_at: String,
    pub duration_s: f64,
    /// The journal's current file.
    pub journal: PathBuf,
    /// Stopped by Ctrl-C or SIGTERM (rather than by --duration).
    pub interrupted: bool,
    /// Why the monitor stopped early (a responder agent was lost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub targets: Vec<metrics::TargetSummary>,
    pub max_rss_bytes: u64,
}

/// A responder session on an agent.
struct Sess {
    agent: usize,
    id: u32,
    began: Instant,
    len: Duration,
}

/// The address this host sends from towards `target`.
fn open_session(
    hosts: &mut Hosts,
    agent: usize,
    target: IpAddr,
    client: IpAddr,
    len: Duration,
    slot: &SessionSlot,
) -> Result<Sess> {
    let token = super::new_token()?;
    let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    let bind: IpAddr = if target.is_ipv6() {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let req = Request::Start {
        test: id,
        job: Job::LatencyRespond {
            bind,
            token,
            client,
            duration_ms: len.as_millis() as u64,
            max_pps: 100,
            dscp: None,
        },
        start_at_unix_ns: None,
    };
    let port = match hosts.fleet.call(agent, &req, Duration::from_secs(15))? {
        Response::Started { port: Some(p), .. } => p,
        other => fail!("unexpected answer to a responder start: {other:?}"),
    };
    if let Ok(mut g) = slot.lock() {
        *g = Some((token, SocketAddr::new(target, port)));
    }
    Ok(Sess {
        agent,
        id,
        began: Instant::now(),
        len,
    })
}

/// New lines of the annotations file since `offset`: `TEXT` (now) or
/// `UNIX_SECONDS TEXT`.
fn read_annotations(path: &Path, offset: &mut u64) -> Vec<(f64, String)> {
    let Ok(mut f) = File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len < *offset {
        *offset = 0; // truncated or replaced: start over
    }
    if f.seek(SeekFrom::Start(*offset)).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut r = BufReader::new(f).take(1 << 20);
    let mut line = String::new();
    while let Ok(n) = r.read_line(&mut line) {
        if n == 0 || !line.ends_with('\n') {
            break; // a line still being written waits for its newline
        }
        *offset += n as u64;
        let t = line.trim();
        if !t.is_empty() && !t.starts_with('#') {
            let (at, text) = match t.split_once(' ') {
                Some((a, rest)) if a.parse::<f64>().is_ok() => (
                    a.parse::<f64>().unwrap_or_else(|_| unix_s()),
                    rest.trim().to_string(),
                ),
                _ => (unix_s(), t.to_string()),
            };
            out.push((at, text.chars().take(500).collect()));
        }
        line.clear();
    }
    out
}

use std::io::Read as _;

fn vm_rss_bytes() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Runs the monitor until Ctrl-C, SIGTERM or its duration; an error when
/// it could not start. A responder lost on the way ends it early, said in
/// the summary's `error`.
pub fn run(cfg: MonitorConfig) -> Result<MonitorSummary> {
    monitor(cfg)
}

/// The live line: each target's probes and losses so far.
fn progress_line(sh: &Shared, began: Instant) {
    let Ok(m) = sh.metrics.lock() else { return };
    let parts: Vec<String> = m
        .targets
        .iter()
        .map(|t| format!("{} {} sent {} lost", t.target, t.sent, t.lost))
        .collect();
    errprint!(
        "\r\x1b[Kmonitor {:.0} s: {}",
        began.elapsed().as_secs_f64(),
        parts.join(", ")
    );
}

fn monitor(cfg: MonitorConfig) -> Result<MonitorSummary> {
    let started_at = crate::model::clock::now_rfc3339();
    let cfg = Arc::new(cfg);
    let journal = Journal::open(&cfg.out, cfg.max_file_bytes, cfg.max_files)?;
    let sh = Arc::new(Shared {
        journal: Mutex::new(journal),
        metrics: Arc::new(Mutex::new(Metrics::default())),
        textfile: cfg.metrics_textfile.clone(),
        textfile_kick: Mutex::new(None),
        stop: AtomicBool::new(false),
    });
    let textfile_writer = start_textfile_writer(&sh);
    let names = announce(&cfg, &sh)?;
    // Responders: an agent per endpoint, one session each.
    let mut hosts = Hosts::new(cfg.ssh.clone()).allowing(&cfg.allow_target);
    let mut threads = Vec::new();
    let mut sessions = start_responders(&cfg, &sh, &names, &mut hosts, &mut threads)?;
    start_pingers(&cfg, &sh, &names, &mut threads)?;
    errln!(
        "monitor: {} target(s), {} probes per {:?} window, writing {}",
        names.len(),
        cfg.probes,
        cfg.window,
        cfg.out.join(JOURNAL).display()
    );
    let began = Instant::now();
    // Annotations already in the file when the run starts are not the run's.
    let mut ann_offset = cfg.annotations.as_deref().map_or(0, file_len);
    let mut retire: Vec<(usize, u32, Instant)> = Vec::new();
    let mut error: Option<LatencyError> = None;
    let live = cfg.progress && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut shown = Instant::now();
    // With --duration, each target stops by itself once it has run that
    // long (its last window summarised); the margin covers a target that
    // never gets there (a thread stuck in a send).
    let hard_end = cfg
        .duration
        .map(|d| d + STOP_GRACE + Duration::from_secs(10));
    while !interrupted()
        && !threads.iter().all(|t| t.is_finished())
        && hard_end.is_none_or(|d| began.elapsed() < d)
    {
        if live && shown.elapsed() >= Duration::from_secs(1) {
            progress_line(&sh, began);
            shown = Instant::now();
        }
        if let Err(e) = responder_events(&mut hosts) {
            error = Some(e);
            break;
        }
        if let Some(p) = &cfg.annotations {
            for (at, text) in read_annotations(p, &mut ann_offset) {
                sh.write(&annotation(&text, at));
            }
        }
        renew_sessions(&cfg, &mut hosts, &mut sessions, &mut retire);
        retire_sessions(&mut hosts, &mut retire);
    }
    if live {
        errprint!("\r\x1b[K");
    }
    wind_down(&sh, threads, textfile_writer, &mut hosts);
    Ok(MonitorSummary {
        started_at,
        finished_at: crate::model::clock::now_rfc3339(),
        duration_s: began.elapsed().as_secs_f64(),
        journal: cfg.out.join(JOURNAL),
        interrupted: interrupted(),
        error: error.map(|e| chain(&e)),
        targets: sh
            .metrics
            .lock()
            .map(|m| m.targets.iter().map(|t| t.summary()).collect())
            .unwrap_or_default(),
        max_rss_bytes: crate::sys::peak_rss_bytes(),
    })
}

/// The length of the file at `p`; 0 when it cannot be read.
fn file_len(p: &Path) -> u64 {
    fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// The targets' names, the journal's start line (and `--annotate`'s
/// lines), and the metrics listener; returns the names, responders first.
fn announce(cfg: &MonitorConfig, sh: &Shared) -> Result<Vec<String>> {
    let names: Vec<String> = cfg
        .responders
        .iter()
        .map(|(e, a)| format!("{e}={a}"))
        .chain(cfg.icmp.iter().map(|a| format!("icmp={a}")))
        .collect();
    sh.write(&json!({
        "type": "start",
        "unix_s": unix_s(),
        "time": crate::model::clock::now_rfc3339(),
        "linerate_version": env!("CARGO_PKG_VERSION"),
        "window_s": cfg.window.as_secs_f64(),
        "probes": cfg.probes,
        "targets": names,
    }));
    for a in &cfg.annotate {
        sh.write(&annotation(a, unix_s()));
    }
    if let Some(addr) = cfg.metrics_listen {
        let bound = metrics::serve(addr, Arc::clone(&sh.metrics))
            .with_context(|| format!("listening for metrics on {addr}"))?;
        errln!("monitor: metrics on http://{bound}/metrics");
    }
    Ok(names)
}

/// A responder target's session: the session, its agent, the target, the
/// address probes come from, and the slot its prober reads.
type Renewable = (Sess, usize, IpAddr, IpAddr, SessionSlot);

/// Starts an agent per responder with a session on it, and a probing
/// thread per responder target.
fn start_responders(
    cfg: &Arc<MonitorConfig>,
    sh: &Arc<Shared>,
    names: &[String],
    hosts: &mut Hosts,
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<Vec<Renewable>> {
    let mut sessions = Vec::new();
    for (i, (ep, target)) in cfg.responders.iter().enumerate() {
        let agent = hosts
            .spawn(&format!("responder{i}"), ep, Netns::Current, None, None)
            .with_context(|| format!("starting a responder at {ep}"))?;
        let client = crate::netops::reach::source_towards(*target)
            .with_context(|| format!("no route towards {target}"))?;
        let slot: SessionSlot = Arc::new(Mutex::new(None));
        let len = session_len(cfg);
        let s = open_session(hosts, agent, *target, client, len, &slot)
            .with_context(|| format!("opening a session on the responder at {ep}"))?;
        let any: IpAddr = if target.is_ipv6() {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let prober = UdpProber {
            sock: UdpSocket::bind(SocketAddr::new(any, 0))?,
            session: Arc::clone(&slot),
            buf: vec![0u8; 2048],
            len: usize::from(cfg.probe_size).max(probe::HEADER_LEN),
        };
        sessions.push((s, agent, *target, client, slot));
        let (name, c, shr) = (names[i].clone(), Arc::clone(cfg), Arc::clone(sh));
        threads.push(crate::host::kernel::spawn_named("lr-mon-udp", move || {
            target_loop(name, "udp", Box::new(prober), c, shr)
        })?);
    }
    Ok(sessions)
}

/// A probing thread per ICMP target.
fn start_pingers(
    cfg: &Arc<MonitorConfig>,
    sh: &Arc<Shared>,
    names: &[String],
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<()> {
    for (j, addr) in cfg.icmp.iter().enumerate() {
        let pinger = Pinger::open(*addr, super::new_token()?).with_context(|| {
            format!("opening an ICMP socket for {addr} (needs root or ping_group_range)")
        })?;
        let prober = IcmpProber {
            pinger,
            buf: vec![0u8; 2048],
        };
        let name = names[cfg.responders.len() + j].clone();
        let (c, shr) = (Arc::clone(cfg), Arc::clone(sh));
        threads.push(crate::host::kernel::spawn_named(
            "lr-mon-icmp",
            move || target_loop(name, "icmp", Box::new(prober), c, shr),
        )?);
    }
    Ok(())
}

/// Waits up to half a second for what a responder agent says: an error
/// it reports is shown; an agent lost is the run's error.
fn responder_events(hosts: &mut Hosts) -> Result<()> {
    match hosts.fleet.next_event(Duration::from_millis(500)) {
        Ok(Some((_, Response::Error { message, .. }))) => {
            errln!("monitor: a responder reported: {message}")
        }
        Ok(_) => {}
        Err(e) => return Err(Step::new("a responder agent was lost", e).into()),
    }
    Ok(())
}

/// Renews sessions before the agent's cap ends them; the old one answers
/// a few seconds more for replies in flight (it goes on `retire`).
fn renew_sessions(
    cfg: &MonitorConfig,
    hosts: &mut Hosts,
    sessions: &mut [Renewable],
    retire: &mut Vec<(usize, u32, Instant)>,
) {
    for (s, agent, target, client, slot) in sessions.iter_mut() {
        // A session shorter than RENEW_BEFORE (a monitor of a few
        // minutes) renews at half its length, not on every pass.
        if s.began.elapsed() + RENEW_BEFORE.min(s.len / 2) >= s.len {
            match open_session(hosts, *agent, *target, *client, session_len(cfg), slot) {
                Ok(new) => {
                    retire.push((s.agent, s.id, Instant::now() + Duration::from_secs(10)));
                    *s = new;
                }
                Err(e) => errln!("monitor: renewing the session to {target}: {}", chain(&e)),
            }
        }
    }
}

/// Stops the renewed sessions whose grace has passed.
fn retire_sessions(hosts: &mut Hosts, retire: &mut Vec<(usize, u32, Instant)>) {
    retire.retain(|&(agent, id, at)| {
        if Instant::now() < at {
            return true;
        }
        let _ = hosts.fleet.send(
            agent,
            &Request::Stop {
                test: id,
                sender_totals: vec![],
            },
        );
        false
    });
}

/// Stops the probing threads, writes the journal's stop line and the
/// textfile a last time, and shuts the agents down.
fn wind_down(
    sh: &Shared,
    threads: Vec<std::thread::JoinHandle<()>>,
    textfile_writer: Option<std::thread::JoinHandle<()>>,
    hosts: &mut Hosts,
) {
    sh.stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    sh.write(&json!({
        "type": "stop",
        "unix_s": unix_s(),
        "time": crate::model::clock::now_rfc3339(),
        "rss_bytes": vm_rss_bytes(),
        "max_rss_bytes": crate::sys::peak_rss_bytes(),
    }));
    if let Ok(mut k) = sh.textfile_kick.lock() {
        k.take();
    }
    if let Some(w) = textfile_writer {
        let _ = w.join();
    }
    sh.textfile();
    hosts.shutdown();
}

/// The per-target table printed when the monitor stops: probes, loss and
/// RTT percentiles over the whole run, and the windows behind them.
pub fn summary_table(s: &MonitorSummary) -> String {
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = s
        .targets
        .iter()
        .map(|t| {
            let r = t.rtt_ms;
            vec![
                t.target.clone(),
                t.sent.to_string(),
                t.received.to_string(),
                t.loss_pct
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or_else(|| "-".into()),
                ms(r.map(|r| r.min)),
                ms(r.map(|r| r.mean)),
                ms(r.map(|r| r.p50)),
                ms(r.map(|r| r.p99)),
                ms(r.map(|r| r.max)),
                match t.partial_windows {
                    0 => t.windows.to_string(),
                    p => format!("{} + {p} partial", t.windows),
                },
            ]
        })
        .collect();
    let head = [
        "Target",
        "Sent",
        "Received",
        "Loss %",
        "RTT min ms",
        "avg",
        "p50",
        "p99",
        "max",
        "Windows",
    ];
    let mut width: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (k, (c, w)) in cells.iter().zip(&width).enumerate() {
            if k > 0 {
                l.push_str("  ");
            }
            // The target left-aligned, figures right-aligned.
            if k == 0 {
                l.push_str(&format!("{c:<w$}"));
            } else {
                l.push_str(&format!("{c:>w$}"));
            }
        }
        l.trim_end().to_string()
    };
    let mut out = vec![
        line(&head.map(String::from)),
        line(&width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>()),
    ];
    out.extend(rows.iter().map(|r| line(r)));
    if s.targets.is_empty() {
        out.push("(no target was probed)".into());
    }
    out.join("\n")
}

fn session_len(cfg: &MonitorConfig) -> Duration {
    cfg.duration
        .map(|d| (d + Duration::from_secs(60)).min(SESSION_LEN))
        .unwrap_or(SESSION_LEN)
}

/// Whether probes may go to `ip`: a destination tests may send to, and,
/// unless it is loopback or allowed (`allow`, from `--allow-target`), one
/// whose route from this namespace does not leave the lab.
pub fn check_probe_target(ip: IpAddr, allow: &[crate::proto::Cidr]) -> Result<()> {
    check_destination(ip, allow)?;
    // The probes leave from this namespace: its own route lookup says
    // whether they would leave the lab, as every test's sender checks.
    if ip.is_loopback() || allow.iter().any(|c| c.contains(ip)) {
        return Ok(());
    }
    if let Some((_, route)) = crate::netops::reach::only_default_route(&[ip]) {
        fail!(
            "refusing to probe {ip}: it is in a benchmarking range, but this host's route to \
             it ({route}) leads out of any isolated lab (RFC 2544, RFC 6815: these ranges \
             are for isolated test networks). Run the monitor where the lab is (e.g. `ip \
             netns exec NS linerate monitor …`), add a route to the lab, or if that path is \
             an isolated test network, pass --allow-target {}",
            crate::engine::host_prefix(ip)
        );
    }
    Ok(())
}

/// Parses `ENDPOINT=ADDR` (e.g. `local=127.0.0.1`, `ns:lab=198.18.0.2`).
pub fn parse_responder(s: &str) -> Result<(Endpoint, IpAddr)> {
    let (ep, addr) = s
        .rsplit_once('=')
        .ok_or_else(|| err!("--responder '{s}': write ENDPOINT=ADDR, e.g. local=127.0.0.1"))?;
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| err!("--responder '{s}': '{addr}' is not an IP address"))?;
    Ok((Endpoint::parse(ep)?, addr))
}

#[cfg(test)]
mod tests;
