//! The value parsers, checks and defaults of the features below that the
//! command line's flags use: the command layer reaches a feature's
//! vocabulary through here (and its config types through [`super::config`]),
//! so it depends on the orchestration layer, not on every feature. Each
//! item is the feature's own; this module only names them in one place.

/// `--target` and the like: loopback and the benchmarking ranges, or what
/// `--allow-target` adds.
pub use crate::engine::check_destination;
/// `--frame-size` against the IP version and tags; a spec's mean size.
pub use crate::engine::frame::{average_frame, check_frames};
/// `--window` on the engines that take it.
pub use crate::engine::socket::window_engines;
/// `--header`, `--ramp-connections` and the request and ramp they make.
pub use crate::http::request::{
    parse_header, ramp_duration, ramp_peak, ramp_stages, request, RampStages,
};
/// The HTTP server's default `--max-per-client`.
pub use crate::http::server::DEFAULT_MAX_PER_CLIENT;
/// The iperf3 server's default `--max-test-time` and its `--max-clients` cap.
pub use crate::iperf3::server::DEFAULT_MAX_TIME_S;
pub use crate::iperf3::slots::MAX_CLIENTS;
/// The lab's default cores, `--queues` limits, `--stick-vlans` default,
/// `--dut-delay`/`--dut-jitter` times, the stick DUT's engines, the NAT
/// DUT's source address.
pub use crate::lab::cores::default_cpus;
pub use crate::lab::netem::parse_time;
/// The port flags (`--gen-port`, `--sink-port`…) that `PortsSpec::from_flags` reads.
pub use crate::lab::ports::PortFlags;
pub use crate::lab::stick::socket_reason;
pub use crate::lab::{nat_source, queues_error, DEFAULT_STICK_VLANS};
/// `monitor --responder` and `--icmp` targets.
pub use crate::latency::monitor::{check_probe_target, parse_responder};
/// `--ssh-option KEY=VALUE`.
pub use crate::topology::ssh::option_pair;
