//! The live bottleneck finder: from the kernel snapshots every agent took
//! before and after a test, per-core load on each host (busy %, its split,
//! network softirqs per second, linerate's own threads) and a verdict that
//! names the first full core and whose work filled it. In a linerate lab
//! the verdict knows which core plays which role ([`CoreRoles`]) and says
//! so. Pure logic over [`Snapshot`]s; the runner collects them and
//! `runner::record` calls this.

use crate::model::lab::LabCores;
use crate::proto::{CpuTicks, Snapshot, ThreadTicks};
use crate::results::{Bottleneck, BottleneckKind, CpuLoad, DirectionResult, ThreadLoad, VcpuLoad};
use crate::search::RampSample;

mod roles;
mod verdicts;

use roles::CoreRole;
pub use roles::CoreRoles;
use verdicts::{
    frames_say, frames_verdict, link_verdict, nothing_arrived, rate_verdict, short_verdict,
    spilled, why_full, FramesSay,
};

/// A core this busy counts as full. Below 100 because ticks are 10 ms
/// (a 2 s test is ±1 %), and the window between snapshots holds a little
/// idle time around the traffic.
pub const SATURATED_PCT: f64 = 90.0;
/// Time of a full core spent outside linerate, its softirqs and IRQs that
/// the verdict calls out: the measurement shared its core.
const OTHER_NOTABLE_PCT: f64 = 25.0;
/// Threads using less of a core than this are not listed.
const THREAD_MIN_PCT: f64 = 0.5;
/// Kernel ticks per second in /proc/stat and task stat (USER_HZ, fixed by
/// the kernel ABI).
const TICKS_PER_S: f64 = 100.0;

/// One agent's snapshots around a test.
pub struct AgentCpu<'a> {
    /// Its host's name: agents with the same host share /proc/stat.
    pub host: String,
    pub role: String,
    pub before: &'a Snapshot,
    pub after: &'a Snapshot,
}

/// Where a packet test's frames went: what the senders offered, and what
/// was lost at the DUT and at the tester's own receiving side. A full
/// sender core does not explain a limit the frames show lay further on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    pub offered: u64,
    pub dut_lost: u64,
    pub tester_drops: u64,
    /// Frames the rate asked for (`--rate`, a profile); 0 when unpaced.
    pub asked: u64,
    /// Frames the receivers counted.
    pub received: u64,
    /// Of `dut_lost`, the frames lost in intervals an endpoint marked
    /// `links_down`, and the links it named there.
    pub link_down_lost: u64,
    pub links_down: Vec<LinkDown>,
}

/// A link an endpoint saw go down during a test: its interface there
/// (whose other end is the DUT's port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDown {
    pub role: String,
    pub ifname: String,
}

impl Traffic {
    /// A share of the offered frames, at least a few hundred of them: below
    /// that a loss is counting noise, not a limit.
    fn beyond_noise(&self, n: u64) -> bool {
        n >= 200 && n as f64 >= self.offered as f64 * LIMIT_SHARE
    }

    /// A paced test whose senders offered what the rate asked for, within
    /// counting noise: the rate, not the tester, set the load.
    fn rate_met(&self) -> bool {
        self.asked > 0 && !sender_short(self.offered, self.asked)
    }

    fn sender_short(&self) -> bool {
        sender_short(self.offered, self.asked)
    }
}

/// Whether a paced sender fell short of what its rate asked for by more
/// than counting noise: at least [`SHORT_MIN_PACKETS`] packets and
/// [`LIMIT_SHARE`] of the asked count. A one-packet shortfall at a low
/// rate (the last frame of the window still due) is not a limit; an
/// unpaced sender (`asked` 0) is never short.
pub fn sender_short(offered: u64, asked: u64) -> bool {
    let short = asked.saturating_sub(offered);
    asked > 0 && short >= SHORT_MIN_PACKETS && short as f64 >= asked as f64 * LIMIT_SHARE
}

/// Whether a row (a test's direction, a ramp's sample, a search trial)
/// measures the tester: its sender fell short of the rate asked
/// ([`sender_short`]) *and* the DUT lost nothing of what was offered.
/// Where the DUT lost frames the row is the DUT's evidence, at the rate
/// offered, whatever the sender did. Row notes and the verdict
/// ([`analyse`]) judge by this one rule, so they cannot disagree.
pub fn tester_limited(offered: u64, asked: u64, dut_lost: u64) -> bool {
    sender_short(offered, asked) && dut_lost == 0
}

