//! The HTML sections of one run, rendered as plain tables so they read
//! without JavaScript and in print: summary, CPU and efficiency, kernel
//! cross-checks and counters, context (host, lab topology) and doctor
//! findings. Numeric cells carry their raw value in `data-value` and the
//! results field in `data-key`, which the browser test compares with
//! results.json.

use super::figures::is_tcp;
use super::format::{self as fmt, esc};
use crate::results::{RunResults, TestResult, TestStatus};

mod summary;

pub use summary::summary_table;

/// Loss above this ratio is marked bad; any loss at all is marked as a warning.
pub const LOSS_BAD: f64 = 0.01;

/// A numeric cell: formatted text, raw value, field name, tone.
pub fn num(key: &str, value: f64, text: &str, tone: &str) -> String {
    format!(
        "<td class=\"n {tone}\" data-key=\"{key}\" data-value=\"{value}\">{}</td>",
        esc(text)
    )
}

pub fn dash() -> String {
    "<td class=\"n na\">–</td>".into()
}

/// A numeric cell with a bar of `ratio` (0..1) behind the text.
pub fn bar(ratio: f64, text: &str, key: &str, value: f64) -> String {
    let w = (ratio * 100.0).clamp(0.0, 100.0);
    format!(
        "<td class=\"n bar\" data-key=\"{key}\" data-value=\"{value}\">\
         <span class=\"bar-fill\" style=\"width:{w:.1}%\"></span><span class=\"bar-text\">{}</span></td>",
        esc(text)
    )
}

fn loss_tone(ratio: f64) -> &'static str {
    if ratio > LOSS_BAD {
        "bad"
    } else if ratio > 0.0 {
        "warn"
    } else {
        ""
    }
}

fn pill(class: &str, text: &str, title: &str) -> String {
    format!(
        "<span class=\"pill {class}\" title=\"{}\">{}</span>",
        esc(title),
        esc(text)
    )
}

/// Anchor of a test's chart.
pub fn chart_anchor(prefix: &str, i: usize) -> String {
    format!("{prefix}t{i}")
}

fn cpu_of(t: &TestResult, role: &str) -> Option<f64> {
    t.cpu.iter().find(|c| c.role == role).map(|c| c.process_pct)
}

/// A test's cycles and energy per packet cells (dashes without them).
fn efficiency_cells(t: &TestResult) -> String {
    let mut s = String::new();
    match &t.efficiency {
        Some(e) => {
            let notes = e.notes.join("; ");
            s.push_str(&match e.cycles_per_packet {
                Some(c) => format!(
                    "<td class=\"n\" data-key=\"cycles_per_packet\" data-value=\"{c}\" title=\"{}\">{}{}</td>",
                    esc(&notes),
                    fmt::count(c.round() as u64),
                    if e.cycles_source == "perf" {
                        String::new()
                    } else {
                        format!(" <span class=\"muted\">({})</span>", esc(&e.cycles_source))
                    }
                ),
                None => dash(),
            });
            s.push_str(&match e.energy_uj_per_packet {
                Some(j) => num("energy_uj_per_packet", j, &format!("{j:.3} µJ"), ""),
                None => format!("<td class=\"n na\" title=\"{}\">–</td>", esc(&notes)),
            });
        }
        None => {
            s.push_str(&dash());
            s.push_str(&dash());
        }
    }
    s
}

