//! The live-frames engine (`--tx-engine live`): frames written by an XDP
//! program (gen.bpf.c) inside the kernel and sent with BPF_PROG_RUN in
//! live-frames mode, XDP_TX on the egress interface. One generator object
//! per egress interface of a sender thread, so each thread's flows, cursor
//! and sequence numbers are its own.
//!
//! It plugs into the same pacing loop as the other engines ([`Transmit`]):
//! a batch of `n` messages becomes one run with `repeat = n`. The program
//! walks the thread's flows round-robin and the frame-size sequence exactly
//! as the loop does, so the loop's sequence numbers, per-flow totals and
//! interval counts are those of the frames sent; [`LiveTx::send`] checks
//! that lockstep on every batch and re-seeds the program's cursor and
//! sequence numbers where the loop went elsewhere (another interface's
//! group took a batch, or a run failed).

use super::probe;
use super::{consts, hold_in_dispatcher, with_meta, Attached, Object};
use crate::engine::frame::{sum16, Msg, Template, Transmit, FILL};
use crate::engine::path::{resolve, Resolved};
use crate::engine::EngineError;
use crate::proto::frame::Header;
use crate::proto::FlowSpec;
use crate::sys::{self, XdpRun};
use aya::maps::{Array, MapData};
use std::io;
use std::net::UdpSocket;

/// Bytes of `struct lr_template`, `lr_gen_config` and `lr_gen_cursor`.
const TEMPLATE_LEN: usize = 76;
const CONFIG_LEN: usize = 40;
const CURSOR_LEN: usize = 16;

/// One generator instance: the flows of one sender thread on one egress.
struct Group {
    /// Declared before `obj`: detached before the program is unloaded.
    hold: Option<Attached>,
    obj: Object,
    ifindex: u32,
    ifname: String,
    cursor: Array<MapData, [u8; CURSOR_LEN]>,
    seq: Array<MapData, u64>,
    /// Job flow index -> position in this group (`u32::MAX`: not ours).
    pos: Vec<u32>,
    flows: Vec<usize>,
    /// Where the program's cursor is, as this side last left it.
    next_flow: u32,
    next_slot: u32,
    /// The program's next sequence number per position.
    next_seq: Vec<u64>,
}

/// The live engine's transmitter.
pub struct LiveTx {
    groups: Vec<Group>,
    /// The frame every run starts from: the largest size, filled.
    frame: Vec<u8>,
    slots: u32,
    _port: Option<UdpSocket>,
}

/// A template as gen.bpf.c reads it (`struct lr_template`).
pub fn template_bytes(t: &Template, flow_id: u16) -> Result<[u8; TEMPLATE_LEN], EngineError> {
    let zero = Header {
        flow: flow_id,
        seq: 0,
        sent_ns: 0,
    };
    let mut f = t.frame(&zero);
    let head_len = match f.get(12..14) {
        Some([0x86, 0xdd]) => consts::IPV6_HEAD as usize,
        Some([0x08, 0x00]) => consts::IPV4_HEAD as usize,
        _ => {
            return Err(EngineError::Invalid(
                "a template is neither IPv4 nor IPv6".into(),
            ))
        }
    };
    let hl = consts::HEADER_LEN as usize;
    if f.len() < head_len + hl {
        return Err(EngineError::Invalid(
            "a template is shorter than its headers".into(),
        ));
    }
    // The UDP checksum's constant part: pseudo-header, UDP header with a
    // zero checksum, and the fill, with the linerate header left out (the
    // program adds its nine words).
    f[head_len - 2..head_len].fill(0);
    f[head_len..head_len + hl].fill(0);
    let udp_len = f.len() - head_len + 8;
    let pseudo = if head_len == consts::IPV6_HEAD as usize {
        sum16(&f[22..54]) + udp_len as u64 + u64::from(libc::IPPROTO_UDP as u16)
    } else {
        sum16(&f[26..34]) + udp_len as u64 + u64::from(libc::IPPROTO_UDP as u16)
    };
    let mut sum = pseudo + sum16(&f[head_len - 8..]);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut b = [0u8; TEMPLATE_LEN];
    b[..head_len].copy_from_slice(&f[..head_len]);
    b[64..68].copy_from_slice(&(sum as u32).to_ne_bytes());
    b[68..70].copy_from_slice(&(head_len as u16).to_ne_bytes());
    b[70..72].copy_from_slice(&(f.len() as u16).to_ne_bytes());
    b[72..74].copy_from_slice(&flow_id.to_ne_bytes());
    Ok(b)
}

/// The distinct sizes of a frame sequence and each slot's index into them.
fn distinct(sizes: &[u32]) -> (Vec<u32>, Vec<u8>) {
    let mut uniq: Vec<u32> = Vec::new();
    let slots = sizes
        .iter()
        .map(|s| match uniq.iter().position(|u| u == s) {
            Some(i) => i as u8,
            None => {
                uniq.push(*s);
                (uniq.len() - 1) as u8
            }
        })
        .collect();
    (uniq, slots)
}

