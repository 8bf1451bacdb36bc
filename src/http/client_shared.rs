//! What the download client's event loops share: the job's spec, the end
//! of the run and the request budget, the run-wide figures each loop adds
//! to when it finishes, and how a failed request is classified.

use super::{stats, ConnStats, HttpError};
use crate::proto::http::{ErrorKinds, HttpRequest, RampStage, StatusCount};
use hdrhistogram::Histogram;
use rustls::ClientConfig;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone)]
pub struct GetSpec {
    pub target: SocketAddr,
    /// Host header and TLS server name.
    pub host: String,
    pub path: String,
    pub tls: Option<Arc<ClientConfig>>,
    pub ktls: bool,
    pub connections: u16,
    pub duration: Duration,
    /// Stop after this many responses in all (else run for `duration`).
    pub requests: Option<u64>,
    /// Requests per second in all (each connection its share, on a fixed
    /// schedule); latency is then measured from the intended send time.
    pub rate_per_s: Option<f64>,
    /// HTTP/2 (`client_h2`) instead of the HTTP/1.1 event loops.
    pub http2: bool,
    /// The DSCP of every connection's packets, from the SYN on.
    pub dscp: Option<crate::proto::Dscp>,
    /// Method, extra headers and body of every request.
    pub request: HttpRequest,
    /// `--ramp-connections`: connection `id` runs while the stages' target
    /// is above it (`connections` is their peak).
    pub ramp: Vec<RampStage>,
}

/// A response that sends nothing for this long fails the request (and a
/// TLS handshake or a request the server does not take, too).
pub(super) const STALL: Duration = Duration::from_secs(10);
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed connect, before the next attempt: a refusing port is
/// counted at a bounded pace, not in a busy loop.
pub(super) const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
/// How long a download under way at the end may take to finish.
pub(super) const FINISH_GRACE: Duration = Duration::from_secs(2);

pub(super) struct Shared {
    pub spec: GetSpec,
    pub stop: Arc<AtomicBool>,
    pub deadline: Instant,
    /// Requests left to claim; negative: unlimited.
    pub budget: AtomicI64,
    pub wire_bytes: AtomicU64,
    pub unread_at_close: AtomicU64,
    pub status: Mutex<Vec<StatusCount>>,
    pub error_kinds: Mutex<ErrorKinds>,
    pub ktls_used: AtomicBool,
    pub ktls_note: Mutex<Option<String>>,
    pub tls_version: Mutex<Option<(String, String)>>,
    pub object_bytes: AtomicU64,
    pub request_body_bytes: AtomicU64,
    /// When the run started: a ramp's clock.
    pub start: Instant,
}

impl Shared {
    pub fn new(spec: GetSpec, stop: Arc<AtomicBool>, start: Instant, deadline: Instant) -> Self {
        Shared {
            start,
            request_body_bytes: AtomicU64::new(0),
            budget: AtomicI64::new(spec.requests.map_or(-1, |r| r.min(i64::MAX as u64) as i64)),
            deadline,
            spec,
            stop,
            wire_bytes: AtomicU64::new(0),
            unread_at_close: AtomicU64::new(0),
            status: Mutex::new(Vec::new()),
            error_kinds: Mutex::new(ErrorKinds::default()),
            ktls_used: AtomicBool::new(false),
            ktls_note: Mutex::new(None),
            tls_version: Mutex::new(None),
            object_bytes: AtomicU64::new(0),
        }
    }

    /// No new request starts: stopped, or the duration is over.
    pub fn over(&self, now: Instant) -> bool {
        self.stop.load(Ordering::Relaxed) || now >= self.deadline
    }

    /// Past the end, and past the grace a request under way has to finish.
    pub fn cut(&self, now: Instant) -> bool {
        self.stop.load(Ordering::Relaxed) || now >= self.deadline + FINISH_GRACE
    }

