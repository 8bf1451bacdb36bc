//! What this host's kernel says, read where an agent runs: interface, UDP
//! and CPU counters from procfs/sysfs ([`kernel`]), link state watched while
//! jobs run ([`links`]), the cycle counters behind per-packet efficiency
//! figures ([`efficiency`]) and how long each CPU was kept from running
//! ([`stalls`]). Below the engines, which report these figures, and above
//! `model` and `sys`.

pub mod bond;
pub mod efficiency;
pub mod kernel;
pub mod links;
pub mod stalls;
