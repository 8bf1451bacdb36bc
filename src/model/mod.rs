//! The bottom layer of the main crate: what several features share and
//! none owns. Line-rate arithmetic ([`units`]), the process-wide stop flag
//! ([`signals`]), wall-clock formatting ([`clock`]), atomic file writes ([`files`]),
//! the lab's topology record ([`lab`]), the failed steps typed errors carry ([`error`]), one-way latency in hdrhistogram's layout ([`hdr`]), how a stream's flows vary ([`flows`]), records kept in a scratch file until
//! they are needed ([`spill`]), the grammar of pass/fail criteria
//! ([`criteria`]), the coordinates of sweep points ([`sweep`]) and stdout and stderr that a
//! closed pipe ends quietly ([`stdout`], [`stderr`]), and the
//! durations, sizes, CPU lists and hosts a user types ([`values`]). It imports nothing of the crate above it.

pub mod clock;
pub mod criteria;
pub mod error;
pub mod files;
pub mod flows;
pub mod hdr;
pub mod lab;
pub mod signals;
pub mod spill;
pub mod stderr;
pub mod stdout;
pub mod sweep;
pub mod units;
pub mod values;
