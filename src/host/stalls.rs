//! The stall watch: how long each CPU of this host was kept from running
//! a real-time thread, to the millisecond. `/proc/stat`'s steal counts in
//! 10 ms ticks, but a lab DUT's 256-frame veth ring overflows after 1.5 ms
//! of a stalled CPU at 165 kpps, and such stalls are common in VMs: an idle
//! 2-core VM (2026-11-28, cyclictest at SCHED_FIFO 95) had 5 to 8 wakes
//! per CPU per 20 s that were 1.5 ms or more late, up to 5.2 ms, with no
//! steal tick to show for most of them. A search that takes the loss of
//! such a second for the DUT's moves its NDR by 10 % and more.
//!
//! A thread per CPU, pinned, at SCHED_FIFO [`PRIORITY`] (above the lab's
//! NAPI threads at 1, so the DUT's own work never delays it), wakes every
//! [`PERIOD_NS`] at absolute times; a wake [`THRESHOLD_NS`] or more late is
//! a stall: the CPU ran something of a higher priority (interrupts, the
//! kernel's own stop work) or nothing of this host's at all (the
//! hypervisor ran another guest). Counters only grow; a test reads them
//! before and after ([`crate::proto::CpuTicks::stalled_ns`]).
//!
//! One watch per host: agents of a lab share the host's CPUs, so the first
//! to ask takes a host-wide lock file and watches; the others report no
//! watch. Without root (no real-time priority) there is no watch: a
//! normal thread's late wakes would be the load's, not stalls. Searches
//! turn it on for their trials and off after ([`set_active`]): each wake
//! costs about 18 µs on a VM, about 2 % of every CPU.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// How often each watcher wakes. A stall of S shows as a wake between
/// S − PERIOD and S late.
pub const PERIOD_NS: u64 = 1_000_000;
/// Lateness that counts as a stall: well above a loaded VM's usual wake
/// latency (10–50 µs measured), well below a veth ring's 1.5 ms.
pub const THRESHOLD_NS: u64 = 300_000;
/// SCHED_FIFO priority of the watchers: above the lab's NAPI threads (1),
/// below the kernel's own real-time threads (99).
pub const PRIORITY: i32 = 50;

#[derive(Default)]
struct Cpu {
    cpu: u32,
    /// Lateness of the stalled wakes, summed, ns.
    late_ns: AtomicU64,
    /// Stalled wakes.
    stalls: AtomicU64,
}

struct Watch {
    cpus: Vec<Arc<Cpu>>,
    // Held for the process's life: the host-wide lock.
    _lock: std::fs::File,
}

static WATCH: OnceLock<Option<Watch>> = OnceLock::new();

/// Whether the watchers count (and wake every period) now; off, they
/// check back every [`IDLE_NS`].
static ACTIVE: AtomicBool = AtomicBool::new(false);
const IDLE_NS: u64 = 50_000_000;

/// Turns counting on (starting the watch if this process has none yet)
/// or off. Counters keep their totals either way.
pub fn set_active(on: bool) {
    if on {
        ensure_started();
    }
    ACTIVE.store(on, Ordering::Relaxed);
}

/// Where the host-wide lock lives: /run/lock where it exists (tmpfs, shared
/// by every namespace of the host), else the temporary directory.
fn lock_path() -> std::path::PathBuf {
    let run = std::path::Path::new("/run/lock");
    let dir = if run.is_dir() {
        run.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    dir.join("linerate-stall-watch.lock")
}

/// Starts this host's watch if no process of it watches yet (idempotent).
/// Why it did not start is not an error: the tests then have steal ticks
/// only, as before.
fn ensure_started() {
    WATCH.get_or_init(start);
}

fn start() -> Option<Watch> {
    if !crate::sys::is_root() {
        return None;
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path())
        .ok()?;
    if !crate::sys::try_lock_exclusive(&lock).ok()? {
        return None;
    }
    let allowed = crate::sys::allowed_cpus().ok()?;
    let mut cpus = Vec::new();
    for c in allowed {
        let cell = Arc::new(Cpu {
            cpu: c as u32,
            ..Cpu::default()
        });
        let watched = Arc::clone(&cell);
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("lr-stall{c}"))
            .spawn(move || {
                let ready = crate::sys::pin_thread(&[c])
                    .and_then(|()| crate::sys::set_fifo_self(PRIORITY))
                    .is_ok();
                let _ = tx.send(ready);
                if ready {
                    watch(&watched);
                }
            });
        // A CPU whose watcher could not be pinned or made real-time is
        // left out: its counts would be wrong, not missing.
        if spawned.is_ok() && rx.recv().unwrap_or(false) {
            cpus.push(cell);
        }
    }
    if cpus.is_empty() {
        return None;
    }
    Some(Watch { cpus, _lock: lock })
}

