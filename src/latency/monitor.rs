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
use super::stats::{self, Percentiles};
use crate::engine::check_destination;
use crate::latency::error::LatencyError;
use crate::latency::error::{err, fail, Result};
use crate::model::error::{chain, Context, Step};
use crate::model::signals::interrupted;
use crate::model::stderr::{errln, errprint};
use crate::proto::probe::{self, Kind, Probe, ProbeSample};
use crate::proto::{Job, Request, Response};
use crate::sys::realtime_ns;
use crate::topology::ssh::SshOptions;
use crate::topology::Netns;
use crate::topology::{Endpoint, Hosts};
use serde_json::json;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The journal's file name; rotated ones get `.1`, `.2`, ... (older last).
pub const JOURNAL: &str = "monitor.ndjson";
/// A responder session is renewed this long before its end.
const RENEW_BEFORE: Duration = Duration::from_secs(300);
/// Longest session asked for (agents cap jobs at an hour by default).
const SESSION_LEN: Duration = Duration::from_secs(3000);
/// Job ids of the monitor's own agents.
static NEXT_SESSION: AtomicU32 = AtomicU32::new(1);

/// What `linerate monitor` runs, validated.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub responders: Vec<(Endpoint, IpAddr)>,
    pub icmp: Vec<IpAddr>,
    pub window: Duration,
    pub probes: u32,
    pub duration: Option<Duration>,
    pub out: PathBuf,
    pub annotate: Vec<String>,
    pub annotations: Option<PathBuf>,
    pub metrics_listen: Option<SocketAddr>,
    pub metrics_textfile: Option<PathBuf>,
    pub max_file_bytes: u64,
    pub max_files: u32,
    pub probe_size: u16,
    pub ssh: SshOptions,
    /// `--allow-target`: ssh responders there may be reached through the
    /// default route.
    pub allow_target: Vec<crate::proto::Cidr>,
    /// A live line of the counts so far on a terminal's stderr.
    pub progress: bool,
}

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

/// The NDJSON journal with size/count rotation.
pub struct Journal {
    dir: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    max_files: u32,
}

impl Journal {
    pub fn open(dir: &Path, max_bytes: u64, max_files: u32) -> Result<Journal> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(JOURNAL);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Journal {
            dir: dir.into(),
            file,
            written,
            max_bytes: max_bytes.max(4096),
            max_files: max_files.max(1),
        })
    }

    fn rotate(&mut self) -> Result<()> {
        let name = |k: u32| {
            if k == 0 {
                self.dir.join(JOURNAL)
            } else {
                self.dir.join(format!("{JOURNAL}.{k}"))
            }
        };
        let _ = fs::remove_file(name(self.max_files - 1));
        for k in (0..self.max_files - 1).rev() {
            let _ = fs::rename(name(k), name(k + 1));
        }
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(name(0))
            .context("opening a fresh journal after rotation")?;
        self.written = 0;
        Ok(())
    }

    /// Appends one line (whole lines only: a crash leaves complete ones).
    pub fn line(&mut self, v: &serde_json::Value) -> Result<()> {
        let mut s = v.to_string();
        s.push('\n');
        if self.written > 0 && self.written + s.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(s.as_bytes())?;
        self.written += s.len() as u64;
        Ok(())
    }
}

/// The journal files of a monitor directory, oldest first.
pub fn journal_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            let k = if n == JOURNAL {
                0
            } else {
                n.strip_prefix(&format!("{JOURNAL}."))?.parse().ok()?
            };
            Some((k, e.path()))
        })
        .collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.0));
    v.into_iter().map(|(_, p)| p).collect()
}

struct Shared {
    journal: Mutex<Journal>,
    metrics: metrics::Shared,
    textfile: Option<PathBuf>,
    /// Wakes the thread that rewrites the textfile: its fsyncs must not
    /// hold up a probe thread on a busy disk.
    textfile_kick: Mutex<Option<mpsc::Sender<()>>>,
    stop: AtomicBool,
}

