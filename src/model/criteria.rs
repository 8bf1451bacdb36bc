//! Pass/fail criteria (`--expect`, a plan test's `expect`): the grammar
//! `FIGURE OP NUMBER[UNIT][@STAT]` (`loss<=0.001%`, `rx_pps>=1.2Mpps`,
//! `p99<=2ms@max`), the figures a criterion may name and their units (the
//! factors in `units`). Pure parsing: no I/O, nothing of the results;
//! `results::criteria` measures.
//!
//! Values are kept in base units: pps, bit/s, seconds, counts, per second;
//! loss as a ratio (0..1, written in %), line rate and CPU in % (0..100).

mod units;

use std::fmt;
use units::scale;

/// What a figure measures, which decides the units it is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Packets per second: pps, kpps, Mpps, Gpps.
    Pps,
    /// Bits per second: bit/s or bps with k, M, G, T.
    Bps,
    /// A ratio written in % (`loss<=0.1%` is 0.001).
    Ratio,
    /// A percentage (`line_pct>=90%`, `cpu<=80%`).
    Percent,
    /// A duration: ns, us (µs), ms, s.
    Seconds,
    /// A number of things, optionally with k, M, G.
    Count,
    /// Events per second (`requests_per_s>=1k`).
    PerSecond,
}

impl Kind {
    fn units(self) -> &'static str {
        match self {
            Kind::Pps => "pps, kpps, Mpps or Gpps",
            Kind::Bps => "bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s (or bps, Gbps...)",
            Kind::Ratio | Kind::Percent => "%",
            Kind::Seconds => "ns, us, ms or s",
            Kind::Count => "none, or k, M, G",
            Kind::PerSecond => "/s, k/s, M/s (or none)",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Pps => "a packet rate",
            Kind::Bps => "a bit rate",
            Kind::Ratio | Kind::Percent => "a percentage",
            Kind::Seconds => "a duration",
            Kind::Count => "a count",
            Kind::PerSecond => "a rate per second",
        }
    }
}

/// A figure a criterion can name.
#[derive(Debug, PartialEq, Eq)]
pub struct Figure {
    pub name: &'static str,
    /// Other names users write for it.
    pub aliases: &'static [&'static str],
    pub kind: Kind,
    /// Lower is better (loss, latency, errors): decides what a change in a
    /// baseline comparison is.
    pub lower_is_better: bool,
    pub about: &'static str,
    /// A baseline comparison weighs it: a result, not a setting or a
    /// count of rare events (a count going from 0 to 3 has no meaningful
    /// % change).
    pub compared: bool,
}

const fn fig(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: Kind,
    lower_is_better: bool,
    about: &'static str,
) -> Figure {
    Figure {
        name,
        aliases,
        kind,
        lower_is_better,
        about,
        compared: false,
    }
}

impl Figure {
    /// The same figure, weighed by baseline comparisons.
    const fn compared(self) -> Figure {
        Figure {
            compared: true,
            ..self
        }
    }
}

