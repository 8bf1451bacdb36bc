//! `BPF_PROG_RUN` (BPF_PROG_TEST_RUN) for XDP programs: the one `bpf(2)`
//! command linerate issues itself, because the loader crate (aya 0.13) does
//! not expose it, and live-frames mode needs its `flags` and `batch_size`
//! fields. Loading objects, maps and attaching stay with the loader.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

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
