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
use crate::engine::frame::{Msg, Pacing, Template, Transmit, FILL};
use crate::engine::path::{resolve, Resolved};
use crate::engine::EngineError;
use crate::proto::FlowSpec;
use crate::sys::{self, XdpRun};
use aya::maps::{Array, MapData};
use std::io;
use std::net::UdpSocket;

mod program;
use program::{map_err, read_cursor, CURSOR_LEN};
pub use program::{template_bytes, Cursor, Generator};

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
                let p = p.starting_at(frames, sys::monotonic_ns());
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
            (Err(e), _) => Err(run_failed(g, e)),
        }
    }
}

/// A run that failed: the program's state is re-seeded before the next
/// one, and a shortage of memory model ids becomes a full queue.
fn run_failed(g: &mut Group, e: io::Error) -> io::Error {
    // Re-seed the program's state before the next run.
    g.lose_track();
    if e.raw_os_error() == Some(libc::ENOSPC) {
        // Setting up the run's page pool found no free memory
        // model id: earlier runs' pools are still waiting for
        // pages a slow receiver holds. Transient: back off a
        // moment and let the loop count a full queue.
        std::thread::sleep(std::time::Duration::from_micros(200));
        return io::Error::from_raw_os_error(libc::ENOBUFS);
    }
    e
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