/// [`tester_limited`] for a recorded direction. Results written before
/// the rule marked every short sender, DUT loss or not: this reads them
/// by the rule too.
pub fn direction_tester_limited(d: &DirectionResult) -> bool {
    d.tester_limited && d.dut_lost == 0
}

/// [`tester_limited`] for a ramp sample (whose loss is by sequence
/// numbers over the interval): a lossy sample is the DUT's evidence.
pub fn sample_tester_limited(s: &RampSample) -> bool {
    s.tester_limited && s.loss_ratio == 0.0
}

/// Fewer packets short than this is counting noise at any rate.
pub const SHORT_MIN_PACKETS: u64 = 10;

/// Lost at one place, this share of what was offered marks that place as
/// the limit (the senders offered more than it passed).
const LIMIT_SHARE: f64 = 0.01;

/// Per-core load and the verdict; `None` when no agent reported per-core
/// times (older agents). `wall_s` is how long traffic flowed; 0 uses the
/// time between the snapshots. `traffic` (packet tests) lets the frames
/// name the limit before the cores do; `roles` (a linerate lab's layout)
/// names what each core runs.
pub fn analyse(
    agents: &[AgentCpu],
    wall_s: f64,
    traffic: Option<Traffic>,
    roles: Option<&CoreRoles>,
) -> Option<Bottleneck> {
    analyse_with_dut(agents, wall_s, traffic, roles, None)
}

/// [`analyse`] knowing which agent watches the DUT (`dut_role`): when
/// that agent runs in a VM, its vCPUs are qemu threads of this host
/// ([`AgentCpu`]'s snapshots carry them), and one of them saturated while
/// frames were lost at the DUT names the DUT's vCPU, never a tester core.
/// Every guest's vCPUs are recorded in the verdict's `vcpus`.
pub fn analyse_with_dut(
    agents: &[AgentCpu],
    wall_s: f64,
    traffic: Option<Traffic>,
    roles: Option<&CoreRoles>,
    dut_role: Option<&str>,
) -> Option<Bottleneck> {
    let vcpus = vcpu_loads(agents, wall_s, dut_role);
    let mut hosts: Vec<&str> = Vec::new();
    for a in agents {
        if !hosts.contains(&a.host.as_str()) {
            hosts.push(&a.host);
        }
    }
    let mut loads = Vec::new();
    for host in &hosts {
        let on_host: Vec<&AgentCpu> = agents.iter().filter(|a| a.host == *host).collect();
        let Some(first) = on_host
            .iter()
            .find(|a| !a.before.per_cpu.is_empty() && !a.after.per_cpu.is_empty())
        else {
            continue;
        };
        for c in &first.after.per_cpu {
            let Some(b) = first.before.per_cpu.iter().find(|b| b.cpu == c.cpu) else {
                continue;
            };
            loads.push(core_load(host, b, c, wall_s, &on_host));
        }
    }
    if loads.is_empty() {
        return None;
    }
    let roles = roles.map(|r| r.clone().with_threads(&loads));
    let names = Names {
        many_hosts: hosts.len() > 1,
        roles: roles.as_ref(),
        vcpus: &vcpus,
    };
    let mut b = verdict(loads, &names, traffic.unwrap_or_default());
    b.vcpus = vcpus;
    Some(b)
}

/// Each guest's vCPU threads over the test, in % of one host core: their
/// ticks between the snapshots over the traffic's `wall_s` (capped at a
/// full core: the snapshots' window is a little longer than the traffic).
fn vcpu_loads(agents: &[AgentCpu], wall_s: f64, dut_role: Option<&str>) -> Vec<VcpuLoad> {
    if wall_s < 0.1 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for a in agents {
        for t in &a.after.vcpus {
            let Some(vcpu) = crate::host::kernel::vcpu_index(&t.name) else {
                continue;
            };
            let before = a.before.vcpus.iter().find(|x| x.tid == t.tid);
            let used = ticks(t).saturating_sub(before.map(ticks).unwrap_or(0)) as f64;
            out.push(VcpuLoad {
                role: a.role.clone(),
                dut: dut_role == Some(a.role.as_str()),
                host: a.host.clone(),
                vcpu,
                thread: t.name.clone(),
                tid: t.tid,
                host_cpu: t.cpu,
                cpu_pct: round1((used / (wall_s * TICKS_PER_S) * 100.0).min(100.0)),
            });
        }
    }
    out
}

