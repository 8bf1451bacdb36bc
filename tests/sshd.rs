//! An sshd test harness: real OpenSSH servers, each in its own network
//! namespace reached over a veth from the test's namespace, so a command run
//! over ssh "there" owns that namespace's network like a remote host would.
//!
//! Trust is a throwaway CA made with ssh-keygen: host certificates for the
//! servers, user certificates for the client. The client runs only with the
//! lab's own ssh_config (private known_hosts, no agent); nothing in ~/.ssh is
//! read or written. Drop removes every process, namespace, link and file.

use crate::util::*;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

/// sshd tests need root, sshd and the OpenSSH client. Outside CI a missing
/// piece skips them loudly; in CI it fails.
pub fn require_sshd() -> bool {
    if !require_root() {
        return false;
    }
    let missing: Vec<&str> = [SSHD, "ssh", "ssh-keygen"]
        .into_iter()
        .filter(|p| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have openssh-server and openssh-client installed (missing {missing:?})"
    );
    crate::util::skip(&format!(
        "needs openssh-server and openssh-client (missing {missing:?})"
    ));
    false
}

/// Hosts made in this process, for unique names and addresses.
static HOSTS: AtomicUsize = AtomicUsize::new(0);
static LABS: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    /// sshd listens on port 22.
    Sshd,
    /// The address answers, nothing listens: connection refused.
    NoSshd,
    /// Packets arrive but no answer can leave: connections time out.
    Blackhole,
}

pub struct SshHost {
    pub name: String,
    pub addr: IpAddr,
    pub netns: String,
    pub kind: HostKind,
    /// The veth end in the test's namespace.
    pub link: String,
    sshd: Option<Child>,
}

impl SshHost {
    pub fn sshd_pid(&self) -> Option<u32> {
        self.sshd.as_ref().map(Child::id)
    }
}

pub struct SshLab {
    pub dir: PathBuf,
    pub hosts: Vec<SshHost>,
    pub ssh_config: PathBuf,
    ca: PathBuf,
    user_key: PathBuf,
    certs: AtomicUsize,
}

/// What a lab had, to check after it is dropped that none of it is left.
pub struct LabTrace {
    dir: PathBuf,
    pids: Vec<u32>,
    netns: Vec<String>,
    links: Vec<String>,
}

