//! The verdicts by what filled a core or where the frames went: the
//! tester's cores, a thread the scheduler moved, a short sender, frames
//! lost at one place, a met rate, a link down, nothing arrived.

use super::*;

/// What the frames alone say limited a test, before any core does.
pub(super) enum FramesSay {
    /// Most of the loss fell while a link was down.
    LinkDown,
    /// Frames were offered and none arrived.
    NothingArrived,
    /// Frames were lost in numbers at the DUT (`dut`) or at the tester's
    /// receiving side.
    LostAt { dut: bool },
    /// The senders offered what --rate asked and it arrived.
    RateMet,
}

/// What the frames say, in the order they are asked; `None` when they
/// name no limit and the cores must.
pub(super) fn frames_say(traffic: &Traffic) -> Option<FramesSay> {
    // Most of the loss fell while a link was down: the link explains it,
    // not the DUT's forwarding nor the tester (whose cores idled).
    if !traffic.links_down.is_empty()
        && traffic.beyond_noise(traffic.link_down_lost)
        && traffic.link_down_lost * 2 >= traffic.dut_lost
    {
        return Some(FramesSay::LinkDown);
    }
    // Nothing arrived: no core explains that, a path does.
    if traffic.offered > 0 && traffic.received == 0 {
        return Some(FramesSay::NothingArrived);
    }
    // The frames say where the limit was when they were lost in numbers:
    // at the tester's receiving side (its own drops), or at the DUT while
    // the senders kept offering more. A DUT that lost frames while the
    // senders fell short of the rate is the DUT's evidence at the rate
    // offered, never a tester limit ([`tester_limited`]).
    if traffic.beyond_noise(traffic.tester_drops) {
        return Some(FramesSay::LostAt { dut: false });
    }
    if traffic.beyond_noise(traffic.dut_lost) || (traffic.sender_short() && traffic.dut_lost > 0) {
        return Some(FramesSay::LostAt { dut: true });
    }
    // The senders offered what --rate asked and it arrived: the rate set
    // the load, whatever the cores did meanwhile.
    traffic.rate_met().then_some(FramesSay::RateMet)
}

/// Why a full core only the tester uses is the limit (its softirq, or its
/// receiving work when no thread of linerate spilled onto it); none when
/// neither says.
fn why_tester_core(
    r: &CoreRole,
    softirq: bool,
    spilled: bool,
) -> Option<(BottleneckKind, String, bool)> {
    let receive = r.receiver || !r.tester_napi.is_empty();
    let kind = if receive {
        BottleneckKind::TesterReceiver
    } else {
        BottleneckKind::TesterSender
    };
    if softirq {
        return Some((
            kind,
            "its packet processing (softirq) is the tester's own work, not the DUT's \
             forwarding: the tester is the limit"
                .to_string(),
            !receive,
        ));
    }
    if receive && !spilled {
        return Some((
            kind,
            format!(
                "the tester's own work ({}) and the kernel fill it, not the DUT's \
                 forwarding: the tester is the limit",
                r.tester_work()
            ),
            false,
        ));
    }
    None
}

/// Why a full core is the limit when linerate's own thread, unpinned,
/// ran there: its time is listed on the core it was last seen on.
fn why_spilled(t: &ThreadLoad) -> (BottleneckKind, String, bool) {
    let kind = if is_sender(&t.name) {
        BottleneckKind::TesterSender
    } else if is_receiver(&t.name) {
        BottleneckKind::TesterReceiver
    } else {
        BottleneckKind::OtherWork
    };
    (
        kind,
        format!(
            "linerate's own {} {} (not pinned; it moved between cores) fills it",
            t.role, t.name
        ),
        true,
    )
}

/// Whose work fills the full core `c`, as (kind, why, whether its time
/// outside linerate's threads counts as other processes'). A core of the
/// lab's tester is never the DUT's limit; one of the DUT's alone is the
/// DUT's forwarding (its NAPI threads count as system time, its softirq
/// as softirq: neither is another process).
pub(super) fn why_full(
    c: &CpuLoad,
    loads: &[CpuLoad],
    names: &Names,
) -> (BottleneckKind, String, bool) {
    let engine =
        |kind: fn(&str) -> bool| c.threads.iter().find(|t| engine_share(t) && kind(&t.name));
    let softirq = c.softirq_pct >= c.busy_pct / 2.0;
    if let Some(t) = engine(is_sender) {
        return (
            BottleneckKind::TesterSender,
            format!(
                "the tester's sender core is the limit ({} {})",
                t.role, t.name
            ),
            true,
        );
    }
    if let Some(t) = engine(is_receiver) {
        return (
            BottleneckKind::TesterReceiver,
            format!(
                "the tester's receiver core is the limit ({} {})",
                t.role, t.name
            ),
            true,
        );
    }
    let role = names.role(c);
    if let Some(why) = role
        .filter(|r| r.tester_only())
        .and_then(|r| why_tester_core(r, softirq, spilled(loads, c).is_some()))
    {
        return why;
    }
    if role.is_some_and(CoreRole::dut_only) && (softirq || spilled(loads, c).is_none()) {
        return (
            BottleneckKind::Softirq,
            "the DUT's receive and forwarding (its NAPI threads and softirq) is the limit"
                .to_string(),
            false,
        );
    }
    if softirq {
        // A core the DUT shares with the tester cannot say whose it was.
        let whose = if role.is_some_and(|r| r.dut && r.tester()) {
            "the DUT's forwarding and the tester's own work share this core"
        } else {
            "the DUT's forwarding in a namespace lab, or interrupt placement"
        };
        return (
            BottleneckKind::Softirq,
            format!(
                "packet processing (softirq) on {} is the limit — {whose}",
                names.name(c)
            ),
            true,
        );
    }
    if let Some(t) = spilled(loads, c) {
        return why_spilled(t);
    }
    (
        BottleneckKind::OtherWork,
        "work other than linerate's threads fills it (another process or the kernel)".to_string(),
        true,
    )
}

