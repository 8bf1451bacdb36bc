//! epoll(7) for event loops (`linerate serve`, the HTTP client), waits
//! with a nanosecond timeout into a reused list, non-blocking sends with
//! MSG_MORE, and the open-files limit a server with many connections needs.

use crate::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a registration waits for (level-triggered unless `edge`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interest {
    pub read: bool,
    pub write: bool,
    /// EPOLLEXCLUSIVE: of several epoll sets waiting on one fd (a shared
    /// listener), one is woken, not all. Only with `add`.
    pub exclusive: bool,
}

impl Interest {
    pub const READ: Interest = Interest {
        read: true,
        write: false,
        exclusive: false,
    };
    pub const WRITE: Interest = Interest {
        read: false,
        write: true,
        exclusive: false,
    };

    fn bits(self) -> u32 {
        // No EPOLLRDHUP: a client that half-closes after its request still
        // gets its answer (and EPOLLEXCLUSIVE refuses it). Hang-ups and
        // errors are reported whatever the mask.
        let mut b = 0u32;
        if self.read {
            b |= libc::EPOLLIN as u32;
        }
        if self.write {
            b |= libc::EPOLLOUT as u32;
        }
        if self.exclusive {
            b |= libc::EPOLLEXCLUSIVE as u32;
        }
        b
    }
}

/// One ready file descriptor: its token and what it is ready for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// The peer hung up or the socket has an error (a read or write says which).
    pub hangup: bool,
}

/// An epoll instance (closed on drop).
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    /// epoll_pwait2 (Linux 5.11) answered ENOSYS: waits round up to ms.
    no_pwait2: bool,
}

impl Epoll {
    /// A new epoll set that reports at most `batch` ready fds per wait.
    pub fn new(batch: usize) -> io::Result<Self> {
        // SAFETY: epoll_create1 takes a flag and touches no memory of ours.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: epoll_create1 returned a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; batch.max(1)],
            no_pwait2: false,
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: interest.bits(),
            u64: token,
        };
        // SAFETY: `ev` is a live epoll_event for the call; the kernel copies it.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    pub fn add(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    pub fn modify(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, Interest::default())
    }

    /// Waits up to `timeout` (`None`: until an fd is ready) and puts the
    /// ready fds into `out`, cleared first and reused so a loop allocates
    /// nothing per wait; empty on timeout or a signal. The timeout has
    /// nanosecond resolution (epoll_pwait2) where the kernel has it, else it
    /// is rounded up to the next millisecond, so a wait never ends early.
    pub fn wait_into(&mut self, timeout: Option<Duration>, out: &mut Vec<Ready>) -> io::Result<()> {
        out.clear();
        let max = libc::c_int::try_from(self.events.len()).unwrap_or(libc::c_int::MAX);
        let mut n = -1;
        if !self.no_pwait2 {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let ts_ptr = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: `events` holds `max` epoll_event slots the kernel may
            // fill; `ts_ptr` is null or points to a live timespec; a null
            // sigmask leaves the signal mask alone.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    max,
                    ts_ptr,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                self.no_pwait2 = true;
            } else {
                n = r as libc::c_int;
            }
        }
        if self.no_pwait2 {
            let ms = timeout.map_or(-1, |t| {
                let up = t.as_nanos().div_ceil(1_000_000);
                i32::try_from(up).unwrap_or(i32::MAX)
            });
            // SAFETY: `events` holds `max` epoll_event slots the kernel may fill.
            n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), max, ms) };
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(e);
        }
        out.extend(self.events[..n as usize].iter().map(ready_of));
        Ok(())
    }

    /// Waits up to `timeout_ms` and returns the ready fds (empty on timeout
    /// or a signal).
    pub fn wait(&mut self, timeout_ms: i32) -> io::Result<Vec<Ready>> {
        let max = libc::c_int::try_from(self.events.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `events` holds `max` epoll_event slots the kernel may fill.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                max,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Vec::new());
            }
            return Err(e);
        }
        Ok(self.events[..n as usize].iter().map(ready_of).collect())
    }
}

