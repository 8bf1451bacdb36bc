//! Data planes. Each job runs on its own thread inside an agent, reports one
//! [`IntervalSample`] per interval and ends with an [`EndpointSummary`].
//! Data-plane errors are counted, not propagated per packet; only set-up
//! failures end a job with an error.

pub mod afxdp;
mod error;
pub mod frame;
pub mod packet;
pub mod path;
pub mod rx;
pub mod socket;
pub mod tcp;
pub mod tx;
pub mod udp;
pub mod workers;
pub mod xdp;

pub use error::EngineError;

use crate::host::links::LinkWatch;
use crate::proto::{Cidr, FlowTotal, IntervalSample, Response};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a running job shares with the agent that started it.
#[derive(Clone)]
pub struct JobCtx {
    pub test: u32,
    pub stop: Arc<AtomicBool>,
    pub out: SyncSender<Response>,
    pub interval: Duration,
    /// Filled by the controller's Stop for receivers (tail-loss accounting).
    pub sender_totals: Arc<Mutex<Option<Vec<FlowTotal>>>>,
    /// Link state of this namespace's interfaces and the job's place in its
    /// log: each interval names the links seen down in it or in the one
    /// before (marks: before the previous interval, before this one).
    pub links: Option<(LinkWatch, LinkMarks)>,
}

/// A job's two marks in the link watcher's log: before the previous
/// interval and before this one.
pub type LinkMarks = Arc<Mutex<(u64, u64)>>;

impl JobCtx {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    pub fn emit(&self, mut sample: IntervalSample) {
        if let Some((watch, marks)) = &self.links {
            // The interval after a link came back is marked too: a receiver
            // counts the frames lost while it was down when the first frame
            // after the gap arrives, which is then.
            if let Ok(mut m) = marks.lock() {
                let mut next = m.1;
                watch.down_since(&mut next);
                sample.links_down = watch.down_since(&mut m.0);
                *m = (m.1, next);
            }
        }
        // A gone controller means the agent is about to exit anyway.
        let _ = self.out.send(Response::Interval {
            test: self.test,
            sample,
        });
    }
}

/// Cuts a job's time into reporting intervals.
pub struct IntervalClock {
    start: Instant,
    every: Duration,
    last_end: f64,
    next_due: Duration,
}

impl IntervalClock {
    pub fn new(start: Instant, every: Duration) -> Self {
        let every = every.max(Duration::from_millis(10));
        IntervalClock {
            start,
            every,
            last_end: 0.0,
            next_due: every,
        }
    }
    /// When an interval has ended at `now`, its (start, end) in seconds.
    pub fn due(&mut self, now: Instant) -> Option<(f64, f64)> {
        let e = now.saturating_duration_since(self.start);
        if e < self.next_due {
            return None;
        }
        while self.next_due <= e {
            self.next_due += self.every;
        }
        Some(self.close(now))
    }
    /// Closes the current (possibly short) interval at `now`.
    pub fn close(&mut self, now: Instant) -> (f64, f64) {
        let end = now.saturating_duration_since(self.start).as_secs_f64();
        let span = (self.last_end, end);
        self.last_end = end;
        span
    }
    pub fn elapsed(&self, now: Instant) -> f64 {
        now.saturating_duration_since(self.start).as_secs_f64()
    }
    /// How long from `now` until the current interval is due (zero when
    /// it already is).
    pub fn until_due(&self, now: Instant) -> Duration {
        (self.start + self.next_due).saturating_duration_since(now)
    }
}

/// Destinations a generator may send to without being told otherwise:
/// loopback and the benchmarking ranges (RFC 2544 App. C.2.2, RFC 5180).
pub fn benchmark_ranges() -> [Cidr; 2] {
    crate::netops::reach::benchmark_ranges()
}

/// The generator's safety rule (RFC 6815: isolated test networks only).
pub fn check_destination(ip: IpAddr, allow: &[Cidr]) -> Result<(), EngineError> {
    if ip.is_loopback()
        || benchmark_ranges().iter().any(|c| c.contains(ip))
        || allow.iter().any(|c| c.contains(ip))
    {
        Ok(())
    } else {
        Err(EngineError::Refused(format!(
            "refusing to send test traffic to {ip}: it is outside loopback, 198.18.0.0/15 and \
             2001:2::/48. Load tests belong on isolated test networks (RFC 6815); if {ip} is \
             one, pass --allow-target {} (or its prefix) to say so",
            host_prefix(ip)
        )))
    }
}

/// The allow-list entry for exactly one address: /32 for IPv4, /128 for
/// IPv6 (an IPv4-mapped `::ffff:a.b.c.d` included: a /32 of it would allow
/// every mapped address).
pub fn host_prefix(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(a) => format!("{a}/32"),
        IpAddr::V6(a) => format!("{a}/128"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safety_rule() {
        let ok = |s: &str| check_destination(s.parse().unwrap(), &[]).is_ok();
        assert!(ok("198.18.0.1"));
        assert!(ok("198.19.255.254"));
        assert!(ok("127.0.0.1"));
        assert!(ok("::1"));
        assert!(ok("2001:2::5"));
        assert!(!ok("198.20.0.1"));
        assert!(!ok("8.8.8.8"));
        assert!(!ok("10.0.0.1"));
        assert!(!ok("2001:3::1"));
        let allow = ["10.1.0.0/16".parse().unwrap()];
        assert!(check_destination("10.1.2.3".parse().unwrap(), &allow).is_ok());
        let e = check_destination("10.2.0.1".parse().unwrap(), &allow).unwrap_err();
        assert!(matches!(e, EngineError::Refused(_)));
        assert!(e.to_string().contains("--allow-target 10.2.0.1/32 "), "{e}");
        let hint = |s: &str| {
            check_destination(s.parse().unwrap(), &[])
                .unwrap_err()
                .to_string()
        };
        assert!(hint("2001:db8:99::2").contains("--allow-target 2001:db8:99::2/128 "));
        let mapped = hint("::ffff:10.99.0.2");
        assert!(
            mapped.contains("--allow-target ::ffff:10.99.0.2/128 "),
            "{mapped}"
        );
        assert!(!mapped.contains("/32"), "{mapped}");
    }

    #[test]
    fn interval_clock() {
        let t0 = Instant::now();
        let mut c = IntervalClock::new(t0, Duration::from_secs(1));
        assert_eq!(c.due(t0 + Duration::from_millis(999)), None);
        let (a, b) = c.due(t0 + Duration::from_millis(1000)).unwrap();
        assert_eq!((a, b), (0.0, 1.0));
        assert_eq!(c.due(t0 + Duration::from_millis(1500)), None);
        let (a, b) = c.close(t0 + Duration::from_millis(1500));
        assert_eq!((a, b), (1.0, 1.5));
        // The next interval is due at 2 s, however late the last one closed.
        let ms = |m| Duration::from_millis(m);
        assert_eq!(c.until_due(t0 + ms(1500)), ms(500));
        assert_eq!(c.until_due(t0 + ms(2300)), Duration::ZERO);
        let (a, b) = c.due(t0 + ms(2300)).unwrap();
        assert_eq!((a, b), (1.5, 2.3));
        assert_eq!(c.until_due(t0 + ms(2300)), ms(700));
    }
}
