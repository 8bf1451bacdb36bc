//! The DUT in a VM (`lab --dut-vm`): a stock Debian kernel booted by
//! linerate under qemu (KVM where a probe guest boots, TCG here), its agent
//! on a virtio serial port, the DUT modes on virtio-net NICs; and nothing
//! left behind, even when the controller is killed.
//!
//! The guest kernel is Debian's own package, fetched by linerate with apt
//! into its cache (a fresh CI clone has none: the first test downloads it,
//! about 70 MB).

use crate::util::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KERNEL: &str = "debian:bookworm";

/// Pids of the processes whose parent is `pid`.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat[stat.find('(').unwrap_or(0) + 1..close].to_string();
        let ppid: u32 = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if ppid == pid {
            out.push((p, comm));
        }
    }
    out
}

fn taps_anywhere() -> usize {
    // Taps are made in the vmnet namespace; one left in this namespace
    // would show here.
    root_interfaces()
        .iter()
        .filter(|i| i.starts_with("tap") || i.starts_with("hv"))
        .count()
}

#[test]
fn a_route_dut_in_a_vm_forwards_counts_exactly_and_says_it_is_virtual() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _serial = one_core();
    let dir = tempdir("vm-route");
    let began = Instant::now();
    let out = run(&[
        "lab",
        "--dut-vm",
        "--dut-kernel",
        KERNEL,
        "--quick",
        "--duration",
        "2",
        "--only",
        "udp 64B var2",
        "--only",
        "tcp 1 stream",
        "--results-dir",
        dir.to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lab --dut-vm failed:\n{stderr}\n{stdout}"
    );
    let run_dir = only_run_dir(&dir);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).unwrap()).unwrap();
    let lab = doc["labs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["dut_mode"] == "route")
        .expect("a route lab");
    let vm = &lab["vm"];
    assert!(
        vm["accel"] == "tcg" || vm["accel"] == "kvm",
        "accelerator recorded: {vm}"
    );
    assert!(!vm["accel_reason"].as_str().unwrap().is_empty(), "{vm}");
    assert!(
        vm["kernel_release"].as_str().unwrap().starts_with("6.1."),
        "bookworm's kernel is 6.1: {vm}"
    );
    assert!(
        vm["kernel_origin"].as_str().unwrap().contains("bookworm"),
        "{vm}"
    );
    assert_eq!(vm["nic_model"], "virtio-net-pci");
    let modules: Vec<&str> = vm["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for m in ["virtio_net", "virtio_console", "nf_tables", "bridge"] {
        assert!(modules.contains(&m), "{m} not loaded: {modules:?}");
    }
    assert!(f(&vm["boot_s"]) > 0.5, "{vm}");
    let roles: Vec<&str> = lab["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["role"].as_str())
        .collect();
    assert_eq!(roles, ["gen", "vmnet", "dut", "sink"]);
    // The guest's own record names its NICs as the namespace DUT's.
    let dut = lab["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["role"] == "dut")
        .unwrap();
    assert!(dut.to_string().contains("dut0") && dut.to_string().contains("dut1"));

    // UDP through the guest: every frame the sink did not count was lost
    // at the DUT (its tap or its kernel), and the DUT's own counters agree.
    let udp = test_named(&doc, "udp 64B var2");
    assert_eq!(udp["status"], "ok", "{udp}");
    let d = &udp["directions"][0];
    let rx = d["rx_packets"].as_u64().unwrap();
    assert!(rx > 100, "the guest forwarded {rx} frames");
    let checks = udp["cross_checks"].as_array().unwrap();
    let dut_check = checks
        .iter()
        .find(|c| c["what"].as_str().unwrap().starts_with("dut:"))
        .unwrap_or_else(|| panic!("no DUT cross-check: {checks:?}"));
    assert_eq!(dut_check["flagged"], false, "{dut_check}");
    assert_eq!(d["tester_drops"].as_u64().unwrap_or(0), 0, "{d}");
    // The DUT's vCPU, read from its qemu thread on this host: under TCG
    // it is full at this load and, frames lost at the DUT, the verdict
    // names it rather than any core.
    let b = &udp["bottleneck"];
    let vcpus = b["vcpus"].as_array().expect("the DUT VM's vCPUs recorded");
    assert_eq!(vcpus.len(), 1, "{vcpus:?}");
    assert_eq!(vcpus[0]["dut"], true, "{vcpus:?}");
    let pct = f(&vcpus[0]["cpu_pct"]);
    assert!((0.0..=100.0).contains(&pct), "{pct}");
    let lost = d["dut_lost"].as_u64().unwrap_or(0);
    if pct >= 90.0 && lost * 100 >= d["tx_packets"].as_u64().unwrap() {
        assert_eq!(b["kind"], "dut", "{b}");
        assert!(
            b["verdict"]
                .as_str()
                .unwrap()
                .contains("DUT vCPU 0 (qemu thread CPU 0/"),
            "{b}"
        );
    }
    eprintln!("DUT vCPU {pct} %, {lost} lost at the DUT: {}", b["verdict"]);
    // TCP through the guest moves data.
    let tcp = test_named(&doc, "tcp 1 stream");
    assert_eq!(tcp["status"], "ok", "{tcp}");
    assert!(f(&tcp["directions"][0]["rx_l2_bps"]) > 1e6, "{tcp}");
    // Said where it is read: the terminal's legend and the HTML report.
    assert!(stdout.contains("virtual ("), "{stdout}");
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.contains("in a VM (kernel 6.1."), "report names the VM");
    // Nothing left: qemu (the dut node's pid), the agents, the taps.
    assert_nothing_left(&lab_pids(&doc));
    assert_eq!(taps_anywhere(), 0);
    eprintln!("vm route lab took {:.1} s", began.elapsed().as_secs_f64());
}

#[test]
fn a_killed_controller_leaves_no_vm_behind() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _serial = one_core();
    let dir = tempdir("vm-kill");
    let mut child = Command::new(bin())
        .args([
            "lab",
            "--dut-vm",
            "--vm-accel",
            "tcg",
            "--dut-kernel",
            KERNEL,
            "--quick",
            "--duration",
            "60",
            // Not "udp 64B var2": that would run the self-test's 60 s first.
            "--only",
            "tcp 1 stream",
            "--results-dir",
            dir.to_str().unwrap(),
            "--no-progress",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the DUT lab is whole: qemu (its guest agent answered, or
    // the sink, spawned after it, would not run) and the gen, vmnet and
    // sink agents; then a few seconds into its test.
    let deadline = Instant::now() + Duration::from_secs(200);
    let mut qemu = Vec::new();
    let mut agents = Vec::new();
    while Instant::now() < deadline {
        let kids = children(pid);
        qemu = kids
            .iter()
            .filter(|(_, c)| c.starts_with("qemu"))
            .map(|(p, _)| *p)
            .collect();
        agents = kids
            .iter()
            .filter(|(_, c)| c == "linerate")
            .map(|(p, _)| *p)
            .collect();
        if !qemu.is_empty() && agents.len() >= 3 {
            std::thread::sleep(Duration::from_secs(5));
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!qemu.is_empty(), "qemu never started under the controller");
    assert!(agents.len() >= 3, "gen, vmnet and sink agents: {agents:?}");
    // SIGKILL: nothing of the controller runs any more.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut all = qemu.clone();
    all.extend(&agents);
    assert_nothing_left(&all);
    assert_eq!(taps_anywhere(), 0);
}

#[test]
fn vm_flags_are_checked_before_anything_starts() {
    let _g = crate::util::shared();
    let out = run(&["lab", "--dut-kernel", KERNEL]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--dut-vm"), "{e}");
    let out = run(&["lab", "--dut-vm", "--dut", "stick"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--dut stick") && e.contains("route"), "{e}");
    let out = run(&["lab", "--dut-vm", "--dut-kernel", "debian:../etc"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("not a Debian release"), "{e}");
    let out = run(&["lab", "--dut-vm", "--vm-accel", "hvf"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("auto, kvm or tcg"), "{e}");
    // A kernel file that is not one says so, after no lab was built.
    let dir = tempdir("vm-badkernel");
    let bogus = dir.join("vmlinuz");
    std::fs::write(&bogus, b"not a kernel").unwrap();
    if is_root() && have_qemu() {
        let out = run(&[
            "lab",
            "--dut-vm",
            "--dut-kernel",
            bogus.to_str().unwrap(),
            "--quick",
            "--no-results",
        ]);
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("not an x86 Linux kernel image"), "{e}");
    }
}

/// A router initramfs of the test's own (no linerate in it): static
/// busybox, the virtio-net modules of Debian's bookworm kernel, and an init
/// that configures the lab's router addresses, the flows' routes unless
/// `flow_routes` is false, and forwarding. `None` (with a skip line) when
/// busybox is not static.
fn router_initramfs(dir: &std::path::Path, flow_routes: bool) -> Option<std::path::PathBuf> {
    let bb = std::path::Path::new("/bin/busybox");
    let ldd = Command::new("ldd").arg(bb).output();
    let is_static = ldd.is_ok_and(|o| {
        let t = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        t.contains("not a dynamic") || t.contains("statically linked")
    });
    if !is_static {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have busybox-static (scripts/test.sh installs it)"
        );
        skip("a router initramfs needs a static /bin/busybox (apt-get install busybox-static)");
        return None;
    }
    let kernel = linerate::vm::kernel::resolve(
        &linerate::vm::KernelSource::Debian("bookworm".into()),
        &|m| eprintln!("{m}"),
    )
    .expect("bookworm's kernel");
    let modules = kernel.modules.expect("bookworm's kernel has modules");
    let root = dir.join("router-root");
    for d in ["bin", "lib", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(bb, root.join("bin/busybox")).unwrap();
    let chain = [
        "virtio_ring",
        "virtio",
        "virtio_pci_modern_dev",
        "virtio_pci_legacy_dev",
        "virtio_pci",
        "failover",
        "net_failover",
        "virtio_net",
    ];
    let found = Command::new("find")
        .arg(&modules)
        .args(["-name", "*.ko*"])
        .output()
        .unwrap();
    for line in String::from_utf8_lossy(&found.stdout).lines() {
        let p = std::path::Path::new(line);
        let name = p.file_name().unwrap().to_string_lossy();
        let base = name.split(".ko").next().unwrap().to_string();
        if chain.contains(&base.as_str()) {
            let to = root.join("lib").join(format!("{base}.ko"));
            if name.ends_with(".ko") {
                std::fs::copy(p, &to).unwrap();
            } else {
                let tool = if name.ends_with(".xz") { "xz" } else { "zstd" };
                let out = Command::new(tool).arg("-dc").arg(p).output().unwrap();
                std::fs::write(&to, out.stdout).unwrap();
            }
        }
    }
    let routes = if flow_routes {
        "ip route add 198.19.1.0/24 via 198.19.0.1\n\
         ip route add 198.18.1.0/24 via 198.18.0.1\n\
         ip -6 route add 2001:2:0:21::/64 via 2001:2:0:20::1\n\
         ip -6 route add 2001:2:0:11::/64 via 2001:2:0:10::1\n"
    } else {
        ""
    };
    let init = format!(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s /bin\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         for m in {}; do [ -f /lib/$m.ko ] && insmod /lib/$m.ko; done\n\
         ip link set eth0 up\n\
         ip link set eth1 up\n\
         ip addr add 198.18.0.254/24 dev eth0\n\
         ip addr add 198.19.0.254/24 dev eth1\n\
         ip -6 addr add 2001:2:0:10::fe/64 dev eth0\n\
         ip -6 addr add 2001:2:0:20::fe/64 dev eth1\n\
         {routes}\
         echo 1 > /proc/sys/net/ipv4/ip_forward\n\
         echo 1 > /proc/sys/net/ipv6/conf/all/forwarding\n\
         echo the test router is up\n\
         while true; do sleep 3600; done\n",
        chain.join(" ")
    );
    std::fs::write(root.join("init"), init).unwrap();
    let st = Command::new("chmod")
        .arg("755")
        .arg(root.join("init"))
        .status()
        .unwrap();
    assert!(st.success());
    let _ = Command::new("mknod")
        .arg(root.join("dev/console"))
        .args(["c", "5", "1"])
        .status();
    let cpio = dir.join(if flow_routes {
        "router.cpio"
    } else {
        "router-noroutes.cpio"
    });
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cd '{}' && find . | busybox cpio -o -H newc > '{}' 2>/dev/null",
            root.display(),
            cpio.display()
        ))
        .status()
        .unwrap();
    assert!(st.success(), "cpio of the router's root");
    Some(cpio)
}

/// Issue 35, item 3: a router linerate did not build (a kernel and an
/// initramfs of the test's own, no agent inside) is the lab's DUT; the lab
/// waits until it forwards, runs the tests through it, names it in the
/// results and stops it. A router without the flows' routes is refused
/// with what it lacks, its NICs' counters and its console.
#[test]
fn a_router_initramfs_linerate_did_not_build_is_the_dut() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _serial = one_core();
    let dir = tempdir("vm-user-router");
    let Some(cpio) = router_initramfs(&dir, true) else {
        return;
    };
    let res = dir.join("res");
    let began = Instant::now();
    let out = run(&[
        "lab",
        "--dut-kernel",
        KERNEL,
        "--dut-initrd",
        cpio.to_str().unwrap(),
        "--dut-append",
        "quiet",
        "--vm-accel",
        "tcg",
        "--quick",
        "--duration",
        "1",
        "--ipv6",
        "--only",
        "udp 64B var2",
        "--only",
        "var2 ipv6",
        "--only",
        "tcp 1 stream",
        "--results-dir",
        res.to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lab --dut-initrd failed:\n{stderr}\n{stdout}"
    );
    assert!(stderr.contains("waiting for your router"), "{stderr}");
    let run_dir = only_run_dir(&res);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).unwrap()).unwrap();
    let lab = doc["labs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["dut_mode"] == "route")
        .expect("a route lab");
    let vm = &lab["vm"];
    assert!(
        vm["user_router"].as_str().unwrap().contains("router.cpio"),
        "{vm}"
    );
    assert!(
        vm["kernel_release"].as_str().unwrap().starts_with("6.1."),
        "{vm}"
    );
    assert_eq!(vm["modules"].as_array().map(|m| m.len()), Some(0), "{vm}");
    assert!(f(&vm["boot_s"]) > 0.5, "{vm}");
    let notes = lab["notes"].to_string();
    assert!(notes.contains("no linerate agent inside"), "{notes}");
    assert!(!notes.contains("IPv6 did not pass"), "{notes}");
    // Every row ran through the router: UDP between the flows' prefixes on
    // both IP versions, TCP on both.
    let rows = doc["tests"].as_array().unwrap();
    let through: Vec<&Value> = rows
        .iter()
        .filter(|t| !t["name"].as_str().unwrap().starts_with("self-test"))
        .collect();
    let names: Vec<&str> = through.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in [
        "udp 64B var2",
        "udp 84B var2 ipv6",
        "tcp 1 stream",
        "tcp 1 stream ipv6",
    ] {
        assert!(names.contains(&want), "{want} not run: {names:?}");
    }
    for t in &through {
        assert_eq!(t["status"], "ok", "{t}");
        let d = &t["directions"][0];
        if t["name"].as_str().unwrap().starts_with("udp") {
            let rx = d["rx_packets"].as_u64().unwrap_or(0);
            assert!(rx > 100, "the router forwarded {rx}: {t}");
        } else {
            assert!(f(&d["rx_l2_bps"]) > 1e6, "{t}");
        }
    }
    // The console was kept in the run's logs.
    let console =
        std::fs::read_to_string(run_dir.join("agents/dut-console.log")).unwrap_or_default();
    assert!(
        console.contains("the test router is up"),
        "console log: {console}"
    );
    assert!(stdout.contains("virtual ("), "{stdout}");
    assert_nothing_left(&lab_pids(&doc));
    assert_eq!(taps_anywhere(), 0);
    eprintln!(
        "user router lab took {:.1} s",
        began.elapsed().as_secs_f64()
    );

    // The same router without the flows' routes: refused, naming them.
    let cpio = router_initramfs(&dir, false).unwrap();
    let t0 = Instant::now();
    let out = run(&[
        "lab",
        "--dut-kernel",
        KERNEL,
        "--dut-initrd",
        cpio.to_str().unwrap(),
        "--vm-accel",
        "tcg",
        "--dut-boot-wait",
        "45",
        "--quick",
        "--only",
        "udp 64B var2",
        "--no-results",
        "--no-progress",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("route 198.19.1.0/24 via 198.19.0.1")
            && err.contains("route 198.18.1.0/24 via 198.18.0.1")
            && !err.contains("from the generator (198.18.0.1) to the sink"),
        "{err}"
    );
    assert!(err.contains("first NIC (gen side"), "{err}");
    assert!(err.contains("the test router is up"), "console tail: {err}");
    // Refused once the main path forwards and the routes stay missing, not
    // at the end of the 45 s it may take to boot.
    assert!(err.contains("its routes do not come later"), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(taps_anywhere(), 0);
}

/// A namespace of a VM-host test, deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// examples/vm/vm_host.toml with its namespace renamed to one of this
/// test's (the example's `vmgen` may exist on the host), and `extra`
/// replacing the test's duration; the plan's path and the namespace.
fn vm_host_plan(dir: &std::path::Path, tag: &str, duration: &str) -> (std::path::PathBuf, Netns) {
    let ns = Netns(format!("lrvm{}{tag}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vm/vm_host.toml"),
    )
    .unwrap();
    assert!(example.contains("\"vmgen\"") && example.contains("duration = 2"));
    let plan = dir.join("vm_host.toml");
    std::fs::write(
        &plan,
        example
            .replace("\"vmgen\"", &format!("\"{}\"", ns.0))
            .replace("duration = 2", &format!("duration = {duration}")),
    )
    .unwrap();
    (plan, ns)
}

/// Interfaces in namespace `ns` whose names start with `prefix`.
fn links_in(ns: &str, prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["-n", ns, "-o", "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The README's and examples/vm's plan: a VM host as a test's `to`, its NIC
/// a tap in the generator's namespace. UDP from the namespace host reaches
/// the guest's agent, counted exactly; the results say what the guest was;
/// after the run no qemu and no tap is left.
#[test]
fn a_plan_s_vm_host_is_a_test_s_far_end() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _serial = one_core();
    let dir = tempdir("vm-host");
    let began = Instant::now();
    let (plan, ns) = vm_host_plan(&dir, "h", "2");
    let out = run(&[
        "run",
        plan.to_str().unwrap(),
        "--results-dir",
        dir.join("results").to_str().unwrap(),
        "--no-progress",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run with a VM host failed:\n{stderr}");
    assert!(stderr.contains("host r1: a VM (virtual ("), "{stderr}");
    let run_dir = only_run_dir(&dir.join("results"));
    let doc: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).unwrap()).unwrap();
    let r1 = doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] == "r1")
        .expect("the VM host's agent");
    assert_eq!(r1["endpoint"], "vm:r1");
    let vm = &r1["vm"];
    assert!(vm["accel"] == "tcg" || vm["accel"] == "kvm", "{vm}");
    assert_eq!(vm["vcpus"], 1);
    assert_eq!(vm["nic_model"], "virtio-net-pci");
    assert!(
        vm["kernel_release"].as_str().unwrap().starts_with("6.1."),
        "{vm}"
    );
    let udp = test_named(&doc, "udp to the guest");
    assert_eq!(udp["status"], "ok", "{udp}");
    let d = &udp["directions"][0];
    let (tx, rx) = (
        d["tx_packets"].as_u64().unwrap(),
        d["rx_packets"].as_u64().unwrap(),
    );
    // 2 kpps for 2 s, every frame sent reached the guest. A sender that
    // wakes late gives the frames due meanwhile up rather than burst
    // them: beside `stress-ng --cpu 1` its first second sent 1,864 of
    // 2,000 (3,863 in all), so the floor is 90 %.
    assert!(tx >= 3600, "{d}");
    assert_eq!(rx, tx, "{d}");
    assert_eq!(d["lost"].as_u64().unwrap(), 0, "{d}");
    // The guest's vCPU, from its qemu thread on this host.
    let vcpus = udp["bottleneck"]["vcpus"]
        .as_array()
        .expect("vCPUs recorded");
    assert_eq!(vcpus.len(), 1, "{vcpus:?}");
    assert_eq!(vcpus[0]["role"], "r1");
    assert!(vcpus[0]["thread"].as_str().unwrap().starts_with("CPU 0/"));
    let pct = f(&vcpus[0]["cpu_pct"]);
    assert!((0.0..=100.0).contains(&pct), "{pct}");
    // Nothing left: qemu ended with the run, its tap with it.
    let qemu = vm["qemu_pid"].as_u64().unwrap() as u32;
    assert_nothing_left(&[qemu]);
    assert_eq!(links_in(&ns.0, "lrvm"), Vec::<String>::new());
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("vm host plan took {:.1} s", began.elapsed().as_secs_f64());
}

/// SIGKILL of the controller while a VM host's test runs: its qemu and
/// its tap go with it.
#[test]
fn a_killed_plan_leaves_no_vm_host_behind() {
    if !require_root() || !have_qemu() {
        return;
    }
    let _serial = one_core();
    let dir = tempdir("vm-host-kill");
    let (plan, ns) = vm_host_plan(&dir, "k", "60");
    let mut child = Command::new(bin())
        .args([
            "run",
            plan.to_str().unwrap(),
            "--no-results",
            "--no-progress",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Until the guest's tap is up in the namespace (it is placed once the
    // guest's agent answered), then a moment into the test.
    let deadline = Instant::now() + Duration::from_secs(200);
    let mut qemu = Vec::new();
    while Instant::now() < deadline {
        qemu = children(pid)
            .iter()
            .filter(|(_, c)| c.starts_with("qemu"))
            .map(|(p, _)| *p)
            .collect();
        if !qemu.is_empty() && !links_in(&ns.0, "lrvm").is_empty() {
            std::thread::sleep(Duration::from_secs(2));
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!qemu.is_empty(), "qemu never started under the controller");
    assert!(!links_in(&ns.0, "lrvm").is_empty(), "no tap was placed");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_nothing_left(&qemu);
    let until = Instant::now() + Duration::from_secs(10);
    while !links_in(&ns.0, "lrvm").is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(links_in(&ns.0, "lrvm"), Vec::<String>::new());
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
