//! What a test asks for, as the controller sends it to agents and results
//! record it: directions, frame sizes, send engines, rate profiles, flows and
//! the destination allow-list.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client (generator) sends, server (sink) receives.
    Forward,
    /// Server sends, client receives.
    Reverse,
    Both,
}

/// Frame sizes in bytes, FCS included.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FrameSpec {
    Fixed(u32),
    Imix,
}

/// How a UDP sender puts datagrams on the wire.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TxEngine {
    /// The live engine where it can run, else the packet engine (AF_XDP
    /// where zero-copy), else the socket engine (the reasons are kept in
    /// the sender's summary).
    #[default]
    Auto,
    /// UDP sockets: the kernel's UDP/IP send path and the qdisc.
    Socket,
    /// Whole Ethernet frames built by linerate on an AF_PACKET socket that
    /// bypasses the qdisc (root, an Ethernet next hop with a known neighbour).
    Packet,
    /// The packet engine's frames on an AF_XDP socket's TX ring: zero-copy
    /// where the driver offers it, copy mode elsewhere (veth).
    Xdp,
    /// Frames written by an XDP program in the kernel and sent with
    /// BPF_PROG_RUN live frames, XDP_TX on the egress (kernel ≥ 5.18, root
    /// or CAP_BPF, native XDP; a veth peer with NAPI).
    Live,
}

impl TxEngine {
    /// Every engine, in the order `--help` lists them. The command line and
    /// plan files take exactly these names, so a new engine is one variant
    /// here and one arm in the engine layer.
    pub const ALL: [TxEngine; 5] = [
        TxEngine::Auto,
        TxEngine::Socket,
        TxEngine::Packet,
        TxEngine::Xdp,
        TxEngine::Live,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxEngine::Auto => "auto",
            TxEngine::Socket => "socket",
            TxEngine::Packet => "packet",
            TxEngine::Xdp => "xdp",
            TxEngine::Live => "live",
        }
    }

    /// The names [`TxEngine::from_str`](std::str::FromStr) accepts.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.into_iter().map(Self::name)
    }
}

/// How a UDP receiver counts datagrams.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RxEngine {
    /// The XDP sink where it attaches, else the socket receiver (the
    /// reason is kept in the receiver's summary).
    Auto,
    /// UDP sockets with recvmmsg: the kernel's whole receive path. What
    /// older controllers, which send no engine, get.
    #[default]
    Socket,
    /// An XDP program on the receiving interface counts linerate frames
    /// per flow and drops them before the stack (root or CAP_BPF; native
    /// XDP: veth or a driver with it).
    Xdp,
}

impl RxEngine {
    /// Every engine, in the order `--help` lists them.
    pub const ALL: [RxEngine; 3] = [RxEngine::Auto, RxEngine::Socket, RxEngine::Xdp];

    pub fn name(self) -> &'static str {
        match self {
            RxEngine::Auto => "auto",
            RxEngine::Socket => "socket",
            RxEngine::Xdp => "xdp",
        }
    }

    /// The names [`RxEngine::from_str`](std::str::FromStr) accepts.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.into_iter().map(Self::name)
    }
}

impl std::str::FromStr for RxEngine {
    type Err = UnknownEngine;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        by_name(Self::ALL, Self::name, s)
    }
}

/// The engine of `all` whose `name` is `s`.
fn by_name<E: Copy, const N: usize>(
    all: [E; N],
    name: fn(E) -> &'static str,
    s: &str,
) -> Result<E, UnknownEngine> {
    all.into_iter()
        .find(|&e| name(e) == s)
        .ok_or_else(|| UnknownEngine(s.to_string()))
}

/// A name that is no send engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown send engine '{0}'")]
pub struct UnknownEngine(pub String);

impl std::str::FromStr for TxEngine {
    type Err = UnknownEngine;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        by_name(Self::ALL, Self::name, s)
    }
}

/// A test specification that cannot be used; each message says how to
/// write it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("a rate profile needs at least one point")]
    EmptyProfile,
    #[error("bad rate profile point {0:?}: times ascending, rates >= 0")]
    BadPoint(RatePoint),
    #[error("'{0}' is not an address or prefix like 192.0.2.0/24")]
    NotPrefix(String),
    #[error("'{0}': prefix length must be 0..={1}")]
    PrefixLength(String, u8),
}