/// The verdict of a paced test whose senders fell short of the rate while
/// the DUT lost nothing, and no core of the tester's own threads was full:
/// the tester is the limit all the same (pacing, a shared or a receive
/// core); the full or busiest core is evidence, never the DUT's limit.
pub(super) fn short_verdict(
    loads: &[CpuLoad],
    order: &[&CpuLoad],
    pick: Option<&CpuLoad>,
    names: &Names,
    t: Traffic,
    shared: impl Fn(&CpuLoad, &mut String),
    also: impl Fn(&CpuLoad, &mut String),
) -> Bottleneck {
    let share = 100.0 * t.asked.saturating_sub(t.offered) as f64 / t.asked.max(1) as f64;
    let mut text = format!(
        "the tester is the limit: the senders offered {} of the {} frames asked ({share:.1} % \
         short) and the DUT lost none of them, so this measures the tester",
        t.offered, t.asked
    );
    let core = pick.or_else(|| order.first().copied());
    if let Some(c) = core {
        let (lead, tail) = if pick.is_some() {
            ("; ", "")
        } else {
            ("; no core saturated (busiest ", ")")
        };
        text.push_str(&format!(
            "{lead}{} {:.0} %: {}{tail}",
            names.name(c),
            c.busy_pct,
            evidence(c)
        ));
        if pick.is_some() {
            if !names.dut_core(c) && !names.tester_receive_core(c) {
                shared(c, &mut text);
            }
            also(c, &mut text);
        }
    }
    Bottleneck {
        verdict: text,
        kind: BottleneckKind::TesterSender,
        host: core.map(|c| c.host.clone()).unwrap_or_default(),
        cpu: core.map(|c| c.cpu),
        host_cpus: loads.to_vec(),
        vcpus: Vec::new(),
    }
}

/// The verdict when the frames were lost at one place: the DUT (`at_dut`)
/// or the tester's receiving side. Names the core where that work ran —
/// the lab's DUT's or tester's receive core when the layout is known,
/// else a full one without a sender, or the busiest.
pub(super) fn frames_verdict(
    loads: &[CpuLoad],
    full: &[&CpuLoad],
    names: &Names,
    t: Traffic,
    at_dut: bool,
) -> Bottleneck {
    let core = frames_core(loads, full, names, at_dut);
    let lost = if at_dut { t.dut_lost } else { t.tester_drops };
    let share = 100.0 * lost as f64 / t.offered.max(1) as f64;
    let dut_vcpu = names.full_dut_vcpu().filter(|_| at_dut);
    let (kind, mut text) = if at_dut && t.sender_short() {
        (
            BottleneckKind::Dut,
            format!(
                "the DUT is the limit: {lost} of {} frames offered ({share:.1} %) were lost \
                 there, at the rate the tester could offer ({} of {} frames asked)",
                t.offered, t.offered, t.asked
            ),
        )
    } else if at_dut {
        (
            BottleneckKind::Dut,
            format!(
                "the DUT is the limit: {lost} of {} frames offered ({share:.1} %) were lost \
                 there while the senders kept offering more",
                t.offered
            ),
        )
    } else {
        (
            BottleneckKind::TesterReceiver,
            format!(
                "the tester's receiving side is the limit: {lost} of {} frames offered \
                 ({share:.1} %) were dropped before linerate counted them",
                t.offered
            ),
        )
    };
    // A virtual DUT's forwarding runs on its vCPUs, qemu threads of the
    // host: a full one is its limit, whatever the host's cores show.
    if let Some(v) = dut_vcpu {
        return vcpu_verdict(v, Some(text), loads);
    }
    if let Some(c) = core {
        text.push_str(&format!(
            "; {} {:.0} %: {}",
            names.name(c),
            c.busy_pct,
            evidence(c)
        ));
    }
    Bottleneck {
        verdict: text,
        kind,
        host: core.map(|c| c.host.clone()).unwrap_or_default(),
        cpu: core.map(|c| c.cpu),
        host_cpus: loads.to_vec(),
        vcpus: Vec::new(),
    }
}

