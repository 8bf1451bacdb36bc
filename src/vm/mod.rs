//! Virtual machines linerate boots itself, as hosts for agents: a kernel
//! ([`kernel`]: a path, a package, or Debian's own for a release), an
//! initramfs assembled here ([`guest`], [`cpio`], [`modules`]) whose init
//! runs `linerate agent --stdio` on a virtio serial port, and qemu
//! ([`qemu`]) whose stdin and stdout are that port. So a guest's agent is
//! started like any other: the fleet spawns a command and speaks the
//! control protocol over its pipes; only the command differs (qemu instead
//! of ssh).
//!
//! A guest lives exactly as long as its agent and its controller: the
//! agent is the guest's PID 1 (its exit ends the VM), qemu gets SIGKILL
//! when the controller dies, and the taps are qemu's (they go with it).

pub mod cpio;
pub mod guest;
pub mod kernel;
pub mod modules;
pub mod qemu;

pub use kernel::{Kernel, KernelSource, DEFAULT_KERNEL};
pub use qemu::{Accel, Nic};

/// A VM setting that does not parse (`--dut-kernel`, `--vm-accel`): the
/// message says what was wrong and what would do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadSetting(pub String);

/// A VM to boot for an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSpec {
    pub kernel: KernelSource,
    pub cpus: u16,
    pub memory_mib: u32,
    pub accel: Accel,
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            kernel: KernelSource::Debian("stable".into()),
            cpus: 1,
            memory_mib: 1024,
            accel: Accel::Auto,
        }
    }
}
