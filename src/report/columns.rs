//! Text tables that fit the terminal: columns are dropped by priority
//! (those with nothing to say first), then the first column is shortened
//! with "…", and notes are wrapped at the width with a hanging indent.
//! Off a terminal, and with `--wide`, nothing is cut.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `--wide`: print every column whatever the width.
static WIDE: AtomicBool = AtomicBool::new(false);

/// Asks for every column whatever the terminal's width (`--wide`).
pub fn set_wide(on: bool) {
    WIDE.store(on, Ordering::Relaxed);
}

/// The width tables printed on `fd` must fit: `COLUMNS` when set to a
/// number (so scripts and tests can ask), else the terminal's width, else
/// (a file or pipe, or `--wide`) none.
pub fn width_for(fd: std::os::fd::RawFd) -> Option<usize> {
    if WIDE.load(Ordering::Relaxed) {
        return None;
    }
    from_env(std::env::var("COLUMNS").ok().as_deref()).or_else(|| crate::sys::terminal_columns(fd))
}

fn from_env(v: Option<&str>) -> Option<usize> {
    // Narrower than this no table is readable: treat as no limit.
    v.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&c| c >= 40)
}

/// How a cell is drawn: the caller's colour, applied after padding.
pub type Cell<T> = (String, T);

/// One column: its header, alignment, how long it is kept when the width
/// runs out (higher: longer; [`KEEP`]: never dropped) and its cells.
pub struct Column<T> {
    pub head: &'static str,
    pub left: bool,
    pub keep: u8,
    pub cells: Vec<Cell<T>>,
}

/// Never dropped.
pub const KEEP: u8 = u8::MAX;

impl<T> Column<T> {
    pub fn new(head: &'static str, left: bool, keep: u8) -> Self {
        Column {
            head,
            left,
            keep,
            cells: Vec::new(),
        }
    }

    fn width(&self) -> usize {
        self.cells
            .iter()
            .map(|(c, _)| c.chars().count())
            .chain([self.head.chars().count()])
            .max()
            .unwrap_or(0)
    }

    /// Nothing but dashes, zeros or blanks: the first to go when narrow.
    fn blank(&self) -> bool {
        self.cells
            .iter()
            .all(|(c, _)| matches!(c.trim(), "" | "-" | "0" | "0.0" | "0.000"))
    }
}

/// The columns that fit `width` (all without one), the first shortened if
/// need be, and the headers of those left out.
pub fn fit<T>(
    mut cols: Vec<Column<T>>,
    width: Option<usize>,
) -> (Vec<Column<T>>, Vec<&'static str>) {
    let mut dropped = Vec::new();
    let Some(width) = width else {
        return (cols, dropped);
    };
    let total = |cols: &[Column<T>]| {
        cols.iter().map(|c| c.width()).sum::<usize>() + 2 * cols.len().saturating_sub(1)
    };
    while total(&cols) > width {
        // The lowest priority, blank columns before others, the rightmost
        // of equals.
        let victim = cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.keep != KEEP)
            .min_by_key(|(i, c)| (!c.blank(), c.keep, usize::MAX - i))
            .map(|(i, _)| i);
        let Some(i) = victim else { break };
        dropped.push(cols.remove(i).head);
    }
    let over = total(&cols).saturating_sub(width);
    if over > 0 {
        if let Some(first) = cols.first_mut() {
            let w = first
                .width()
                .saturating_sub(over)
                .max(first.head.chars().count())
                .max(8);
            for (c, _) in &mut first.cells {
                *c = shorten(c, w);
            }
        }
    }
    (cols, dropped)
}

