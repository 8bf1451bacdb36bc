//! `[hosts]`: host names and `NAME[A-B]` ranges, what each host is
//! (ssh, netns, local), and the expansion of a test's `from` entries.

use super::value::{entries, span, Src};
use super::Invalid;
use super::{HostKind, PlanError, PlanHost, Span};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::net::IpAddr;
use toml::de::DeTable;

const HOST_KEYS: &[&str] = &[
    "ssh",
    "netns",
    "local",
    "iperf3",
    "linerate",
    "ports",
    "address",
    "iperf3_server",
    "vm",
];
/// Hosts one range may define: a typo like gen[1-1000] should not start a thousand agents.
const MAX_RANGE: u32 = 256;
const MAX_NAME: usize = 63;

/// `gen[01-12]`: numbers `lo..=hi`, zero-padded to `width` digits (0: not padded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NumRange {
    lo: u32,
    hi: u32,
    width: usize,
}

impl NumRange {
    /// Each number as it appears in a name.
    fn numbers(self) -> impl Iterator<Item = String> {
        (self.lo..=self.hi).map(move |n| format!("{n:0w$}", w = self.width))
    }
}

/// Splits `gen[1-12]` into `gen` and its range; a plain name has none.
pub(super) fn parse_pattern(s: &str) -> Result<(&str, Option<NumRange>), Invalid> {
    let Some(open) = s.find('[') else {
        if s.contains(']') {
            return Err(Invalid(format!(
                "'{s}' has a ']' without '[': write a range like gen[1-12]"
            )));
        }
        return Ok((s, None));
    };
    let bad = || {
        format!("'{s}' is not a host range: write NAME[FIRST-LAST], e.g. gen[1-12] or gen[01-12]")
    };
    let (base, rest) = s.split_at(open);
    let inner = rest
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(bad)?;
    let (a, b) = inner.split_once('-').ok_or_else(bad)?;
    let digits = |t: &str| !t.is_empty() && t.len() <= 6 && t.bytes().all(|c| c.is_ascii_digit());
    if base.is_empty() || !digits(a) || !digits(b) {
        return Err(bad().into());
    }
    let (lo, hi): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if lo > hi {
        return Err(Invalid(format!(
            "'{s}': the range runs backwards; write [{hi}-{lo}]"
        )));
    }
    if hi - lo >= MAX_RANGE {
        return Err(Invalid(format!(
            "'{s}' names {} hosts; one range may name at most {MAX_RANGE}",
            hi - lo + 1
        )));
    }
    let padded = a.len() > 1 && a.starts_with('0');
    if padded && a.len() != b.len() {
        return Err(Invalid(format!(
            "'{s}': pad both ends to the same width, e.g. [{a}-{b:0>w$}]",
            w = a.len()
        )));
    }
    let width = if padded { a.len() } else { 0 };
    Ok((base, Some(NumRange { lo, hi, width })))
}

fn check_name(name: &str) -> Result<(), Invalid> {
    let ok = name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "'{name}' is not a host name: use up to {MAX_NAME} letters, digits, _ . - \
             (starting with a letter or digit), or a range like gen[1-12]"
        )))
    }
}

/// Parses `[hosts]`, expanding ranges in place, in file order.
pub(super) fn parse_hosts(src: Src, table: &DeTable) -> Result<Vec<PlanHost>, PlanError> {
    let mut hosts = Vec::new();
    let mut seen: HashMap<String, (String, Span)> = HashMap::new();
    for (key, value) in entries(table) {
        let key_text = key.get_ref().as_ref();
        let (base, range) = parse_pattern(key_text).map_err(|m| src.err(span(key), m))?;
        check_name(base).map_err(|m| src.err(span(key), m))?;
        let place = format!("in [hosts.{}]", quote_key(key_text));
        let t = src.table(value, &format!("hosts.{key_text}"))?;
        src.check_keys(t, HOST_KEYS, &place)?;
        let numbers: Vec<Option<String>> = match range {
            Some(r) => r.numbers().map(Some).collect(),
            None => vec![None],
        };
        for n in numbers {
            let name = format!("{base}{}", n.as_deref().unwrap_or(""));
            check_name(&name).map_err(|m| src.err(span(key), m))?;
            if let Some((first, at)) = seen.get(&name) {
                let (line, _) = super::locate(src.text, at.start);
                return Err(src.err(
                    span(key),
                    format!(
                        "host '{name}' is defined twice: by [hosts.{first}] on line {line} and here; \
                         rename one or narrow the range"
                    ),
                ));
            }
            seen.insert(name.clone(), (quote_key(key_text), span(key)));
            hosts.push(parse_host(
                src,
                &name,
                n.as_deref(),
                t,
                span(value),
                &place,
            )?);
        }
    }
    Ok(hosts)
}