fn sh(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keygen(args: &[&str]) {
    sh("ssh-keygen", args);
}

impl SshLab {
    /// A lab of `n_hosts` sshd hosts.
    pub fn new(n_hosts: usize) -> SshLab {
        let dir = tempdir(&format!("sshlab{}", LABS.fetch_add(1, Ordering::Relaxed)));
        let ca = dir.join("ca");
        keygen(&[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "linerate-test-ca",
            "-f",
            ca.to_str().unwrap(),
        ]);
        let user_key = dir.join("user");
        keygen(&[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "linerate-test-user",
            "-f",
            user_key.to_str().unwrap(),
        ]);
        let mut lab = SshLab {
            ssh_config: dir.join("ssh_config"),
            dir,
            hosts: Vec::new(),
            ca,
            user_key,
            certs: AtomicUsize::new(0),
        };
        let cert = lab.sign_user(&lab.user_key.clone(), "+1h", "root");
        let known_hosts = lab.known_hosts(true);
        lab.write_ssh_config(
            &lab.ssh_config.clone(),
            &lab.user_key.clone(),
            &cert,
            &known_hosts,
        );
        std::fs::create_dir_all("/run/sshd").unwrap();
        for _ in 0..n_hosts {
            lab.add_host(HostKind::Sshd);
        }
        lab
    }

    /// Adds a host; returns its index.
    pub fn add_host(&mut self, kind: HostKind) -> usize {
        let n = HOSTS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // A /30 per host in 198.19.128.0/17 (benchmarking range, clear of
        // the lab's own 198.18.1/198.19.0-1 prefixes), by process and host.
        let idx = (pid as usize % 128) * 64 + n % 64;
        let base = u32::from(Ipv4Addr::new(198, 19, 128, 0)) + (idx as u32) * 4;
        let (there, here) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        let name = format!("h{}", self.hosts.len());
        let netns = format!("lrt-ssh-{pid}-{n}");
        let link = format!("ls{}x{}", pid % 10_000_000, n);
        sh("ip", &["netns", "add", &netns]);
        let mut host = SshHost {
            name: name.clone(),
            addr: IpAddr::V4(there),
            netns: netns.clone(),
            kind,
            link: link.clone(),
            sshd: None,
        };
        // Push first so Drop cleans up even if a step below panics.
        self.hosts.push(SshHost {
            sshd: None,
            ..clone_host(&host)
        });
        let i = self.hosts.len() - 1;
        sh(
            "ip",
            &[
                "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ],
        );
        sh("ip", &["addr", "add", &format!("{here}/30"), "dev", &link]);
        sh("ip", &["link", "set", &link, "up"]);
        // A /32 inside leaves no route back to us: SYNs arrive, nothing
        // answers, and the client times out.
        let prefix = if kind == HostKind::Blackhole { 32 } else { 30 };
        sh(
            "ip",
            &[
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{there}/{prefix}"),
                "dev",
                "eth0",
            ],
        );
        sh("ip", &["-n", &netns, "link", "set", "eth0", "up"]);
        sh("ip", &["-n", &netns, "link", "set", "lo", "up"]);
        if kind == HostKind::Sshd {
            host.sshd = Some(self.start_sshd(&name, &netns, there));
            self.hosts[i] = host;
            self.wait_listening(i);
        }
        i
    }

    fn start_sshd(&self, name: &str, netns: &str, addr: Ipv4Addr) -> Child {
        let key = self.dir.join(format!("hostkey-{name}"));
        keygen(&[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            name,
            "-f",
            key.to_str().unwrap(),
        ]);
        let pubkey = format!("{}.pub", key.display());
        keygen(&[
            "-q",
            "-s",
            self.ca.to_str().unwrap(),
            "-h",
            "-I",
            name,
            "-n",
            &addr.to_string(),
            "-V",
            "-5m:+1h",
            &pubkey,
        ]);
        let d = self.dir.display();
        let cache = self.dir.join(format!("cache-{name}"));
        let config = self.dir.join(format!("sshd_config-{name}"));
        std::fs::write(
            &config,
            format!(
                "ListenAddress {addr}\n\
                 Port 22\n\
                 HostKey {}\n\
                 HostCertificate {}-cert.pub\n\
                 TrustedUserCAKeys {d}/ca.pub\n\
                 PermitRootLogin prohibit-password\n\
                 AuthorizedKeysFile none\n\
                 UsePAM no\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 PidFile {d}/sshd-{name}.pid\n\
                 SetEnv XDG_CACHE_HOME={}\n",
                key.display(),
                key.display(),
                cache.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(self.dir.join(format!("sshd-{name}.log"))).unwrap();
        // `ip netns exec` execs sshd, so the child's pid is sshd's.
        Command::new("ip")
            .args([
                "netns",
                "exec",
                netns,
                SSHD,
                "-D",
                "-e",
                "-f",
                config.to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    fn wait_listening(&mut self, i: usize) {
        let addr = SocketAddr::new(self.hosts[i].addr, 22);
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Some(Ok(Some(status))) = self.hosts[i].sshd.as_mut().map(Child::try_wait) {
                panic!(
                    "sshd for {} exited ({status}):\n{}",
                    self.hosts[i].name,
                    self.sshd_log(i)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "sshd for {} did not listen within 10 s:\n{}",
            self.hosts[i].name,
            self.sshd_log(i)
        );
    }

    pub fn sshd_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("sshd-{}.log", self.hosts[i].name)))
            .unwrap_or_default()
    }

    /// Where `--push` lands on host `i` (its XDG_CACHE_HOME).
    pub fn cache_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("cache-{}", self.hosts[i].name))
    }

    /// `ssh://root@ADDR` for host `i`.
    pub fn url(&self, i: usize) -> String {
        format!("ssh://root@{}", self.hosts[i].addr)
    }

    fn sign_user(&self, key: &Path, validity: &str, principal: &str) -> PathBuf {
        let pubkey = format!("{}.pub", key.display());
        keygen(&[
            "-q",
            "-s",
            self.ca.to_str().unwrap(),
            "-I",
            "linerate-test",
            "-n",
            principal,
            "-V",
            validity,
            &pubkey,
        ]);
        PathBuf::from(format!("{}-cert.pub", key.display()))
    }

    /// A user certificate (on a copy of the user key, so no valid
    /// certificate sits beside it) with this validity ("-V") and principal.
    pub fn user_cert(&self, validity: &str, principal: &str) -> PathBuf {
        let k = self.certs.fetch_add(1, Ordering::Relaxed);
        let key = self.dir.join(format!("user{k}"));
        std::fs::copy(&self.user_key, &key).unwrap();
        std::fs::copy(
            format!("{}.pub", self.user_key.display()),
            format!("{}.pub", key.display()),
        )
        .unwrap();
        self.sign_user(&key, validity, principal)
    }

    fn known_hosts(&self, trust_ca: bool) -> PathBuf {
        let path = self.dir.join(if trust_ca {
            "known_hosts"
        } else {
            "known_hosts-empty"
        });
        let line = if trust_ca {
            let ca = std::fs::read_to_string(format!("{}.pub", self.ca.display())).unwrap();
            format!("@cert-authority * {ca}")
        } else {
            String::new()
        };
        std::fs::write(&path, line).unwrap();
        path
    }

    fn write_ssh_config(&self, path: &Path, key: &Path, cert: &Path, known_hosts: &Path) {
        std::fs::write(
            path,
            format!(
                "Host *\n  User root\n  IdentityFile {}\n  CertificateFile {}\n  \
                 UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  \
                 StrictHostKeyChecking yes\n  IdentitiesOnly yes\n  IdentityAgent none\n",
                key.display(),
                cert.display(),
                known_hosts.display()
            ),
        )
        .unwrap();
    }

    /// Another ssh_config: `certificate` from user_cert() instead of the good
    /// one, and known_hosts with or without the CA line (without it every
    /// host key is unknown).
    pub fn ssh_config_with(
        &self,
        name: &str,
        certificate: Option<&Path>,
        trust_ca: bool,
    ) -> PathBuf {
        let path = self.dir.join(format!("ssh_config-{name}"));
        let (key, cert) = match certificate {
            Some(c) => {
                let s = c.to_str().unwrap();
                (
                    PathBuf::from(s.strip_suffix("-cert.pub").unwrap()),
                    c.to_path_buf(),
                )
            }
            None => (
                self.user_key.clone(),
                PathBuf::from(format!("{}-cert.pub", self.user_key.display())),
            ),
        };
        self.write_ssh_config(&path, &key, &cert, &self.known_hosts(trust_ca));
        path
    }

    /// Kills host `i`'s per-connection sshd processes (not the listener):
    /// every ssh connection to it drops as if the host died.
    pub fn kill_sessions(&self, i: usize) {
        if let Some(pid) = self.hosts[i].sshd_pid() {
            for c in descendants(pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &c.to_string()])
                    .status();
            }
        }
    }

    /// What to check once the lab is dropped.
    pub fn trace(&self) -> LabTrace {
        let mut pids = Vec::new();
        for h in &self.hosts {
            if let Some(p) = h.sshd_pid() {
                pids.push(p);
                pids.extend(descendants(p));
            }
        }
        LabTrace {
            dir: self.dir.clone(),
            pids,
            netns: self.hosts.iter().map(|h| h.netns.clone()).collect(),
            links: self.hosts.iter().map(|h| h.link.clone()).collect(),
        }
    }
}

fn clone_host(h: &SshHost) -> SshHost {
    SshHost {
        name: h.name.clone(),
        addr: h.addr,
        netns: h.netns.clone(),
        kind: h.kind,
        link: h.link.clone(),
        sshd: None,
    }
}

/// Parent pid of every process, read from /proc.
fn ppids() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields after the command name (which may hold spaces).
            let rest = &stat[stat.rfind(')')? + 2..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

pub fn descendants(root: u32) -> Vec<u32> {
    let all = ppids();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &all {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// Processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != me && pid_alive(p))
        .filter_map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then_some((p, cmd))
        })
        .collect()
}

impl Drop for SshLab {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            if let Some(mut sshd) = h.sshd.take() {
                let children = descendants(sshd.id());
                let _ = sshd.kill();
                let _ = sshd.wait();
                for c in children {
                    let _ = Command::new("kill")
                        .args(["-KILL", &c.to_string()])
                        .status();
                }
            }
            let quiet = |args: &[&str]| {
                let _ = Command::new("ip").args(args).stderr(Stdio::null()).status();
            };
            quiet(&["link", "del", &h.link]);
            quiet(&["netns", "del", &h.netns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl LabTrace {
    /// Asserts the lab left nothing: no sshd or ssh process, namespace,
    /// link or file.
    pub fn assert_gone(&self) {
        let dir = self.dir.to_string_lossy().to_string();
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let alive: Vec<u32> = self
                .pids
                .iter()
                .copied()
                .filter(|&p| pid_alive(p))
                .collect();
            let mentioning = processes_mentioning(&dir);
            if alive.is_empty() && mentioning.is_empty() {
                break;
            }
            assert!(
                Instant::now() < end,
                "left running: pids {alive:?}, processes using the lab: {mentioning:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let ns: Vec<String> = std::fs::read_dir("/run/netns")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .collect()
            })
            .unwrap_or_default();
        for n in &self.netns {
            assert!(!ns.contains(n), "namespace {n} left behind");
        }
        let ifs = root_interfaces();
        for l in &self.links {
            assert!(!ifs.contains(l), "link {l} left behind");
        }
        assert!(!self.dir.exists(), "{} left behind", self.dir.display());
    }
}
