//! What the download server's event loops share (`serve_loop`) and the
//! server reads (`server`): the content, the limits and the connection
//! records (live ones, and finished ones folded into totals so nothing
//! grows with churn), the counters and the interval samples.

use super::ConnStats;
use crate::model::stderr::errln;
use crate::proto::http::{HttpConnection, StatusCount};
use crate::proto::{IntervalSample, StreamSample};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Finished connections listed in the summary (the latest); totals count all.
const KEEP_FINISHED: usize = 1000;
/// A limit's log line repeats at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// A fatal alert (internal_error) as a plaintext TLS record: what a TLS
/// client refused over a limit reads, instead of an HTTP answer.
pub const TLS_REFUSAL_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50];

pub enum Body {
    /// The generated object: one period of its pattern, and its length.
    Pattern(File, u64),
    Root(PathBuf),
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Total(usize),
    PerClient(IpAddr, usize),
    Descriptors,
}

struct Tracked {
    stats: Arc<ConnStats>,
    /// Bytes and retransmits already reported in intervals.
    reported: (u64, u64),
}

#[derive(Default)]
struct Registry {
    live: HashMap<u16, Tracked>,
    /// Closed since the last sample: reported once more, then folded.
    finished: Vec<(u16, Tracked)>,
    recent: VecDeque<HttpConnection>,
    per_client: HashMap<IpAddr, usize>,
    free_ids: Vec<u16>,
    next_id: u32,
    connections: u64,
    folded_requests: u64,
    folded_bytes: u64,
}

#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    since: u64,
    total: u64,
}

pub struct Shared {
    pub body: Body,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub ktls: bool,
    /// `--cold`: every file body is dropped from the page cache after it
    /// was sent, so each download reads the disk again.
    pub cold: bool,
    pub request_timeout: Duration,
    pub max_connections: usize,
    pub max_per_client: usize,
    registry: Mutex<Registry>,
    refusals: Mutex<RefusalLog>,
    pub ktls_used: AtomicBool,
    pub ktls_note: Mutex<Option<String>>,
    status: Mutex<Vec<StatusCount>>,
    pub errors: AtomicU64,
    /// Connections closed for not sending a request (head, body or TLS
    /// handshake) within the request timeout.
    pub timeouts: AtomicU64,
    pub wire_bytes: AtomicU64,
    /// Request body bytes read and discarded (POST, PUT…).
    pub request_body_bytes: AtomicU64,
    pub tls_version: Mutex<Option<(String, String)>>,
    stop: Arc<AtomicBool>,
}

impl Shared {
    pub fn new(
        body: Body,
        tls: Option<Arc<rustls::ServerConfig>>,
        ktls: bool,
        cold: bool,
        request_timeout: Duration,
        stop: Arc<AtomicBool>,
    ) -> Self {
        Shared {
            body,
            tls,
            ktls,
            cold,
            request_timeout,
            max_connections: 1,
            max_per_client: 1,
            registry: Mutex::new(Registry::default()),
            refusals: Mutex::new(RefusalLog::default()),
            ktls_used: AtomicBool::new(false),
            ktls_note: Mutex::new(None),
            status: Mutex::new(Vec::new()),
            errors: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            wire_bytes: AtomicU64::new(0),
            request_body_bytes: AtomicU64::new(0),
            tls_version: Mutex::new(None),
            stop,
        }
    }

