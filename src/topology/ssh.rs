//! The ssh transport: one OpenSSH ControlMaster per host per run, commands
//! over it, and choosing (or pushing) the linerate binary a host runs.
//!
//! It runs the system `ssh` client, never an ssh library, so the user's
//! ssh_config, agent, keys and certificates apply exactly as on the command
//! line. It always sets BatchMode=yes and never weakens host-key checking:
//! the only host-key setting it ever makes is StrictHostKeyChecking=accept-new,
//! and only when asked (--ssh-accept-new). Every error names the host and
//! quotes ssh.

mod diagnose;
mod target;

pub use diagnose::{cert_problem, classify, failure_of, parse_cert_listing, CertInfo, Failure};
pub use target::{SshTarget, TargetError};

use super::error::{err, fail, Result, TopologyError};
use crate::model::error::{Context, Step};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::net::IpAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long past ConnectTimeout open() waits for the login itself.
const LOGIN_SLACK: Duration = Duration::from_secs(3);

/// How to run ssh, from --ssh-* flags or a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshOptions {
    /// `ssh -F FILE` (--ssh-config).
    pub config: Option<PathBuf>,
    /// `ssh -o K=V`, in order (--ssh-option).
    pub options: Vec<(String, String)>,
    /// StrictHostKeyChecking=accept-new (--ssh-accept-new); otherwise the
    /// user's own setting stays.
    pub accept_new: bool,
    /// ConnectTimeout; open() gives up a little after it.
    pub connect_timeout: Duration,
    /// The linerate to run on hosts (--remote-binary); default "linerate"
    /// on the host's PATH.
    pub remote_binary: Option<String>,
    /// Copy this binary to hosts that lack it or run another version (--push).
    pub push: bool,
    /// What --push copies; `None` is the running executable. (Tests, whose
    /// running executable is the test harness, name the built linerate.)
    pub local_binary: Option<PathBuf>,
    /// The config or options come from a plan the user did not trust
    /// (`--trust-plan`): every ssh gets, first (ssh keeps the first value
    /// it sees), the values in [`UNTRUSTED_OVERRIDES`], so no spelling in
    /// the plan's config runs a local command or weakens host-key checking.
    pub untrusted: bool,
}

/// What an untrusted plan's ssh runs with, whatever its config says: no
/// proxy or known-hosts command, no local command, no PKCS#11 or security
/// key library but the built-in one. (Its known-hosts files stay its own:
/// a lab's plan names the file that holds its hosts' keys; one that can
/// hold none, `/dev/null` in any spelling, is refused by the plan check.)
pub const UNTRUSTED_OVERRIDES: [(&str, &str); 5] = [
    ("ProxyCommand", "none"),
    ("KnownHostsCommand", "none"),
    ("PermitLocalCommand", "no"),
    ("PKCS11Provider", "none"),
    ("SecurityKeyProvider", "internal"),
];

impl Default for SshOptions {
    fn default() -> Self {
        SshOptions {
            config: None,
            options: Vec::new(),
            accept_new: false,
            connect_timeout: Duration::from_secs(10),
            remote_binary: None,
            push: false,
            local_binary: None,
            untrusted: false,
        }
    }
}

/// An `--ssh-option` linerate will not pass to ssh.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// It would weaken host-key checking, allow prompts or take the
    /// connection out of linerate's hands.
    #[error(
        "--ssh-option {key}={value} is not allowed: {why}; linerate never turns host-key \
         checking off, always runs ssh with BatchMode=yes and manages its own \
         ControlMaster; drop this option (for new hosts use --ssh-accept-new, which \
         records their keys in your known_hosts)"
    )]
    Refused {
        key: String,
        value: String,
        why: &'static str,
    },
    #[error("--ssh-option {key:?}={value:?}: write KEY=VALUE, e.g. Port=2222")]
    Malformed { key: String, value: String },
}

/// Keys of ssh options that run a local command or load local code: a
/// plan may set them only when the user trusts it (`--trust-plan`).
pub const COMMAND_KEYS: [&str; 8] = [
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "pkcs11provider",
    "securitykeyprovider",
    "include",
    "match",
];

