//! The lab's router-on-a-stick DUT (`linerate lab --dut stick`):
//! stick.bpf.c on the DUT's one trunk link routes between two VLANs in XDP
//! (this kernel may have no 802.1Q driver, so the stack cannot), and this
//! side loads it, writes its settings, attaches it and reads its per-CPU
//! counters for the agent's snapshots.
//!
//! The program sends what it forwards back out of the link it came in by
//! (XDP_TX); on a veth the frame then needs NAPI at the peer, or it stays
//! in the peer's ring. GRO on the peer gives it NAPI, but on kernel 6.18
//! the XDP_TX flush schedules the peer's NAPI only when the peer has an
//! XDP program (measured: 256 frames, one ring, forwarded, then every
//! XDP_TX an error, with GRO on the peer): the lab's switch therefore
//! holds a pass-all program ([`PassHold`], pass.bpf.c) on the bridge
//! port facing the DUT. Native XDP only: generic XDP runs after the skb is
//! built, which is not the DUT being measured. Each attachment is a BPF
//! link held by an agent: it goes when the agent does (SIGKILL too).

use super::{consts, AttachMode, Attached, Object};
use crate::engine::EngineError;
use crate::proto::StickCounters;
use aya::maps::{Array, MapData, PerCpuArray};

/// Bytes of `struct lr_stick_config`.
const CONFIG_LEN: usize = 24;

/// What the DUT routes: the VLAN ids and the one host on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StickSpec {
    pub dut_mac: [u8; 6],
    pub vlan_a: u16,
    pub mac_a: [u8; 6],
    pub vlan_b: u16,
    pub mac_b: [u8; 6],
}

impl StickSpec {
    /// The settings as `struct lr_stick_config` lays them out.
    fn config(&self) -> [u8; CONFIG_LEN] {
        let mut b = [0u8; CONFIG_LEN];
        b[0..6].copy_from_slice(&self.dut_mac);
        b[6..12].copy_from_slice(&self.mac_a);
        b[12..18].copy_from_slice(&self.mac_b);
        b[18..20].copy_from_slice(&self.vlan_a.to_ne_bytes());
        b[20..22].copy_from_slice(&self.vlan_b.to_ne_bytes());
        b
    }
}

/// The loaded program; attached once [`Stick::open`] returns it.
pub struct Stick {
    pub(crate) obj: Object,
    counts: PerCpuArray<MapData, u64>,
    _config: Array<MapData, [u8; CONFIG_LEN]>,
    attached: Option<Attached>,
    spec: StickSpec,
}

impl Stick {
    /// Loads and verifies the program and writes its settings.
    pub fn load(spec: StickSpec) -> Result<Stick, EngineError> {
        for (flag, id) in [("A", spec.vlan_a), ("B", spec.vlan_b)] {
            if !(1..=4094).contains(&id) {
                return Err(EngineError::Invalid(format!(
                    "VLAN {flag} of the router-on-a-stick DUT is {id}: give an id in 1..4094"
                )));
            }
        }
        if spec.vlan_a == spec.vlan_b {
            return Err(EngineError::Invalid(format!(
                "the router-on-a-stick DUT routes between two VLANs, but both are {}: give two \
                 different ids",
                spec.vlan_a
            )));
        }
        let mut obj = Object::load("stick", &[])?;
        obj.xdp("lr_stick")?;
        let mut config: Array<MapData, [u8; CONFIG_LEN]> = obj.array("lr_stick_config")?;
        config
            .set(0, spec.config(), 0)
            .map_err(|e| EngineError::Failed(format!("writing the stick DUT's settings: {e}")))?;
        Ok(Stick {
            counts: obj.percpu_u64("lr_stick_counts")?,
            _config: config,
            obj,
            attached: None,
            spec,
        })
    }

    /// Loads the program and attaches it, in the driver, to the trunk
    /// link `ifname`.
    pub fn open(spec: StickSpec, ifname: &str) -> Result<Stick, EngineError> {
        let refused = |e: EngineError| match e {
            EngineError::Invalid(_) => e,
            e => EngineError::Unavailable(format!(
                "the router-on-a-stick DUT needs its XDP program on {ifname}: {e}. It runs \
                 on veth (the lab) and on NICs with native XDP, as root (or CAP_BPF + \
                 CAP_NET_ADMIN); fix that, or pick another --dut"
            )),
        };
        let mut s = Stick::load(spec).map_err(refused)?;
        let a = s.obj.attach("lr_stick", ifname, true).map_err(refused)?;
        debug_assert_eq!(a.mode, AttachMode::Native);
        s.attached = Some(a);
        Ok(s)
    }

    /// The interface the program is attached to, if it is.
    pub fn ifname(&self) -> Option<&str> {
        self.attached.as_ref().map(|a| a.ifname.as_str())
    }

    /// Its counters so far, summed over every CPU.
    pub fn counters(&self) -> Result<StickCounters, EngineError> {
        let n = |slot: u64| super::percpu_sum(&self.counts, slot as u32);
        Ok(StickCounters {
            vlan_a: self.spec.vlan_a,
            vlan_b: self.spec.vlan_b,
            a_to_b_forwarded: n(consts::STICK_A_TO_B)?,
            a_to_b_dropped: n(consts::STICK_A_TO_B_DROP)?,
            b_to_a_forwarded: n(consts::STICK_B_TO_A)?,
            b_to_a_dropped: n(consts::STICK_B_TO_A_DROP)?,
            passed: n(consts::STICK_PASSED)?,
        })
    }
}

/// A pass-all XDP program held on a veth so that frames its peer sends by
/// XDP_TX are received (see the module doc), or on a driver's NIC so that
/// it transmits XDP frames (the live engine); detached when dropped.
pub struct PassHold {
    _attached: Attached,
    _obj: Object,
}

impl PassHold {
    /// Attaches pass.bpf.c, in the driver, to `ifname`.
    pub fn open(ifname: &str) -> Result<PassHold, EngineError> {
        let mut obj = Object::load("pass", &[])?;
        let attached = obj.attach("lr_pass", ifname, true).map_err(|e| {
            EngineError::Unavailable(format!(
                "attaching a pass-all XDP program to {ifname} in the driver: {e}"
            ))
        })?;
        Ok(PassHold {
            _attached: attached,
            _obj: obj,
        })
    }
}