/// A verdict naming the DUT's saturated vCPU `v`, after `lead` (what the
/// frames said, if anything).
fn vcpu_verdict(v: &VcpuLoad, lead: Option<String>, loads: &[CpuLoad]) -> Bottleneck {
    let named = format!(
        "DUT vCPU {} (qemu thread {}, tid {} on host CPU{}) {:.0} % busy: the virtual DUT's \
         forwarding is the limit",
        v.vcpu, v.thread, v.tid, v.host_cpu, v.cpu_pct
    );
    Bottleneck {
        verdict: match lead {
            Some(l) => format!("{l}; {named}"),
            None => named,
        },
        kind: BottleneckKind::Dut,
        host: v.host.clone(),
        cpu: Some(v.vcpu),
        host_cpus: loads.to_vec(),
        vcpus: Vec::new(),
    }
}

fn core_load(host: &str, b: &CpuTicks, a: &CpuTicks, wall_s: f64, agents: &[&AgentCpu]) -> CpuLoad {
    let d = |f: fn(&CpuTicks) -> u64| f(a).saturating_sub(f(b)) as f64;
    let total = d(CpuTicks::total);
    // Traffic flowed for `wall_s` of the snapshot window; busy time outside
    // it is small next to a full core, so the load over the traffic is
    // busy ticks over the traffic's ticks.
    let window = if wall_s > 0.0 {
        (wall_s * TICKS_PER_S).min(total)
    } else {
        total
    }
    .max(1.0);
    let user = d(|c| c.user) + d(|c| c.nice);
    let system = d(|c| c.system);
    let softirq = d(|c| c.softirq);
    let irq = d(|c| c.irq);
    let busy = total - d(|c| c.idle) - d(|c| c.iowait);
    // A core cannot be more than full: scale the split with the busy time.
    let scale = 100.0 / window.max(busy);
    let secs = if wall_s > 0.0 {
        wall_s
    } else {
        total / TICKS_PER_S
    }
    .max(1e-3);
    let mut threads: Vec<ThreadLoad> = Vec::new();
    for ag in agents {
        for t in ag.after.threads.iter().filter(|t| t.cpu == a.cpu) {
            let before = ag.before.threads.iter().find(|x| x.tid == t.tid);
            let used = ticks(t).saturating_sub(before.map(ticks).unwrap_or(0)) as f64;
            let cpu_pct = (used * scale).min(100.0);
            if cpu_pct >= THREAD_MIN_PCT {
                threads.push(ThreadLoad {
                    role: ag.role.clone(),
                    name: t.name.clone(),
                    cpu_pct: round1(cpu_pct),
                });
            }
        }
    }
    threads.sort_by(|x, y| y.cpu_pct.total_cmp(&x.cpu_pct));
    let ours: f64 = threads.iter().map(|t| t.cpu_pct).sum();
    let busy_pct = busy * scale;
    let other = busy_pct - ours - (softirq + irq) * scale;
    CpuLoad {
        host: host.to_string(),
        cpu: a.cpu,
        busy_pct: round1(busy_pct),
        user_pct: round1(user * scale),
        system_pct: round1(system * scale),
        softirq_pct: round1(softirq * scale),
        irq_pct: round1(irq * scale),
        other_pct: round1(other.max(0.0)),
        net_rx_per_s: (d(|c| c.net_rx) / secs).round(),
        net_tx_per_s: (d(|c| c.net_tx) / secs).round(),
        threads,
    }
}

fn ticks(t: &ThreadTicks) -> u64 {
    t.utime + t.stime
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// linerate's engine threads are named `lr-<proto>-<what>`.
fn is_sender(name: &str) -> bool {
    name.starts_with("lr-") && name.ends_with("-send")
}
fn is_receiver(name: &str) -> bool {
    name.starts_with("lr-") && name.ends_with("-recv")
}

/// How a verdict names a core: with its host when the test spans hosts,
/// and with its role when the lab's layout is known.
struct Names<'a> {
    many_hosts: bool,
    roles: Option<&'a CoreRoles>,
    /// The test's guests' vCPUs.
    vcpus: &'a [VcpuLoad],
}

