//! Issue 22, the remaining items: the latency responder under a flood of
//! unverified probes, results bases other users can write, and ssh hosts
//! in a benchmarking range reached only through a default route.

use crate::util::*;
use linerate::proto::probe::{Kind, Probe};
use linerate::proto::{self, Response};
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// User and system CPU seconds of process `pid` so far (/proc/PID/stat
/// fields 14 and 15, in clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; the fields after it do not.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // `after` starts at field 3 (state): utime is field 14, stime 15.
    (f[11] + f[12]) as f64 / 100.0
}

/// Datagrams waiting on `sock` now and within `wait`.
fn received(sock: &UdpSocket, wait: Duration) -> usize {
    sock.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 2048];
    let mut n = 0;
    loop {
        match sock.recv(&mut b) {
            Ok(_) => n += 1,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return n,
            Err(e) => panic!("{e}"),
        }
    }
}

/// A flood of probes the responder must not answer (another session's
/// token, the session's token from another address, replies aimed at it,
/// truncated headers, garbage) gets no reply at all, and the responder
/// spends a bounded, small CPU time on each: it neither answers nor spins.
#[test]
fn issue22_responder_flood_gets_no_replies_and_bounded_cpu() {
    let _g = one_core();
    let token = 0x0ddf_100d_0000_0022_u64;
    let session = Duration::from_secs(6);
    let mut resp = crate::util::local_responder(token, session, 1000);
    // After the session opened: waiting from here outlasts it.
    let opened = Instant::now();
    let (pid, port) = (resp.agent.id(), resp.port);
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let near = UdpSocket::bind("127.0.0.1:0").unwrap();
    let far = UdpSocket::bind("127.0.0.2:0").unwrap();
    for s in [&near, &far] {
        s.connect(to).unwrap();
    }
    let probe = |token: u64, seq: u32, len: usize, kind: Kind| {
        let mut b = vec![0u8; len];
        let mut p = Probe::request(token, seq, 1);
        p.kind = kind;
        assert!(p.emit(&mut b));
        b
    };

    // Idle, the responder sleeps in recv: next to no CPU.
    let idle_cpu0 = cpu_seconds(pid);
    std::thread::sleep(Duration::from_millis(1000));
    let idle_cpu = cpu_seconds(pid) - idle_cpu0;

    // The flood: two seconds of unverified datagrams, as fast as this
    // process sends them.
    let kinds: Vec<(&UdpSocket, Vec<u8>)> = vec![
        (&near, probe(token ^ 0x5a5a, 1, 64, Kind::Request)),
        (&far, probe(token, 2, 64, Kind::Request)),
        (&near, probe(token, 3, 64, Kind::Reply)),
        (&near, probe(token, 4, 64, Kind::Request)[..30].to_vec()),
        (&near, b"GET / HTTP/1.1\r\n\r\n".to_vec()),
        (&far, vec![0xff; 1400]),
    ];
    let cpu0 = cpu_seconds(pid);
    let t = Instant::now();
    let mut sent = 0u64;
    while t.elapsed() < Duration::from_secs(2) {
        for (s, d) in &kinds {
            // A full socket buffer is the flood doing its job.
            if s.send(d).is_ok() {
                sent += 1;
            }
        }
    }
    // Let the responder drain what is queued, then read its CPU time.
    std::thread::sleep(Duration::from_millis(500));
    let flood_cpu = cpu_seconds(pid) - cpu0;
    let replies =
        received(&near, Duration::from_millis(100)) + received(&far, Duration::from_millis(100));

    // The session itself still works after the flood: its own probe is
    // answered (the flood spent none of its rate cap).
    near.send(&probe(token, 99, 64, Kind::Request)).unwrap();
    let own = received(&near, Duration::from_millis(500));

    std::thread::sleep(session.saturating_sub(opened.elapsed()) + Duration::from_millis(300));
    let summary = loop {
        match proto::read_message::<Response>(&mut resp.output)
            .unwrap()
            .unwrap()
        {
            Response::Finished { summary, .. } => break summary,
            Response::Heartbeat { .. } => continue,
            other => panic!("{other:?}"),
        }
    };
    drop(resp.input);
    let _ = resp.agent.wait();
    let per_datagram_us = flood_cpu * 1e6 / summary.foreign.max(1) as f64;
    eprintln!(
        "flood: {sent} sent, {} seen by the responder, {replies} replies; responder CPU \
         {flood_cpu:.2} s over the flood ({per_datagram_us:.1} µs per datagram seen), \
         {idle_cpu:.2} s over 1 s idle; summary {summary:?}",
        summary.foreign
    );
    assert_eq!(replies, 0, "the responder answered unverified probes");
    assert_eq!(own, 1, "the session's own probe after the flood");
    assert_eq!(summary.tx_packets, 1, "{summary:?}");
    assert_eq!(summary.rx_packets, 1, "{summary:?}");
    assert_eq!(
        summary.tx_errors, 0,
        "no flood datagram reached the rate cap"
    );
    // The responder saw a real flood (the rest overran its socket buffer),
    // and refused all of it.
    assert!(
        summary.foreign >= 10_000 && summary.foreign <= sent,
        "{} of {sent} seen",
        summary.foreign
    );
    // recvfrom and a header check cost a few µs; 50 µs per datagram is a
    // margin no loaded machine needs, and a responder that spun (CPU
    // while idle) or worked per datagram beyond a syscall would pass it.
    assert!(idle_cpu <= 0.1, "{idle_cpu:.2} s of CPU over 1 s idle");
    assert!(
        per_datagram_us <= 50.0,
        "{per_datagram_us:.1} µs of CPU per refused datagram"
    );
}

