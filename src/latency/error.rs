//! The error of the latency monitor's set-up: what a caller can tell apart
//! (a flag that does not parse, a responder refused, a step that failed)
//! with the words the user reads.

use crate::engine::EngineError;
use crate::model::error::Step;
use crate::topology::TopologyError;

/// Why the monitor could not start, or what ended it early.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// A value or a target is refused, or an end failed; the message says
    /// why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = LatencyError> = std::result::Result<T, E>;

/// `LatencyError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::latency::error::LatencyError::Failed(format!($($t)*))
    };
}

/// Returns `LatencyError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::latency::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
