//! The live progress line of a running test (its loss so far, redrawn on
//! a terminal) and the `done:` line of a finished one.

use super::*;

/// Loss so far in one test, from the per-interval figures the runner
/// reports: each receiver interval's loss ratio and rate give its lost and
/// expected packets (intervals are 1 s long).
#[derive(Debug, Default)]
pub(super) struct LossSoFar {
    test: String,
    last: (f64, f64),
    lost: f64,
    expected: f64,
}

impl LossSoFar {
    pub(super) fn update(&mut self, p: &Progress) -> f64 {
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
    // One unit for both figures: packets when either side counts them
    // (UDP), so an idle sender reads "0 pps", not a bit rate beside pps.
    let packets = p.tx_pps > 0.0 || p.rx_pps > 0.0;
    let rate = |pps: f64, bps: f64| {
        if packets {
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
    /// `--interval`: a line per period instead of the redrawn line.
    lines: Option<crate::report::intervals::IntervalLines>,
}

impl ProgressLine {
    pub fn new(enabled: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        ProgressLine {
            enabled: enabled && tty,
            style: Style::detect(tty),
            loss: Mutex::new(LossSoFar::default()),
            lines: None,
        }
    }

    /// A line every `every_s` seconds (on stdout, or stderr when stdout
    /// carries JSON), on a terminal or not; it replaces the redrawn line.
    pub fn with_intervals(mut self, every_s: f64, to_stdout: bool) -> Self {
        self.enabled = false;
        self.lines = Some(crate::report::intervals::IntervalLines::new(
            every_s, to_stdout,
        ));
        self
    }

    pub fn update(&self, p: &Progress) {
        if let Some(l) = &self.lines {
            l.update(p);
        }
        if !self.enabled {
            return;
        }
        let so_far = match self.loss.lock() {
            Ok(mut l) => l.update(p),
            Err(_) => p.loss_ratio,
        };
        // Never wider than the terminal: a wrapped line is not redrawn in
        // place, and the copies would pile up.
        let width = columns::width_for(2).unwrap_or(usize::MAX);
        let mut text = progress_text(p, so_far, self.style);
        let plain = progress_text(p, so_far, Style::PLAIN);
        if plain.chars().count() >= width {
            text = columns::shorten(&plain, width.saturating_sub(1));
        }
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[2K{text}");
        let _ = e.flush();
    }

    /// Whether the live line is drawn (stderr is a terminal, progress wanted).
    pub fn is_live(&self) -> bool {
        self.enabled
    }

    /// Without a live line (output not a terminal, or --no-progress), one
    /// line per finished test, so a long run shows it is alive.
    pub fn finished(&self, t: &crate::results::TestResult) {
        if let Some(l) = &self.lines {
            l.flush();
        }
        if !self.enabled {
            errln!("{}", finished_line(t));
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
    let partial = t.status.cut_short() && !t.directions.is_empty();
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
    let cut = match t.status {
        TestStatus::Aborted if partial => "aborted, partial: ",
        _ if partial => "interrupted, partial: ",
        _ => "",
    };
    format!("done: {}: {cut}{}", t.name, dirs.join("; "))
}
