//! Terminal output: the results table and the live progress line. Colour
//! only on a terminal and never when NO_COLOR is set (no-color.org) or
//! TERM=dumb; the layout is the same with or without it.

use super::columns::{self, Column, KEEP};
use super::registry::{
    Figure, LINE_RATE_PCT, LOSS_RATIO, RETRANSMITS, RX_L1_BPS, RX_L2_BPS, RX_PPS, TX_PPS,
};
use crate::model::stderr::errln;
use crate::model::units;
use crate::results::bottleneck::direction_tester_limited as tester_limited;
use crate::results::{DirectionResult, RunResults, TestResult, TestStatus};
use crate::runner::Progress;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

mod notes;
mod progress;

use notes::{setup_lines, test_notes};
pub use progress::{finished_line, progress_text, ProgressLine};

/// Whether to colour output, decided once from the stream and environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tone {
    Plain,
    Bold,
    Warn,
    Bad,
}

impl Style {
    pub const PLAIN: Style = Style { color: false };

    /// Colour when `is_terminal` and the environment does not say otherwise.
    pub fn detect(is_terminal: bool) -> Style {
        Style::from_env(
            is_terminal,
            std::env::var_os("NO_COLOR").as_deref(),
            std::env::var_os("TERM").as_deref(),
        )
    }

    fn from_env(
        is_terminal: bool,
        no_color: Option<&std::ffi::OsStr>,
        term: Option<&std::ffi::OsStr>,
    ) -> Style {
        // NO_COLOR counts when set to anything but the empty string.
        let no_color = no_color.is_some_and(|v| !v.is_empty());
        let dumb = term.is_some_and(|t| t == "dumb");
        Style {
            color: is_terminal && !no_color && !dumb,
        }
    }

