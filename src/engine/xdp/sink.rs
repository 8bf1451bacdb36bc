//! The XDP receiver (`--rx-engine xdp`): sink.bpf.c on the receiving
//! interface counts linerate frames per flow in per-CPU maps and drops
//! them before the stack; this side loads and attaches it, reads its
//! per-CPU totals every interval and its per-flow state at the end, and
//! hands back what the socket receiver ([`crate::engine::udp::receive`])
//! does: the same interval samples, per-flow counters and summary, so
//! results and cross-checks do not care which engine counted.
//!
//! Native XDP only (veth, or a driver with it): generic XDP runs after the
//! skb is built and would measure the stack it is meant to skip. Attaching
//! to a veth also gives that veth NAPI (issue 16, trap 1), which the live
//! engine's XDP_TX frames need. The program is detached when the [`Sink`]
//! is dropped, on every path.
//!
//! Interface counters stay comparable: on kernel 6.18 a veth counts every
//! frame its XDP program saw in `rx_packets`, XDP_DROP included (measured:
//! 49,999 frames counted and dropped by the sink, `rx_packets` +49,999
//! with the socket engine sending; `ethtool -S` shows them again as
//! `rx_queue_0_xdp_drops`), so "datagrams received vs kernel rx_packets"
//! compares like with like. Frames the veth refused before XDP (its ring
//! full) are `rx_dropped`: tester drops, never counted here.

use super::{consts, AttachMode, Attached, Object};
use crate::engine::udp::{flow_results, FlowTracker};
use crate::engine::workers::{Intervals, Totals};
use crate::engine::{EngineError, IntervalClock, JobCtx};
use crate::model::stderr::errln;
use crate::proto::{EndpointSummary, ThreadFigures};
use crate::sys;
use aya::maps::{Array, IterableMap, MapData, PerCpuArray};
use serde_json::Value;
use std::net::{IpAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// u64 words of `struct lr_sink_flow` and `struct lr_sink_totals`.
const FLOW_WORDS: usize = 5 + consts::SINK_WORDS as usize;
const TOTALS_WORDS: usize = 5 + consts::SINK_LAT_BUCKETS as usize + consts::SINK_DSCP as usize;
const CONFIG_LEN: usize = 24;
/// How often the totals are read: the first frame's arrival (the start of
/// the job's intervals) is known to this much.
const POLL: Duration = Duration::from_millis(2);
/// After Stop, frames still in a ring are counted within this.
const DRAIN: Duration = Duration::from_millis(50);
/// Flows per batch read of the flow map: bounds the buffer to 1,024 ×
/// 104 B × CPUs (0.2 MiB on 2 CPUs, 6.5 MiB on 64).
const BATCH_FLOWS: usize = 1024;

/// What the sink counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkSpec {
    /// Flow ids 0..flows are counted.
    pub flows: u16,
    /// UDP destination ports counted, inclusive.
    pub ports: (u16, u16),
    /// Added to the kernel's CLOCK_MONOTONIC to give the senders' clock.
    pub clock_offset_ns: u64,
    /// Bytes of VLAN tags each frame was sent with: counted when the frame
    /// arrives with fewer (tags in metadata never reach XDP).
    pub tag_bytes: u32,
}

/// The sum of the sink's per-CPU totals at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkTotals {
    pub packets: u64,
    pub bytes: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub latency_log2_ns: Vec<u64>,
    /// Frames per DSCP value they arrived with.
    pub dscp: Vec<u64>,
    /// (cpu, packets, bytes, reordered, duplicates) of each CPU that
    /// counted a frame.
    pub per_cpu: Vec<(usize, [u64; 4])>,
}

impl SinkTotals {
    /// As the socket receiver's workers add up, with `missing` (from the
    /// flows' merged state) given.
    fn as_totals(&self, missing: u64) -> Totals {
        Totals {
            rx_packets: self.packets,
            rx_bytes: self.bytes,
            reordered: self.reordered,
            duplicates: self.duplicates,
            missing,
            foreign: self.foreign,
            ..Default::default()
        }
    }
}

