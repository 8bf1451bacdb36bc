//! How the download server's loops share connections: the loop that
//! accepts hands each to the loop with the fewest open.

use std::io;
use std::net::{IpAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Spreads connections over the loops: whichever loop accepts hands a
/// connection to the loop with the fewest open (through its inbox, and a
/// byte on its wake socket), so 4 connections on 2 loops are 2 and 2, not
/// however the accept wake-ups fell.
pub(in crate::http) struct Handoff {
    pub(super) load: Vec<AtomicUsize>,
    pub(super) inbox: Vec<Mutex<Vec<(TcpStream, IpAddr)>>>,
    pub(super) wake: Vec<UnixStream>,
}

impl Handoff {
    /// The hand-off of `n` loops and each loop's end of its wake socket.
    pub(in crate::http) fn new(n: usize) -> io::Result<(Handoff, Vec<UnixStream>)> {
        let mut wake = Vec::with_capacity(n);
        let mut rx = Vec::with_capacity(n);
        for _ in 0..n {
            let (a, b) = UnixStream::pair()?;
            a.set_nonblocking(true)?;
            b.set_nonblocking(true)?;
            wake.push(a);
            rx.push(b);
        }
        let h = Handoff {
            load: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            inbox: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            wake,
        };
        Ok((h, rx))
    }

    /// No loops (they could not be set up).
    pub(in crate::http) fn empty() -> Handoff {
        Handoff {
            load: Vec::new(),
            inbox: Vec::new(),
            wake: Vec::new(),
        }
    }

    /// A loop that did not start never gets a connection.
    pub(in crate::http) fn retire(&self, me: usize) {
        if let Some(l) = self.load.get(me) {
            l.store(usize::MAX / 2, Ordering::Relaxed);
        }
    }

    pub(super) fn least_loaded(&self, me: usize) -> usize {
        let mine = self.load[me].load(Ordering::Relaxed);
        let (best, low) = self
            .load
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.load(Ordering::Relaxed)))
            .min_by_key(|&(_, l)| l)
            .unwrap_or((me, mine));
        if low < mine {
            best
        } else {
            me
        }
    }
}