/// The core where the work that lost the frames ran (the DUT's, or the
/// tester's receiving side's): the lab's core of that side when the
/// layout is known, else a full one without a sender, or the busiest.
fn frames_core<'a>(
    loads: &'a [CpuLoad],
    full: &[&'a CpuLoad],
    names: &Names,
    at_dut: bool,
) -> Option<&'a CpuLoad> {
    let busiest = |a: &&CpuLoad, b: &&CpuLoad| a.busy_pct.total_cmp(&b.busy_pct);
    let ours = |c: &CpuLoad| {
        if at_dut {
            names.dut_core(c)
        } else {
            names.tester_receive_core(c)
        }
    };
    // Never the other side's core: a tester's core is no evidence of the
    // DUT's limit, nor a DUT's of the tester's.
    let theirs = |c: &CpuLoad| {
        if at_dut {
            names.tester_core(c)
        } else {
            names.dut_core(c)
        }
    };
    let fallback = |c: &CpuLoad| !has_engine(c, is_sender) && !theirs(c);
    full.iter()
        .copied()
        .find(|c| ours(c))
        .or_else(|| loads.iter().filter(|c| ours(c)).max_by(busiest))
        .or_else(|| full.iter().copied().find(|c| fallback(c)))
        .or_else(|| loads.iter().filter(|c| fallback(c)).max_by(busiest))
}

/// A linerate engine thread of `c`'s host that cannot have spent all its
/// time on the core it is listed on (that core's busy time outside softirq
/// and IRQs is short of the linerate time listed there): an unpinned
/// thread the scheduler moved, which is where `c`'s unexplained time went.
/// `None` when `c`'s busy time is explained or no such thread exists.
pub(super) fn spilled<'a>(loads: &'a [CpuLoad], c: &CpuLoad) -> Option<&'a ThreadLoad> {
    let unexplained =
        c.busy_pct - c.softirq_pct - c.irq_pct - c.threads.iter().map(|t| t.cpu_pct).sum::<f64>();
    if unexplained < OTHER_NOTABLE_PCT {
        return None;
    }
    loads
        .iter()
        .filter(|o| o.host == c.host && o.cpu != c.cpu)
        .filter_map(|o| {
            let listed: f64 = o.threads.iter().map(|t| t.cpu_pct).sum();
            let room = o.busy_pct - o.softirq_pct - o.irq_pct;
            // Linerate time listed here that this core had no room for.
            let excess = listed - room;
            (excess >= unexplained / 2.0)
                .then(|| o.threads.iter().find(|t| engine_share(t)))
                .flatten()
        })
        .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
}

/// The verdict of a paced test that met its rate with no loss beyond
/// noise: the rate was the limit; the busiest core is evidence only.
pub(super) fn rate_verdict(
    loads: &[CpuLoad],
    order: &[&CpuLoad],
    names: &Names,
    t: Traffic,
) -> Bottleneck {
    let mut text = format!(
        "limited by --rate: the asked rate was met ({} of {} frames asked were offered); \
         neither the tester nor the DUT was the limit",
        t.offered, t.asked
    );
    let busiest = order.first().copied();
    if let Some(c) = busiest {
        text.push_str(&format!(
            "; busiest {} {:.0} %: {}",
            names.name(c),
            c.busy_pct,
            evidence(c)
        ));
    }
    Bottleneck {
        verdict: text,
        kind: BottleneckKind::RateLimited,
        host: busiest.map(|c| c.host.clone()).unwrap_or_default(),
        cpu: busiest.map(|c| c.cpu),
        host_cpus: loads.to_vec(),
        vcpus: Vec::new(),
    }
}

/// The verdict when most frames lost were lost while a link was down:
/// names the links (the endpoint's interface, cabled to the DUT).
pub(super) fn link_verdict(loads: &[CpuLoad], t: Traffic) -> Bottleneck {
    let links: Vec<String> = t
        .links_down
        .iter()
        .map(|l| format!("{} at the {}", l.ifname, l.role))
        .collect();
    let share = 100.0 * t.link_down_lost as f64 / t.offered.max(1) as f64;
    Bottleneck {
        verdict: format!(
            "a link went down: {} of {} frames offered ({share:.1} %) were lost while the \
             link {} (to the DUT's port) was down; neither the DUT's forwarding nor the \
             tester was the limit (the figures of this test measure the outage)",
            t.link_down_lost,
            t.offered,
            links.join(", ")
        ),
        kind: BottleneckKind::LinkDown,
        host: t
            .links_down
            .first()
            .map(|l| l.role.clone())
            .unwrap_or_default(),
        cpu: None,
        host_cpus: loads.to_vec(),
        vcpus: Vec::new(),
    }
}

/// The verdict when the senders offered frames and none was counted.
pub(super) fn nothing_arrived(loads: &[CpuLoad], t: Traffic) -> Bottleneck {
    Bottleneck {
        verdict: format!(
            "no frame arrived: the receivers counted none of the {} frames offered, so no \
             core limited this test; check that --target is an address of the server \
             endpoint and that a route leads there",
            t.offered
        ),
        kind: BottleneckKind::NothingArrived,
        host: String::new(),
        cpu: None,
        host_cpus: loads.to_vec(),
        vcpus: Vec::new(),
    }
}
