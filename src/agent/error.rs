//! The error of an agent's set-up and of the jobs it opens and runs: what
//! a caller can tell apart (a job refused, a step that failed) with the
//! words the controller receives in an `Error` message.

use crate::iperf3::Iperf3Error;
use crate::model::error::Step;
use crate::netops::NetopsError;
use std::fmt;

/// Why the agent could not start, or a job could not open or run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The job or the request was refused or failed; the message says why
    /// and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Netops(#[from] NetopsError),
    #[error(transparent)]
    Iperf3(#[from] Iperf3Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = AgentError> = std::result::Result<T, E>;

/// An error carried by its message alone (an engine's or a job's, as the
/// controller reads it), for `map_err`.
pub fn msg(e: impl fmt::Display) -> AgentError {
    AgentError::Failed(e.to_string())
}

/// `AgentError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::agent::error::AgentError::Failed(format!($($t)*))
    };
}

/// Returns `AgentError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::agent::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
