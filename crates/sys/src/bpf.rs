//! The `bpf(2)` commands linerate issues itself: `BPF_PROG_RUN`
//! (BPF_PROG_TEST_RUN) for XDP programs, because the loader crate (aya
//! 0.13) does not expose it and live-frames mode needs its `flags` and
//! `batch_size` fields; `BPF_LINK_CREATE` for XDP, so an attachment is a
//! link whose descriptor the process owns (the kernel detaches the program
//! when the last descriptor closes, SIGKILL included) rather than aya's
//! choice by kernel version; and batched per-CPU map reads. Loading
//! objects and maps stays with the loader.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// BPF_PROG_TEST_RUN's command number (uapi linux/bpf.h).
const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// Asks for live frames: XDP_TX and XDP_REDIRECT really transmit.
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// The `test` member of `union bpf_attr` (uapi linux/bpf.h), through
/// `batch_size` (kernel 5.18); the kernel zero-extends shorter structs and
/// checks that bytes it does not know are zero.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `struct xdp_md` as BPF_PROG_RUN takes it for an XDP program's context.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// One XDP test run.
pub struct XdpRun<'a> {
    /// The frame every run starts from, after `meta_len` bytes of XDP
    /// metadata (a multiple of 4, at most 32).
    pub data_in: &'a [u8],
    pub meta_len: u32,
    /// Where the output frame goes (test mode only; `None` for live).
    pub data_out: Option<&'a mut [u8]>,
    /// Times to run the program (live: frames to send).
    pub repeat: u32,
    /// The interface the frame "arrived" on: XDP_TX leaves through it.
    pub ingress_ifindex: u32,
    /// 0 or [`BPF_F_TEST_XDP_LIVE_FRAMES`].
    pub flags: u32,
    /// Frames per batch in live mode (0: the kernel's default of 64).
    pub batch_size: u32,
}

/// What a run returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpRunResult {
    /// The program's return value (test mode: of the last run).
    pub retval: u32,
    /// Bytes written to `data_out`.
    pub data_len: usize,
    /// Average ns per run, as the kernel measured it.
    pub duration_ns: u32,
}

/// Runs the XDP program `prog` with BPF_PROG_RUN.
pub fn xdp_test_run(prog: BorrowedFd<'_>, run: XdpRun<'_>) -> io::Result<XdpRunResult> {
    let data_size_in = u32::try_from(run.data_in.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    let ctx = XdpMd {
        data: run.meta_len,
        data_end: data_size_in,
        ingress_ifindex: run.ingress_ifindex,
        ..XdpMd::default()
    };
    let (out_ptr, out_len) = match run.data_out {
        Some(b) => (b.as_mut_ptr() as u64, b.len()),
        None => (0, 0),
    };
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in,
        data_size_out: u32::try_from(out_len).unwrap_or(u32::MAX),
        data_in: run.data_in.as_ptr() as u64,
        data_out: out_ptr,
        repeat: run.repeat,
        ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
        ctx_in: &ctx as *const XdpMd as u64,
        flags: run.flags,
        batch_size: run.batch_size,
        ..TestRunAttr::default()
    };
    // SAFETY: `attr` is a valid, fully initialised bpf_attr prefix of the
    // size passed; the kernel reads `data_in` (data_size_in bytes) and
    // `ctx_in` (ctx_size_in bytes), both borrowed for this call, and writes
    // at most `data_size_out` bytes to `data_out`, a mutable borrow of that
    // length, then fills `retval`, `data_size_out` and `duration` in `attr`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut TestRunAttr,
            std::mem::size_of::<TestRunAttr>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(XdpRunResult {
        retval: attr.retval,
        data_len: (attr.data_size_out as usize).min(out_len),
        duration_ns: attr.duration,
    })
}

/// BPF_LINK_CREATE's command number and BPF_XDP's attach type (uapi
/// linux/bpf.h).
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_XDP: u32 = 37;
/// XDP_FLAGS_SKB_MODE and XDP_FLAGS_DRV_MODE (uapi linux/if_link.h).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The `link_create` member of `union bpf_attr`, through `flags`; the rest
/// of the member (target-specific unions) stays zero for XDP.
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 4],
}

/// Attaches the XDP program `prog` to interface `ifindex` as a BPF link
/// (kernel 5.9 and later). `flags` is [`XDP_FLAGS_DRV_MODE`] or
/// [`XDP_FLAGS_SKB_MODE`]. The program stays attached for as long as the
/// returned descriptor (or a copy of it) is open, and no longer: closing it,
/// or the death of the process, detaches it. Kernels without XDP links
/// answer `EINVAL`; a driver without native XDP `EOPNOTSUPP`; an interface
/// that already has a program `EBUSY` or `EEXIST`.
pub fn xdp_link_create(prog: BorrowedFd<'_>, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
        ..LinkCreateAttr::default()
    };
    // SAFETY: `attr` is a fully initialised `link_create` member of the
    // size passed; BPF_LINK_CREATE for XDP reads only its scalar fields and
    // follows no pointers.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            &mut attr as *mut LinkCreateAttr,
            std::mem::size_of::<LinkCreateAttr>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(ret).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    // SAFETY: on success BPF_LINK_CREATE returns a new descriptor (opened
    // O_CLOEXEC by the kernel) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated string alive for the call; the
    // function only reads it.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(idx)
}

