//! Hardware cycle counters per CPU through `perf_event_open`.

use std::fs::File;
use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;

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
