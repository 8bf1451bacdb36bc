//! Socket options and single-socket calls std does not wrap: buffers,
//! congestion control, TCP_INFO, MSG_TRUNC receives, sendfile, a
//! non-blocking connect, raw `sockaddr` and control-message builders.

use crate::cvt;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the size we pass.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Lets a socket send from addresses that are not local (varying source
/// addresses per flow). Needs CAP_NET_ADMIN.
pub fn set_transparent(fd: RawFd, ipv6: bool) -> io::Result<()> {
    let one: libc::c_int = 1;
    if ipv6 {
        setsockopt(fd, libc::SOL_IPV6, libc::IPV6_TRANSPARENT, &one)
    } else {
        setsockopt(fd, libc::SOL_IP, libc::IP_TRANSPARENT, &one)
    }
}

/// Sets a socket buffer size past the rmem_max/wmem_max sysctls (root only),
/// falling back to the ordinary option, which the kernel caps silently.
pub fn set_buffer(fd: RawFd, receive: bool, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    let (force, plain) = if receive {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    } else {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    };
    setsockopt(fd, libc::SOL_SOCKET, force, &v)
        .or_else(|_| setsockopt(fd, libc::SOL_SOCKET, plain, &v))
}

/// A socket's buffer size as the kernel holds it (SO_RCVBUF or
/// SO_SNDBUF read back): on Linux twice what was set, within the caps.
pub fn get_buffer(fd: RawFd, receive: bool) -> io::Result<usize> {
    let name = if receive {
        libc::SO_RCVBUF
    } else {
        libc::SO_SNDBUF
    };
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` is a live c_int and `len` says its size; the kernel
    // writes at most `len` bytes into it and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(usize::try_from(v).unwrap_or(0))
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` is a live c_int and `len` says its size; the kernel
    // writes at most `len` bytes into it and updates `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// Whether a socket is an IPv6 one (SO_DOMAIN).
fn is_ipv6(fd: RawFd) -> io::Result<bool> {
    Ok(getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)? == libc::AF_INET6)
}

/// Marks every packet a socket sends with `tos`: the IPv4 TOS byte
/// (IP_TOS) or the IPv6 traffic class (IPV6_TCLASS), the DSCP in its upper
/// six bits. An IPv6 socket gets IP_TOS as well where the kernel takes it,
/// for IPv4-mapped peers. Accepted TCP sockets inherit it from their
/// listener.
pub fn set_tos(fd: RawFd, tos: u8) -> io::Result<()> {
    let v = libc::c_int::from(tos);
    if is_ipv6(fd)? {
        setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &v)?;
        // Only IPv4-mapped traffic uses it; an IPv6-only socket may refuse.
        let _ = setsockopt(fd, libc::IPPROTO_IP, libc::IP_TOS, &v);
        Ok(())
    } else {
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_TOS, &v)
    }
}

/// The TOS byte (IPv4) or traffic class (IPv6) a socket marks its packets
/// with, as the kernel holds it.
pub fn get_tos(fd: RawFd) -> io::Result<u8> {
    let v = if is_ipv6(fd)? {
        getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS)?
    } else {
        getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS)?
    };
    Ok(u8::try_from(v & 0xff).unwrap_or(0))
}

/// Asks for every received datagram's TOS byte or traffic class as a
/// control message (IP_RECVTOS; IPV6_RECVTCLASS on an IPv6 socket, which
/// also gets IP_RECVTOS for the IPv4-mapped datagrams it may receive):
/// [`crate::Recvmmsg::tos`] reads them.
pub fn set_recv_tos(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    if is_ipv6(fd)? {
        setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, &one)?;
        let _ = setsockopt(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, &one);
        Ok(())
    } else {
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, &one)
    }
}

/// Chooses the TCP congestion control of one socket (e.g. "bbr").
pub fn set_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let bytes = c.as_bytes();
    // SAFETY: pointer and length describe the bytes of `c`, alive for the call.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            bytes.as_ptr().cast(),
            bytes.len() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Caps the rate a socket sends at, in bytes per second
/// (SO_MAX_PACING_RATE): TCP paces its segments to it (internal pacing,
/// or the fq qdisc). The kernel takes a 64-bit value since 4.20 and a
/// 32-bit one before, so rates that fit 32 bits are passed as 32.
pub fn set_max_pacing_rate(fd: RawFd, bytes_per_s: u64) -> io::Result<()> {
    match u32::try_from(bytes_per_s) {
        Ok(v) => setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &v),
        Err(_) => setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes_per_s),
    }
}

/// Limits the bytes a TCP socket holds that it has not sent yet
/// (TCP_NOTSENT_LOWAT): a writer blocks beyond it. A paced stream's
/// send buffer would otherwise hold seconds of data at its rate, still
/// arriving after the writer stopped.
pub fn set_notsent_lowat(fd: RawFd, bytes: u32) -> io::Result<()> {
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, &bytes)
}

/// Holds back partial segments while on (TCP_CORK); turning it off sends
/// what is queued. A body sent in large pieces then leaves in full-sized
/// segments, as nginx's `tcp_nopush` does.
pub fn set_cork(fd: RawFd, on: bool) -> io::Result<()> {
    setsockopt(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_CORK,
        &libc::c_int::from(on),
    )
}