/// A loaded sink.bpf.c, attached or not (tests run it by BPF_PROG_RUN).
pub struct Sink {
    /// Declared first: detached before the maps and program go.
    attached: Option<Attached>,
    flows_map: PerCpuArray<MapData, [u64; FLOW_WORDS]>,
    totals: PerCpuArray<MapData, [u64; TOTALS_WORDS]>,
    /// One-way latency per slot of the HDR layout (`model::hdr`).
    hdr: PerCpuArray<MapData, u64>,
    _config: Array<MapData, [u8; CONFIG_LEN]>,
    pub obj: Object,
    flows: u16,
}

fn map_err(what: &'static str) -> impl Fn(aya::maps::MapError) -> EngineError {
    move |e| EngineError::Failed(format!("reading the XDP sink's {what}: {e}"))
}

impl Sink {
    /// Loads and verifies the program and writes its configuration.
    pub fn load(spec: SinkSpec) -> Result<Sink, EngineError> {
        let flows = spec.flows.max(1);
        let mut obj = Object::load("sink", &[("lr_sink_flows", u32::from(flows))])?;
        obj.xdp("lr_sink")?;
        let mut config: Array<MapData, [u8; CONFIG_LEN]> = obj.array("lr_sink_config")?;
        let mut b = [0u8; CONFIG_LEN];
        b[0..8].copy_from_slice(&spec.clock_offset_ns.to_ne_bytes());
        b[8..12].copy_from_slice(&u32::from(flows).to_ne_bytes());
        b[12..14].copy_from_slice(&spec.ports.0.to_ne_bytes());
        b[14..16].copy_from_slice(&spec.ports.1.to_ne_bytes());
        b[16..20].copy_from_slice(&spec.tag_bytes.to_ne_bytes());
        config
            .set(0, b, 0)
            .map_err(|e| EngineError::Failed(format!("writing the XDP sink's settings: {e}")))?;
        Ok(Sink {
            attached: None,
            flows_map: obj.percpu("lr_sink_flows")?,
            totals: obj.percpu("lr_sink_totals")?,
            hdr: obj.percpu_u64("lr_sink_hdr")?,
            _config: config,
            obj,
            flows,
        })
    }

    /// Loads the sink and attaches it, in the driver, to `ifname`.
    pub fn open(spec: SinkSpec, ifname: &str) -> Result<Sink, EngineError> {
        let mut s = Sink::load(spec)?;
        let a = s.obj.attach("lr_sink", ifname, true)?;
        debug_assert_eq!(a.mode, AttachMode::Native);
        s.attached = Some(a);
        Ok(s)
    }

    /// The interface the sink is attached to.
    pub fn ifname(&self) -> Option<&str> {
        self.attached.as_ref().map(|a| a.ifname.as_str())
    }

    /// The per-CPU totals, summed.
    pub fn totals(&self) -> Result<SinkTotals, EngineError> {
        let per_cpu = self.totals.get(&0, 0).map_err(map_err("totals"))?;
        let mut t = SinkTotals {
            latency_log2_ns: vec![0; consts::SINK_LAT_BUCKETS as usize],
            dscp: vec![0; consts::SINK_DSCP as usize],
            ..Default::default()
        };
        for (cpu, v) in per_cpu.iter().enumerate() {
            t.packets += v[0];
            t.bytes += v[1];
            t.reordered += v[2];
            t.duplicates += v[3];
            t.foreign += v[4];
            let lat = 5 + consts::SINK_LAT_BUCKETS as usize;
            for (b, n) in t.latency_log2_ns.iter_mut().zip(&v[5..lat]) {
                *b += n;
            }
            for (d, n) in t.dscp.iter_mut().zip(&v[lat..]) {
                *d += n;
            }
            if v[0] + v[3] > 0 {
                t.per_cpu.push((cpu, [v[0], v[1], v[2], v[3]]));
            }
        }
        Ok(t)
    }

    /// Frames per slot of the HDR latency layout (`model::hdr`), summed
    /// over the CPUs: one lookup per slot (3,840), read once at the end.
    pub fn latency_hdr(&self) -> Result<Vec<u64>, EngineError> {
        (0..consts::SINK_HDR_SLOTS as u32)
            .map(|i| super::percpu_sum(&self.hdr, i))
            .collect()
    }