/// `struct lr_gen_config`.
fn config_bytes(flows: u32, slots: &[u8], sizes: u32, ifindex: u32) -> [u8; CONFIG_LEN] {
    let mut b = [0u8; CONFIG_LEN];
    // The other engines stamp sys::monotonic_ns() (CLOCK_MONOTONIC), which
    // is the clock bpf_ktime_get_ns() reads: no offset. The field stays so
    // a change of the stamping clock is one line here.
    b[0..8].copy_from_slice(&0u64.to_ne_bytes());
    b[8..12].copy_from_slice(&flows.to_ne_bytes());
    b[12..16].copy_from_slice(&(slots.len() as u32).to_ne_bytes());
    b[16..16 + slots.len()].copy_from_slice(slots);
    b[32..36].copy_from_slice(&sizes.to_ne_bytes());
    b[36..40].copy_from_slice(&ifindex.to_ne_bytes());
    b
}

fn map_err(what: &str) -> impl Fn(aya::maps::MapError) -> EngineError + '_ {
    move |e| EngineError::Failed(format!("writing the generator's {what}: {e}"))
}

/// A loaded gen.bpf.c with its templates and configuration written.
pub struct Generator {
    pub obj: Object,
    pub cursor: Array<MapData, [u8; CURSOR_LEN]>,
    pub seq: Array<MapData, u64>,
}

impl Generator {
    /// Loads the generator for `flows`: each flow's id and its templates,
    /// one per slot of the frame sequence `sizes`; runs name `ifindex` as
    /// their ingress (the egress; in test mode, ingress 0 means lo, 1).
    pub fn load(
        flows: &[(u16, &[Template])],
        sizes: &[u32],
        ifindex: u32,
    ) -> Result<Generator, EngineError> {
        let (uniq, slots) = distinct(sizes);
        if uniq.len() > consts::MAX_SIZES as usize || slots.len() > consts::MAX_SEQUENCE as usize {
            return Err(EngineError::Invalid(format!(
                "the live engine takes at most {} distinct frame sizes in a sequence of {}",
                consts::MAX_SIZES,
                consts::MAX_SEQUENCE
            )));
        }
        if flows.is_empty() || flows.len() > consts::MAX_FLOWS as usize {
            return Err(EngineError::Invalid(format!(
                "{} flows on one interface and thread; the live engine takes 1 to {} per \
                 thread: use more --threads",
                flows.len(),
                consts::MAX_FLOWS
            )));
        }
        let n = flows.len() as u32;
        let mut obj = Object::load(
            "gen",
            &[("lr_templates", n * uniq.len() as u32), ("lr_seq", n)],
        )?;
        obj.xdp("lr_gen")?;
        let mut config = obj.array::<CONFIG_LEN>("lr_config")?;
        let mut templates = obj.array::<TEMPLATE_LEN>("lr_templates")?;
        let cursor = obj.array::<CURSOR_LEN>("lr_cursor")?;
        let seq = obj.array_u64("lr_seq")?;
        for (p, (id, ts)) in flows.iter().enumerate() {
            for (u, size) in uniq.iter().enumerate() {
                let slot = sizes.iter().position(|s| s == size).unwrap_or(0);
                let t = ts.get(slot).ok_or_else(|| {
                    EngineError::Invalid(format!("flow {id} lacks the template of slot {slot}"))
                })?;
                let key = (p * uniq.len() + u) as u32;
                templates
                    .set(key, template_bytes(t, *id)?, 0)
                    .map_err(map_err("templates"))?;
            }
        }
        config
            .set(0, config_bytes(n, &slots, uniq.len() as u32, ifindex), 0)
            .map_err(map_err("configuration"))?;
        Ok(Generator { obj, cursor, seq })
    }
}

impl Group {
    /// Loads a generator for `flows` (job indices) leaving by `ifindex`.
    fn open(
        r: &Resolved,
        specs: &[FlowSpec],
        flows: Vec<usize>,
        ifindex: u32,
        sizes: &[u32],
    ) -> Result<Group, EngineError> {
        let per_flow: Vec<(u16, &[Template])> = flows
            .iter()
            .map(|&fi| {
                let t = &r.templates[fi * sizes.len()..(fi + 1) * sizes.len()];
                (specs[fi].id, t)
            })
            .collect();
        let Generator {
            mut obj,
            cursor,
            seq,
        } = Generator::load(&per_flow, sizes, ifindex)?;
        let hold = hold_in_dispatcher(&mut obj, "lr_gen");
        let mut pos = vec![u32::MAX; specs.len()];
        for (p, &fi) in flows.iter().enumerate() {
            pos[fi] = p as u32;
        }
        let ifname = probe::ifname(ifindex)?;
        Ok(Group {
            hold,
            obj,
            ifindex,
            ifname,
            cursor,
            seq,
            pos,
            next_seq: vec![0; flows.len()],
            flows,
            next_flow: 0,
            next_slot: 0,
        })
    }