impl Shared {
    fn write(&self, v: &serde_json::Value) {
        if let Ok(mut j) = self.journal.lock() {
            if let Err(e) = j.line(v) {
                errln!("monitor: writing the journal: {}", chain(&e));
            }
        }
    }
    /// Asks the textfile writer for a fresh copy; without a writer
    /// thread it is written here.
    fn kick_textfile(&self) {
        let sent = self
            .textfile_kick
            .lock()
            .ok()
            .and_then(|k| k.as_ref().map(|tx| tx.send(()).is_ok()));
        if sent != Some(true) {
            self.textfile();
        }
    }
    /// Writes the textfile now, in the calling thread.
    fn textfile(&self) {
        let Some(p) = &self.textfile else { return };
        let body = self.metrics.lock().map(|m| m.render()).unwrap_or_default();
        if let Err(e) = crate::model::files::write_atomic(p, body.as_bytes()) {
            errln!("monitor: writing {}: {}", p.display(), chain(&e));
        }
    }
}

/// The thread that rewrites `--metrics-textfile` after windows end; kicks
/// that arrive while it writes are folded into one more write. It ends
/// when the run takes the sender, or drops the shared state.
fn start_textfile_writer(sh: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    sh.textfile.as_ref()?;
    let (tx, rx) = mpsc::channel::<()>();
    if let Ok(mut k) = sh.textfile_kick.lock() {
        *k = Some(tx);
    }
    // Weak: the sender lives in the shared state, which must not be kept
    // alive by the thread that waits on it (a run that ends early drops
    // the state, and with it the sender, and the thread ends).
    let shared = Arc::downgrade(sh);
    let writer = crate::host::kernel::spawn_named("lr-mon-prom", move || {
        while rx.recv().is_ok() {
            while rx.try_recv().is_ok() {}
            match shared.upgrade() {
                Some(sh) => sh.textfile(),
                None => return,
            }
        }
    });
    if writer.is_err() {
        // No thread: windows write the textfile themselves.
        if let Ok(mut k) = sh.textfile_kick.lock() {
            k.take();
        }
    }
    writer.ok()
}

fn unix_s() -> f64 {
    realtime_ns() as f64 / 1e9
}

fn annotation(text: &str, at: f64) -> serde_json::Value {
    json!({
        "type": "annotation",
        "unix_s": at,
        "time": crate::model::clock::rfc3339(at as u64),
        "text": text,
    })
}

/// A reply to one probe: its sequence number, RTT, and (responders) the
/// responder's accepted count.
struct Reply {
    seq: u32,
    rtt_ns: u64,
    rx_count: Option<u32>,
}

/// One way of probing a target.
trait Prober: Send {
    fn send(&mut self, seq: u32) -> bool;
    fn recv(&mut self, wait: Duration) -> Option<Reply>;
}

/// The session a responder target probes: token and address.
type SessionSlot = Arc<Mutex<Option<(u64, SocketAddr)>>>;

struct UdpProber {
    sock: UdpSocket,
    session: SessionSlot,
    buf: Vec<u8>,
    len: usize,
}

impl Prober for UdpProber {
    fn send(&mut self, seq: u32) -> bool {
        let Some((token, addr)) = self.session.lock().ok().and_then(|g| *g) else {
            return false;
        };
        let mut b = vec![0u8; self.len];
        Probe::request(token, seq, realtime_ns()).emit(&mut b);
        self.sock.send_to(&b, addr).is_ok()
    }
    fn recv(&mut self, wait: Duration) -> Option<Reply> {
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_micros(100))))
            .ok()?;
        let (n, from) = self.sock.recv_from(&mut self.buf).ok()?;
        let rx = realtime_ns();
        let (token, addr) = self.session.lock().ok().and_then(|g| *g)?;
        let p = Probe::parse(&self.buf[..n]).ok()?;
        if from != addr || p.token != token || p.kind != Kind::Reply {
            return None;
        }
        let turnaround = p.responder_tx_ns.saturating_sub(p.responder_rx_ns);
        Some(Reply {
            seq: p.seq,
            rtt_ns: rx.saturating_sub(p.client_tx_ns).saturating_sub(turnaround),
            rx_count: Some(p.rx_count),
        })
    }
}

struct IcmpProber {
    pinger: Pinger,
    buf: Vec<u8>,
}

