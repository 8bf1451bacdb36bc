//! The live bottleneck finder: from the kernel snapshots every agent took
//! before and after a test, per-core load on each host (busy %, its split,
//! network softirqs per second, linerate's own threads) and a verdict that
//! names the first full core and whose work filled it. Pure logic over
//! [`Snapshot`]s; the runner collects them and `runner::record` calls this.

use crate::proto::{CpuTicks, Snapshot, ThreadTicks};
use crate::results::{Bottleneck, BottleneckKind, CpuLoad, ThreadLoad};

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

/// Fewer packets short than this is counting noise at any rate.
pub const SHORT_MIN_PACKETS: u64 = 10;

/// Lost at one place, this share of what was offered marks that place as
/// the limit (the senders offered more than it passed).
const LIMIT_SHARE: f64 = 0.01;

/// Per-core load and the verdict; `None` when no agent reported per-core
/// times (older agents). `wall_s` is how long traffic flowed; 0 uses the
/// time between the snapshots. `traffic` (packet tests) lets the frames
/// name the limit before the cores do.
pub fn analyse(agents: &[AgentCpu], wall_s: f64, traffic: Option<Traffic>) -> Option<Bottleneck> {
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
    Some(verdict(loads, hosts.len() > 1, traffic.unwrap_or_default()))
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

fn verdict(loads: Vec<CpuLoad>, many_hosts: bool, traffic: Traffic) -> Bottleneck {
    let name = |c: &CpuLoad| {
        if many_hosts {
            format!("{} CPU{}", c.host, c.cpu)
        } else {
            format!("CPU{}", c.cpu)
        }
    };
    let mut order: Vec<&CpuLoad> = loads.iter().collect();
    order.sort_by(|x, y| {
        y.busy_pct
            .total_cmp(&x.busy_pct)
            .then(x.host.cmp(&y.host))
            .then(x.cpu.cmp(&y.cpu))
    });
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
    // the senders kept offering more.
    if traffic.beyond_noise(traffic.tester_drops) {
        return frames_verdict(&loads, &full, many_hosts, traffic, false);
    }
    if traffic.beyond_noise(traffic.dut_lost) {
        return frames_verdict(&loads, &full, many_hosts, traffic, true);
    }
    // The senders offered what --rate asked and it arrived: the rate set
    // the load, whatever the cores did meanwhile.
    if traffic.rate_met() {
        return rate_verdict(&loads, &order, many_hosts, traffic);
    }
    // Among full cores, one running the tester's own threads explains the
    // limit first: the DUT's figure is then a floor.
    let pick = full
        .iter()
        .copied()
        .find(|c| {
            c.threads
                .iter()
                .any(|t| engine_share(t) && is_sender(&t.name))
        })
        .or_else(|| {
            full.iter().copied().find(|c| {
                c.threads
                    .iter()
                    .any(|t| engine_share(t) && is_receiver(&t.name))
            })
        })
        .or_else(|| full.first().copied());
    let (kind, text, host, cpu) = match pick {
        None => match order.first() {
            Some(c) => (
                BottleneckKind::NoneSaturated,
                format!(
                    "no core saturated (busiest {} {:.0} %: {}): the limit is elsewhere (the DUT or the link)",
                    name(c),
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
        },
        Some(c) => {
            let sender = c
                .threads
                .iter()
                .find(|t| engine_share(t) && is_sender(&t.name));
            let receiver = c
                .threads
                .iter()
                .find(|t| engine_share(t) && is_receiver(&t.name));
            let (kind, why) = if let Some(t) = sender {
                (
                    BottleneckKind::TesterSender,
                    format!("the tester's sender core is the limit ({} {})", t.role, t.name),
                )
            } else if let Some(t) = receiver {
                (
                    BottleneckKind::TesterReceiver,
                    format!("the tester's receiver core is the limit ({} {})", t.role, t.name),
                )
            } else if c.softirq_pct >= c.busy_pct / 2.0 {
                (
                    BottleneckKind::Softirq,
                    format!(
                        "packet processing (softirq) on {} is the limit — the DUT's forwarding in a namespace lab, or interrupt placement",
                        name(c)
                    ),
                )
            } else if let Some(t) = spilled(&loads, c) {
                // linerate's own thread, unpinned: its time is listed on the
                // core it was last seen on, but it ran here too.
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
                )
            } else {
                (
                    BottleneckKind::OtherWork,
                    "work other than linerate's threads fills it (another process or the kernel)"
                        .to_string(),
                )
            };
            let mut text = format!("{} {:.0} %: {}: {why}", name(c), c.busy_pct, evidence(c));
            if c.other_pct >= OTHER_NOTABLE_PCT && spilled(&loads, c).is_none() {
                text.push_str(&format!(
                    "; {:.0} % of it went to other processes, so this measures a shared core: \
                     rerun on an idle host or give linerate cores of its own (--cpus)",
                    c.other_pct
                ));
            }
            let others: Vec<String> = full
                .iter()
                .filter(|o| !std::ptr::eq(**o, c))
                .map(|o| format!("{} {:.0} %", name(o), o.busy_pct))
                .collect();
            if !others.is_empty() {
                text.push_str(&format!("; also saturated: {}", others.join(", ")));
            }
            (kind, text, c.host.clone(), Some(c.cpu))
        }
    };
    Bottleneck {
        verdict: text,
        kind,
        host,
        cpu,
        host_cpus: loads,
    }
}

/// The verdict when the frames were lost in numbers at one place: the DUT
/// (`at_dut`) or the tester's receiving side. Names the full core where
/// that work ran (not a sender's), or the busiest.
fn frames_verdict(
    loads: &[CpuLoad],
    full: &[&CpuLoad],
    many_hosts: bool,
    t: Traffic,
    at_dut: bool,
) -> Bottleneck {
    let name = |c: &CpuLoad| {
        if many_hosts {
            format!("{} CPU{}", c.host, c.cpu)
        } else {
            format!("CPU{}", c.cpu)
        }
    };
    let has_sender = |c: &CpuLoad| {
        c.threads
            .iter()
            .any(|th| engine_share(th) && is_sender(&th.name))
    };
    let core = full.iter().copied().find(|c| !has_sender(c)).or_else(|| {
        loads
            .iter()
            .filter(|c| !has_sender(c))
            .max_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct))
    });
    let lost = if at_dut { t.dut_lost } else { t.tester_drops };
    let share = 100.0 * lost as f64 / t.offered.max(1) as f64;
    let (kind, mut text) = if at_dut {
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
    if let Some(c) = core {
        text.push_str(&format!(
            "; {} {:.0} %: {}",
            name(c),
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
fn rate_verdict(loads: &[CpuLoad], order: &[&CpuLoad], many_hosts: bool, t: Traffic) -> Bottleneck {
    let mut text = format!(
        "limited by --rate: the asked rate was met ({} of {} frames asked were offered); \
         neither the tester nor the DUT was the limit",
        t.offered, t.asked
    );
    let busiest = order.first().copied();
    if let Some(c) = busiest {
        let name = if many_hosts {
            format!("{} CPU{}", c.host, c.cpu)
        } else {
            format!("CPU{}", c.cpu)
        };
        text.push_str(&format!(
            "; busiest {name} {:.0} %: {}",
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
        .map(|t| format!("{}'s {} at {:.0} %", t.role, t.name, t.cpu_pct))
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
mod tests {
    use super::*;

    /// A core's ticks since boot; `busy` split as (user, system, softirq).
    fn core(cpu: u32, user: u64, system: u64, softirq: u64, idle: u64, net_rx: u64) -> CpuTicks {
        CpuTicks {
            cpu,
            user,
            system,
            softirq,
            idle,
            net_rx,
            ..Default::default()
        }
    }

    fn thread(tid: u32, name: &str, ticks: u64, cpu: u32) -> ThreadTicks {
        ThreadTicks {
            tid,
            name: name.into(),
            utime: ticks / 4,
            stime: ticks - ticks / 4,
            cpu,
        }
    }

    fn snap(per_cpu: Vec<CpuTicks>, threads: Vec<ThreadTicks>) -> Snapshot {
        Snapshot {
            per_cpu,
            threads,
            ..Default::default()
        }
    }

    /// A 10 s test (1000 ticks per core) on two cores.
    fn before() -> Snapshot {
        snap(
            vec![
                core(0, 1000, 1000, 100, 50_000, 10),
                core(1, 1000, 500, 100, 50_000, 10),
            ],
            vec![thread(7, "linerate", 5, 1)],
        )
    }

    #[test]
    fn full_sender_core_names_the_sender() {
        let b = before();
        // CPU0: 580 softirq + 420 system ticks, no idle: full. The sender
        // thread (started after the first snapshot) used 970 ticks there.
        let a = snap(
            vec![
                core(0, 1000, 1420, 680, 50_000, 12_000_010),
                core(1, 1100, 600, 150, 50_750, 10),
            ],
            vec![
                thread(7, "linerate", 6, 1),
                thread(9, "lr-udp-send", 970, 0),
            ],
        );
        let sink_b = snap(b.per_cpu.clone(), vec![]);
        let sink_a = snap(a.per_cpu.clone(), vec![thread(11, "lr-udp-recv", 200, 1)]);
        let agents = [
            AgentCpu {
                host: "lab".into(),
                role: "gen".into(),
                before: &b,
                after: &a,
            },
            // Same host: its per-core times are not counted twice.
            AgentCpu {
                host: "lab".into(),
                role: "sink".into(),
                before: &sink_b,
                after: &sink_a,
            },
        ];
        let v = analyse(&agents, 10.0, None).unwrap();
        assert_eq!(v.host_cpus.len(), 2, "one host, two cores");
        let c0 = &v.host_cpus[0];
        assert_eq!(c0.busy_pct, 100.0);
        assert_eq!(c0.softirq_pct, 58.0);
        assert_eq!(c0.system_pct, 42.0);
        assert_eq!(c0.net_rx_per_s, 1_200_000.0);
        assert_eq!(c0.threads[0].name, "lr-udp-send");
        assert_eq!(c0.threads[0].role, "gen");
        assert_eq!(c0.threads[0].cpu_pct, 97.0);
        let c1 = &v.host_cpus[1];
        assert_eq!(c1.busy_pct, 25.0);
        assert_eq!(c1.threads[0].name, "lr-udp-recv");
        assert_eq!(v.kind, BottleneckKind::TesterSender);
        assert_eq!(v.cpu, Some(0));
        assert!(
            v.verdict
                .starts_with("CPU0 100 %: 58 % softirq (NET_RX 1.2 M/s), 42 % system"),
            "{}",
            v.verdict
        );
        assert!(
            v.verdict.contains("with gen's lr-udp-send at 97 %"),
            "{}",
            v.verdict
        );
        assert!(
            v.verdict
                .ends_with("the tester's sender core is the limit (gen lr-udp-send)"),
            "{}",
            v.verdict
        );
    }

    /// The lab's live-engine case: the sender core is full generating,
    /// the DUT's forwarding fills the other core, and most frames are lost
    /// at the DUT. The frames name the DUT, not the busy sender.
    #[test]
    fn frames_lost_at_the_dut_name_the_dut_not_the_full_sender() {
        let (b, a) = sender_and_dut_full();
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: &b,
            after: &a,
        }];
        let dut = Traffic {
            offered: 13_000_000,
            dut_lost: 12_300_000,
            tester_drops: 0,
            received: 700_000,
            ..Default::default()
        };
        let v = analyse(&agents, 10.0, Some(dut)).unwrap();
        assert_eq!(v.kind, BottleneckKind::Dut, "{}", v.verdict);
        assert_eq!(v.cpu, Some(1), "the DUT's core, not the sender's");
        assert!(v.verdict.contains("12300000 of 13000000"), "{}", v.verdict);
        // The same cores with the loss at the tester's own receiver.
        let rx = Traffic {
            offered: 13_000_000,
            dut_lost: 0,
            tester_drops: 12_000_000,
            received: 1_000_000,
            ..Default::default()
        };
        let v = analyse(&agents, 10.0, Some(rx)).unwrap();
        assert_eq!(v.kind, BottleneckKind::TesterReceiver, "{}", v.verdict);
        // Loss within counting noise leaves the cores to decide.
        let noise = Traffic {
            offered: 13_000_000,
            dut_lost: 150,
            tester_drops: 0,
            received: 12_999_850,
            ..Default::default()
        };
        let v = analyse(&agents, 10.0, Some(noise)).unwrap();
        assert_eq!(v.kind, BottleneckKind::TesterSender, "{}", v.verdict);
    }

    /// Issue 22: the loss of a test fell while the sink's link to the DUT
    /// was down. The verdict names that link, not the DUT's forwarding nor
    /// the full sender core; loss mostly elsewhere still names the DUT.
    #[test]
    fn issue_22_loss_while_a_link_was_down_names_the_link() {
        let (b, a) = sender_and_dut_full();
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: &b,
            after: &a,
        }];
        let link = LinkDown {
            role: "sink".into(),
            ifname: "lrs0".into(),
        };
        let down = Traffic {
            offered: 180_000,
            dut_lost: 41_000,
            received: 139_000,
            link_down_lost: 40_500,
            links_down: vec![link.clone()],
            ..Default::default()
        };
        let v = analyse(&agents, 9.0, Some(down.clone())).unwrap();
        assert_eq!(v.kind, BottleneckKind::LinkDown, "{}", v.verdict);
        assert!(v.verdict.contains("lrs0 at the sink"), "{}", v.verdict);
        assert!(v.verdict.contains("40500 of 180000"), "{}", v.verdict);
        assert_eq!((v.host.as_str(), v.cpu), ("sink", None));
        // Most of the loss outside the marked intervals: the DUT.
        let elsewhere = Traffic {
            dut_lost: 100_000,
            received: 80_000,
            ..down.clone()
        };
        let v = analyse(&agents, 9.0, Some(elsewhere)).unwrap();
        assert_eq!(v.kind, BottleneckKind::Dut, "{}", v.verdict);
        // A link down with loss within counting noise decides nothing.
        let blip = Traffic {
            dut_lost: 150,
            link_down_lost: 150,
            received: 179_850,
            ..down
        };
        let v = analyse(&agents, 9.0, Some(blip)).unwrap();
        assert_ne!(v.kind, BottleneckKind::LinkDown, "{}", v.verdict);
    }

    #[test]
    fn nothing_full_says_so_and_names_the_busiest() {
        let b = before();
        let a = snap(
            vec![
                core(0, 1100, 1100, 200, 50_700, 10),
                core(1, 1300, 630, 300, 50_370, 500_010),
            ],
            vec![thread(9, "lr-udp-send", 250, 0)],
        );
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: &b,
            after: &a,
        }];
        let v = analyse(&agents, 10.0, None).unwrap();
        assert_eq!(v.kind, BottleneckKind::NoneSaturated);
        assert_eq!(v.cpu, Some(1));
        assert!(v.verdict.starts_with("no core saturated (busiest CPU1 63 %: 30 % user, 20 % softirq (NET_RX 50 k/s), 13 % system)"), "{}", v.verdict);
        assert!(v
            .verdict
            .ends_with("the limit is elsewhere (the DUT or the link)"));
    }

    #[test]
    fn full_softirq_core_without_linerate_is_packet_processing() {
        let b = before();
        let a = snap(
            vec![
                core(0, 1010, 1100, 1000, 50_000, 900_010),
                core(1, 1100, 600, 150, 50_750, 10),
            ],
            vec![],
        );
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "dut".into(),
            before: &b,
            after: &a,
        }];
        let v = analyse(&agents, 10.0, None).unwrap();
        assert_eq!(v.kind, BottleneckKind::Softirq);
        assert!(
            v.verdict.contains("packet processing (softirq) on CPU0"),
            "{}",
            v.verdict
        );
    }

    #[test]
    fn receiver_core_and_hosts_apart() {
        let b = before();
        let a = snap(
            vec![
                core(0, 1000, 1100, 200, 50_800, 10),
                core(1, 1400, 900, 300, 50_000, 10),
            ],
            vec![thread(12, "lr-tcp-recv", 800, 1)],
        );
        let other_b = before();
        let other_a = snap(
            vec![
                core(0, 1100, 1100, 200, 50_700, 10),
                core(1, 1100, 600, 150, 50_750, 10),
            ],
            vec![],
        );
        let agents = [
            AgentCpu {
                host: "a".into(),
                role: "gen".into(),
                before: &other_b,
                after: &other_a,
            },
            AgentCpu {
                host: "b".into(),
                role: "sink".into(),
                before: &b,
                after: &a,
            },
        ];
        let v = analyse(&agents, 10.0, None).unwrap();
        assert_eq!(v.host_cpus.len(), 4);
        assert_eq!(v.kind, BottleneckKind::TesterReceiver);
        assert_eq!((v.host.as_str(), v.cpu), ("b", Some(1)));
        assert!(v.verdict.starts_with("b CPU1 100 %"), "{}", v.verdict);
    }

    #[test]
    fn a_shared_core_is_called_out() {
        let b = before();
        // CPU0 full, but the sender got 300 of its 1000 ticks and softirq 100:
        // the other 600 belong to someone else.
        let a = snap(
            vec![
                core(0, 1650, 1250, 200, 50_000, 10),
                core(1, 1100, 600, 150, 50_750, 10),
            ],
            vec![thread(9, "lr-udp-send", 300, 0)],
        );
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: &b,
            after: &a,
        }];
        let v = analyse(&agents, 10.0, None).unwrap();
        assert_eq!(v.kind, BottleneckKind::TesterSender);
        assert_eq!(v.host_cpus[0].other_pct, 60.0);
        assert!(
            v.verdict.contains("60 % of it went to other processes"),
            "{}",
            v.verdict
        );
    }

    #[test]
    fn old_agents_give_no_verdict() {
        let s = Snapshot::default();
        let agents = [AgentCpu {
            host: "x".into(),
            role: "gen".into(),
            before: &s,
            after: &s,
        }];
        assert!(analyse(&agents, 1.0, None).is_none());
    }

    /// The lab's live-engine cores: the sender fills CPU0, the DUT's
    /// forwarding CPU1.
    fn sender_and_dut_full() -> (Snapshot, Snapshot) {
        let a = snap(
            vec![
                core(0, 1000, 1420, 680, 50_000, 10),
                core(1, 1100, 1530, 150, 50_000, 10),
            ],
            vec![thread(9, "lr-udp-send", 970, 0)],
        );
        (before(), a)
    }

    /// Two cores with the sender's full: the 200 kpps case of issue 23.
    fn full_sender(threads: Vec<ThreadTicks>) -> (Snapshot, Snapshot) {
        let a = snap(
            vec![
                core(0, 1000, 1420, 680, 50_000, 10),
                core(1, 1100, 600, 150, 50_750, 10),
            ],
            threads,
        );
        (before(), a)
    }

    #[test]
    fn issue_23_a_met_rate_is_limited_by_the_rate_not_the_sender() {
        let (b, a) = full_sender(vec![thread(9, "lr-udp-send", 970, 0)]);
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "gen".into(),
            before: &b,
            after: &a,
        }];
        // 199,999 of 200,000 pps asked over 10 s, no loss.
        let met = Traffic {
            offered: 1_999_990,
            asked: 2_000_000,
            received: 1_999_990,
            ..Default::default()
        };
        let v = analyse(&agents, 10.0, Some(met.clone())).unwrap();
        assert_eq!(v.kind, BottleneckKind::RateLimited, "{}", v.verdict);
        assert!(
            v.verdict
                .starts_with("limited by --rate: the asked rate was met"),
            "{}",
            v.verdict
        );
        assert!(
            !v.verdict.contains("sender core is the limit"),
            "{}",
            v.verdict
        );
        // A real shortfall with the sender core full: the tester.
        let short = Traffic {
            offered: 1_500_000,
            received: 1_500_000,
            ..met.clone()
        };
        let v = analyse(&agents, 10.0, Some(short)).unwrap();
        assert_eq!(v.kind, BottleneckKind::TesterSender, "{}", v.verdict);
        // Everything lost: no core is blamed, the path is.
        let none = Traffic {
            dut_lost: 1_999_990,
            received: 0,
            ..met
        };
        let v = analyse(&agents, 10.0, Some(none)).unwrap();
        assert_eq!(v.kind, BottleneckKind::NothingArrived, "{}", v.verdict);
        assert!(!v.verdict.contains("sender"), "{}", v.verdict);
    }

    #[test]
    fn issue_23_a_shortfall_within_counting_noise_is_not_a_limit() {
        // 1 kpps for 3 s, one packet short: noise.
        assert!(!sender_short(2_999, 3_000));
        // Below 10 packets short is noise whatever the share.
        assert!(!sender_short(91, 100));
        // 10 short but under 1 %: noise.
        assert!(!sender_short(599_000, 600_000));
        // Both: a limit.
        assert!(sender_short(590_000, 600_000));
        assert!(sender_short(80, 100));
        // Unpaced (nothing asked) is never short; more than asked is not.
        assert!(!sender_short(5, 0));
        assert!(!sender_short(3_001, 3_000));
    }

    #[test]
    fn issue_23_linerate_threads_that_moved_are_not_another_process() {
        let b = before();
        // CPU1 full with nothing listed; the receiver's 950 ticks are
        // listed on CPU0 (where it was last seen), which was only 20 % busy.
        let a = snap(
            vec![
                core(0, 1100, 1100, 100, 50_800, 10),
                core(1, 1600, 1000, 100, 50_000, 10),
            ],
            vec![thread(11, "lr-udp-recv", 950, 0)],
        );
        let agents = [AgentCpu {
            host: "lab".into(),
            role: "sink".into(),
            before: &b,
            after: &a,
        }];
        let v = analyse(&agents, 10.0, None).unwrap();
        assert_eq!(v.cpu, Some(1));
        assert_eq!(v.kind, BottleneckKind::TesterReceiver, "{}", v.verdict);
        assert!(
            v.verdict.contains("linerate's own sink lr-udp-recv"),
            "{}",
            v.verdict
        );
        assert!(!v.verdict.contains("other than linerate"), "{}", v.verdict);
        assert!(!v.verdict.contains("other processes"), "{}", v.verdict);
    }
}