fn ready_of(e: &libc::epoll_event) -> Ready {
    let bits = e.events;
    let hup = (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32;
    Ready {
        token: e.u64,
        readable: bits & libc::EPOLLIN as u32 != 0,
        writable: bits & libc::EPOLLOUT as u32 != 0,
        hangup: bits & hup != 0,
    }
}

/// A non-blocking send of `buf`; with `more`, MSG_MORE tells TCP more data
/// follows at once (the response head is held back and goes out in the
/// same segments as the body). Never raises SIGPIPE.
pub fn send_nonblocking(fd: RawFd, buf: &[u8], more: bool) -> io::Result<usize> {
    let mut flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    if more {
        flags |= libc::MSG_MORE;
    }
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes; the kernel only reads it.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Bytes a TCP socket holds that the peer has not acknowledged yet
/// (SIOCOUTQ: sent but unacknowledged, and not yet sent).
pub fn unacked_bytes(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int into `n`, which we own.
    cvt(unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) })?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Bytes the kernel has queued on a TCP socket that the program has not
/// read yet (SIOCINQ, also FIONREAD).
pub fn unread_bytes(fd: RawFd) -> io::Result<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCINQ (FIONREAD) writes one int into `n`, which we own.
    cvt(unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) })?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit and returns
/// the soft limit now in force.
// rlim_t is u64 on 64-bit Linux and 32 bits wide on some 32-bit targets.
#[allow(clippy::unnecessary_cast)]
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a live rlimit the kernel fills.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    if r.rlim_cur < r.rlim_max {
        let want = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: `want` is a live rlimit the kernel reads.
        if cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) }).is_ok() {
            return Ok(want.rlim_cur as u64);
        }
    }
    Ok(r.rlim_cur as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn readiness_of_a_socket_pair() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut ep = Epoll::new(8).unwrap();
        ep.add(s.as_raw_fd(), 7, Interest::READ).unwrap();
        assert!(ep.wait(0).unwrap().is_empty());
        c.write_all(b"x").unwrap();
        let r = ep.wait(1000).unwrap();
        assert_eq!(r.len(), 1);
        assert!(r[0].readable && r[0].token == 7);
        ep.modify(s.as_raw_fd(), 8, Interest::WRITE).unwrap();
        let r = ep.wait(1000).unwrap();
        assert!(r[0].writable && r[0].token == 8);
        assert_eq!(send_nonblocking(s.as_raw_fd(), b"abc", true).unwrap(), 3);
        assert!(unacked_bytes(s.as_raw_fd()).unwrap() <= 3);
        ep.delete(s.as_raw_fd()).unwrap();
        assert!(raise_nofile_limit().unwrap() > 0);
    }

    #[test]
    fn wait_into_times_out_on_time_and_reports_into_the_list() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut ep = Epoll::new(4).unwrap();
        ep.add(s.as_raw_fd(), 3, Interest::READ).unwrap();
        let mut out = vec![Ready {
            token: 99,
            readable: false,
            writable: false,
            hangup: false,
        }];
        // Nothing ready: the list is emptied and the wait lasts its timeout
        // (never less; below a millisecond where epoll_pwait2 exists).
        let t = std::time::Instant::now();
        ep.wait_into(Some(Duration::from_micros(2500)), &mut out)
            .unwrap();
        assert!(out.is_empty());
        assert!(
            t.elapsed() >= Duration::from_micros(2500),
            "{:?}",
            t.elapsed()
        );
        c.write_all(b"x").unwrap();
        ep.wait_into(Some(Duration::from_secs(5)), &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0].readable && out[0].token == 3);
        // No timeout: waits until ready (it already is).
        ep.wait_into(None, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        drop(c);
        let mut buf = [0u8; 4];
        assert_eq!(std::io::Read::read(&mut &s, &mut buf).unwrap(), 1);
        ep.wait_into(Some(Duration::ZERO), &mut out).unwrap();
        assert!(out[0].readable, "the peer's close reads as end of stream");
    }
}