/// A target packet rate over time: piecewise linear between points, the
/// last point's rate held after it. A constant rate is one point.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct RateProfile {
    pub points: Vec<RatePoint>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, JsonSchema)]
pub struct RatePoint {
    /// Seconds since the sender started.
    pub t_s: f64,
    pub pps: f64,
}

impl RateProfile {
    pub fn constant(pps: f64) -> Self {
        RateProfile {
            points: vec![RatePoint { t_s: 0.0, pps }],
        }
    }

    /// The same profile with every rate multiplied by `factor` (one
    /// worker's share of a job's rate).
    pub fn scaled(&self, factor: f64) -> Self {
        RateProfile {
            points: self
                .points
                .iter()
                .map(|p| RatePoint {
                    t_s: p.t_s,
                    pps: p.pps * factor,
                })
                .collect(),
        }
    }

    /// Checks the profile is usable: points in time order, rates finite and >= 0.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.points.is_empty() {
            return Err(SpecError::EmptyProfile);
        }
        let mut last = f64::NEG_INFINITY;
        for p in &self.points {
            if !(p.t_s.is_finite() && p.pps.is_finite() && p.pps >= 0.0 && p.t_s >= 0.0)
                || p.t_s < last
            {
                return Err(SpecError::BadPoint(*p));
            }
            last = p.t_s;
        }
        Ok(())
    }

    pub fn max_pps(&self) -> f64 {
        self.points.iter().map(|p| p.pps).fold(0.0, f64::max)
    }

    /// Target rate at `t` seconds.
    pub fn rate_at(&self, t: f64) -> f64 {
        let pts = &self.points;
        match pts.iter().position(|p| p.t_s > t) {
            None => pts.last().map(|p| p.pps).unwrap_or(0.0),
            Some(0) => pts[0].pps,
            Some(i) => {
                let (a, b) = (pts[i - 1], pts[i]);
                a.pps + (b.pps - a.pps) * (t - a.t_s) / (b.t_s - a.t_s)
            }
        }
    }

    /// Packets due from 0 to `t` seconds: the integral of the rate.
    pub fn due(&self, t: f64) -> f64 {
        let pts = &self.points;
        let Some(first) = pts.first() else { return 0.0 };
        // Before the first point the first rate applies.
        let mut sum = first.pps * first.t_s.min(t).max(0.0);
        for w in pts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if t <= a.t_s {
                return sum;
            }
            if b.t_s <= a.t_s {
                continue; // a step: no time passes
            }
            let end = t.min(b.t_s);
            let r_end = a.pps + (b.pps - a.pps) * (end - a.t_s) / (b.t_s - a.t_s);
            sum += (a.pps + r_end) / 2.0 * (end - a.t_s);
        }
        if let Some(last) = pts.last() {
            if t > last.t_s {
                sum += last.pps * (t - last.t_s);
            }
        }
        sum
    }
}

/// One UDP flow: its id in the payload header, its addresses.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
pub struct FlowSpec {
    pub id: u16,
    /// Source address, when it is not the socket's own (needs IP_TRANSPARENT).
    pub src: Option<IpAddr>,
    /// Source port, when flows vary ports; 0 lets the kernel choose.
    pub src_port: u16,
    pub dst: SocketAddr,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) if self.prefix <= 32 => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) if self.prefix <= 128 => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let (a, p) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = a.parse().map_err(|_| SpecError::NotPrefix(s.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if p.is_empty() {
            max
        } else {
            p.parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| SpecError::PrefixLength(s.to_string(), max))?
        };
        Ok(Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names_round_trip() {
        for e in TxEngine::ALL {
            assert_eq!(e.name().parse::<TxEngine>(), Ok(e));
            // The wire name (serde) is the same as the command-line name.
            assert_eq!(
                serde_json::to_value(e).ok(),
                Some(serde_json::Value::String(e.name().into()))
            );
        }
        assert!("warp".parse::<TxEngine>().is_err());
        for e in RxEngine::ALL {
            assert_eq!(e.name().parse::<RxEngine>(), Ok(e));
        }
        assert!("warp".parse::<RxEngine>().is_err());
    }
}