    /// Brings the program's state to where `msgs` start; a no-op while the
    /// program and the pacing loop are in lockstep.
    fn align(&mut self, msgs: &[Msg], slots: u32) -> Result<(), EngineError> {
        let Some(first) = msgs.first() else {
            return Ok(());
        };
        let p0 = self.pos[first.flow];
        let k = self.flows.len();
        if p0 == self.next_flow
            && first.size as u32 == self.next_slot
            && first.header.seq == self.next_seq[p0 as usize]
        {
            // In lockstep (the usual case): the run continues the program's
            // round-robin, so each flow advances by its share of the batch;
            // O(flows), not O(frames).
            let n = msgs.len();
            for i in 0..k.min(n) {
                let p = (p0 as usize + i) % k;
                self.next_seq[p] += (n / k + usize::from(i < n % k)) as u64;
            }
            self.next_flow = ((p0 as usize + n) % k) as u32;
            self.next_slot = ((first.size + n) % slots as usize) as u32;
            return Ok(());
        }
        if p0 != self.next_flow || first.size as u32 != self.next_slot {
            let mut c = [0u8; CURSOR_LEN];
            c[0..8].copy_from_slice(&u64::from(p0).to_ne_bytes());
            c[8..16].copy_from_slice(&(first.size as u64).to_ne_bytes());
            self.cursor.set(0, c, 0).map_err(map_err("cursor"))?;
        }
        for m in msgs {
            let p = self.pos[m.flow] as usize;
            if self.next_seq[p] != m.header.seq {
                self.seq
                    .set(p as u32, m.header.seq, 0)
                    .map_err(map_err("sequence numbers"))?;
            }
            self.next_seq[p] = m.header.seq + 1;
        }
        let last = msgs[msgs.len() - 1];
        self.next_flow = (self.pos[last.flow] + 1) % self.flows.len() as u32;
        self.next_slot = (last.size as u32 + 1) % slots;
        Ok(())
    }
}

impl LiveTx {
    /// Resolves the flows' paths, checks every egress can take XDP frames
    /// and loads one generator per egress; the error says why the live
    /// engine cannot run here.
    pub fn open(flows: &[FlowSpec], sizes: &[u32], ipv6: bool) -> Result<LiveTx, EngineError> {
        probe::check_kernel()?;
        let r = resolve(flows, sizes, ipv6)?;
        let mut groups = Vec::new();
        for (&ifindex, fl) in &r.by_if {
            let g = Group::open(&r, flows, fl.clone(), ifindex, sizes)?;
            probe::check_egress(&g.ifname, ifindex)?;
            groups.push(g);
        }
        let frame = with_meta(&vec![FILL; r.slot - 4]);
        Ok(LiveTx {
            groups,
            frame,
            slots: sizes.len() as u32,
            _port: r.port,
        })
    }

    /// The interfaces frames leave by, for results and messages.
    pub fn interfaces(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.ifname.clone()).collect()
    }

    /// Why runs are slower than they could be, for the results: lo's
    /// generic XDP slot was taken, so every run waits for the dispatcher.
    pub fn note(&self) -> Option<String> {
        self.groups.iter().any(|g| g.hold.is_none()).then(|| {
            "lo of the sender's namespace already has a generic XDP program, so the \
             generator could not stay in the XDP dispatcher: each run waits ~25 ms"
                .to_string()
        })
    }
}

impl Transmit for LiveTx {
    fn groups(&self) -> Vec<Vec<usize>> {
        self.groups.iter().map(|g| g.flows.clone()).collect()
    }

    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize> {
        let slots = self.slots;
        let g = &mut self.groups[group];
        if msgs.is_empty() {
            return Ok(0);
        }
        if let Err(e) = g.align(msgs, slots) {
            // Force a full re-seed next time; the batch counts as an error.
            g.next_flow = u32::MAX;
            return Err(io::Error::other(e.to_string()));
        }
        let ifindex = g.ifindex;
        let fd = g
            .obj
            .prog_fd("lr_gen")
            .map_err(|e| io::Error::other(e.to_string()))?;
        let r = sys::xdp_test_run(
            fd,
            XdpRun {
                data_in: &self.frame,
                meta_len: consts::META_LEN as u32,
                data_out: None,
                repeat: msgs.len() as u32,
                ingress_ifindex: ifindex,
                flags: sys::BPF_F_TEST_XDP_LIVE_FRAMES,
                batch_size: consts::BATCH as u32,
            },
        );
        match r {
            Ok(_) => Ok(msgs.len()),
            Err(e) => {
                // Re-seed the program's state before the next run, whatever
                // of this one it managed.
                g.next_flow = u32::MAX;
                g.next_seq.iter_mut().for_each(|s| *s = u64::MAX);
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    // Setting up the run's page pool found no free memory
                    // model id: earlier runs' pools are still waiting for
                    // pages a slow receiver holds. Transient: back off a
                    // moment and let the loop count a full queue.
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
                }
                Err(e)
            }
        }
    }

    fn name(&self) -> &'static str {
        "live"
    }
}
