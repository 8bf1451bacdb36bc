//! Network configuration steps, applied inside the current network
//! namespace with iproute2, nft and ethtool.
//!
//! Why tools and not netlink: iproute2 is on every host the lab runs on and
//! its error messages are the ones network engineers already read. Every
//! argument comes from typed fields (addresses, MACs, checked names), never a
//! shell string, and a missing tool is reported with the package to install.
//! Physical ports (take, check, give back) live in [`port`].

mod cmd;
mod error;
pub mod port;
pub mod reach;
pub mod vlan;

use cmd::family;
pub use cmd::{check_ifname, mac_string, run, run_output, set_neighbour, tool_exists};
pub use error::NetopsError;

use crate::model::error::Context;
use crate::proto::NetOp;
use error::{err, fail, Result};
use std::net::IpAddr;
use std::time::Duration;

/// What an agent gives back on its way out: VLAN sub-interfaces first
/// (their addresses belong on interfaces that stay here), then ports.
pub fn restore_all() {
    vlan::restore_all();
    port::restore_all();
}

pub fn apply(op: &NetOp) -> Result<()> {
    match op {
        NetOp::LinkUp { dev } => {
            check_ifname(dev)?;
            run("ip", &["link", "set", "dev", dev, "up"], None)
        }
        NetOp::Mtu { dev, mtu } => {
            check_ifname(dev)?;
            run(
                "ip",
                &["link", "set", "dev", dev, "mtu", &mtu.to_string()],
                None,
            )
        }
        NetOp::Bridge { name, ports } => bridge(name, ports),
        NetOp::Bond { name, ports } => bond(name, ports),
        NetOp::Addr { dev, addr, prefix } => add_address(dev, addr, *prefix),
        NetOp::Route { dst, prefix, via } => route_via(dst, *prefix, via),
        NetOp::LocalRoute { dst, prefix } => local_route(dst, *prefix),
        NetOp::Neigh { dev, addr, mac } => set_neighbour(dev, *addr, mac),
        NetOp::Sysctl { key, value } => set_sysctl(key, value),
        NetOp::Offload { dev, feature, on } => set_offload(dev, feature, *on),
        NetOp::StallWatch { on } => {
            crate::host::stalls::set_active(*on);
            Ok(())
        }
        NetOp::Nft { ruleset } => run("nft", &["-f", "-"], Some(ruleset)),
        NetOp::Rps { dev, cpus } => {
            check_ifname(dev)?;
            set_rps(dev, cpus)
        }
        NetOp::NapiThreads {
            dev,
            cpus,
            realtime,
            defer_hard_irqs,
            gro_flush_timeout_ns,
        } => {
            check_ifname(dev)?;
            napi_threads(
                dev,
                cpus,
                *realtime,
                (*defer_hard_irqs, *gro_flush_timeout_ns),
            )
        }
        NetOp::Shape {
            dev,
            rate_bps,
            burst_bytes,
            limit_bytes,
        } => shape(dev, *rate_bps, *burst_bytes, *limit_bytes),
        NetOp::Netem {
            dev,
            delay_us,
            jitter_us,
            reorder_pct,
            limit_packets,
        } => {
            check_ifname(dev)?;
            netem(dev, *delay_us, *jitter_us, *reorder_pct, *limit_packets)
        }
        NetOp::TakePort { dev, force } => port::take(dev, *force),
        NetOp::ResolveNeigh { dev, addr, also } => port::resolve(dev, *addr, also).map(drop),
        NetOp::Fdb { dev, mac } => static_fdb(dev, mac),
        // The program's BPF link must live as long as the agent, so the
        // agent attaches it (engine::xdp::stick), not this stateless layer.
        NetOp::Stick { dev, .. } | NetOp::XdpPass { dev } => fail!(
            "the router-on-a-stick program for {dev} is attached by the agent itself; this agent build did not: use the same linerate build for controller and agents"
        ),
    }
}

/// A bridge `name` without STP delays, its `ports` enslaved, up.
fn bridge(name: &str, ports: &[String]) -> Result<()> {
    check_ifname(name)?;
    run(
        "ip",
        &[
            "link",
            "add",
            name,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
        ],
        None,
    )?;
    for p in ports {
        check_ifname(p)?;
        run("ip", &["link", "set", "dev", p, "master", name], None)?;
    }
    run("ip", &["link", "set", "dev", name, "up"], None)
}

/// Adds `addr/prefix` to `dev` (IPv6 without duplicate address detection).
fn add_address(dev: &str, addr: &IpAddr, prefix: u8) -> Result<()> {
    check_ifname(dev)?;
    let cidr = format!("{addr}/{prefix}");
    let mut args = vec![family(addr), "addr", "add", &cidr, "dev", dev];
    if addr.is_ipv6() {
        // No duplicate address detection: the address is usable at once.
        args.push("nodad");
    }
    run("ip", &args, None)
}

