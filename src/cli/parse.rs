//! Value parsers for clap: the units and lists a flag accepts (`10G`,
//! `1.5Mpps`, `50%`, `imix`, `0-3,8`, `100M`). They see one string and know
//! nothing of the commands; every command file uses them.
//!
//! Errors are `anyhow`, as in the rest of the command layer: clap takes any
//! error that converts into `Box<dyn Error + Send + Sync>` and prints its
//! message after "invalid value 'X' for '--flag'". The unit parsers below
//! the command layer still answer with a message string; it is carried as
//! it is.

use crate::model::units::Rate;
use crate::proto::{FrameSpec, RxEngine, TxEngine};
use anyhow::{anyhow, bail, Result};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::net::{IpAddr, ToSocketAddrs};

pub fn parse_pps_u64(s: &str) -> Result<u64> {
    Ok(crate::model::units::parse_pps(s)?.round() as u64)
}

pub fn parse_bps(s: &str) -> Result<f64> {
    Ok(crate::model::units::parse_bps(s)?)
}

pub fn parse_rate_arg(s: &str) -> Result<Rate> {
    Ok(Rate::parse(s)?)
}

pub fn parse_frame(s: &str) -> Result<FrameSpec> {
    if s.eq_ignore_ascii_case("imix") {
        return Ok(FrameSpec::Imix);
    }
    let n: u32 = s
        .trim_end_matches('B')
        .trim_end_matches('b')
        .parse()
        .map_err(|_| {
            anyhow!("'{s}' is not a frame size: give bytes (64..9000, FCS included) or imix")
        })?;
    if !(crate::model::units::MIN_FRAME..=crate::model::units::MAX_FRAME).contains(&n) {
        bail!("frame size {n} is outside 64..9000 bytes (FCS included)");
    }
    Ok(FrameSpec::Fixed(n))
}

/// `--omit` in seconds (0 without it), within iperf3's limit, which
/// linerate's own ends keep too.
pub fn omit_secs(s: Option<f64>) -> Result<f64> {
    let max = crate::proto::iperf3::MAX_OMIT_S;
    match s {
        None => Ok(0.0),
        Some(s) if (0.0..=max).contains(&s) => Ok(s),
        Some(s) => bail!("--omit {s} is outside 0..={max} s"),
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
        anyhow!("'{s}' is not a socket buffer size: give bytes or K, M, G (256K, 4M), as iperf3 -w")
    })?;
    let bytes = v * mult as f64;
    if !(bytes.is_finite() && bytes >= 1024.0 && bytes <= MAX_WINDOW as f64) {
        bail!(
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
        anyhow!("'{s}' is not a duration: give seconds (10, 1.5) or a unit: 500ms, 10s, 2m, 1h")
    })?;
    if !(v.is_finite() && v >= 0.0) {
        bail!("'{s}' is not a duration: it must be a positive number of seconds");
    }
    // `1e308h` is finite until its unit makes it infinite; a Duration holds
    // at most 2^64 s.
    if std::time::Duration::try_from_secs_f64(v * mult).is_err() {
        bail!("'{s}' is too long a duration: give at most days' worth, e.g. 48h");
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
            (true, ..) => bail!(
                "--ipv6 asks for IPv6 but --target {self} has only {}: drop --ipv6 or give an IPv6 target",
                self.list()
            ),
            (false, None, None) => bail!("--target {self} has no address"),
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
        bail!("'{s}' is neither an IP address nor a host name: give an address (198.18.0.2, 2001:2::2) or a name");
    }
    let mut addrs: Vec<IpAddr> = Vec::new();
    let found = (t, 0u16).to_socket_addrs().map_err(|e| {
        anyhow!(
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
        bail!("host name '{t}' resolves to no address: give the address itself");
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
    let bad = || anyhow!("'{s}' is not a CPU list: use numbers and ranges like 0,2 or 0-3");
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
        bail!("CPU {c} does not exist: this host has CPUs 0-{}", n - 1);
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
        anyhow!("'{s}' is not a size: use bytes with an optional k/M/G or Ki/Mi/Gi suffix")
    })?;
    if !(v.is_finite() && v >= 0.0) {
        bail!("'{s}' is not a size");
    }
    // `as u64` would saturate: 1e30 bytes must not become 16 EiB silently.
    let bytes = (v * mult as f64).round();
    if bytes >= u64::MAX as f64 {
        bail!("'{s}' is too large a size: give at most a few TB, e.g. 100G");
    }
    Ok(bytes as u64)
}

/// `--tx-engine`: exactly the names of `proto::TxEngine`, so an engine
/// added there is on the command line with nothing to change here.
pub fn tx_engine() -> impl TypedValueParser<Value = TxEngine> {
    PossibleValuesParser::new(TxEngine::names())
        .map(|name| name.parse::<TxEngine>().unwrap_or_default())
}

