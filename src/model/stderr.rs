//! Standard error where a closed pipe ends the messages, never the run:
//! `linerate search … 2>&1 | head -8` must still finish its trials, write
//! its results and exit as it would have. Rust ignores SIGPIPE, so a write
//! to a closed pipe returns EPIPE and `eprintln!` would panic ("failed
//! printing to stderr"), leaving results.json partial. Every message,
//! progress and log line goes through [`errln!`] or [`errprint!`] instead;
//! clippy.toml refuses `eprintln!` and `eprint!` so none slips back.
//!
//! Unlike stdout ([`super::stdout`]), a failing stderr has nowhere to be
//! reported: any error is swallowed, and a closed pipe is remembered so
//! later messages cost no system call.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stderr in one call; a closed or failing stderr is
/// ignored (and a closed one no longer written).
pub fn write(text: &str) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut err = io::stderr().lock();
    write_to(&mut err, text.as_bytes());
}

/// [`write`] on any writer (tests use a failing one). Returns whether the
/// text was written.
pub fn write_to(out: &mut dyn Write, bytes: &[u8]) -> bool {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) => {
            if e.kind() == io::ErrorKind::BrokenPipe {
                CLOSED.store(true, Ordering::Relaxed);
            }
            false
        }
    }
}

/// `text` and a newline on stderr, in one write so lines from several
/// threads do not interleave.
pub fn line(text: &str) {
    let mut s = String::with_capacity(text.len() + 1);
    s.push_str(text);
    s.push('\n');
    write(&s);
}

/// Whether stderr was found closed (a reader that went away).
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// `eprintln!` that never panics: a closed stderr ends the messages quietly.
macro_rules! errln {
    () => {
        $crate::model::stderr::write("\n")
    };
    ($($arg:tt)*) => {
        $crate::model::stderr::line(&format!($($arg)*))
    };
}
pub(crate) use errln;

/// `eprint!` that never panics.
macro_rules! errprint {
    ($($arg:tt)*) => {
        $crate::model::stderr::write(&format!($($arg)*))
    };
}
pub(crate) use errprint;

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stderr_is_remembered_never_a_panic() {
        let mut v = Vec::new();
        assert!(write_to(&mut v, b"ok\n"));
        assert_eq!(v, b"ok\n");
        assert!(!write_to(&mut Broken, b"lost\n"));
        assert!(closed());
        // Every later message is skipped without touching the stream.
        errln!("after the reader left: {}", 1);
        errprint!("and {}", 2);
    }
}
