//! Plans are code: a plan's `[ssh]` table could make `linerate run` start
//! local commands (ProxyCommand, LocalCommand, KnownHostsCommand, a
//! PKCS#11 library…) with the controller's rights, root included. Unless
//! the user says they trust the plan (`--trust-plan`), such options, and
//! an ssh config that sets them or that others may rewrite, are refused
//! before anything runs, in every spelling OpenSSH accepts (read wide:
//! quotes anywhere, `=`, any case). Whatever the check misses, ssh is
//! told first (ssh keeps the first value) that there is no proxy,
//! known-hosts or local command and that host keys are checked
//! ([`crate::topology::ssh::UNTRUSTED_OVERRIDES`]). The command line stays
//! the user's own choice.

use super::Plan;
use crate::topology::ssh::{weakens, COMMAND_KEYS};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

const TRUST: &str = "it would run a command on this host with linerate's rights when the plan \
                     runs (plans are code); if you wrote or checked this plan, pass --trust-plan";

/// Why a plan was refused before anything ran, or its ssh config could
/// not be checked or copied. Each message is whole (it names what it is
/// about and the fix); `In` says which file a nested one is about.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A setting an untrusted plan may not have.
    #[error("{0}")]
    Refused(String),
    /// Reading, creating or writing `what` failed.
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    /// `inner`, about the file or setting `what`.
    #[error("{what}: {inner}")]
    In {
        what: String,
        inner: Box<TrustError>,
    },
}

type Result<T> = std::result::Result<T, TrustError>;

macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err(TrustError::Refused(format!($($arg)*)))
    };
}

/// An I/O error with what was being done.
fn io(what: String) -> impl FnOnce(std::io::Error) -> TrustError {
    move |error| TrustError::Io { what, error }
}

/// `e` as being about `what`.
fn about(what: String) -> impl FnOnce(TrustError) -> TrustError {
    move |e| TrustError::In {
        what,
        inner: Box::new(e),
    }
}

/// Refuses a plan whose `[ssh]` would run local commands; `path` is the
/// plan's file (its config is relative to it). A plan's ssh config is read
/// once, checked, and copied into a private file (owner-only, in an
/// owner-only directory): the copy is what ssh reads, so the file cannot
/// change between the check and ssh's own read. Returns the copy.
pub fn check(plan: &Plan, path: &Path) -> Result<Option<PathBuf>> {
    // A plan may widen where traffic goes only when trusted: inside the
    // benchmarking ranges it widens nothing.
    let ranges = crate::netops::reach::benchmark_ranges();
    for c in &plan.allow_target {
        if !ranges
            .iter()
            .any(|r| r.prefix <= c.prefix && r.contains(c.addr))
        {
            refuse!(
                "{}: allow_target {}/{} lets tests send outside the benchmarking ranges \
                 (198.18.0.0/15, 2001:2::/48); a plan may do that only when you trust it: \
                 pass --trust-plan, or name the range yourself with --allow-target",
                plan.file,
                c.addr,
                c.prefix
            );
        }
    }
    for o in &plan.ssh.options {
        if let Some(key) = command_key(o) {
            refuse!("{}: [ssh] options: '{o}' sets {key}: {TRUST}", plan.file);
        }
    }
    let Some(c) = &plan.ssh.config else {
        return Ok(None);
    };
    let p = path.parent().unwrap_or(Path::new(".")).join(c);
    let text = check_config(&p).map_err(about(format!("{}: [ssh] config = \"{c}\"", plan.file)))?;
    private_copy(&text).map(Some)
}

