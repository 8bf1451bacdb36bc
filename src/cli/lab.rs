//! `linerate lab`: its flags and the lab configuration they describe.

use super::common::{Common, DirectionArg, DutArg};
use super::parse::parse_pps_u64;
use crate::orchestrate::config::LabSpec;
use crate::orchestrate::config::{Command as Cmd, LabConfig};
use crate::proto::{RxEngine, TxEngine};
use anyhow::{bail, Result};
use clap::Args;

/// Flags of `linerate lab`.
#[derive(Args, Debug, Clone)]
#[command(group = clap::ArgGroup::new("vm_dut").args(["dut_vm", "dut_image", "dut_initrd"]).multiple(true))]
pub struct LabArgs {
    /// What the DUT namespace does with the traffic.
    #[arg(long, value_enum, default_value = "route")]
    pub dut: DutArg,
    /// The stick DUT's two VLANs: A carries the generator's traffic, B the sink's (default
    /// 10,20). Only with --dut stick.
    #[arg(long, value_name = "A,B", value_parser = parse_stick_vlans)]
    pub stick_vlans: Option<(u16, u16)>,
    /// Rules in the DUT's forward chain in fw mode (the last one matches; default 100).
    #[arg(long, value_name = "N")]
    pub fw_rules: Option<u32>,
    /// Short suite (about 20 s): no ramps or NDR/PDR searches.
    #[arg(long)]
    pub quick: bool,
    /// Skip the per-profile ramps and NDR/PDR searches of the full suite.
    #[arg(long)]
    pub no_search: bool,
    /// Seconds per test (overrides the suite's default).
    #[arg(long, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration: Option<f64>,
    /// Add an IPv6 pass (2001:2::/48). IPv6 cannot carry a 64 B test frame; that pass uses 84 B.
    #[arg(long)]
    pub ipv6: bool,
    /// UDP tests in one direction (default) or both at once.
    #[arg(long, value_enum, default_value = "forward")]
    pub direction: DirectionArg,
    /// TCP congestion control of the suite's TCP tests (e.g. cubic, reno, bbr). Default: the
    /// kernel's (net.ipv4.tcp_congestion_control).
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// MTU of every lab link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Tx and rx queues of every lab veth (1..=16, default 1). Each rx queue gets a NAPI of
    /// its own (threads pinned by role, RPS on every queue); traffic spreads over them by
    /// flow hash. Not with physical ports, which keep their driver's queues.
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// Remove leftovers of earlier runs (namespaces named lr-*) and exit.
    #[arg(long)]
    pub cleanup: bool,
    /// Make the DUT drop this % of forwarded packets at random (nftables numgen),
    /// e.g. to check that the tester reports loss right.
    #[arg(long, value_name = "PERCENT")]
    pub dut_loss: Option<f64>,
    /// Police the DUT's forwarding to this many packets per second (nftables limit):
    /// a DUT of known capacity.
    #[arg(long, value_name = "PPS", value_parser = parse_pps_u64)]
    pub dut_police: Option<u64>,
    /// Shape the DUT's egress towards the sink with tc tbf: RATE (20M, 1G) and an optional
    /// QUEUE in bytes (125000, 64k) or time at the rate (50ms; default 100ms). A load above
    /// RATE fills the queue: a bufferbloated DUT, for latency under load.
    #[arg(long, value_name = "RATE[,QUEUE]", value_parser = crate::orchestrate::config::Shape::parse)]
    pub dut_shape: Option<crate::orchestrate::config::Shape>,
    /// Make the DUT rewrite the DSCP of what it forwards: FROM=TO (e.g. ef=af11, any=cs1;
    /// nftables), to see a remark counted at the sink (`udp --dscp` in a plan's [lab]).
    #[arg(long, value_name = "FROM=TO")]
    pub dut_remark: Option<crate::orchestrate::config::Remark>,
    /// Delay what the DUT forwards, both ways (tc netem on its two egresses): 20ms, 500us.
    /// Needs sch_netem in the DUT's kernel (--dut-vm's have it).
    #[arg(long, value_name = "TIME", value_parser = crate::orchestrate::values::parse_time)]
    pub dut_delay: Option<std::time::Duration>,
    /// Vary --dut-delay by up to ± this (packets closer than that overtake each other).
    #[arg(long, value_name = "TIME", value_parser = crate::orchestrate::values::parse_time)]
    pub dut_jitter: Option<std::time::Duration>,
    /// Send this % of packets at once, ahead of those --dut-delay holds (reordering).
    #[arg(long, value_name = "PERCENT")]
    pub dut_reorder: Option<f64>,
    /// Run the DUT in a virtual machine with its own kernel (qemu; KVM where it works, else
    /// emulated with TCG), configured by a linerate agent inside: the same --dut modes and
    /// impairments, on a stock kernel and a real NIC driver (virtio-net). See "Router VMs and
    /// real kernels" in the README.
    #[arg(long, conflicts_with_all = ["gen_port"])]
    pub dut_vm: bool,
    /// Make the DUT VM's gen side an 802.3ad bond of two NICs (dut0a, dut0b on taps in one
    /// bridge); each test records the bond and what each port carried (`dut_bond`). Needs
    /// --dut-vm.
    #[arg(long, requires = "dut_vm")]
    pub dut_bond: bool,
    /// Your own router VM as the DUT, from its disk image (qcow2 or raw; booted with
    /// snapshot=on, so the file is never written). No linerate agent inside: configure it
    /// as the lab's router (first NIC gen side 198.18.0.254/24, second sink side
    /// 198.19.0.254/24, routes to the flow prefixes; see "Your own router VM" in the README).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dut_vm", "dut_initrd", "gen_port"])]
    pub dut_image: Option<std::path::PathBuf>,
    /// Your own router as a kernel (--dut-kernel: a bzImage, a .deb or debian:RELEASE) and
    /// this initramfs, with no
    /// linerate agent inside (see --dut-image for how to configure it).
    #[arg(long, value_name = "FILE", requires = "dut_kernel", conflicts_with_all = ["dut_vm", "gen_port"])]
    pub dut_initrd: Option<std::path::PathBuf>,
    /// Seconds your router (--dut-image, --dut-initrd) may take from boot until it forwards
    /// the lab's traffic (default 120 under KVM, 300 under TCG).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(5..=3600), requires = "vm_dut")]
    pub dut_boot_wait: Option<u32>,
    /// Extra kernel arguments for --dut-initrd (the console is ttyS0, kept in the lab's log).
    #[arg(
        long,
        value_name = "ARGS",
        requires = "dut_initrd",
        allow_hyphen_values = true
    )]
    pub dut_append: Option<String>,
    /// The DUT VM's kernel: debian:RELEASE (Debian's own kernel package, downloaded with apt
    /// and cached, e.g. debian:bookworm), a kernel .deb, or a bzImage (its modules from
    /// /lib/modules/RELEASE). Default: debian:stable. With --dut-initrd: your router's kernel.
    #[arg(long, value_name = "KERNEL", value_parser = crate::orchestrate::config::KernelSource::parse, requires = "vm_dut")]
    pub dut_kernel: Option<crate::orchestrate::config::KernelSource>,
    /// vCPUs of the DUT VM (default 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64), requires = "vm_dut")]
    pub dut_vcpus: Option<u16>,
    /// Memory of the DUT VM in MiB (default 1024).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(256..=262144), requires = "vm_dut")]
    pub dut_memory: Option<u32>,
    /// How the DUT VM runs: kvm, tcg (emulated, slow) or auto (KVM if a probe guest boots
    /// with it within 20 s, else TCG; the choice and its reason are in the results).
    #[arg(long, value_name = "ACCEL", value_parser = crate::orchestrate::config::Accel::parse, default_value = "auto", requires = "vm_dut")]
    pub vm_accel: crate::orchestrate::config::Accel,
    /// Run only the suite's tests whose names contain this text (case-insensitive; repeatable),
    /// e.g. --only "udp 64B" --only "tcp 1".
    #[arg(long, value_name = "TEXT")]
    pub only: Vec<String>,
    /// How the UDP tests' senders put datagrams on the wire: live (XDP live frames),
    /// packet (AF_PACKET frames, qdisc bypass), xdp (AF_XDP), socket (UDP sockets) or auto
    /// (live where it can run, else packet, else socket).
    #[arg(long, value_parser = super::parse::tx_engine(), default_value = "auto")]
    pub tx_engine: TxEngine,
    /// How UDP receivers count datagrams: xdp (an XDP program on the receiving interface
    /// counts linerate frames per flow and drops them before the stack; root, native XDP,
    /// e.g. veth), socket (UDP sockets with recvmmsg), or auto (xdp where it attaches, else
    /// socket, with the reason in the results).
    #[arg(long, value_parser = super::parse::rx_engine(), default_value = "auto")]
    pub rx_engine: RxEngine,
    /// Worker threads per side for UDP: each sender thread owns a share of the flows and a
    /// core, receivers spread over SO_REUSEPORT sockets. With --cpus, the list is split:
    /// the first N CPUs for the senders, the next N for the receivers. Default: 1 with
    /// --cpus, else half the CPUs of each agent's host; never more than one per flow.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Physical port for the generator: moved into the gen namespace for the run and given
    /// back in its old state after. The DUT is then the external box the ports are cabled to
    /// (so --dut and its impairments do not apply).
    #[arg(long, value_name = "IF", requires = "sink_port",
          conflicts_with_all = ["dut", "fw_rules", "dut_loss", "dut_police", "dut_shape", "dut_remark", "dut_delay"])]
    pub gen_port: Option<String>,
    /// Physical port for the sink (see --gen-port).
    #[arg(long, value_name = "IF", requires = "gen_port")]
    pub sink_port: Option<String>,
    /// Take ports even if they carry a default route, addresses outside the benchmarking
    /// ranges or a bridge/bond membership.
    #[arg(long, requires = "gen_port")]
    pub force_port: bool,
    /// The two ports are cabled to each other (no DUT): one subnet, as the back-to-back lab.
    #[arg(long, requires = "gen_port")]
    pub back_to_back: bool,
    /// The external DUT's address on the gen side (default 198.18.0.254 and 2001:2:0:10::fe;
    /// give an IPv4 and/or an IPv6 one). The gen port takes host 1 of its subnet (2 if the DUT is 1).
    #[arg(long, value_name = "ADDR", requires = "gen_port")]
    pub dut_gen_addr: Vec<std::net::IpAddr>,
    /// The external DUT's address on the sink side (default 198.19.0.254 and 2001:2:0:20::fe).
    #[arg(long, value_name = "ADDR", requires = "gen_port")]
    pub dut_sink_addr: Vec<std::net::IpAddr>,
    /// The DUT's MAC on the gen side; without it, found by ARP once before the tests.
    #[arg(long, value_name = "MAC", requires = "gen_port")]
    pub dut_gen_mac: Option<String>,
    /// The DUT's MAC on the sink side; without it, found by ARP once before the tests.
    #[arg(long, value_name = "MAC", requires = "gen_port")]
    pub dut_sink_mac: Option<String>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

