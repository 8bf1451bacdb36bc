//! The system calls of the HTTP engine that neither the standard library nor
//! the rest of this crate wraps: the kernel TLS ULP and its keys, page-cache
//! eviction, the clock tick. (sendfile, MSG_TRUNC receives and TCP_INFO come
//! from `sys`.) Safe wrappers only; each returns `io::Result` for the caller
//! to add context.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// `SOL_TLS` from linux/tls.h (not in every libc release).
const SOL_TLS: libc::c_int = 282;
/// `TLS_TX` / `TLS_RX` socket options at `SOL_TLS`.
pub const TLS_TX: libc::c_int = 1;
pub const TLS_RX: libc::c_int = 2;

fn setsockopt_bytes(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(v.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `v` is a live byte slice of `len` bytes for the whole call and
    // the kernel only reads it; a bad fd or option is reported as an error.
    let r = unsafe { libc::setsockopt(fd, level, name, v.as_ptr().cast(), len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Attaches the kernel's TLS upper-layer protocol to an established TCP
/// socket. `ENOENT` means the kernel has no `tls` ULP (module missing).
pub fn set_tls_ulp(fd: RawFd) -> io::Result<()> {
    setsockopt_bytes(fd, libc::IPPROTO_TCP, libc::TCP_ULP, b"tls")
}

/// Hands one direction's record keys to the kernel: `crypto_info` is a
/// `tls12_crypto_info_*` structure as [`super::tls::crypto_info`] builds it,
/// `dir` is [`TLS_TX`] or [`TLS_RX`].
pub fn set_tls_keys(fd: RawFd, dir: libc::c_int, crypto_info: &[u8]) -> io::Result<()> {
    setsockopt_bytes(fd, SOL_TLS, dir, crypto_info)
}

/// Drops the file's clean pages from the page cache, so the next read comes
/// from the disk (a cold-cache run).
pub fn evict_from_page_cache(f: &File) -> io::Result<()> {
    // SAFETY: the fd is open for the call; fadvise only reads its arguments.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        Err(io::Error::from_raw_os_error(r))
    } else {
        Ok(())
    }
}

/// Clock ticks per second (`/proc/*/stat` times are in these).
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_on_a_closed_fd_fails_cleanly() {
        assert!(set_tls_ulp(-1).is_err());
        assert!(set_tls_keys(-1, TLS_TX, &[0u8; 40]).is_err());
        assert!(clock_ticks_per_s() >= 1.0);
    }
}
