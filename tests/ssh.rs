//! The ssh transport against real sshd hosts (tests/sshd.rs): logging in,
//! each way a login fails, and choosing or pushing the remote binary.

use crate::sshd::*;
use crate::util::*;
use linerate::topology::ssh::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// What open() may take past the connect timeout (its login slack + 1 s).
const SLACK: Duration = Duration::from_secs(4);

fn options(config: &Path) -> SshOptions {
    SshOptions {
        config: Some(config.to_path_buf()),
        connect_timeout: CONNECT_TIMEOUT,
        ..SshOptions::default()
    }
}

fn target(lab: &SshLab, i: usize) -> SshTarget {
    SshTarget::parse_url(&lab.url(i)).unwrap()
}

/// Opens a session that must fail; returns the message, checking the
/// timing and that it names the host.
fn open_fails(lab: &SshLab, i: usize, opts: &SshOptions) -> String {
    let dir = ControlDir::new().unwrap();
    let t = target(lab, i);
    let start = Instant::now();
    let err = match SshSession::open(&t, opts, &dir) {
        Ok(_) => panic!("{t}: open succeeded"),
        Err(e) => format!("{e:#}"),
    };
    let took = start.elapsed();
    eprintln!("{t}: failed after {took:.2?}: {err}");
    assert!(took < CONNECT_TIMEOUT + SLACK, "took {took:?}");
    assert!(
        err.contains(&t.to_string()),
        "does not name the host: {err}"
    );
    assert!(err.contains("ssh said: \""), "does not quote ssh: {err}");
    err
}

#[test]
fn ssh_connects_with_a_valid_certificate() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let lab = SshLab::new(1);
    let trace = lab.trace();
    {
        let dir = ControlDir::new().unwrap();
        let mut s = SshSession::open(&target(&lab, 0), &options(&lab.ssh_config), &dir)
            .unwrap_or_else(|e| panic!("{e:#}\nsshd log:\n{}", lab.sshd_log(0)));
        assert!(s.connect_time() > Duration::ZERO);
        assert!(s.connect_time() < CONNECT_TIMEOUT, "{:?}", s.connect_time());
        eprintln!("connected in {:?}", s.connect_time());
        let out = s.command(&["echo", "hi"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
        // Arguments arrive as given, whatever the remote shell makes of
        // quotes, spaces and $.
        let weird = ["it's", "a b", "$HOME", "`x`;|&"];
        let mut argv = vec!["printf", "%s\\n"];
        argv.extend(weird);
        let out = s.command(&argv).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            weird.map(|w| format!("{w}\n")).concat()
        );
        // The command runs in the host's namespace, on its own address.
        let out = s
            .command(&["ip", "-br", "addr", "show", "eth0"])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains(&lab.hosts[0].addr.to_string()));
        s.close();
        s.close();
        // close() ended the master: nothing runs with this control dir.
        assert!(processes_mentioning(&dir.path().to_string_lossy()).is_empty());
    }
    drop(lab);
    trace.assert_gone();
}

#[test]
fn ssh_expired_certificate_is_refused_and_explained() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let lab = SshLab::new(1);
    let trace = lab.trace();
    let cert = lab.user_cert("20200101:20200102", "root");
    let err = open_fails(
        &lab,
        0,
        &options(&lab.ssh_config_with("expired", Some(&cert), true)),
    );
    assert!(err.contains("Permission denied (publickey)"), "{err}");
    assert!(err.contains("expired at 2020-01-02 00:00:00 UTC"), "{err}");
    assert!(err.contains(&cert.to_string_lossy().to_string()), "{err}");
    drop(lab);
    trace.assert_gone();
}

#[test]
fn ssh_wrong_principal_is_refused_and_explained() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let lab = SshLab::new(1);
    let trace = lab.trace();
    let cert = lab.user_cert("-5m:+1h", "alice");
    let err = open_fails(
        &lab,
        0,
        &options(&lab.ssh_config_with("alice", Some(&cert), true)),
    );
    assert!(err.contains("Permission denied (publickey)"), "{err}");
    assert!(
        err.contains("does not list user root among its principals (alice)"),
        "{err}"
    );
    drop(lab);
    trace.assert_gone();
}

#[test]
fn ssh_unknown_host_key_is_refused_not_accepted() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let lab = SshLab::new(1);
    let trace = lab.trace();
    let config = lab.ssh_config_with("no-ca", None, false);
    let err = open_fails(&lab, 0, &options(&config));
    assert!(err.contains("Host key verification failed"), "{err}");
    assert!(err.contains("--ssh-accept-new"), "{err}");
    // With --ssh-accept-new the key is recorded and the login works.
    let dir = ControlDir::new().unwrap();
    let opts = SshOptions {
        accept_new: true,
        ..options(&config)
    };
    let s = SshSession::open(&target(&lab, 0), &opts, &dir).unwrap();
    drop(s);
    let known = std::fs::read_to_string(lab.dir.join("known_hosts-empty")).unwrap();
    assert!(known.contains(&lab.hosts[0].addr.to_string()), "{known}");
    drop(dir);
    drop(lab);
    trace.assert_gone();
}

