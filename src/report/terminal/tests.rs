use super::notes::rx_engine_note;
use super::progress::LossSoFar;
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

/// The verdict `analyse` gives a one-direction test over two quiet
/// cores, from the test's own frames.
fn verdict_of(t: &TestResult) -> crate::results::Bottleneck {
    use crate::proto::{CpuTicks, Snapshot};
    use crate::results::bottleneck::{analyse, AgentCpu, Traffic};
    let cores = |idle: u64| Snapshot {
        per_cpu: (0..2)
            .map(|cpu| CpuTicks {
                cpu,
                user: 100,
                idle,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let (b, a) = (cores(1000), cores(1900));
    let agents = [AgentCpu {
        host: "lab".into(),
        role: "gen".into(),
        before: &b,
        after: &a,
    }];
    let d = &t.directions[0];
    let traffic = Traffic {
        offered: d.tx_packets,
        dut_lost: d.dut_lost,
        tester_drops: d.tester_drops,
        asked: d.tx_target,
        received: d.rx_packets,
        ..Default::default()
    };
    analyse(&agents, 10.0, Some(traffic), None).unwrap()
}

/// Issue 33 (a): the ramp row whose sender fell short while the DUT
/// lost a quarter of its frames said "this row measures the tester"
/// beside the verdict "the DUT is the limit". The row is the DUT's
/// evidence; the same row without loss is the tester's, in both texts.
#[test]
fn issue_33_a_row_never_says_both_tester_and_dut() {
    let r = testdata::ramp();
    let mut t = r.tests[0].clone();
    // Recorded before the rule: the short sender marked tester-limited
    // although the DUT lost frames.
    assert!(t.directions[0].tester_limited && t.directions[0].dut_lost > 0);
    for lossless in [false, true] {
        if lossless {
            let d = &mut t.directions[0];
            d.rx_packets = d.tx_packets;
            (d.lost, d.dut_lost, d.loss_ratio) = (0, 0, 0.0);
        }
        t.bottleneck = Some(verdict_of(&t));
        let mut notes = Vec::new();
        udp_columns(&[&t], &mut notes);
        let texts: Vec<&str> = notes.iter().map(|(n, _)| n.as_str()).collect();
        let tester = texts.iter().any(|n| n.contains("measures the tester"));
        let dut = texts
            .iter()
            .any(|n| n.contains("the DUT is the limit") || n.contains("(the DUT or the link)"));
        assert!(!(tester && dut), "both verdicts on one row: {texts:#?}");
        assert_eq!((tester, dut), (lossless, !lossless), "{texts:#?}");
    }
}

#[test]
fn a_plan_s_vm_host_is_named_virtual_under_the_table() {
    let out = table_styled(&testdata::with_vm_host(), Style::PLAIN);
    assert!(
        out.contains(
            "Host r1: virtual (TCG-emulated) — a VM with kernel 6.1.0-41-amd64, 2 vCPU, \
             512 MiB, virtio-net-pci NICs on taps; booted in 6.2 s (asked for). Its figures \
             are a virtual host's, not hardware's."
        ),
        "{out}"
    );
    let plain = table_styled(&testdata::lab(), Style::PLAIN);
    assert!(!plain.contains("virtual host"), "{plain}");
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
fn tables_fit_80_and_100_columns_and_say_what_they_left_out() {
    let r = testdata::lab();
    let full = table_fit(&r, Style::PLAIN, None);
    let widest = full.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest > 100, "the fixture is wide enough to test: {widest}");
    for w in [80, 100] {
        let out = table_fit(&r, Style::PLAIN, Some(w));
        for l in out.lines() {
            assert!(l.chars().count() <= w, "{w}: {l:?}");
        }
        // The figures that answer the question stay.
        assert!(
            out.contains("Received pps") && out.contains("Loss %"),
            "{out}"
        );
        assert!(out.contains("Left out to fit"), "{out}");
        // Every note is still there, wrapped.
        let words = |s: &str| s.split_whitespace().count();
        let notes = |s: &str| s[s.find("Notes:").unwrap_or(0)..].to_string();
        assert_eq!(words(&notes(&out)), words(&notes(&full)), "{out}");
    }
}

#[test]
fn tcp_rows_get_their_own_table_with_goodput_retransmits_rtt_cwnd() {
    let r = testdata::lab();
    let out = table_styled(&r, Style::PLAIN);
    let blocks: Vec<&str> = out.split("\n\n").collect();
    let tcp = blocks
        .iter()
        .find(|b| b.starts_with("Test") && b.contains("Goodput Gbit/s"))
        .expect("a TCP table");
    for h in ["Retransmits", "RTT ms", "cwnd"] {
        assert!(tcp.contains(h), "{tcp}");
    }
    assert!(!tcp.contains("Loss %") && !tcp.contains(" retr"), "{tcp}");
    let udp = blocks
        .iter()
        .find(|b| b.starts_with("Test") && b.contains("Received pps"))
        .expect("a UDP table");
    assert!(!udp.contains("tcp "), "{udp}");
    for h in ["Asked pps", "Offered pps", "Loss %"] {
        assert!(udp.contains(h), "{udp}");
    }
}

#[test]
fn the_asked_rate_stands_beside_offered_and_received() {
    let r = testdata::paced();
    let out = table_styled(&r, Style::PLAIN);
    let d = &r.tests[0].directions[0];
    let asked = format!(
        "{:.0}",
        super::super::figures::target_pps(&r.tests[0], d).unwrap_or_default()
    );
    let row = out
        .lines()
        .find(|l| l.starts_with(&r.tests[0].name))
        .expect("the paced row");
    assert!(row.contains(&asked), "asked {asked}: {row}");
}

/// The legend under the tables, the text after the last table.
fn legend_of(out: &str) -> String {
    let end = out.find("\nNotes:").unwrap_or(out.len());
    out[..end].rsplit("\n\n").next().unwrap_or("").to_string()
}

/// Issue 38 (a): on veth no row has a line rate, and every "% line"
/// cell was "-" under a legend saying what it is of. A column with no
/// figure is not printed, nor its legend; one row with a figure brings
/// both back.
#[test]
fn issue_38_no_line_rate_no_percent_column_no_legend_for_it() {
    let mut r = testdata::lab();
    for t in &mut r.tests {
        for d in &mut t.directions {
            d.line_rate_pct = None;
        }
    }
    let out = table_styled(&r, Style::PLAIN);
    assert!(!out.contains("% line"), "{out}");
    assert!(!out.contains("Line rate"), "{out}");
    let udp = r
        .tests
        .iter()
        .position(|t| !super::super::figures::is_tcp(t));
    let d = &mut r.tests[udp.expect("a UDP test")].directions[0];
    d.line_rate_pct = Some(12.5);
    let out = table_styled(&r, Style::PLAIN);
    assert!(out.contains("% line") && out.contains("12.5"), "{out}");
    assert!(
        legend_of(&out).contains("Line rate 10.00 G bit/s (L1); % line is of it."),
        "{out}"
    );
}

/// Issue 38 (b): a TCP-only run's legend said what FCS, L1 and Asked
/// are, none of which its table shows.
#[test]
fn issue_38_a_tcp_table_gets_only_its_own_legend() {
    let mut r = testdata::lab();
    r.tests.retain(super::super::figures::is_tcp);
    assert!(!r.tests.is_empty());
    let out = table_styled(&r, Style::PLAIN);
    let legend = legend_of(&out);
    for absent in ["FCS", "L1", "Asked", "Line rate", "% line"] {
        assert!(!legend.contains(absent), "{absent}: {legend}");
    }
    for present in ["payload goodput", "RTT and cwnd", "CPU gen/sink %"] {
        assert!(legend.contains(present), "{present}: {legend}");
    }
    // A UDP table brings its own sentences, and a column left out to
    // fit the width takes its sentence with it.
    let mut r = testdata::lab();
    r.tests.retain(|t| !super::super::figures::is_tcp(t));
    let legend = legend_of(&table_styled(&r, Style::PLAIN));
    assert!(
        legend.contains("FCS") && legend.contains("Asked:"),
        "{legend}"
    );
    assert!(!legend.contains("goodput"), "{legend}");
    let narrow = table_fit(&r, Style::PLAIN, Some(80));
    assert!(narrow.contains("Left out to fit"), "{narrow}");
    if !narrow.lines().next().unwrap_or("").contains("Asked pps") {
        assert!(!legend_of(&narrow).contains("Asked:"), "{narrow}");
    }
}

/// Issue 38 (c): `--rate 200kpps` showed "Asked pps 199976": the
/// frames due over the sender's measured run time (a little over the
/// duration). The rate asked is the one given.
#[test]
fn issue_38_asked_pps_is_the_rate_asked_exactly() {
    let mut r = testdata::paced();
    let t = &mut r.tests[0];
    t.params.rate_pps = Some(200_000.0);
    t.params.rate_profile = None;
    let d = &mut t.directions[0];
    d.duration_s = 10.0012;
    d.tx_target = 2_000_000;
    let out = table_styled(&r, Style::PLAIN);
    let row = out
        .lines()
        .find(|l| l.starts_with(&r.tests[0].name))
        .expect("the paced row");
    assert!(row.contains("200000") && !row.contains("199976"), "{row}");
    assert_eq!(
        super::super::figures::target_pps(&r.tests[0], &r.tests[0].directions[0]),
        Some(200_000.0)
    );
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
        ..Default::default()
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
    // An idle sender keeps the packet unit.
    p.tx_pps = 0.0;
    p.tx_bps = 0.0;
    let text = progress_text(&p, so_far, Style::PLAIN);
    assert!(text.contains("offered 0.00 pps"), "{text}");
    // A new test starts from zero.
    p.test = "next".into();
    p.loss_ratio = 0.0;
    p.rx_pps = 5.0;
    assert_eq!(l.update(&p), 0.0);
}
