//! How a UDP stream's flows vary: a test's setting (flags, plans, the lab
//! suite's profiles), what the runner builds its frames from, and a field
//! of the results schema (`results` re-exports it there).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowMode {
    /// One flow: fixed addresses and ports.
    One,
    /// Source address varies per flow.
    Var1,
    /// Source and destination addresses vary per flow.
    Var2,
    /// Source port varies per flow.
    Ports,
}