impl Prober for IcmpProber {
    fn send(&mut self, seq: u32) -> bool {
        self.pinger.send(seq, realtime_ns()).is_ok()
    }
    fn recv(&mut self, wait: Duration) -> Option<Reply> {
        let (seq, tx) = self.pinger.recv(wait, &mut self.buf)?;
        Some(Reply {
            seq,
            rtt_ns: realtime_ns().saturating_sub(tx),
            rx_count: None,
        })
    }
}

/// How long a run's last (partial) window waits for replies to its
/// probes still in flight.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Records a reply's RTT on the window's probe it answers (the window's
/// first probe is `base`); a second reply to a probe changes nothing.
fn take_reply(samples: &mut [ProbeSample], base: u32, r: Reply) {
    let Some(i) = r.seq.checked_sub(base) else {
        return;
    };
    if let Some(s) = samples.get_mut(i as usize) {
        if s.2 == 0 {
            // Only the RTT matters here: fake times that give it.
            s.2 = s.1 + r.rtt_ns.max(1);
            s.5 = r.rx_count.unwrap_or(0);
        }
    }
}

/// A cut window's last replies: waits up to [`STOP_GRACE`] for the probes
/// still unanswered.
fn await_stragglers(p: &mut dyn Prober, samples: &mut [ProbeSample], base: u32) {
    let grace = Instant::now() + STOP_GRACE;
    while samples.iter().any(|s| !s.answered()) && Instant::now() < grace {
        let wait = grace
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        if let Some(r) = p.recv(wait) {
            take_reply(samples, base, r);
        }
    }
}

/// One target's windows, until told to stop or until `end`. The window
/// the stop cuts short is summarised too (`"partial": true`), after the
/// replies still in flight had [`STOP_GRACE`] to come in: a run shorter
/// than its window still measures.
fn target_loop(
    name: String,
    kind: &'static str,
    mut p: Box<dyn Prober>,
    cfg: Arc<MonitorConfig>,
    sh: Arc<Shared>,
) {
    let n = cfg.probes.max(1);
    let spacing = cfg.window / n;
    let mut seq: u32 = 0;
    let mut win_start = Instant::now();
    // Each target runs the whole --duration from its own start, so a
    // window as long as the run ends with it, complete.
    let end = cfg.duration.map(|d| win_start + d);
    let done = || sh.stop.load(Ordering::Relaxed) || end.is_some_and(|e| Instant::now() >= e);
    let mut win_unix = unix_s();
    while !done() {
        let base = seq;
        let mut samples: Vec<ProbeSample> = Vec::with_capacity(n as usize);
        let take = |r: Reply, samples: &mut Vec<ProbeSample>| take_reply(samples, base, r);
        let win_end = win_start + cfg.window;
        let mut cut = false;
        'probes: for i in 0..n {
            let due = win_start + spacing * i;
            while Instant::now() < due {
                if done() {
                    cut = true;
                    break 'probes;
                }
                let wait = due
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(250));
                if let Some(r) = p.recv(wait) {
                    take(r, &mut samples);
                }
            }
            samples.push(ProbeSample(seq, 1_000_000_000, 0, 0, 0, 0, 0));
            if !p.send(seq) {
                // Counted as sent and lost: the target is unreachable.
            }
            seq = seq.wrapping_add(1);
        }
        while !cut && Instant::now() < win_end {
            if done() {
                cut = true;
                break;
            }
            let wait = win_end
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(250));
            if let Some(r) = p.recv(wait) {
                take(r, &mut samples);
            }
        }
        if cut {
            if samples.is_empty() {
                return;
            }
            await_stragglers(p.as_mut(), &mut samples, base);
        }
        let end_unix = unix_s();
        emit_window(&name, kind, &samples, (win_unix, end_unix), cut, &cfg, &sh);
        if cut {
            return;
        }
        win_start = win_end;
        win_unix = end_unix;
        // Fell behind (a suspended host): start the next window now.
        if Instant::now() > win_start + cfg.window {
            win_start = Instant::now();
        }
    }
}