/// BPF_MAP_LOOKUP_BATCH and BPF_OBJ_GET_INFO_BY_FD (uapi linux/bpf.h).
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;

/// The `batch` member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// The `info` member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_map_info`; the kernel fills what fits.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MapInfoHead {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: [u8; 16],
}

/// A per-CPU array map's layout, as a batch read lays its values out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerCpuLayout {
    /// Bytes of one CPU's value, rounded up to 8 (the kernel's stride).
    pub stride: usize,
    /// Possible CPUs: values per entry.
    pub cpus: usize,
    pub max_entries: u32,
}

impl PerCpuLayout {
    /// Bytes of one entry's values (every CPU's).
    pub fn entry_len(&self) -> usize {
        self.stride * self.cpus
    }
}

/// One bpf(2) call.
///
/// # Safety
/// `attr` points to a live, initialised bpf_attr member of `size` bytes for
/// `cmd`, and every buffer it points to is live and as large as the kernel
/// will read or write for that command.
unsafe fn bpf(cmd: libc::c_long, attr: *mut u8, size: usize) -> io::Result<()> {
    // SAFETY: the caller's contract above.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr, size) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The number of possible CPUs (/sys/devices/system/cpu/possible, e.g.
/// "0-3" or "0,2-5"): what per-CPU maps hold a value for.
pub fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(text.trim())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("cpu list {text:?}")))
}

fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().ok()?.checked_sub(a.parse().ok()?)? + 1,
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
    }
    Some(n)
}

/// The layout of the per-CPU array map `map` (u32 keys), from the kernel.
pub fn percpu_array_layout(map: BorrowedFd<'_>) -> io::Result<PerCpuLayout> {
    let mut info = MapInfoHead::default();
    let mut attr = InfoAttr {
        bpf_fd: map.as_raw_fd() as u32,
        info_len: std::mem::size_of::<MapInfoHead>() as u32,
        info: &mut info as *mut MapInfoHead as u64,
    };
    // SAFETY: `attr` is a live InfoAttr of the size passed; the kernel
    // writes at most `info_len` bytes to `info`, a live local of that size.
    unsafe {
        bpf(
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr as *mut u8,
            std::mem::size_of::<InfoAttr>(),
        )
    }?;
    if info.map_type != BPF_MAP_TYPE_PERCPU_ARRAY || info.key_size != 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a per-CPU array map with u32 keys",
        ));
    }
    Ok(PerCpuLayout {
        stride: (info.value_size as usize).div_ceil(8) * 8,
        cpus: possible_cpus()?,
        max_entries: info.max_entries,
    })
}

/// Reads entries `start..` of the per-CPU array map `map` into `values`
/// with one BPF_MAP_LOOKUP_BATCH: as many as fit (whole entries of
/// `layout.entry_len()` bytes, entry k's value on CPU c at
/// `(k * cpus + c) * stride`). Returns how many it read; fewer than fit
/// means the map ended.
pub fn percpu_array_read(
    map: BorrowedFd<'_>,
    start: u32,
    values: &mut [u8],
) -> io::Result<(PerCpuLayout, usize)> {
    // The layout comes from the kernel for this very map, so the buffer
    // checks below hold whatever the caller believes about it.
    let layout = percpu_array_layout(map)?;
    let fit = values.len() / layout.entry_len().max(1);
    let count = fit.min(layout.max_entries.saturating_sub(start) as usize);
    if count == 0 {
        return Ok((layout, 0));
    }
    let mut keys = vec![0u32; count];
    // The batch token is the last key read (the kernel goes on with the
    // next key after it); NULL starts at the first.
    let mut token_in = start.wrapping_sub(1);
    let mut token_out = 0u32;
    let mut attr = BatchAttr {
        in_batch: if start == 0 {
            0
        } else {
            &mut token_in as *mut u32 as u64
        },
        out_batch: &mut token_out as *mut u32 as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: count as u32,
        map_fd: map.as_raw_fd() as u32,
        ..BatchAttr::default()
    };
    // SAFETY: `attr` is a live BatchAttr of the size passed; the kernel
    // writes at most `count` keys (4 bytes each, `keys` holds `count`),
    // `count` entries of `entry_len` bytes (`values` holds `fit >= count`
    // of them; the layout is the kernel's own for this map), and one u32
    // to each token, live locals.
    let read = unsafe {
        bpf(
            BPF_MAP_LOOKUP_BATCH,
            &mut attr as *mut BatchAttr as *mut u8,
            std::mem::size_of::<BatchAttr>(),
        )
    };
    match read {
        Ok(()) => {}
        // The end of the map: `count` says how many were read before it.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(e),
    }
    Ok((layout, (attr.count as usize).min(count)))
}

/// Lifts RLIMIT_MEMLOCK to unlimited where this process may (root, or a hard
/// limit that allows it): kernels before 5.11 charge BPF maps to it, and
/// its usual 8 MiB refuses a map of a few MiB with EPERM. Later kernels
/// charge maps to the memory cgroup and ignore it.
pub fn raise_memlock_limit() -> io::Result<()> {
    let want = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `want` is a live rlimit the kernel only reads.
    let ret = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &want) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0,2-5"), Some(5));
        assert_eq!(parse_cpu_list("x"), None);
    }
}
