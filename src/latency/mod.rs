//! Latency probes: the wire format ([`probe`]), the responder that answers
//! only sessions the controller opened ([`responder`]), the isochronous
//! client ([`client`]), the statistics the controller computes from the
//! client's samples ([`stats`]), and the long-running monitor with its
//! Prometheus metrics ([`monitor`], [`metrics`]); ICMP echo for hosts
//! without a responder lives in [`icmp`] over the syscalls of [`ffi`].

pub mod client;
pub mod icmp;
pub mod metrics;
pub mod monitor;
pub mod probe;
pub mod responder;
pub mod stats;