/// Every figure criteria and baselines know, in the order tables show them.
pub const FIGURES: &[Figure] = &[
    fig(
        "rx_pps",
        &[],
        Kind::Pps,
        false,
        "packets received per second",
    )
    .compared(),
    fig("tx_pps", &[], Kind::Pps, false, "packets sent per second"),
    fig(
        "l1_bps",
        &["l1", "rx_l1_bps"],
        Kind::Bps,
        false,
        "received L1 bit/s (+20 B per frame)",
    )
    .compared(),
    fig(
        "l2_bps",
        &["l2", "rx_l2_bps"],
        Kind::Bps,
        false,
        "received L2 bit/s (TCP: goodput)",
    )
    .compared(),
    fig(
        "goodput",
        &["goodput_bps"],
        Kind::Bps,
        false,
        "TCP payload or HTTP body bit/s",
    )
    .compared(),
    fig(
        "line_pct",
        &["line", "line_rate_pct"],
        Kind::Percent,
        false,
        "received L1 rate in % of the line rate",
    ),
    fig(
        "loss",
        &["loss_ratio"],
        Kind::Ratio,
        true,
        "frames lost by sequence number, in %",
    )
    .compared(),
    fig(
        "dut_loss",
        &[],
        Kind::Ratio,
        true,
        "loss the DUT caused (the tester's own drops left out), in %",
    ),
    fig("lost", &[], Kind::Count, true, "frames lost"),
    fig("reordered", &[], Kind::Count, true, "frames out of order"),
    fig(
        "duplicates",
        &[],
        Kind::Count,
        true,
        "frames received twice",
    ),
    fig(
        "retransmits",
        &["retrans"],
        Kind::Count,
        true,
        "TCP retransmitted segments",
    ),
    fig(
        "tx_errors",
        &[],
        Kind::Count,
        true,
        "send calls that failed",
    ),
    fig(
        "p50",
        &["latency_p50"],
        Kind::Seconds,
        true,
        "latency median (RTT under load; HTTP: per download)",
    )
    .compared(),
    fig(
        "p90",
        &["latency_p90"],
        Kind::Seconds,
        true,
        "latency 90th percentile",
    )
    .compared(),
    fig(
        "p99",
        &["latency_p99"],
        Kind::Seconds,
        true,
        "latency 99th percentile",
    )
    .compared(),
    fig(
        "latency_max",
        &["max"],
        Kind::Seconds,
        true,
        "highest latency",
    ),
    fig(
        "jitter",
        &["ipdv"],
        Kind::Seconds,
        true,
        "mean delay variation between probes under load",
    )
    .compared(),
    fig(
        "added_latency",
        &[],
        Kind::Seconds,
        true,
        "loaded minus idle median RTT",
    ),
    fig(
        "requests_per_s",
        &["rps"],
        Kind::PerSecond,
        false,
        "HTTP requests per second",
    )
    .compared(),
    fig("errors", &[], Kind::Count, true, "HTTP errors"),
    fig("ndr", &[], Kind::Pps, false, "search: no-drop rate").compared(),
    fig("pdr", &[], Kind::Pps, false, "search: partial-drop rate").compared(),
    fig(
        "throughput",
        &["rfc2544"],
        Kind::Pps,
        false,
        "search: RFC 2544 throughput",
    )
    .compared(),
    fig(
        "saturation",
        &[],
        Kind::Pps,
        false,
        "ramp: offered load where the DUT saturated",
    )
    .compared(),
    fig(
        "cpu",
        &[],
        Kind::Percent,
        true,
        "highest CPU use of an agent, % of one core",
    ),
];

/// The figure called `name` (or an alias of it).
pub fn figure(name: &str) -> Option<&'static Figure> {
    FIGURES
        .iter()
        .find(|f| f.name == name || f.aliases.contains(&name))
}

/// The names of every figure, for error messages and `--help`.
pub fn figure_names() -> String {
    FIGURES
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

impl Op {
    pub fn holds(self, measured: f64, expected: f64) -> bool {
        match self {
            Op::Lt => measured < expected,
            Op::Le => measured <= expected,
            Op::Gt => measured > expected,
            Op::Ge => measured >= expected,
            Op::Eq => (measured - expected).abs() <= expected.abs() * 1e-9,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
        }
    }
}

/// Which of a test's repetitions a criterion is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stat {
    #[default]
    Median,
    Min,
    Max,
}

impl Stat {
    pub fn name(self) -> &'static str {
        match self {
            Stat::Median => "median",
            Stat::Min => "min",
            Stat::Max => "max",
        }
    }
}

/// One parsed criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct Criterion {
    /// As the user wrote it.
    pub text: String,
    pub figure: &'static Figure,
    pub op: Op,
    /// In the figure's base unit (see the module doc).
    pub value: f64,
    pub stat: Stat,
}

/// A criterion that does not parse, with the column (in characters) and
/// length of what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub input: String,
    pub column: usize,
    pub len: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    /// The message, then the criterion with a caret under the fault.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "criterion '{}': {}\n  {}\n  {}{}",
            self.input,
            self.message,
            self.input,
            " ".repeat(self.column),
            "^".repeat(self.len.max(1))
        )
    }
}

impl std::error::Error for ParseError {}

/// A cursor over the criterion's characters.
struct Cursor<'a> {
    chars: Vec<char>,
    pos: usize,
    input: &'a str,
}

