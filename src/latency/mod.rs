//! Latency probes (the wire format is `proto::probe`): the responder that answers
//! only sessions the controller opened ([`responder`]), the isochronous
//! client ([`client`]), the statistics the controller computes from the
//! client's samples ([`stats`]), and the long-running monitor with its
//! Prometheus metrics ([`monitor`], [`metrics`]); ICMP echo for hosts
//! without a responder lives in [`icmp`] over the ICMP sockets of linerate-sys.

pub mod client;
pub mod error;
pub mod icmp;
pub mod metrics;
pub mod monitor;
pub mod responder;
pub mod stats;

/// A random 64-bit session token from the OS (never 0).
pub fn new_token() -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(u64::from_ne_bytes(b).max(1))
}