impl Names<'_> {
    /// The DUT's busiest vCPU, if it is saturated.
    fn full_dut_vcpu(&self) -> Option<&VcpuLoad> {
        self.vcpus
            .iter()
            .filter(|v| v.dut && v.cpu_pct >= SATURATED_PCT)
            .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
    }

    fn role(&self, c: &CpuLoad) -> Option<&CoreRole> {
        self.roles?.of(c)
    }

    /// "CPU0", "lab CPU0", "CPU0 (tester: generator and sink NAPI)".
    fn name(&self, c: &CpuLoad) -> String {
        let mut s = if self.many_hosts {
            format!("{} CPU{}", c.host, c.cpu)
        } else {
            format!("CPU{}", c.cpu)
        };
        if let Some(r) = self.role(c) {
            s.push_str(&format!(" ({})", r.label()));
        }
        s
    }

    fn tester_core(&self, c: &CpuLoad) -> bool {
        self.role(c).is_some_and(CoreRole::tester_only)
    }

    fn dut_core(&self, c: &CpuLoad) -> bool {
        self.role(c).is_some_and(CoreRole::dut_only)
    }

    /// A core of the tester's receive work alone (its NAPI or receivers).
    fn tester_receive_core(&self, c: &CpuLoad) -> bool {
        self.role(c)
            .is_some_and(|r| r.tester_only() && (r.receiver || !r.tester_napi.is_empty()))
    }
}

fn has_engine(c: &CpuLoad, kind: fn(&str) -> bool) -> bool {
    c.threads.iter().any(|t| engine_share(t) && kind(&t.name))
}

/// Whether a verdict's kind names the tester (its sender or receiver).
fn is_tester(k: &BottleneckKind) -> bool {
    matches!(
        k,
        BottleneckKind::TesterSender | BottleneckKind::TesterReceiver
    )
}

/// The cores, busiest first (then by host and CPU).
fn busiest_first(loads: &[CpuLoad]) -> Vec<&CpuLoad> {
    let mut order: Vec<&CpuLoad> = loads.iter().collect();
    order.sort_by(|x, y| {
        y.busy_pct
            .total_cmp(&x.busy_pct)
            .then(x.host.cmp(&y.host))
            .then(x.cpu.cmp(&y.cpu))
    });
    order
}

/// Among full cores, one running the tester's own threads explains the
/// limit first (sender, then receiver), then one the lab gave the tester,
/// then the busiest.
fn pick_full<'a>(full: &[&'a CpuLoad], names: &Names) -> Option<&'a CpuLoad> {
    full.iter()
        .copied()
        .find(|c| has_engine(c, is_sender))
        .or_else(|| full.iter().copied().find(|c| has_engine(c, is_receiver)))
        .or_else(|| full.iter().copied().find(|c| names.tester_core(c)))
        .or_else(|| full.first().copied())
}

/// The verdict's kind, text, host and CPU when no core saturated: the
/// busiest one named, the limit elsewhere.
fn none_saturated(
    busiest: Option<&CpuLoad>,
    names: &Names,
) -> (BottleneckKind, String, String, Option<u32>) {
    match busiest {
        Some(c) => (
            BottleneckKind::NoneSaturated,
            format!(
                "no core saturated (busiest {} {:.0} %: {}): the limit is elsewhere (the DUT or the link)",
                names.name(c),
                c.busy_pct,
                evidence(c)
            ),
            c.host.clone(),
            Some(c.cpu),
        ),
        None => (
            BottleneckKind::NoneSaturated,
            "no per-core CPU times were reported".to_string(),
            String::new(),
            None,
        ),
    }
}

