//! The Ctrl-C/SIGTERM flag every long-running loop checks: the first signal
//! asks for a clean stop (agents stopped, ports restored, results kept
//! partial), the second ends the process at once. `--abort-on-fail` asks
//! for the same clean stop without a signal ([`abort`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

/// Set by SIGINT/SIGTERM (the signal handler stores to it directly, so no
/// thread has to poll for it: a poller every 20 ms was 50 wakeups a second
/// in every process, each able to preempt a sender on a busy core).
static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Whether Ctrl-C or SIGTERM came; long-running loops check it.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Set by `--abort-on-fail` when a criterion has clearly failed: the run
/// stops as on Ctrl-C, but is no signal (a later Ctrl-C is still the
/// first, and the run's status says aborted, not interrupted).
#[cfg(not(test))]
static ABORTED: AtomicBool = AtomicBool::new(false);

#[cfg(test)]
thread_local! {
    /// In unit tests the abort belongs to the thread that asked for it:
    /// the tests run in threads of one process, and one test's abort
    /// (`orchestrate/run/tests.rs`) must not stop the runs of the others.
    static ABORTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Asks every loop to stop cleanly, as the first Ctrl-C does
/// (`--abort-on-fail`).
pub fn abort() {
    #[cfg(not(test))]
    ABORTED.store(true, Ordering::Relaxed);
    #[cfg(test)]
    ABORTED.with(|a| a.set(true));
}

/// Whether [`abort`] was called.
pub fn aborted() -> bool {
    #[cfg(not(test))]
    return ABORTED.load(Ordering::Relaxed);
    #[cfg(test)]
    ABORTED.with(|a| a.get())
}

/// Takes back this thread's [`abort`], so a test leaves its thread as it
/// found it.
#[cfg(test)]
pub fn clear_abort() {
    ABORTED.with(|a| a.set(false));
}

/// Whether a loop should stop now: Ctrl-C, SIGTERM or an abort.
pub fn stop_requested() -> bool {
    interrupted() || aborted()
}

/// Installs the Ctrl-C/SIGTERM handlers: the first asks for a clean stop, the
/// second ends the process at once (agents and namespaces still go with it).
pub fn install_signal_handlers() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as it was before this
        // signal: set means this is the second one.
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&INTERRUPTED))?;
        signal_hook::flag::register(sig, Arc::clone(&INTERRUPTED))?;
    }
    Ok(())
}
