//! Line-rate arithmetic: frame sizes, L1/L2 bit rates, packets per second.
//!
//! Frame sizes are Ethernet frames *including* the 4-byte FCS, as RFC 2544 and
//! every vendor datasheet count them. On the wire each frame also costs 20 B of
//! preamble, start-of-frame delimiter and inter-frame gap, which is what L1
//! figures add. Nothing here does I/O.

/// Ethernet header (dst, src, ethertype) without VLAN tags.
pub const ETH_HEADER: u32 = 14;
/// Frame check sequence, counted in the frame size but not seen by the kernel.
pub const FCS: u32 = 4;
/// Preamble (7) + SFD (1) + inter-frame gap (12): the L1 cost of each frame.
pub const L1_OVERHEAD: u32 = 20;
pub const IPV4_HEADER: u32 = 20;
pub const IPV6_HEADER: u32 = 40;
pub const UDP_HEADER: u32 = 8;
/// Smallest and largest frame the UDP engine sends.
pub const MIN_FRAME: u32 = 64;
pub const MAX_FRAME: u32 = 9000;

/// The simple imix of the seed write-ups: 64, 594 and 1518 B frames at 7:4:1.
pub const IMIX: [(u32, u32); 3] = [(64, 7), (594, 4), (1518, 1)];

/// Average frame size of the imix, in bytes (361.83 B).
pub fn imix_average() -> f64 {
    let (bytes, count) = IMIX.iter().fold((0u64, 0u64), |(b, c), &(size, weight)| {
        (
            b + u64::from(size) * u64::from(weight),
            c + u64::from(weight),
        )
    });
    bytes as f64 / count as f64
}

/// Frames per second that fill `line_rate_bps` (an L1 rate) with frames of
/// `avg_frame` bytes.
pub fn line_rate_pps(line_rate_bps: f64, avg_frame: f64) -> f64 {
    line_rate_bps / ((avg_frame + f64::from(L1_OVERHEAD)) * 8.0)
}

/// L2 bit/s (frames including FCS) for `pps` frames of `avg_frame` bytes.
pub fn l2_bps(pps: f64, avg_frame: f64) -> f64 {
    pps * avg_frame * 8.0
}

/// L1 bit/s: L2 plus 20 B per frame.
pub fn l1_bps(pps: f64, avg_frame: f64) -> f64 {
    pps * (avg_frame + f64::from(L1_OVERHEAD)) * 8.0
}

/// UDP payload that makes an Ethernet frame of `frame_size` (FCS included),
/// or `None` when the frame is too small to carry the headers.
pub fn udp_payload_for_frame(frame_size: u32, ipv6: bool) -> Option<u32> {
    let ip = if ipv6 { IPV6_HEADER } else { IPV4_HEADER };
    frame_size.checked_sub(FCS + ETH_HEADER + ip + UDP_HEADER)
}

/// Why a rate the user wrote could not be read; each names the text and
/// shows the forms that work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateError {
    #[error(
        "'{0}' is not a bit rate: use a number with a k/M/G/T prefix, e.g. 10G, 2.5Gbps or 100Mbps"
    )]
    NotBitRate(String),
    #[error("'{0}' is not a packet rate: use a number with an optional k/M/G prefix, e.g. 1.5Mpps or 800kpps")]
    NotPacketRate(String),
    #[error("'{0}' is not a percentage")]
    NotPercentage(String),
    #[error("'{0}': a share of the line rate must be in (0, 100] %")]
    ShareOutOfRange(String),
    #[error("'{0}' is not a rate: use packets (1.5Mpps, 800kpps), L1 bit/s (5G, 100Mbps) or a share of the line rate (50%)")]
    NotRate(String),
    /// A bare number: packets or bits per second, the reader cannot tell.
    #[error(
        "'{text}': a rate needs a unit: {suggestion}? (packets: pps, kpps, Mpps, Gpps; \
         L1 bit/s: bps, kbps, Mbps, Gbps, Tbps, or k, M, G, T alone; % of the line rate)"
    )]
    NeedsUnit { text: String, suggestion: String },
    /// A prefix in the wrong case (`m` is milli, not mega).
    #[error(
        "'{text}': SI prefixes are case-sensitive ('{prefix}' is {meaning}); did you mean {fixed}?"
    )]
    Prefix {
        text: String,
        prefix: char,
        meaning: &'static str,
        fixed: String,
    },
    #[error("'{0}': the rate must be above zero (leave the rate out to send as fast as possible)")]
    Zero(String),
    /// A number so large it is infinite once its prefix is applied (`1e308T`).
    #[error("'{0}' is too large a rate to count: give a rate a real line can carry, e.g. 400G or 600Mpps")]
    TooLarge(String),
}