/// The TCP_INFO fields linerate reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpInfo {
    pub total_retrans: u32,
    pub snd_cwnd: u32,
    pub rtt_us: u32,
    /// Retransmitted segments the peer reported as duplicates (D-SACK):
    /// retransmits that were not needed. 0 on kernels before 4.19.
    pub dsack_dups: u32,
    /// Times this sender saw segments arrive out of order at the peer
    /// (from SACKs and D-SACKs). 0 on kernels before 4.19.
    pub reord_seen: u32,
}

/// Whether the kernel's answer of `len` bytes covers the `u32` field at
/// `offset`: an older kernel fills a shorter `struct tcp_info` than libc's.
fn filled(len: libc::socklen_t, offset: usize) -> bool {
    len as usize >= offset + size_of::<u32>()
}

/// The kernel's `struct tcp_info` of a socket and how many bytes of it
/// the kernel filled.
fn raw_tcp_info(fd: RawFd) -> io::Result<(libc::tcp_info, libc::socklen_t)> {
    // SAFETY: tcp_info is plain data; the kernel fills at most `len` bytes.
    let mut ti: libc::tcp_info = unsafe { zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: pointer and length describe `ti`, which we own.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut libc::tcp_info).cast(),
            &mut len,
        )
    })?;
    Ok((ti, len))
}

pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let (ti, len) = raw_tcp_info(fd)?;
    let newer = |offset: usize, v: u32| if filled(len, offset) { v } else { 0 };
    Ok(TcpInfo {
        total_retrans: ti.tcpi_total_retrans,
        snd_cwnd: ti.tcpi_snd_cwnd,
        rtt_us: ti.tcpi_rtt,
        dsack_dups: newer(
            std::mem::offset_of!(libc::tcp_info, tcpi_dsack_dups),
            ti.tcpi_dsack_dups,
        ),
        reord_seen: newer(
            std::mem::offset_of!(libc::tcp_info, tcpi_reord_seen),
            ti.tcpi_reord_seen,
        ),
    })
}

/// Whether this end of a TCP connection has sent its FIN and the peer has
/// acknowledged it, so every byte written before `shutdown(Write)` is in
/// the peer's kernel (states FIN_WAIT2, TIME_WAIT and CLOSE).
pub fn fin_acked(fd: RawFd) -> io::Result<bool> {
    // include/net/tcp_states.h: FIN_WAIT2 5, TIME_WAIT 6, CLOSE 7.
    Ok(matches!(raw_tcp_info(fd)?.0.tcpi_state, 5..=7))
}

/// Receives and discards up to `buf.len()` bytes of a TCP stream without
/// copying them to user space (MSG_TRUNC). Returns 0 at end of stream.
pub fn recv_discard(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for buf.len() bytes; with MSG_TRUNC the kernel
        // writes nothing into it for TCP, but the region is ours either way.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_TRUNC) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A blocking TCP connection to `addr` made within `timeout`, its packets
/// marked with `tos` from the SYN on ([`set_tos`] before connect(2)), so
/// every segment of the connection carries it.
pub fn connect_marked(
    addr: SocketAddr,
    tos: u8,
    timeout: std::time::Duration,
) -> io::Result<TcpStream> {
    let fd = tcp_socket(addr, 0)?;
    set_tos(fd.as_raw_fd(), tos)?;
    // A blocking connect waits at most SO_SNDTIMEO (then EINPROGRESS).
    let tv = libc::timeval {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDTIMEO, &tv)?;
    let r = connect_raw(&fd, addr);
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EINPROGRESS) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection within {timeout:?}"),
            ),
            _ => e,
        });
    }
    let s = TcpStream::from(fd);
    s.set_write_timeout(None)?;
    Ok(s)
}

/// Starts a TCP connection to `addr` on a new non-blocking socket and
/// returns at once: the connection is under way (EINPROGRESS) or made.
/// An event loop waits for the socket to become writable, then reads the
/// outcome with `TcpStream::take_error` (and `peer_addr`: ENOTCONN while
/// the handshake is still on). Errors the kernel knows at once (no route,
/// out of descriptors) come back here.
pub fn connect_nonblocking(addr: SocketAddr) -> io::Result<TcpStream> {
    connect_nonblocking_marked(addr, None)
}

/// [`connect_nonblocking`] with the socket's packets marked with `tos`
/// ([`set_tos`]) before the SYN leaves.
pub fn connect_nonblocking_marked(addr: SocketAddr, tos: Option<u8>) -> io::Result<TcpStream> {
    let fd = tcp_socket(addr, libc::SOCK_NONBLOCK)?;
    if let Some(t) = tos {
        set_tos(fd.as_raw_fd(), t)?;
    }
    let r = connect_raw(&fd, addr);
    if r < 0 {
        let e = io::Error::last_os_error();
        if !matches!(e.raw_os_error(), Some(libc::EINPROGRESS | libc::EINTR)) {
            return Err(e);
        }
    }
    Ok(TcpStream::from(fd))
}