fn verdict(loads: Vec<CpuLoad>, names: &Names, traffic: Traffic) -> Bottleneck {
    let order = busiest_first(&loads);
    let full: Vec<&CpuLoad> = order
        .iter()
        .copied()
        .filter(|c| c.busy_pct >= SATURATED_PCT)
        .collect();
    match frames_say(&traffic) {
        Some(FramesSay::LinkDown) => return link_verdict(&loads, traffic),
        Some(FramesSay::NothingArrived) => return nothing_arrived(&loads, traffic),
        Some(FramesSay::LostAt { dut }) => {
            return frames_verdict(&loads, &full, names, traffic, dut)
        }
        Some(FramesSay::RateMet) => return rate_verdict(&loads, &order, names, traffic),
        None => {}
    }
    // Among full cores, one running the tester's own threads explains the
    // limit first, then one the lab gave the tester: the DUT's figure is
    // then a floor.
    let pick = pick_full(&full, names);
    let shared = |c: &CpuLoad, text: &mut String| {
        if c.other_pct >= OTHER_NOTABLE_PCT && spilled(&loads, c).is_none() {
            text.push_str(&format!(
                "; {:.0} % of it went to other processes, so this measures a shared core: \
                 rerun on an idle host or give linerate cores of its own (--cpus)",
                c.other_pct
            ));
        }
    };
    let also = |c: &CpuLoad, text: &mut String| {
        let others: Vec<String> = full
            .iter()
            .filter(|o| !std::ptr::eq(**o, c))
            .map(|o| format!("{} {:.0} %", names.name(o), o.busy_pct))
            .collect();
        if !others.is_empty() {
            text.push_str(&format!("; also saturated: {}", others.join(", ")));
        }
    };
    // The sender fell short of the rate and the DUT lost nothing (the
    // frames above said so): the tester is the limit whatever the cores
    // show, as the row's own note says ([`tester_limited`]).
    let why = pick.map(|c| (c, why_full(c, &loads, names)));
    let by_tester = why.as_ref().is_some_and(|(_, (k, ..))| is_tester(k));
    if traffic.sender_short() && !by_tester {
        return short_verdict(&loads, &order, pick, names, traffic, shared, also);
    }
    // No tester core explains the limit and the virtual DUT's vCPU was
    // full (a TCP test through it): its forwarding is the limit.
    if !by_tester {
        if let Some(v) = names.full_dut_vcpu() {
            return vcpu_verdict(v, None, &loads);
        }
    }
    let (kind, text, host, cpu) = match why {
        None => none_saturated(order.first().copied(), names),
        Some((c, (kind, why, others_apart))) => {
            let mut text = format!(
                "{} {:.0} %: {}: {why}",
                names.name(c),
                c.busy_pct,
                evidence(c)
            );
            if others_apart {
                shared(c, &mut text);
            }
            also(c, &mut text);
            (kind, text, c.host.clone(), Some(c.cpu))
        }
    };
    Bottleneck {
        verdict: text,
        kind,
        host,
        cpu,
        host_cpus: loads,
        vcpus: Vec::new(),
    }
}

/// A thread that used a real share of the core (not a control thread
/// waking now and then).
fn engine_share(t: &ThreadLoad) -> bool {
    t.cpu_pct >= 20.0
}

/// "58 % softirq (NET_RX 1.2 M/s), 42 % system, with gen's lr-udp-send at 97 %".
fn evidence(c: &CpuLoad) -> String {
    let mut parts: Vec<(f64, String)> = Vec::new();
    let mut softirq = format!("{:.0} % softirq", c.softirq_pct);
    let mut rates = Vec::new();
    if c.net_rx_per_s >= 1.0 {
        rates.push(format!("NET_RX {}/s", per_s(c.net_rx_per_s)));
    }
    if c.net_tx_per_s >= 1.0 {
        rates.push(format!("NET_TX {}/s", per_s(c.net_tx_per_s)));
    }
    if !rates.is_empty() {
        softirq.push_str(&format!(" ({})", rates.join(", ")));
    }
    parts.push((c.softirq_pct, softirq));
    parts.push((c.system_pct, format!("{:.0} % system", c.system_pct)));
    parts.push((c.user_pct, format!("{:.0} % user", c.user_pct)));
    parts.push((c.irq_pct, format!("{:.0} % irq", c.irq_pct)));
    parts.sort_by(|x, y| y.0.total_cmp(&x.0));
    let split: Vec<String> = parts
        .into_iter()
        .filter(|(v, _)| *v >= 1.0)
        .map(|(_, s)| s)
        .collect();
    let mut s = if split.is_empty() {
        "idle".to_string()
    } else {
        split.join(", ")
    };
    let threads: Vec<String> = c
        .threads
        .iter()
        .filter(|t| t.cpu_pct >= 1.0)
        .take(3)
        .map(|t| {
            // The stall watch's threads are the tester's own, whichever
            // agent runs them (the DUT's, in a lab).
            if t.name.starts_with("lr-stall") {
                format!("linerate's stall watch at {:.0} %", t.cpu_pct)
            } else {
                format!("{}'s {} at {:.0} %", t.role, t.name, t.cpu_pct)
            }
        })
        .collect();
    if !threads.is_empty() {
        s.push_str(&format!(", with {}", threads.join(", ")));
    }
    s
}

/// A rate in two significant figures: "1.2 M", "50 k", "830".
fn per_s(v: f64) -> String {
    let (d, p) = match v {
        v if v >= 1e9 => (1e9, " G"),
        v if v >= 1e6 => (1e6, " M"),
        v if v >= 1e3 => (1e3, " k"),
        _ => (1.0, " "),
    };
    let x = v / d;
    if x < 10.0 && d > 1.0 {
        format!("{x:.1}{p}")
    } else {
        format!("{x:.0}{p}")
    }
}

#[cfg(test)]
mod tests;