fn quote_key(k: &str) -> String {
    if k.bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        k.to_string()
    } else {
        format!("\"{k}\"")
    }
}

/// One host; `n` is its number when it comes from a range, which `{n}` stands for.
fn parse_host(
    src: Src,
    name: &str,
    n: Option<&str>,
    t: &DeTable,
    at: Span,
    place: &str,
) -> Result<PlanHost, PlanError> {
    let h = HostTable {
        src,
        name,
        n,
        t,
        at,
    };
    let kind = h.kind()?;
    let linerate = match h.get("linerate")? {
        Some((_, s)) if !matches!(kind, HostKind::Ssh(_)) => {
            return Err(src.err(
                s,
                format!(
                    "linerate (the remote binary) is for ssh hosts only; remove it from '{name}'"
                ),
            ))
        }
        other => other.map(|(path, _)| path),
    };
    let ports = h.ports()?;
    let address = h.address(&kind, place)?;
    if matches!(kind, HostKind::Iperf3(_) | HostKind::Vm(_)) {
        if let Some(v) = t.get("ports") {
            return Err(src.err(
                span(v),
                format!("'{name}' is an iperf3 server or a VM: it has no ports here (a VM's NICs are its nics)"),
            ));
        }
    }
    let iperf3_server = super::served::parse(src, t, &kind, name)?;
    Ok(PlanHost {
        name: name.to_string(),
        kind,
        linerate,
        ports,
        address,
        iperf3_server,
        span: at,
    })
}

/// One `[hosts.NAME]` table being read for the host `name` (number `n`
/// of a range).
struct HostTable<'a, 'i> {
    src: Src<'a>,
    name: &'a str,
    n: Option<&'a str>,
    t: &'a DeTable<'i>,
    at: Span,
}

impl HostTable<'_, '_> {
    /// The text of `key` with `{n}` substituted, and where it is.
    fn get(&self, key: &str) -> Result<Option<(String, Span)>, PlanError> {
        let Some(v) = self.t.get(key) else {
            return Ok(None);
        };
        let s = self.src.text_value(v, key)?;
        substitute(&s, self.n)
            .map(|s| Some((s, span(v))))
            .map_err(|m| self.src.err(span(v), format!("{key} {m}")))
    }

    /// How the host is reached: exactly one of ssh, netns, local, iperf3
    /// and vm, checked.
    fn kind(&self) -> Result<HostKind, PlanError> {
        let (src, name, n, t) = (self.src, self.name, self.n, self.t);
        let mut kinds: Vec<(&str, Span)> = ["ssh", "netns", "local", "iperf3", "vm"]
            .into_iter()
            .filter_map(|k| t.get_key_value(k).map(|(key, _)| (k, span(key))))
            .collect();
        kinds.sort_by_key(|(_, s)| s.start);
        let kind = match kinds.as_slice() {
            [] => {
                return Err(src.err(
                    self.at,
                    format!(
                        "host '{name}' says nowhere how to reach it: add one of ssh = \"user@host\", \
                         netns = \"NAME\", local = true, iperf3 = \"host[:port]\" (a stock iperf3 server) \
                         or vm = {{ ... }} (a guest linerate boots)"
                    ),
                ))
            }
            [_, (second, s), ..] => {
                return Err(src.err(
                    *s,
                    format!(
                        "host '{name}' has both {} and {second}: keep one of them",
                        kinds[0].0
                    ),
                ))
            }
            [(k, _)] => *k,
        };
        Ok(match kind {
            "ssh" => {
                let (target, s) = self.get("ssh")?.unwrap_or_default();
                if n.is_some() && !t.get("ssh").is_some_and(|v| has_n(v.get_ref().as_str())) {
                    return Err(src.err(s, each_same("ssh")));
                }
                check_ssh_target(&target).map_err(|m| src.err(s, m))?;
                HostKind::Ssh(target)
            }
            "iperf3" => {
                let (server, s) = self.get("iperf3")?.unwrap_or_default();
                HostKind::Iperf3(iperf3_server(&server).map_err(|m| src.err(s, m))?)
            }
            "vm" => super::vmhost::host_kind(src, name, n, t)?,
            "netns" => {
                let (ns, s) = self.get("netns")?.unwrap_or_default();
                if n.is_some() && !t.get("netns").is_some_and(|v| has_n(v.get_ref().as_str())) {
                    return Err(src.err(s, each_same("netns")));
                }
                check_netns(&ns).map_err(|m| src.err(s, m))?;
                HostKind::Netns(ns)
            }
            _ => {
                let v = t.get("local").map(|v| (src.bool(v, "local"), span(v)));
                if let Some((local, s)) = v {
                    if !local? {
                        return Err(src.err(
                            s,
                            "local = false says nothing: write local = true, or use ssh or netns",
                        ));
                    }
                }
                HostKind::Local
            }
        })
    }

