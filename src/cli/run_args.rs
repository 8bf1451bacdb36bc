//! `linerate run`'s flags. The plan file they name becomes the validated
//! configuration in `plan_config`, which parses each test's flags through
//! the command enum and so sits above it (this file sits below).

use super::common::Common;
use clap::Args;
use std::path::PathBuf;

/// Flags of `linerate run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The plan file (TOML): hosts, and the tests between them.
    pub plan: PathBuf,
    /// Trust the plan as code: let its [ssh] table set options that run local commands
    /// (ProxyCommand, LocalCommand, KnownHostsCommand, ...) or name an ssh config that
    /// others can write or that sets them. Only for plans you wrote or checked.
    #[arg(long)]
    pub trust_plan: bool,
    /// Stop at the first sweep point that fails (default: record it failed and run the others).
    #[arg(long)]
    pub fail_fast: bool,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}
