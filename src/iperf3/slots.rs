//! Which served test a new connection belongs to, and how many tests run
//! at once (`serve --iperf3 --max-clients N`): bookkeeping only, no
//! sockets, so it is tested alone.
//!
//! A stock iperf3 client sends its 37-byte cookie first on the control
//! connection and on every TCP stream. A cookie not seen before asks for a
//! new test (a free slot, or iperf3's "busy"); a known one brings a stream
//! of its test while that test takes streams. UDP streams bring no cookie:
//! their hello is routed by the client's address, and of the tests from
//! one address only one takes UDP streams at a time (its turn), so two
//! tests from one host never get each other's streams.

use crate::proto::iperf3::COOKIE_LEN;
use std::net::IpAddr;
use std::sync::mpsc::Sender;

pub type Cookie = [u8; COOKIE_LEN];

/// The most tests `--max-clients` may let run at once. Each holds at most
/// [`FDS_PER_TEST`] descriptors and 3 + 2 × 128 threads (its control
/// conversation, a sampler, the interval keeper and a thread per stream).
pub const MAX_CLIENTS: usize = 64;

/// Descriptors one test may hold: its control connection, iperf3's most
/// streams both ways (`-P 128 --bidir`: 256), a second handle on each
/// sending TCP stream (128), an epoll set, a scratch file and a few spare.
pub const FDS_PER_TEST: u64 = 1 + 3 * crate::proto::iperf3::MAX_STREAMS as u64 + 8;

/// What to do with a connection that sent a cookie.
#[derive(Debug)]
pub enum Route<S> {
    /// A stream of a test that takes its streams now: hand it there.
    Stream(Sender<S>),
    /// A new test in slot `id`; [`Slots::release`] frees it.
    Admit(u64),
    /// Every slot is taken: iperf3's busy answer (ACCESS_DENIED).
    Busy,
    /// A known test's cookie while that test takes no streams (a second
    /// control connection, a stream too many or too late): ACCESS_DENIED.
    Denied,
}

struct Entry<S> {
    id: u64,
    cookie: Cookie,
    /// The control connection's address, canonical (no v4-mapped v6).
    peer: IpAddr,
    /// Where its TCP streams go while it takes them.
    tcp: Option<Sender<S>>,
    /// Where its UDP streams go while it has its address's turn.
    udp: Option<Sender<S>>,
}

/// The tests admitted and not yet ended, at most `max` of them.
pub struct Slots<S> {
    max: usize,
    next_id: u64,
    tests: Vec<Entry<S>>,
}

impl<S> Slots<S> {
    /// Room for `max` tests at once (1..=[`MAX_CLIENTS`]).
    pub fn new(max: usize) -> Self {
        Slots {
            max: max.clamp(1, MAX_CLIENTS),
            next_id: 1,
            tests: Vec::new(),
        }
    }

