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

pub use crate::model::values::{
    omit_secs, parse_cpu_list, parse_cpus, parse_host, parse_secs, parse_size, parse_window,
    CpuList, HostAddr, MAX_WINDOW,
};

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
    use std::net::IpAddr;

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
