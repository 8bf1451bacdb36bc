//! Errors `doctor` returns. Missing or odd files are never errors (the check
//! is skipped and says why); these are the cases where doctor cannot do what
//! it was asked at all. Each message says what, why and what to do.

use std::io;
use std::path::PathBuf;

/// Why `inspect`, `capture` or argument parsing failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The root directory to inspect does not exist or is not a directory.
    #[error(
        "cannot inspect {}: {source}; pass --root a directory holding sys/ and proc/ \
         (the live host is /, a capture must be extracted first)", root.display()
    )]
    Root {
        root: PathBuf,
        #[source]
        source: io::Error,
    },

    /// An interface named with `--nic` is not under `sys/class/net`.
    #[error(
        "no network interface `{name}` under {}/sys/class/net; interfaces there: {}; \
         check the name with `ip link`",
        root.display(),
        if available.is_empty() { "none".to_string() } else { available.join(", ") }
    )]
    UnknownNic {
        name: String,
        root: PathBuf,
        available: Vec<String>,
    },

    /// A command-line value could not be parsed (exit status 2).
    #[error("invalid {flag} `{value}`: {reason}; {hint}")]
    InvalidArgument {
        /// The flag, e.g. `--cpus`.
        flag: &'static str,
        value: String,
        reason: String,
        /// An example of a valid value.
        hint: &'static str,
    },

    /// Writing the capture archive failed; no partial file is left at the
    /// destination because it is written to a temporary file first.
    #[error("writing capture {}: {source}; check the directory exists and is writable", path.display())]
    CaptureWrite {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}