/// A new TCP socket of `addr`'s family, close-on-exec, with `flags`
/// (e.g. `SOCK_NONBLOCK`) added to its type.
fn tcp_socket(addr: SocketAddr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags;
    // SAFETY: socket(2) takes three integers and touches no memory of ours.
    let fd = cvt(unsafe { libc::socket(family, kind, 0) })?;
    // SAFETY: socket(2) returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// connect(2) of `fd` to `addr`: its raw return value (errno is left for
/// the caller to read).
fn connect_raw(fd: &OwnedFd, addr: SocketAddr) -> libc::c_int {
    let sa = SockAddr::new(addr);
    // SAFETY: `sa.storage` holds a valid sockaddr of `sa.len` bytes.
    unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa.storage as *const libc::sockaddr_storage).cast(),
            sa.len,
        )
    }
}

/// A socket address in the kernel's own layout, built once per flow.
#[derive(Clone)]
pub struct SockAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl SockAddr {
    pub fn new(addr: SocketAddr) -> Self {
        // SAFETY: sockaddr_storage is plain data; zero is a valid start.
        let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin)
                };
                size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6)
                };
                size_of::<libc::sockaddr_in6>()
            }
        };
        SockAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }
}

/// Ancillary data for one datagram, 8-byte aligned as cmsghdr requires.
#[derive(Clone, Default)]
pub struct Cmsg {
    pub(crate) buf: Vec<u64>,
    pub(crate) len: usize,
}

impl Cmsg {
    /// IP_PKTINFO / IPV6_PKTINFO choosing the datagram's source address.
    pub fn source_address(src: IpAddr) -> Self {
        let (level, kind, data): (libc::c_int, libc::c_int, Vec<u8>) = match src {
            IpAddr::V4(a) => {
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from(a).to_be(),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                (libc::IPPROTO_IP, libc::IP_PKTINFO, as_bytes(&info))
            }
            IpAddr::V6(a) => {
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr {
                        s6_addr: a.octets(),
                    },
                    ipi6_ifindex: 0,
                };
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, as_bytes(&info))
            }
        };
        // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic on the length.
        let (space, cmsg_len) = unsafe {
            (
                libc::CMSG_SPACE(data.len() as u32) as usize,
                libc::CMSG_LEN(data.len() as u32) as usize,
            )
        };
        let mut buf = vec![0u64; space.div_ceil(8)];
        let hdr = libc::cmsghdr {
            cmsg_len: cmsg_len as _,
            cmsg_level: level,
            cmsg_type: kind,
        };
        let bytes = as_bytes(&hdr);
        let dst = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: `buf` holds `space` bytes: the header, padding to its
        // alignment, and the data; CMSG_DATA offset equals the aligned header size.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
            let data_off = cmsg_len - data.len();
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(data_off), data.len());
        }
        Cmsg { buf, len: space }
    }
}

fn as_bytes<T>(v: &T) -> Vec<u8> {
    // SAFETY: reads size_of::<T>() initialised bytes of a plain C struct.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

/// sendfile(2): hands pages of `file` to the socket without copying them
/// through user space. Returns bytes queued; advances `offset`.
pub fn sendfile(sock: RawFd, file: &File, offset: &mut i64, count: usize) -> io::Result<usize> {
    let mut off: libc::off_t = *offset;
    // SAFETY: both fds are open for the call; `off` is a valid pointer.
    let n = unsafe { libc::sendfile(sock, file.as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off;
    Ok(n as usize)
}

/// SO_RCVLOWAT: how many bytes must be queued before a read wakes up.
pub fn set_rcvlowat(fd: RawFd, bytes: i32) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &bytes)
}

/// A UDP socket bound to `addr` with SO_REUSEPORT set before the bind, so
/// several sockets (one per receiver thread) share one port and the kernel
/// spreads flows over them by their address hash.
pub fn udp_reuseport(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    udp_bound_with(addr, libc::SOL_SOCKET, libc::SO_REUSEPORT)
}

/// A UDP socket bound to `addr` with IP_FREEBIND: the address may be one
/// this host only accepts through a local route (AnyIP), as the lab's flow
/// prefixes are, which IPv6 refuses to bind otherwise.
pub fn udp_freebind(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    udp_bound_with(addr, libc::SOL_IP, libc::IP_FREEBIND)
}

/// A UDP socket with one integer option set to 1 before it binds `addr`.
fn udp_bound_with(
    addr: SocketAddr,
    level: libc::c_int,
    option: libc::c_int,
) -> io::Result<std::net::UdpSocket> {
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: socket takes plain integers and touches no memory of ours.
    let fd = cvt(unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: socket returned a new fd that nothing else owns.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    setsockopt(fd, level, option, &one)?;
    let sa = SockAddr::new(addr);
    // SAFETY: pointer and length describe `sa`'s storage, alive for the call.
    cvt(unsafe {
        libc::bind(
            fd,
            (&sa.storage as *const libc::sockaddr_storage).cast(),
            sa.len,
        )
    })?;
    Ok(std::net::UdpSocket::from(owned))
}

#[cfg(test)]
mod tests;