/// The unit a rate's text named.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    /// No unit at all (`100000`) or a prefix alone (`5G`).
    None,
    Pps,
    Bps,
}

/// Splits `1.5Mpps` into (1.5e6, Pps, prefixed), checking the prefix's
/// case: a lower-case `m` (milli), `g` or `t` (no SI prefix) is refused
/// with the spelling that was meant; `K` is taken for kilo, as many tools
/// write it. `None` when the text is no number with a unit at all.
fn split_rate(text: &str) -> Result<Option<(f64, Unit, bool)>, RateError> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')))
        .map_or(t.len(), |(i, _)| i);
    let (num, rest) = t.split_at(end);
    let Ok(v) = num.parse::<f64>() else {
        return Ok(None);
    };
    if !v.is_finite() || v < 0.0 {
        return Ok(None);
    }
    let lower = rest.to_ascii_lowercase();
    let (prefix, unit) = if let Some(p) = lower.strip_suffix("pps") {
        (&rest[..p.len()], Unit::Pps)
    } else if let Some(p) = lower
        .strip_suffix("bps")
        .or_else(|| lower.strip_suffix("bit/s"))
    {
        (&rest[..p.len()], Unit::Bps)
    } else {
        (rest, Unit::None)
    };
    let mult = match prefix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "m" | "g" | "t" => {
            return Err(RateError::Prefix {
                text: text.to_string(),
                prefix: prefix.chars().next().unwrap_or('m'),
                meaning: if prefix == "m" {
                    "milli, not mega"
                } else {
                    "no SI prefix"
                },
                fixed: format!(
                    "{num}{}{}",
                    prefix.to_ascii_uppercase(),
                    &rest[prefix.len()..]
                ),
            });
        }
        _ => return Ok(None),
    };
    if !(v * mult).is_finite() {
        return Err(RateError::TooLarge(text.to_string()));
    }
    Ok(Some((v * mult, unit, !prefix.is_empty())))
}

/// `100000` → "100000pps, 100kpps or 100kbps": the forms a bare number
/// may have meant.
fn unit_suggestion(num: &str, v: f64) -> String {
    let (d, p) = match v {
        v if v >= 1e9 => (1e9, "G"),
        v if v >= 1e6 => (1e6, "M"),
        v if v >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    if p.is_empty() {
        return format!("{num}pps or {num}kbps");
    }
    let short = format!("{:.3}", v / d);
    let short = short.trim_end_matches('0').trim_end_matches('.');
    format!("{num}pps, {short}{p}pps or {short}{p}bps")
}

/// Parses a bit rate such as `10G`, `2.5Gbps`, `100Mbit/s` or
/// `25000000000` into bit/s. A bare number is bit/s here: only flags
/// whose name says bit/s (`--line-rate`, `--dut-shape`) use this.
pub fn parse_bps(s: &str) -> Result<f64, RateError> {
    match split_rate(s)? {
        Some((v, Unit::None | Unit::Bps, _)) if v > 0.0 => Ok(v),
        Some((_, Unit::None | Unit::Bps, _)) => Err(RateError::Zero(s.to_string())),
        _ => Err(RateError::NotBitRate(s.to_string())),
    }
}

/// Parses a packet rate such as `1.5Mpps`, `800k` or `14880952`, for
/// flags whose name says packets (`--dut-police PPS`).
pub fn parse_pps(s: &str) -> Result<f64, RateError> {
    match split_rate(s)? {
        Some((v, Unit::None | Unit::Pps, _)) if v > 0.0 => Ok(v),
        Some((_, Unit::None | Unit::Pps, _)) => Err(RateError::Zero(s.to_string())),
        _ => Err(RateError::NotPacketRate(s.to_string())),
    }
}

/// A load as the user gave it: packets per second, an L1 bit rate, or a
/// share of the line rate. It becomes pps once the frame size is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Pps(f64),
    L1Bps(f64),
    LinePct(f64),
}

