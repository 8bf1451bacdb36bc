//! Parsers for the small text formats doctor meets: kernel CPU lists
//! (`0-3,8`), and the user's rate (`100G`) and RTT (`200us`) arguments.
//! Pure functions; they return a reason string instead of panicking on
//! whatever a file or a user hands them.

use std::time::Duration;

/// Highest CPU id accepted. Linux caps NR_CPUS at 8192; the bound keeps a
/// garbage range like `0-4000000000` from allocating gigabytes.
pub const MAX_CPU_ID: usize = 8191;

/// Why a value given on the command line or read from sysfs could not be
/// parsed; the text names the part that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadValue(pub String);

impl From<String> for BadValue {
    fn from(reason: String) -> Self {
        BadValue(reason)
    }
}

/// Parses a CPU list as the kernel writes it (`0-3,8-11`, also `0-15:2` with a
/// stride) into sorted, deduplicated ids. An empty string is an empty list.
pub fn parse_cpu_list(input: &str) -> Result<Vec<usize>, BadValue> {
    let mut cpus = Vec::new();
    for part in input.trim().split(',').map(str::trim) {
        if part.is_empty() {
            continue;
        }
        let (range, stride) = match part.split_once(':') {
            // The kernel's `a-b:used/group` form; we take `used` as a stride
            // only when group is absent, which covers what sysfs prints.
            Some((r, s)) => (r, parse_id(s.split('/').next().unwrap_or(s), part)?),
            None => (part, 1),
        };
        if stride == 0 {
            return Err(BadValue(format!("`{part}` has a stride of 0")));
        }
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (parse_id(a, part)?, parse_id(b, part)?),
            None => {
                let id = parse_id(range, part)?;
                (id, id)
            }
        };
        if lo > hi {
            return Err(BadValue(format!("`{part}` is a range that runs backwards")));
        }
        cpus.extend((lo..=hi).step_by(stride));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

fn parse_id(s: &str, part: &str) -> Result<usize, BadValue> {
    let s = s.trim();
    let id: usize = s
        .parse()
        .map_err(|_| format!("`{part}` is not a CPU number or range (`{s}` is not a number)"))?;
    if id > MAX_CPU_ID {
        return Err(BadValue(format!(
            "CPU {id} in `{part}` is above the kernel limit of {MAX_CPU_ID}"
        )));
    }
    Ok(id)
}

/// Formats sorted CPU ids back to the compact kernel form (`0-3,8`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// Parses a rate in bits per second: `100G`, `25g`, `10000M`, `1.5Gbit/s`,
/// `400Mbps`, `1e9`. Prefixes are decimal (k, M, G, T). Byte units are
/// refused rather than guessed.
pub fn parse_rate(input: &str) -> Result<f64, BadValue> {
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{input}` does not start with a number"))?;
    let unit = unit.trim();
    let (prefix, rest) = match unit.chars().next() {
        Some(c @ ('k' | 'K' | 'm' | 'M' | 'g' | 'G' | 't' | 'T')) => (Some(c), &unit[1..]),
        _ => (None, unit),
    };
    let multiplier = match prefix {
        None => 1.0,
        Some('k' | 'K') => 1e3,
        Some('m' | 'M') => 1e6,
        Some('g' | 'G') => 1e9,
        _ => 1e12,
    };
    match rest {
        "" | "b" | "bit" | "bit/s" | "bps" | "b/s" => {}
        "B" | "B/s" | "Bps" | "byte" | "bytes" => {
            return Err(BadValue(format!(
                "`{input}` is in bytes; the rate is in bits per second (e.g. 100G)"
            )))
        }
        other => {
            return Err(BadValue(format!(
                "`{other}` in `{input}` is not a rate unit"
            )))
        }
    }
    let bps = value * multiplier;
    if !bps.is_finite() || bps <= 0.0 {
        return Err(BadValue(format!("`{input}` is not a positive rate")));
    }
    Ok(bps)
}

/// Parses a duration with a unit: `1ms`, `200us`, `200µs`, `0.5s`, `800ns`.
pub fn parse_duration(input: &str) -> Result<Duration, BadValue> {
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{input}` does not start with a number"))?;
    let seconds_per_unit = match unit.trim() {
        "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" | "μs" => 1e-6,
        "ns" => 1e-9,
        "" => {
            return Err(BadValue(format!(
                "`{input}` needs a unit (s, ms, us or ns)"
            )))
        }
        other => {
            return Err(BadValue(format!(
                "`{other}` in `{input}` is not a time unit"
            )))
        }
    };
    let secs = value * seconds_per_unit;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(BadValue(format!("`{input}` is not between 0 and one hour")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `n` followed by the singular or plural noun: `1 queue`, `2 queues`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Parses a sysfs integer, accepting surrounding whitespace.
pub(crate) fn int<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.trim().parse().ok()
}

/// Formats a bit rate for humans: `31.5 Gbit/s`, `400 Mbit/s`.
pub(crate) fn format_bps(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.1} Gbit/s", bps / 1e9)
    } else {
        format!("{:.0} Mbit/s", bps / 1e6)
    }
}

/// Formats a byte count with a binary unit: `12.5 MB` style, kept simple.
pub(crate) fn format_bytes(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KiB", bytes / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8").unwrap(), [0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list(" 2 \n").unwrap(), [2]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("0-6:2").unwrap(), [0, 2, 4, 6]);
        assert_eq!(parse_cpu_list("3,1,1").unwrap(), [1, 3]);
        assert!(parse_cpu_list("3-1").unwrap_err().0.contains("backwards"));
        assert!(parse_cpu_list("a-b").is_err());
        assert!(parse_cpu_list("0-99999999999").is_err());
        assert!(parse_cpu_list("0-4:0").is_err());
    }

    #[test]
    fn cpu_list_round_trip() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100G").unwrap(), 100e9);
        assert_eq!(parse_rate("25g").unwrap(), 25e9);
        assert_eq!(parse_rate("10000M").unwrap(), 10e9);
        assert_eq!(parse_rate("1.5Gbit/s").unwrap(), 1.5e9);
        assert_eq!(parse_rate("400Mbps").unwrap(), 400e6);
        assert_eq!(parse_rate("1e9").unwrap(), 1e9);
        assert!(parse_rate("10GB").unwrap_err().0.contains("bytes"));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0G").is_err());
        assert!(parse_rate("10Q").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1ms").unwrap(), Duration::from_millis(1));
        assert_eq!(parse_duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("200µs").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("5").unwrap_err().0.contains("unit"));
        assert!(parse_duration("0ms").is_err());
        assert!(parse_duration("1fortnight").is_err());
    }
}