/// CPU use per endpoint and the efficiency figures of each test.
pub fn cpu_table(r: &RunResults) -> String {
    let mut s = String::from(
        "<div class=\"scroll\"><table class=\"cpu\"><thead><tr><th>Test</th>\
         <th class=\"n\" title=\"agent process, % of all the host's CPUs\">gen CPU</th>\
         <th class=\"n\" title=\"agent process, % of all the host's CPUs\">DUT CPU</th>\
         <th class=\"n\" title=\"agent process, % of all the host's CPUs\">sink CPU</th>\
         <th class=\"n\" title=\"system-wide softirq share of all cores: on veth the DUT's forwarding runs here\">softirq (all cores)</th>\
         <th class=\"n\" title=\"sender CPU time per packet sent\">gen CPU per packet</th>\
         <th class=\"n\">cycles per packet</th><th class=\"n\">energy per packet</th>\
         <th class=\"n\" title=\"peak resident memory of the sending agent\">gen peak RSS</th></tr></thead><tbody>",
    );
    for t in r.tests.iter().filter(|t| t.status == TestStatus::Ok) {
        s.push_str(&format!(
            "<tr data-test=\"{}\"><td>{}</td>",
            esc(&t.name),
            esc(&t.name)
        ));
        for role in ["gen", "dut", "sink"] {
            s.push_str(&match cpu_of(t, role) {
                Some(v) => bar(
                    v / 100.0,
                    &format!("{v:.0} %"),
                    &format!("cpu_{role}_pct"),
                    v,
                ),
                None => dash(),
            });
        }
        let softirq = t.cpu.first().map(|c| c.softirq_pct);
        s.push_str(&match softirq {
            Some(v) => bar(v / 100.0, &format!("{v:.0} %"), "softirq_pct", v),
            None => dash(),
        });
        let sent: u64 = t
            .directions
            .iter()
            .map(|d| d.sender_summary.tx_packets)
            .sum();
        let cpu_s: f64 = t
            .directions
            .iter()
            .filter(|d| d.sender == "gen")
            .map(|d| d.sender_summary.cpu_s)
            .fold(0.0, f64::max);
        s.push_str(&if sent > 0 && !is_tcp(t) {
            let ns = cpu_s / sent as f64 * 1e9;
            num("gen_cpu_ns_per_packet", ns, &format!("{ns:.0} ns"), "")
        } else {
            dash()
        });
        s.push_str(&efficiency_cells(t));
        let rss = t
            .directions
            .iter()
            .map(|d| d.sender_summary.max_rss_bytes)
            .max()
            .unwrap_or(0);
        s.push_str(&if rss > 0 {
            num("max_rss_bytes", rss as f64, &fmt::bytes(rss), "")
        } else {
            dash()
        });
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div><p class=\"legend\">CPU: each agent's user + system time over the test in % of all its host's CPUs (100 % = every CPU busy). \
        softirq: share of all the host's CPUs system-wide, where veth forwarding (the DUT's work) is accounted. \
        Cycles per packet: all cores' cycles per received packet (hardware counters, or an estimate from busy time × nominal clock, as marked; hover for why).</p>");
    s
}

/// A test's kernel interface counters (after − before), folded away.
fn kernel_counters(t: &TestResult) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "<details class=\"counters\"><summary>Kernel interface counters: {} (after − before)</summary>\
         <div class=\"scroll\"><table><thead><tr><th>Node</th><th>Interface</th>\
         <th class=\"n\">rx packets</th><th class=\"n\">rx bytes</th><th class=\"n\">rx dropped</th><th class=\"n\">rx errors</th>\
         <th class=\"n\">tx packets</th><th class=\"n\">tx bytes</th><th class=\"n\">tx dropped</th><th class=\"n\">tx errors</th>\
         <th class=\"n\" title=\"UDP InErrors / RcvbufErrors of the namespace\">UDP in/rcvbuf errors</th></tr></thead><tbody>",
        esc(&t.name)
    ));
    for k in &t.kernel_counters {
        let (a, b) = (&k.after, &k.before);
        let d = |x: u64, y: u64| x.saturating_sub(y);
        let cell = |v: u64, alarm: bool| {
            format!(
                "<td class=\"n {}\">{}</td>",
                if alarm && v > 0 { "warn" } else { "" },
                fmt::count(v)
            )
        };
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td>{}{}{}{}{}{}{}{}<td class=\"n {}\">{} / {}</td></tr>",
            esc(&k.role),
            esc(&k.interface),
            cell(d(a.rx_packets, b.rx_packets), false),
            cell(d(a.rx_bytes, b.rx_bytes), false),
            cell(d(a.rx_dropped, b.rx_dropped), true),
            cell(d(a.rx_errors, b.rx_errors), true),
            cell(d(a.tx_packets, b.tx_packets), false),
            cell(d(a.tx_bytes, b.tx_bytes), false),
            cell(d(a.tx_dropped, b.tx_dropped), true),
            cell(d(a.tx_errors, b.tx_errors), true),
            if k.udp_delta.in_errors + k.udp_delta.rcvbuf_errors > 0 {
                "warn"
            } else {
                ""
            },
            fmt::count(k.udp_delta.in_errors),
            fmt::count(k.udp_delta.rcvbuf_errors),
        ));
    }
    s.push_str("</tbody></table></div></details>");
    s
}

