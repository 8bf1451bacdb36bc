//! Standard output where a closed pipe is the reader's choice, not a
//! failure: `linerate tcp … | head -1` or `| true` must end quietly with
//! the results already written, as other Unix tools do (ripgrep's rule).
//! Rust ignores SIGPIPE, so a write to a closed pipe returns EPIPE and
//! `println!` would panic ("failed printing to stdout"); everything that
//! prints on stdout goes through here instead.

use crate::model::stderr::errln;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout and flushes it. A closed stdout (EPIPE) is
/// remembered and every later write is skipped; other errors are returned.
pub fn write(text: &str) -> io::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    write_to(&mut out, text.as_bytes())
}

/// [`write`] on any writer (tests use a pipe or a failing writer).
pub fn write_to(out: &mut dyn Write, bytes: &[u8]) -> io::Result<()> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => r,
    }
}

/// Prints `text` on stdout; an error other than a closed pipe (a full
/// disk behind a redirect) is reported once on stderr, never a panic.
pub fn print(text: &str) {
    if let Err(e) = write(text) {
        CLOSED.store(true, Ordering::Relaxed);
        errln!("warning: could not write to stdout: {e}; further output to stdout is skipped");
    }
}

/// [`print`] with a newline.
pub fn println(text: &str) {
    print(&format!("{text}\n"));
}

/// `println!` through [`println`]: a closed stdout ends output quietly.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::model::stdout::println(&format!($($arg)*))
    };
}
pub(crate) use outln;

/// Whether stdout was found closed (or failing) and is no longer written.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

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

    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from_raw_os_error(28)) // ENOSPC
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn broken_pipe_is_quiet_other_errors_are_not() {
        assert!(write_to(&mut Broken, b"table\n").is_ok());
        assert!(closed());
        assert!(write_to(&mut Full, b"table\n").is_err());
        let mut v = Vec::new();
        write_to(&mut v, b"ok\n").unwrap();
        assert_eq!(v, b"ok\n");
    }
}

/// Text from results files, plans or peers made safe for a terminal: control
/// characters (but line feed and tab), DEL and the C1 range are shown as
/// `\u{..}` escapes, so a name cannot retitle the terminal or move its
/// cursor.
pub fn printable(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        let u = c as u32;
        if (u < 0x20 && c != '\n' && c != '\t') || (0x7f..0xa0).contains(&u) {
            o.push_str(&format!("\\u{{{u:x}}}"));
        } else {
            o.push(c);
        }
    }
    o
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn escapes_reach_the_terminal_escaped() {
        assert_eq!(
            super::printable("a\x1b]0;pwned\x07b\n\tc\u{9b}"),
            "a\\u{1b}]0;pwned\\u{7}b\n\tc\\u{9b}"
        );
    }
}
