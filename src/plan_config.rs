//! TEMPORARY placeholder.
use crate::config::{Command, RunOpts};
pub fn load(_p: &std::path::Path, _o: RunOpts) -> anyhow::Result<Command> {
    anyhow::bail!("plans are not wired yet")
}
