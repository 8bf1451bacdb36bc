//! Terminal output: the results table and the live progress line. Colour
//! only on a terminal and never when NO_COLOR is set (no-color.org) or
//! TERM=dumb; the layout is the same with or without it.

use crate::model::units;
use crate::results::{BottleneckKind, RunResults, TestStatus};
use crate::runner::Progress;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

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

/// The results table as `run` prints it on stdout: coloured on a terminal.
pub fn table(r: &RunResults) -> String {
    table_styled(r, Style::detect(std::io::stdout().is_terminal()))
}

/// One row per test and direction, in the seed write-ups' terms.
pub fn table_styled(r: &RunResults, style: Style) -> String {
    // A run of searches only (their trials are kept with the searches) has
    // no test rows: print no empty table, its summary table follows.
    if r.tests.is_empty() {
        return String::new();
    }
    let header = [
        "Test",
        "Dir",
        "Throughput (pps)",
        "L2 Gbit/s",
        "L1 Gbit/s",
        "% of line",
        "Loss %",
        "Tester drops",
        "CPU gen %",
        "CPU sink %",
    ];
    let mut rows: Vec<Vec<(String, Tone)>> = Vec::new();
    let mut notes: Vec<(String, Tone)> = Vec::new();
    let plain = |s: String| (s, Tone::Plain);
    for t in &r.tests {
        let cpu = |role: &str| {
            t.cpu
                .iter()
                .find(|c| c.role == role)
                .map(|c| format!("{:.0}", c.process_pct))
                .unwrap_or_else(|| "-".into())
        };
        // An interrupted test with figures shows them (partial, said in a
        // note); one without, or a failed test, shows its status.
        let partial = t.status == TestStatus::Interrupted && !t.directions.is_empty();
        if partial {
            if let Some(e) = &t.error {
                notes.push((format!("{}: {e}", t.name), Tone::Warn));
            }
        }
        if t.status != TestStatus::Ok && !partial {
            let mut row = vec![
                plain(t.name.clone()),
                plain("-".into()),
                (format!("{:?}", t.status).to_lowercase(), Tone::Bad),
            ];
            row.resize(header.len(), plain(String::new()));
            rows.push(row);
            if let Some(e) = &t.error {
                notes.push((format!("{}: {e}", t.name), Tone::Bad));
            }
            continue;
        }
        for d in &t.directions {
            let tcp = super::figures::is_tcp(t);
            let retr = d.retransmits.unwrap_or(0);
            // A ramp's row averages a changing rate: say so, it is not a
            // throughput (its saturation point is in the profile table).
            let name = if t.params.rate_profile.is_some() {
                format!("{} (mean over the ramp)", t.name)
            } else {
                t.name.clone()
            };
            rows.push(vec![
                plain(name),
                plain(super::figures::dir_label(&d.direction)),
                if tcp {
                    plain("-".into())
                } else {
                    (
                        format!("{:.0}", d.rx_pps),
                        if d.tester_limited {
                            Tone::Bad
                        } else {
                            Tone::Plain
                        },
                    )
                },
                plain(format!("{:.3}", d.rx_l2_bps / 1e9)),
                plain(
                    d.rx_l1_bps
                        .map(|v| format!("{:.3}", v / 1e9))
                        .unwrap_or_else(|| "-".into()),
                ),
                plain(format!("{:.1}", d.line_rate_pct)),
                if tcp {
                    (
                        format!("{retr} retr"),
                        if retr > 0 { Tone::Warn } else { Tone::Plain },
                    )
                } else {
                    (
                        format!("{:.3}", d.loss_ratio * 100.0),
                        loss_tone(d.loss_ratio),
                    )
                },
                if tcp {
                    plain("-".into())
                } else {
                    (
                        d.tester_drops.to_string(),
                        if d.tester_drops > 0 {
                            Tone::Warn
                        } else {
                            Tone::Plain
                        },
                    )
                },
                plain(cpu("gen")),
                plain(cpu("sink")),
            ]);
            if d.tester_limited {
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
        if let Some(n) = tx_engine_note(t) {
            notes.push((format!("{}: {n}", t.name), Tone::Plain));
        }
        if let Some(n) = rx_engine_note(t) {
            notes.push((format!("{}: {n}", t.name), Tone::Plain));
        }
        if let Some(l) = &t.latency {
            notes.push((
                format!("{}: {}", t.name, super::latency::note(l)),
                Tone::Plain,
            ));
        }
        if let Some(b) = &t.bottleneck {
            let tone = match b.kind {
                BottleneckKind::TesterSender
                | BottleneckKind::TesterReceiver
                | BottleneckKind::NothingArrived => Tone::Bad,
                BottleneckKind::NoneSaturated
                | BottleneckKind::Dut
                | BottleneckKind::RateLimited => Tone::Plain,
                _ => Tone::Warn,
            };
            notes.push((format!("{}: {}", t.name, b.verdict), tone));
        }
        for c in t.cross_checks.iter().filter(|c| c.flagged) {
            notes.push((
                format!(
                    "{}: {} disagree by {:.1} % (application {}, kernel {})",
                    t.name,
                    c.what,
                    c.difference_ratio * 100.0,
                    c.application,
                    c.kernel
                ),
                Tone::Warn,
            ));
        }
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, (c, _)) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    // Pads by visible width first, then paints, so colour never shifts columns.
    let line = |cells: &[(String, Tone)], out: &mut String| {
        let mut s = String::new();
        for (i, ((c, tone), w)) in cells.iter().zip(&widths).enumerate() {
            let padded = if i < 2 {
                format!("{c:<w$}")
            } else {
                format!("{c:>w$}")
            };
            s.push_str(&style.paint(*tone, &padded));
            s.push_str("  ");
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(
        &header
            .iter()
            .map(|s| (s.to_string(), Tone::Bold))
            .collect::<Vec<_>>(),
        &mut out,
    );
    line(
        &widths
            .iter()
            .map(|w| plain("-".repeat(*w)))
            .collect::<Vec<_>>(),
        &mut out,
    );
    for row in &rows {
        line(row, &mut out);
    }
    out.push_str(&format!(
        "\nLine rate {} bit/s (L1). Frames include the 4-byte FCS; L1 adds 20 B per frame. \
         TCP rows show payload goodput (per-packet figures do not apply with TSO/GRO).\n",
        units::si(r.line_rate_bps).trim()
    ));
    for lab in &r.labs {
        if let Some(c) = &lab.cores {
            let what = lab.dut_mode.as_deref().unwrap_or("back to back");
            out.push_str(&format!("Cores ({what}): {}.\n", c.summary));
        }
    }
    if !notes.is_empty() {
        out.push_str(&format!("\n{}\n", style.paint(Tone::Bold, "Notes:")));
        for (n, tone) in notes {
            out.push_str(&format!("  {}\n", style.paint(tone, &format!("! {n}"))));
        }
    }
    out
}

/// Loss so far in one test, from the per-interval figures the runner
/// reports: each receiver interval's loss ratio and rate give its lost and
/// expected packets (intervals are 1 s long).
#[derive(Debug, Default)]
struct LossSoFar {
    test: String,
    last: (f64, f64),
    lost: f64,
    expected: f64,
}

impl LossSoFar {
    fn update(&mut self, p: &Progress) -> f64 {
        if p.test != self.test {
            *self = LossSoFar {
                test: p.test.clone(),
                ..Default::default()
            };
        }
        // Sender updates leave the receiver's figures as they were.
        let now = (p.rx_pps, p.loss_ratio);
        if now != self.last && p.loss_ratio < 1.0 {
            let expected = p.rx_pps / (1.0 - p.loss_ratio);
            self.expected += expected;
            self.lost += expected * p.loss_ratio;
            self.last = now;
        }
        if self.expected > 0.0 {
            self.lost / self.expected
        } else {
            p.loss_ratio
        }
    }
}

/// The progress line's text: test, elapsed of duration, ETA, offered and
/// received rates, loss so far.
pub fn progress_text(p: &Progress, loss_so_far: f64, style: Style) -> String {
    let rate = |pps: f64, bps: f64| {
        if pps > 0.0 {
            format!("{}pps {}bit/s", units::si(pps), units::si(bps))
        } else {
            format!("{}bit/s", units::si(bps))
        }
    };
    let eta = (p.duration_s - p.elapsed_s).max(0.0);
    format!(
        "  {}  {:>4.1}/{:.0} s  ETA {:.0} s  offered {}  received {}  loss {}",
        style.paint(Tone::Bold, &p.test),
        p.elapsed_s,
        p.duration_s,
        eta.ceil(),
        rate(p.tx_pps, p.tx_bps),
        rate(p.rx_pps, p.rx_bps),
        style.paint(
            loss_tone(loss_so_far),
            &format!("{:.3} %", loss_so_far * 100.0)
        ),
    )
}

/// Redraws one status line on a terminal; prints nothing otherwise.
pub struct ProgressLine {
    enabled: bool,
    style: Style,
    loss: Mutex<LossSoFar>,
}

impl ProgressLine {
    pub fn new(enabled: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        ProgressLine {
            enabled: enabled && tty,
            style: Style::detect(tty),
            loss: Mutex::new(LossSoFar::default()),
        }
    }

    pub fn update(&self, p: &Progress) {
        if !self.enabled {
            return;
        }
        let so_far = match self.loss.lock() {
            Ok(mut l) => l.update(p),
            Err(_) => p.loss_ratio,
        };
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[2K{}", progress_text(p, so_far, self.style));
        let _ = e.flush();
    }

    /// Whether the live line is drawn (stderr is a terminal, progress wanted).
    pub fn is_live(&self) -> bool {
        self.enabled
    }

    /// Without a live line (output not a terminal, or --no-progress), one
    /// line per finished test, so a long run shows it is alive.
    pub fn finished(&self, t: &crate::results::TestResult) {
        if !self.enabled {
            eprintln!("{}", finished_line(t));
        }
    }

    pub fn clear(&self) {
        if self.enabled {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[2K");
            let _ = e.flush();
        }
    }
}

/// `done: NAME: DIR RATE, loss X %; …` for one finished test.
pub fn finished_line(t: &crate::results::TestResult) -> String {
    let partial = t.status == TestStatus::Interrupted && !t.directions.is_empty();
    if t.status != TestStatus::Ok && !partial {
        return format!(
            "done: {}: {} ({})",
            t.name,
            format!("{:?}", t.status).to_lowercase(),
            t.error.as_deref().unwrap_or("no detail")
        );
    }
    let dirs: Vec<String> = t
        .directions
        .iter()
        .map(|d| match d.rx_l1_bps {
            Some(_) => format!(
                "{} {:.0} pps received, loss {:.3} %",
                d.direction,
                d.rx_pps,
                d.loss_ratio * 100.0
            ),
            None => format!(
                "{} {:.3} Gbit/s goodput, {} retransmits",
                d.direction,
                d.rx_l2_bps / 1e9,
                d.retransmits.unwrap_or(0)
            ),
        })
        .collect();
    let cut = if partial {
        "interrupted, partial: "
    } else {
        ""
    };
    format!("done: {}: {cut}{}", t.name, dirs.join("; "))
}

/// Which UDP send engine a test's senders ran, on one line ("tx engine:
/// packet (AF_PACKET, qdisc bypass)", "tx engine: socket (packet refused: …)").
fn tx_engine_note(t: &crate::results::TestResult) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for d in &t.directions {
        let s = &d.sender_summary;
        let what = match (s.tx_engine.as_str(), &s.tx_engine_note) {
            ("", _) => continue,
            ("packet", None) => "packet (AF_PACKET, qdisc bypass)".to_string(),
            ("live", None) => "live (XDP live frames, BPF_PROG_RUN)".to_string(),
            (e, Some(n)) => format!("{e} ({n})"),
            (e, None) => e.to_string(),
        };
        // Several sender threads: how many and what each sent, so an
        // uneven split (a thread sharing its core) shows.
        let what = if s.per_thread.len() > 1 {
            let each: Vec<String> = s
                .per_thread
                .iter()
                .map(|p| match p.cpu {
                    Some(c) => format!("CPU{c} {}", p.tx_packets),
                    None => p.tx_packets.to_string(),
                })
                .collect();
            format!(
                "{what}, {} sender threads ({} packets)",
                s.per_thread.len(),
                each.join(" / ")
            )
        } else {
            what
        };
        if !seen.contains(&what) {
            seen.push(what);
        }
    }
    (!seen.is_empty()).then(|| format!("tx engine: {}", seen.join("; ")))
}

/// Which UDP receive engine counted a test's frames, on one line ("rx
/// engine: xdp (counted in XDP, dropped before the stack)", "rx engine:
/// socket (xdp refused: …)").
fn rx_engine_note(t: &crate::results::TestResult) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for d in &t.directions {
        let s = &d.receiver_summary;
        let what = match (s.rx_engine.as_str(), &s.rx_engine_note) {
            ("", _) => continue,
            ("xdp", None) => "xdp (counted in XDP, dropped before the stack)".to_string(),
            (e, Some(n)) => format!("{e} ({n})"),
            (e, None) => e.to_string(),
        };
        if !seen.contains(&what) {
            seen.push(what);
        }
    }
    (!seen.is_empty()).then(|| format!("rx engine: {}", seen.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;

    #[test]
    fn the_rx_engine_note_says_which_engine_counted_and_why() {
        let mut r = testdata::lab();
        let t = r
            .tests
            .iter_mut()
            .find(|t| t.directions.len() > 1)
            .expect("a test with two directions");
        assert_eq!(rx_engine_note(t), None, "older results name no engine");
        t.directions[0].receiver_summary.rx_engine = "xdp".into();
        let s = &mut t.directions[1].receiver_summary;
        s.rx_engine = "socket".into();
        s.rx_engine_note = Some("xdp refused: LINERATE_XDP_DENY is set".into());
        assert_eq!(
            rx_engine_note(t).as_deref(),
            Some(
                "rx engine: xdp (counted in XDP, dropped before the stack); \
                 socket (xdp refused: LINERATE_XDP_DENY is set)"
            )
        );
    }

    #[test]
    fn plain_table_is_aligned() {
        let out = table_styled(&testdata::lab(), Style::PLAIN);
        assert!(!out.contains('\x1b'));
        let lines: Vec<&str> = out.lines().take_while(|l| !l.is_empty()).collect();
        assert!(lines.len() >= 4, "{out}");
        // Right-aligned numeric columns end where the header's do.
        let end = lines[0].find("CPU gen %").unwrap() + "CPU gen %".len();
        for l in &lines[2..] {
            let chars: Vec<char> = l.chars().collect();
            let head: Vec<char> = lines[0].chars().collect();
            let col = head[..end].len();
            assert!(
                chars[col - 1].is_ascii_digit() || chars[col - 1] == '-',
                "{l}"
            );
        }
    }

    #[test]
    fn colour_marks_header_and_flags_without_moving_columns() {
        let r = testdata::paced();
        let plain = table_styled(&r, Style::PLAIN);
        let coloured = table_styled(&r, Style { color: true });
        assert!(coloured.contains("\x1b[1mTest"));
        assert!(coloured.contains("\x1b[33m! "), "flagged notes in yellow");
        let strip = |s: &str| {
            let mut out = String::new();
            let mut esc = false;
            for c in s.chars() {
                match (esc, c) {
                    (false, '\x1b') => esc = true,
                    (true, 'm') => esc = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        assert_eq!(strip(&coloured), plain);
    }

    #[test]
    fn no_color_wins() {
        use std::ffi::OsStr;
        assert!(Style::from_env(true, None, Some(OsStr::new("xterm"))).color);
        assert!(!Style::from_env(true, Some(OsStr::new("1")), None).color);
        assert!(Style::from_env(true, Some(OsStr::new("")), None).color);
        assert!(!Style::from_env(true, None, Some(OsStr::new("dumb"))).color);
        assert!(!Style::from_env(false, None, None).color);
    }

    #[test]
    fn progress_shows_eta_rates_and_loss_so_far() {
        let mut l = LossSoFar::default();
        let mut p = Progress {
            test: "udp 64B".into(),
            elapsed_s: 1.0,
            duration_s: 10.0,
            tx_pps: 1000.0,
            tx_bps: 672_000.0,
            rx_pps: 900.0,
            rx_bps: 604_800.0,
            loss_ratio: 0.1,
        };
        assert!((l.update(&p) - 0.1).abs() < 1e-12);
        // A sender update repeats the receiver's figures: not counted twice.
        p.elapsed_s = 1.5;
        assert!((l.update(&p) - 0.1).abs() < 1e-12);
        p.rx_pps = 1000.0;
        p.loss_ratio = 0.0;
        let so_far = l.update(&p);
        assert!((so_far - 100.0 / 2000.0).abs() < 1e-12, "{so_far}");
        let text = progress_text(&p, so_far, Style::PLAIN);
        assert!(text.contains("1.5/10 s"), "{text}");
        assert!(text.contains("ETA 9 s"), "{text}");
        assert!(text.contains("offered 1.00 kpps"), "{text}");
        assert!(text.contains("loss 5.000 %"), "{text}");
        // A new test starts from zero.
        p.test = "next".into();
        p.loss_ratio = 0.0;
        p.rx_pps = 5.0;
        assert_eq!(l.update(&p), 0.0);
    }
}
