//! linerate's control protocol and every wire format, as pure code: no
//! sockets, no processes, no clock of its own (callers pass `Instant`s in),
//! and no dependency on the linerate crate. A fuzzer or a second
//! implementation of an agent can use it alone.
//!
//! - [`control`]: the length-prefixed JSON messages between controller and
//!   agents, their bounded decoder and the liveness rules.
//! - [`spec`]: what a test asks for (frames, rates, flows, engines).
//! - [`dscp`]: DSCP code points, by number or name, and their TOS byte.
//! - [`sample`]: what agents measure and report (intervals, summaries,
//!   kernel counters).
//! - [`http`], [`lab`]: the HTTP jobs and summaries, lab port records.
//! - [`iperf3`]: the iperf3 3.x control protocol and UDP header (interop).
//! - [`frame`]: the linerate header in every test frame.
//! - [`probe`]: the latency probe format.
#![forbid(unsafe_code)]

pub mod control;
pub mod dscp;
pub mod frame;
pub mod http;
pub mod iperf3;
pub mod lab;
pub mod probe;
pub mod sample;
pub mod spec;
pub mod vlan;

pub use control::*;
pub use dscp::Dscp;
pub use sample::*;
pub use spec::*;
pub use vlan::Vlan;
