//! Terminal output: the results table and the live progress line.

use crate::results::{Protocol, RunResults, TestStatus};
use crate::runner::Progress;
use std::io::{IsTerminal, Write};

/// One row per test and direction, in the seed write-ups' terms.
pub fn table(r: &RunResults) -> String {
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
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut notes = Vec::new();
    for t in &r.tests {
        let cpu = |role: &str| {
            t.cpu
                .iter()
                .find(|c| c.role == role)
                .map(|c| format!("{:.0}", c.process_pct))
                .unwrap_or_else(|| "-".into())
        };
        if t.status != TestStatus::Ok {
            rows.push(vec![
                t.name.clone(),
                "-".into(),
                format!("{:?}", t.status).to_lowercase(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            if let Some(e) = &t.error {
                notes.push(format!("{}: {e}", t.name));
            }
            continue;
        }
        for d in &t.directions {
            let tcp = t.params.protocol == Protocol::Tcp;
            rows.push(vec![
                t.name.clone(),
                short_dir(&d.direction),
                if tcp {
                    "-".into()
                } else {
                    format!("{:.0}", d.rx_pps)
                },
                format!("{:.3}", d.rx_l2_bps / 1e9),
                d.rx_l1_bps
                    .map(|v| format!("{:.3}", v / 1e9))
                    .unwrap_or_else(|| "-".into()),
                format!("{:.1}", d.line_rate_pct),
                if tcp {
                    format!("{} retr", d.retransmits.unwrap_or(0))
                } else {
                    format!("{:.3}", d.loss_ratio * 100.0)
                },
                if tcp {
                    "-".into()
                } else {
                    d.tester_drops.to_string()
                },
                cpu("gen"),
                cpu("sink"),
            ]);
        }
        for c in t.cross_checks.iter().filter(|c| c.flagged) {
            notes.push(format!(
                "{}: {} disagree by {:.1} % (application {}, kernel {})",
                t.name,
                c.what,
                c.difference_ratio * 100.0,
                c.application,
                c.kernel
            ));
        }
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i < 2 {
                out.push_str(&format!("{c:<w$}  "));
            } else {
                out.push_str(&format!("{c:>w$}  "));
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(
        &header.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        &mut out,
    );
    line(
        &widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        &mut out,
    );
    for row in &rows {
        line(row, &mut out);
    }
    out.push_str(&format!(
        "\nLine rate {} bit/s (L1). Frames include the 4-byte FCS; L1 adds 20 B per frame. \
         TCP rows show payload goodput (per-packet figures do not apply with TSO/GRO).\n",
        crate::units::si(r.line_rate_bps).trim()
    ));
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in notes {
            out.push_str(&format!("  ! {n}\n"));
        }
    }
    out
}

fn short_dir(d: &str) -> String {
    d.replace("_to_", "→")
}

/// Redraws one status line on a terminal; prints nothing otherwise.
pub struct ProgressLine {
    enabled: bool,
}

impl ProgressLine {
    pub fn new(enabled: bool) -> Self {
        ProgressLine {
            enabled: enabled && std::io::stderr().is_terminal(),
        }
    }
    pub fn update(&self, p: &Progress) {
        if !self.enabled {
            return;
        }
        let rate = |pps: f64, bps: f64| {
            if pps > 0.0 {
                format!(
                    "{}pps {}bit/s",
                    crate::units::si(pps),
                    crate::units::si(bps)
                )
            } else {
                format!("{}bit/s", crate::units::si(bps))
            }
        };
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r\x1b[2K  {}  {:>4.1}/{:.0} s  tx {}  rx {}  loss {:.3} %",
            p.test,
            p.elapsed_s,
            p.duration_s,
            rate(p.tx_pps, p.tx_bps),
            rate(p.rx_pps, p.rx_bps),
            p.loss_ratio * 100.0
        );
        let _ = e.flush();
    }
    pub fn clear(&self) {
        if self.enabled {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[2K");
            let _ = e.flush();
        }
    }
}
