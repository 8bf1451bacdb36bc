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

/// A test's notes: engines, latency, the bottleneck verdict, flagged
/// cross-checks.
fn test_notes(t: &TestResult, notes: &mut Vec<(String, Tone)>) {
    if t.params.omit_s > 0.0 {
        notes.push((
            format!(
                "{}: the first {} s were sent and left out of these figures (--omit); they cover the {} s after",
                t.name, t.params.omit_s, t.params.duration_s
            ),
            Tone::Plain,
        ));
    }
    if let Some(n) = window_note(t) {
        notes.push((format!("{}: {n}", t.name), Tone::Plain));
    }
    if let Some(n) = tx_engine_note(t) {
        notes.push((format!("{}: {n}", t.name), Tone::Plain));
    }
    if let Some(n) = rx_engine_note(t) {
        notes.push((format!("{}: {n}", t.name), Tone::Plain));
    }
    if let Some(n) = super::dscp::note(t) {
        notes.push((format!("{}: {n}", t.name), Tone::Warn));
    }
    if let Some(b) = &t.dut_bond {
        notes.push((format!("{}: {}", t.name, b.note), Tone::Plain));
    }
    if let Some(l) = &t.latency {
        notes.push((
            format!("{}: {}", t.name, super::latency::note(l)),
            Tone::Plain,
        ));
    }
    if let Some(h) = &t.http {
        if let Some(n) = http_requests_note(h) {
            notes.push((format!("{}: {n}", t.name), Tone::Plain));
        }
        if let Some(n) = &h.retransmit_note {
            notes.push((format!("{}: {n}", t.name), Tone::Warn));
        }
    }
    if let Some(b) = &t.bottleneck {
        let tone = match super::figures::verdict_tone(b.kind) {
            "bad" => Tone::Bad,
            "ok" => Tone::Plain,
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

/// What the kernel made of `--window`: each direction's SO_SNDBUF at the
/// sender and SO_RCVBUF at the receiver, said when they differ from the
/// request.
fn window_note(t: &TestResult) -> Option<String> {
    let asked = t.params.window_bytes?;
    let kib = |b: u32| format!("{} KiB", b / 1024);
    let got: Vec<String> = t
        .directions
        .iter()
        .filter_map(|d| Some((d, d.socket_buffers?)))
        .filter(|(_, b)| b.sender_sndbuf_bytes != asked || b.receiver_rcvbuf_bytes != asked)
        .map(|(d, b)| {
            format!(
                "{} SO_SNDBUF {}, SO_RCVBUF {}",
                d.direction,
                kib(b.sender_sndbuf_bytes),
                kib(b.receiver_rcvbuf_bytes)
            )
        })
        .collect();
    if got.is_empty() {
        return Some(format!(
            "--window {}: the kernel gave what was asked",
            kib(asked)
        ));
    }
    Some(format!(
        "--window {} asked; the kernel gave {} (Linux reports twice the request, half for its \
         own bookkeeping, capped by net.core.wmem_max/rmem_max where the agent may not pass them)",
        kib(asked),
        got.join("; ")
    ))
}

/// An HTTP test's requests: rate, latency percentiles, status codes and
/// failed requests by kind.
fn http_requests_note(h: &crate::results::HttpResult) -> Option<String> {
    let c = &h.client;
    let l = c.latency.as_ref()?;
    let ms = |us: u64| format!("{:.2}", us as f64 / 1000.0);
    let corrected = match (c.rate_per_s, &c.latency_uncorrected) {
        (Some(r), Some(u)) => format!(
            " from intended send times at {r:.0} requests/s (from actual send times: p99 {} ms)",
            ms(u.p99_us)
        ),
        _ => String::new(),
    };
    Some(format!(
        "{:.0} requests/s; latency p50 {} ms, p90 {}, p99 {}, p99.9 {}{corrected}; status {}; \
         errors {}",
        h.requests_per_s,
        ms(l.p50_us),
        ms(l.p90_us),
        ms(l.p99_us),
        ms(l.p999_us),
        super::http::status_counts(c),
        super::http::error_kinds(c),
    ))
}

/// The footer's lines on what the run ran on: each lab's cores, stick
/// and DUT VM with its notes, a plan's VM hosts, and the stick DUT's own
/// counts per test.
fn setup_lines(r: &RunResults) -> Vec<String> {
    let mut footer: Vec<String> = Vec::new();
    for lab in &r.labs {
        if let Some(c) = &lab.cores {
            let what = lab.dut_mode.as_deref().unwrap_or("back to back");
            footer.push(format!("Cores ({what}): {}.", c.summary));
        }
        if let Some(st) = &lab.stick {
            footer.push(format!("DUT: {st}."));
        }
        if let Some(vm) = lab.vm.as_ref().filter(|v| v.user_router.is_some()) {
            footer.push(format!(
                "DUT: {} — {}, {} vCPU, {} MiB, {} NICs on taps; forwarding {:.1} s after its boot ({}). Its figures are a virtual DUT's, not hardware's.",
                vm.kind(),
                vm.user_router.as_deref().unwrap_or_default(),
                vm.vcpus,
                vm.memory_mib,
                vm.nic_model,
                vm.boot_s,
                vm.accel_reason
            ));
        } else if let Some(vm) = &lab.vm {
            footer.push(format!(
                "DUT: {}. Its figures are a virtual DUT's, not hardware's.",
                vm.describe()
            ));
        }
        for n in &lab.notes {
            footer.push(format!("Note: {n}"));
        }
    }
    // A plan's VM hosts: what every figure measured on them ran on.
    for a in &r.agents {
        if let Some(vm) = &a.vm {
            footer.push(format!(
                "Host {}: {}. Its figures are a virtual host's, not hardware's.",
                a.role,
                vm.describe()
            ));
        }
    }
    // The stick DUT's own counts, beside what the ends counted.
    for t in r.tests.iter().filter(|t| t.dut_stick.is_some()) {
        if let Some(c) = &t.dut_stick {
            footer.push(format!(
                "{}: the stick DUT forwarded {} frames VLAN {}→{} ({} dropped) and {} VLAN {}→{} \
                 ({} dropped); {} passed to its stack.",
                t.name,
                c.a_to_b_forwarded,
                c.vlan_a,
                c.vlan_b,
                c.a_to_b_dropped,
                c.b_to_a_forwarded,
                c.vlan_b,
                c.vlan_a,
                c.b_to_a_dropped,
                c.passed
            ));
        }
    }
    footer
}

/// The results tables (UDP rows and TCP/HTTP rows apart, each with its own
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
    lines: Option<super::intervals::IntervalLines>,
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
        self.lines = Some(super::intervals::IntervalLines::new(every_s, to_stdout));
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
mod tests;
