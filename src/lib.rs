//! linerate: a network loadtest lab in one binary. See DESIGN.md for the
//! architecture: controller → agents (this same binary) → data planes.
//!
//! The library exists so integration tests and fuzz targets can reach the
//! protocol, engines and results types; the binary (`main.rs`) is thin.
#![forbid(unsafe_code)]

pub mod agent;
pub mod bottleneck;
pub mod cli;
pub mod efficiency;
pub mod engine;
pub mod http;
pub mod kernel;
pub mod lab;
pub mod latency;
pub mod netops;
pub mod plan;
pub mod proto;
pub mod report;
pub mod results;
pub mod runner;
pub mod search;
pub mod signals;
pub mod topology;
pub mod units;

/// Every unsafe line lives in the `linerate-sys` crate; it keeps its old
/// path here so callers name it as one of the crate's layers.
pub use linerate_sys as sys;
