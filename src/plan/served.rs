//! `iperf3_server` on a plan host: linerate's own iperf3 server runs
//! there (through the host's agent) while a test is sent to it, so many
//! generators test against one server at once (seed 004: twelve).
//!
//! ```toml
//! [hosts.srv]
//! netns = "srv"
//! address = "198.18.40.1"
//! iperf3_server = { max_clients = 12 }   # or iperf3_server = true
//! ```

use super::value::{span, Src, Value};
use super::{HostKind, PlanError};
use crate::iperf3::slots::MAX_CLIENTS;
use crate::proto::iperf3::{DEFAULT_PORT, MAX_TIME_S};
use toml::de::{DeTable, DeValue};

/// The keys of an `iperf3_server` table: `linerate serve --iperf3`'s
/// flags of the same names.
const SERVER_KEYS: &[&str] = &["port", "max_clients", "max_test_time", "max_udp_send_rate"];

/// The server's settings, as `serve --iperf3` defaults them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanServer {
    pub port: u16,
    /// Tests at once, 1..=64: every generator and instance of a test
    /// sent to this host is one.
    pub max_clients: u16,
    /// The longest test a client may ask for, seconds.
    pub max_test_time_s: u32,
    /// The most UDP payload it sends for one test, bit/s; 0: no cap.
    pub max_udp_send_bps: u64,
}

impl Default for PlanServer {
    fn default() -> Self {
        PlanServer {
            port: DEFAULT_PORT,
            max_clients: 1,
            max_test_time_s: crate::iperf3::server::DEFAULT_MAX_TIME_S as u32,
            max_udp_send_bps: 10_000_000_000,
        }
    }
}

/// `max_udp_send_rate`: a rate like "10G", or 0 for no cap; bit/s.
fn send_rate(src: Src, v: &Value) -> Result<f64, PlanError> {
    Ok(match v.get_ref() {
        DeValue::String(r) => crate::model::units::parse_bps(r).map_err(|e| {
            src.err(
                span(v),
                format!("max_udp_send_rate = \"{r}\": {e}; write e.g. \"10G\", or 0 for no cap"),
            )
        })?,
        DeValue::Integer(_) => src.int(v, "max_udp_send_rate", 0, i64::MAX)? as f64,
        other => {
            return Err(src.err(
                span(v),
                format!(
                    "max_udp_send_rate must be a rate like \"10G\" or 0 (no cap), not {}",
                    other.type_str()
                ),
            ))
        }
    })
}

/// `iperf3_server` of host `name`, if it has one: only a host linerate
/// starts an agent on can run the server.
pub(super) fn parse(
    src: Src,
    t: &DeTable,
    kind: &HostKind,
    name: &str,
) -> Result<Option<PlanServer>, PlanError> {
    let Some((key, v)) = t.get_key_value("iperf3_server") else {
        return Ok(None);
    };
    if matches!(kind, HostKind::Iperf3(_)) {
        return Err(src.err(
            span(key),
            format!(
                "'{name}' is a stock iperf3 server (iperf3 = \"...\"): no agent runs there to start \
                 linerate's own; remove iperf3_server, or reach the host with ssh, netns or local"
            ),
        ));
    }
    let place = format!("in iperf3_server of [hosts.{name}]");
    let table = match v.get_ref() {
        DeValue::Boolean(true) => return Ok(Some(PlanServer::default())),
        DeValue::Boolean(false) => return Err(src.err(
            span(v),
            "iperf3_server = false says nothing: remove it (the host then runs no iperf3 server)",
        )),
        DeValue::Table(t) => t,
        other => {
            return Err(src.err(
                span(v),
                format!(
                    "iperf3_server must be true or a table like {{ max_clients = 12 }}, not {}",
                    other.type_str()
                ),
            ))
        }
    };
    src.check_keys(table, SERVER_KEYS, &place)?;
    let mut s = PlanServer::default();
    let int = |k: &str, hi: i64| table.get(k).map(|v| src.int(v, k, 1, hi)).transpose();
    // The ranges bound each to its type.
    if let Some(p) = int("port", i64::from(u16::MAX))? {
        s.port = u16::try_from(p).unwrap_or(DEFAULT_PORT);
    }
    if let Some(v) = table.get("max_clients") {
        let n = src.int(v, "max_clients", 1, i64::MAX)?;
        if n > MAX_CLIENTS as i64 {
            return Err(src.err(
                span(v),
                format!(
                    "max_clients = {n} is more than linerate's iperf3 server takes: at most \
                     {MAX_CLIENTS} tests at once (each holds up to 393 open files and a thread per \
                     stream); give 1..={MAX_CLIENTS}, or split the generators over two servers"
                ),
            ));
        }
        s.max_clients = u16::try_from(n).unwrap_or(1);
    }
    if let Some(t) = int("max_test_time", MAX_TIME_S as i64)? {
        s.max_test_time_s = u32::try_from(t).unwrap_or(s.max_test_time_s);
    }
    if let Some(v) = table.get("max_udp_send_rate") {
        let bps = send_rate(src, v)?;
        s.max_udp_send_bps = bps.round() as u64;
    }
    Ok(Some(s))
}
