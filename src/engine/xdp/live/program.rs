//! gen.bpf.c as user space sees it: the byte layout of its template,
//! configuration and cursor, and [`Generator`], a loaded program with
//! its templates and configuration written.

use crate::engine::frame::{sum16, Template};
use crate::engine::xdp::{consts, Object};
use crate::engine::EngineError;
use crate::proto::frame::Header;
use aya::maps::{Array, MapData};

/// Bytes of `struct lr_template`, `lr_gen_config` and `lr_gen_cursor`.
const TEMPLATE_LEN: usize = 84;
const CONFIG_LEN: usize = 40;
pub(super) const CURSOR_LEN: usize = 96;

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

    pub(super) fn bytes(&self) -> [u8; CURSOR_LEN] {
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

    pub(super) fn parse(b: &[u8; CURSOR_LEN]) -> Cursor {
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

pub(super) fn map_err(what: &str) -> impl Fn(aya::maps::MapError) -> EngineError + '_ {
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

pub(super) fn read_cursor(m: &Array<MapData, [u8; CURSOR_LEN]>) -> Result<Cursor, EngineError> {
    m.get(&0, 0)
        .map(|b| Cursor::parse(&b))
        .map_err(|e| EngineError::Failed(format!("reading the generator's cursor: {e}")))
}
