//! Human-readable text of a report: a short host summary, then one short
//! paragraph per finding (most severe first) with its evidence, impact and
//! fix, then what could not be checked. No I/O; the caller prints it.

use std::fmt::Write as _;

use crate::parse::{count, format_cpu_list};
use crate::pcie::format_link_mbps;
use crate::report::{Facts, Finding, NicFacts, Report, Severity};

/// Text wraps at this column; evidence lines do not (paths stay whole).
const WIDTH: usize = 88;
const INDENT: &str = "            ";
/// Evidence lines shown per finding before the rest is summarised.
const MAX_EVIDENCE_LINES: usize = 16;

/// Renders the report as text; `color` adds ANSI colours to severities.
pub fn render_text(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "linerate doctor: {}", report.root);
    summary(&mut out, &report.facts);
    out.push('\n');

    let mut findings: Vec<&Finding> = report.findings.iter().collect();
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.id.cmp(&b.id)));
    if findings.is_empty() {
        out.push_str("no findings: nothing found on this host that would limit a loadtest\n");
    }
    for f in &findings {
        finding(&mut out, f, color);
    }

    let of = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    if !findings.is_empty() {
        let _ = writeln!(
            out,
            "{} critical, {} warning, {} info",
            of(Severity::Critical),
            of(Severity::Warning),
            of(Severity::Info)
        );
    }
    if !report.skipped.is_empty() {
        let _ = writeln!(out, "\nnot checked ({}):", report.skipped.len());
        for s in &report.skipped {
            let _ = writeln!(out, "  - {s}");
        }
    }
    out
}

fn summary(out: &mut String, facts: &Facts) {
    let mut host = Vec::new();
    if let Some(model) = &facts.cpu_model {
        host.push(model.clone());
    }
    if let Some(n) = facts.cpu_count {
        let smt = match facts.smt_active {
            Some(true) => " (SMT on)",
            Some(false) => " (SMT off)",
            None => "",
        };
        host.push(format!("{}{smt}", count(n, "CPU", "CPUs")));
    }
    if !facts.l3_domains.is_empty() {
        host.push(count(facts.l3_domains.len(), "L3 domain", "L3 domains"));
    }
    if !facts.numa_nodes.is_empty() {
        host.push(count(facts.numa_nodes.len(), "NUMA node", "NUMA nodes"));
    }
    if let Some(k) = &facts.kernel_release {
        host.push(format!("kernel {k}"));
    }
    if !host.is_empty() {
        let _ = writeln!(out, "host:   {}", host.join(", "));
    }
    for nic in facts.nics.iter().filter(|n| n.inspected) {
        let _ = writeln!(out, "nic:    {}", nic_line(nic));
    }
    if let Some(cc) = &facts.tcp.congestion_control {
        let _ = writeln!(out, "tcp:    congestion control {cc}");
    }
}

fn nic_line(nic: &NicFacts) -> String {
    let mut parts = vec![nic.name.clone()];
    if let Some(d) = &nic.driver {
        parts.push(d.clone());
    }
    if let Some(s) = nic.speed_mbps {
        parts.push(format_link_mbps(s));
    }
    if let Some(m) = nic.mtu {
        parts.push(format!("mtu {m}"));
    }
    if let Some(p) = &nic.pcie {
        parts.push(format!(
            "PCIe {} GT/s x{} (max {} GT/s x{})",
            p.current_gts, p.current_width, p.max_gts, p.max_width
        ));
    }
    if let Some(n) = nic.numa_node {
        parts.push(format!("node {n}"));
    }
    if !nic.irqs.is_empty() {
        let mut cpus: Vec<usize> = nic.irqs.iter().flat_map(|i| i.cpus().to_vec()).collect();
        cpus.sort_unstable();
        cpus.dedup();
        parts.push(format!(
            "{} queue IRQs on CPUs {}",
            nic.irqs.len(),
            format_cpu_list(&cpus)
        ));
    }
    parts.join(", ")
}

fn finding(out: &mut String, f: &Finding, color: bool) {
    let label = f.severity.as_str().to_uppercase();
    let (on, off) = match (color, f.severity) {
        (false, _) => ("", ""),
        (true, Severity::Critical) => ("\x1b[1;31m", "\x1b[0m"),
        (true, Severity::Warning) => ("\x1b[1;33m", "\x1b[0m"),
        (true, Severity::Info) => ("\x1b[36m", "\x1b[0m"),
    };
    let _ = writeln!(out, "{on}{label:<8}{off} {} [{}]", f.title, f.id);
    // A 64-queue NIC has 64 IRQ lines; the text shows enough to read and
    // the JSON keeps them all.
    let shown = if f.evidence.len() > MAX_EVIDENCE_LINES {
        MAX_EVIDENCE_LINES - 1
    } else {
        f.evidence.len()
    };
    for (i, e) in f.evidence.iter().take(shown).enumerate() {
        let head = if i == 0 { "  evidence: " } else { INDENT };
        // Tabs (tcp_rmem) would break the alignment; the JSON keeps them.
        let value = e.value.replace('\t', " ");
        let _ = writeln!(out, "{head}{} = {value}", e.path);
    }
    if shown < f.evidence.len() {
        let _ = writeln!(
            out,
            "{INDENT}... and {} more (--json lists all)",
            f.evidence.len() - shown
        );
    }
    wrap(out, "  impact:   ", &f.impact);
    wrap(out, "  fix:      ", &f.fix);
    out.push('\n');
}

/// Word-wraps `text` after `head`, continuing lines with the same indent.
fn wrap(out: &mut String, head: &str, text: &str) {
    let mut line = String::from(head);
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = String::from(INDENT);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_width_and_indent() {
        let mut out = String::new();
        wrap(&mut out, "  fix:      ", &"word ".repeat(40));
        for line in out.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
        assert!(out.lines().nth(1).unwrap().starts_with(INDENT));
    }

    #[test]
    fn colour_only_when_asked() {
        let report = Report {
            root: "/".into(),
            findings: vec![Finding {
                id: "irqbalance_running".into(),
                severity: Severity::Warning,
                title: "irqbalance is running".into(),
                evidence: vec![],
                impact: "i".into(),
                fix: "f".into(),
                subject: None,
            }],
            facts: Facts::default(),
            skipped: vec![],
        };
        assert!(!render_text(&report, false).contains('\x1b'));
        assert!(render_text(&report, true).contains("\x1b[1;33mWARNING"));
    }
}
