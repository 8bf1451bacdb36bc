//! The notes under the results table: per test (engines, window, latency,
//! the bottleneck verdict, HTTP requests, flagged cross-checks) and the
//! footer's lines on what the run ran on.

use super::*;

/// A test's notes: engines, latency, the bottleneck verdict, flagged
/// cross-checks.
pub(super) fn test_notes(t: &TestResult, notes: &mut Vec<(String, Tone)>) {
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
    if let Some(n) = crate::report::dscp::note(t) {
        notes.push((format!("{}: {n}", t.name), Tone::Warn));
    }
    if let Some(b) = &t.dut_bond {
        notes.push((format!("{}: {}", t.name, b.note), Tone::Plain));
    }
    if let Some(l) = &t.latency {
        notes.push((
            format!("{}: {}", t.name, crate::report::latency::note(l)),
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
        let tone = match crate::report::figures::verdict_tone(b.kind) {
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
        crate::report::http::status_counts(c),
        crate::report::http::error_kinds(c),
    ))
}

/// The footer's lines on what the run ran on: each lab's cores, stick
/// and DUT VM with its notes, a plan's VM hosts, and the stick DUT's own
/// counts per test.
pub(super) fn setup_lines(r: &RunResults) -> Vec<String> {
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
pub(super) fn rx_engine_note(t: &crate::results::TestResult) -> Option<String> {
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