impl Cursor<'_> {
    fn skip_space(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> (usize, String) {
        let start = self.pos;
        while self.chars.get(self.pos).is_some_and(|&c| f(c)) {
            self.pos += 1;
        }
        (start, self.chars[start..self.pos].iter().collect())
    }

    fn error(&self, column: usize, len: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            input: self.input.to_string(),
            column,
            len,
            message: message.into(),
        }
    }

    /// The criterion's figure: its name as written, and the figure.
    fn figure(&mut self) -> Result<(String, &'static Figure), ParseError> {
        self.skip_space();
        let (at, name) = self.take_while(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if name.is_empty() {
            return Err(self.error(
                at,
                1,
                format!(
                    "expected a figure name, e.g. rx_pps>=1Mpps; figures: {}",
                    figure_names()
                ),
            ));
        }
        let Some(figure) = figure(&name.to_ascii_lowercase()) else {
            return Err(self.error(
                at,
                name.chars().count(),
                format!("unknown figure '{name}'; figures: {}", figure_names()),
            ));
        };
        Ok((name, figure))
    }

    /// The comparison after the figure `name`.
    fn op(&mut self, name: &str) -> Result<Op, ParseError> {
        self.skip_space();
        let at = self.pos;
        let (op_at, op_text) = self.take_while(|ch| matches!(ch, '<' | '>' | '=' | '!'));
        Ok(match op_text.as_str() {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "==" | "=" => Op::Eq,
            "" => {
                return Err(self.error(
                    at,
                    1,
                    format!("expected a comparison after '{name}': <, <=, >, >= or =="),
                ))
            }
            other => {
                return Err(self.error(
                    op_at,
                    other.chars().count(),
                    format!("'{other}' is not a comparison: use <, <=, >, >= or =="),
                ))
            }
        })
    }

    /// The repetition statistic after an `@`, if any (the median if none).
    fn stat(&mut self) -> Result<Stat, ParseError> {
        if self.chars.get(self.pos) == Some(&'@') {
            self.pos += 1;
            self.skip_space();
            let (stat_at, s) = self.take_while(|ch| ch.is_ascii_alphabetic());
            let stat = match s.as_str() {
                "median" => Stat::Median,
                "min" => Stat::Min,
                "max" => Stat::Max,
                _ => {
                    return Err(self.error(
                        stat_at,
                        s.chars().count().max(1),
                        "after @ name which repetition counts: median, min or max",
                    ))
                }
            };
            self.skip_space();
            return Ok(stat);
        }
        Ok(Stat::Median)
    }
}

/// Parses `FIGURE OP NUMBER[UNIT][@STAT]`; spaces between parts are allowed.
pub fn parse(input: &str) -> Result<Criterion, ParseError> {
    let mut c = Cursor {
        chars: input.chars().collect(),
        pos: 0,
        input,
    };
    let (name, figure) = c.figure()?;
    let op = c.op(&name)?;
    c.skip_space();
    let (num_at, num) = c.take_while(|ch| ch.is_ascii_digit() || ch == '.');
    let number: f64 = match num.parse() {
        Ok(v) if !num.is_empty() => v,
        _ => {
            return Err(c.error(
                num_at,
                num.chars().count().max(1),
                format!(
                    "expected a number after '{}' ({} in {})",
                    op.symbol(),
                    figure.kind.what(),
                    figure.kind.units()
                ),
            ))
        }
    };
    c.skip_space();
    let (unit_at, unit) = c.take_while(|ch| ch != '@' && !ch.is_whitespace());
    let scale = scale(figure, &unit).map_err(|m| c.error(unit_at, unit.chars().count(), m.0))?;
    c.skip_space();
    let stat = c.stat()?;
    if c.pos < c.chars.len() {
        return Err(c.error(
            c.pos,
            c.chars.len() - c.pos,
            "unexpected text after the criterion",
        ));
    }
    // Digits alone can spell a number past f64's range (it parses as
    // infinity), and a unit can scale a finite one past it.
    if !(number * scale).is_finite() {
        return Err(c.error(
            num_at,
            num.chars().count(),
            format!(
                "{num}{unit} is too large a number for {} ({})",
                figure.name,
                figure.kind.what()
            ),
        ));
    }
    Ok(Criterion {
        text: input.trim().to_string(),
        figure,
        op,
        value: number * scale,
        stat,
    })
}

/// Parses every criterion, or the first error.
pub fn parse_all(list: &[String]) -> Result<Vec<Criterion>, ParseError> {
    list.iter().map(|s| parse(s)).collect()
}

/// A value of `kind` in words with its unit, for tables and JUnit.
pub fn show(kind: Kind, v: f64) -> String {
    let si = |v: f64, unit: &str| {
        let a = v.abs();
        let (d, p) = if a >= 1e12 {
            (1e12, "T")
        } else if a >= 1e9 {
            (1e9, "G")
        } else if a >= 1e6 {
            (1e6, "M")
        } else if a >= 1e3 {
            (1e3, "k")
        } else {
            (1.0, "")
        };
        format!("{} {p}{unit}", trim(v / d))
    };
    match kind {
        Kind::Pps => si(v, "pps"),
        Kind::Bps => si(v, "bit/s"),
        Kind::Ratio => format!("{} %", trim(v * 100.0)),
        Kind::Percent => format!("{} %", trim(v)),
        Kind::Seconds => {
            let a = v.abs();
            if a >= 1.0 {
                format!("{} s", trim(v))
            } else if a >= 1e-3 {
                format!("{} ms", trim(v * 1e3))
            } else if a >= 1e-6 {
                format!("{} µs", trim(v * 1e6))
            } else {
                format!("{} ns", trim(v * 1e9))
            }
        }
        Kind::Count => trim(v),
        Kind::PerSecond => format!("{}/s", trim(v)),
    }
}

/// Four significant digits, no trailing zeros.
fn trim(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests;
