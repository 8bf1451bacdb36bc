//! The error of running one test: what a caller can tell apart (a test
//! that cannot run as asked, a step that failed, an agent that was lost)
//! with the words the user reads.

use crate::engine::EngineError;
use crate::model::error::Step;
use crate::topology::TopologyError;

/// Why a test could not be set up, run or collected.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The test cannot run as asked, or an end failed it; the message says
    /// why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

pub type Result<T, E = RunnerError> = std::result::Result<T, E>;

/// `RunnerError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::runner::error::RunnerError::Failed(format!($($t)*))
    };
}

/// Returns `RunnerError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::runner::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