impl Rate {
    /// Parses `1.5Mpps`, `800kpps`, `5G` or `100Mbps` (L1 bit/s) or `50%`
    /// (of the line rate). A bare number is refused: `--rate 100000` was
    /// once read as 100 kbit/s, 33 pps of imix, by a user who meant packets.
    pub fn parse(s: &str) -> Result<Rate, RateError> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let pct: f64 = p
                .trim()
                .parse()
                .map_err(|_| RateError::NotPercentage(s.to_string()))?;
            if pct == 0.0 {
                return Err(RateError::Zero(s.to_string()));
            }
            if !(pct > 0.0 && pct <= 100.0) {
                return Err(RateError::ShareOutOfRange(s.to_string()));
            }
            return Ok(Rate::LinePct(pct));
        }
        let Some((v, unit, prefixed)) = split_rate(t)? else {
            return Err(RateError::NotRate(s.to_string()));
        };
        if v == 0.0 {
            return Err(RateError::Zero(s.to_string()));
        }
        match unit {
            Unit::Pps => Ok(Rate::Pps(v)),
            Unit::Bps => Ok(Rate::L1Bps(v)),
            // `5G`, `100M`: documented as L1 bit/s.
            Unit::None if prefixed => Ok(Rate::L1Bps(v)),
            Unit::None => Err(RateError::NeedsUnit {
                text: s.to_string(),
                suggestion: unit_suggestion(t, v),
            }),
        }
    }

    /// Packets per second for frames of `avg_frame` bytes on a line of
    /// `line_rate_bps` (L1).
    pub fn pps(self, avg_frame: f64, line_rate_bps: f64) -> f64 {
        match self {
            Rate::Pps(p) => p,
            Rate::L1Bps(bps) => bps / ((avg_frame + f64::from(L1_OVERHEAD)) * 8.0),
            Rate::LinePct(pct) => line_rate_pps(line_rate_bps, avg_frame) * pct / 100.0,
        }
    }
}

/// What a rate given in bit/s or in % of the line becomes in packets per
/// second at `frame` (average `avg_frame` bytes with FCS), said once when a
/// packet test starts: "rate 1 Gbit/s (L1) at 64 B frames (84 B on the
/// wire) = 1488095 pps (1.49 Mpps)". `None` for a rate given in pps:
/// nothing was converted.
pub fn rate_as_pps_note(
    rate: Rate,
    frame: crate::proto::FrameSpec,
    avg_frame: f64,
    line_rate_bps: f64,
) -> Option<String> {
    let asked = match rate {
        Rate::Pps(_) => return None,
        Rate::L1Bps(bps) => format!("{}bit/s (L1)", si_short(bps)),
        Rate::LinePct(pct) => format!(
            "{}% of the {}bit/s line rate (L1)",
            trim_zeros(&format!("{pct:.2}")),
            si_short(line_rate_bps)
        ),
    };
    let wire = avg_frame + f64::from(L1_OVERHEAD);
    let frames = match frame {
        crate::proto::FrameSpec::Fixed(n) => format!("{n} B frames ({wire:.0} B on the wire)"),
        crate::proto::FrameSpec::Imix => {
            format!("imix frames (average {avg_frame:.2} B, {wire:.2} B on the wire)")
        }
    };
    let pps = rate.pps(avg_frame, line_rate_bps);
    Some(format!(
        "rate {asked} at {frames} = {pps:.0} pps ({}pps)",
        si(pps)
    ))
}