/// The words of one ssh_config line as OpenSSH could read them, taken
/// wide: quotes and backslashes are dropped wherever they are (OpenSSH
/// removes them inside a keyword too: `Proxy"Command"` is ProxyCommand)
/// and `=` separates like a blank. Lower case. A checker may refuse more
/// than ssh would run, never less.
fn wide_words(line: &str) -> Vec<String> {
    line.chars()
        .filter(|c| !matches!(c, '"' | '\'' | '\\'))
        .collect::<String>()
        .split(|c: char| c == '=' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect()
}

/// The option's key when it is one that runs a local command, loads code,
/// reads more configuration or hands the connection to another command
/// (`Match` only with `exec`).
fn command_key(line: &str) -> Option<String> {
    let words = wide_words(line);
    let key = words.first()?;
    if key.starts_with('#') {
        return None;
    }
    if key == "proxyjump" {
        return Some(
            "ProxyJump (it runs a proxy; linerate turns proxies off for untrusted plans)".into(),
        );
    }
    if !COMMAND_KEYS.contains(&key.as_str()) {
        return None;
    }
    if key == "match" && !words[1..].iter().any(|w| w.contains("exec")) {
        return None;
    }
    Some(line.split_whitespace().next().unwrap_or(key).to_string())
}

/// An ssh config a plan names must be one only its owner (root or this
/// user) can write, and set nothing that runs a local command or weakens
/// host-key checking. The file is opened once and checked and read through
/// that one handle. Returns its text.
fn check_config(p: &Path) -> Result<String> {
    let mut f = std::fs::File::open(p).map_err(io(format!("reading {}", p.display())))?;
    let meta = f
        .metadata()
        .map_err(io(format!("reading {}", p.display())))?;
    if !meta.is_file() {
        refuse!("{} is not a regular file", p.display());
    }
    // The owner of /proc/self is this process's effective user.
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if meta.mode() & 0o022 != 0 {
        refuse!(
            "{} is writable by others (mode {:o}): whoever can write it decides what ssh runs; \
             {TRUST}, or chmod go-w it",
            p.display(),
            meta.mode() & 0o7777
        );
    }
    if meta.uid() != 0 && Some(meta.uid()) != me {
        refuse!(
            "{} belongs to another user (uid {}), who decides what ssh runs; {TRUST}",
            p.display(),
            meta.uid()
        );
    }
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(io(format!("reading {}", p.display())))?;
    check_config_text(&text).map_err(about(p.display().to_string()))?;
    Ok(text)
}

/// Refuses an ssh config's text that sets anything that runs a local
/// command, reads more configuration, or weakens host-key checking (the
/// content half of [`check_config`]; fuzzed against `ssh -G`).
pub fn check_config_text(text: &str) -> Result<()> {
    for (n, line) in text.lines().enumerate() {
        if let Some(key) = command_key(line) {
            refuse!("line {}: {key}: {TRUST}", n + 1);
        }
        let words = wide_words(line);
        if let Some((key, rest)) = words.split_first() {
            // An empty global list only trusts fewer keys (a lab's config
            // sets it so only its own known-hosts file counts).
            if key == "globalknownhostsfile" {
                continue;
            }
            if let Some(why) = weakens(key, rest) {
                refuse!(
                    "line {}: {}: {why}; linerate never weakens host-key checking for a plan \
                     (if you wrote or checked this plan, pass --trust-plan)",
                    n + 1,
                    line.trim()
                );
            }
        }
    }
    Ok(())
}

/// Private copies of plans' ssh configs, removed by [`remove_copies`].
static COPIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Writes `text` to a new owner-only file in a new owner-only directory
/// (created exclusively: nothing planted there first is used).
fn private_copy(text: &str) -> Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("lr-plan-{}-{nanos:x}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(io(format!("creating {}", dir.display())))?;
    if let Ok(mut c) = COPIES.lock() {
        c.push(dir.clone());
    }
    let file = dir.join("ssh_config");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .map_err(io(format!("creating {}", file.display())))?;
    f.write_all(text.as_bytes())
        .map_err(io(format!("writing {}", file.display())))?;
    Ok(file)
}

/// Removes the private copies this process made (at exit).
pub fn remove_copies() {
    if let Ok(mut c) = COPIES.lock() {
        for d in c.drain(..) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn command_keys_are_found_however_written() {
        for o in [
            "ProxyCommand=nc %h %p",
            "proxycommand nc %h %p",
            "LocalCommand = touch /tmp/x",
            "KnownHostsCommand=/bin/x %H",
            "PermitLocalCommand=yes",
            "PKCS11Provider=/tmp/evil.so",
            "Include /tmp/other",
            "Match exec \"touch /tmp/x\"",
        ] {
            assert!(command_key(o).is_some(), "{o}");
        }
        for o in [
            "Proxy\"Command\" touch /tmp/x",
            "\"ProxyCommand\" touch /tmp/x",
            "  proxycommand=touch",
            "Match exec=\"touch /tmp/x\"",
            "\"Match\" exec \"touch /tmp/x\"",
            "Match host x !\"exec\" y",
            "\"Include\" /tmp/x",
            "\"PermitLocalCommand\" yes",
            "Local\\Command x",
            "ProxyJump bastion",
        ] {
            assert!(command_key(o).is_some(), "{o}");
        }
        assert!(command_key("# ProxyCommand x").is_none());
        assert!(command_key("Match host lab*").is_none());
        assert!(command_key("Port=2222").is_none());
        assert!(command_key("ServerAliveInterval 5").is_none());
    }

    /// The checked text is what ssh reads: a private copy (0600 in a 0700
    /// directory), unchanged when the plan's own file changes afterwards.
    #[test]
    fn ssh_reads_a_private_copy_of_what_was_checked() {
        let dir = std::env::temp_dir().join(format!("lr-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("ssh_config");
        std::fs::write(&cfg, "Host *\n  Port 2222\n").unwrap();
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = dir.join("plan.toml");
        let text = "[ssh]\nconfig = \"ssh_config\"\n[hosts.a]\nssh = \"root@198.18.0.9\"\n\
                    [hosts.b]\nnetns = \"x\"\naddress = \"198.18.0.2\"\n[[test]]\n\
                    kind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n";
        let plan = crate::plan::parse("plan.toml", text).unwrap();
        let copy = check(&plan, &path).unwrap().unwrap();
        assert_ne!(copy, cfg);
        assert_eq!(
            std::fs::read_to_string(&copy).unwrap(),
            "Host *\n  Port 2222\n"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!((mode(&copy), mode(copy.parent().unwrap())), (0o600, 0o700));
        // Swapped after the check: ssh still reads the benign copy.
        std::fs::write(&cfg, "ProxyCommand touch /tmp/pwned\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&copy).unwrap(),
            "Host *\n  Port 2222\n"
        );
        // The same file, now hostile, or weakening host keys, is refused.
        assert!(check(&plan, &path).is_err());
        for line in [
            "StrictHostKeyChecking \"no\"",
            "UserKnownHostsFile=//dev/null",
        ] {
            std::fs::write(&cfg, format!("{line}\n")).unwrap();
            let e = format!("{:#}", check(&plan, &path).unwrap_err());
            assert!(e.contains("--trust-plan"), "{line}: {e}");
        }
        std::fs::write(
            &cfg,
            "GlobalKnownHostsFile /dev/null\nUserKnownHostsFile /root/lab_known\n",
        )
        .unwrap();
        assert!(check(&plan, &path).is_ok());
        // A plan that widens where traffic may go needs trust too.
        let allowing = |cidr: &str| {
            let rest = text.replace("[ssh]\nconfig = \"ssh_config\"\n", "");
            crate::plan::parse("plan.toml", &format!("allow_target = [\"{cidr}\"]\n{rest}"))
                .unwrap()
        };
        let wide = allowing("0.0.0.0/0");
        let e = format!("{:#}", check(&wide, &path).unwrap_err());
        assert!(
            e.contains("allow_target 0.0.0.0/0") && e.contains("--trust-plan"),
            "{e}"
        );
        let narrow = allowing("198.18.4.0/24");
        assert!(check(&narrow, &path).unwrap().is_none());
        remove_copies();
        assert!(!copy.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
