//! linerate's BPF programs and their loader. The programs are C in this
//! directory (`*.bpf.c`, constants shared with Rust in `linerate.h`),
//! compiled by build.rs with clang for the bpf target and embedded here;
//! [aya](https://docs.rs/aya) loads them, reaches their maps and attaches
//! XDP programs. The one `bpf(2)` command aya does not offer, BPF_PROG_RUN
//! with live frames, is [`crate::sys::xdp_test_run`].
//!
//! This module owns loading and attaching; what a program does with its
//! maps belongs to the engine that uses it ([`live`] for the generator,
//! [`sink`] for the receiver, [`stick`] for the lab's router-on-a-stick
//! DUT).

use super::EngineError;
use crate::model::stderr::errln;
use aya::maps::{Array, MapData, PerCpuArray};
use aya::programs::xdp::XdpLink;
use aya::programs::{Xdp, XdpFlags};
use aya::{Ebpf, EbpfLoader};
use std::os::fd::{AsFd, BorrowedFd};

pub mod live;
pub mod probe;
pub mod sink;
pub mod stick;

#[cfg(test)]
mod gen_tests;
#[cfg(test)]
mod sink_tests;
#[cfg(test)]
mod stick_tests;

/// The numbers `linerate.h` defines (`LR_NAME` there is `NAME` here).
pub mod consts {
    include!(concat!(env!("OUT_DIR"), "/xdp_consts.rs"));
}

/// Every embedded object, by the name of its source (`gen` is
/// `gen.bpf.c`). The RX side adds its programs here.
const OBJECTS: &[(&str, &[u8])] = &[
    (
        "gen",
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/gen.bpf.o")),
    ),
    (
        "floor",
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/floor.bpf.o")),
    ),
    (
        "sink",
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sink.bpf.o")),
    ),
    (
        "pass",
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/pass.bpf.o")),
    ),
    (
        "stick",
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/stick.bpf.o")),
    ),
];

/// Set in the environment, makes every load fail as the kernel would
/// without CAP_BPF: lets tests and users check the fallback path.
pub const DENY_ENV: &str = "LINERATE_XDP_DENY";

/// A loaded object: its programs and maps live as long as this value.
pub struct Object {
    name: &'static str,
    ebpf: Ebpf,
}

/// How an XDP program got attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (native XDP): what the data plane needs.
    Native,
    /// The kernel's generic skb path: works everywhere, runs after the skb
    /// is built, so it is slow and cannot take XDP_TX'd frames.
    Generic,
}

/// An attached XDP program; dropping it detaches the program, so no run of
/// linerate leaves one behind on an interface.
pub struct Attached {
    _hold: Hold,
    pub ifname: String,
    pub mode: AttachMode,
}

/// What keeps a program attached. Held, never read: dropping it detaches.
enum Hold {
    /// A BPF link's descriptor: closed on drop or when the process dies.
    Link { _fd: std::os::fd::OwnedFd },
    /// A netlink attachment (kernels before 5.9): aya detaches it on drop,
    /// but a killed process leaves it.
    Netlink { _link: XdpLink },
}

/// Why BPF is unavailable, in a user's words, for a load error.
fn load_error(what: &str, e: impl std::fmt::Display) -> EngineError {
    let text = e.to_string();
    let hint = if text.contains("Operation not permitted") || text.contains("EPERM") {
        " (BPF needs root or CAP_BPF + CAP_NET_ADMIN; run the agent as root)"
    } else {
        ""
    };
    EngineError::Unavailable(format!("loading the BPF {what}: {text}{hint}"))
}

