//! The error of reading runs and writing reports: what a caller can tell
//! apart (a run that cannot be read, a step that failed) with the words
//! the user reads.

use crate::model::error::{ModelError, Step};

/// Why a report could not be read, built or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The runs or the flags cannot make this report; the message says
    /// why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Model(#[from] ModelError),
}

pub type Result<T, E = ReportError> = std::result::Result<T, E>;

/// `ReportError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::report::error::ReportError::Failed(format!($($t)*))
    };
}

/// Returns `ReportError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::report::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
