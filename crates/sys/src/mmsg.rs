//! Batched datagram I/O: `sendmmsg`/`recvmmsg` with reusable buffers, and
//! AF_PACKET sockets that bypass the qdisc.

use crate::cvt;
use crate::socket::{setsockopt, Cmsg, SockAddr};
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::RawFd;

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
/// Made [`Recvmmsg::with_tos`], each slot also has room for the datagram's
/// TOS or traffic class control message.
pub struct Recvmmsg {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    bufs: Vec<u8>,
    slot: usize,
    /// Control buffers, [`CTRL_WORDS`] per slot (8-byte aligned, as
    /// cmsghdr needs); empty when no control messages are asked for.
    ctrl: Vec<u64>,
}

/// u64 words of one slot's control buffer: two cmsgs with an int each
/// (IP_TOS and IPV6_TCLASS: 2 × CMSG_SPACE(4) = 48 bytes on 64-bit Linux)
/// and room to spare.
const CTRL_WORDS: usize = 8;

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
            ctrl: Vec::new(),
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

    /// As [`Recvmmsg::new`], with a control buffer per slot for the TOS
    /// or traffic class of each datagram (the socket must ask for them:
    /// [`crate::set_recv_tos`]); [`Recvmmsg::tos`] reads it.
    pub fn with_tos(batch: usize, slot: usize) -> Self {
        let mut r = Recvmmsg::new(batch, slot);
        r.ctrl = vec![0u64; batch * CTRL_WORDS];
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
            if self.ctrl.is_empty() {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            } else {
                // The kernel shrinks msg_controllen to what it wrote: reset
                // it every call.
                // SAFETY: slot i's words are within `ctrl` (batch × CTRL_WORDS).
                h.msg_control = unsafe { self.ctrl.as_mut_ptr().add(i * CTRL_WORDS) }.cast();
                h.msg_controllen = (CTRL_WORDS * 8) as _;
            }
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

    /// The TOS byte (IPv4) or traffic class (IPv6) datagram `i` arrived
    /// with, when the buffers were made [`Recvmmsg::with_tos`] and the
    /// kernel gave it (after the last [`Recvmmsg::recv`], `i` below what it
    /// returned).
    pub fn tos(&self, i: usize) -> Option<u8> {
        if self.ctrl.is_empty() || i >= self.hdrs.len() {
            return None;
        }
        let h = &self.hdrs[i].msg_hdr;
        if h.msg_controllen > (CTRL_WORDS * 8) as _ {
            return None;
        }
        // SAFETY: `h` points to slot i's control buffer, whose first
        // msg_controllen bytes (checked to lie within it) the kernel wrote
        // as cmsgs; CMSG_FIRSTHDR/NXTHDR stay within msg_controllen and
        // return null past it; each cmsg's data is read within its
        // cmsg_len, unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let len =
                    ((*c).cmsg_len as usize).saturating_sub(data.offset_from(c.cast()) as usize);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    // IP_RECVTOS delivers one byte; IPV6_RECVTCLASS an int.
                    (libc::IPPROTO_IP, libc::IP_TOS) if len >= 1 => return Some(*data),
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if len >= 4 => {
                        let v = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                        return Some((v & 0xff) as u8);
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// The kept bytes of datagram `i` and its full length.
    pub fn datagram(&self, i: usize) -> (&[u8], usize) {
        let full = self.hdrs[i].msg_len as usize;
        let kept = full.min(self.slot);
        (&self.bufs[i * self.slot..i * self.slot + kept], full)
    }
}