impl Object {
    /// Loads the embedded object `name`, sizing the maps named in
    /// `max_entries` (the C side declares their upper bound).
    pub fn load(name: &'static str, max_entries: &[(&str, u32)]) -> Result<Object, EngineError> {
        let bytes = OBJECTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| *b)
            .ok_or_else(|| EngineError::Invalid(format!("no BPF object named {name}")))?;
        if std::env::var_os(DENY_ENV).is_some() {
            return Err(EngineError::Unavailable(format!(
                "loading the BPF object {name}: refused because {DENY_ENV} is set"
            )));
        }
        // Kernels before 5.11 charge maps to RLIMIT_MEMLOCK (5.10's 8 MiB
        // refuses the sink's maps); where it cannot be lifted, the load's
        // own error says what failed.
        static MEMLOCK: std::sync::Once = std::sync::Once::new();
        MEMLOCK.call_once(|| {
            let _ = crate::sys::raise_memlock_limit();
        });
        let mut loader = EbpfLoader::new();
        for (map, n) in max_entries {
            loader.set_max_entries(map, *n);
        }
        let ebpf = loader
            .load(bytes)
            .map_err(|e| load_error(&format!("object {name}"), e))?;
        Ok(Object { name, ebpf })
    }

    /// Loads (verifies) the XDP program `prog` into the kernel, once.
    pub fn xdp(&mut self, prog: &str) -> Result<&mut Xdp, EngineError> {
        let name = self.name;
        let p: &mut Xdp = self
            .ebpf
            .program_mut(prog)
            .ok_or_else(|| EngineError::Invalid(format!("{name}.bpf.c has no program {prog}")))?
            .try_into()
            .map_err(|e| EngineError::Invalid(format!("{name}.bpf.c: {prog}: {e}")))?;
        if p.fd().is_err() {
            p.load()
                .map_err(|e| load_error(&format!("program {name}/{prog}"), verifier(e)))?;
        }
        Ok(p)
    }

    /// The loaded program's descriptor, for BPF_PROG_RUN.
    pub fn prog_fd(&mut self, prog: &str) -> Result<BorrowedFd<'_>, EngineError> {
        let p = self.xdp(prog)?;
        let fd = p
            .fd()
            .map_err(|e| EngineError::Invalid(format!("program {prog} not loaded: {e}")))?;
        Ok(fd.as_fd())
    }

    /// Attaches `prog` to `ifname`, in the driver where it can be, else in
    /// generic mode unless `native_only`. The attachment is a BPF link whose
    /// only descriptor this process holds, so the kernel detaches the
    /// program when the process ends however it ends (SIGKILL included);
    /// only on a kernel without XDP links (before 5.9) does it fall back to
    /// a netlink attachment, which outlives a killed process, and say so.
    pub fn attach(
        &mut self,
        prog: &str,
        ifname: &str,
        native_only: bool,
    ) -> Result<Attached, EngineError> {
        let ifindex = crate::sys::ifindex(ifname).map_err(|e| {
            EngineError::Unavailable(format!(
                "attaching XDP to {ifname}: no such interface in this namespace ({e})"
            ))
        })?;
        let fd = self.prog_fd(prog)?;
        let link = match crate::sys::xdp_link_create(fd, ifindex, crate::sys::XDP_FLAGS_DRV_MODE) {
            Ok(link) => Some((link, AttachMode::Native)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
            Err(e) if native_only => return Err(native_refused(ifname, &e.to_string())),
            Err(_) => {
                let link = crate::sys::xdp_link_create(fd, ifindex, crate::sys::XDP_FLAGS_SKB_MODE)
                    .map_err(|e| {
                        EngineError::Unavailable(format!("attaching XDP to {ifname}: {e}"))
                    })?;
                Some((link, AttachMode::Generic))
            }
        };
        if let Some((link, mode)) = link {
            return Ok(Attached {
                _hold: Hold::Link { _fd: link },
                ifname: ifname.to_string(),
                mode,
            });
        }
        errln!(
            "agent: this kernel refused an XDP BPF link on {ifname} (EINVAL: XDP links need \
             Linux 5.9); attaching {prog} through netlink instead: if this agent is killed, the \
             program stays on {ifname} until `ip link set dev {ifname} xdp off`"
        );
        self.attach_netlink(prog, ifname, native_only)
    }

    /// The netlink (IFLA_XDP) attachment, for kernels without XDP links.
    fn attach_netlink(
        &mut self,
        prog: &str,
        ifname: &str,
        native_only: bool,
    ) -> Result<Attached, EngineError> {
        let p = self.xdp(prog)?;
        let (id, mode) = match p.attach(ifname, XdpFlags::DRV_MODE) {
            Ok(id) => (id, AttachMode::Native),
            Err(e) if native_only => return Err(native_refused(ifname, &chain(&e))),
            Err(_) => (
                p.attach(ifname, XdpFlags::SKB_MODE).map_err(|e| {
                    EngineError::Unavailable(format!("attaching XDP to {ifname}: {e}"))
                })?,
                AttachMode::Generic,
            ),
        };
        let link = p
            .take_link(id)
            .map_err(|e| EngineError::Failed(format!("keeping the XDP link on {ifname}: {e}")))?;
        Ok(Attached {
            _hold: Hold::Netlink { _link: link },
            ifname: ifname.to_string(),
            mode,
        })
    }

    /// Takes the array map `name` out of the object, its values `N` bytes.
    pub fn array<const N: usize>(
        &mut self,
        name: &str,
    ) -> Result<Array<MapData, [u8; N]>, EngineError> {
        let map = self.take(name)?;
        Array::try_from(map).map_err(|e| self.map_error(name, e))
    }

    /// Takes the u64 array map `name` out of the object.
    pub fn array_u64(&mut self, name: &str) -> Result<Array<MapData, u64>, EngineError> {
        let map = self.take(name)?;
        Array::try_from(map).map_err(|e| self.map_error(name, e))
    }

    /// Takes the per-CPU u64 array map `name` out of the object.
    pub fn percpu_u64(&mut self, name: &str) -> Result<PerCpuArray<MapData, u64>, EngineError> {
        let map = self.take(name)?;
        PerCpuArray::try_from(map).map_err(|e| self.map_error(name, e))
    }

    /// Takes the per-CPU array map `name` out of the object, its values
    /// `V` (plain data laid out as the C struct).
    pub fn percpu<V: aya::Pod>(
        &mut self,
        name: &str,
    ) -> Result<PerCpuArray<MapData, V>, EngineError> {
        let map = self.take(name)?;
        PerCpuArray::try_from(map).map_err(|e| self.map_error(name, e))
    }

    fn take(&mut self, name: &str) -> Result<aya::maps::Map, EngineError> {
        let obj = self.name;
        self.ebpf
            .take_map(name)
            .ok_or_else(|| EngineError::Invalid(format!("{obj}.bpf.c has no map {name}")))
    }

    fn map_error(&self, name: &str, e: impl std::fmt::Display) -> EngineError {
        EngineError::Invalid(format!("{}.bpf.c: map {name}: {e}", self.name))
    }
}

