//! Running the network tools (`ip`, `ethtool`, `nft`) with typed
//! arguments, checking interface names before they reach a command line,
//! and the small steps several operations share (neighbour entries).

use super::error::{fail, NetopsError, Result};
use crate::model::error::Context;
use std::net::IpAddr;
use std::process::Command;

/// Tool → Debian package that provides it.
const PACKAGES: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("nft", "nftables"),
    ("ethtool", "ethtool"),
];

pub fn tool_exists(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
        || ["/usr/sbin", "/sbin", "/usr/bin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(tool).is_file())
}

fn require(tool: &str) -> Result<()> {
    if tool_exists(tool) {
        return Ok(());
    }
    let pkg = PACKAGES
        .iter()
        .find(|(t, _)| *t == tool)
        .map(|p| p.1)
        .unwrap_or(tool);
    Err(NetopsError::ToolMissing {
        tool: tool.to_string(),
        package: pkg.to_string(),
    })
}

/// Runs a tool, turning a failure into an error with its stderr.
pub fn run(tool: &str, args: &[&str], stdin: Option<&str>) -> Result<()> {
    require(tool)?;
    let mut cmd = Command::new(tool);
    cmd.args(args);
    let out = if let Some(input) = stdin {
        use std::io::Write;
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {tool}"))?;
        if let Some(mut s) = child.stdin.take() {
            s.write_all(input.as_bytes())
                .with_context(|| format!("writing to {tool}"))?;
        }
        child.wait_with_output()?
    } else {
        cmd.output().with_context(|| format!("starting {tool}"))?
    };
    if !out.status.success() {
        fail!(
            "`{tool} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs a tool and returns its stdout, turning a failure into an error with its stderr.
pub fn run_output(tool: &str, args: &[&str]) -> Result<String> {
    require(tool)?;
    let out = Command::new(tool)
        .args(args)
        .output()
        .with_context(|| format!("starting {tool}"))?;
    if !out.status.success() {
        fail!(
            "`{tool} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Interface names: what the kernel accepts (1..=15 bytes, no '/', ':' or space).
pub fn check_ifname(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 15
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        fail!(
            "'{name}' is not a valid interface name (1-15 characters of a-z, 0-9, '-', '_', '.')"
        );
    }
    Ok(())
}

pub fn mac_string(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub(super) fn family(a: &IpAddr) -> &'static str {
    if a.is_ipv4() {
        "-4"
    } else {
        "-6"
    }
}

/// Pins `addr` → `mac` on `dev` as a permanent neighbour.
pub fn set_neighbour(dev: &str, addr: IpAddr, mac: &[u8; 6]) -> Result<()> {
    check_ifname(dev)?;
    run(
        "ip",
        &[
            family(&addr),
            "neigh",
            "replace",
            &addr.to_string(),
            "lladdr",
            &mac_string(mac),
            "dev",
            dev,
            "nud",
            "permanent",
        ],
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_says_what_to_install() {
        let e = require("linerate-no-such-tool").unwrap_err().to_string();
        assert!(e.contains("apt-get install"), "{e}");
    }
}
