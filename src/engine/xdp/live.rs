//! The live-frames engine (`--tx-engine live`): frames written by an XDP
//! program (gen.bpf.c) inside the kernel and sent with BPF_PROG_RUN in
//! live-frames mode, XDP_TX on the egress interface. One generator object
//! per egress interface of a sender thread, so each thread's flows, cursor
//! and sequence numbers are its own.
//!
//! It plugs into the same pacing loop as the other engines ([`Transmit`]).
//! Unpaced, a batch of `n` messages becomes one run with `repeat = n`.
//! Paced, the engine paces itself ([`Transmit::send_paced`]): the loop
//! hands it the frames due within a short horizon with the instant the
//! first is due and the spacing, and one run of about [`PACED_RUN_S`]
//! sends each when its time comes (the cursor's pacing fields, gen.bpf.c);
//! the program's count of the frames it sent says which prefix of the
//! batch left. The program walks the thread's flows round-robin and the
//! frame-size sequence exactly as the loop does, so the loop's sequence
//! numbers, per-flow totals and interval counts are those of the frames
//! sent; every run checks that lockstep and re-seeds the program's cursor
//! and sequence numbers where the loop went elsewhere (another interface's
//! group took a batch, or a run failed).

use super::probe;
use super::{consts, hold_in_dispatcher, with_meta, Attached, Object};
use crate::engine::frame::{sum16, Msg, Pacing, Template, Transmit, FILL};
use crate::engine::path::{resolve, Resolved};
use crate::engine::EngineError;
use crate::proto::frame::Header;
use crate::proto::FlowSpec;
use crate::sys::{self, XdpRun};
use aya::maps::{Array, MapData};
use std::io;
use std::net::UdpSocket;

/// Bytes of `struct lr_template`, `lr_gen_config` and `lr_gen_cursor`.
const TEMPLATE_LEN: usize = 84;
const CONFIG_LEN: usize = 40;
const CURSOR_LEN: usize = 96;

/// How long one paced run lasts, about: each BPF_PROG_RUN sets up a page
/// pool the kernel frees only about a second after the run's last frame
/// has come back, and at most 65,534 can exist (XDP memory model ids), so
/// runs must not come much more often than a thousand a second. Runs of a
/// few frames at a few hundred thousand per second used them up within a
/// second and every run after failed with ENOSPC (6.18, through the lab).
pub const PACED_RUN_S: f64 = 0.001;

/// The fewest invocations a paced run makes (~0.1 ms at the floor's
/// cost): at most some thousands of runs a second, whatever the estimate.
const PACED_RUN_LEAST: f64 = 4096.0;

/// `struct lr_gen_cursor`: the round-robin position and one run's pacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub flow: u64,
    pub slot: u64,
    /// CLOCK_MONOTONIC ns at which the run's first frame is due.
    pub t0_ns: u64,
    /// ns between frames × 65536; 0: unpaced.
    pub gap_fp: u64,
    /// The most frames the run sends.
    pub quota: u64,
    /// Frames the run sent (the program counts).
    pub sent: u64,
    /// Slots the run gave up, more than `late_ns` late (it counts).
    pub skipped: u64,
    /// How late a slot may be and still be sent.
    pub late_ns: u64,
    /// Unpaced: the last clock reading, the TX timestamp of the frames
    /// that follow it (the program writes it).
    pub stamp_ns: u64,
    /// Unpaced: frames that may still take `stamp_ns`; 0 makes the next
    /// frame read the clock (every run starts so).
    pub stamp_left: u64,
    /// Paced: the least time between two frames while the run catches up
    /// slots it is late for, ns (0: no bound).
    pub catch_gap_ns: u64,
    /// Paced: the earliest time the next frame may leave while catching up,
    /// CLOCK_MONOTONIC ns (0 at the start of a run; the program writes it).
    pub last_ns: u64,
}

impl Cursor {
    /// Unpaced and without a quota: every invocation sends a frame.
    pub fn unpaced(flow: u64, slot: u64) -> Cursor {
        Cursor {
            flow,
            slot,
            t0_ns: 0,
            gap_fp: 0,
            quota: u64::MAX,
            sent: 0,
            skipped: 0,
            late_ns: u64::MAX,
            stamp_ns: 0,
            stamp_left: 0,
            catch_gap_ns: 0,
            last_ns: 0,
        }
    }

    /// Frames `gap_ns` apart in the program's fixed point (at least 1,
    /// so a paced run stays paced at any rate).
    pub fn gap_fp(gap_ns: f64) -> u64 {
        ((gap_ns * 65536.0).round() as u64).max(1)
    }