/// `frame` behind the metadata the live engine's programs look for
/// (`LR_GEN_META`): the input of a BPF_PROG_RUN, with `META_LEN` as its
/// `meta_len`.
pub fn with_meta(frame: &[u8]) -> Vec<u8> {
    let mut v = (consts::GEN_META as u32).to_ne_bytes().to_vec();
    v.extend_from_slice(frame);
    v
}

/// Attaches `prog` (gated on the metadata, so a pass-all for real traffic)
/// to this namespace's lo in generic mode, which keeps it in the kernel's
/// XDP dispatcher for as long as the guard lives: BPF_PROG_RUN calls then
/// skip the dispatcher update and its RCU grace period (~25 ms a call
/// here). `None` when lo's generic slot is taken (another generator):
/// runs still work, each call just waits that long.
pub fn hold_in_dispatcher(obj: &mut Object, prog: &str) -> Option<Attached> {
    obj.attach(prog, "lo", false).ok()
}

/// Sums one index of a per-CPU u64 array over every CPU.
pub fn percpu_sum(map: &PerCpuArray<MapData, u64>, index: u32) -> Result<u64, EngineError> {
    let values = map
        .get(&index, 0)
        .map_err(|e| EngineError::Failed(format!("reading per-CPU map entry {index}: {e}")))?;
    Ok(values.iter().sum())
}