    pub fn stop_now(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn status_counts(&self) -> Vec<StatusCount> {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Connections refused over a limit so far.
    pub fn refused_total(&self) -> u64 {
        self.refusals.lock().map(|r| r.total).unwrap_or(0)
    }
}

impl Shared {
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn count_status(&self, status: u16) {
        if let Ok(mut s) = self.status.lock() {
            crate::proto::http::add_status(&mut s, status, 1);
        }
    }

    pub fn note_error(&self, st: &ConnStats, what: &str) {
        if let Ok(mut g) = st.error.lock() {
            *g = Some(what.to_string());
        }
    }

    /// Takes a new connection in, or says which limit refuses it.
    pub fn admit(&self, peer: IpAddr, fd: RawFd) -> Result<(u16, Arc<ConnStats>), Refusal> {
        let Ok(mut r) = self.registry.lock() else {
            return Err(Refusal::Total(self.max_connections));
        };
        if r.live.len() >= self.max_connections {
            return Err(Refusal::Total(self.max_connections));
        }
        let from_peer = r.per_client.get(&peer).copied().unwrap_or(0);
        if from_peer >= self.max_per_client {
            return Err(Refusal::PerClient(peer, self.max_per_client));
        }
        let id = match r.free_ids.pop() {
            Some(id) => id,
            None if r.next_id <= u32::from(u16::MAX) => {
                r.next_id += 1;
                (r.next_id - 1) as u16
            }
            // Every id is held by an open connection or one closed since
            // the last sample: the next sample frees some.
            None => return Err(Refusal::Total(self.max_connections)),
        };
        let stats = Arc::new(ConnStats::new(id, fd));
        r.live.insert(
            id,
            Tracked {
                stats: Arc::clone(&stats),
                reported: (0, 0),
            },
        );
        *r.per_client.entry(peer).or_insert(0) += 1;
        r.connections += 1;
        Ok((id, stats))
    }

    /// The connection is over: its last TCP_INFO is taken (the socket is
    /// still open) and its record waits for the next sample.
    pub fn finish(&self, id: u16, peer: IpAddr) {
        let Ok(mut r) = self.registry.lock() else {
            return;
        };
        if let Some(t) = r.live.remove(&id) {
            t.stats.finish();
            r.finished.push((id, t));
        }
        if let Some(n) = r.per_client.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                r.per_client.remove(&peer);
            }
        }
    }

    /// Counts a refused connection; logs the limit the first time and then
    /// at most every [`LOG_EVERY`].
    pub fn refused(&self, why: Refusal) {
        let Ok(mut log) = self.refusals.lock() else {
            return;
        };
        log.since += 1;
        log.total += 1;
        let now = Instant::now();
        if log.last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            return;
        }
        let what = match why {
            Refusal::Total(n) => format!(
                "{n} connections are open, the limit (--max-connections, or the open-files \
                 limit); new connections are refused until some close"
            ),
            Refusal::PerClient(ip, n) => format!(
                "client {ip} has {n} connections open, the per-client limit \
                 (--max-per-client); its new connections are refused until some close"
            ),
            Refusal::Descriptors => "out of file descriptors (RLIMIT_NOFILE); raise \
                 `ulimit -n` or lower --max-connections"
                .to_string(),
        };
        errln!(
            "linerate serve: {what} ({} refused since the last note)",
            log.since
        );
        log.since = 0;
        log.last = Some(now);
    }

    /// One interval: bytes and retransmits per connection since the last.
    /// Connections closed since then are reported a last time and folded
    /// into the totals (their ids freed), so nothing grows with churn.
    pub fn sample(&self, span: (f64, f64)) -> IntervalSample {
        let mut iv = IntervalSample {
            t_start: span.0,
            t_end: span.1,
            ..Default::default()
        };
        let Ok(mut guard) = self.registry.lock() else {
            return iv;
        };
        let r = &mut *guard;
        let elapsed = span.1.max(1e-6);
        let mut push = |t: &mut Tracked, id: u16| {
            let rec = t.stats.record(elapsed);
            let (db, dr) = (
                rec.body_bytes.saturating_sub(t.reported.0),
                rec.retransmits.saturating_sub(t.reported.1),
            );
            t.reported = (rec.body_bytes, rec.retransmits);
            if db > 0 || dr > 0 {
                iv.tx_bytes += db;
                iv.streams.push(StreamSample {
                    id,
                    sender: true,
                    bytes: db,
                    retransmits: dr,
                    cwnd: 0,
                    rtt_us: 0,
                });
            }
            rec
        };
        for (id, t) in r.live.iter_mut() {
            push(t, *id);
        }
        for (id, mut t) in std::mem::take(&mut r.finished) {
            let rec = push(&mut t, id);
            r.folded_requests += rec.requests;
            r.folded_bytes += rec.body_bytes;
            r.recent.push_back(rec);
            if r.recent.len() > KEEP_FINISHED {
                r.recent.pop_front();
            }
            r.free_ids.push(id);
        }
        iv
    }

    /// The records of the summary: the latest finished connections and the
    /// open ones; requests and bytes of all; connections accepted.
    pub fn records(&self, elapsed: f64) -> (Vec<HttpConnection>, u64, u64, u64) {
        let Ok(r) = self.registry.lock() else {
            return (Vec::new(), 0, 0, 0);
        };
        let mut list: Vec<HttpConnection> = r.recent.iter().cloned().collect();
        let (mut requests, mut bytes) = (r.folded_requests, r.folded_bytes);
        for t in r.live.values() {
            let rec = t.stats.record(elapsed);
            requests += rec.requests;
            bytes += rec.body_bytes;
            list.push(rec);
        }
        (list, requests, bytes, r.connections)
    }
}