    fn bytes(&self) -> [u8; CURSOR_LEN] {
        let mut b = [0u8; CURSOR_LEN];
        let f = [
            self.flow,
            self.slot,
            self.t0_ns,
            self.gap_fp,
            self.quota,
            self.sent,
            self.skipped,
            self.late_ns,
            self.stamp_ns,
            self.stamp_left,
            self.catch_gap_ns,
            self.last_ns,
        ];
        for (i, v) in f.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }

    fn parse(b: &[u8; CURSOR_LEN]) -> Cursor {
        let w = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(a)
        };
        Cursor {
            flow: w(0),
            slot: w(1),
            t0_ns: w(2),
            gap_fp: w(3),
            quota: w(4),
            sent: w(5),
            skipped: w(6),
            late_ns: w(7),
            stamp_ns: w(8),
            stamp_left: w(9),
            catch_gap_ns: w(10),
            last_ns: w(11),
        }
    }
}

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
    /// Pass-all programs attached to drivers' NICs so that they transmit
    /// XDP frames (see [`probe::bare_driver`]), detached with the engine.
    egress_xdp: Vec<(String, super::stick::PassHold)>,
    /// The frame every run starts from: the largest size and a byte more,
    /// filled.
    frame: Vec<u8>,
    slots: u32,
    /// Wall-clock ns one paced invocation costs (sent or dropped), a
    /// moving average that sizes the runs to last about [`PACED_RUN_S`].
    invocation_ns: f64,
    _port: Option<UdpSocket>,
    /// Frames the egress checks sent before the test's (non-IP, to our
    /// own MAC): the next hop counts them as received.
    check_frames: u64,
}

/// A template as gen.bpf.c reads it (`struct lr_template`).
pub fn template_bytes(t: &Template, flow_id: u16) -> Result<[u8; TEMPLATE_LEN], EngineError> {
    let zero = Header {
        flow: flow_id,
        seq: 0,
        sent_ns: 0,
    };
    let mut f = t.frame(&zero);
    // Up to two VLAN tags (802.1Q, or QinQ with an 802.1ad outer tag)
    // between the MACs and the EtherType; the IP header follows them.
    let tag = consts::VLAN_TAG as usize;
    let mut tags = 0;
    while tags < 2 * tag
        && matches!(
            f.get(12 + tags..14 + tags),
            Some([0x81, 0x00] | [0x88, 0xa8])
        )
    {
        tags += tag;
    }
    let (head_len, ip6) = match f.get(12 + tags..14 + tags) {
        Some([0x86, 0xdd]) => (consts::IPV6_HEAD as usize + tags, true),
        Some([0x08, 0x00]) => (consts::IPV4_HEAD as usize + tags, false),
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
    let addrs = if ip6 {
        &f[22 + tags..54 + tags]
    } else {
        &f[26 + tags..34 + tags]
    };
    let pseudo = sum16(addrs) + udp_len as u64 + u64::from(libc::IPPROTO_UDP as u16);
    let mut sum = pseudo + sum16(&f[head_len - 8..]);
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut b = [0u8; TEMPLATE_LEN];
    b[..head_len].copy_from_slice(&f[..head_len]);
    b[72..76].copy_from_slice(&(sum as u32).to_ne_bytes());
    b[76..78].copy_from_slice(&(head_len as u16).to_ne_bytes());
    b[78..80].copy_from_slice(&(f.len() as u16).to_ne_bytes());
    b[80..82].copy_from_slice(&flow_id.to_ne_bytes());
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
        let mut g = Generator { obj, cursor, seq };
        g.set_cursor(&Cursor::unpaced(0, 0))?;
        Ok(g)
    }

    /// Writes the program's cursor.
    pub fn set_cursor(&mut self, c: &Cursor) -> Result<(), EngineError> {
        self.cursor.set(0, c.bytes(), 0).map_err(map_err("cursor"))
    }

    /// Reads the program's cursor back.
    pub fn cursor(&self) -> Result<Cursor, EngineError> {
        read_cursor(&self.cursor)
    }
}

fn read_cursor(m: &Array<MapData, [u8; CURSOR_LEN]>) -> Result<Cursor, EngineError> {
    m.get(&0, 0)
        .map(|b| Cursor::parse(&b))
        .map_err(|e| EngineError::Failed(format!("reading the generator's cursor: {e}")))
}

