//! The error a VM step returns: what a caller can tell apart (a setting
//! that does not parse, a step that failed) with the words the user reads,
//! unchanged from when this layer returned `anyhow` errors.

use super::BadSetting;
use crate::model::error::{BoxError, Step};
use crate::netops::NetopsError;
use crate::topology::TopologyError;

/// Why preparing, booting or configuring a VM failed.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// A VM setting does not parse.
    #[error(transparent)]
    BadSetting(#[from] BadSetting),
    /// The step failed or was refused; the message says why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Netops(#[from] NetopsError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An error from a module this one builds on.
    #[error(transparent)]
    Other(BoxError),
}

pub type Result<T, E = VmError> = std::result::Result<T, E>;

/// `VmError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::vm::VmError::Failed(format!($($t)*))
    };
}

/// Returns `VmError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::vm::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