/// Writes one window's line and adds it to the metrics.
fn emit_window(
    name: &str,
    kind: &str,
    samples: &[ProbeSample],
    (start, end): (f64, f64),
    partial: bool,
    cfg: &MonitorConfig,
    sh: &Shared,
) {
    let mut h = stats::histogram();
    let mut rtts: Vec<f64> = Vec::new();
    for s in samples.iter().filter(|s| s.answered()) {
        let ns = s.2 - s.1;
        let _ = h.record(ns.max(1));
        rtts.push(ns as f64 / 1e9);
    }
    rtts.sort_by(f64::total_cmp);
    let sent = samples.len() as u64;
    let received = rtts.len() as u64;
    let lost = sent - received;
    let (mut lf, mut lr) = (0u64, 0u64);
    if kind == "udp" {
        for d in stats::loss_directions(samples, None).into_iter().flatten() {
            if d {
                lf += 1;
            } else {
                lr += 1;
            }
        }
    }
    let pct: Option<Percentiles> = Percentiles::of(&h);
    let line = json!({
        "type": "window",
        "target": name,
        "kind": kind,
        "start_unix_s": start,
        "end_unix_s": end,
        "time": crate::model::clock::rfc3339(start as u64),
        "window_s": cfg.window.as_secs_f64(),
        "partial": partial,
        "sent": sent,
        "received": received,
        "lost": lost,
        "loss_ratio": if sent > 0 { lost as f64 / sent as f64 } else { 0.0 },
        "lost_forward": if kind == "udp" { Some(lf) } else { None },
        "lost_reverse": if kind == "udp" { Some(lr) } else { None },
        "rtt_s": pct,
        "rtts_s": rtts,
    });
    sh.write(&line);
    if let Ok(mut m) = sh.metrics.lock() {
        let t = m.target(name, kind);
        for r in &rtts {
            t.observe(*r);
        }
        t.sent += sent;
        t.lost += lost;
        t.lost_forward += lf;
        t.lost_reverse += lr;
        if partial {
            t.partial_windows += 1;
        } else {
            t.windows += 1;
        }
    }
    sh.kick_textfile();
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
    // Responders: an agent per endpoint, one session each.
    let mut hosts = Hosts::new(cfg.ssh.clone()).allowing(&cfg.allow_target);
    let mut sessions: Vec<(Sess, usize, IpAddr, IpAddr, SessionSlot)> = Vec::new();
    let mut threads = Vec::new();
    for (i, (ep, target)) in cfg.responders.iter().enumerate() {
        let agent = hosts
            .spawn(&format!("responder{i}"), ep, Netns::Current, None, None)
            .with_context(|| format!("starting a responder at {ep}"))?;
        let client = crate::netops::reach::source_towards(*target)
            .with_context(|| format!("no route towards {target}"))?;
        let slot: SessionSlot = Arc::new(Mutex::new(None));
        let len = session_len(&cfg);
        let s = open_session(&mut hosts, agent, *target, client, len, &slot)
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
        let (name, c, shr) = (names[i].clone(), Arc::clone(&cfg), Arc::clone(&sh));
        threads.push(crate::host::kernel::spawn_named("lr-mon-udp", move || {
            target_loop(name, "udp", Box::new(prober), c, shr)
        })?);
    }
    for (j, addr) in cfg.icmp.iter().enumerate() {
        let pinger = Pinger::open(*addr, super::new_token()?).with_context(|| {
            format!("opening an ICMP socket for {addr} (needs root or ping_group_range)")
        })?;
        let prober = IcmpProber {
            pinger,
            buf: vec![0u8; 2048],
        };
        let name = names[cfg.responders.len() + j].clone();
        let (c, shr) = (Arc::clone(&cfg), Arc::clone(&sh));
        threads.push(crate::host::kernel::spawn_named(
            "lr-mon-icmp",
            move || target_loop(name, "icmp", Box::new(prober), c, shr),
        )?);
    }
    errln!(
        "monitor: {} target(s), {} probes per {:?} window, writing {}",
        names.len(),
        cfg.probes,
        cfg.window,
        cfg.out.join(JOURNAL).display()
    );
    let began = Instant::now();
    let mut ann_offset = cfg
        .annotations
        .as_ref()
        .and_then(|p| fs::metadata(p).ok())
        .map(|m| m.len())
        .unwrap_or(0);
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
        match hosts.fleet.next_event(Duration::from_millis(500)) {
            Ok(Some((_, Response::Error { message, .. }))) => {
                errln!("monitor: a responder reported: {message}")
            }
            Ok(_) => {}
            Err(e) => {
                error = Some(Step::new("a responder agent was lost", e).into());
                break;
            }
        }
        if let Some(p) = &cfg.annotations {
            for (at, text) in read_annotations(p, &mut ann_offset) {
                sh.write(&annotation(&text, at));
            }
        }
        // Renew sessions before the agent's cap ends them; the old one
        // answers a few seconds more for replies in flight.
        for (s, agent, target, client, slot) in sessions.iter_mut() {
            // A session shorter than RENEW_BEFORE (a monitor of a few
            // minutes) renews at half its length, not on every pass.
            if s.began.elapsed() + RENEW_BEFORE.min(s.len / 2) >= s.len {
                match open_session(
                    &mut hosts,
                    *agent,
                    *target,
                    *client,
                    session_len(&cfg),
                    slot,
                ) {
                    Ok(new) => {
                        retire.push((s.agent, s.id, Instant::now() + Duration::from_secs(10)));
                        *s = new;
                    }
                    Err(e) => errln!("monitor: renewing the session to {target}: {}", chain(&e)),
                }
            }
        }
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
    if live {
        errprint!("\r\x1b[K");
    }
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
    let targets = sh
        .metrics
        .lock()
        .map(|m| m.targets.iter().map(|t| t.summary()).collect())
        .unwrap_or_default();
    Ok(MonitorSummary {
        started_at,
        finished_at: crate::model::clock::now_rfc3339(),
        duration_s: began.elapsed().as_secs_f64(),
        journal: cfg.out.join(JOURNAL),
        interrupted: interrupted(),
        error: error.map(|e| chain(&e)),
        targets,
        max_rss_bytes: crate::sys::peak_rss_bytes(),
    })
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
mod tests {
    use super::*;

    fn summary(targets: Vec<metrics::TargetSummary>) -> MonitorSummary {
        MonitorSummary {
            started_at: String::new(),
            finished_at: String::new(),
            duration_s: 3.0,
            journal: PathBuf::from("j"),
            interrupted: false,
            error: None,
            targets,
            max_rss_bytes: 0,
        }
    }

    #[test]
    fn the_table_has_a_line_per_target_with_its_loss_and_percentiles() {
        let mut m = metrics::Metrics::default();
        let t = m.target("ns:lab=198.18.0.2", "udp");
        for ms in [0.1, 0.2, 0.3, 0.4] {
            t.observe(ms / 1e3);
        }
        t.sent = 5;
        t.lost = 1;
        t.partial_windows = 1;
        m.target("icmp=198.18.0.9", "icmp").sent = 3;
        m.targets[1].lost = 3;
        m.targets[1].windows = 2;
        let s = summary(m.targets.iter().map(|t| t.summary()).collect());
        let table = summary_table(&s);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(
            lines[0].starts_with("Target") && lines[0].contains("p99"),
            "{table}"
        );
        let udp: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            udp[..4],
            ["ns:lab=198.18.0.2", "5", "4", "20.00"],
            "{table}"
        );
        // min avg p50 p99 max, ms (HDR: 3 significant digits)
        assert_eq!(udp[4], "0.100", "{table}");
        assert_eq!(udp[8], "0.400", "{table}");
        assert!(lines[2].ends_with("0 + 1 partial"), "{table}");
        let icmp: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            icmp,
            [
                "icmp=198.18.0.9",
                "3",
                "0",
                "100.00",
                "-",
                "-",
                "-",
                "-",
                "-",
                "2"
            ]
        );
        let sum = &s.targets[0];
        let r = sum.rtt_ms.unwrap();
        assert!(
            (r.mean - 0.25).abs() < 0.001 && (r.p50 - 0.2).abs() < 0.001,
            "{r:?}"
        );
        assert_eq!((sum.windows, sum.partial_windows), (0, 1));
    }

    #[test]
    fn no_targets_says_so() {
        assert!(summary_table(&summary(vec![])).contains("no target was probed"));
    }
}
