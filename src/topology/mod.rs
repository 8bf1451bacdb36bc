//! Hosts and transports: how the controller reaches the machines its agents
//! run on. Today that is ssh (the system OpenSSH client); the local lab still
//! spawns its agents in `controller` and will move here.
//!
//! This module starts and stops connections and decides which binary runs on
//! a host; it never speaks the control protocol itself and never touches the
//! data plane.

pub mod ssh;
