//! The syscalls the latency code needs that std does not wrap: ICMP echo
//! sockets. Safe wrappers only; every unsafe block argues its soundness.

use std::io;
use std::net::UdpSocket;
use std::os::fd::{FromRawFd, OwnedFd};

/// How an ICMP socket was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpKind {
    /// An unprivileged ping socket (SOCK_DGRAM, IPPROTO_ICMP): the kernel
    /// owns the identifier and hands back ICMP without the IP header.
    Ping,
    /// A raw socket (root): IPv4 reads include the IP header.
    Raw,
}

fn socket(domain: libc::c_int, ty: libc::c_int, proto: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes plain integers and returns a new descriptor
    // or -1; it touches no memory of ours.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2), is open, and nothing
    // else owns it: the OwnedFd becomes its only owner and closes it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens an ICMP (or ICMPv6) echo socket: a ping socket where this group
/// may open one (net.ipv4.ping_group_range), else a raw socket (root).
/// The returned socket's send_to/recv_from work on ICMP messages; the
/// port of addresses is ignored.
pub fn icmp_socket(v6: bool) -> io::Result<(UdpSocket, IcmpKind)> {
    let (domain, proto) = if v6 {
        (libc::AF_INET6, libc::IPPROTO_ICMPV6)
    } else {
        (libc::AF_INET, libc::IPPROTO_ICMP)
    };
    let fd = match socket(domain, libc::SOCK_DGRAM, proto) {
        Ok(fd) => (fd, IcmpKind::Ping),
        Err(_) => (socket(domain, libc::SOCK_RAW, proto)?, IcmpKind::Raw),
    };
    Ok((UdpSocket::from(fd.0), fd.1))
}
