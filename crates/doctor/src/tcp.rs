//! TCP stack settings under `/proc/sys/net`: congestion control in use and
//! available, socket buffer limits against the bandwidth-delay product of
//! the test (`--target-rate` × `--rtt`), and whether kernel TLS is loaded.

use crate::parse::{format_bps, format_bytes, int};
use crate::report::{Evidence, Finding, Severity};
use crate::Ctx;
use std::time::Duration;

const IPV4: &str = "proc/sys/net/ipv4";
const CORE: &str = "proc/sys/net/core";

pub(crate) fn check(ctx: &mut Ctx) {
    check_congestion_control(ctx);
    check_buffers(ctx);
    check_ktls(ctx);
}

fn check_congestion_control(ctx: &mut Ctx) {
    let cc = ctx.read_ev(&format!("{IPV4}/tcp_congestion_control"));
    let available = ctx.read_ev(&format!("{IPV4}/tcp_available_congestion_control"));
    ctx.facts.tcp.congestion_control = cc.as_ref().map(|(v, _)| v.clone());
    ctx.facts.tcp.available_congestion_control = available
        .as_ref()
        .map(|(v, _)| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let (Some((cc, cc_ev)), Some((_, av_ev))) = (cc, available) else {
        ctx.skip(format!(
            "congestion control: /{IPV4}/tcp_congestion_control or \
             tcp_available_congestion_control not readable"
        ));
        return;
    };
    let bbr = ctx
        .facts
        .tcp
        .available_congestion_control
        .iter()
        .any(|c| c == "bbr");
    if cc != "cubic" || !bbr {
        return;
    }
    ctx.add(Finding {
        id: "bbr_available_not_used".into(),
        severity: Severity::Info,
        title: "TCP uses cubic although bbr is available".into(),
        evidence: vec![cc_ev, av_ev],
        impact: "Cubic backs off on every loss; on long or slightly lossy paths it stays well \
                 below the link rate where bbr keeps the pipe full. On a clean LAN both \
                 reach line rate."
            .into(),
        fix: "Try bbr for WAN-like tests: sysctl -w net.ipv4.tcp_congestion_control=bbr \
              (with net.core.default_qdisc=fq), and record which one a result used."
            .into(),
        subject: None,
    });
}

/// The `max` field of `tcp_rmem`/`tcp_wmem` (min default max).
fn triple(s: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = s.split_whitespace().filter_map(int).collect();
    match v.as_slice() {
        [a, b, c] => Some([*a, *b, *c]),
        _ => None,
    }
}

fn check_buffers(ctx: &mut Ctx) {
    let rmem_max = ctx.read_ev(&format!("{CORE}/rmem_max"));
    let wmem_max = ctx.read_ev(&format!("{CORE}/wmem_max"));
    let tcp_rmem = ctx.read_ev(&format!("{IPV4}/tcp_rmem"));
    let tcp_wmem = ctx.read_ev(&format!("{IPV4}/tcp_wmem"));
    let tcp = &mut ctx.facts.tcp;
    tcp.rmem_max = rmem_max.as_ref().and_then(|(v, _)| int(v));
    tcp.wmem_max = wmem_max.as_ref().and_then(|(v, _)| int(v));
    tcp.tcp_rmem = tcp_rmem.as_ref().and_then(|(v, _)| triple(v));
    tcp.tcp_wmem = tcp_wmem.as_ref().and_then(|(v, _)| triple(v));

    let (Some(rate), Some(rtt)) = (ctx.opts.target_rate_bps, ctx.opts.rtt) else {
        ctx.skip("socket buffers vs BDP: needs both --target-rate and --rtt");
        return;
    };
    let bdp = rate * rtt.as_secs_f64() / 8.0;
    let limits: [(Option<u64>, Option<Evidence>, &str); 4] = [
        (
            ctx.facts.tcp.tcp_rmem.map(|t| t[2]),
            tcp_rmem.map(|(_, e)| e),
            "net.ipv4.tcp_rmem (max)",
        ),
        (
            ctx.facts.tcp.tcp_wmem.map(|t| t[2]),
            tcp_wmem.map(|(_, e)| e),
            "net.ipv4.tcp_wmem (max)",
        ),
        (
            ctx.facts.tcp.rmem_max,
            rmem_max.map(|(_, e)| e),
            "net.core.rmem_max",
        ),
        (
            ctx.facts.tcp.wmem_max,
            wmem_max.map(|(_, e)| e),
            "net.core.wmem_max",
        ),
    ];
    let mut short: Vec<(&str, Evidence)> = Vec::new();
    for (value, ev, name) in limits {
        match (value, ev) {
            (Some(v), Some(ev)) if (v as f64) < bdp => short.push((name, ev)),
            (Some(_), Some(_)) => {}
            _ => ctx.skip(format!("socket buffers vs BDP: {name} not readable")),
        }
    }
    if short.is_empty() {
        return;
    }
    ctx.add(below_bdp(short, rate, rtt, bdp));
}

/// The finding for socket buffer limits (`short`, each with its evidence)
/// below the bandwidth-delay product `bdp` of `rate` over `rtt`.
fn below_bdp(short: Vec<(&str, Evidence)>, rate: f64, rtt: Duration, bdp: f64) -> Finding {
    let names: Vec<&str> = short.iter().map(|(n, _)| *n).collect();
    let smallest = short
        .iter()
        .filter_map(|(_, e)| e.value.split_whitespace().last().and_then(int::<u64>))
        .min()
        .unwrap_or(0);
    let single_flow_bps = smallest as f64 * 8.0 / rtt.as_secs_f64();
    let want = (2.0 * bdp).ceil() as u64;
    Finding {
        id: "socket_buffer_below_bdp".into(),
        severity: Severity::Warning,
        title: format!(
            "socket buffer limits below the bandwidth-delay product ({} × {:?} = {})",
            format_bps(rate),
            rtt,
            format_bytes(bdp)
        ),
        evidence: short.into_iter().map(|(_, e)| e).collect(),
        impact: format!(
            "A TCP flow has at most one buffer of data in flight per round trip: with {} \
             ({}) a single flow tops out near {} over {rtt:?}, below the {} target.",
            format_bytes(smallest as f64),
            names.join(", "),
            format_bps(single_flow_bps),
            format_bps(rate)
        ),
        fix: format!(
            "Raise the limits to about twice the BDP (the kernel keeps part of the buffer \
             for overhead): sysctl -w net.core.rmem_max={want} net.core.wmem_max={want} \
             and net.ipv4.tcp_rmem/tcp_wmem max fields to {want}."
        ),
        subject: None,
    }
}

/// `tcp_available_ulp` lists only loaded ULP modules; `tls` appears after
/// `modprobe tls` (or the first kTLS socket, when autoloading is allowed).
fn check_ktls(ctx: &mut Ctx) {
    let rel = format!("{IPV4}/tcp_available_ulp");
    let Some((value, ev)) = ctx.read_ev(&rel) else {
        ctx.skip_missing("ktls", &rel);
        return;
    };
    ctx.facts.tcp.available_ulp = value.split_whitespace().map(str::to_string).collect();
    if ctx.facts.tcp.available_ulp.iter().any(|u| u == "tls") {
        return;
    }
    ctx.add(Finding {
        id: "ktls_not_loaded".into(),
        severity: Severity::Info,
        title: "kernel TLS (kTLS) is not loaded".into(),
        evidence: vec![ev],
        impact: "TLS is encrypted in user space and every byte is copied through it; users \
                 measured HTTPS serving at about 10 % CPU in user-space TLS versus 2 % with \
                 kTLS (sendfile stays zero-copy)."
            .into(),
        fix: "modprobe tls, and enable kTLS in the server (nginx `ssl_conf_command Options \
              KTLS`, OpenSSL built with enable-ktls)."
            .into(),
        subject: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_mem_triples() {
        assert_eq!(
            triple("4096\t131072\t33554432\n"),
            Some([4096, 131072, 33554432])
        );
        assert_eq!(triple("4096 131072"), None);
        assert_eq!(triple("a b c"), None);
    }
}