    fn paint(self, tone: Tone, s: &str) -> String {
        let code = match tone {
            _ if !self.color => return s.to_string(),
            Tone::Plain => return s.to_string(),
            Tone::Bold => "1",
            Tone::Warn => "33",
            Tone::Bad => "1;31",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    }
}

fn loss_tone(ratio: f64) -> Tone {
    if ratio > super::sections::LOSS_BAD {
        Tone::Bad
    } else if ratio > 0.0 {
        Tone::Warn
    } else {
        Tone::Plain
    }
}

/// The results table as `run` prints it on stdout: coloured on a terminal,
/// fitted to its width ([`columns::width_for`]).
pub fn table(r: &RunResults) -> String {
    let out = std::io::stdout();
    table_fit(
        r,
        Style::detect(out.is_terminal()),
        columns::width_for(std::os::fd::AsRawFd::as_raw_fd(&out)),
    )
}

/// The table with every column, for files and tests.
pub fn table_styled(r: &RunResults, style: Style) -> String {
    table_fit(r, style, None)
}

/// Rate figures as the table prints them: whole packets per second.
fn pps(v: f64) -> String {
    format!("{v:.0}")
}

/// The column of registered figure `f` in the TCP and HTTP (`tcp`) or
/// the packet table, dropped `drop`-th to fit the width.
fn figure_column(f: &Figure, tcp: bool, drop: u8) -> Column<Tone> {
    Column::new(f.head(tcp), false, drop)
}

/// Figure `f` of direction `d` of `t` as its column writes it, "-" where
/// the direction has none.
fn figure_cell(f: &Figure, t: &TestResult, d: &crate::results::DirectionResult) -> String {
    f.value(t, d)
        .map(|v| f.text(v))
        .unwrap_or_else(|| "-".into())
}

/// One direction's row of the UDP table, each cell with its tone.
fn udp_row(t: &TestResult, d: &DirectionResult) -> [(String, Tone); 12] {
    let plain = |s: String| (s, Tone::Plain);
    // A ramp's row averages a changing rate: say so, it is not a
    // throughput (its saturation point is in the profile table).
    let name = if t.params.rate_profile.is_some() {
        format!("{} (ramp mean)", t.name)
    } else {
        t.name.clone()
    };
    let asked = if let Some(r) = super::figures::target_pps(t, d) {
        pps(r)
    } else if t.params.rate_pps.is_some() || t.params.rate_profile.is_some() {
        "-".into()
    } else {
        "max".into()
    };
    [
        plain(name),
        plain(super::figures::dir_label(&d.direction)),
        plain(asked),
        (
            figure_cell(&TX_PPS, t, d),
            if tester_limited(d) {
                Tone::Bad
            } else {
                Tone::Plain
            },
        ),
        plain(figure_cell(&RX_PPS, t, d)),
        plain(figure_cell(&RX_L1_BPS, t, d)),
        plain(figure_cell(&RX_L2_BPS, t, d)),
        plain(figure_cell(&LINE_RATE_PCT, t, d)),
        (
            figure_cell(&LOSS_RATIO, t, d),
            loss_tone(LOSS_RATIO.value(t, d).unwrap_or(0.0)),
        ),
        (
            d.tester_drops.to_string(),
            if d.tester_drops > 0 {
                Tone::Warn
            } else {
                Tone::Plain
            },
        ),
        plain(cpu_pct(t, "gen")),
        plain(cpu_pct(t, "sink")),
    ]
}

/// The UDP (and latency) table's columns for `rows`, its notes added to
/// `notes`.
fn udp_columns(tests: &[&TestResult], notes: &mut Vec<(String, Tone)>) -> Vec<Column<Tone>> {
    let mut c = [
        Column::new("Test", true, KEEP),
        Column::new("Dir", true, KEEP),
        Column::new("Asked pps", false, 6),
        figure_column(&TX_PPS, false, 7),
        figure_column(&RX_PPS, false, KEEP),
        figure_column(&RX_L1_BPS, false, 5),
        figure_column(&RX_L2_BPS, false, 1),
        figure_column(&LINE_RATE_PCT, false, 4),
        figure_column(&LOSS_RATIO, false, KEEP),
        Column::new("Tester drops", false, 8),
        Column::new("CPU gen %", false, 3),
        Column::new("CPU sink %", false, 2),
    ];
    for t in tests {
        if !has_rows(t, &mut c, notes) {
            continue;
        }
        for d in &t.directions {
            let cells = udp_row(t, d);
            for (col, cell) in c.iter_mut().zip(cells) {
                col.cells.push(cell);
            }
            // By the verdict's own rule: a short sender whose frames the
            // DUT lost is the DUT's evidence, not the tester's limit.
            if tester_limited(d) {
                notes.push((
                    format!(
                        "{} {}: the sender could not offer the rate asked for; this row measures the tester",
                        t.name,
                        super::figures::dir_label(&d.direction)
                    ),
                    Tone::Bad,
                ));
            }
        }
        test_notes(t, notes);
    }
    let mut c: Vec<Column<Tone>> = c.into();
    // "% line" needs a line rate: a veth reports none, and without
    // --line-rate every row would show "-". Such a column says nothing.
    c.retain(|col| {
        col.head != LINE_RATE_PCT.head
            || col
                .cells
                .iter()
                .any(|(v, _)| !matches!(v.as_str(), "" | "-"))
    });
    c
}

/// The legend of the columns shown, a sentence for each that needs one:
/// a column left out (or never printed) takes its sentence with it.
fn legend(shown: &[&str], line_rate_bps: f64) -> String {
    let has = |h: &str| shown.contains(&h);
    let mut parts: Vec<String> = Vec::new();
    if has(LINE_RATE_PCT.head) {
        parts.push(format!(
            "Line rate {} bit/s (L1); % line is of it.",
            units::si(line_rate_bps).trim()
        ));
    }
    if has(RX_L1_BPS.head(false)) || has(RX_L2_BPS.head(false)) {
        parts.push("Frames include the 4-byte FCS; L1 adds 20 B per frame.".into());
    }
    if has("Asked pps") {
        parts.push("Asked: the rate asked for (max: as fast as the sender can).".into());
    }
    if has(RX_L2_BPS.head(true)) {
        parts.push("TCP and HTTP: payload goodput.".into());
    }
    match (has("RTT ms"), has("cwnd")) {
        (true, true) => parts.push("RTT and cwnd (segments) are the senders' means.".into()),
        (true, false) => parts.push("RTT is the senders' mean.".into()),
        (false, true) => parts.push("cwnd (segments) is the senders' mean.".into()),
        (false, false) => {}
    }
    if has("CPU gen %") || has("CPU sink %") {
        parts.push(
            "CPU gen/sink %: the agent's user + system time in % of all its host's CPUs \
             (100 % = every CPU busy)."
                .into(),
        );
    }
    parts.join(" ")
}

/// The TCP and HTTP table's columns: goodput, retransmits and the senders'
/// TCP state (mean smoothed RTT and congestion window over their streams).
fn tcp_columns(tests: &[&TestResult], notes: &mut Vec<(String, Tone)>) -> Vec<Column<Tone>> {
    let mut c = [
        Column::new("Test", true, KEEP),
        Column::new("Dir", true, KEEP),
        figure_column(&RX_L2_BPS, true, KEEP),
        figure_column(&RETRANSMITS, true, KEEP),
        Column::new("RTT ms", false, 5),
        Column::new("cwnd", false, 4),
        Column::new("CPU gen %", false, 3),
        Column::new("CPU sink %", false, 2),
    ];
    let plain = |s: String| (s, Tone::Plain);
    for t in tests {
        let cpu = |role: &str| cpu_pct(t, role);
        if !has_rows(t, &mut c, notes) {
            continue;
        }
        for d in &t.directions {
            // No retransmit count (HTTP) reads as none.
            let retr = RETRANSMITS.value(t, d).unwrap_or(0.0);
            let streams: Vec<_> = d
                .sender_summary
                .streams
                .iter()
                .filter(|s| s.sender && s.rtt_us > 0)
                .collect();
            let mean = |f: &dyn Fn(&crate::proto::StreamSample) -> f64| {
                (!streams.is_empty())
                    .then(|| streams.iter().map(|s| f(s)).sum::<f64>() / streams.len() as f64)
            };
            let cells = [
                plain(t.name.clone()),
                plain(super::figures::dir_label(&d.direction)),
                plain(figure_cell(&RX_L2_BPS, t, d)),
                (
                    RETRANSMITS.text(retr),
                    if retr > 0.0 { Tone::Warn } else { Tone::Plain },
                ),
                plain(
                    mean(&|s| f64::from(s.rtt_us) / 1e3)
                        .map(|v| format!("{v:.2}"))
                        .unwrap_or_else(|| "-".into()),
                ),
                plain(
                    mean(&|s| f64::from(s.cwnd))
                        .map(|v| format!("{v:.0}"))
                        .unwrap_or_else(|| "-".into()),
                ),
                plain(cpu("gen")),
                plain(cpu("sink")),
            ];
            for (col, cell) in c.iter_mut().zip(cells) {
                col.cells.push(cell);
            }
        }
        test_notes(t, notes);
    }
    c.into()
}

/// The CPU % of `role`'s agent over the test, "-" when not measured.
fn cpu_pct(t: &TestResult, role: &str) -> String {
    t.cpu
        .iter()
        .find(|c| c.role == role)
        .map(|c| format!("{:.0}", c.process_pct))
        .unwrap_or_else(|| "-".into())
}

/// Whether `t` gets figure rows: an ok test, or an interrupted one with
/// figures (partial, said in a note). A failed test, or an interrupted
/// one without figures, gets its status row here instead.
fn has_rows(t: &TestResult, c: &mut [Column<Tone>], notes: &mut Vec<(String, Tone)>) -> bool {
    let partial = t.status.cut_short() && !t.directions.is_empty();
    if partial {
        if let Some(e) = &t.error {
            notes.push((format!("{}: {e}", t.name), Tone::Warn));
        }
    }
    if t.status != TestStatus::Ok && !partial {
        failed_row(t, c, notes);
        return false;
    }
    true
}

/// A test that did not run to the end: its name and status, the reason in
/// the notes.
fn failed_row(t: &TestResult, c: &mut [Column<Tone>], notes: &mut Vec<(String, Tone)>) {
    for (i, col) in c.iter_mut().enumerate() {
        col.cells.push(match i {
            0 => (t.name.clone(), Tone::Plain),
            1 => ("-".into(), Tone::Plain),
            2 => (format!("{:?}", t.status).to_lowercase(), Tone::Bad),
            _ => (String::new(), Tone::Plain),
        });
    }
    if let Some(e) = &t.error {
        notes.push((format!("{}: {e}", t.name), Tone::Bad));
    }
}

/// columns) and the notes, fitted to `width` when there is one.
pub fn table_fit(r: &RunResults, style: Style, width: Option<usize>) -> String {
    // A run of searches only (their trials are kept with the searches) has
    // no test rows: print no empty table, its summary table follows.
    if r.tests.is_empty() {
        return String::new();
    }
    let (tcp, udp): (Vec<&TestResult>, Vec<&TestResult>) =
        r.tests.iter().partition(|t| super::figures::is_tcp(t));
    let mut notes: Vec<(String, Tone)> = Vec::new();
    let mut out = String::new();
    let paint = |tone: Tone, s: &str| style.paint(tone, s);
    let mut left_out: Vec<&str> = Vec::new();
    let mut shown: Vec<&str> = Vec::new();
    for (rows, udp_rows) in [(udp, true), (tcp, false)] {
        if rows.is_empty() {
            continue;
        }
        let cols = if udp_rows {
            udp_columns(&rows, &mut notes)
        } else {
            tcp_columns(&rows, &mut notes)
        };
        let (cols, dropped) = columns::fit(cols, width);
        shown.extend(cols.iter().map(|c| c.head));
        for d in dropped {
            if !left_out.contains(&d) {
                left_out.push(d);
            }
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&columns::render(&cols, Tone::Bold, &paint));
    }
    for t in &r.tests {
        for e in &t.link_events {
            notes.push((format!("{}: {e}", t.name), Tone::Warn));
        }
    }
    let mut footer: Vec<String> = Vec::new();
    let legend = legend(&shown, r.line_rate_bps);
    if !legend.is_empty() {
        footer.push(legend);
    }
    if !left_out.is_empty() {
        footer.push(format!(
            "Left out to fit {} columns: {} (--wide or a wider terminal shows them; results.json \
             has every figure).",
            width.unwrap_or(0),
            left_out.join(", ")
        ));
    }
    footer.extend(setup_lines(r));
    out.push('\n');
    for f in footer {
        for l in columns::wrap(&f, width, "", "") {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !notes.is_empty() {
        out.push_str(&format!("\n{}\n", style.paint(Tone::Bold, "Notes:")));
        for (n, tone) in notes {
            for l in columns::wrap(&format!("! {n}"), width.map(|w| w - 2), "", "  ") {
                out.push_str(&format!("  {}\n", style.paint(tone, &l)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