/// Routes `dst/prefix` via the gateway `via`.
fn route_via(dst: &IpAddr, prefix: u8, via: &IpAddr) -> Result<()> {
    let cidr = format!("{dst}/{prefix}");
    run(
        "ip",
        &[
            family(dst),
            "route",
            "replace",
            &cidr,
            "via",
            &via.to_string(),
        ],
        None,
    )
}

/// Makes `dst/prefix` local: this host receives it on `lo`.
fn local_route(dst: &IpAddr, prefix: u8) -> Result<()> {
    let cidr = format!("{dst}/{prefix}");
    run(
        "ip",
        &[family(dst), "route", "replace", "local", &cidr, "dev", "lo"],
        None,
    )
}

/// A static entry for `mac` on the bridge port `dev`.
fn static_fdb(dev: &str, mac: &[u8; 6]) -> Result<()> {
    check_ifname(dev)?;
    let mac = mac_string(mac);
    run(
        "bridge",
        &["fdb", "replace", &mac, "dev", dev, "master", "static"],
        None,
    )
}

/// Sets the sysctl `key` (only `net.*` keys) to `value`.
fn set_sysctl(key: &str, value: &str) -> Result<()> {
    if !key.starts_with("net.")
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        || key.contains("..")
    {
        fail!("refusing sysctl '{key}': only net.* keys are set by linerate");
    }
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    Ok(std::fs::write(&path, value).with_context(|| format!("setting {key}={value} ({path})"))?)
}

/// Turns the offload `feature` of `dev` on or off with ethtool.
fn set_offload(dev: &str, feature: &str, on: bool) -> Result<()> {
    check_ifname(dev)?;
    if !feature
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        fail!("'{feature}' is not an offload name");
    }
    run(
        "ethtool",
        &["-K", dev, feature, if on { "on" } else { "off" }],
        None,
    )
}

/// A token bucket on `dev`'s root: `rate_bps`, `burst_bytes`, a queue of
/// `limit_bytes`.
fn shape(dev: &str, rate_bps: u64, burst_bytes: u32, limit_bytes: u32) -> Result<()> {
    check_ifname(dev)?;
    if rate_bps == 0 || burst_bytes == 0 || limit_bytes == 0 {
        fail!("shaping {dev}: rate, burst and queue must be above 0");
    }
    run(
        "tc",
        &[
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &format!("{rate_bps}bit"),
            "burst",
            &burst_bytes.to_string(),
            "limit",
            &limit_bytes.to_string(),
        ],
        None,
    )
}

/// Makes `name` an 802.3ad bond (`lab --dut-vm --dut-bond`) (MII link monitoring every 100 ms) of
/// `ports`: each is taken down and enslaved, in order, so the bond takes
/// the first one's MAC. The bond stays down; its MTU, addresses and link
/// are the next steps'.
pub fn bond(name: &str, ports: &[String]) -> Result<()> {
    check_ifname(name)?;
    if ports.is_empty() {
        fail!("bond {name}: give it at least one port");
    }
    let made = run(
        "ip",
        &[
            "link", "add", name, "type", "bond", "mode", "802.3ad", "miimon", "100",
        ],
        None,
    );
    if let Err(e) = made {
        let text = e.to_string();
        if text.contains("Unknown device type") || text.contains("not supported") {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            fail!(
                "the DUT's 802.3ad bond needs the bonding driver, and this kernel ({}) has none \
                 (neither built in nor a module it can load): give the DUT VM a kernel that has \
                 it, e.g. --dut-kernel debian:bookworm (Debian's kernels do), or drop --dut-bond",
                release.trim()
            );
        }
        return Err(e);
    }
    for p in ports {
        check_ifname(p)?;
        run("ip", &["link", "set", "dev", p, "down"], None)?;
        run("ip", &["link", "set", "dev", p, "master", name], None)?;
    }
    Ok(())
}

/// tc netem on `dev`'s egress; a kernel without sch_netem is refused with
/// what to do instead.
fn netem(dev: &str, delay_us: u32, jitter_us: u32, reorder: Option<f64>, limit: u32) -> Result<()> {
    if reorder.is_some_and(|p| !(p > 0.0 && p < 100.0)) || limit == 0 {
        fail!(
            "netem on {dev}: reorder must be a percentage between 0 and 100 and the limit above 0"
        );
    }
    let (delay, jitter, limit) = (
        format!("{delay_us}us"),
        format!("{jitter_us}us"),
        limit.to_string(),
    );
    let mut args = vec![
        "qdisc", "replace", "dev", dev, "root", "netem", "limit", &limit,
    ];
    args.extend(["delay", &delay]);
    if jitter_us > 0 {
        args.push(&jitter);
    }
    let pct = reorder.map(|p| format!("{p}%"));
    if let Some(p) = &pct {
        args.extend(["reorder", p]);
    }
    match run("tc", &args, None) {
        Err(e) if e.to_string().contains("qdisc kind is unknown") => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            fail!(
                "the DUT's delay, jitter and reorder need tc netem, and this kernel ({}) has no \
                 sch_netem (neither built in nor a module it can load): run the DUT in a VM \
                 with a kernel that has it, e.g. `linerate lab --dut-vm` (Debian's kernels \
                 do), or drop --dut-delay, --dut-jitter and --dut-reorder",
                release.trim()
            )
        }
        other => other,
    }
}