/// Application counters against kernel counters, flagged rows highlighted,
/// and every lab interface's counter deltas.
pub fn checks(r: &RunResults) -> String {
    let flagged: usize = r
        .tests
        .iter()
        .map(|t| t.cross_checks.iter().filter(|c| c.flagged).count())
        .sum();
    let mut s = if flagged > 0 {
        format!(
            "<p class=\"callout bad\"><strong>{flagged} cross-check{} disagree by over 1 %.</strong> \
             Application and kernel counted different packets: a figure below may not be what the wire saw.</p>",
            if flagged == 1 { "" } else { "s" }
        )
    } else {
        "<p class=\"callout ok\">Every application count agrees with the kernel's interface counters within 1 %.</p>"
            .to_string()
    };
    s.push_str(
        "<div class=\"scroll\"><table class=\"checks\"><thead><tr><th>Test</th><th>Check</th>\
         <th class=\"n\">Application</th><th class=\"n\">Kernel</th><th class=\"n\">Difference</th><th></th></tr></thead><tbody>",
    );
    for t in &r.tests {
        for c in &t.cross_checks {
            s.push_str(&format!(
                "<tr class=\"{}\" data-test=\"{}\"><td>{}</td><td>{}</td>{}{}{}<td>{}</td></tr>",
                if c.flagged { "flagged" } else { "" },
                esc(&t.name),
                esc(&t.name),
                esc(&c.what),
                num(
                    "application",
                    c.application as f64,
                    &fmt::count(c.application),
                    ""
                ),
                num("kernel", c.kernel as f64, &fmt::count(c.kernel), ""),
                num(
                    "difference_ratio",
                    c.difference_ratio,
                    &fmt::pct(c.difference_ratio, 2),
                    if c.flagged { "bad" } else { "" }
                ),
                if c.flagged {
                    pill("bad", "over 1 %", "flagged")
                } else {
                    pill("ok", "ok", "within 1 %")
                }
            ));
        }
    }
    s.push_str("</tbody></table></div>");
    for t in r.tests.iter().filter(|t| !t.kernel_counters.is_empty()) {
        s.push_str(&kernel_counters(t));
    }
    s
}

fn dl(rows: &[(&str, String)]) -> String {
    let mut s = String::from("<dl class=\"facts\">");
    for (k, v) in rows {
        s.push_str(&format!("<dt>{}</dt><dd>{v}</dd>", esc(k)));
    }
    s.push_str("</dl>");
    s
}

/// Command line, versions, host facts and sysctls.
pub fn context(r: &RunResults) -> String {
    let h = &r.host;
    let mut s = dl(&[
        ("Run", esc(&r.name)),
        ("Status", esc(&format!("{:?}", r.status).to_lowercase())),
        (
            "Started / finished",
            esc(&format!(
                "{} / {}",
                r.started_at,
                r.finished_at.as_deref().unwrap_or("not finished")
            )),
        ),
        (
            "Command line",
            format!(
                "<code class=\"cmd\">{}</code>",
                esc(&r.command_line.join(" "))
            ),
        ),
        (
            "linerate",
            esc(&format!(
                "{} (results schema {})",
                r.linerate_version, r.schema_version
            )),
        ),
        (
            "Line rate",
            esc(&format!("{} (L1)", fmt::bps(r.line_rate_bps))),
        ),
        ("Host", esc(&h.hostname)),
        ("Kernel", esc(&h.kernel)),
        ("CPU", esc(&format!("{} × {} CPUs", h.cpu_model, h.cpus))),
        ("Memory", esc(&fmt::bytes(h.memory_bytes))),
    ]);
    if let Some(e) = &r.error {
        s.push_str(&format!(
            "<p class=\"callout bad\">The run ended early: {}</p>",
            esc(e)
        ));
    }
    // A plan's VM hosts: their figures are a virtual machine's.
    let vms: Vec<_> = r
        .agents
        .iter()
        .filter_map(|a| Some((a, a.vm.as_ref()?)))
        .collect();
    if !vms.is_empty() {
        s.push_str(
            "<h3>VM hosts</h3><p>Figures measured on these hosts are a virtual machine's, \
             not hardware's.</p><table class=\"kv\"><tbody>",
        );
        for (a, vm) in vms {
            s.push_str(&format!(
                "<tr><th>{}</th><td>{}</td></tr>",
                esc(&a.role),
                esc(&vm.describe())
            ));
        }
        s.push_str("</tbody></table>");
    }
    if !h.sysctls.is_empty() {
        s.push_str("<h3>Sysctls</h3><table class=\"kv\"><tbody>");
        for (k, v) in &h.sysctls {
            s.push_str(&format!(
                "<tr><th>{}</th><td><code>{}</code></td></tr>",
                esc(k),
                esc(v)
            ));
        }
        s.push_str("</tbody></table>");
    }
    s
}

