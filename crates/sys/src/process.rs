//! The process and its threads: network namespaces, parent-death signals,
//! CPU pinning, clocks, CPU time and memory figures, a private sysfs.

use crate::cvt;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

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

/// Sets the calling thread's timer slack (how late the kernel may wake it
/// from a sleep, to batch wakeups; 50 µs by default) to `ns` nanoseconds.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes plain integers and touches no memory of ours.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// Makes the child get SIGKILL when the spawning thread dies, so an agent
/// never outlives a killed controller even if it misses EOF on stdin.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe, which is all pre_exec requires.
    unsafe {
        cmd.pre_exec(|| cvt(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0)).map(drop));
    }
}

/// Makes the child start in the network namespace `ns` refers to (e.g.
/// `/proc/PID/ns/net` of an agent holding an anonymous lab namespace): a
/// VM's taps are created where its emulator runs. The file stays open
/// until the child execs.
pub fn netns_on_exec(cmd: &mut Command, ns: File) {
    // SAFETY: setns is async-signal-safe, which is all pre_exec requires;
    // the fd is owned by `ns`, which the closure keeps alive.
    unsafe {
        cmd.pre_exec(move || cvt(libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET)).map(drop));
    }
}

/// Pins the calling thread to the given CPUs.
pub fn pin_thread(cpus: &[usize]) -> io::Result<()> {
    pin_pid(0, cpus)
}

/// Pins thread `pid` (0: the calling thread) to the given CPUs; kernel
/// threads that allow it (threaded NAPI's `napi/DEV-ID`) included.
pub fn pin_pid(pid: u32, cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
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
    // SAFETY: `set` outlives the call; a pid that is gone is an error return.
    cvt(unsafe { libc::sched_setaffinity(pid, size_of::<libc::cpu_set_t>(), &set) }).map(drop)
}

/// Gives thread `pid` the lowest real-time priority (SCHED_FIFO 1): it
/// runs as soon as it wakes, ahead of every normal thread on its CPU. The
/// kernel's RT throttling still leaves the others 5 %.
pub fn set_fifo(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` outlives the call; a pid that is gone is an error return.
    cvt(unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &param) }).map(drop)
}

/// Gives the calling thread SCHED_FIFO priority `priority` (1..=99): only
/// threads of a higher real-time priority, interrupts and the hypervisor
/// keep it from running when it wakes.
pub fn set_fifo_self(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` outlives the call; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}

/// Sleeps until CLOCK_MONOTONIC reads `ns` (an absolute time, so a late
/// wake does not push the next one later). Returns early only on a signal.
pub fn sleep_until_monotonic_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` outlives the call; no remainder is asked for with
    // TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Takes an exclusive advisory lock (flock) on `file` without waiting:
/// `Ok(false)` when another open file description holds it. The lock ends
/// when the file is closed (or the process exits).
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: the fd is owned by `file` for the duration of the call.
    match cvt(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
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
#[inline]
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
#[inline]
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Columns of the terminal on `fd` (TIOCGWINSZ); None when `fd` is not a
/// terminal or it reports no size.
pub fn terminal_columns(fd: std::os::fd::RawFd) -> Option<usize> {
    // SAFETY: winsize is plain data the ioctl fills; an fd that is not a
    // terminal (or not open) makes it fail with ENOTTY/EBADF, nothing else.
    let mut ws: libc::winsize = unsafe { zeroed() };
    // SAFETY: valid pointer to a winsize for TIOCGWINSZ.
    let r = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// True when running as root (needed for namespaces and the lab).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The effective user id: whose files this process trusts besides root's.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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