impl Group {
    /// Writes the run's cursor (paced: its schedule for `frames` frames;
    /// unpaced: where the frames start) and gives the run's repeat count.
    fn set_cursor(
        &mut self,
        frames: usize,
        pacing: Option<Pacing>,
        invocation_ns: f64,
    ) -> Result<u32, EngineError> {
        let (flow, slot) = (u64::from(self.next_flow), u64::from(self.next_slot));
        Ok(match pacing {
            Some(p) => {
                let c = Cursor {
                    t0_ns: p.first_due_ns,
                    gap_fp: Cursor::gap_fp(p.gap_ns),
                    quota: frames as u64,
                    late_ns: p.late_ns,
                    catch_gap_ns: p.catch_gap_ns,
                    ..Cursor::unpaced(flow, slot)
                };
                self.cursor
                    .set(0, c.bytes(), 0)
                    .map_err(map_err("cursor"))?;
                (PACED_RUN_S * 1e9 / invocation_ns).clamp(PACED_RUN_LEAST, 16_777_216.0) as u32
            }
            None => {
                // Written before every run, also in lockstep: its clock
                // reading must not serve a frame of this run (gen.bpf.c).
                self.cursor
                    .set(0, Cursor::unpaced(flow, slot).bytes(), 0)
                    .map_err(map_err("cursor"))?;
                frames as u32
            }
        })
    }

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

    /// Brings the program's sequence numbers to where `msgs` start and
    /// says whether the program's round-robin position is already theirs
    /// (the lockstep of the usual case, where no sequence number is
    /// written). Leaves `next_seq` past the whole batch when it had to
    /// re-seed.
    fn align(&mut self, msgs: &[Msg]) -> Result<bool, EngineError> {
        let Some(first) = msgs.first() else {
            return Ok(true);
        };
        let p0 = self.pos[first.flow];
        if p0 == self.next_flow
            && first.size as u32 == self.next_slot
            && first.header.seq == self.next_seq[p0 as usize]
        {
            return Ok(true);
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
        // Where the run starts; advance() moves it past what was sent.
        self.next_flow = p0;
        self.next_slot = first.size as u32;
        Ok(false)
    }

    /// Moves this side's copy of the program's state past the first `k`
    /// of `msgs`, the frames the run sent; `lockstep` as align() said.
    fn advance(&mut self, msgs: &[Msg], k: usize, lockstep: bool, slots: u32) {
        let f = self.flows.len();
        let p0 = self.next_flow as usize;
        if lockstep {
            // The run continued the program's round-robin, so each flow
            // advances by its share of the k frames; O(flows), not O(k).
            for i in 0..f.min(k) {
                self.next_seq[(p0 + i) % f] += (k / f + usize::from(i < k % f)) as u64;
            }
        } else {
            // align() left every flow of the batch past it: the unsent
            // ones go back to their first unsent number.
            for m in msgs[k..].iter().rev() {
                self.next_seq[self.pos[m.flow] as usize] = m.header.seq;
            }
        }
        self.next_flow = ((p0 + k) % f) as u32;
        self.next_slot = ((self.next_slot as usize + k) % slots as usize) as u32;
    }

    /// Forgets where the program is: the next run re-seeds everything.
    fn lose_track(&mut self) {
        self.next_flow = u32::MAX;
        self.next_seq.iter_mut().for_each(|s| *s = u64::MAX);
    }
}

impl LiveTx {
    /// Resolves the flows' paths, checks every egress can take XDP frames
    /// and loads one generator per egress; the error says why the live
    /// engine cannot run here.
    pub fn open(
        flows: &[FlowSpec],
        sizes: &[u32],
        ipv6: bool,
        marks: crate::engine::frame::Marks,
    ) -> Result<LiveTx, EngineError> {
        probe::check_kernel()?;
        let r = resolve(flows, sizes, ipv6, marks)?;
        let mut groups = Vec::new();
        let mut egress_xdp = Vec::new();
        let mut check_frames = 0;
        for (&ifindex, fl) in &r.by_if {
            let g = Group::open(&r, flows, fl.clone(), ifindex, sizes)?;
            check_frames += match probe::check_egress(&g.ifname, ifindex) {
                Ok(n) => n,
                // A driver sends XDP frames once a program is attached to
                // the device: attach a pass-all one and probe again.
                Err(refused) if probe::bare_driver(ifindex).unwrap_or(false) => {
                    let hold = super::stick::PassHold::open(&g.ifname)
                        .map_err(|e| EngineError::Unavailable(format!("{refused}; and {e}")))?;
                    let n = probe::check_egress(&g.ifname, ifindex)?;
                    egress_xdp.push((g.ifname.clone(), hold));
                    n
                }
                Err(refused) => return Err(refused),
            };
            groups.push(g);
        }
        // One byte longer than the largest frame, so that gen.bpf.c trims
        // every frame's tail: kernels before 6.4 (6.1's test_run) rebuild a
        // recycled page's xdp_frame from the context only when the program
        // moved its bounds, and a driver that pushes its own header in front
        // of the frame (virtio_net's 12 bytes) would otherwise see its push
        // again on the page's next use, sending the frame shifted and cut.
        let frame = with_meta(&vec![FILL; r.slot - 4 + 1]);
        Ok(LiveTx {
            groups,
            egress_xdp,
            frame,
            slots: sizes.len() as u32,
            invocation_ns: 50.0,
            _port: r.port,
            check_frames,
        })
    }

