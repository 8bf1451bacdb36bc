//! AF_XDP sockets: the UMEM, its fill/completion rings and the TX ring,
//! mapped and driven from one thread.

use crate::cvt;
use crate::socket::setsockopt;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, RawFd};

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

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