impl LabArgs {
    /// The port flags, for [`crate::orchestrate::config::PortsSpec::from_flags`].
    pub fn port_flags(&self) -> crate::orchestrate::values::PortFlags<'_> {
        crate::orchestrate::values::PortFlags {
            gen_port: self.gen_port.as_deref(),
            sink_port: self.sink_port.as_deref(),
            force: self.force_port,
            back_to_back: self.back_to_back,
            dut_gen_addr: &self.dut_gen_addr,
            dut_sink_addr: &self.dut_sink_addr,
            dut_gen_mac: self.dut_gen_mac.as_deref(),
            dut_sink_mac: self.dut_sink_mac.as_deref(),
        }
    }
}

/// The DUT VM the flags ask for, checked against the DUT mode.
fn vm_spec(a: &LabArgs) -> Result<Option<Box<crate::orchestrate::config::VmSpec>>> {
    use crate::orchestrate::config::Guest;
    let guest = match (&a.dut_image, &a.dut_initrd) {
        (Some(img), _) => Guest::Image(img.clone()),
        (None, Some(initrd)) => Guest::Initrd {
            initrd: initrd.clone(),
            append: a.dut_append.clone().unwrap_or_default(),
        },
        (None, None) if a.dut_vm => Guest::Agent,
        (None, None) => return Ok(None),
    };
    if a.dut == DutArg::Stick {
        bail!(
            "--dut-vm runs the DUT in a VM, and --dut stick is an XDP program on this host's switch namespace: use --dut route, bridge, nat or fw with --dut-vm"
        );
    }
    let d = crate::orchestrate::config::VmSpec::default();
    Ok(Some(Box::new(crate::orchestrate::config::VmSpec {
        kernel: a.dut_kernel.clone().unwrap_or(d.kernel),
        cpus: a.dut_vcpus.unwrap_or(d.cpus),
        memory_mib: a.dut_memory.unwrap_or(d.memory_mib),
        accel: a.vm_accel,
        guest,
        boot_wait_s: a.dut_boot_wait,
    })))
}

