//! HTTP on the control channel and in results: the serve and download jobs,
//! what is served and how the client trusts it, and what one side reports
//! (per-connection and total counts, latency percentiles, kTLS state, CPU
//! split). Plain data (serde + JSON Schema).

use crate::spec::Cidr;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Whether the kernel did the TLS record layer on this side.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct KtlsStatus {
    /// kTLS was asked for (the T3 rows, `--ktls`).
    pub requested: bool,
    /// The kernel did the record layer for at least one connection.
    pub in_use: bool,
    /// Why not, when asked and not in use (e.g. the tls ULP is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The note the matrix and the results carry when the kernel lacks the ULP.
pub const KTLS_MISSING: &str = "kTLS not available on this kernel (tls ULP missing)";

/// Latency percentiles, microseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    /// The 99.9th percentile (absent in results written before it).
    #[serde(default)]
    pub p999_us: u64,
    pub max_us: u64,
}

/// One bucket of a latency histogram: downloads that took up to `le_us`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct LatencyBucket {
    pub le_us: u64,
    pub count: u64,
}

/// One connection's figures.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct HttpConnection {
    pub id: u16,
    /// Complete responses (client) or responses sent (server).
    pub requests: u64,
    /// Body bytes moved (partial last body included).
    pub body_bytes: u64,
    pub goodput_bps: f64,
    /// TCP_INFO total_retrans of this connection at its end.
    pub retransmits: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Why the connection ended early, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Retransmitted segments the receiver reported as duplicates (D-SACK,
    /// TCP_INFO dsack_dups): retransmits that were not needed.
    #[serde(default)]
    pub spurious_retransmits: u64,
    /// Times the sender saw its segments arrive out of order (TCP_INFO
    /// reord_seen): reordering makes SACK-based recovery resend segments
    /// that were only late.
    #[serde(default)]
    pub reorder_events: u64,
}

/// Failed requests by what failed (the client's side). Each is one
/// request that got no complete response.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct ErrorKinds {
    /// The TCP connection could not be made (refused, unreachable, timed out).
    pub connect: u64,
    /// No response, or a body that stalled, within the timeout.
    pub timeout: u64,
    /// The peer reset or closed the connection under a request.
    pub reset: u64,
    /// The TLS handshake or record layer failed.
    pub tls: u64,
    /// The peer's answer broke HTTP (bad head, no Content-Length, ...).
    pub protocol: u64,
}

impl ErrorKinds {
    pub fn total(&self) -> u64 {
        self.connect + self.timeout + self.reset + self.tls + self.protocol
    }
    pub fn add(&mut self, o: &ErrorKinds) {
        self.connect += o.connect;
        self.timeout += o.timeout;
        self.reset += o.reset;
        self.tls += o.tls;
        self.protocol += o.protocol;
    }
}

/// CPU time of one side over the test, each in % of all the host's CPUs
/// (0-100 %: 100 % is every CPU busy), the unit of every CPU figure.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct CpuSplit {
    pub user_pct: f64,
    pub system_pct: f64,
    /// System-wide softirq time (packet processing); on one host shared by
    /// both sides.
    pub softirq_pct: f64,
    /// The host's CPUs the shares are of (cores used = pct × cpus / 100).
    #[serde(default)]
    pub cpus: u32,
}

/// The page-cache state of a `--root` server.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct CacheState {
    /// Files were read once before serving (the default).
    pub warmed: bool,
    /// Files were evicted first (`--cold`, posix_fadvise DONTNEED).
    pub cold: bool,
    pub files: u64,
    pub bytes: u64,
    /// Bytes the server process read from storage during the test
    /// (/proc/self/io read_bytes), and that as a rate.
    pub storage_read_bytes: u64,
    pub storage_read_bps: f64,
}

/// The request method of `linerate http --method`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    #[default]
    Get,
    Head,
    Post,
    Put,
    Delete,
    Patch,
    Options,
}

impl HttpMethod {
    pub const ALL: [HttpMethod; 7] = [
        HttpMethod::Get,
        HttpMethod::Head,
        HttpMethod::Post,
        HttpMethod::Put,
        HttpMethod::Delete,
        HttpMethod::Patch,
        HttpMethod::Options,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Head => "HEAD",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Delete => "DELETE",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Options => "OPTIONS",
        }
    }

    pub fn is_get(&self) -> bool {
        *self == HttpMethod::Get
    }
}