/// `--rx-engine`: exactly the names of `proto::RxEngine`.
pub fn rx_engine() -> impl TypedValueParser<Value = RxEngine> {
    PossibleValuesParser::new(RxEngine::names())
        .map(|name| name.parse::<RxEngine>().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `1e308h` was an infinite duration (fuzz/regressions/units replays these)
    /// (a panic in `Duration::from_secs_f64`), `1e30` bytes 16 EiB.
    #[test]
    fn window_sizes_as_iperf3_takes_them() {
        assert_eq!(parse_window("256K").unwrap(), 256 << 10);
        assert_eq!(parse_window("4M").unwrap(), 4 << 20);
        assert_eq!(parse_window("4mb").unwrap(), 4 << 20);
        assert_eq!(parse_window("1.5M").unwrap(), 3 << 19);
        assert_eq!(parse_window("65536").unwrap(), 65536);
        assert!(parse_window("1G").is_err());
        assert!(parse_window("100").is_err());
        let e = parse_window("lots").unwrap_err().to_string();
        assert!(e.contains("256K"), "{e}");
    }

    #[test]
    fn fuzz_durations_and_sizes_too_large_are_refused() {
        for s in ["1e308h", "1e306m", "1e20"] {
            let e = parse_secs(s).unwrap_err().to_string();
            assert!(e.contains("too long a duration") && e.contains(s), "{e}");
        }
        assert_eq!(parse_secs("48h").unwrap(), 172_800.0);
        for s in ["1e30", "18446744073709551616", "1e11G"] {
            let e = parse_size(s).unwrap_err().to_string();
            assert!(e.contains("too large a size") && e.contains(s), "{e}");
        }
        assert_eq!(parse_size("1e18").unwrap(), 1_000_000_000_000_000_000);
        assert_eq!(parse_size("16Gi").unwrap(), 16 << 30);
    }

    #[test]
    fn cpus() {
        assert_eq!(parse_cpus("0").unwrap(), vec![0]);
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("100000")
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }

    #[test]
    fn frames() {
        assert_eq!(parse_frame("64").unwrap(), FrameSpec::Fixed(64));
        assert_eq!(parse_frame("1518B").unwrap(), FrameSpec::Fixed(1518));
        assert_eq!(parse_frame("IMIX").unwrap(), FrameSpec::Imix);
        assert!(parse_frame("63").is_err());
        assert!(parse_frame("jumbo").is_err());
    }

    #[test]
    fn rates() {
        let pps = |s: &str| Rate::parse(s).unwrap().pps(64.0, 10e9);
        assert_eq!(pps("1Mpps"), 1e6);
        assert!((pps("50%") - 7_440_476.19).abs() < 1.0);
        assert!((pps("10G") - 14_880_952.38).abs() < 1.0);
        assert!(Rate::parse("150%").is_err());
        assert!(Rate::parse("lots").is_err());
    }

    #[test]
    fn hosts() {
        let a = parse_host("198.18.0.2").unwrap();
        assert_eq!(
            a.pick(false).unwrap(),
            "198.18.0.2".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            parse_host("[2001:2::2]")
                .unwrap()
                .pick(true)
                .unwrap()
                .to_string(),
            "2001:2::2"
        );
        let l = parse_host("localhost").unwrap();
        assert_eq!(l.name.as_deref(), Some("localhost"));
        assert_eq!(l.pick(false).unwrap().to_string(), "127.0.0.1");
        let both = HostAddr {
            name: Some("both".into()),
            addrs: vec!["::1".parse().unwrap(), "127.0.0.1".parse().unwrap()],
        };
        assert_eq!(both.pick(false).unwrap().to_string(), "127.0.0.1");
        assert_eq!(both.pick(true).unwrap().to_string(), "::1");
        let v6 = HostAddr {
            name: Some("six".into()),
            addrs: vec!["::1".parse().unwrap()],
        };
        assert_eq!(v6.pick(false).unwrap().to_string(), "::1");
        let v4 = HostAddr {
            name: Some("four".into()),
            addrs: vec!["127.0.0.1".parse().unwrap()],
        };
        assert!(v4
            .pick(true)
            .unwrap_err()
            .to_string()
            .contains("--ipv6 asks for IPv6"));
        let e = parse_host("no-such-host.invalid").unwrap_err().to_string();
        assert!(e.contains("does not resolve"), "{e}");
        assert!(parse_host("a b").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_secs("10").unwrap(), 10.0);
        assert_eq!(parse_secs("1.5").unwrap(), 1.5);
        assert_eq!(parse_secs("10s").unwrap(), 10.0);
        assert_eq!(parse_secs("2m").unwrap(), 120.0);
        assert_eq!(parse_secs("500ms").unwrap(), 0.5);
        assert_eq!(parse_secs("1h").unwrap(), 3600.0);
        assert!(parse_secs("10x").unwrap_err().to_string().contains("500ms"));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("100M").unwrap(), 100_000_000);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64_000);
        assert!(parse_size("lots").is_err());
    }
}