/// The sysfs form of a CPU set: comma-separated 32-bit hex words, the
/// highest first ("00000001,00000004" is CPUs 34 and 2).
pub fn cpu_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map(|&m| m / 32 + 1).unwrap_or(1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Writes `dev`'s RPS mask on each of its rx queues. The agent's /sys shows
/// the namespace it was started from, so the writing happens on a thread of
/// its own with a private mount of this namespace's sysfs.
fn set_rps(dev: &str, cpus: &[usize]) -> Result<()> {
    let mask = cpu_mask(cpus);
    let dev = dev.to_string();
    let worker = std::thread::spawn(move || -> Result<()> {
        crate::sys::private_sysfs()
            .context("mounting this namespace's sysfs on a private mount (needs root)")?;
        let queues = format!("/sys/class/net/{dev}/queues");
        let mut n = 0;
        for e in std::fs::read_dir(&queues).with_context(|| format!("reading {queues}"))? {
            let e = e?;
            if !e.file_name().to_string_lossy().starts_with("rx-") {
                continue;
            }
            let path = e.path().join("rps_cpus");
            std::fs::write(&path, &mask)
                .with_context(|| format!("writing {mask} to {}", path.display()))?;
            let back = std::fs::read_to_string(&path)
                .with_context(|| format!("reading back {}", path.display()))?;
            if back.trim().trim_start_matches(['0', ',']) != mask.trim_start_matches(['0', ',']) {
                fail!(
                    "{} reads {} after writing {mask}",
                    path.display(),
                    back.trim()
                );
            }
            n += 1;
        }
        if n == 0 {
            fail!("{dev} has no rx queues in {queues}");
        }
        Ok(())
    });
    worker.join().map_err(|_| err!("the RPS thread panicked"))?
}

/// Pids of the kernel threads named `napi/{dev}-ID`.
fn napi_kthreads(dev: &str) -> Vec<u32> {
    let prefix = format!("napi/{dev}-");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(&prefix))
        })
        .collect()
}

/// How many rx queues `dev` has in this namespace's sysfs (a veth with
/// NAPI has one NAPI, and in threaded mode one kernel thread, per rx queue).
fn rx_queues(dev: &str) -> Result<usize> {
    let queues = format!("/sys/class/net/{dev}/queues");
    let n = std::fs::read_dir(&queues)
        .with_context(|| format!("reading {queues}"))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Ok(n)
}

/// The CPUs of a `Cpus_allowed_list` ("0-2,5"); `None` if it is not one.
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                if b < a || b >= 4096 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The CPUs task `pid` may run on, read back from /proc.
fn allowed_cpus_of(pid: u32) -> Result<Vec<usize>> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .with_context(|| format!("{path} has no Cpus_allowed_list line"))?;
    Ok(parse_cpu_list(list)
        .with_context(|| format!("{path}: '{}' is not a CPU list", list.trim()))?)
}

