//! The Ctrl-C/SIGTERM flag every long-running loop checks: the first signal
//! asks for a clean stop (agents stopped, ports restored, results kept
//! partial), the second ends the process at once.

use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Set by SIGINT/SIGTERM; long-running loops check it.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Installs the Ctrl-C/SIGTERM handlers: the first asks for a clean stop, the
/// second ends the process at once (agents and namespaces still go with it).
pub fn install_signal_handlers() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(flag))?;
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    let flag = Arc::clone(flag);
    std::thread::spawn(move || loop {
        if flag.load(Ordering::Relaxed) {
            INTERRUPTED.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    Ok(())
}
