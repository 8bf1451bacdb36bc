//! Every system call linerate makes that Rust's standard library does not
//! wrap: namespaces, thread pinning, batched UDP I/O, socket options, TCP_INFO.
//!
//! This is the only module allowed `unsafe`. Each function hands back
//! `io::Result` so callers add their own context; nothing here panics or logs.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Moves the calling process into a new, anonymous network namespace. The
/// namespace lives exactly as long as processes are in it: when the agent
/// exits, its namespace and every interface in it are gone.
pub fn unshare_netns() -> io::Result<()> {
    // SAFETY: unshare takes a flag word and touches no memory of ours.
    cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) }).map(drop)
}

/// Joins the network namespace that `path` (e.g. /run/netns/NAME) refers to.
pub fn enter_netns(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: the fd is valid for the duration of the call (owned by `f`).
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Joins the network namespace an open namespace file refers to, for the
/// calling thread only (a network namespace is per thread): children it
/// spawns start there too.
pub fn enter_netns_file(ns: &File) -> io::Result<()> {
    // SAFETY: the fd is valid for the duration of the call (borrowed from `ns`).
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Asks the kernel to send `signal` to this process when the thread that
/// started it dies (replacing whatever the parent set before exec).
pub fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and touches no memory of ours.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// Makes the child get SIGKILL when the spawning thread dies, so an agent
/// never outlives a killed controller even if it misses EOF on stdin.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe, which is all pre_exec requires.
    unsafe {
        cmd.pre_exec(|| cvt(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)).map(drop));
    }
}

/// Pins the calling thread to the given CPUs.
pub fn pin_thread(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} is beyond the kernel's CPU set size"),
            ));
        }
        // SAFETY: c is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` outlives the call.
    cvt(unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) }).map(drop)
}

/// User + system CPU seconds of the whole process so far.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: rusage is plain data, getrusage fills it.
    let mut ru: libc::rusage = unsafe { zeroed() };
    // SAFETY: valid pointer to a rusage we own.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every namespace of a
/// host, so send timestamps can be compared at the receiver.
pub fn monotonic_ns() -> u64 {
    // SAFETY: timespec is plain data, clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: valid pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The realtime clock (CLOCK_REALTIME) in nanoseconds since the Unix epoch:
/// the clock hosts share through NTP, used to agree on start times and to
/// map interval timestamps of many hosts onto one timebase.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
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

/// The TCP_INFO fields linerate reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpInfo {
    pub total_retrans: u32,
    pub snd_cwnd: u32,
    pub rtt_us: u32,
}

pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
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
    Ok(TcpInfo {
        total_retrans: ti.tcpi_total_retrans,
        snd_cwnd: ti.tcpi_snd_cwnd,
        rtt_us: ti.tcpi_rtt,
    })
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

/// A socket address in the kernel's own layout, built once per flow.
#[derive(Clone)]
pub struct SockAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
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
    buf: Vec<u64>,
    len: usize,
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

/// An AF_PACKET SOCK_RAW socket for sending whole Ethernet frames. Protocol 0
/// registers no receive hook, so the socket never gets a copy of incoming
/// traffic. Needs CAP_NET_RAW.
pub fn packet_socket() -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: socket takes plain integers and touches no memory of ours.
    let fd = cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: socket returned a new fd that nothing else owns.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// PACKET_QDISC_BYPASS: frames go straight to the driver's transmit
/// function, skipping the qdisc (and its drops: a full device says ENOBUFS).
pub fn set_qdisc_bypass(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one)
}