/// `1 G`, `1.5 M`, `100 k`: [`si`] without trailing zeros.
fn si_short(v: f64) -> String {
    let s = si(v);
    match s.split_once(' ') {
        Some((n, p)) => format!("{} {p}", trim_zeros(n)),
        None => s,
    }
}

/// `1.50` → `1.5`, `2.00` → `2`.
fn trim_zeros(n: &str) -> &str {
    if n.contains('.') {
        n.trim_end_matches('0').trim_end_matches('.')
    } else {
        n
    }
}

/// Formats a rate with an SI prefix: `14.88 M`.
pub fn si(v: f64) -> String {
    let (d, p) = if v >= 1e12 {
        (1e12, "T")
    } else if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.2} {p}", v / d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference table every loadtester agrees on (10 GbE).
    /// `1e308T` was an infinite rate (fuzz/regressions/units replays it too).
    #[test]
    fn fuzz_rates_too_large_to_count_are_refused() {
        for s in ["1e308T", "1e300Tbps", "1.7e308kpps"] {
            assert_eq!(Rate::parse(s), Err(RateError::TooLarge(s.into())));
        }
        assert!(matches!(parse_bps("1e308G"), Err(RateError::TooLarge(_))));
        assert!(matches!(parse_pps("1e308M"), Err(RateError::TooLarge(_))));
        assert_eq!(Rate::parse("1e300pps"), Ok(Rate::Pps(1e300)));
    }

    #[test]
    fn a_bit_rate_is_said_in_packets_at_the_frame_size() {
        use crate::proto::FrameSpec;
        let note = |r: &str, f: FrameSpec, avg: f64| {
            rate_as_pps_note(Rate::parse(r).unwrap(), f, avg, 10e9)
        };
        assert_eq!(
            note("1G", FrameSpec::Fixed(64), 64.0).as_deref(),
            Some("rate 1 Gbit/s (L1) at 64 B frames (84 B on the wire) = 1488095 pps (1.49 Mpps)")
        );
        // 10 GbE at 64 B is 14,880,952 pps (DESIGN §5).
        assert_eq!(
            note("100%", FrameSpec::Fixed(64), 64.0).as_deref(),
            Some(
                "rate 100% of the 10 Gbit/s line rate (L1) at 64 B frames (84 B on the wire) \
                 = 14880952 pps (14.88 Mpps)"
            )
        );
        assert_eq!(
            note("2.5Gbps", FrameSpec::Fixed(1518), 1518.0).as_deref(),
            Some("rate 2.5 Gbit/s (L1) at 1518 B frames (1538 B on the wire) = 203186 pps (203.19 kpps)")
        );
        let imix = note("1G", FrameSpec::Imix, imix_average()).unwrap_or_default();
        assert!(
            imix.contains("imix frames (average 361.83 B, 381.83 B on the wire)"),
            "{imix}"
        );
        // A packet rate is what the sender is asked for: nothing to say.
        assert_eq!(note("200kpps", FrameSpec::Fixed(64), 64.0), None);
    }

    #[test]
    fn ten_gig_line_rate_table() {
        let ten_g = 10e9;
        let table = [
            (64.0, 14_880_952),
            (128.0, 8_445_946),
            (256.0, 4_528_986),
            (512.0, 2_349_624),
            (1024.0, 1_197_318),
            (1280.0, 961_538),
            (1518.0, 812_744),
        ];
        for (frame, pps) in table {
            assert_eq!(line_rate_pps(ten_g, frame).round() as u64, pps, "{frame} B");
        }
    }

    #[test]
    fn imix_average_and_rate() {
        assert!((imix_average() - 361.833).abs() < 0.001);
        let pps = line_rate_pps(10e9, imix_average());
        assert_eq!((pps / 1e3).round() as u64, 3_274, "3.274 Mpps");
    }

    #[test]
    fn l1_adds_twenty_bytes_per_frame() {
        let pps = line_rate_pps(10e9, 64.0);
        assert!((l1_bps(pps, 64.0) - 10e9).abs() < 1.0);
        // 64/84 of line rate is what the frames themselves carry.
        assert!((l2_bps(pps, 64.0) - 10e9 * 64.0 / 84.0).abs() < 1.0);
    }

    #[test]
    fn payload_sizes() {
        assert_eq!(udp_payload_for_frame(64, false), Some(18));
        assert_eq!(udp_payload_for_frame(1518, false), Some(1472));
        assert_eq!(udp_payload_for_frame(64, true), None);
        assert_eq!(udp_payload_for_frame(84, true), Some(18));
    }

    #[test]
    fn parse_rates() {
        assert_eq!(parse_bps("10G"), Ok(10e9));
        assert_eq!(parse_bps("2.5G"), Ok(2.5e9));
        assert_eq!(parse_bps("100Mbps"), Ok(100e6));
        assert_eq!(parse_pps("1.5Mpps"), Ok(1.5e6));
        assert_eq!(parse_pps("800k"), Ok(800e3));
        assert!(parse_bps("fast").is_err());
        assert!(parse_bps("-1G").is_err());
        assert!(parse_pps("").is_err());
        assert_eq!(parse_bps("1e9"), Ok(1e9));
        assert_eq!(parse_bps("25000000000"), Ok(25e9));
        assert_eq!(parse_bps("100Mbit/s"), Ok(100e6));
        assert!(parse_bps("1.5mpps").is_err());
    }

    #[test]
    fn rates_need_units_and_right_prefixes() {
        assert_eq!(Rate::parse("1.5Mpps"), Ok(Rate::Pps(1.5e6)));
        assert_eq!(Rate::parse("800kpps"), Ok(Rate::Pps(800e3)));
        assert_eq!(Rate::parse("800Kpps"), Ok(Rate::Pps(800e3)));
        assert_eq!(Rate::parse("1Gpps"), Ok(Rate::Pps(1e9)));
        assert_eq!(Rate::parse("100000pps"), Ok(Rate::Pps(1e5)));
        assert_eq!(Rate::parse("5G"), Ok(Rate::L1Bps(5e9)));
        assert_eq!(Rate::parse("100M"), Ok(Rate::L1Bps(100e6)));
        assert_eq!(Rate::parse("100Mbps"), Ok(Rate::L1Bps(100e6)));
        assert_eq!(Rate::parse("100kbps"), Ok(Rate::L1Bps(100e3)));
        assert_eq!(Rate::parse("2.5Gbps"), Ok(Rate::L1Bps(2.5e9)));
        assert_eq!(Rate::parse("50%"), Ok(Rate::LinePct(50.0)));
        let e = Rate::parse("100000").unwrap_err().to_string();
        assert!(
            e.starts_with("'100000': a rate needs a unit: 100000pps, 100kpps or 100kbps? "),
            "{e}"
        );
        assert!(
            e.contains("pps, kpps, Mpps") && e.contains("Mbps, Gbps"),
            "{e}"
        );
        let e = Rate::parse("1.5mpps").unwrap_err().to_string();
        assert!(
            e.contains("milli") && e.contains("did you mean 1.5Mpps?"),
            "{e}"
        );
        let e = Rate::parse("100mbps").unwrap_err().to_string();
        assert!(e.contains("did you mean 100Mbps?"), "{e}");
        let e = Rate::parse("5g").unwrap_err().to_string();
        assert!(e.contains("did you mean 5G?"), "{e}");
        for zero in ["0pps", "0", "0%", "0G", "0.0Mpps"] {
            let e = Rate::parse(zero).unwrap_err().to_string();
            assert!(e.contains("must be above zero"), "{zero}: {e}");
        }
        assert!(matches!(Rate::parse("fast"), Err(RateError::NotRate(_))));
        assert!(matches!(Rate::parse("5Xpps"), Err(RateError::NotRate(_))));
        assert!(matches!(Rate::parse("-5Mpps"), Err(RateError::NotRate(_))));
    }
}
