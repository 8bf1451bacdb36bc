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

/// Which of a linerate lab's work runs on which core, as the lab laid it
/// out (`lab/cores.rs`): the generator's senders, the tester's receive
/// (its NAPI threads, its receiver threads) and the DUT's receive and
/// forwarding. With it a verdict names a core with its role ("CPU0
/// (tester: generator and gen/sink NAPI)", "CPU1 (DUT)"), never calls a
/// full core of the tester's the DUT's limit, and calls a full core of the
/// DUT's the DUT's forwarding. Empty outside a lab.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreRoles {
    cores: Vec<CoreRole>,
}

/// What the layout put on one core.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct CoreRole {
    host: String,
    cpu: u32,
    generator: bool,
    receiver: bool,
    /// Roles whose receive NAPI threads are pinned here (gen, sink, switch).
    tester_napi: Vec<String>,
    dut: bool,
}

impl CoreRole {
    fn tester(&self) -> bool {
        self.generator || self.receiver || !self.tester_napi.is_empty()
    }

    /// The tester's work here: "generator and gen/sink NAPI".
    fn tester_work(&self) -> String {
        let mut parts = Vec::new();
        if self.generator {
            parts.push("generator".to_string());
        }
        if self.receiver {
            parts.push("receiver".to_string());
        }
        if !self.tester_napi.is_empty() {
            parts.push(format!("{} NAPI", self.tester_napi.join("/")));
        }
        match parts.as_slice() {
            [rest @ .., last] if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => parts.concat(),
        }
    }

    /// "DUT", "tester: generator and sink NAPI", or both.
    fn label(&self) -> String {
        match (self.dut, self.tester()) {
            (true, true) => format!("DUT and tester: {}", self.tester_work()),
            (true, false) => "DUT".to_string(),
            (false, _) => format!("tester: {}", self.tester_work()),
        }
    }

    /// Only the tester's work runs here.
    fn tester_only(&self) -> bool {
        self.tester() && !self.dut
    }

    /// Only the DUT's work runs here.
    fn dut_only(&self) -> bool {
        self.dut && !self.tester()
    }
}

impl CoreRoles {
    /// The roles of the lab's record, its cores on `host`. `None` when an
    /// interface kept the kernel's receive (its work then runs in the
    /// softirq of whichever core raised it, so no core has one role).
    pub fn from_lab(host: &str, c: &LabCores) -> Option<CoreRoles> {
        if c.napi.iter().any(|n| n.error.is_some()) {
            return None;
        }
        let mut r = CoreRoles::default();
        for cpu in c.generator.iter().filter_map(|&c| u32::try_from(c).ok()) {
            r.at(host, cpu).generator = true;
        }
        for n in &c.napi {
            for cpu in n.cpus.iter().filter_map(|&c| u32::try_from(c).ok()) {
                r.napi(host, cpu, &n.role);
            }
        }
        Some(r)
    }

    /// The roles the lab's agents report: each pinned its namespace's NAPI
    /// threads as the layout said (its snapshots list them with their
    /// CPUs). `None` when a DUT's or a tester end's receive was not laid
    /// out (no NAPI threads of its own): the DUT's forwarding then runs in
    /// the softirq of whichever core raised it, the tester's own too. Where
    /// the tester's senders and receivers ran, [`analyse`] adds from their
    /// threads' time.
    pub fn from_agents(agents: &[AgentCpu]) -> Option<CoreRoles> {
        let laid_out = |a: &AgentCpu| !a.after.napi.is_empty();
        if agents.iter().any(|a| a.role == "dut") {
            let ends = ["dut", "gen", "sink"];
            if agents
                .iter()
                .any(|a| ends.contains(&a.role.as_str()) && !laid_out(a))
            {
                return None;
            }
        }
        let mut r = CoreRoles::default();
        for a in agents {
            for n in &a.after.napi {
                for &cpu in &n.cpus {
                    r.napi(&a.host, cpu, &a.role);
                }
            }
        }
        Some(r)
    }