/// Binds a packet socket to one interface, so sendmmsg needs no address.
/// Protocol 0 keeps the socket send-only.
pub fn bind_packet(fd: RawFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as libc::c_ushort;
    sll.sll_protocol = 0;
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: pointer and length describe `sll`, alive for the call.
    cvt(unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Reusable header arrays for sendmmsg; pointers are filled in per call.
pub struct Sendmmsg {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

impl Sendmmsg {
    pub fn new(batch: usize) -> Self {
        // SAFETY: mmsghdr and iovec are plain data; zeroed is a valid value.
        Sendmmsg {
            hdrs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            iovs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
        }
    }

    /// Sends up to `n` datagrams; `msg(i)` gives the payload, destination and
    /// ancillary data of datagram `i`. Returns how many the kernel took.
    pub fn send<'a>(
        &mut self,
        fd: RawFd,
        n: usize,
        mut msg: impl FnMut(usize) -> (&'a [u8], Option<&'a SockAddr>, Option<&'a Cmsg>),
    ) -> io::Result<usize> {
        let n = n.min(self.hdrs.len());
        for i in 0..n {
            let (payload, dst, cmsg) = msg(i);
            self.iovs[i] = libc::iovec {
                iov_base: payload.as_ptr() as *mut libc::c_void,
                iov_len: payload.len(),
            };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            match dst {
                Some(d) => {
                    h.msg_name = (&d.storage as *const libc::sockaddr_storage) as *mut libc::c_void;
                    h.msg_namelen = d.len;
                }
                None => {
                    h.msg_name = std::ptr::null_mut();
                    h.msg_namelen = 0;
                }
            }
            match cmsg {
                Some(c) => {
                    h.msg_control = c.buf.as_ptr() as *mut libc::c_void;
                    h.msg_controllen = c.len as _;
                }
                None => {
                    h.msg_control = std::ptr::null_mut();
                    h.msg_controllen = 0;
                }
            }
            h.msg_flags = 0;
        }
        // SAFETY: the first n headers point to payloads, addresses and control
        // buffers borrowed for 'a, which outlives this call; the kernel only reads them.
        let ret = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret as usize)
        }
    }
}

/// Reusable buffers for recvmmsg. Each slot keeps only the first `slot` bytes
/// of a datagram (the linerate header); the kernel reports the full length.
pub struct Recvmmsg {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    bufs: Vec<u8>,
    slot: usize,
}

// SAFETY: the raw pointers in hdrs/iovs only ever point into `bufs`, which
// moves with the struct (heap storage does not move).
unsafe impl Send for Recvmmsg {}
// SAFETY: as above; Sendmmsg's pointers are rewritten before every use.
unsafe impl Send for Sendmmsg {}

impl Recvmmsg {
    pub fn new(batch: usize, slot: usize) -> Self {
        let mut r = Recvmmsg {
            // SAFETY: plain data, zero is valid.
            hdrs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            // SAFETY: plain data, zero is valid.
            iovs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            bufs: vec![0u8; batch * slot],
            slot,
        };
        for i in 0..batch {
            r.iovs[i] = libc::iovec {
                // SAFETY: i * slot is within bufs (batch * slot bytes).
                iov_base: unsafe { r.bufs.as_mut_ptr().add(i * slot) }.cast(),
                iov_len: slot,
            };
        }
        r
    }

    /// Takes as many queued datagrams as fit the batch. With `wait`, blocks
    /// for the first one (up to the socket's receive timeout); without, returns
    /// WouldBlock at once when nothing is queued (busy polling).
    pub fn recv(&mut self, fd: RawFd, wait: bool) -> io::Result<usize> {
        for i in 0..self.hdrs.len() {
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_name = std::ptr::null_mut();
            h.msg_namelen = 0;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: every header points to its own iovec, which points into
        // `bufs`; all live as long as `self`, borrowed mutably for the call.
        let ret = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                // MSG_TRUNC: msg_len is the datagram's real length, not the
                // header-sized part we keep.
                libc::MSG_TRUNC
                    | if wait {
                        libc::MSG_WAITFORONE
                    } else {
                        libc::MSG_DONTWAIT
                    },
                std::ptr::null_mut(),
            )
        };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret as usize)
        }
    }

    /// The kept bytes of datagram `i` and its full length.
    pub fn datagram(&self, i: usize) -> (&[u8], usize) {
        let full = self.hdrs[i].msg_len as usize;
        let kept = full.min(self.slot);
        (&self.bufs[i * self.slot..i * self.slot + kept], full)
    }
}

/// True when running as root (needed for namespaces and the lab).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// An anonymous in-memory file holding `data`, for zero-copy sending.
pub fn memfd_with(data: &[u8]) -> io::Result<File> {
    let name = CString::new("linerate-payload")
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: name is a valid NUL-terminated string for the call.
    let fd = cvt(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: memfd_create returned a new fd that nothing else owns.
    let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    std::io::Write::write_all(&mut f, data)?;
    Ok(f)
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

/// Peak resident set size of this process (VmHWM), in bytes.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}
/// SO_RCVLOWAT: how many bytes must be queued before a read wakes up.
pub fn set_rcvlowat(fd: RawFd, bytes: i32) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, &bytes)
}

