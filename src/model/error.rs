//! What the typed errors below the command layer share: a step that failed
//! ("reading /sys/…") with the error that made it fail, and the chain of
//! messages a user reads ("reading /sys/…: No such file or directory").
//!
//! Each module keeps its own error enum (`NetopsError`, `VmError`…) with a
//! transparent [`Step`] variant, so `.context("doing X")?` reads as it does
//! in the command layer and prints the same words: `Step` shows only its
//! own message and returns the cause from `source()`, so a chain printed
//! with `{:#}` names each cause once, whether the printer walks `source()`
//! (the command layer's error type) or asks the step for its alternate form.
//!
//! [`ModelError`] is this layer's own: a value that does not parse, a file
//! step that failed.

use std::error::Error;
use std::fmt;

/// Why a value did not parse or a file step failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A value (a flag's, a plan's) does not parse or is out of range; the
    /// message says which and what to give instead.
    #[error("{0}")]
    Invalid(String),
    /// The step failed or was refused; the message says why and what to do.
    #[error("{0}")]
    Failed(String),
    /// A step failed because of the error it carries.
    #[error(transparent)]
    Step(#[from] Step),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `ModelError::Invalid` from a format string.
macro_rules! invalid {
    ($($t:tt)*) => {
        $crate::model::error::ModelError::Invalid(format!($($t)*))
    };
}

/// Returns `ModelError::Invalid` from a format string.
macro_rules! bad {
    ($($t:tt)*) => {
        return Err($crate::model::error::invalid!($($t)*).into())
    };
}

/// Returns `ModelError::Failed` from a format string.
macro_rules! fail {
    ($($t:tt)*) => {
        return Err($crate::model::error::ModelError::Failed(format!($($t)*)).into())
    };
}

pub(crate) use {bad, fail, invalid};

/// Any error, boxed: the cause of a [`Step`].
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// A step that failed: what was being done, and why it failed (when the
/// failure came from an error rather than a missing value).
#[derive(Debug)]
pub struct Step {
    what: String,
    source: Option<BoxError>,
}

impl Step {
    /// A step that failed for a reason given by `source`.
    pub fn new(what: impl fmt::Display, source: impl Into<BoxError>) -> Step {
        Step {
            what: what.to_string(),
            source: Some(source.into()),
        }
    }

    /// A step whose message says all there is (a value that was missing).
    pub fn msg(what: impl fmt::Display) -> Step {
        Step {
            what: what.to_string(),
            source: None,
        }
    }
}

/// `{}` is the step alone; `{:#}` adds its causes, as the command layer's do,
/// so code that prints an error with `{:#}` shows the same chain whether
/// the error is typed or not (a module's enum forwards its formatter to a
/// `Step` through `#[error(transparent)]`).
impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.write_str(&chain(self))
        } else {
            f.write_str(&self.what)
        }
    }
}

impl Error for Step {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

/// `.context("doing X")` on a `Result` or an `Option`: the failure becomes
/// a [`Step`] that says what was being done.
pub trait Context<T> {
    fn context(self, what: impl fmt::Display) -> Result<T, Step>;
    fn with_context<C: fmt::Display>(self, what: impl FnOnce() -> C) -> Result<T, Step>;
}

impl<T, E: Into<BoxError>> Context<T> for Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T, Step> {
        self.map_err(|e| Step::new(what, e))
    }

    fn with_context<C: fmt::Display>(self, what: impl FnOnce() -> C) -> Result<T, Step> {
        self.map_err(|e| Step::new(what(), e))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl fmt::Display) -> Result<T, Step> {
        self.ok_or_else(|| Step::msg(what))
    }

    fn with_context<C: fmt::Display>(self, what: impl FnOnce() -> C) -> Result<T, Step> {
        self.ok_or_else(|| Step::msg(what()))
    }
}

/// An error and its causes as one line, "what: why: why", the way the
/// command layer prints errors (`{:#}`): a typed error turned into the
/// words a user or a controller reads.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_names_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let inner: Result<(), _> = Err(io);
        let e = inner
            .context("reading x")
            .context("setting up")
            .unwrap_err();
        assert_eq!(chain(&e), "setting up: reading x: gone");
        assert_eq!(e.to_string(), "setting up");
        let none: Option<u8> = None;
        assert_eq!(chain(&none.context("no value").unwrap_err()), "no value");
        assert_eq!(format!("{e:#}"), "setting up: reading x: gone");
        #[derive(Debug, thiserror::Error)]
        enum Typed {
            #[error(transparent)]
            Step(#[from] Step),
        }
        let typed = Typed::from(e);
        assert_eq!(format!("{typed:#}"), "setting up: reading x: gone");
        assert_eq!(format!("{typed}"), "setting up");
    }
}
