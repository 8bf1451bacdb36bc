//! Plans are code: a plan's `[ssh]` table could make `linerate run` start
//! local commands (ProxyCommand, LocalCommand, KnownHostsCommand, a
//! PKCS#11 library…) with the controller's rights, root included. Unless
//! the user says they trust the plan (`--trust-plan`), such options, and
//! an ssh config that sets them or that others may rewrite, are refused
//! before anything runs. The command line stays the user's own choice.

use crate::plan::Plan;
use crate::topology::ssh::{split_option, COMMAND_KEYS};
use anyhow::{bail, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const TRUST: &str = "it would run a command on this host with linerate's rights when the plan \
                     runs (plans are code); if you wrote or checked this plan, pass --trust-plan";

/// Refuses a plan whose `[ssh]` would run local commands; `path` is the
/// plan's file (its config is relative to it).
pub fn check(plan: &Plan, path: &Path) -> Result<()> {
    for o in &plan.ssh.options {
        if let Some(key) = command_key(o) {
            bail!("{}: [ssh] options: '{o}' sets {key}: {TRUST}", plan.file);
        }
    }
    if let Some(c) = &plan.ssh.config {
        let p = path.parent().unwrap_or(Path::new(".")).join(c);
        check_config(&p)
            .map_err(|e| e.context(format!("{}: [ssh] config = \"{c}\"", plan.file)))?;
    }
    Ok(())
}

/// The option's key when it is one that runs a local command (`Match`
/// only with `exec`).
fn command_key(line: &str) -> Option<String> {
    let (key, words) = split_option(line)?;
    let lower = key.to_ascii_lowercase();
    if !COMMAND_KEYS.contains(&lower.as_str()) {
        return None;
    }
    let exec = |w: &String| {
        let w = w.to_ascii_lowercase();
        w == "exec" || w == "!exec"
    };
    if lower == "match" && !words.iter().any(exec) {
        return None;
    }
    Some(key)
}

/// An ssh config a plan names must be one only its owner (root or this
/// user) can write, and set nothing that runs a local command.
fn check_config(p: &Path) -> Result<()> {
    let meta = std::fs::metadata(p).with_context(|| format!("reading {}", p.display()))?;
    // The owner of /proc/self is this process's effective user.
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if meta.mode() & 0o022 != 0 {
        bail!(
            "{} is writable by others (mode {:o}): whoever can write it decides what ssh runs; \
             {TRUST}, or chmod go-w it",
            p.display(),
            meta.mode() & 0o7777
        );
    }
    if meta.uid() != 0 && Some(meta.uid()) != me {
        bail!(
            "{} belongs to another user (uid {}), who decides what ssh runs; {TRUST}",
            p.display(),
            meta.uid()
        );
    }
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some(key) = command_key(line) {
            bail!("{} line {}: {key}: {TRUST}", p.display(), n + 1);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(command_key("Match host lab*").is_none());
        assert!(command_key("Port=2222").is_none());
        assert!(command_key("ServerAliveInterval 5").is_none());
    }
}
