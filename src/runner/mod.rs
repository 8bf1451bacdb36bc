//! Runs one test between agents: starts receivers, snapshots kernel counters,
//! starts senders (together, at a start time agreed with every agent),
//! gathers interval reports, stops, snapshots again and assembles a
//! [`TestResult`] with cross-checks.
//!
//! The same code serves the lab, ad-hoc tests between named endpoints and
//! plans with many generators: a test is a set of [`Leg`]s (one sender job,
//! one receiver job), one per generator, instance and direction.
//!
//! Submodules: `setup` (ends, test specs, legs), `jobs` (starting,
//! collecting and stopping jobs), `intervals` (interval samples kept in a
//! scratch file, `model::spill`, until the result is assembled), `target` (the target sanity check), `udp`,
//! `tcp`, `http` and `latency` (the test bodies), `record` (counters, CPU and aggregates), `dut` (the DUT's
//! CPU time per packet, per interval), `kind` (the one interface of every
//! single-result test kind, [`TestKind`], and its driver [`run`]),
//! `sequence` (the phases the TCP and HTTP bodies share).

mod dut;
pub mod error;
#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
pub(crate) mod harness_tests;
mod http;
mod intervals;
pub mod iperf3;
mod iperf3_served;
mod jobs;
mod kind;
#[cfg(test)]
mod kind_tests;
pub mod latency;
mod record;
mod sequence;
mod setup;
pub mod slices;
mod target;
mod tcp;
mod udp;

pub use http::{HttpServerSide, HttpTest, HttpUrl};
pub use iperf3::Iperf3Test;
pub use iperf3_served::run_iperf3_served;
pub use kind::{run, TestKind};
pub use latency::{LatencyTest, Load, ProbeOpts};
pub use setup::{
    apply_line_rate, build_flows, fail_if_nothing_sent, Ends, OnProgress, Progress, Side, TcpTest,
    UdpTest,
};
pub use target::{check_target, client_address, source_address};
pub use udp::fail_if_nothing_arrived;
