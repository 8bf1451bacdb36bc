//! The application below the command line: runs tests, ramps, searches,
//! the lab suite, sweeps and plans from a validated configuration
//! ([`config`]) and assembles the results document. The command layer
//! (`cli/`) turns flags and plan files into a [`config::Command`] and hands
//! it to [`app::execute`]; nothing here sees a clap type or a flag.
//!
//! Files, top down: `app` (one command → a topology → its tests) →
//! `suite` (the lab's standard suite), `plan_run` (a plan's hosts and
//! tests) → `loadtest` (every kind of test, the trial runners of ramps and
//! searches; `search_lines`: what a search prints and its searches'
//! configurations; after a search, `latency_at`: its load points' trials and
//! one-way latency, and the refusal of two clocks) → `run` (the results document, its directory, the final
//! table and exit status), `sweep` (a sweep point's tagging and list),
//! `abort` (`--abort-on-fail`: criteria held against a test's intervals
//! while it runs, used by `run`), `b2b` (back-to-back bursts: the burst
//! runner of `search --method back-to-back`, used by `loadtest`).
//! Beside them, commands that run no tests: `iperf3_serve` (stock iperf3
//! clients, each served test a run), `check` (a finished run held to
//! criteria), `summary` (`monitor` and `serve`, and their summary
//! document); `app::agent` runs `linerate agent`.
//!
//! The command layer depends on this layer, not on the features below it:
//! `config` also names the config types the features own and its configs
//! carry (a `LabSpec`, a `TcpTest`, an `Endpoint`…), and `values` the
//! features' value parsers, checks and defaults that flags use.

pub mod abort;
pub mod app;
pub mod b2b;
pub mod check;
pub mod config;
pub mod error;
pub mod iperf3_serve;
pub mod latency_at;
pub mod loadtest;
pub mod plan_run;
pub mod run;
pub mod search_lines;
pub mod suite;
pub mod summary;
pub mod sweep;
pub mod values;