/// Splits one `ssh -o` argument (or ssh_config line) the way ssh reads it:
/// the key ends at the first `=` or blank, one `=` with blanks around it
/// may separate it from the value, and the value's words are unquoted
/// (`"no"` and `'no'` are `no`; a backslash escapes the next character).
/// Returns the key as written and the value's words.
pub fn split_option(text: &str) -> Option<(String, Vec<String>)> {
    option_pair(text).map(|(k, v)| (k, unquote_words(&v)))
}

/// The key and the value's text (quotes kept, for ssh to read) of one
/// `ssh -o` argument: `Key=Value`, `Key Value` or `Key = "Value"`.
/// `None` without a key or a value.
pub fn option_pair(text: &str) -> Option<(String, String)> {
    let t = text.trim();
    let end = t.find(|c: char| c == '=' || c.is_whitespace())?;
    let (key, rest) = t.split_at(end);
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    if key.is_empty() || rest.is_empty() {
        return None;
    }
    Some((key.to_string(), rest.to_string()))
}

/// ssh's word splitting: blanks separate words, quotes group them and are
/// removed, a backslash takes the next character as it is.
pub fn unquote_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\\') => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Why one option (normalised: key in lower case, value unquoted) would
/// weaken host-key checking, allow prompts or take the connection out of
/// linerate's hands; `None` when it does not.
pub fn weakens(key: &str, words: &[String]) -> Option<&'static str> {
    let first = words
        .first()
        .map(|w| w.to_ascii_lowercase())
        .unwrap_or_default();
    match key {
        "stricthostkeychecking" if matches!(first.as_str(), "no" | "off" | "false") => {
            Some("it turns host-key checking off")
        }
        "batchmode" if first != "yes" => Some("linerate always runs ssh with BatchMode=yes"),
        "controlmaster" | "controlpath" | "controlpersist" => {
            Some("linerate manages its own ControlMaster")
        }
        // A known-hosts file that is always empty: with accept-new (ours, the
        // user's ssh_config or an option) every key would be accepted.
        "userknownhostsfile" | "globalknownhostsfile"
            if !words.is_empty() && words.iter().all(|w| never_holds_keys(w)) =>
        {
            Some("a known-hosts file of /dev/null accepts every host key with accept-new")
        }
        _ => None,
    }
}

/// A known-hosts file that can never hold a key: `none`, or a path that
/// is a device or resolves to one (`/dev/null`, `//dev/null`,
/// `/dev/../dev/null`, a link to it).
fn never_holds_keys(w: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    if w.eq_ignore_ascii_case("none") {
        return true;
    }
    let collapsed: String = {
        // Repeated slashes are one, as the kernel reads them.
        let mut out = String::new();
        for c in w.chars() {
            if !(c == '/' && out.ends_with('/')) {
                out.push(c);
            }
        }
        out
    };
    if collapsed.starts_with("/dev/") {
        return true;
    }
    match std::fs::metadata(w) {
        Ok(m) => {
            let t = m.file_type();
            t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
        }
        Err(_) => false,
    }
}

