//! The error starting and speaking to agents returns: what a caller can
//! tell apart (an agent lost mid-run, a step that failed) with the words
//! the user reads, unchanged from when this layer returned `anyhow` errors.

use crate::model::error::{BoxError, Step};
use crate::netops::NetopsError;

/// Why starting, reaching or hearing from an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// An agent was lost mid-run; the run ends partial (exit 3).
    #[error(transparent)]
    AgentLost(#[from] AgentLost),
    /// The step failed or was refused; the message says why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Netops(#[from] NetopsError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An error from a module this one builds on.
    #[error(transparent)]
    Other(BoxError),
}

pub type Result<T, E = TopologyError> = std::result::Result<T, E>;

/// `TopologyError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::topology::TopologyError::Failed(format!($($t)*))
    };
}

/// Returns `TopologyError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::topology::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};

/// An agent lost mid-run: its control channel closed or it went silent.
/// Tests that used it end with this error; the run ends partial.
#[derive(Debug, Clone)]
pub struct AgentLost {
    pub agent: usize,
    pub message: String,
}

impl std::fmt::Display for AgentLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AgentLost {}
