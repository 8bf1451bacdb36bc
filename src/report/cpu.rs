//! Where the CPU time went during each test: a stacked bar per core and host
//! (user, system, softirq, irq) and the bottleneck verdict
//! ([`crate::results::bottleneck`]) above it, for the report's CPU section.

use super::charts::{axis, series, sig, Chart};
use super::format::esc;
use crate::results::{CpuLoad, RunResults, TestResult};

/// The stack, bottom first: (label, colour, value).
type Part = (&'static str, &'static str, fn(&CpuLoad) -> f64);
const PARTS: [Part; 4] = [
    ("user", "#1f5fa8", |c| c.user_pct),
    ("system", "#c8590f", |c| c.system_pct),
    ("softirq", "#2a9d3f", |c| c.softirq_pct),
    ("irq", "#8c2d9c", |c| c.irq_pct),
];

/// Chart id of test `i`'s per-core chart.
pub fn cpu_anchor(prefix: &str, i: usize) -> String {
    format!("{prefix}cpu{i}")
}

/// One stacked bar chart per test that has a bottleneck record.
pub fn cpu_charts(prefix: &str, r: &RunResults) -> Vec<Chart> {
    r.tests
        .iter()
        .enumerate()
        .filter_map(|(i, t)| cpu_chart(&cpu_anchor(prefix, i), t))
        .collect()
}

pub fn cpu_chart(id: &str, t: &TestResult) -> Option<Chart> {
    let b = t.bottleneck.as_ref()?;
    let cores = &b.host_cpus;
    if cores.is_empty() {
        return None;
    }
    let many_hosts = cores.iter().any(|c| c.host != cores[0].host);
    let x_labels: Vec<String> = cores
        .iter()
        .map(|c| {
            if many_hosts {
                format!("{} CPU{}", c.host, c.cpu)
            } else {
                format!("CPU{}", c.cpu)
            }
        })
        .collect();
    // Parts no core used are left out: an empty series draws nothing.
    let parts: Vec<&Part> = PARTS
        .iter()
        .filter(|(_, _, f)| cores.iter().any(|c| f(c) >= 0.05))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let mut data = vec![(0..cores.len()).map(|i| Some(i as f64)).collect()];
    let mut list = Vec::new();
    // Cumulative tops, tallest first, so each later bar covers the one below.
    for k in (0..parts.len()).rev() {
        let (label, color, _) = parts[k];
        list.push(series(
            label.to_string(),
            "pct",
            color,
            &format!("cpu_{label}"),
        ));
        data.push(
            cores
                .iter()
                .map(|c| Some(sig(parts[..=k].iter().map(|(_, _, f)| f(c)).sum())))
                .collect(),
        );
    }
    for s in &mut list {
        s.line = "bars".into();
    }
    Some(Chart {
        id: id.into(),
        title: format!("{}: CPU per core", t.name),
        x: axis("x", "core", "core", None),
        y: vec![axis("pct", "busy, stacked (top of each part)", "%", Some(0.0))],
        series: list,
        data,
        note: "Busy time of each core over the test, stacked: user, system, softirq (packet processing), irq; hover shows the top of each part. Agents on one host share its cores.".into(),
        steps: false,
        marks: Vec::new(),
        x_labels,
    })
}

/// The CPU section's verdicts: one line per test, with a per-core table of
/// the busiest cores and linerate's threads there.
pub fn verdicts(r: &RunResults, prefix: &str, charts: &[Chart]) -> String {
    let mut s = String::new();
    for (i, t) in r.tests.iter().enumerate() {
        let Some(b) = &t.bottleneck else { continue };
        let tone = super::figures::verdict_tone(b.kind);
        s.push_str(&format!(
            "<div class=\"bottleneck\" data-test=\"{name}\" data-kind=\"{kind}\">\
             <h3>{name}</h3><p class=\"verdict {tone}\">{verdict}</p>",
            name = esc(&t.name),
            kind = esc(&format!("{:?}", b.kind)),
            verdict = esc(&b.verdict),
        ));
        let id = cpu_anchor(prefix, i);
        if let Some(c) = charts.iter().find(|c| c.id == id) {
            s.push_str(&super::charts::chart_figure(c, "busy % per core"));
        }
        s.push_str(&table(&b.host_cpus));
        s.push_str("</div>");
    }
    s
}

fn table(cores: &[CpuLoad]) -> String {
    let mut s = String::from(
        "<details><summary>Per-core figures</summary><div class=\"scroll\"><table class=\"cores\"><thead><tr>\
         <th>Host</th><th>CPU</th><th>Busy %</th><th>User %</th><th>System %</th><th>Softirq %</th>\
         <th>IRQ %</th><th>Other %</th><th>NET_RX/s</th><th>NET_TX/s</th><th>linerate threads</th></tr></thead><tbody>",
    );
    for c in cores {
        let threads: Vec<String> = c
            .threads
            .iter()
            .map(|t| format!("{} {} {:.0} %", t.role, t.name, t.cpu_pct))
            .collect();
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td>\
             <td>{:.1}</td><td>{:.1}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td></tr>",
            esc(&c.host),
            c.cpu,
            c.busy_pct,
            c.user_pct,
            c.system_pct,
            c.softirq_pct,
            c.irq_pct,
            c.other_pct,
            c.net_rx_per_s,
            c.net_tx_per_s,
            esc(&threads.join(", "))
        ));
    }
    s.push_str("</tbody></table></div></details>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Bottleneck, ThreadLoad};

    fn load(cpu: u32, user: f64, system: f64, softirq: f64) -> CpuLoad {
        CpuLoad {
            host: "lab".into(),
            cpu,
            busy_pct: user + system + softirq,
            user_pct: user,
            system_pct: system,
            softirq_pct: softirq,
            threads: vec![ThreadLoad {
                role: "gen".into(),
                name: "lr-udp-send".into(),
                cpu_pct: 90.0,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn stacked_bars_per_core_tallest_first() {
        let mut t = crate::report::testdata::udp_test("self-test", 64);
        t.bottleneck = Some(Bottleneck {
            verdict: "CPU0 100 %".into(),
            kind: crate::results::BottleneckKind::TesterSender,
            host: "lab".into(),
            cpu: Some(0),
            host_cpus: vec![load(0, 10.0, 40.0, 50.0), load(1, 20.0, 5.0, 0.0)],
            vcpus: Vec::new(),
        });
        let c = cpu_chart("cpu0", &t).unwrap();
        assert_eq!(c.x_labels, ["CPU0", "CPU1"]);
        let labels: Vec<&str> = c.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["softirq", "system", "user"],
            "irq unused, left out"
        );
        assert_eq!(c.data[1], [Some(100.0), Some(25.0)]);
        assert_eq!(c.data[3], [Some(10.0), Some(20.0)]);
        assert!(c.series.iter().all(|s| s.line == "bars"));
        let r = crate::results::RunResults {
            tests: vec![t],
            ..crate::report::testdata::lab()
        };
        let html = verdicts(&r, "", &cpu_charts("", &r));
        assert!(html.contains("CPU0 100 %"));
        assert!(html.contains("data-chart=\"cpu0\""));
        assert!(html.contains("gen lr-udp-send 90 %"));
    }
}