    /// The host's `ports`, `{n}` substituted, each a valid interface name.
    fn ports(&self) -> Result<Vec<String>, PlanError> {
        let src = self.src;
        let Some(v) = self.t.get("ports") else {
            return Ok(Vec::new());
        };
        src.strings(v, "ports")?
            .into_iter()
            .map(|p| {
                let at = span(&p);
                let port = substitute(p.get_ref(), self.n)
                    .map_err(|m| src.err(at, format!("ports {m}")))?;
                check_ifname(&port).map_err(|m| src.err(at, m))?;
                Ok(port)
            })
            .collect()
    }

    /// The host's test address: `address`, an iperf3 server's own, or a
    /// VM's first NIC's.
    fn address(&self, kind: &HostKind, place: &str) -> Result<Option<IpAddr>, PlanError> {
        let (src, name) = (self.src, self.name);
        let address = match self.get("address")? {
            None => None,
            Some((_, s)) if matches!(kind, HostKind::Iperf3(_)) => {
                return Err(src.err(
                    s,
                    format!("an iperf3 host's address is the one in iperf3 = \"...\"; remove address from '{name}'"),
                ))
            }
            Some((a, s)) => Some(a.parse().map_err(|_| {
                src.err(s, format!("address '{a}' is not an IP address {place}: write e.g. 198.18.0.1 or 2001:2::1"))
            })?),
        };
        Ok(match kind {
            HostKind::Iperf3(server) => Some(server.ip()),
            HostKind::Vm(vm) => {
                address.or_else(|| vm.nics.iter().find_map(|n| n.address).map(|a| a.addr))
            }
            _ => address,
        })
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` of a stock iperf3 server
/// (an IP address: plans name test addresses, not names to resolve).
fn iperf3_server(s: &str) -> Result<std::net::SocketAddr, Invalid> {
    let s = s.strip_prefix("iperf3://").unwrap_or(s);
    let bad = || {
        format!(
            "iperf3 = \"{s}\" is not an iperf3 server address: write an IP address with an \
             optional port, e.g. \"198.18.0.2\", \"198.18.0.2:5202\" or \"[2001:2::2]:5201\""
        )
    };
    if let Ok(a) = s.parse::<std::net::SocketAddr>() {
        return if a.port() == 0 {
            Err(bad().into())
        } else {
            Ok(a)
        };
    }
    let ip = s.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = ip.parse().map_err(|_| bad())?;
    Ok(std::net::SocketAddr::new(
        ip,
        crate::proto::iperf3::DEFAULT_PORT,
    ))
}

fn has_n(s: Option<&str>) -> bool {
    s.is_some_and(|s| s.contains("{n}"))
}

fn each_same(key: &str) -> String {
    format!(
        "{key} has no {{n}}, so every host of this range would be the same one: put {{n}} \
         where the host's number goes"
    )
}

/// Replaces `{n}` by the host's number; a host outside a range has none.
fn substitute(s: &str, n: Option<&str>) -> Result<String, Invalid> {
    match n {
        Some(n) => Ok(s.replace("{n}", n)),
        None if s.contains("{n}") => Err(
            "uses {n}, which only means something in a range host like [hosts.\"gen[1-12]\"]"
                .into(),
        ),
        None => Ok(s.to_string()),
    }
}

/// A basic check; the caller parses the target fully.
fn check_ssh_target(s: &str) -> Result<(), Invalid> {
    let bad = |why: &str| {
        format!("ssh target '{s}' {why}: write user@host, user@host:port, [v6]:port or ssh://user@host:port")
    };
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("must be one word without spaces").into());
    }
    if s.starts_with('-') {
        // ssh would take it for an option.
        return Err(bad("starts with '-'").into());
    }
    let rest = s.strip_prefix("ssh://").unwrap_or(s);
    let host = match rest.rsplit_once('@') {
        Some(("", _)) => return Err(bad("has an empty user before '@'").into()),
        Some((_, host)) => host,
        None => rest,
    };
    let (host, port) = if let Some(v6) = host.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("has '[' without ']'"))?;
        match after {
            "" => (addr, None),
            p => (
                addr,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("has text after ']'"))?,
                ),
            ),
        }
    } else if host.matches(':').count() == 1 {
        host.split_once(':')
            .map_or((host, None), |(h, p)| (h, Some(p)))
    } else {
        // No colon, or a bare IPv6 address (which cannot carry a port).
        (host, None)
    };
    if host.is_empty() {
        return Err(bad("has no host").into());
    }
    match port {
        Some(p) if !p.parse::<u16>().is_ok_and(|p| p > 0) => {
            Err(bad(&format!("has port '{p}', not 1..=65535")).into())
        }
        _ => Ok(()),
    }
}

fn check_netns(s: &str) -> Result<(), Invalid> {
    let ok = (1..=15).contains(&s.len())
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "netns '{s}' is not a namespace name: use 1 to 15 letters, digits, _ . - (as `ip netns` lists them)"
        )))
    }
}

/// Linux interface names: 1..=15 bytes, no '/', no spaces.
fn check_ifname(s: &str) -> Result<(), Invalid> {
    let ok = (1..=15).contains(&s.len())
        && s != "."
        && s != ".."
        && !s
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "port '{s}' is not an interface name: use the name `ip link` shows (1 to 15 characters, no / : or spaces)"
        )))
    }
}

/// Expands one `from` entry: a host name, a range `gen[1-12]` or a glob `gen*`.
pub(super) fn expand(
    src: Src,
    entry: &toml::Spanned<String>,
    hosts: &[PlanHost],
) -> Result<Vec<String>, PlanError> {
    let at = span(entry);
    let e = entry.get_ref().as_str();
    let known = || known_hosts(hosts);
    if e.contains('*') {
        let mut names: Vec<&str> = hosts
            .iter()
            .map(|h| h.name.as_str())
            .filter(|n| glob(e, n))
            .collect();
        if names.is_empty() {
            return Err(src.err(
                at,
                format!("'{e}' matches no host; the hosts are {}", known()),
            ));
        }
        names.sort_by(|a, b| natural(a, b));
        return Ok(names.into_iter().map(String::from).collect());
    }
    let exists = |n: &str| hosts.iter().any(|h| h.name == n);
    match parse_pattern(e).map_err(|m| src.err(at, m))? {
        (base, Some(r)) => r
            .numbers()
            .map(|n| {
                let name = format!("{base}{n}");
                if exists(&name) {
                    Ok(name)
                } else {
                    Err(src.err(
                        at,
                        format!(
                            "'{e}' names '{name}', which is not in [hosts]; the hosts are {}",
                            known()
                        ),
                    ))
                }
            })
            .collect(),
        (name, None) if exists(name) => Ok(vec![name.to_string()]),
        (name, None) => Err(src.err(at, unknown_host(name, hosts))),
    }
}

pub(super) fn unknown_host(name: &str, hosts: &[PlanHost]) -> String {
    let hint = super::value::suggest(name, hosts.iter().map(|h| h.name.as_str()))
        .map(|s| format!("did you mean '{s}'? "))
        .unwrap_or_default();
    format!(
        "no host '{name}' in [hosts]: {hint}the hosts are {}",
        known_hosts(hosts)
    )
}

fn known_hosts(hosts: &[PlanHost]) -> String {
    const SHOWN: usize = 12;
    let mut names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).take(SHOWN).collect();
    if hosts.len() > SHOWN {
        names.push("…");
    }
    names.join(", ")
}

/// `*` matches any run of characters, everything else itself.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == name;
    }
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Numeric-aware order: gen2 before gen10.
pub(super) fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let (ca, ra) = chunk(a);
        let (cb, rb) = chunk(b);
        let both_digits = ca.starts_with(|c: char| c.is_ascii_digit())
            && cb.starts_with(|c: char| c.is_ascii_digit());
        let ord = if both_digits {
            let (ta, tb) = (ca.trim_start_matches('0'), cb.trim_start_matches('0'));
            ta.len()
                .cmp(&tb.len())
                .then(ta.cmp(tb))
                .then(ca.len().cmp(&cb.len()))
        } else {
            ca.cmp(cb)
        };
        if ord != Ordering::Equal {
            return ord;
        }
        (a, b) = (ra, rb);
    }
}

/// The leading run of digits or of non-digits, and the rest.
fn chunk(s: &str) -> (&str, &str) {
    let digit = s.starts_with(|c: char| c.is_ascii_digit());
    let end = s
        .find(|c: char| c.is_ascii_digit() != digit)
        .unwrap_or(s.len());
    s.split_at(end)
}
