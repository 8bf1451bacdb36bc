//! The units a criterion's number may carry, by the kind of its figure
//! (%, ns..s, pps and bit/s with SI prefixes, counts, per second), and the
//! factor each scales the number by into the figure's base unit.

use super::{Figure, Kind};

/// Why a unit does not fit a figure, in words.
pub(super) struct BadUnit(pub(super) String);

/// The error for a unit that is not one of the figure's kind.
fn wrong_unit(figure: &Figure, unit: &str) -> BadUnit {
    BadUnit(format!(
        "'{unit}' is not a unit of {} ({}): use {}",
        figure.name,
        figure.kind.what(),
        figure.kind.units()
    ))
}

/// The factor of an SI prefix ("" is 1; k and K are both kilo).
fn prefix(p: &str) -> Option<f64> {
    match p {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "M" => Some(1e6),
        "G" => Some(1e9),
        "T" => Some(1e12),
        _ => None,
    }
}

/// The factor of a bit rate's unit (bit/s, bps or b/s after a prefix);
/// a unit in bytes is refused.
fn bps_scale(figure: &Figure, unit: &str) -> Result<f64, BadUnit> {
    let wrong = || wrong_unit(figure, unit);
    if unit.contains('B') {
        return Err(BadUnit(format!(
            "'{unit}' counts bytes; {} is in bits: write bit/s (e.g. 10Gbit/s)",
            figure.name
        )));
    }
    let p = ["bit/s", "bps", "b/s"]
        .iter()
        .find_map(|s| unit.strip_suffix(s));
    match p {
        _ if unit.is_empty() => Ok(1.0),
        Some(p) => prefix(if p == "g" || p == "m" || p == "t" {
            // Bit rates are never milli: gbit/s means Gbit/s.
            match p {
                "g" => "G",
                "m" => "M",
                _ => "T",
            }
        } else {
            p
        })
        .ok_or_else(wrong),
        None => Err(wrong()),
    }
}

/// The factor from `unit` to `figure`'s base unit, or why it does not fit.
pub(super) fn scale(figure: &Figure, unit: &str) -> Result<f64, BadUnit> {
    let wrong = || wrong_unit(figure, unit);
    match figure.kind {
        Kind::Ratio => match unit {
            "%" => Ok(0.01),
            "" => Err(BadUnit(format!(
                "{} is a percentage: write it with %, e.g. {}<=0.1%",
                figure.name, figure.name
            ))),
            _ => Err(wrong()),
        },
        Kind::Percent => match unit {
            "%" => Ok(1.0),
            "" => Err(BadUnit(format!(
                "{} is a percentage: write it with %, e.g. {}>=90%",
                figure.name, figure.name
            ))),
            _ => Err(wrong()),
        },
        Kind::Seconds => match unit {
            "ns" => Ok(1e-9),
            "us" | "µs" => Ok(1e-6),
            "ms" => Ok(1e-3),
            "s" => Ok(1.0),
            "" => Err(BadUnit(format!(
                "{} is a duration: give its unit, e.g. {}<=2ms",
                figure.name, figure.name
            ))),
            _ => Err(wrong()),
        },
        Kind::Pps => {
            let lower = unit.to_ascii_lowercase();
            match lower.strip_suffix("pps") {
                _ if unit.is_empty() => Ok(1.0),
                Some(p) => prefix(&p.to_ascii_uppercase().replace('K', "k")).ok_or_else(wrong),
                None => Err(wrong()),
            }
        }
        Kind::Bps => bps_scale(figure, unit),
        Kind::Count => prefix(unit).ok_or_else(wrong),
        Kind::PerSecond => {
            let p = unit
                .strip_suffix("/s")
                .or_else(|| unit.strip_suffix("req/s"))
                .unwrap_or(unit);
            let p = p.strip_suffix("req").unwrap_or(p);
            prefix(p).ok_or_else(wrong)
        }
    }
}