    /// The tester's engine threads that used a share of a core worth
    /// listing: a sender makes it the generator's, a receiver the tester
    /// receiver's (a control thread waking now and then makes it neither).
    fn with_threads(mut self, loads: &[CpuLoad]) -> CoreRoles {
        for c in loads {
            for t in c
                .threads
                .iter()
                .filter(|t| t.cpu_pct >= 1.0 && t.role != "dut")
            {
                if is_sender(&t.name) {
                    self.at(&c.host, c.cpu).generator = true;
                } else if is_receiver(&t.name) {
                    self.at(&c.host, c.cpu).receiver = true;
                }
            }
        }
        self
    }

    fn at(&mut self, host: &str, cpu: u32) -> &mut CoreRole {
        let i = match self
            .cores
            .iter()
            .position(|c| c.host == host && c.cpu == cpu)
        {
            Some(i) => i,
            None => {
                self.cores.push(CoreRole {
                    host: host.to_string(),
                    cpu,
                    ..Default::default()
                });
                self.cores.len() - 1
            }
        };
        &mut self.cores[i]
    }

    /// A NAPI thread of `role`'s namespace pinned to `cpu`.
    fn napi(&mut self, host: &str, cpu: u32, role: &str) {
        let c = self.at(host, cpu);
        if role == "dut" {
            c.dut = true;
        } else if !c.tester_napi.iter().any(|r| r == role) {
            c.tester_napi.push(role.to_string());
        }
    }

    fn of(&self, c: &CpuLoad) -> Option<&CoreRole> {
        self.cores
            .iter()
            .find(|r| r.host == c.host && r.cpu == c.cpu)
            .filter(|r| r.dut || r.tester())
    }
}

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
    // Most of the loss fell while a link was down: the link explains it,
    // not the DUT's forwarding nor the tester (whose cores idled).
    if !traffic.links_down.is_empty()
        && traffic.beyond_noise(traffic.link_down_lost)
        && traffic.link_down_lost * 2 >= traffic.dut_lost
    {
        return link_verdict(&loads, traffic);
    }
    // Nothing arrived: no core explains that, a path does.
    if traffic.offered > 0 && traffic.received == 0 {
        return nothing_arrived(&loads, traffic);
    }
    // The frames say where the limit was when they were lost in numbers:
    // at the tester's receiving side (its own drops), or at the DUT while
    // the senders kept offering more. A DUT that lost frames while the
    // senders fell short of the rate is the DUT's evidence at the rate
    // offered, never a tester limit ([`tester_limited`]).
    if traffic.beyond_noise(traffic.tester_drops) {
        return frames_verdict(&loads, &full, names, traffic, false);
    }
    if traffic.beyond_noise(traffic.dut_lost) || (traffic.sender_short() && traffic.dut_lost > 0) {
        return frames_verdict(&loads, &full, names, traffic, true);
    }
    // The senders offered what --rate asked and it arrived: the rate set
    // the load, whatever the cores did meanwhile.
    if traffic.rate_met() {
        return rate_verdict(&loads, &order, names, traffic);
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
fn why_full(c: &CpuLoad, loads: &[CpuLoad], names: &Names) -> (BottleneckKind, String, bool) {
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
fn short_verdict(
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
fn frames_verdict(
    loads: &[CpuLoad],
    full: &[&CpuLoad],
    names: &Names,
    t: Traffic,
    at_dut: bool,
) -> Bottleneck {
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
    let core = full
        .iter()
        .copied()
        .find(|c| ours(c))
        .or_else(|| loads.iter().filter(|c| ours(c)).max_by(busiest))
        .or_else(|| full.iter().copied().find(|c| fallback(c)))
        .or_else(|| loads.iter().filter(|c| fallback(c)).max_by(busiest));
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

/// A linerate engine thread of `c`'s host that cannot have spent all its
/// time on the core it is listed on (that core's busy time outside softirq
/// and IRQs is short of the linerate time listed there): an unpinned
/// thread the scheduler moved, which is where `c`'s unexplained time went.
/// `None` when `c`'s busy time is explained or no such thread exists.
fn spilled<'a>(loads: &'a [CpuLoad], c: &CpuLoad) -> Option<&'a ThreadLoad> {
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
fn rate_verdict(loads: &[CpuLoad], order: &[&CpuLoad], names: &Names, t: Traffic) -> Bottleneck {
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
fn link_verdict(loads: &[CpuLoad], t: Traffic) -> Bottleneck {
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
fn nothing_arrived(loads: &[CpuLoad], t: Traffic) -> Bottleneck {
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