/// The verifier's log is the useful part of a load failure; aya keeps it
/// in the error's source chain.
fn verifier(e: aya::programs::ProgramError) -> String {
    chain(&e)
}

/// An error with its whole source chain ("`bpf_link_create` failed: Device
/// or resource busy"): aya's own text leaves out the errno.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        text.push_str(&format!(": {s}"));
        src = s.source();
    }
    text
}

/// Why a native attach failed, in a user's words: the interface is taken,
/// or its driver has no native XDP.
fn native_refused(ifname: &str, text: &str) -> EngineError {
    let why = if text.contains("busy") || text.contains("File exists") {
        format!(
            "another XDP program is already attached to {ifname} (another receiver job on this \
             interface, or another tool; `ip link show {ifname}` names it)"
        )
    } else {
        "its driver has no native XDP (generic XDP would count after the stack's skb is built)"
            .to_string()
    };
    EngineError::Unavailable(format!(
        "attaching XDP to {ifname} in driver mode: {text}; {why}"
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sys::{self, XdpRun};

    /// Runs `prog` once in BPF_PROG_RUN's test mode on `input` (its first
    /// `meta_len` bytes metadata), as if it came in on `ingress`; returns
    /// the verdict and the frame the program left.
    pub fn test_run(
        prog: std::os::fd::BorrowedFd<'_>,
        input: &[u8],
        meta_len: u32,
        ingress: u32,
    ) -> (u32, Vec<u8>) {
        let mut out = vec![0u8; input.len() + 2048];
        let r = sys::xdp_test_run(
            prog,
            XdpRun {
                data_in: input,
                meta_len,
                data_out: Some(&mut out),
                repeat: 1,
                ingress_ifindex: ingress,
                flags: 0,
                batch_size: 0,
            },
        )
        .expect("BPF_PROG_RUN in test mode");
        out.truncate(r.data_len);
        (r.retval, out)
    }

    /// Loads `name`, or says why BPF is unavailable here: a test that needs
    /// BPF reports itself skipped with the reason (failing under CI=true,
    /// where the runner is root and a skip must not hide a regression).
    pub fn load_or_skip(name: &'static str, sizes: &[(&str, u32)]) -> Option<Object> {
        match Object::load(name, sizes) {
            Ok(o) => Some(o),
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none() || !sys::is_root(),
                    "CI runs as root: BPF must load: {e}"
                );
                errln!("skipping: BPF unavailable: {e}");
                None
            }
        }
    }

    #[test]
    fn the_floor_program_loads_and_returns_xdp_tx() {
        let Some(mut obj) = load_or_skip("floor", &[]) else {
            return;
        };
        let fd = obj.prog_fd("lr_floor").expect("floor loads");
        let frame = [0x5au8; 60];
        let input = with_meta(&frame);
        let (retval, out) = test_run(fd, &input, consts::META_LEN as u32, 0);
        assert_eq!(retval, 3, "XDP_TX");
        assert_eq!(out, input);
        // Without the metadata a frame is real traffic: passed on.
        let r = sys::xdp_test_run(
            fd,
            XdpRun {
                data_in: &frame,
                meta_len: 0,
                data_out: None,
                repeat: 1,
                ingress_ifindex: 0,
                flags: 0,
                batch_size: 0,
            },
        )
        .expect("BPF_PROG_RUN");
        assert_eq!(r.retval, 2, "XDP_PASS");
    }

    #[test]
    fn constants_come_from_linerate_h() {
        assert_eq!(consts::HEADER_LEN as usize, crate::proto::frame::HEADER_LEN);
        assert_eq!(
            (consts::MAGIC as u16).to_be_bytes(),
            crate::proto::frame::MAGIC
        );
        assert_eq!(
            consts::F_TEST_XDP_LIVE_FRAMES as u32,
            sys::BPF_F_TEST_XDP_LIVE_FRAMES
        );
    }

    #[test]
    fn unknown_objects_are_refused_by_name() {
        let e = Object::load("nope", &[]).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("no BPF object named nope")));
    }
}
