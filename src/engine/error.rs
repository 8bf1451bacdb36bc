//! The error every engine hands back when a job cannot start or fails as a
//! whole. Data-plane errors per packet are counted, never returned; this is
//! for set-up and for the job's end. Callers branch on the kind: `auto`
//! tries the next engine on [`EngineError::Unavailable`], the command layer
//! reports [`EngineError::Invalid`] and [`EngineError::Refused`] as usage
//! errors, the agent sends any of them to the controller as text.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The job asks for what no engine can do (a frame too small for the
    /// linerate header, flows of mixed IP versions, no flows).
    #[error("{0}")]
    Invalid(String),
    /// The destination is outside loopback and the benchmarking ranges and
    /// the user did not allow it.
    #[error("{0}")]
    Refused(String),
    /// This engine cannot run here (no route or neighbour, not root, the
    /// driver or kernel refuses); the message says why and what to do.
    #[error("{0}")]
    Unavailable(String),
    /// The job started but could not go on (streams that never connected,
    /// a peer that does not speak linerate, a worker thread that died).
    #[error("{0}")]
    Failed(String),
    /// A system call failed while setting up or running the job.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

impl EngineError {
    /// Wraps an I/O error with what was being done, for `map_err`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> EngineError {
        let what = what.into();
        move |source| EngineError::Io { what, source }
    }
}
