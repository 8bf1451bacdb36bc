//! Values a user types that are not rates or frames: durations (`10s`,
//! `500ms`), sizes (`100M`, `1GiB`), socket buffers (`256K`), CPU lists
//! (`0-3,8`) and hosts (an address or a name resolved once). The command
//! line's value parsers and the plan files both read them through here;
//! each error says what was wrong and what to write instead.

use crate::model::error::{bad, invalid, ModelError};

type Result<T, E = ModelError> = std::result::Result<T, E>;
use std::net::{IpAddr, ToSocketAddrs};

/// `--omit` in seconds (0 without it), within iperf3's limit, which
/// linerate's own ends keep too.
pub fn omit_secs(s: Option<f64>) -> Result<f64> {
    let max = crate::proto::iperf3::MAX_OMIT_S;
    match s {
        None => Ok(0.0),
        Some(s) if (0.0..=max).contains(&s) => Ok(s),
        Some(s) => bad!("--omit {s} is outside 0..={max} s"),
    }
}

/// The largest `--window` (iperf3's MAX_TCP_BUFFER, 512 MiB).
pub const MAX_WINDOW: u64 = 512 << 20;

/// A socket buffer size as iperf3 -w takes it: bytes, or a number with K,
/// M or G (1024-based, either case; a trailing B allowed): `256K`, `4M`,
/// `1.5M`.
pub fn parse_window(s: &str) -> Result<u32> {
    let t = s.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        invalid!(
            "'{s}' is not a socket buffer size: give bytes or K, M, G (256K, 4M), as iperf3 -w"
        )
    })?;
    let bytes = v * mult as f64;
    if !(bytes.is_finite() && bytes >= 1024.0 && bytes <= MAX_WINDOW as f64) {
        bad!(
            "--window {s} is outside 1K..=512M: the kernel's smallest socket buffers are a few KiB, and iperf3 stops at 512 MiB too"
        );
    }
    Ok(bytes.round() as u32)
}

/// A length of time in seconds: `10`, `1.5`, `10s`, `500ms`, `2m`, `1h`
/// (a bare number is seconds, as it always was).
pub fn parse_secs(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, mult) = [("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)]
        .iter()
        .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n, *m)))
        .unwrap_or((t, 1.0));
    let v: f64 = num.trim().parse().map_err(|_| {
        invalid!("'{s}' is not a duration: give seconds (10, 1.5) or a unit: 500ms, 10s, 2m, 1h")
    })?;
    if !(v.is_finite() && v >= 0.0) {
        bad!("'{s}' is not a duration: it must be a positive number of seconds");
    }
    // `1e308h` is finite until its unit makes it infinite; a Duration holds
    // at most 2^64 s.
    if std::time::Duration::try_from_secs_f64(v * mult).is_err() {
        bad!("'{s}' is too long a duration: give at most days' worth, e.g. 48h");
    }
    Ok(v * mult)
}

/// A `--target` as the user gave it: an address, or a host name resolved
/// once here (the system resolver: /etc/hosts, then DNS) into the
/// addresses it had then. [`HostAddr::pick`] chooses the one used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAddr {
    /// The name, when the user gave one rather than an address.
    pub name: Option<String>,
    /// Its addresses in the resolver's order (one when an address was given).
    pub addrs: Vec<IpAddr>,
}

impl HostAddr {
    /// An address given as such.
    pub fn addr(a: IpAddr) -> Self {
        HostAddr {
            name: None,
            addrs: vec![a],
        }
    }

    /// The address to use: IPv4 unless `ipv6` is asked for or the name
    /// has no IPv4 address.
    pub fn pick(&self, ipv6: bool) -> Result<IpAddr> {
        let v6 = self.addrs.iter().copied().find(IpAddr::is_ipv6);
        let v4 = self.addrs.iter().copied().find(IpAddr::is_ipv4);
        match (ipv6, v4, v6) {
            (true, _, Some(a)) | (false, Some(a), _) | (false, None, Some(a)) => Ok(a),
            (true, ..) => bad!(
                "--ipv6 asks for IPv6 but --target {self} has only {}: drop --ipv6 or give an IPv6 target",
                self.list()
            ),
            (false, None, None) => bad!("--target {self} has no address"),
        }
    }

    fn list(&self) -> String {
        let v: Vec<String> = self.addrs.iter().map(IpAddr::to_string).collect();
        v.join(", ")
    }
}

impl std::fmt::Display for HostAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "{}", self.list()),
        }
    }
}

/// `198.18.0.2`, `2001:2::2`, `localhost` or any name the system resolves.
pub fn parse_host(s: &str) -> Result<HostAddr> {
    let t = s.trim();
    if let Ok(a) = t
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(HostAddr::addr(a));
    }
    let valid = !t.is_empty()
        && t.len() <= 253
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if !valid {
        bad!("'{s}' is neither an IP address nor a host name: give an address (198.18.0.2, 2001:2::2) or a name");
    }
    let mut addrs: Vec<IpAddr> = Vec::new();
    let found = (t, 0u16).to_socket_addrs().map_err(|e| {
        invalid!(
            "host name '{t}' does not resolve ({e}): check the spelling, /etc/hosts or DNS, \
             or give the address itself"
        )
    })?;
    for a in found {
        if !addrs.contains(&a.ip()) {
            addrs.push(a.ip());
        }
    }
    if addrs.is_empty() {
        bad!("host name '{t}' resolves to no address: give the address itself");
    }
    Ok(HostAddr {
        name: Some(t.to_string()),
        addrs,
    })
}

/// A validated CPU list (a newtype so clap treats it as one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

pub fn parse_cpu_list(s: &str) -> Result<CpuList> {
    parse_cpus(s).map(CpuList)
}

/// Parses `0-3,8,10-11` into CPU numbers.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>> {
    let bad = || invalid!("'{s}' is not a CPU list: use numbers and ranges like 0,2 or 0-3");
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(&c) = out.iter().find(|&&c| c >= n) {
        bad!("CPU {c} does not exist: this host has CPUs 0-{}", n - 1);
    }
    Ok(out)
}

/// `100M`, `1G`, `4096`, `64k`, `1GiB`: bytes (k/M/G decimal, Ki/Mi/Gi binary).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let t = t.strip_suffix('B').unwrap_or(t);
    let (num, mult) = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("k", 1_000),
        ("K", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ]
    .iter()
    .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n, *m)))
    .unwrap_or((t, 1));
    let v: f64 = num.trim().parse().map_err(|_| {
        invalid!("'{s}' is not a size: use bytes with an optional k/M/G or Ki/Mi/Gi suffix")
    })?;
    if !(v.is_finite() && v >= 0.0) {
        bad!("'{s}' is not a size");
    }
    // `as u64` would saturate: 1e30 bytes must not become 16 EiB silently.
    let bytes = (v * mult as f64).round();
    if bytes >= u64::MAX as f64 {
        bad!("'{s}' is too large a size: give at most a few TB, e.g. 100G");
    }
    Ok(bytes as u64)
}