/// Each lab: its nodes with interfaces and addresses, drawn left to right
/// in the order traffic flows, then its links.
pub fn topology(r: &RunResults) -> String {
    if r.labs.is_empty() {
        return "<p class=\"muted\">No lab: the endpoints were given on the command line.</p>"
            .into();
    }
    let mut s = String::new();
    for lab in &r.labs {
        let title = match (&lab.kind[..], &lab.dut_mode) {
            ("back_to_back", _) => "Back to back (tester self-test, no DUT)".to_string(),
            (_, Some(m)) => format!(
                "Through the DUT in {m} mode{}",
                lab.fw_rules
                    .map(|n| format!(", {n} firewall rules"))
                    .unwrap_or_default()
            ),
            (k, None) => k.to_string(),
        };
        let title = match lab.queues {
            Some(q) if q > 1 => format!("{title}, {q} tx/rx queues per veth"),
            _ => title,
        };
        let title = match &lab.vm {
            Some(vm) => format!(
                "{title}, {} in a VM (kernel {}, {} vCPU)",
                vm.kind(),
                vm.kernel_release,
                vm.vcpus
            ),
            None => title,
        };
        s.push_str(&format!("<h3>{}</h3><div class=\"topo\">", esc(&title)));
        for (i, n) in lab.nodes.iter().enumerate() {
            if i > 0 {
                s.push_str("<div class=\"wire\" aria-hidden=\"true\"></div>");
            }
            s.push_str(&format!(
                "<div class=\"node {}\"><div class=\"role\">{}</div><div class=\"pid\">pid {}</div>",
                esc(&n.role),
                esc(&n.role),
                n.pid
            ));
            for ifc in &n.interfaces {
                s.push_str(&format!(
                    "<div class=\"ifc\"><b>{}</b> <span class=\"muted\">{} · MTU {}</span>",
                    esc(&ifc.name),
                    esc(&ifc.mac),
                    ifc.mtu
                ));
                for a in &ifc.addresses {
                    s.push_str(&format!("<div class=\"addr\">{}</div>", esc(a)));
                }
                s.push_str("</div>");
            }
            s.push_str("</div>");
        }
        s.push_str("</div><p class=\"legend\">Links: ");
        let links: Vec<String> = lab
            .links
            .iter()
            .map(|l| format!("{} ↔ {} ({})", esc(&l.a), esc(&l.b), esc(&l.kind)))
            .collect();
        s.push_str(&links.join(" · "));
        s.push_str(&format!(
            "</p><p class=\"legend\">Offloads: {}</p>",
            esc(&lab.offloads)
        ));
        if let Some(c) = &lab.cores {
            s.push_str(&format!(
                "<p class=\"legend\">Cores: {}</p>",
                esc(&c.summary)
            ));
        }
    }
    s
}

/// Findings of `linerate doctor`, most severe first, with their evidence.
pub fn doctor(r: &RunResults) -> String {
    if r.doctor.is_empty() {
        return "<p class=\"muted\">No doctor findings were recorded with this run.</p>".into();
    }
    let mut s = String::new();
    for e in &r.doctor {
        let f = &e.report.findings;
        if f.is_empty() {
            s.push_str(&format!(
                "<p class=\"callout ok\">{}: nothing to report.</p>",
                esc(&e.host)
            ));
        }
        s.push_str("<ul class=\"findings\">");
        for x in f {
            let sev = x.severity.as_str();
            s.push_str(&format!(
                "<li class=\"finding {sev}\" data-finding=\"{}\"><div>{} <strong>{}</strong> <span class=\"muted\">{} · {}</span></div>\
                 <div>{}</div><div><b>Fix:</b> {}</div>",
                esc(&x.id),
                pill(sev, sev, "severity"),
                esc(&x.title),
                esc(&e.host),
                esc(&x.id),
                esc(&x.impact),
                esc(&x.fix)
            ));
            if !x.evidence.is_empty() {
                s.push_str("<details><summary>Evidence</summary><ul class=\"evidence\">");
                for ev in &x.evidence {
                    s.push_str(&format!(
                        "<li><code>{}</code> = <code>{}</code></li>",
                        esc(&ev.path),
                        esc(&ev.value)
                    ));
                }
                s.push_str("</ul></details>");
            }
            s.push_str("</li>");
        }
        s.push_str("</ul>");
        if !e.report.skipped.is_empty() {
            s.push_str(&format!(
                "<details><summary>{} checks skipped on {}</summary><ul>",
                e.report.skipped.len(),
                esc(&e.host)
            ));
            for k in &e.report.skipped {
                s.push_str(&format!("<li>{}</li>", esc(k)));
            }
            s.push_str("</ul></details>");
        }
    }
    s
}
