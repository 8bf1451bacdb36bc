//! The error of running a command below the command line: a run that
//! could not start, a test, ramp, search or sweep that failed, a plan's
//! host that did not come up, with the words the user reads, unchanged
//! from when this layer returned `anyhow` errors (the command layer prints
//! them with `model::error::chain`, as `{:#}` printed those).

use crate::engine::EngineError;
use crate::lab::LabError;
use crate::model::error::{ModelError, Step};
use crate::orchestrate::config::UnknownProfile;
use crate::report::error::ReportError;
use crate::results::ResultsError;
use crate::runner::error::RunnerError;
use crate::search::{SearchError, TrialError};
use crate::topology::TopologyError;
use crate::vm::VmError;

/// Why a command could not run, or its run failed.
#[derive(Debug, thiserror::Error)]
pub enum OrchestrateError {
    /// The command cannot run as asked, or a step of it failed; the message
    /// says why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Lab(#[from] LabError),
    #[error(transparent)]
    Vm(#[from] VmError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    Trial(#[from] TrialError),
    #[error(transparent)]
    Profile(#[from] UnknownProfile),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

pub type Result<T, E = OrchestrateError> = std::result::Result<T, E>;

/// `OrchestrateError::Failed` from a format string.
macro_rules! err {
    ($($t:tt)*) => {
        $crate::orchestrate::error::OrchestrateError::Failed(format!($($t)*))
    };
}

/// Returns `OrchestrateError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::orchestrate::error::err!($($t)*).into())
    };
}

pub(crate) use {err, fail};
