//! linerate: a network loadtest lab in one binary. See DESIGN.md for the
//! architecture: controller → agents (this same binary) → data planes.
//!
//! The library exists so integration tests and fuzz targets can reach the
//! protocol, engines and results types; the binary (`main.rs`) is thin.
#![forbid(unsafe_code)]

pub mod agent;
pub mod app;
pub mod cli;
pub mod cli_http;
pub mod config;
pub mod engine;
pub mod host;
pub mod http;
pub mod lab;
pub mod latency;
pub mod loadtest;
pub mod model;
pub mod netops;
pub mod plan;
pub mod plan_config;
pub mod plan_run;
pub mod report;
pub mod results;
pub mod run;
pub mod runner;
pub mod search;
pub mod suite;
pub mod topology;

/// The control protocol and wire formats live in the `linerate-proto` crate.
pub use linerate_proto as proto;
/// Every unsafe line lives in the `linerate-sys` crate; it keeps its old
/// path here so callers name it as one of the crate's layers.
pub use linerate_sys as sys;