/// The first 64 bytes of the kernel's `struct perf_event_attr`
/// (PERF_ATTR_SIZE_VER0), which is all a plain counter needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// Opens a hardware CPU-cycles counter for everything that runs on `cpu`
/// (all processes, kernel included: softirq forwarding counts too). Needs
/// root or CAP_PERFMON, and a PMU the hypervisor exposes.
pub fn perf_cycles_on_cpu(cpu: usize) -> io::Result<File> {
    let attr = PerfEventAttr {
        kind: 0, // PERF_TYPE_HARDWARE
        size: size_of::<PerfEventAttr>() as u32,
        config: 0, // PERF_COUNT_HW_CPU_CYCLES
        ..Default::default()
    };
    // SAFETY: attr is a valid, initialised perf_event_attr prefix whose size
    // field says how much the kernel may read; the other arguments are plain
    // integers (pid -1 = all processes, group -1, no flags).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            8 as libc::c_ulong, // PERF_FLAG_FD_CLOEXEC
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd as RawFd) })
}

/// Reads a counter opened by [`perf_cycles_on_cpu`].
pub fn perf_read(f: &File) -> io::Result<u64> {
    let mut b = [0u8; 8];
    let n = std::io::Read::read(&mut &*f, &mut b)?;
    if n != 8 {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    Ok(u64::from_ne_bytes(b))
}

/// A UDP socket bound to `addr` with SO_REUSEPORT set before the bind, so
/// several sockets (one per receiver thread) share one port and the kernel
/// spreads flows over them by their address hash.
pub fn udp_reuseport(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
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
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, &one)?;
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

/// CPU seconds (user + system) the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    // SAFETY: timespec is plain data, clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: valid pointer; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The CPUs the calling thread may run on, in ascending order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is ours and sized right.
    cvt(unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) })?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: c is below CPU_SETSIZE and `set` is initialised.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Gives the calling thread its own mount namespace (other threads and
/// processes keep theirs) and mounts a sysfs of the thread's network
/// namespace on /sys there, so /sys/class/net shows this namespace's
/// interfaces. Meant for a short-lived thread that writes per-interface
/// settings (RPS masks) and exits; the mount goes away with it.
pub fn private_sysfs() -> io::Result<()> {
    // SAFETY: unshare takes a flag word; CLONE_FS|CLONE_NEWNS affects only
    // the calling thread's filesystem context.
    cvt(unsafe { libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) })?;
    let root = CString::new("/").map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let sys = CString::new("/sys").map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let fstype = CString::new("sysfs").map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the strings are NUL-terminated and alive; null source/type/data
    // are allowed for a propagation change.
    cvt(unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })?;
    // SAFETY: as above; sysfs takes no data.
    cvt(unsafe {
        libc::mount(
            fstype.as_ptr(),
            sys.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// One mmap'd region, unmapped on drop.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; the AF_XDP
// socket that shares it is owned by the same `Xsk`, which is used from one
// thread at a time (`&mut self`).
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(len: usize, fd: RawFd, offset: libc::off_t) -> io::Result<Mapping> {
        let (flags, fd) = if fd < 0 {
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
        } else {
            (libc::MAP_SHARED | libc::MAP_POPULATE, fd)
        };
        // SAFETY: a fresh mapping at an address the kernel chooses; nothing
        // of ours is overwritten.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }
    fn at<T>(&self, off: u64) -> *mut T {
        // SAFETY (for callers): offsets come from the kernel's
        // XDP_MMAP_OFFSETS for this very mapping, within its length.
        self.ptr.cast::<u8>().wrapping_add(off as usize).cast()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A single-producer/single-consumer ring shared with the kernel.
struct Ring {
    _map: Mapping,
    producer: *const std::sync::atomic::AtomicU32,
    consumer: *const std::sync::atomic::AtomicU32,
    desc: *mut u8,
    size: u32,
}

// SAFETY: see `Mapping`; the raw pointers point into the owned mapping.
unsafe impl Send for Ring {}

impl Ring {
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        entry: usize,
        pgoff: libc::off_t,
    ) -> io::Result<Ring> {
        let len = off.desc as usize + size as usize * entry;
        let map = Mapping::new(len, fd, pgoff)?;
        Ok(Ring {
            producer: map.at(off.producer),
            consumer: map.at(off.consumer),
            desc: map.at(off.desc),
            size,
            _map: map,
        })
    }
    fn producer(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: a u32 the kernel keeps at this offset for the ring's life,
        // aligned, and only ever accessed atomically.
        unsafe { &*self.producer }
    }
    fn consumer(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }
}

/// An AF_XDP socket that only transmits: a UMEM of fixed-size frames, the
/// TX ring and the completion ring, bound to one queue of one interface in
/// copy mode (works on any driver, veth included) or zero-copy.
pub struct Xsk {
    fd: std::os::fd::OwnedFd,
    umem: Mapping,
    frame_size: u32,
    tx: Ring,
    cq: Ring,
    /// Frame indices free for new frames.
    free: Vec<u32>,
    /// Frames queued on the TX ring and not yet completed.
    in_flight: u32,
    zero_copy: bool,
    fill: Option<u8>,
    /// Frames handed out at least once.
    used: Vec<bool>,
}

impl Xsk {
    /// Opens the socket on queue 0 of `ifindex` with `frames` frames of
    /// `frame_size` bytes (both powers of two); zero-copy when the driver
    /// offers it, else copy mode.
    pub fn open(ifindex: u32, frames: u32, frame_size: u32) -> io::Result<Xsk> {
        use std::sync::atomic::Ordering;
        // SAFETY: socket takes plain integers and touches no memory of ours.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: socket returned a new fd that nothing else owns.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        let umem = Mapping::new(frames as usize * frame_size as usize, -1, 0)?;
        // SAFETY: xdp_umem_reg is plain data; zero is a valid start.
        let mut reg: libc::xdp_umem_reg = unsafe { zeroed() };
        reg.addr = umem.ptr as u64;
        reg.len = umem.len as u64;
        reg.chunk_size = frame_size;
        setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)?;
        let ring = frames.next_power_of_two() / 2;
        setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_COMPLETION_RING, &ring)?;
        // A fill ring is required even for a socket that never receives.
        let fill: u32 = 64;
        setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &fill)?;
        setsockopt(raw, libc::SOL_XDP, libc::XDP_TX_RING, &ring)?;
        // SAFETY: xdp_mmap_offsets is plain data the kernel fills.
        let mut offs: libc::xdp_mmap_offsets = unsafe { zeroed() };
        let mut len = size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: pointer and length describe `offs`.
        cvt(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut offs as *mut libc::xdp_mmap_offsets).cast(),
                &mut len,
            )
        })?;
        let tx = Ring::map(
            raw,
            &offs.tx,
            ring,
            size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_TX_RING,
        )?;
        let cq = Ring::map(
            raw,
            &offs.cr,
            ring,
            size_of::<u64>(),
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
        )?;
        let bind = |flags: u16| -> io::Result<()> {
            // SAFETY: sockaddr_xdp is plain data; zero is a valid start.
            let mut sxdp: libc::sockaddr_xdp = unsafe { zeroed() };
            sxdp.sxdp_family = libc::AF_XDP as libc::sa_family_t;
            sxdp.sxdp_ifindex = ifindex;
            sxdp.sxdp_queue_id = 0;
            sxdp.sxdp_flags = flags;
            // SAFETY: pointer and length describe `sxdp`, alive for the call.
            cvt(unsafe {
                libc::bind(
                    raw,
                    (&sxdp as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            })
            .map(drop)
        };
        let zero_copy = match bind(libc::XDP_ZEROCOPY) {
            Ok(()) => true,
            Err(_) => {
                bind(libc::XDP_COPY)?;
                false
            }
        };
        // Nothing is in flight yet; start the consumer view where the
        // kernel's rings are.
        let _ = tx.consumer().load(Ordering::Acquire);
        Ok(Xsk {
            fd,
            umem,
            frame_size,
            tx,
            cq,
            free: (0..frames).rev().collect(),
            in_flight: 0,
            zero_copy,
            fill: None,
            used: vec![false; frames as usize],
        })
    }

    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Fills each frame with `byte` the first time it is handed out, so
    /// callers can write only the bytes that change (and frames never used
    /// cost no memory).
    pub fn fill_new_frames(&mut self, byte: u8) {
        self.fill = Some(byte);
    }

    /// Takes back the frames the kernel has finished sending.
    fn reclaim(&mut self) {
        use std::sync::atomic::Ordering;
        let prod = self.cq.producer().load(Ordering::Acquire);
        let cons = self.cq.consumer().load(Ordering::Relaxed);
        let n = prod.wrapping_sub(cons);
        for i in 0..n {
            let slot = (cons.wrapping_add(i) & (self.cq.size - 1)) as usize;
            // SAFETY: slot < size; the completion ring holds `size` u64s at desc.
            let addr = unsafe { std::ptr::read(self.cq.desc.cast::<u64>().add(slot)) };
            self.free.push((addr / u64::from(self.frame_size)) as u32);
        }
        self.cq
            .consumer()
            .store(cons.wrapping_add(n), Ordering::Release);
        self.in_flight -= n.min(self.in_flight);
    }

    /// Queues up to `n` frames, each written by `fill(i, frame) -> length`,
    /// and wakes the kernel to send them. Returns how many were queued
    /// (fewer when the ring or the UMEM is full: try again).
    pub fn send(
        &mut self,
        n: usize,
        mut fill: impl FnMut(usize, &mut [u8]) -> usize,
    ) -> io::Result<usize> {
        use std::sync::atomic::Ordering;
        self.reclaim();
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let cons = self.tx.consumer().load(Ordering::Acquire);
        let room = self.tx.size - prod.wrapping_sub(cons);
        let k = n.min(room as usize).min(self.free.len());
        for i in 0..k {
            let Some(frame) = self.free.pop() else { break };
            let off = u64::from(frame) * u64::from(self.frame_size);
            // SAFETY: the frame lies inside the UMEM (frame < frames) and is
            // not in the kernel's hands (it came off the free list).
            let buf = unsafe {
                std::slice::from_raw_parts_mut(self.umem.at::<u8>(off), self.frame_size as usize)
            };
            if let (Some(b), false) = (self.fill, self.used[frame as usize]) {
                buf.fill(b);
                self.used[frame as usize] = true;
            }
            let len = fill(i, buf).min(self.frame_size as usize);
            let slot = (prod.wrapping_add(i as u32) & (self.tx.size - 1)) as usize;
            let desc = libc::xdp_desc {
                addr: off,
                len: len as u32,
                options: 0,
            };
            // SAFETY: slot < size; the TX ring holds `size` descriptors.
            unsafe { std::ptr::write(self.tx.desc.cast::<libc::xdp_desc>().add(slot), desc) };
        }
        self.tx
            .producer()
            .store(prod.wrapping_add(k as u32), Ordering::Release);
        self.in_flight += k as u32;
        // Copy mode sends a few dozen frames per wake-up: wake it until the
        // ring is empty or it stops making progress.
        let mut left = self.tx_pending();
        while left > 0 {
            self.kick()?;
            let now = self.tx_pending();
            if now >= left {
                break;
            }
            left = now;
        }
        Ok(k)
    }

    /// Descriptors on the TX ring the kernel has not taken yet.
    fn tx_pending(&self) -> u32 {
        use std::sync::atomic::Ordering;
        let prod = self.tx.producer().load(Ordering::Relaxed);
        prod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire))
    }

    /// Asks the kernel to process the TX ring (copy mode sends a bounded
    /// number of frames per call, so callers kick again while frames wait).
    pub fn kick(&mut self) -> io::Result<()> {
        // SAFETY: a zero-length send with no buffer or address.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                | Some(libc::ENETDOWN) => Ok(()),
                _ => Err(e),
            };
        }
        Ok(())
    }

    /// Frames queued but not yet completed.
    pub fn in_flight(&mut self) -> u32 {
        self.reclaim();
        self.in_flight
    }

    /// tx_invalid_descs from XDP_STATISTICS: frames the kernel refused.
    pub fn invalid(&self) -> u64 {
        // SAFETY: xdp_statistics is plain data the kernel fills.
        let mut st: libc::xdp_statistics = unsafe { zeroed() };
        let mut len = size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: pointer and length describe `st`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut st as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        };
        if r < 0 {
            0
        } else {
            st.tx_invalid_descs
        }
    }
}
