//! The error building the lab returns: what a caller can tell apart (a
//! guest kernel without bonding, a step that failed, an error of a layer
//! below) with the words the user reads, unchanged from when this layer
//! returned `anyhow` errors.

use crate::model::error::{BoxError, Step};
use crate::netops::NetopsError;
use crate::topology::TopologyError;
use crate::vm::VmError;

/// Why building, checking or tearing down the lab failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The DUT VM's kernel has no bonding driver for `--dut-bond`.
    #[error(transparent)]
    NoBonding(#[from] super::bond::NoBonding),
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
    Vm(#[from] VmError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An error from a module this one builds on.
    #[error(transparent)]
    Other(BoxError),
}

pub type Result<T, E = LabError> = std::result::Result<T, E>;

/// `LabError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::lab::LabError::Failed(format!($($t)*))
    };
}

/// Returns `LabError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::lab::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
