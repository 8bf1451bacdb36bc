//! The summary table: one row per test and direction, in the seed
//! write-ups' terms, with the pills that flag a row and the legend.

use super::{bar, chart_anchor, dash, loss_tone, num, pill, LOSS_BAD};
use crate::report::figures::{self, dir_label, is_tcp};
use crate::report::format::{self as fmt, esc};
use crate::report::registry;
use crate::results::{DirectionResult, RunResults, TestResult, TestStatus};

/// Summary: one row per test and direction, in the seed write-ups' terms.
pub fn summary_table(r: &RunResults, prefix: &str) -> String {
    let mut s = String::from(
        "<div class=\"scroll\"><table class=\"summary\"><thead><tr>\
         <th>Test</th><th>Direction</th><th>Frame</th><th>Flows</th>\
         <th class=\"n\">Offered</th><th class=\"n\">Received</th>\
         <th class=\"n\" title=\"frames with FCS; TCP: payload goodput\">L2</th>\
         <th class=\"n\" title=\"L2 + 20 B per frame (preamble, SFD, inter-frame gap)\">L1</th>\
         <th class=\"n\">% of line rate</th><th class=\"n\">Loss</th><th class=\"n\">Lost</th>\
         <th class=\"n\" title=\"send errors, socket overruns, drops on the tester's own interfaces\">Tester drops</th>\
         <th class=\"n\">TCP retransmits</th></tr></thead><tbody>",
    );
    for (i, t) in r.tests.iter().enumerate() {
        let name = test_name(t, prefix, i);
        if t.status != TestStatus::Ok {
            s.push_str(&format!(
                "<tr class=\"failed\" data-test=\"{}\"><td>{name}</td><td colspan=\"12\">{} {}</td></tr>",
                esc(&t.name),
                pill("bad", &format!("{:?}", t.status).to_lowercase(), "the test did not finish"),
                esc(t.error.as_deref().unwrap_or(""))
            ));
            continue;
        }
        for d in &t.directions {
            direction_row(&mut s, t, d, &name);
        }
    }
    s.push_str("</tbody></table></div>");
    s.push_str(&format!(
        "<p class=\"legend\">Line rate {} (L1). Frames include the 4-byte FCS; L1 adds 20 B per frame. \
         TCP rows show payload goodput (per-packet figures do not apply with TSO/GRO). \
         Loss is counted from sequence numbers; reordered and duplicate packets are not loss. \
         <span class=\"swatch warn\"></span> any loss, retransmit or tester drop · \
         <span class=\"swatch bad\"></span> loss over {} or a tester-limited test.</p>",
        fmt::bps(r.line_rate_bps),
        fmt::pct(LOSS_BAD, 0)
    ));
    s
}

/// A test's name cell: a link to its chart, with pills when its counters
/// disagree or a link went down.
fn test_name(t: &TestResult, prefix: &str, i: usize) -> String {
    let name = format!(
        "<a href=\"#{}\">{}</a>{}",
        chart_anchor(prefix, i),
        esc(&t.name),
        if t.cross_checks.iter().any(|c| c.flagged) {
            format!(
                " <a href=\"#{prefix}checks\">{}</a>",
                pill(
                    "bad",
                    "counters disagree",
                    "a kernel cross-check differs by over 1 %"
                )
            )
        } else {
            String::new()
        }
    );
    // A link that went down mid-test: its loss is not the DUT's.
    if t.link_events.is_empty() {
        name
    } else {
        format!(
            "{name} {}",
            pill("bad", "link down", &t.link_events.join("; "))
        )
    }
}

/// The pills beside a direction's name: received figures from iperf3 at
/// the far end, and a tester-limited sender.
fn direction_flags(t: &TestResult, d: &DirectionResult) -> String {
    let mut flags = String::new();
    if let Some(f) = t
        .far_end
        .as_ref()
        .filter(|_| d.receiver.ends_with("(far end)"))
    {
        // Issue 20: this direction's received figures are iperf3's own.
        flags.push_str(&pill(
            "info",
            "far end: iperf3",
            &format!(
                "received figures from the iperf3 {} at {} (its results exchange)",
                f.role, f.address
            ),
        ));
    }
    // By the verdict's own rule: a short sender whose frames the
    // DUT lost is the DUT's evidence, not the tester's limit.
    if crate::results::bottleneck::direction_tester_limited(d) {
        flags.push_str(&pill(
            "bad",
            "tester-limited",
            "the sender could not offer the rate asked for: this measures the tester",
        ));
    }
    flags
}

/// One direction's row of a test that finished.
fn direction_row(s: &mut String, t: &TestResult, d: &DirectionResult, name: &str) {
    let tcp = is_tcp(t);
    let unit_fmt = |v: f64| if tcp { fmt::bps(v) } else { fmt::pps(v) };
    let offered = figures::offered(t, d);
    let mut offered_text = unit_fmt(offered);
    if let Some(target) = figures::target_pps(t, d).filter(|_| !tcp) {
        offered_text = format!("{offered_text} of {}", fmt::pps(target));
    }
    let flags = direction_flags(t, d);
    s.push_str(&format!(
        "<tr data-test=\"{}\" data-direction=\"{}\"><td>{name} {flags}</td><td>{}</td><td>{}</td><td>{}</td>",
        esc(&t.name),
        esc(&d.direction),
        esc(&dir_label(&d.direction)),
        esc(&figures::frame_label(t)),
        esc(&figures::flows_label(t)),
    ));
    s.push_str(&num(
        if tcp {
            "tx_goodput_bps"
        } else {
            registry::TX_PPS.key
        },
        offered,
        &offered_text,
        "",
    ));
    s.push_str(&num(
        registry::received(t).key,
        figures::received(t, d),
        &unit_fmt(figures::received(t, d)),
        "strong",
    ));
    s.push_str(&num(
        registry::RX_L2_BPS.key,
        d.rx_l2_bps,
        &fmt::bps(d.rx_l2_bps),
        "",
    ));
    s.push_str(&match d.rx_l1_bps {
        Some(v) => num(registry::RX_L1_BPS.key, v, &fmt::bps(v), ""),
        None => dash(),
    });
    s.push_str(&match d.line_rate_pct {
        Some(p) => bar(
            p / 100.0,
            &format!("{p:.1} %"),
            registry::LINE_RATE_PCT.key,
            p,
        ),
        None => dash(),
    });
    loss_cells(s, d, tcp);
    s.push_str("</tr>");
}

/// A direction's loss, lost, tester drops and retransmit cells: dashes for
/// what its protocol does not count.
fn loss_cells(s: &mut String, d: &DirectionResult, tcp: bool) {
    if tcp {
        s.push_str(&dash());
        s.push_str(&dash());
        s.push_str(&dash());
        let retr = d.retransmits.unwrap_or(0);
        s.push_str(&num(
            registry::RETRANSMITS.key,
            retr as f64,
            &fmt::count(retr),
            if retr > 0 { "warn" } else { "" },
        ));
    } else {
        s.push_str(&num(
            registry::LOSS_RATIO.key,
            d.loss_ratio,
            &fmt::pct(d.loss_ratio, 3),
            loss_tone(d.loss_ratio),
        ));
        s.push_str(&num(
            "lost",
            d.lost as f64,
            &fmt::count(d.lost),
            loss_tone(d.loss_ratio),
        ));
        s.push_str(&num(
            "tester_drops",
            d.tester_drops as f64,
            &fmt::count(d.tester_drops),
            if d.tester_drops > 0 { "warn" } else { "" },
        ));
        s.push_str(&dash());
    }
}
