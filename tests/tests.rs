//! Integration tests: they drive the `linerate` binary against real network
//! namespaces (root needed; CI runs as root) and the agent over its stdio
//! control channel. One binary, a module per area (ripgrep's layout).

// Test helpers fail loudly by design.
#![allow(clippy::unwrap_used)]
// The harness captures the tests' own stderr: eprintln! cannot meet a
// closed pipe here (the binary's messages go through errln!).
#![allow(clippy::disallowed_macros)]

mod util;

mod abort;
mod adhoc;
mod back_to_back;
mod bottleneck;
mod cli_habits;
mod criteria;
mod dscp;
mod efficiency_steps;
mod faults;
mod first_hour;
mod flags;
mod fuzz_replay;
mod hardening;
mod http;
mod http_chunked;
mod http_loops;
mod http_methods;
mod http_requests;
mod http_serve;
mod intervals;
mod iperf3;
mod iperf3_clients;
mod iperf3_plan;
mod issue38;
mod lab;
mod lab_queues;
mod latency;
mod latency_at;
mod layers;
mod loadtest;
mod locks;
mod multihost;
mod pivot;
mod ports;
mod protocol;
mod readme;
mod report;
mod search_limits;
mod security;
mod signals;
mod soak;
mod ssh;
mod sshd;
mod stick;
mod sweep;
mod threads;
mod txengine;
mod vlan;
mod vm;
mod vm_features;
mod vm_kernels;
mod xdplive;
mod xdprx;