impl std::fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--method` linerate does not send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a method linerate sends; give GET, HEAD, POST, PUT, DELETE, PATCH or OPTIONS"
)]
pub struct UnknownMethod(pub String);

impl std::str::FromStr for HttpMethod {
    type Err = UnknownMethod;
    fn from_str(s: &str) -> Result<Self, UnknownMethod> {
        HttpMethod::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownMethod(s.to_string()))
    }
}

/// What every request of a download test is: its method, the headers
/// added to linerate's own (validated: no framing headers, no CR/LF) and
/// its body (sent with a Content-Length).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    #[serde(default)]
    pub method: HttpMethod,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<u8>,
}

/// One stage of `--ramp-connections`: over `duration_ms` the open
/// connections go linearly from the previous stage's target (0 before the
/// first) to `connections`, as k6's stages do.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub struct RampStage {
    pub duration_ms: u64,
    pub connections: u16,
}

/// One side's HTTP summary (inside the agent's endpoint summary).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct HttpSummary {
    pub tls: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_suite: Option<String>,
    pub ktls: KtlsStatus,
    pub requests: u64,
    pub body_bytes: u64,
    /// Every byte read from (client) or written to (server) the sockets:
    /// HTTP heads and TLS framing included.
    pub wire_bytes: u64,
    /// Client: the requests went over HTTP/2 (else HTTP/1.1).
    #[serde(default)]
    pub http2: bool,
    /// Client: bytes the kernel had queued and the client had not read
    /// when it closed a connection mid-response (at the test's end, or on
    /// a failure). The kernel's rx_bytes counts them; `wire_bytes` does not.
    #[serde(default)]
    pub unread_at_close_bytes: u64,
    /// Responses by status class on the client; error answers on the server.
    pub status_counts: Vec<StatusCount>,
    /// Failed requests (client: each is one request without a complete
    /// response, by kind in `error_kinds`; server: connections that failed).
    pub errors: u64,
    #[serde(default)]
    pub error_kinds: ErrorKinds,
    /// Requests sent at a fixed rate (`--rate`, requests/s in all), and
    /// `latency` measured from each request's intended send time
    /// (coordinated omission corrected, as wrk2 does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// With `rate_per_s`: latency from each request's actual send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected: Option<Latency>,
    pub elapsed_s: f64,
    pub cpu: CpuSplit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_histogram: Vec<LatencyBucket>,
    pub connections: Vec<HttpConnection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheState>,
    /// The size of the object served or downloaded, when one.
    #[serde(default)]
    pub object_bytes: u64,
    /// Client: the method of every request (`--method`).
    #[serde(default, skip_serializing_if = "HttpMethod::is_get")]
    pub method: HttpMethod,
    /// Client: headers added to linerate's own (`--header`), counted only:
    /// their values may hold tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub extra_headers: u32,
    /// Request body bytes: sent (client, `--body`) or read and discarded
    /// (server), in all.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub request_body_bytes: u64,
    /// Client: the stages of `--ramp-connections`; the intervals' `connections`
    /// say how many were open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ramp: Vec<RampStage>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
pub struct StatusCount {
    pub status: u16,
    pub count: u64,
}

pub fn add_status(v: &mut Vec<StatusCount>, status: u16, n: u64) {
    match v.iter_mut().find(|s| s.status == status) {
        Some(s) => s.count += n,
        None => {
            v.push(StatusCount { status, count: n });
            v.sort_by_key(|s| s.status);
        }
    }
}

/// What the server serves.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// A generated object of this many bytes, from memory, at every path.
    Size(u64),
    /// Real files under this directory.
    Root(PathBuf),
}

/// How the client trusts the server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Any certificate (`--insecure`).
    Insecure,
    /// Certificates issued by (or equal to) these PEM certificates.
    CaPem(String),
}

/// The HTTP download jobs (issue 10), apart from the others so they merge
/// easily: a server on the sink, a client on the generator.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HttpServeJob {
    pub bind: SocketAddr,
    pub content: Content,
    pub tls: bool,
    pub ktls: bool,
    pub cold: bool,
    /// The server stops on Stop, or after this long at most.
    pub duration_ms: u64,
    pub interval_ms: u64,
    pub request_timeout_ms: u64,
    /// TCP congestion control of the server's sockets (the senders of the
    /// bodies); the kernel's default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The DSCP the server's sockets mark their packets with (IP_TOS,
    /// IPV6_TCLASS); none: the kernel's default (0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<crate::Dscp>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct HttpGetJob {
    pub target: SocketAddr,
    /// Host header and TLS server name.
    pub host: String,
    pub path: String,
    /// `Some` for HTTPS: how the server's certificate is trusted.
    pub tls: Option<Trust>,
    pub ktls: bool,
    pub connections: u16,
    pub duration_ms: u64,
    pub requests: Option<u64>,
    /// Requests per second in all, spread over the connections; latency is
    /// then measured from each request's intended send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// HTTP/2 (ALPN h2 over TLS, prior knowledge over clear text).
    #[serde(default)]
    pub http2: bool,
    pub interval_ms: u64,
    pub allow: Vec<Cidr>,
    /// As for `HttpServeJob`: the DSCP of the client's packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<crate::Dscp>,
    /// The method, extra headers and body of every request (older
    /// controllers: a plain GET).
    #[serde(default)]
    pub request: HttpRequest,
    /// `--ramp-connections`: the connections follow these stages (their
    /// durations add up to `duration_ms`); empty: `connections` throughout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ramp: Vec<RampStage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_counts_merge() {
        let mut v = vec![];
        add_status(&mut v, 200, 3);
        add_status(&mut v, 206, 1);
        add_status(&mut v, 200, 2);
        assert_eq!(
            v[0],
            StatusCount {
                status: 200,
                count: 5
            }
        );
        assert_eq!(v.len(), 2);
    }
}