impl SshOptions {
    /// Refuses options that would weaken host-key checking, allow prompts,
    /// or take the connection out of linerate's hands. Values are read the
    /// way ssh reads them (`StrictHostKeyChecking="no"` is `no`).
    pub fn check(&self) -> Result<(), OptionError> {
        for (k, v) in &self.options {
            let malformed = || OptionError::Malformed {
                key: k.clone(),
                value: v.clone(),
            };
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(malformed());
            }
            let words = unquote_words(v);
            if let Some(why) = weakens(&k.to_ascii_lowercase(), &words) {
                return Err(OptionError::Refused {
                    key: k.clone(),
                    value: v.clone(),
                    why,
                });
            }
        }
        Ok(())
    }

    /// The address ssh would connect to for `target`: the host itself when
    /// it is one, else the `HostName` the user's ssh configuration gives it
    /// (`ssh -G` prints the configuration without connecting). `None` for
    /// a name that only DNS resolves, or when ssh cannot say.
    pub fn address_of(&self, target: &SshTarget) -> Option<IpAddr> {
        if let Ok(ip) = target.host.parse() {
            return Some(ip);
        }
        self.resolved(target)?
            .lines()
            .find_map(|l| l.strip_prefix("hostname "))
            .and_then(|h| h.trim().parse().ok())
    }

    /// The configuration ssh would use for `target` (`ssh -G`: evaluated,
    /// nothing connected), with linerate's options first as every ssh
    /// gets them. `None` when ssh cannot say.
    pub fn resolved(&self, target: &SshTarget) -> Option<String> {
        let mut cmd = Command::new("ssh");
        cmd.arg("-G");
        if let Some(f) = &self.config {
            cmd.arg("-F").arg(f);
        }
        for (k, v) in self.overrides() {
            cmd.args(["-o", &format!("{k}={v}")]);
        }
        for (k, v) in &self.options {
            cmd.args(["-o", &format!("{k}={v}")]);
        }
        let out = cmd
            .args(target.destination_args())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Options that come before the user's and the plan's (ssh keeps the
    /// first value): accept-new when asked, and for an untrusted plan
    /// [`UNTRUSTED_OVERRIDES`] and strict host-key checking.
    fn overrides(&self) -> Vec<(&'static str, &'static str)> {
        let mut o = Vec::new();
        if self.accept_new {
            o.push(("StrictHostKeyChecking", "accept-new"));
        } else if self.untrusted {
            o.push(("StrictHostKeyChecking", "yes"));
        }
        if self.untrusted {
            o.extend(UNTRUSTED_OVERRIDES);
        }
        o
    }

    /// Options every ssh invocation gets, before the destination. ssh keeps
    /// the first value it sees for an option, so ours that must win come
    /// first, the user's next, and our defaults they may override last.
    fn args(&self, control_path: &Path) -> Vec<String> {
        let mut a: Vec<String> = vec!["-T".into(), "-x".into(), "-a".into()];
        let mut opt = |k: &str, v: &str| a.extend(["-o".into(), format!("{k}={v}")]);
        opt("BatchMode", "yes");
        opt("ControlPath", &control_path.to_string_lossy());
        opt("ControlPersist", "no");
        opt("ClearAllForwardings", "yes");
        for (k, v) in self.overrides() {
            opt(k, v);
        }
        for (k, v) in &self.options {
            opt(k, v);
        }
        opt(
            "ConnectTimeout",
            &self.connect_timeout.as_secs().max(1).to_string(),
        );
        opt("ServerAliveInterval", "5");
        opt("ServerAliveCountMax", "3");
        if let Some(f) = &self.config {
            a.extend(["-F".into(), f.to_string_lossy().into_owned()]);
        }
        a
    }
}

/// A private (0700) directory for ControlPath sockets and master logs,
/// removed on drop. Short, since a socket path must fit in 108 bytes.
pub struct ControlDir {
    path: PathBuf,
    next: AtomicUsize,
}

impl ControlDir {
    pub fn new() -> Result<ControlDir> {
        let base = std::env::temp_dir();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for i in 0..100u32 {
            let path = base.join(format!("lr-ssh-{}-{:x}", std::process::id(), nanos ^ i));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    return Ok(ControlDir {
                        path,
                        next: AtomicUsize::new(0),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Step::new(
                        format!(
                            "creating a directory for ssh control sockets in {}",
                            base.display()
                        ),
                        e,
                    )
                    .into())
                }
            }
        }
        fail!(
            "creating a directory for ssh control sockets in {}: every name taken",
            base.display()
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn next_name(&self) -> String {
        format!("h{}", self.next.fetch_add(1, Ordering::Relaxed))
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One ControlMaster connection to a host; commands run over it.
pub struct SshSession {
    target: SshTarget,
    base_args: Vec<String>,
    control_path: PathBuf,
    log: PathBuf,
    master: Option<Child>,
    connect_time: Duration,
}

impl SshSession {
    /// Starts the master and waits until it is logged in, or fails with a
    /// message naming the host and quoting ssh. Returns within the connect
    /// timeout plus a few seconds whatever the network does.
    pub fn open(target: &SshTarget, opts: &SshOptions, dir: &ControlDir) -> Result<SshSession> {
        opts.check().map_err(|e| err!("{target}: {e}"))?;
        let start = Instant::now();
        let name = dir.next_name();
        let control_path = dir.path.join(&name);
        let log = dir.path.join(format!("{name}.log"));
        let base_args = opts.args(&control_path);
        let log_file = File::create(&log)
            .with_context(|| format!("{target}: creating the ssh log {}", log.display()))?;
        let mut cmd = Command::new("ssh");
        cmd.args(&base_args)
            .args(["-M", "-N"])
            .args(target.destination_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        crate::sys::die_with_parent(&mut cmd);
        // Out of the terminal's process group, like the agents it carries:
        // a Ctrl-C must not close the connection under a stopping run.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let master = cmd.spawn().map_err(|e| {
            err!("{target}: cannot run ssh ({e}); linerate needs the OpenSSH client: install openssh-client")
        })?;
        let mut session = SshSession {
            target: target.clone(),
            base_args,
            control_path,
            log,
            master: Some(master),
            connect_time: Duration::ZERO,
        };
        let deadline = start + opts.connect_timeout + LOGIN_SLACK;
        loop {
            let exited = match session.master.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(status.to_string()),
                Some(Err(e)) => Some(e.to_string()),
                _ => None,
            };
            if let Some(status) = exited {
                session.master = None;
                return Err(TopologyError::Failed(session.failure(&status)));
            }
            if session.control_path.exists() && session.check() {
                session.connect_time = start.elapsed();
                return Ok(session);
            }
            if Instant::now() >= deadline {
                session.close();
                let said = session.stderr();
                return Err(err!(
                    "{target}: ssh did not log in within {:.0} s ({}); check that the host is \
                     up and sshd answers, or raise the connect timeout",
                    (opts.connect_timeout + LOGIN_SLACK).as_secs_f64(),
                    quote_or_nothing(&said)
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// How long open() took to log in.
    pub fn connect_time(&self) -> Duration {
        self.connect_time
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// What the master has printed so far (its stderr).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A Command running `argv` on the host over the master connection.
    /// Arguments are quoted for the remote shell; stdio is the caller's.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(&self.base_args)
            .args(["-o", "ControlMaster=no"])
            .args(self.target.destination_args())
            .arg("--")
            .arg(shell_join(argv));
        cmd
    }

    /// Runs a short command with no input and collects its output.
    fn run(&self, argv: &[&str]) -> Result<std::process::Output> {
        Ok(self
            .command(argv)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("{}: running ssh", self.target))?)
    }

    /// The linerate to run on this host: `remote_binary` (default
    /// "linerate") when it is this version, otherwise — with `push` — a copy
    /// of this binary in the host's per-user cache. Returns its remote path.
    pub fn resolve_binary(&self, opts: &SshOptions) -> Result<String> {
        let t = &self.target;
        let ours = env!("CARGO_PKG_VERSION");
        let bin = opts.remote_binary.as_deref().unwrap_or("linerate");
        let out = self.run(&[bin, "--version"])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let problem = match out.status.code() {
            Some(255) => return Err(TopologyError::Failed(classify(t, &stderr))),
            Some(0) => match parse_version(&String::from_utf8_lossy(&out.stdout)) {
                Some(v) if v == ours => return Ok(bin.to_string()),
                Some(v) => format!("host {t} runs linerate {v} ({bin}), this controller is {ours}"),
                None => format!(
                    "host {t}: {bin} --version printed {:?}, not a linerate version",
                    String::from_utf8_lossy(&out.stdout).trim()
                ),
            },
            code => {
                let what = if opts.remote_binary.is_some() {
                    format!("host {t} cannot run {bin}")
                } else {
                    format!("host {t} has no linerate on its PATH")
                };
                let status = code.map_or("killed by a signal".to_string(), |c| format!("exit {c}"));
                format!("{what} ({status}, {})", quote_or_nothing(&stderr))
            }
        };
        if !opts.push {
            fail!(
                "{problem}; install linerate {ours} there, name it with --remote-binary PATH, \
                 or pass --push to copy this binary to the host"
            );
        }
        let exe = match &opts.local_binary {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("finding this linerate executable")?,
        };
        Ok(self
            .push(&exe)
            .with_context(|| format!("{problem}, so pushing {}", exe.display()))?)
    }

    /// Copies `exe` (a linerate of this version) to `${XDG_CACHE_HOME:-$HOME/.cache}/linerate/<sha256>/linerate`
    /// unless it is already there, and checks that it runs.
    pub fn push(&self, exe: &Path) -> Result<String> {
        let t = &self.target;
        let (hex, len) =
            sha256_file(exe).with_context(|| format!("reading {} to push it", exe.display()))?;
        let locate = format!(
            "f=\"${{XDG_CACHE_HOME:-$HOME/.cache}}/linerate/{hex}/linerate\"; \
             if [ -x \"$f\" ]; then echo \"have $f\"; else echo \"need $f\"; fi"
        );
        let out = self.run(&["sh", "-c", &locate])?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let path = match stdout.trim().split_once(' ') {
            Some(("have", p)) if out.status.success() => p.to_string(),
            Some(("need", p)) if out.status.success() => {
                self.upload(exe, p, len)?;
                p.to_string()
            }
            _ => fail!(
                "{t}: finding the cache directory failed ({}, {})",
                out.status,
                quote_or_nothing(&String::from_utf8_lossy(&out.stderr))
            ),
        };
        let out = self.run(&[&path, "--version"])?;
        let v = parse_version(&String::from_utf8_lossy(&out.stdout));
        if !out.status.success() || v.as_deref() != Some(env!("CARGO_PKG_VERSION")) {
            fail!(
                "{t}: the pushed binary {path} does not run there ({}, {}); the host may \
                 need a linerate built for its own system: install one and name it with \
                 --remote-binary PATH",
                out.status,
                quote_or_nothing(&String::from_utf8_lossy(&out.stderr))
            );
        }
        Ok(path)
    }

    /// Streams `exe` to `path` on the host: a temporary name, size checked,
    /// chmod 755, renamed, so a broken transfer never leaves a runnable file.
    fn upload(&self, exe: &Path, path: &str, len: u64) -> Result<()> {
        let t = &self.target;
        let script = format!(
            "set -e; f=\"$1\"; mkdir -p \"${{f%/*}}\"; t=\"$f.tmp.$$\"; trap 'rm -f \"$t\"' EXIT; \
             cat > \"$t\"; n=$(wc -c < \"$t\"); \
             if [ \"$n\" -ne {len} ]; then echo \"received $n of {len} bytes\" >&2; exit 1; fi; \
             chmod 755 \"$t\"; mv -f \"$t\" \"$f\"; trap - EXIT"
        );
        let mut child = self
            .command(&["sh", "-c", &script, "sh", path])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("{t}: running ssh"))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| err!("ssh stdin missing"))?;
        let mut file = File::open(exe).with_context(|| format!("opening {}", exe.display()))?;
        // A write error means the remote side stopped reading; its stderr
        // and exit status below say why.
        let copied = std::thread::spawn(move || std::io::copy(&mut file, &mut stdin));
        let out = child
            .wait_with_output()
            .with_context(|| format!("{t}: waiting for ssh"))?;
        let _ = copied.join();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => Ok(()),
            Some(255) => Err(TopologyError::Failed(classify(t, &stderr))),
            _ => fail!(
                "{t}: writing {path} failed ({}, {}); check that the cache directory is \
                 writable and has room, or set XDG_CACHE_HOME there",
                out.status,
                quote_or_nothing(&stderr)
            ),
        }
    }

    /// True when `ssh -O check` finds the master logged in.
    fn check(&self) -> bool {
        Command::new("ssh")
            .args(&self.base_args)
            .args(["-O", "check"])
            .args(self.target.destination_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    /// The message for a master that exited before logging in.
    fn failure(&self, status: &str) -> String {
        let stderr = self.stderr();
        let mut msg = classify(&self.target, &stderr);
        if failure_of(&stderr).0 == Failure::AuthRefused {
            for finding in self.certificate_findings() {
                msg.push_str("; ");
                msg.push_str(&finding);
            }
        }
        if stderr.trim().is_empty() {
            msg.push_str(&format!(" [ssh {status}]"));
        }
        msg
    }

    /// Certificates ssh offers for this host that cannot work now: expired,
    /// not yet valid, or not naming the user. ssh itself does not say (the
    /// server only answers "Permission denied").
    fn certificate_findings(&self) -> Vec<String> {
        let mut cmd = Command::new("ssh");
        cmd.args(&self.base_args)
            .arg("-G")
            .args(self.target.destination_args());
        let Ok(out) = cmd.stdin(Stdio::null()).stderr(Stdio::null()).output() else {
            return Vec::new();
        };
        let config = String::from_utf8_lossy(&out.stdout);
        let home = std::env::var("HOME").unwrap_or_default();
        let expand = |p: &str| match p.strip_prefix("~/") {
            Some(rest) => format!("{home}/{rest}"),
            None => p.to_string(),
        };
        let mut user = None;
        let mut certs: Vec<String> = Vec::new();
        for line in config.lines() {
            match line.split_once(' ') {
                Some(("user", u)) => user = Some(u.to_string()),
                Some(("certificatefile", f)) => certs.push(expand(f)),
                Some(("identityfile", f)) => certs.push(format!("{}-cert.pub", expand(f))),
                _ => {}
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        certs.sort();
        certs.dedup();
        certs
            .iter()
            .filter(|c| !c.contains('%') && Path::new(c).is_file())
            .filter_map(|c| {
                let out = Command::new("ssh-keygen")
                    .args(["-L", "-f", c])
                    .env("TZ", "UTC")
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .output()
                    .ok()?;
                let info = parse_cert_listing(&String::from_utf8_lossy(&out.stdout))?;
                let why = cert_problem(&info, now, user.as_deref())?;
                Some(format!("your certificate {c} {why} (ssh-keygen -L -f {c})"))
            })
            .collect()
    }

    /// Ends the master (`ssh -O exit`, then kill) and reaps it. Idempotent.
    pub fn close(&mut self) {
        let Some(mut master) = self.master.take() else {
            return;
        };
        if let Ok(mut exit) = Command::new("ssh")
            .args(&self.base_args)
            .args(["-O", "exit"])
            .args(self.target.destination_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            wait_for(&mut exit, Duration::from_secs(2));
        }
        wait_for(&mut master, Duration::from_secs(1));
    }
}

impl Drop for SshSession {
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits up to `limit` for a child to exit, then kills it; always reaps.
fn wait_for(child: &mut Child, limit: Duration) {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn quote_or_nothing(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        "ssh printed nothing".into()
    } else {
        let tail = lines.len().saturating_sub(3);
        format!("ssh said: \"{}\"", lines[tail..].join(" / "))
    }
}

/// "linerate 0.1.0" -> "0.1.0".
fn parse_version(stdout: &str) -> Option<String> {
    let first = stdout.lines().next()?.trim();
    let v = first.strip_prefix("linerate ")?.trim();
    (!v.is_empty() && !v.contains(' ')).then(|| v.to_string())
}

/// Joins words for a POSIX remote shell; anything beyond plain characters
/// goes in single quotes.
pub fn shell_join(argv: &[&str]) -> String {
    argv.iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
            if plain {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    use std::fmt::Write as _;
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    let hex = h
        .finalize()
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
    Ok((hex, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stderr::errln;

    /// Whatever an untrusted plan's config says, in any spelling, OpenSSH's
    /// own reading (`ssh -G`) has no command to run and checks host keys.
    #[test]
    fn untrusted_configs_lose_to_the_overrides_as_ssh_reads_them() {
        if Command::new("ssh").arg("-V").output().is_err() {
            errln!("SKIP: ssh is not installed (apt-get install openssh-client)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("lr-ssh-g-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("config");
        std::fs::write(
            &cfg,
            "Proxy\"Command\" touch /tmp/x\n\"KnownHostsCommand\" /bin/true\n\
             PermitLocalCommand=\"yes\"\nLocalCommand touch /tmp/y\nPKCS11Provider /tmp/x.so\n\
             SecurityKeyProvider /tmp/sk.so\nStrictHostKeyChecking no\n",
        )
        .unwrap();
        let target = SshTarget::parse_url("ssh://root@lab-host").unwrap();
        let plain = SshOptions {
            config: Some(cfg.clone()),
            ..SshOptions::default()
        };
        let seen = plain.resolved(&target).unwrap();
        assert!(
            seen.contains("proxycommand touch"),
            "the file is read: {seen}"
        );
        let o = SshOptions {
            untrusted: true,
            ..plain
        };
        let seen = o.resolved(&target).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // A LocalCommand may stay set: PermitLocalCommand no keeps it from running.
        for absent in ["proxycommand", "knownhostscommand", "pkcs11provider"] {
            assert!(
                !seen.lines().any(|l| l.starts_with(&format!("{absent} "))),
                "{absent}: {seen}"
            );
        }
        for present in [
            "permitlocalcommand no",
            "stricthostkeychecking true",
            "securitykeyprovider internal",
        ] {
            assert!(seen.lines().any(|l| l == present), "{present}: {seen}");
        }
    }

    #[test]
    fn refuses_weakening_options() {
        let mut o = SshOptions::default();
        o.options.push(("Port".into(), "2222".into()));
        assert!(o.check().is_ok());
        for (k, v) in [
            ("StrictHostKeyChecking", "no"),
            ("stricthostkeychecking", "off"),
            ("BatchMode", "no"),
            ("ControlPath", "/tmp/x"),
            ("UserKnownHostsFile", "//dev/null"),
            ("UserKnownHostsFile", "/dev/../dev/null"),
            ("GlobalKnownHostsFile", "\"/dev/null\""),
            ("UserKnownHostsFile", "/dev/zero"),
        ] {
            o.options = vec![(k.into(), v.into())];
            assert!(
                o.check()
                    .unwrap_err()
                    .to_string()
                    .contains("never turns host-key"),
                "{k}"
            );
        }
    }

    #[test]
    fn ours_come_first_and_accept_new_only_when_asked() {
        let o = SshOptions::default();
        let a = o.args(Path::new("/tmp/c/h0")).join(" ");
        assert!(a.contains("-o BatchMode=yes"));
        assert!(!a.contains("StrictHostKeyChecking"));
        assert!(a.contains("-o ConnectTimeout=10"));
        let o = SshOptions {
            accept_new: true,
            options: vec![("ConnectTimeout".into(), "3".into())],
            ..SshOptions::default()
        };
        let a = o.args(Path::new("/tmp/c/h0")).join(" ");
        assert!(a.contains("StrictHostKeyChecking=accept-new"));
        assert!(a.find("ConnectTimeout=3") < a.find("ConnectTimeout=10"));
    }

    #[test]
    fn quotes_for_the_remote_shell() {
        assert_eq!(shell_join(&["echo", "hi"]), "echo hi");
        assert_eq!(shell_join(&["a b", "", "it's"]), "'a b' '' 'it'\\''s'");
        assert_eq!(shell_join(&["$HOME;`x`"]), "'$HOME;`x`'");
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("linerate 0.1.0\n").as_deref(), Some("0.1.0"));
        assert_eq!(parse_version("bash: linerate: command not found"), None);
        assert_eq!(parse_version(""), None);
    }
}