    /// The interfaces frames leave by, for results and messages.
    pub fn interfaces(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.ifname.clone()).collect()
    }

    /// Why runs are slower than they could be, for the results: lo's
    /// generic XDP slot was taken, so every run waits for the dispatcher.
    pub fn note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if self.groups.iter().any(|g| g.hold.is_none()) {
            notes.push(
                "lo of the sender's namespace already has a generic XDP program, so the \
                 generator could not stay in the XDP dispatcher: each run waits ~25 ms"
                    .to_string(),
            );
        }
        for (ifname, _) in &self.egress_xdp {
            notes.push(format!(
                "{ifname}'s driver transmits XDP frames only with an XDP program on the \
                 device: a pass-all program is attached while the live engine sends"
            ));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }
}

impl LiveTx {
    /// One BPF_PROG_RUN of group `group`'s program: `msgs` are the frames
    /// the loop has numbered for it; `pacing` None runs one invocation
    /// per frame, unpaced; Some runs for about [`PACED_RUN_S`] and sends
    /// each frame when it is due. Returns how many of `msgs` (a prefix)
    /// left and how many slots the run gave up as too late.
    fn run(
        &mut self,
        group: usize,
        msgs: &[Msg],
        pacing: Option<Pacing>,
    ) -> io::Result<(usize, u64)> {
        let slots = self.slots;
        let g = &mut self.groups[group];
        if msgs.is_empty() {
            return Ok((0, 0));
        }
        let fail = |g: &mut Group, e: EngineError| {
            g.lose_track();
            io::Error::other(e.to_string())
        };
        let lockstep = match g.align(msgs) {
            Ok(l) => l,
            Err(e) => return Err(fail(g, e)),
        };
        let repeat = match g.set_cursor(msgs.len(), pacing, self.invocation_ns) {
            Ok(r) => r,
            Err(e) => return Err(fail(g, e)),
        };
        let fd = match g.obj.prog_fd("lr_gen") {
            Ok(fd) => fd,
            Err(e) => return Err(fail(g, e)),
        };
        let t = std::time::Instant::now();
        let r = sys::xdp_test_run(
            fd,
            XdpRun {
                data_in: &self.frame,
                meta_len: consts::META_LEN as u32,
                data_out: None,
                repeat,
                ingress_ifindex: g.ifindex,
                flags: sys::BPF_F_TEST_XDP_LIVE_FRAMES,
                batch_size: consts::BATCH as u32,
            },
        );
        if let (Some(_), Ok(res)) = (pacing, &r) {
            // The kernel's own figure: its timer stops while the run
            // yields the CPU, so a preempted run does not shrink the next
            // ones (runs of a few frames would use up the page pools'
            // memory model ids). The wall clock only where it gives none.
            let per = match res.duration_ns {
                0 => t.elapsed().as_nanos() as f64 / f64::from(repeat),
                d => f64::from(d),
            };
            self.invocation_ns = 0.75 * self.invocation_ns + 0.25 * per.max(1.0);
        }
        // Unpaced, a run that returns sent every frame; paced, the
        // program's count (reset by every paced run) says how many left,
        // also after an error that came mid-run (a signal).
        let sent = match pacing {
            None => Ok((msgs.len(), 0)),
            Some(_) => {
                read_cursor(&g.cursor).map(|c| ((c.sent as usize).min(msgs.len()), c.skipped))
            }
        };
        match (r, sent) {
            (Ok(_), Ok((k, skipped))) => {
                g.advance(msgs, k, lockstep, slots);
                Ok((k, skipped))
            }
            (Err(_), Ok((k, skipped))) if pacing.is_some() && k > 0 => {
                g.advance(msgs, k, lockstep, slots);
                Ok((k, skipped))
            }
            (Ok(_), Err(e)) => Err(fail(g, e)),
            (Err(e), _) => {
                // Re-seed the program's state before the next run.
                g.lose_track();
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
}

impl Transmit for LiveTx {
    fn groups(&self) -> Vec<Vec<usize>> {
        self.groups.iter().map(|g| g.flows.clone()).collect()
    }

    fn send(&mut self, group: usize, msgs: &[Msg]) -> io::Result<usize> {
        self.run(group, msgs, None).map(|(k, _)| k)
    }

    fn paces_itself(&self) -> bool {
        true
    }

    fn send_paced(
        &mut self,
        group: usize,
        msgs: &[Msg],
        pacing: Pacing,
    ) -> io::Result<(usize, u64)> {
        self.run(group, msgs, Some(pacing))
    }

    fn own_frames(&self) -> u64 {
        self.check_frames
    }
    fn name(&self) -> &'static str {
        "live"
    }
}