/// Turns threaded NAPI on for `dev` (in this namespace's own sysfs) and
/// pins the kernel threads that appear to `cpus`, one per rx queue, each
/// read back. Interface names repeat across namespaces, so the threads are
/// told apart by appearing: threaded mode is switched off first (its
/// threads exit) and on again. `defer` (`napi_defer_hard_irqs`,
/// `gro_flush_timeout` in ns), unless 0, keeps the threads polling a while
/// after their ring empties, each value read back.
fn napi_threads(dev: &str, cpus: &[usize], realtime: bool, defer: (u32, u64)) -> Result<()> {
    let dev = dev.to_string();
    let cpus = cpus.to_vec();
    let worker = std::thread::spawn(move || -> Result<()> {
        crate::sys::private_sysfs()
            .context("mounting this namespace's sysfs on a private mount (needs root)")?;
        let path = format!("/sys/class/net/{dev}/threaded");
        let set = |v: &str| {
            std::fs::write(&path, v).with_context(|| {
                format!("writing {v} to {path} (threaded NAPI needs kernel 5.12 or later)")
            })
        };
        let want = rx_queues(&dev)?.max(1);
        set("0")?;
        let before = napi_kthreads(&dev);
        set("1")?;
        let mut ours = Vec::new();
        // The threads start with the write; give a loaded machine a moment
        // to start one per rx queue.
        for _ in 0..200 {
            ours = napi_kthreads(&dev)
                .into_iter()
                .filter(|p| !before.contains(p))
                .collect();
            if ours.len() >= want {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if ours.is_empty() {
            fail!(
                "{path} reads {} but no napi/{dev}-* kernel thread appeared: {dev} has no NAPI \
                 (a veth needs GRO on or an XDP program)",
                std::fs::read_to_string(&path).unwrap_or_default().trim()
            );
        }
        if ours.len() < want {
            fail!(
                "{dev} has {want} rx queues but only {} napi/{dev}-* kernel threads appeared \
                 within 2 s, so some queues' receive work would run unpinned; the kernel may \
                 give NAPI to fewer queues than it lists (try --queues 1)",
                ours.len()
            );
        }
        crate::host::kernel::remember_napi(&dev, &ours, &cpus);
        let mut want_cpus = cpus.clone();
        want_cpus.sort_unstable();
        want_cpus.dedup();
        for pid in ours {
            crate::sys::pin_pid(pid, &cpus)
                .with_context(|| format!("pinning napi/{dev} thread {pid} to CPUs {cpus:?}"))?;
            let got = allowed_cpus_of(pid)
                .with_context(|| format!("reading back napi/{dev} thread {pid}'s CPUs"))?;
            if got != want_cpus {
                fail!(
                    "napi/{dev} thread {pid} runs on CPUs {got:?} after pinning it to {cpus:?}: \
                     something else (a cpuset, irqbalance) set its affinity"
                );
            }
            if realtime {
                crate::sys::set_fifo(pid).with_context(|| {
                    format!("giving napi/{dev} thread {pid} real-time priority (SCHED_FIFO 1)")
                })?;
            }
        }
        if defer.0 > 0 {
            // The timeout first: with defer set and no timeout, the kernel
            // re-arms nothing and the defer does nothing.
            write_read_back(&dev, "gro_flush_timeout", defer.1)?;
            write_read_back(&dev, "napi_defer_hard_irqs", u64::from(defer.0))?;
        }
        Ok(())
    });
    worker
        .join()
        .map_err(|_| err!("the threaded NAPI thread panicked"))?
}

/// Writes `value` to `/sys/class/net/DEV/NAME` and reads it back.
fn write_read_back(dev: &str, name: &str, value: u64) -> Result<()> {
    let path = format!("/sys/class/net/{dev}/{name}");
    std::fs::write(&path, value.to_string())
        .with_context(|| format!("writing {value} to {path} (kernel 5.10 or later has it)"))?;
    let got = std::fs::read_to_string(&path).with_context(|| format!("reading back {path}"))?;
    if got.trim() != value.to_string() {
        fail!("{path} reads {} after writing {value} to it", got.trim());
    }
    Ok(())
}

/// Creates a veth pair whose ends are born inside two namespaces, named by the
/// pids of the agents that hold them; nothing ever appears in the caller's.
/// Both ends get `queues` tx and rx queues (the kernel gives a peer without
/// its own counts one of each).
pub fn create_veth(
    a: &str,
    mac_a: [u8; 6],
    pid_a: u32,
    b: &str,
    mac_b: [u8; 6],
    pid_b: u32,
    queues: u32,
) -> Result<()> {
    let args = veth_args(a, mac_a, pid_a, b, mac_b, pid_b, queues)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run("ip", &args, None)
}

/// The `ip` arguments of [`create_veth`].
fn veth_args(
    a: &str,
    mac_a: [u8; 6],
    pid_a: u32,
    b: &str,
    mac_b: [u8; 6],
    pid_b: u32,
    queues: u32,
) -> Result<Vec<String>> {
    check_ifname(a)?;
    check_ifname(b)?;
    if queues == 0 {
        fail!("creating veth {a}/{b}: a veth needs at least one tx and one rx queue");
    }
    let q = queues.to_string();
    let end = |name: &str, mac: &[u8; 6], pid: u32| {
        [
            name.to_string(),
            "address".into(),
            mac_string(mac),
            "netns".into(),
            pid.to_string(),
            "numtxqueues".into(),
            q.clone(),
            "numrxqueues".into(),
            q.clone(),
        ]
    };
    let mut args: Vec<String> = vec!["link".into(), "add".into()];
    args.extend(end(a, &mac_a, pid_a));
    args.extend(["type", "veth", "peer", "name"].map(String::from));
    args.extend(end(b, &mac_b, pid_b));
    Ok(args)
}

#[cfg(test)]
mod tests;
