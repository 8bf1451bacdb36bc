//! The error every network configuration step returns: what a caller can
//! tell apart (a missing tool, a step that failed) with the words the user
//! reads, unchanged from when these steps returned `anyhow` errors.

use crate::model::error::{BoxError, Step};

/// Why a network configuration step failed.
#[derive(Debug, thiserror::Error)]
pub enum NetopsError {
    /// A tool the step runs is not installed here.
    #[error("`{tool}` is not installed; it is needed to configure the lab. Install it with: apt-get install {package}")]
    ToolMissing { tool: String, package: String },
    /// The step failed or was refused; the message says why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An error from a module this one builds on.
    #[error(transparent)]
    Other(BoxError),
}

pub type Result<T, E = NetopsError> = std::result::Result<T, E>;

/// `NetopsError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::netops::NetopsError::Failed(format!($($t)*))
    };
}

/// Returns `NetopsError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::netops::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