    /// Routes a connection from `peer` that sent `cookie`.
    pub fn route(&mut self, cookie: &Cookie, peer: IpAddr) -> Route<S> {
        if let Some(e) = self.tests.iter().find(|e| &e.cookie == cookie) {
            return e.tcp.clone().map_or(Route::Denied, Route::Stream);
        }
        if self.tests.len() >= self.max {
            return Route::Busy;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.tests.push(Entry {
            id,
            cookie: *cookie,
            peer: peer.to_canonical(),
            tcp: None,
            udp: None,
        });
        Route::Admit(id)
    }

    /// Frees test `id`'s slot (and anything it was taking).
    pub fn release(&mut self, id: u64) {
        self.tests.retain(|e| e.id != id);
    }

    pub fn running(&self) -> usize {
        self.tests.len()
    }

    /// Whether a new test would be busy: then a connection need not be
    /// read unless some test takes TCP streams (it may be one of them).
    pub fn full(&self) -> bool {
        self.tests.len() >= self.max
    }

    pub fn taking_tcp(&self) -> bool {
        self.tests.iter().any(|e| e.tcp.is_some())
    }

    /// Test `id` takes TCP streams: those with its cookie go to `to`.
    pub fn open_tcp(&mut self, id: u64, to: Sender<S>) {
        if let Some(e) = self.tests.iter_mut().find(|e| e.id == id) {
            e.tcp = Some(to);
        }
    }

    pub fn close_tcp(&mut self, id: u64) {
        if let Some(e) = self.tests.iter_mut().find(|e| e.id == id) {
            e.tcp = None;
        }
    }

    /// Gives test `id` its address's UDP turn, its hellos going to `to`;
    /// false (and `to` dropped) while another test from that address has it.
    pub fn take_udp_turn(&mut self, id: u64, to: Sender<S>) -> bool {
        let Some(peer) = self.tests.iter().find(|e| e.id == id).map(|e| e.peer) else {
            return false;
        };
        if self
            .tests
            .iter()
            .any(|e| e.id != id && e.peer == peer && e.udp.is_some())
        {
            return false;
        }
        if let Some(e) = self.tests.iter_mut().find(|e| e.id == id) {
            e.udp = Some(to);
        }
        true
    }

    pub fn end_udp_turn(&mut self, id: u64) {
        if let Some(e) = self.tests.iter_mut().find(|e| e.id == id) {
            e.udp = None;
        }
    }

    /// Where a UDP hello from `from` goes: the test from that address
    /// whose turn it is, if any.
    pub fn udp_route(&self, from: IpAddr) -> Option<Sender<S>> {
        let from = from.to_canonical();
        self.tests
            .iter()
            .find(|e| e.peer == from && e.udp.is_some())
            .and_then(|e| e.udp.clone())
    }

    /// Whether some test waits for UDP hellos (the UDP port is open then).
    pub fn taking_udp(&self) -> bool {
        self.tests.iter().any(|e| e.udp.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn cookie(c: u8) -> Cookie {
        let mut k = [c; COOKIE_LEN];
        k[COOKIE_LEN - 1] = 0;
        k
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 2));

    fn admitted(r: Route<u32>) -> u64 {
        match r {
            Route::Admit(id) => id,
            r => panic!("not admitted: {r:?}"),
        }
    }

    #[test]
    fn slots_admit_up_to_max_then_busy_and_free_on_release() {
        let mut s: Slots<u32> = Slots::new(2);
        let one = admitted(s.route(&cookie(b'a'), A));
        let two = admitted(s.route(&cookie(b'b'), A));
        assert_ne!(one, two);
        assert!(s.full());
        assert!(matches!(s.route(&cookie(b'c'), B), Route::Busy));
        // A known cookie is never a new test, full or not.
        assert!(matches!(s.route(&cookie(b'a'), A), Route::Denied));
        s.release(one);
        assert_eq!(s.running(), 1);
        let three = admitted(s.route(&cookie(b'c'), B));
        assert!(three > two, "ids are not reused");
        // Releasing an unknown or released id changes nothing.
        s.release(one);
        assert_eq!(s.running(), 2);
        // 0 is 1; the cap holds.
        assert_eq!(Slots::<u32>::new(0).max, 1);
        assert_eq!(Slots::<u32>::new(1000).max, MAX_CLIENTS);
        // --max-clients' help and the README say so.
        assert_eq!(FDS_PER_TEST, 393);
    }

    #[test]
    fn one_slot_is_todays_one_test_at_a_time() {
        let mut s: Slots<u32> = Slots::new(1);
        let id = admitted(s.route(&cookie(b'a'), A));
        assert!(s.full() && !s.taking_tcp());
        assert!(matches!(s.route(&cookie(b'b'), A), Route::Busy));
        s.release(id);
        admitted(s.route(&cookie(b'b'), A));
    }

    #[test]
    fn tcp_streams_go_to_their_cookies_test_only_while_it_takes_them() {
        let mut s: Slots<u32> = Slots::new(4);
        let a = admitted(s.route(&cookie(b'a'), A));
        let b = admitted(s.route(&cookie(b'b'), B));
        let (ta, ra) = channel();
        let (tb, rb) = channel();
        s.open_tcp(a, ta);
        assert!(s.taking_tcp());
        // b does not take streams yet: its cookie is denied.
        assert!(matches!(s.route(&cookie(b'b'), B), Route::Denied));
        s.open_tcp(b, tb);
        for (c, n) in [(b'a', 1), (b'b', 2), (b'a', 3)] {
            // A stream may come from another address (iperf3 -B): the
            // cookie says whose it is.
            match s.route(&cookie(c), B) {
                Route::Stream(to) => to.send(n).unwrap(),
                r => panic!("{r:?}"),
            }
        }
        assert_eq!(ra.try_iter().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(rb.try_iter().collect::<Vec<_>>(), [2]);
        s.close_tcp(a);
        assert!(matches!(s.route(&cookie(b'a'), A), Route::Denied));
        s.release(b);
        assert!(!s.taking_tcp());
        // A released test's cookie is a stranger's again.
        assert!(matches!(s.route(&cookie(b'b'), B), Route::Admit(_)));
    }

    #[test]
    fn udp_hellos_go_by_address_one_test_per_address_at_a_time() {
        let mut s: Slots<u32> = Slots::new(4);
        let a1 = admitted(s.route(&cookie(b'a'), A));
        let a2 = admitted(s.route(&cookie(b'b'), A));
        let b1 = admitted(s.route(&cookie(b'c'), B));
        assert!(!s.taking_udp());
        assert!(s.udp_route(A).is_none());
        let (t1, r1) = channel();
        let (t2, r2) = channel();
        let (t3, r3) = channel();
        assert!(s.take_udp_turn(a1, t1));
        // The second test from A waits; B's test does not.
        assert!(!s.take_udp_turn(a2, t2.clone()));
        assert!(s.take_udp_turn(b1, t3));
        assert!(s.taking_udp());
        s.udp_route(A).unwrap().send(1).unwrap();
        s.udp_route(B).unwrap().send(2).unwrap();
        // A v4-mapped address is the same host.
        let mapped: IpAddr = "::ffff:198.18.0.1".parse().unwrap();
        s.udp_route(mapped).unwrap().send(3).unwrap();
        assert!(s.udp_route("198.18.0.9".parse().unwrap()).is_none());
        s.end_udp_turn(a1);
        assert!(s.take_udp_turn(a2, t2));
        s.udp_route(A).unwrap().send(4).unwrap();
        assert_eq!(r1.try_iter().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(r2.try_iter().collect::<Vec<_>>(), [4]);
        assert_eq!(r3.try_iter().collect::<Vec<_>>(), [2]);
        // A test that ends mid-turn hands the turn on.
        s.release(a2);
        s.release(b1);
        assert!(!s.taking_udp());
        let (t4, _r4) = channel();
        assert!(!s.take_udp_turn(a2, t4), "a released test gets no turn");
    }
}