fn watch(cell: &Cpu) -> ! {
    let mut next = crate::sys::monotonic_ns() + PERIOD_NS;
    loop {
        if !ACTIVE.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_nanos(IDLE_NS));
            next = crate::sys::monotonic_ns() + PERIOD_NS;
            continue;
        }
        crate::sys::sleep_until_monotonic_ns(next);
        let now = crate::sys::monotonic_ns();
        let late = now.saturating_sub(next);
        if late >= THRESHOLD_NS {
            cell.late_ns.fetch_add(late, Ordering::Relaxed);
            cell.stalls.fetch_add(1, Ordering::Relaxed);
        }
        next += PERIOD_NS;
        if next <= now {
            next = now + PERIOD_NS;
        }
    }
}

/// Each watched CPU's counters: (cpu, the time it was held, ns, as the
/// stalled wakes' lateness summed; stalls). The lateness is the part of a
/// stall that is certain: it began up to one period before the wake was
/// due, but counting that period for every stall would credit the host with
/// a millisecond per 0.3 ms hiccup and excuse the DUT's own loss. `None`
/// when this process does not watch (another one of the host does, or it
/// cannot).
pub fn counters() -> Option<Vec<(u32, u64, u64)>> {
    let w = WATCH.get()?.as_ref()?;
    Some(
        w.cpus
            .iter()
            .map(|c| {
                let stalls = c.stalls.load(Ordering::Relaxed);
                (c.cpu, c.late_ns.load(Ordering::Relaxed), stalls)
            })
            .collect(),
    )
}

/// The most time one test's CPUs were held between two readings, ms, summed
/// over the CPUs (stalls on different CPUs each cost frames, and a sum is
/// never below the union of overlapping ones). `None` when either reading
/// has no watch.
pub fn held_ms_between(
    before: &[crate::proto::CpuTicks],
    after: &[crate::proto::CpuTicks],
) -> Option<f64> {
    let mut sum = 0u64;
    let mut any = false;
    for a in after {
        let Some(held) = a.stalled_ns else { continue };
        let Some(b) = before
            .iter()
            .find(|b| b.cpu == a.cpu)
            .and_then(|b| b.stalled_ns)
        else {
            continue;
        };
        any = true;
        sum += held.saturating_sub(b);
    }
    any.then_some(sum as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(cpu: u32, stalled_ns: Option<u64>) -> crate::proto::CpuTicks {
        crate::proto::CpuTicks {
            cpu,
            stalled_ns,
            ..Default::default()
        }
    }

    #[test]
    fn held_time_is_the_growth_summed_over_cpus() {
        let before = [ticks(0, Some(1_000_000)), ticks(1, Some(0))];
        let after = [ticks(0, Some(3_500_000)), ticks(1, Some(1_500_000))];
        assert_eq!(held_ms_between(&before, &after), Some(4.0));
        // No watch on either side: nothing is known.
        let unwatched = [ticks(0, None), ticks(1, None)];
        assert_eq!(held_ms_between(&unwatched, &after), None);
        assert_eq!(held_ms_between(&before, &unwatched), None);
    }

    /// A real stall: a thread of a higher real-time priority, pinned to a
    /// watched CPU, spins for 20 ms; the watcher there cannot run and
    /// counts at least that long. Needs root (real-time priority).
    #[test]
    fn a_cpu_held_by_a_higher_priority_thread_is_a_stall() {
        if !crate::sys::is_root() {
            crate::model::stderr::errln!("skipped: real-time priority needs root");
            return;
        }
        set_active(true);
        // A watcher that was off sleeps IDLE_NS before it counts again.
        std::thread::sleep(std::time::Duration::from_nanos(IDLE_NS + 30_000_000));
        let Some(first) = counters() else {
            // Another process of this host holds the watch (a lab running
            // beside the unit tests): nothing to check here.
            crate::model::stderr::errln!("skipped: another process watches this host");
            return;
        };
        let cpu = first[0].0;
        let held_before = first[0].1;
        std::thread::spawn(move || {
            crate::sys::pin_thread(&[cpu as usize]).expect("pin");
            crate::sys::set_fifo_self(PRIORITY + 1).expect("fifo");
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_millis(20) {
                std::hint::spin_loop();
            }
        })
        .join()
        .expect("spinner");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let after = counters().expect("still watching");
        let held = after[0].1 - held_before;
        assert!(
            held >= 18_000_000,
            "CPU{cpu} was held 20 ms but the watch counted {held} ns"
        );
    }
}
