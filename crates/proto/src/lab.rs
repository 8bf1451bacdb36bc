//! The lab's records that cross the control channel: a physical port as it
//! was before the lab took it (and is again after).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A physical port moved into the lab, as it was before (and is again after).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct LabPort {
    pub name: String,
    pub mac: String,
    pub previous_mtu: u32,
    pub previous_up: bool,
    pub previous_addresses: Vec<String>,
    pub previous_alias: Option<String>,
    /// Bridge or bond it belonged to (only with --force-port).
    pub previous_master: Option<String>,
    /// Link kind (`veth` for the test stand-ins), absent for plain NICs.
    pub kind: Option<String>,
}
