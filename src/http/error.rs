//! The error of the HTTP data plane's set-up and connections. Per-request
//! failures inside a running test are counted (status classes, connection
//! errors), not returned; this is for what ends a connection or a job.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A system call failed; the message says what was being done.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// TLS could not be set up or failed: certificates, the handshake, kTLS.
    #[error("{0}")]
    Tls(String),
    /// The peer broke HTTP or went quiet: closed mid-response, no response,
    /// a stalled body.
    #[error("{0}")]
    Protocol(String),
    /// The job or the server cannot run as asked (a path without `/`, a
    /// `--root` that is no directory).
    #[error("{0}")]
    Config(String),
}

impl HttpError {
    /// Wraps an I/O error with what was being done, for `map_err`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> HttpError {
        let what = what.into();
        move |source| HttpError::Io { what, source }
    }
}