#[test]
fn ssh_unreachable_hosts_fail_within_the_timeout() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let mut lab = SshLab::new(0);
    let refused = lab.add_host(HostKind::NoSshd);
    let blackhole = lab.add_host(HostKind::Blackhole);
    let trace = lab.trace();
    let opts = options(&lab.ssh_config);
    let err = open_fails(&lab, refused, &opts);
    assert!(err.contains("Connection refused"), "{err}");
    assert!(
        err.contains("is sshd") || err.contains("sshd runs"),
        "{err}"
    );
    let start = Instant::now();
    let err = open_fails(&lab, blackhole, &opts);
    assert!(err.contains("timed out"), "{err}");
    assert!(start.elapsed() >= CONNECT_TIMEOUT - Duration::from_millis(500));
    drop(lab);
    trace.assert_gone();
}

#[test]
fn ssh_resolve_binary_missing_then_pushed_then_reused() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let lab = SshLab::new(1);
    let trace = lab.trace();
    {
        let dir = ControlDir::new().unwrap();
        let t = target(&lab, 0);
        let opts = options(&lab.ssh_config);
        let s = SshSession::open(&t, &opts, &dir).unwrap();

        // linerate is not on the host's PATH.
        let err = format!("{:#}", s.resolve_binary(&opts).unwrap_err());
        eprintln!("missing: {err}");
        assert!(
            err.contains(&format!("host {t} has no linerate on its PATH")),
            "{err}"
        );
        assert!(
            err.contains("--push") && err.contains("--remote-binary"),
            "{err}"
        );
        assert!(err.contains("not found"), "{err}");

        // Named explicitly, the built binary is used as it is.
        let named = SshOptions {
            remote_binary: Some(bin().to_string()),
            ..opts.clone()
        };
        assert_eq!(s.resolve_binary(&named).unwrap(), bin());

        // Something that is not linerate: refused.
        let other = SshOptions {
            remote_binary: Some("/bin/false".into()),
            ..opts.clone()
        };
        let err = format!("{:#}", s.resolve_binary(&other).unwrap_err());
        assert!(err.contains("cannot run /bin/false"), "{err}");

        // --push copies linerate into the host's cache, named by its hash.
        let pushing = SshOptions {
            push: true,
            local_binary: Some(bin().into()),
            ..opts.clone()
        };
        let start = Instant::now();
        let path = s
            .resolve_binary(&pushing)
            .unwrap_or_else(|e| panic!("{e:#}"));
        eprintln!("first push took {:?}: {path}", start.elapsed());
        let cache = lab.cache_dir(0).join("linerate");
        let entries: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        let hash = entries[0].file_name().to_string_lossy().to_string();
        assert_eq!(hash.len(), 64, "{hash}");
        let pushed = entries[0].path().join("linerate");
        assert_eq!(path, pushed.to_string_lossy());
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = std::fs::metadata(&pushed).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o755);
        assert_eq!(
            std::fs::read(&pushed).unwrap(),
            std::fs::read(bin()).unwrap()
        );
        let out = s.command(&[&path, "--version"]).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("linerate {}", env!("CARGO_PKG_VERSION"))
        );
        // A second resolve reuses the copy: same file, not rewritten.
        let start = Instant::now();
        assert_eq!(s.resolve_binary(&pushing).unwrap(), path);
        eprintln!("second resolve took {:?}", start.elapsed());
        let again = std::fs::metadata(&pushed).unwrap();
        assert_eq!(
            (again.ino(), again.mtime_nsec()),
            (meta.ino(), meta.mtime_nsec())
        );
        assert_eq!(
            std::fs::read_dir(entries[0].path()).unwrap().count(),
            1,
            "temp file left"
        );
    }
    drop(lab);
    trace.assert_gone();
}

#[test]
fn ssh_host_dying_ends_remote_commands() {
    // Light: shared, so it never runs beside a load test's trials.
    let _g = crate::util::shared();
    if !require_sshd() {
        return;
    }
    let lab = SshLab::new(1);
    let trace = lab.trace();
    {
        let dir = ControlDir::new().unwrap();
        let s = SshSession::open(&target(&lab, 0), &options(&lab.ssh_config), &dir).unwrap();
        let mut sleeper = s
            .command(&["sleep", "30"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let start = Instant::now();
        lab.kill_sessions(0);
        let status = sleeper.wait().unwrap();
        assert_eq!(status.code(), Some(255), "{status}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }
    drop(lab);
    trace.assert_gone();
}
