//! Issue 22: the holes an abuse probe found, each closed, each with a test
//! that would fail if it opened again. Tests that need root say they skip.

use crate::util::*;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The compact UTC stamp a run directory starts with, `secs` from now.
fn stamp_in(secs: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{}", now + secs), "+%Y%m%d-%H%M%S"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Hole 1: a symlink planted where the next run's directory goes is never
/// followed; the run takes a new name and the link's target stays empty.
#[test]
fn issue22_planted_run_directory_symlinks_are_not_followed() {
    let _g = crate::util::shared();
    let d = tempdir("sec-symlink");
    let base = d.join("results");
    let victim = d.join("victim");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::create_dir_all(&victim).unwrap();
    for s in 0..15 {
        let _ = symlink(&victim, base.join(format!("{}-planted", stamp_in(s))));
    }
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "--rate",
        "1kpps",
        "--name",
        "planted",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "the run wrote through a planted symlink"
    );
    let real: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.is_symlink())
        .collect();
    assert_eq!(real.len(), 1, "{real:?}");
    let name = real[0].file_name().unwrap().to_string_lossy().to_string();
    assert!(name.ends_with("-planted-2"), "{name}");
    for f in [
        "results.json",
        "intervals.ndjson",
        "report.html",
        "agents/gen.log",
    ] {
        let p = real[0].join(f);
        assert!(p.is_file() && !p.is_symlink(), "{}", p.display());
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Hole 9: a full disk under the results directory fails the run with the
/// file and the reason, leaves no temp file and no earlier result touched.
#[test]
fn issue22_full_results_disk_fails_the_run_clearly() {
    let _g = crate::util::shared();
    if !require_root() {
        return;
    }
    let d = tempdir("sec-full");
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "hse-full"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs");
    let earlier = mnt.join("earlier");
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join("results.json"), "{\"earlier\":true}").unwrap();
    // Fill the rest of it.
    let _ = std::fs::write(mnt.join("fill"), vec![0u8; 128 * 1024]);
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "--rate",
        "1kpps",
        "--results-dir",
        mnt.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    let leftovers: Vec<String> = Command::new("find")
        .arg(&mnt)
        .args(["-name", "*.tmp*"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let earlier_after = std::fs::read_to_string(earlier.join("results.json")).unwrap();
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("results.json"), "{err}");
    assert!(!err.contains("\nresults: "), "{err}");
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    assert_eq!(earlier_after, "{\"earlier\":true}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Hole 2: host-key checking cannot be turned off by quoting or spelling,
/// and known hosts cannot be sent to /dev/null.
#[test]
fn issue22_ssh_options_are_read_as_ssh_reads_them() {
    let _g = crate::util::shared();
    for o in [
        "StrictHostKeyChecking=\"no\"",
        "StrictHostKeyChecking='off'",
        "stricthostkeychecking no",
        "STRICTHOSTKEYCHECKING = \"No\"",
        "BatchMode=\"no\"",
        "UserKnownHostsFile=/dev/null",
        "GlobalKnownHostsFile \"/dev/null\"",
    ] {
        let out = run(&[
            "tcp",
            "--client",
            "ssh://root@198.18.0.2",
            "--target",
            "198.18.0.3",
            "--ssh-accept-new",
            "--ssh-option",
            o,
            "-t",
            "1",
            "--no-results",
        ]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{o} was accepted: {err}");
        assert!(err.contains("is not allowed"), "{o}: {err}");
    }
    let d = tempdir("sec-sshplan");
    let plan = d.join("p.toml");
    std::fs::write(
        &plan,
        "[ssh]\noptions = [\"StrictHostKeyChecking=\\\"no\\\"\"]\n[hosts.a]\nnetns = \"hse-a\"\n\
         [hosts.b]\nnetns = \"hse-b\"\naddress = \"198.18.0.2\"\n[[test]]\nkind = \"tcp\"\n\
         from = \"a\"\nto = \"b\"\n",
    )
    .unwrap();
    let out = run(&["run", plan.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is refused"), "{}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Hole 3: a plan may not run local commands through ssh unless trusted.
#[test]
fn issue22_plans_cannot_run_local_commands_untrusted() {
    let _g = crate::util::shared();
    let d = tempdir("sec-trust");
    let marker = d.join("ran");
    let hosts = "[hosts.a]\nssh = \"root@198.18.0.9\"\n[hosts.b]\nnetns = \"hse-b\"\n\
                 address = \"198.18.0.2\"\n[[test]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n";
    let check = |name: &str, ssh: &str, want: &str| {
        let plan = d.join(name);
        std::fs::write(&plan, format!("[ssh]\n{ssh}\n{hosts}")).unwrap();
        let out = run(&["run", plan.to_str().unwrap()]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{name}: {err}");
        assert!(
            err.contains("--trust-plan") && err.contains(want),
            "{name}: {err}"
        );
        assert!(err.contains("plans are code"), "{name}: {err}");
    };
    let touch = format!("touch {}", marker.display());
    check(
        "opt.toml",
        &format!("options = [\"ProxyCommand={touch}\"]"),
        "ProxyCommand",
    );
    check(
        "opt2.toml",
        &format!("options = [\"localcommand \\\"{touch}\\\"\", \"PermitLocalCommand=yes\"]"),
        "localcommand",
    );
    let cfg = d.join("ssh_config");
    std::fs::write(&cfg, format!("Host *\n  KnownHostsCommand {touch}\n")).unwrap();
    check("cfg.toml", "config = \"ssh_config\"", "KnownHostsCommand");
    std::fs::write(&cfg, "Host *\n  Port 22\n").unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).unwrap();
    check("cfg2.toml", "config = \"ssh_config\"", "writable by others");
    assert!(!marker.exists(), "a plan ran a command");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Issue 34, hole 1: an untrusted plan's ssh config is read as OpenSSH
/// reads it (quotes anywhere, `=`, Include, Match exec), host-key checking
/// cannot be weakened by a plan or `--ssh-option`, and a plan cannot widen
/// where traffic goes. Nothing runs, nothing connects.
#[test]
fn issue34_plan_ssh_configs_are_read_as_openssh_reads_them() {
    let _g = crate::util::shared();
    let d = tempdir("sec-trust34");
    let marker = d.join("ran");
    let touch = format!("touch {}", marker.display());
    let hosts = "[hosts.a]\nssh = \"root@198.18.0.9\"\n[hosts.b]\nnetns = \"hse-b\"\n\
                 address = \"198.18.0.2\"\n[[test]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n";
    let inc = d.join("included");
    std::fs::write(&inc, format!("ProxyCommand {touch}\n")).unwrap();
    let cfg = d.join("ssh_config");
    let plan = d.join("plan.toml");
    std::fs::write(&plan, format!("[ssh]\nconfig = \"ssh_config\"\n{hosts}")).unwrap();
    for line in [
        format!("Proxy\"Command\" {touch}"),
        format!("\"ProxyCommand\" {touch}"),
        format!("Match exec=\"{touch}\""),
        format!("\"Match\" exec \"{touch}\""),
        format!("\"Include\" {}", inc.display()),
        "\"PermitLocalCommand\" yes".to_string(),
        "StrictHostKeyChecking \"no\"".to_string(),
        "UserKnownHostsFile //dev/null".to_string(),
    ] {
        std::fs::write(&cfg, format!("Host *\n  {line}\n")).unwrap();
        let out = run(&["run", plan.to_str().unwrap()]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{line}: {err}");
        assert!(
            err.contains("--trust-plan") && err.contains("line 2"),
            "{line}: {err}"
        );
    }
    std::fs::write(&plan, format!("allow_target = [\"0.0.0.0/0\"]\n{hosts}")).unwrap();
    let err = stderr(&run(&["run", plan.to_str().unwrap()]));
    assert!(
        err.contains("allow_target 0.0.0.0/0") && err.contains("--trust-plan"),
        "{err}"
    );
    let out = run(&[
        "tcp",
        "--client",
        "ssh://root@198.18.0.9",
        "--target",
        "198.18.0.2",
        "--ssh-option",
        "UserKnownHostsFile=//dev/null",
        "--no-results",
    ]);
    let err = stderr(&out);
    assert!(
        !out.status.success() && err.contains("never turns host-key"),
        "{err}"
    );
    assert!(!marker.exists(), "a plan ran a command");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Hole 8: the allow-list hint names exactly one address.
#[test]
fn issue22_ipv6_hints_name_one_address() {
    let _g = crate::util::shared();
    for (target, want) in [
        ("2001:db8:99::2", "--allow-target 2001:db8:99::2/128 "),
        ("::ffff:10.99.0.2", "--allow-target ::ffff:10.99.0.2/128 "),
        ("10.99.0.2", "--allow-target 10.99.0.2/32 "),
    ] {
        let out = run(&["udp", "--target", target, "-t", "1", "--no-results"]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains(want), "{target}: {err}");
    }
}

/// Hole 10: a rate needs a unit, a test that sent nothing fails, and a plan
/// of too many tests is refused before it is parsed.
#[test]
fn issue22_rates_need_units_and_empty_tests_fail() {
    let _g = crate::util::shared();
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--rate",
        "100",
        "--no-results",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a rate needs a unit") && err.contains("kpps") && err.contains("Mbps"));
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--rate",
        "100bps",
        "-t",
        "1",
        "--no-results",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "failed");
    assert!(
        t["error"].as_str().unwrap().contains("nothing was sent"),
        "{t}"
    );

    let d = tempdir("sec-cap");
    let plan = d.join("big.toml");
    let mut text = String::from("[hosts.a]\nlocal = true\n");
    for i in 0..10_001 {
        text.push_str(&format!(
            "[[test]]\nname = \"t{i}\"\nkind = \"tcp\"\nfrom = \"a\"\nto = \"a\"\ntarget = \"127.0.0.1\"\n"
        ));
    }
    std::fs::write(&plan, text).unwrap();
    let out = run(&["run", plan.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("10001 tests") && err.contains("at most 10000"),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// Hole 11: a benchmark-range target reached only through a default route
/// is refused, naming the route and --allow-target; a route through a lab
/// next hop or --allow-target lets it through.
#[test]
fn issue22_benchmark_targets_behind_a_default_route_are_refused() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let _nets = crate::util::DefaultRoutePair::new("hse", "10.250.0", "198.18.99.2");
    let udp = |extra: &[&str]| {
        let mut a = vec![
            "udp",
            "--client",
            "ns:hse-a",
            "--server",
            "ns:hse-b",
            "--target",
            "198.18.99.2",
            "--rate",
            "1kpps",
            "-t",
            "1",
            "--no-results",
        ];
        a.extend_from_slice(extra);
        run(&a)
    };
    let refused = |how: &str| {
        let out = udp(&[]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{how}: {err}");
        assert!(err.contains("via 10.250.0.2 dev hsea0"), "{how}: {err}");
        assert!(
            err.contains("--allow-target 198.18.99.2/32"),
            "{how}: {err}"
        );
    };
    refused("default route");
    // The monitor probes from where it runs: the same check (issue 34).
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            "hse-a",
            crate::util::bin(),
            "monitor",
            "--icmp",
            "198.18.99.2",
        ])
        .args(["--duration", "2", "--window", "1", "--out"])
        .arg(std::env::temp_dir().join(format!("lr-mon-{}", std::process::id())))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success(), "monitor: {err}");
    assert!(
        err.contains("refusing to probe 198.18.99.2") && err.contains("via 10.250.0.2"),
        "monitor: {err}"
    );
    let out = udp(&["--allow-target", "198.18.99.2/32"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Issue 34: the kernel's own route lookup decides, whatever the prefix
    // or table: a specific route, the two halves of the address space, or
    // a default route in a policy table all leave through 10.250.0.2.
    let ipa = |args: &[&str]| {
        let mut a = vec!["-n", "hse-a"];
        a.extend_from_slice(args);
        crate::util::ip(&a);
    };
    ipa(&["route", "add", "198.18.99.0/24", "via", "10.250.0.2"]);
    refused("a /24 via the uplink");
    ipa(&["route", "del", "198.18.99.0/24"]);
    ipa(&["route", "del", "default"]);
    ipa(&["route", "add", "0.0.0.0/1", "via", "10.250.0.2"]);
    ipa(&["route", "add", "128.0.0.0/1", "via", "10.250.0.2"]);
    refused("0.0.0.0/1 and 128.0.0.0/1");
    ipa(&["route", "del", "0.0.0.0/1"]);
    ipa(&["route", "del", "128.0.0.0/1"]);
    ipa(&[
        "route",
        "add",
        "default",
        "via",
        "10.250.0.2",
        "table",
        "100",
    ]);
    ipa(&["rule", "add", "to", "198.18.0.0/15", "lookup", "100"]);
    refused("a policy table's default");
    // A next hop inside the benchmarking ranges is a lab: allowed.
    ipa(&["rule", "del", "to", "198.18.0.0/15", "lookup", "100"]);
    ipa(&["addr", "add", "198.18.250.1/30", "dev", "hsea0"]);
    crate::util::ip(&[
        "-n",
        "hse-b",
        "addr",
        "add",
        "198.18.250.2/30",
        "dev",
        "hseb0",
    ]);
    ipa(&["route", "add", "198.18.99.0/24", "via", "198.18.250.2"]);
    let out = udp(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
}