/// A directory owned by another user (65534, "nobody"), as one would be
/// who got there first.
fn chown_nobody(p: &Path) {
    let st = Command::new("chown")
        .args(["-h", "65534:65534"])
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

fn udp_into(results: &Path, name: &str) -> Output {
    run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "-t",
        "1",
        "--rate",
        "1kpps",
        "--name",
        name,
        "--results-dir",
        results.to_str().unwrap(),
    ])
}

/// A results base in a directory everyone may write (/tmp, a 1777 working
/// directory): what another user planted on the path (a directory of
/// theirs, a symlink of theirs to a directory they chose) is refused with
/// the reason, and nothing is written through it; a base of our own there
/// is used; a base others may write without the sticky bit is refused.
#[test]
fn issue22_results_base_writable_by_others_cannot_be_redirected() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let d = tempdir("hrl-base");
    let shared = d.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = d.join("victim");
    std::fs::create_dir(&victim).unwrap();
    let empty = |p: &Path| std::fs::read_dir(p).unwrap().count() == 0;

    // Another user's directory at the base's name.
    let theirs = shared.join("linerate-results");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
    chown_nobody(&theirs);
    let out = udp_into(&theirs, "theirs");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("owned by uid 65534") && err.contains("--results-dir"),
        "{err}"
    );
    assert!(empty(&theirs), "a run wrote into another user's directory");

    // Another user's symlink at the base's name, and one further down.
    let link = shared.join("results-link");
    symlink(&victim, &link).unwrap();
    chown_nobody(&link);
    for base in [link.clone(), link.join("sub")] {
        let out = udp_into(&base, "link");
        let err = stderr(&out);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("is a symlink owned by uid 65534"), "{err}");
        assert!(empty(&victim), "a run wrote through a planted symlink");
    }

    // Our own directory in the shared one: used, and its run is complete.
    let ours = shared.join("ours");
    let out = udp_into(&ours, "ours");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&ours).unwrap().count(), 1);

    // A base everyone may write without the sticky bit: anyone could
    // rename the run directory away and put a link in its place.
    let open = d.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = udp_into(&open, "open");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not sticky"), "{err}");
    assert!(empty(&open));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Item 11 for ssh: an ssh host in 198.18.0.0/15 that the controller
/// reaches only through its default route is refused before ssh starts,
/// naming the route and --allow-target; by address, by a name the ssh
/// configuration maps to one, and as a plan's host. --allow-target (or
/// the plan's allow_target) lets the connection be tried.
#[test]
fn issue22_ssh_hosts_behind_a_default_route_are_refused() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let _nets = crate::util::DefaultRoutePair::new("hrl", "10.251.0", "198.18.98.2");
    let d = tempdir("hrl-ssh");
    let cfg = d.join("ssh_config");
    std::fs::write(&cfg, "Host lab-b\n  HostName 198.18.98.2\n  User root\n").unwrap();
    let in_a = |args: &[&str]| -> Output {
        Command::new("ip")
            .args(["netns", "exec", "hrl-a"])
            .arg(bin())
            .args(args)
            .output()
            .unwrap()
    };
    let udp = |client: &str, extra: &[&str]| {
        let mut a = vec![
            "udp",
            "--client",
            client,
            "--server",
            "local",
            "--target",
            "198.18.98.2",
            "-t",
            "1",
            "--connect-timeout",
            "2",
            "--ssh-config",
            cfg.to_str().unwrap(),
            "--no-results",
        ];
        a.extend_from_slice(extra);
        in_a(&a)
    };
    let refused = |out: &Output, host: &str| {
        let err = stderr(out);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains(&format!("{host}: refusing to connect to 198.18.98.2")),
            "{err}"
        );
        assert!(err.contains("via 10.251.0.2 dev hrla0"), "{err}");
        assert!(err.contains("--allow-target 198.18.98.2/32"), "{err}");
    };
    let t = Instant::now();
    refused(
        &udp("ssh://root@198.18.98.2", &[]),
        "ssh://root@198.18.98.2",
    );
    refused(&udp("ssh://lab-b", &[]), "ssh://lab-b");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "refused before any connection was tried"
    );
    // Allowed: ssh is tried (nothing listens there, so it fails, but not
    // with the refusal).
    let out = udp(
        "ssh://root@198.18.98.2",
        &["--allow-target", "198.18.98.2/32"],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("refusing to connect"), "{err}");

    // A plan's host: refused the same way; its allow_target lets it by.
    let plan = |allow: &str| {
        let p = d.join("plan.toml");
        std::fs::write(
            &p,
            format!(
                "name = \"hrl\"\n{allow}\n[ssh]\nconnect_timeout = 2\n\n\
                 [hosts.gen]\nlocal = true\n\n[hosts.sink]\nssh = \"root@198.18.98.2\"\n\
                 address = \"198.18.98.2\"\n\n\
                 [[test]]\nname = \"t\"\nkind = \"udp\"\nfrom = \"gen\"\nto = \"sink\"\n"
            ),
        )
        .unwrap();
        in_a(&["run", p.to_str().unwrap(), "--no-results"])
    };
    refused(&plan(""), "ssh://root@198.18.98.2");
    let out = plan("allow_target = [\"198.18.98.2/32\"]");
    let err = stderr(&out);
    assert!(!err.contains("refusing to connect"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