    /// Flow `id`'s state merged over the CPUs (as FlowTracker::absorb:
    /// exact unique and loss; reordering as each CPU saw it), and the
    /// CPUs that counted it.
    pub fn flow(&self, id: u16) -> Result<(FlowTracker, Vec<usize>), EngineError> {
        let per_cpu = self
            .flows_map
            .get(&u32::from(id), 0)
            .map_err(map_err("flow state"))?;
        let mut t = FlowTracker::counted(0, 0, 0, 0);
        let mut cpus = Vec::new();
        for (cpu, v) in per_cpu.iter().enumerate() {
            if v[0] > 0 {
                t.absorb(&FlowTracker::counted(v[0], v[1], v[3], v[4]));
                cpus.push(cpu);
            }
        }
        Ok((t, cpus))
    }

    /// Every flow's state merged over the CPUs, and the flows each CPU
    /// counted: batch reads of BATCH_FLOWS flows (65,535 flows on 2 CPUs:
    /// 18 ms measured), or one lookup per flow (80 ms) where the kernel has
    /// no batch reads (before 5.6).
    pub fn merged(&self) -> Result<Merged, EngineError> {
        let per_flow = match self.read_batched() {
            Ok(v) => v,
            Err(_) => (0..self.flows)
                .map(|id| self.flow(id))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let mut m = Merged {
            flows: Vec::with_capacity(usize::from(self.flows)),
            ..Default::default()
        };
        for (id, (t, cpus)) in (0u16..).zip(per_flow) {
            m.split += usize::from(cpus.len() > 1);
            for cpu in cpus {
                match m.cpu_flows.iter_mut().find(|(c, _)| *c == cpu) {
                    Some((_, f)) => f.push(id),
                    None => m.cpu_flows.push((cpu, vec![id])),
                }
            }
            m.flows.push(t);
        }
        Ok(m)
    }
}

impl Sink {
    /// Every flow's (merged state, CPUs that counted it), by batch reads.
    pub(crate) fn read_batched(&self) -> std::io::Result<Vec<(FlowTracker, Vec<usize>)>> {
        let fd = self.flows_map.map().fd().as_fd();
        let layout = sys::percpu_array_layout(fd)?;
        let mut buf = vec![0u8; BATCH_FLOWS * layout.entry_len()];
        let mut out = Vec::with_capacity(usize::from(self.flows));
        while out.len() < usize::from(self.flows) {
            let (l, n) = sys::percpu_array_read(fd, out.len() as u32, &mut buf)?;
            if n == 0 {
                break;
            }
            for entry in buf.chunks_exact(l.entry_len()).take(n) {
                let mut t = FlowTracker::counted(0, 0, 0, 0);
                let mut cpus = Vec::new();
                for (cpu, v) in entry.chunks_exact(l.stride).enumerate() {
                    let w = |i: usize| {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(&v[i * 8..i * 8 + 8]);
                        u64::from_ne_bytes(b)
                    };
                    if w(0) > 0 {
                        t.absorb(&FlowTracker::counted(w(0), w(1), w(3), w(4)));
                        cpus.push(cpu);
                    }
                }
                out.push((t, cpus));
            }
        }
        out.truncate(usize::from(self.flows));
        Ok(out)
    }
}

/// The sink's flows merged over the CPUs.
#[derive(Default)]
pub struct Merged {
    /// By flow id.
    pub flows: Vec<FlowTracker>,
    /// (cpu, flow ids it counted).
    pub cpu_flows: Vec<(usize, Vec<u16>)>,
    /// Flows counted on more than one CPU.
    pub split: usize,
}

impl Merged {
    /// Sequence numbers below each flow's highest that never arrived.
    pub fn missing(&self) -> u64 {
        self.flows.iter().map(FlowTracker::missing).sum()
    }
}

/// The interface of this namespace that holds `addr` (`ip -j addr`); when
/// that is a VLAN device, the device below it (twice for QinQ): the sink
/// reads the tags in the frame there, where native XDP runs.
pub fn interface_of(addr: IpAddr) -> Result<String, EngineError> {
    let out = crate::netops::run_output("ip", &["-d", "-j", "addr", "show"])
        .map_err(|e| EngineError::Unavailable(format!("{e:#}")))?;
    let v: Value = serde_json::from_str(&out)
        .map_err(|e| EngineError::Unavailable(format!("parsing `ip -j addr show`: {e}")))?;
    interface_in(&v, addr).ok_or_else(|| {
        EngineError::Unavailable(format!(
            "no interface here holds {addr}, the address the senders aim at: the XDP sink \
             attaches to that interface"
        ))
    })
}

fn interface_in(v: &Value, addr: IpAddr) -> Option<String> {
    let mut name = holder_of(v, addr)?;
    for _ in 0..2 {
        let below = v.as_array()?.iter().find_map(|l| {
            (l["ifname"].as_str() == Some(name.as_str())
                && l["linkinfo"]["info_kind"].as_str() == Some("vlan"))
            .then(|| l["link"].as_str().map(str::to_string))
            .flatten()
        });
        match below {
            Some(b) => name = b,
            None => break,
        }
    }
    Some(name)
}

fn holder_of(v: &Value, addr: IpAddr) -> Option<String> {
    v.as_array()?
        .iter()
        .find(|l| {
            l["addr_info"].as_array().is_some_and(|a| {
                a.iter().any(|i| {
                    i["local"].as_str().and_then(|s| s.parse::<IpAddr>().ok()) == Some(addr)
                })
            })
        })
        .and_then(|l| l["ifname"].as_str())
        .filter(|n| *n != "lo")
        .map(str::to_string)
}

/// One "thread" per CPU that ran the program (XDP counts in the softirq
/// of whichever CPU polled the interface): its counts and its flows.
fn per_cpu_figures(t: &SinkTotals, cpu_flows: &[(usize, Vec<u16>)]) -> Vec<ThreadFigures> {
    t.per_cpu
        .iter()
        .enumerate()
        .map(|(i, (cpu, v))| ThreadFigures {
            thread: i as u16,
            cpu: Some(*cpu),
            flows: cpu_flows
                .iter()
                .find(|(c, _)| c == cpu)
                .map(|(_, f)| f.clone())
                .unwrap_or_default(),
            cpu_s: 0.0,
            rx_packets: v[0],
            rx_bytes: v[1],
            reordered: v[2],
            duplicates: v[3],
            ..Default::default()
        })
        .collect()
}

/// Drains `sock` and reads the sink's maps every [`POLL`] until [`DRAIN`]
/// after the controller stops the job, emitting an interval when one is
/// due. Returns the interval clock (none before the first frame) and the
/// intervals so far.
fn poll_until_stopped(
    ctx: &JobCtx,
    sink: &Sink,
    sock: &UdpSocket,
) -> Result<(Option<IntervalClock>, Intervals), EngineError> {
    let mut buf = [0u8; 2048];
    let mut clock: Option<IntervalClock> = None;
    let mut iv = Intervals::default();
    let mut stop_seen: Option<Instant> = None;
    loop {
        std::thread::sleep(POLL);
        while sock.recv(&mut buf).is_ok() {}
        let now = Instant::now();
        // The sink counts in the kernel; this thread only wakes to read
        // the maps: every poll until the first frame (intervals start
        // there), then once per interval. Idle, it sleeps.
        if clock.is_none() && sink.totals()?.packets > 0 {
            clock = Some(IntervalClock::new(now, ctx.interval));
        }
        if let Some(c) = clock.as_mut() {
            if let Some((a, b)) = c.due(now) {
                let t = sink.totals()?;
                // Loss per interval from the flows' merged state, exact
                // however the frames spread over CPUs.
                let missing = sink.merged()?.missing();
                ctx.emit(iv.sample(t.as_totals(missing), a, b, 0));
            }
        }
        if stop_seen.is_none() && ctx.stopped() {
            stop_seen = Some(now);
        }
        if stop_seen.is_some_and(|s| now.duration_since(s) >= DRAIN) {
            break;
        }
    }
    Ok((clock, iv))
}

/// Counts until the controller stops the job, reporting intervals from
/// the per-CPU totals; `sock` holds the port (frames the sink passes on,
/// foreign ones, land there and are drained).
pub fn receive(
    ctx: &JobCtx,
    sink: Sink,
    sock: UdpSocket,
    cpus: &[usize],
) -> Result<EndpointSummary, EngineError> {
    // The counting runs in softirq wherever the interface is polled; this
    // thread only reads maps, on the CPUs the job was given.
    sys::pin_thread(cpus).map_err(EngineError::io(format!(
        "pinning the receiver to CPUs {cpus:?}"
    )))?;
    let cpu0 = sys::process_cpu_seconds();
    sock.set_nonblocking(true)
        .map_err(EngineError::io("making the receiver's socket non-blocking"))?;
    let (mut clock, mut iv) = poll_until_stopped(ctx, &sink, &sock)?;
    let merged = sink.merged()?;
    let (split, cpu_flows) = (merged.split, &merged.cpu_flows);
    let (flows_out, lost_total) = flow_results(ctx, &merged.flows);
    let t = sink.totals()?;
    let hdr = sink.latency_hdr()?;
    let (a, b) = match clock.as_mut() {
        Some(c) => c.close(Instant::now()),
        None => (0.0, 0.0),
    };
    ctx.emit(iv.last(t.as_totals(merged.missing()), a, b, 0, lost_total));
    if split > 0 {
        errln!(
            "linerate agent: {split} flow(s) were counted on more than one CPU by the XDP sink; \
             their reordering counts are per CPU"
        );
    }
    let per_thread = per_cpu_figures(&t, cpu_flows);
    let mut latency = t.latency_log2_ns.clone();
    while latency.last() == Some(&0) {
        latency.pop();
    }
    Ok(EndpointSummary {
        elapsed_s: b,
        cpu_s: sys::process_cpu_seconds() - cpu0,
        max_rss_bytes: sys::peak_rss_bytes(),
        rx_packets: t.packets,
        rx_bytes: t.bytes,
        lost: lost_total,
        reordered: t.reordered,
        duplicates: t.duplicates,
        foreign: t.foreign,
        flows: flows_out,
        per_thread,
        rx_engine: "xdp".into(),
        one_way_latency_log2_ns: latency,
        one_way_latency_hdr: crate::model::hdr::sparse(&hdr),
        dscp_received: crate::engine::udp::dscp_counts(&t.dscp),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interface_holding_an_address() {
        let v: Value = serde_json::from_str(
            r#"[{"ifname":"lo","addr_info":[{"local":"127.0.0.1"}]},
                {"ifname":"lrs0","addr_info":[{"local":"198.18.0.2"},{"local":"2001:2::2"}]}]"#,
        )
        .unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(interface_in(&v, ip("2001:2::2")).as_deref(), Some("lrs0"));
        assert_eq!(interface_in(&v, ip("198.18.0.2")).as_deref(), Some("lrs0"));
        assert_eq!(interface_in(&v, ip("127.0.0.1")), None, "never lo");
        assert_eq!(interface_in(&v, ip("198.18.0.9")), None);
    }

    #[test]
    fn a_vlan_device_s_address_means_the_device_below() {
        let v: Value = serde_json::from_str(
            r#"[{"ifname":"eth1","addr_info":[]},
                {"ifname":"eth1.100","link":"eth1","linkinfo":{"info_kind":"vlan","info_data":{"protocol":"802.1ad","id":100}},"addr_info":[]},
                {"ifname":"eth1.100.7","link":"eth1.100","linkinfo":{"info_kind":"vlan","info_data":{"protocol":"802.1Q","id":7}},"addr_info":[{"local":"198.19.0.1"}]},
                {"ifname":"eth2.5","link":"eth2","linkinfo":{"info_kind":"vlan","info_data":{"protocol":"802.1Q","id":5}},"addr_info":[{"local":"198.18.0.1"}]},
                {"ifname":"eth2","addr_info":[]}]"#,
        )
        .unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(interface_in(&v, ip("198.19.0.1")).as_deref(), Some("eth1"));
        assert_eq!(interface_in(&v, ip("198.18.0.1")).as_deref(), Some("eth2"));
    }
}
