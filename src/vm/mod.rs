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
mod error;
pub mod guest;
pub mod host;
pub mod kernel;
pub mod modules;
pub mod qemu;

pub use error::VmError;
pub use kernel::{Kernel, KernelSource, DEFAULT_KERNEL};
pub use qemu::{Accel, Nic};
pub mod router;

/// A VM setting that does not parse (`--dut-kernel`, `--vm-accel`): the
/// message says what was wrong and what would do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadSetting(pub String);

/// What runs inside a guest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Guest {
    /// linerate's own initramfs, its agent configuring the guest.
    #[default]
    Agent,
    /// The user's router as a disk image (qcow2 or raw), booted from
    /// its own disk; no agent: the user configured it.
    Image(std::path::PathBuf),
    /// The user's router as the kernel (`VmSpec::kernel`) and this
    /// initramfs, with extra kernel arguments; no agent.
    Initrd {
        initrd: std::path::PathBuf,
        append: String,
    },
}

impl Guest {
    /// A router the user configured (no linerate agent inside).
    pub fn is_opaque(&self) -> bool {
        !matches!(self, Guest::Agent)
    }
}

/// A VM to boot for an agent, or a user's router to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSpec {
    pub kernel: KernelSource,
    pub cpus: u16,
    pub memory_mib: u32,
    pub accel: Accel,
    pub guest: Guest,
    /// How long the user's router may take to boot and forward (`None`:
    /// 120 s under KVM, 300 s under TCG).
    pub boot_wait_s: Option<u32>,
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            kernel: KernelSource::Debian("stable".into()),
            cpus: 1,
            memory_mib: 1024,
            accel: Accel::Auto,
            guest: Guest::Agent,
            boot_wait_s: None,
        }
    }
}
