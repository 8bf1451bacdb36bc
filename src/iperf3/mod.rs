//! iperf3 interoperability (issue 20): linerate as the client of a stock
//! iperf3 server, and as a server stock `iperf3 -c` clients test against.
//! The wire format is `proto::iperf3`; this module owns the sockets.
//!
//! - `control`: the control connection (state bytes, JSON, deadlines).
//! - `data`: the data streams, measured like linerate's own (TCP through
//!   `engine::tcp`, with TCP_INFO; UDP with iperf3's datagram header).
//! - `client`, `server`: the two conversations; `job`: the client as an
//!   agent's job, so it runs on any endpoint; `server_job`: the server as
//!   an agent's job, for a plan's `iperf3_server` host.
//! - `front`: the server's front door (connections routed by cookie, UDP
//!   hellos by address, slots); `slots`: its bookkeeping, without I/O.
//!
//! It sits on the engines and knows nothing of results or commands: it
//! hands back what this end measured and what the far end reported.

pub mod client;
mod control;
pub mod data;
mod front;
pub mod job;
pub mod server;
pub mod server_job;
pub mod slots;
mod udp;

pub use data::{Measured, StreamTotals};

use crate::proto::iperf3::FarEnd;

/// What can end an iperf3 test, by what the user can do about it.
#[derive(Debug, thiserror::Error)]
pub enum Iperf3Error {
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Rejected(String),
    #[error("{0}")]
    AuthRequired(String),
    /// The far end stopped answering; what was measured is kept.
    #[error("{message}")]
    Lost {
        message: String,
        partial: Option<Box<Outcome>>,
    },
    #[error("{0}")]
    Protocol(String),
    #[error("{0}")]
    Io(String),
}

impl Iperf3Error {
    /// An I/O error on the control connection, with what was being done.
    pub fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Iperf3Error {
        move |e| Iperf3Error::Io(format!("{what}: {e}"))
    }
}

/// One test as this end saw it, and the far end's own figures.
#[derive(Debug)]
pub struct Outcome {
    pub params: crate::proto::iperf3::TestParams,
    pub local: Measured,
    pub far: Option<FarEnd>,
}