    /// A loop's figures, added to the run's when the loop ends.
    pub fn add_totals(&self, wire: u64, unread: u64, status: &[StatusCount], kinds: &ErrorKinds) {
        self.wire_bytes.fetch_add(wire, Ordering::Relaxed);
        self.unread_at_close.fetch_add(unread, Ordering::Relaxed);
        if let Ok(mut s) = self.status.lock() {
            for c in status {
                crate::proto::http::add_status(&mut s, c.status, c.count);
            }
        }
        if let Ok(mut k) = self.error_kinds.lock() {
            k.add(kinds);
        }
    }

    /// With a ramp, whether connection `id` must wait before its next
    /// request: `None` runs now; `Some(Some(t))` waits until `t`;
    /// `Some(None)`: the stages never reach it again.
    pub fn ramp_hold(&self, id: u16, now: Instant) -> Option<Option<Instant>> {
        if self.spec.ramp.is_empty() {
            return None;
        }
        let t = now.saturating_duration_since(self.start);
        if super::request::ramp_target(&self.spec.ramp, t) > id {
            return None;
        }
        Some(super::request::ramp_next_active(&self.spec.ramp, id, t).map(|d| self.start + d))
    }

    /// Takes one request from the budget; false when the run is over.
    pub fn claim(&self, now: Instant) -> bool {
        if self.over(now) {
            return false;
        }
        if self.budget.load(Ordering::Relaxed) < 0 {
            return true;
        }
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                (b > 0).then_some(b - 1)
            })
            .is_ok()
    }
}

/// One connection's response times (µs, HDR histograms). Each histogram
/// is made at its first value (190 KB zeroed: with 64 connections, three
/// each, making them all up front cost a short run a visible share of its
/// CPU) and handed over, not copied, at the end.
pub(super) struct Timings {
    ttfb: Option<Histogram<u64>>,
    /// From the intended send time with a rate, else from the actual one.
    lat: Option<Histogram<u64>>,
    /// From the actual send time (kept apart only with a rate).
    raw: Option<Histogram<u64>>,
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

impl Timings {
    pub fn new() -> Self {
        Timings {
            ttfb: None,
            lat: None,
            raw: None,
        }
    }

    /// A whole response: sent at `t0`, first byte at `first`, done `now`;
    /// with a rate, `intended` is when it was due.
    pub fn record(&mut self, t0: Instant, first: Instant, intended: Option<Instant>, now: Instant) {
        let add = |h: &mut Option<Histogram<u64>>, d: Duration| {
            let _ = h.get_or_insert_with(stats::new_histogram).record(us(d));
        };
        add(&mut self.ttfb, first.saturating_duration_since(t0));
        match intended {
            Some(at) => {
                add(&mut self.lat, now.saturating_duration_since(at));
                add(&mut self.raw, now.saturating_duration_since(t0));
            }
            None => add(&mut self.lat, now.saturating_duration_since(t0)),
        }
    }

    /// Gives the histograms to the connection's figures at its end (the
    /// actual-send-time one only with a rate); one with no value stays
    /// `None`, which reads as an empty one does.
    pub fn hand_over(&mut self, st: &ConnStats, rate: bool) {
        let put = |h: &mut Option<Histogram<u64>>, slot: &Mutex<Option<Histogram<u64>>>| {
            if let Ok(mut g) = slot.lock() {
                *g = h.take();
            }
        };
        put(&mut self.ttfb, &st.ttfb);
        put(&mut self.lat, &st.latency);
        if rate {
            put(&mut self.raw, &st.latency_uncorrected);
        }
    }
}

/// What failed a request, for the counts by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Connect,
    Timeout,
    Reset,
    Tls,
    Protocol,
}

/// Why one request got no complete response.
pub(super) struct Failure {
    pub kind: Kind,
    pub error: HttpError,
}

impl Failure {
    pub fn new(kind: Kind, error: HttpError) -> Self {
        Failure { kind, error }
    }

    pub fn protocol(why: impl Into<String>, kind: Kind) -> Self {
        Failure::new(kind, HttpError::Protocol(why.into()))
    }

