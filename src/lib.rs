//! linerate: a network loadtest lab in one binary. ARCHITECTURE.md (beside
//! Cargo.toml) describes the layers: controller → agents (this same binary)
//! → data planes, and which module may use which.
//!
//! The library exists so integration tests and the binary (`main.rs`, thin)
//! reach the commands, engines and results types. The control protocol and
//! wire formats are the `linerate-proto` crate, every unsafe line is the
//! `linerate-sys` crate, host inspection is `linerate-doctor`.
#![forbid(unsafe_code)]

pub mod agent;
pub mod cli;
pub mod engine;
pub mod host;
pub mod http;
pub mod iperf3;
pub mod lab;
pub mod latency;
pub mod model;
pub mod netops;
pub mod orchestrate;
pub mod plan;
pub mod report;
pub mod results;
pub mod runner;
pub mod search;
pub mod topology;
pub mod vm;

/// The control protocol and wire formats live in the `linerate-proto` crate.
pub use linerate_proto as proto;
/// Every unsafe line lives in the `linerate-sys` crate; it keeps its old
/// path here so callers name it as one of the crate's layers.
pub use linerate_sys as sys;

/// The layers of this crate, bottom first: a module may use its own layer's
/// modules and those of lower layers, never a higher one, and no files may
/// import each other in a circle. `tests/layers.rs` reads `src/` and holds
/// the code to this table; a new top-level module must be placed here.
/// `sys` and `proto` are the crates below all of them.
pub const LAYERS: &[&[&str]] = &[
    &["sys", "proto"],
    // Shared types and arithmetic no feature owns.
    &["model"],
    // Reading this host's kernel counters.
    &["host"],
    // Configuring interfaces, addresses and routes inside a namespace.
    &["netops"],
    // Hosts and transports: local, netns, ssh; spawning agents; VMs that host agents.
    &["topology", "vm"],
    // Data planes: UDP/TCP engines, then HTTP and latency on top of them.
    &["engine"],
    &["http", "iperf3", "latency"],
    // The agent process that runs jobs on engines.
    &["agent"],
    // The lab topology linerate builds itself.
    &["lab"],
    // Ramps and searches: pure logic over a trial interface.
    &["search"],
    // The results schema and the verdicts stored in it.
    &["results"],
    // Driving agents through tests and recording results.
    &["runner"],
    // Terminal, HTML, CSV and exports.
    &["report"],
    // Running commands from a validated configuration: tests, ramps,
    // searches, the lab suite, sweeps and plans; the results document.
    &["orchestrate"],
    // Plan files.
    &["plan"],
    // Commands: flags to validated configs, and their runs.
    &["cli"],
];
