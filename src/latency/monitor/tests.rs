//! Tests of the latency monitor.

use super::*;

fn summary(targets: Vec<metrics::TargetSummary>) -> MonitorSummary {
    MonitorSummary {
        started_at: String::new(),
        finished_at: String::new(),
        duration_s: 3.0,
        journal: PathBuf::from("j"),
        interrupted: false,
        error: None,
        targets,
        max_rss_bytes: 0,
    }
}

#[test]
fn the_table_has_a_line_per_target_with_its_loss_and_percentiles() {
    let mut m = metrics::Metrics::default();
    let t = m.target("ns:lab=198.18.0.2", "udp");
    for ms in [0.1, 0.2, 0.3, 0.4] {
        t.observe(ms / 1e3);
    }
    t.sent = 5;
    t.lost = 1;
    t.partial_windows = 1;
    m.target("icmp=198.18.0.9", "icmp").sent = 3;
    m.targets[1].lost = 3;
    m.targets[1].windows = 2;
    let s = summary(m.targets.iter().map(|t| t.summary()).collect());
    let table = summary_table(&s);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[0].starts_with("Target") && lines[0].contains("p99"),
        "{table}"
    );
    let udp: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        udp[..4],
        ["ns:lab=198.18.0.2", "5", "4", "20.00"],
        "{table}"
    );
    // min avg p50 p99 max, ms (HDR: 3 significant digits)
    assert_eq!(udp[4], "0.100", "{table}");
    assert_eq!(udp[8], "0.400", "{table}");
    assert!(lines[2].ends_with("0 + 1 partial"), "{table}");
    let icmp: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(
        icmp,
        [
            "icmp=198.18.0.9",
            "3",
            "0",
            "100.00",
            "-",
            "-",
            "-",
            "-",
            "-",
            "2"
        ]
    );
    let sum = &s.targets[0];
    let r = sum.rtt_ms.unwrap();
    assert!(
        (r.mean - 0.25).abs() < 0.001 && (r.p50 - 0.2).abs() < 0.001,
        "{r:?}"
    );
    assert_eq!((sum.windows, sum.partial_windows), (0, 1));
}

#[test]
fn no_targets_says_so() {
    assert!(summary_table(&summary(vec![])).contains("no target was probed"));
}