/// `s` cut to `w` characters, the last one "…" when cut.
pub fn shorten(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Renders fitted columns: headers, a rule, the rows; `paint` colours a
/// padded cell (`head` for headers), so colour never shifts a column.
pub fn render<T: Copy>(cols: &[Column<T>], head: T, paint: &dyn Fn(T, &str) -> String) -> String {
    let widths: Vec<usize> = cols.iter().map(|c| c.width()).collect();
    let rows = cols.first().map(|c| c.cells.len()).unwrap_or(0);
    let mut out = String::new();
    let mut line = |cells: Vec<(String, T)>| {
        let mut s = String::new();
        for (i, ((text, tone), w)) in cells.into_iter().zip(&widths).enumerate() {
            let padded = if cols[i].left {
                format!("{text:<w$}")
            } else {
                format!("{text:>w$}")
            };
            if i > 0 {
                s.push_str("  ");
            }
            // Trailing blanks of a left-aligned last column are not drawn.
            if i + 1 == cols.len() && cols[i].left {
                s.push_str(&paint(tone, padded.trim_end()));
            } else {
                s.push_str(&paint(tone, &padded));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(cols.iter().map(|c| (c.head.to_string(), head)).collect());
    line(
        widths
            .iter()
            .map(|w| ("-".repeat(*w), head))
            .collect::<Vec<_>>(),
    );
    for r in 0..rows {
        line(
            cols.iter()
                .map(|c| {
                    c.cells
                        .get(r)
                        .map(|(t, tone)| (t.clone(), *tone))
                        .unwrap_or((String::new(), head))
                })
                .collect(),
        );
    }
    out
}

/// `text` wrapped at `width` (none: one line): the first line starts with
/// `first`, the others with `rest`; words longer than a line are cut.
pub fn wrap(text: &str, width: Option<usize>, first: &str, rest: &str) -> Vec<String> {
    let Some(width) = width else {
        return vec![format!("{first}{text}")];
    };
    let mut lines = Vec::new();
    let mut cur = first.to_string();
    let mut empty = true;
    let indent = |first_line: bool| if first_line { first } else { rest };
    for word in text.split_whitespace() {
        let room = width.saturating_sub(cur.chars().count() + usize::from(!empty));
        if word.chars().count() <= room {
            if !empty {
                cur.push(' ');
            }
            cur.push_str(word);
            empty = false;
            continue;
        }
        if !empty {
            lines.push(std::mem::replace(&mut cur, indent(false).to_string()));
        }
        // A word longer than a whole line goes on in pieces.
        let mut w: Vec<char> = word.chars().collect();
        let line_room = width.saturating_sub(cur.chars().count()).max(8);
        while w.len() > line_room {
            let piece: String = w.drain(..line_room).collect();
            cur.push_str(&piece);
            lines.push(std::mem::replace(&mut cur, indent(false).to_string()));
        }
        cur.push_str(&w.into_iter().collect::<String>());
        empty = false;
    }
    if !empty || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(head: &'static str, keep: u8, cells: &[&str]) -> Column<()> {
        Column {
            head,
            left: false,
            keep,
            cells: cells.iter().map(|c| (c.to_string(), ())).collect(),
        }
    }

    fn plain(_: (), s: &str) -> String {
        s.to_string()
    }

    fn sample() -> Vec<Column<()>> {
        vec![
            Column {
                left: true,
                ..col("Test", KEEP, &["a rather long test name here"])
            },
            col("Received", KEEP, &["1234567"]),
            col("CPU", 1, &["99"]),
            col("Drops", 5, &["0"]),
            col("Loss %", 9, &["0.125"]),
        ]
    }

    #[test]
    fn columns_go_by_priority_blank_ones_first_then_the_first_is_cut() {
        let full = render(&fit(sample(), None).0, (), &plain);
        assert!(full.lines().all(|l| l.chars().count() <= 60), "{full}");
        let cols = sample();
        // 28 + 8 + 3 + 5 + 6 + 8 gaps = 58: at 52 the blank Drops goes
        // first although CPU ranks lower; at 49 CPU; at 30 Loss %, then
        // the first column is cut to fit, with "…".
        let (kept, dropped) = fit(cols, Some(52));
        assert_eq!(dropped, ["Drops"]);
        let (kept, dropped) = fit(kept, Some(49));
        assert_eq!(dropped, ["CPU"]);
        let (kept, dropped) = fit(kept, Some(30));
        assert_eq!(dropped, ["Loss %"]);
        let t = render(&kept, (), &plain);
        for l in t.lines() {
            assert!(l.chars().count() <= 30, "{l:?}");
        }
        assert!(t.contains('…'), "{t}");
    }

    #[test]
    fn wrapping_keeps_words_and_indents() {
        let text = "the DUT is the limit: 13014960 of 17883136 frames offered were lost there";
        let lines = wrap(text, Some(30), "  ! ", "    ");
        assert!(lines.len() > 2);
        assert!(lines[0].starts_with("  ! the"));
        for l in &lines {
            assert!(l.chars().count() <= 30, "{l:?}");
        }
        assert!(lines[1..].iter().all(|l| l.starts_with("    ")));
        let back: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        let mut want = vec!["!"];
        want.extend(text.split_whitespace());
        assert_eq!(back, want);
        // No width: one line.
        assert_eq!(wrap(text, None, "> ", "  "), [format!("> {text}")]);
        // A word longer than a line is cut, not lost.
        let long = "x".repeat(50);
        let lines = wrap(&long, Some(20), "", "");
        assert_eq!(lines.concat(), long);
        assert!(lines.iter().all(|l| l.chars().count() <= 20));
    }

    #[test]
    fn columns_env_is_a_width_only_when_it_is_a_sane_number() {
        assert_eq!(from_env(Some("80")), Some(80));
        assert_eq!(from_env(Some(" 100 ")), Some(100));
        assert_eq!(from_env(Some("0")), None);
        assert_eq!(from_env(Some("wide")), None);
        assert_eq!(from_env(None), None);
    }
}