/// `linerate lab`: the lab and its suite, or the clean-up of old labs.
pub fn lab_config(a: &LabArgs) -> Result<Cmd> {
    if a.cleanup {
        return Ok(Cmd::LabCleanup);
    }
    let mut opts = a.common.run_opts()?;
    if let Some(cc) = &a.cc {
        // The lab's namespaces share this host's kernel.
        super::tcp::check_cc(cc)?;
    }
    // Pinned senders let the lab give the DUT cores of its own.
    if opts.cpus.is_empty() {
        opts.cpus = crate::orchestrate::values::default_cpus();
    }
    let threads = a.threads.unwrap_or(0);
    if let Some(n) = a.fw_rules {
        if a.dut != DutArg::Fw {
            bail!("--fw-rules {n} sets the rules of the fw DUT: add --dut fw, or drop --fw-rules");
        }
    }
    if let Some((va, vb)) = a.stick_vlans {
        if a.dut != DutArg::Stick {
            bail!("--stick-vlans {va},{vb} sets the VLANs of the stick DUT: add --dut stick, or drop --stick-vlans");
        }
    }
    if let Some(n) = a.queues {
        if let Some(e) = crate::orchestrate::values::queues_error(n) {
            bail!("{e}");
        }
        if let Some(port) = &a.gen_port {
            bail!(
                "--queues {n} sets the queues of the lab's veths, and with --gen-port {port} the \
                 lab has none: set a port's queues with `ethtool -L {port} combined N` before \
                 the run, or drop --queues"
            );
        }
    }
    if a.dut == DutArg::Stick {
        check_stick_engines(a.tx_engine, a.rx_engine)?;
    }
    let spec = LabSpec {
        dut: Some(a.dut.into()),
        fw_rules: a.fw_rules.unwrap_or(super::common::DEFAULT_FW_RULES),
        mtu: a.mtu,
        queues: a.queues.unwrap_or(1),
        dut_loss_pct: a.dut_loss,
        dut_police_pps: a.dut_police,
        rps: crate::orchestrate::config::CpuSet::receive_side(&opts.cpus, threads),
        senders: crate::orchestrate::config::CpuSet::senders(&opts.cpus, threads),
        dut_shape: a.dut_shape,
        dut_remark: a.dut_remark,
        dut_netem: crate::orchestrate::config::Netem::from_flags(
            a.dut_delay,
            a.dut_jitter,
            a.dut_reorder,
        )?,
        stick_vlans: a
            .stick_vlans
            .unwrap_or(crate::orchestrate::values::DEFAULT_STICK_VLANS),
        dut_vm: vm_spec(a)?,
        dut_bond: a.dut_bond,
    };
    let cfg = LabConfig {
        spec,
        ports: crate::orchestrate::config::PortsSpec::from_flags(&a.port_flags())?,
        quick: a.quick,
        no_search: a.no_search,
        duration_s: a.duration,
        ipv6: a.ipv6,
        direction: a.direction.into(),
        only: a.only.iter().map(|o| o.to_lowercase()).collect(),
        tx_engine: a.tx_engine,
        rx_engine: a.rx_engine,
        threads: a.threads.unwrap_or(0),
        congestion: a.cc.clone(),
    };
    Ok(Cmd::Lab(cfg, opts))
}