    /// An I/O error of an open connection, by what the kernel said.
    pub fn io(what: &str, tls: bool) -> impl FnOnce(io::Error) -> Failure + '_ {
        move |e| {
            let kind = match e.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Kind::Timeout,
                // rustls reports a broken record or alert as InvalidData.
                io::ErrorKind::InvalidData if tls => Kind::Tls,
                io::ErrorKind::InvalidData => Kind::Protocol,
                _ => Kind::Reset,
            };
            Failure::new(kind, HttpError::io(what)(e))
        }
    }
}

impl From<HttpError> for Failure {
    fn from(e: HttpError) -> Self {
        let kind = match &e {
            HttpError::Tls(_) => Kind::Tls,
            HttpError::Io { source, .. } => match source.kind() {
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Kind::Timeout,
                _ => Kind::Reset,
            },
            HttpError::Protocol(_) | HttpError::Config(_) => Kind::Protocol,
        };
        Failure::new(kind, e)
    }
}

/// A TLS handshake that failed: a reset during it is the peer's reset; the
/// rest (alerts, bad certificates) are TLS failures.
pub(super) fn handshake_failure(target: SocketAddr, e: io::Error) -> Failure {
    let kind = match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => Kind::Reset,
        _ => Kind::Tls,
    };
    Failure::new(
        kind,
        HttpError::Tls(format!("TLS handshake with {target}: {e}")),
    )
}

pub(super) fn count(k: &mut ErrorKinds, kind: Kind) {
    match kind {
        Kind::Connect => k.connect += 1,
        Kind::Timeout => k.timeout += 1,
        Kind::Reset => k.reset += 1,
        Kind::Tls => k.tls += 1,
        Kind::Protocol => k.protocol += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(requests: Option<u64>) -> GetSpec {
        GetSpec {
            target: "127.0.0.1:1".parse().unwrap(),
            host: "localhost".into(),
            path: "/".into(),
            tls: None,
            ktls: false,
            connections: 1,
            duration: Duration::from_secs(1),
            requests,
            rate_per_s: None,
            http2: false,
            dscp: None,
            request: HttpRequest::default(),
            ramp: vec![],
        }
    }

    #[test]
    fn http_client_budget_is_claimed_once_per_request() {
        let now = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let sh = Shared::new(
            spec(Some(3)),
            Arc::clone(&stop),
            now,
            now + Duration::from_secs(60),
        );
        assert_eq!((0..5).filter(|_| sh.claim(now)).count(), 3);
        let open = Shared::new(
            spec(None),
            Arc::clone(&stop),
            now,
            now + Duration::from_secs(60),
        );
        assert!((0..100).all(|_| open.claim(now)));
        // Past the end nothing is claimed; the cut comes a grace later.
        let end = now + Duration::from_secs(60);
        assert!(!open.claim(end) && open.over(end));
        assert!(!open.cut(end) && open.cut(end + FINISH_GRACE));
        stop.store(true, Ordering::Relaxed);
        assert!(!open.claim(now) && open.cut(now));
    }

    #[test]
    fn http_client_failures_by_kind() {
        let f = Failure::io("reading", true)(io::Error::from(io::ErrorKind::InvalidData));
        assert_eq!(f.kind, Kind::Tls);
        let f = Failure::io("reading", false)(io::Error::from(io::ErrorKind::InvalidData));
        assert_eq!(f.kind, Kind::Protocol);
        let f = Failure::io("reading", false)(io::Error::from(io::ErrorKind::ConnectionReset));
        assert_eq!(f.kind, Kind::Reset);
        let f = Failure::from(HttpError::Protocol("x".into()));
        assert_eq!(f.kind, Kind::Protocol);
        let mut k = ErrorKinds::default();
        for kind in [
            Kind::Connect,
            Kind::Timeout,
            Kind::Reset,
            Kind::Tls,
            Kind::Protocol,
        ] {
            count(&mut k, kind);
        }
        assert_eq!(k.total(), 5);
    }
}