/// `--stick-vlans A,B`: two VLAN ids.
fn parse_stick_vlans(s: &str) -> Result<(u16, u16)> {
    let bad = || {
        anyhow::anyhow!(
            "'{s}' is not two VLAN ids: give A,B with each in 1..4094, e.g. 10,20 (A carries \
             the generator's traffic, B the sink's)"
        )
    };
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let id = |t: &str| {
        t.trim()
            .parse::<u16>()
            .ok()
            .filter(|v| (1..=4094).contains(v))
            .ok_or_else(bad)
    };
    let (a, b) = (id(a)?, id(b)?);
    if a == b {
        bail!("'{s}': a router on a stick routes between two VLANs; give two different ids");
    }
    Ok((a, b))
}

/// The stick DUT's traffic is tagged, and only engines that build frames
/// (packet, xdp, live) write tags without the kernel's 802.1Q driver.
fn check_stick_engines(tx: TxEngine, rx: RxEngine) -> Result<()> {
    match tx {
        TxEngine::Socket => bail!(
            "--dut stick with --tx-engine socket: the stick's VLAN tags are written by the \
             sending engine, and UDP sockets need a VLAN sub-interface (the kernel's 802.1Q \
             driver) to tag; use --tx-engine packet or xdp (or auto)"
        ),
        TxEngine::Auto | TxEngine::Live | TxEngine::Packet | TxEngine::Xdp => {}
    }
    if rx == RxEngine::Socket {
        bail!(
            "--dut stick with --rx-engine socket: the sink receives VLAN-tagged frames, which \
             UDP sockets see only through a VLAN sub-interface (the kernel's 802.1Q driver); use \
             --rx-engine xdp (or auto), which counts tagged frames itself"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stick_vlans_parse_and_refuse_with_the_fix() {
        assert_eq!(parse_stick_vlans("10,20").ok(), Some((10, 20)));
        assert_eq!(parse_stick_vlans(" 4094 , 1").ok(), Some((4094, 1)));
        for bad in ["10", "10,4095", "0,20", "a,b", "10,20,30"] {
            let e = parse_stick_vlans(bad).expect_err(bad).to_string();
            assert!(e.contains("1..4094"), "{bad}: {e}");
        }
        assert!(parse_stick_vlans("7,7").is_err_and(|e| e.to_string().contains("two different")));
    }

    fn lab(args: &[&str]) -> Result<Cmd> {
        let mut argv = vec!["linerate", "lab"];
        argv.extend_from_slice(args);
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv)?;
        let crate::cli::Command::Lab(a) = cli.command else {
            panic!("not lab")
        };
        lab_config(&a)
    }

    #[test]
    fn queues_parse_within_their_range() {
        let queues = |args: &[&str]| match lab(args) {
            Ok(Cmd::Lab(cfg, _)) => Ok(cfg.spec.queues),
            Ok(_) => panic!("not a lab config"),
            Err(e) => Err(format!("{e:#}")),
        };
        assert_eq!(queues(&[]), Ok(1));
        assert_eq!(queues(&["--queues", "2"]), Ok(2));
        assert_eq!(queues(&["--queues", "16"]), Ok(16));
        for bad in ["0", "17", "4096"] {
            let e = queues(&["--queues", bad]).expect_err(bad);
            assert!(e.contains(&format!("--queues {bad}")), "{e}");
            assert!(e.contains("1..=16") && e.contains("NAPI"), "{e}");
        }
        let e = queues(&["--queues=-1"]).expect_err("negative");
        assert!(e.contains("--queues"), "{e}");
        let e = queues(&["--queues", "2", "--gen-port", "eth8", "--sink-port", "eth9"])
            .expect_err("ports");
        assert!(e.contains("ethtool -L eth8"), "{e}");
    }

    #[test]
    fn stick_refuses_engines_that_cannot_tag() {
        assert!(check_stick_engines(TxEngine::Auto, RxEngine::Auto).is_ok());
        assert!(check_stick_engines(TxEngine::Packet, RxEngine::Xdp).is_ok());
        assert!(check_stick_engines(TxEngine::Live, RxEngine::Auto).is_ok());
        for (tx, rx, want) in [
            (TxEngine::Socket, RxEngine::Auto, "--tx-engine packet"),
            (TxEngine::Auto, RxEngine::Socket, "--rx-engine xdp"),
        ] {
            let e = check_stick_engines(tx, rx).expect_err("refused");
            assert!(e.to_string().contains(want), "{e}");
        }
    }
}
