//! One `[[test]]`: its kind, hosts and target, checked against `[hosts]`
//! and the safety rule, and every other key kept as a command option.

use super::value::{entries, span, Src, Value};
use super::Invalid;
use super::{
    hosts, suggest, PlanArg, PlanError, PlanHost, PlanTest, Span, TestKind, MAX_INSTANCES,
};
use crate::proto::Cidr;
use std::net::IpAddr;
use toml::de::DeTable;

/// The keys of a `[[test]]` the plan owns; all others are command options.
const TEST_KEYS: &[&str] = &[
    "name",
    "kind",
    "from",
    "to",
    "dut",
    "target",
    "instances",
    "sweep",
    "zip",
    "order",
    "rows",
    "cols",
    "cell",
];
/// Command options a plan sets itself, from `from`, `to` and the top level.
const RESERVED: &[(&str, &str)] = &[
    ("client", "the plan sets it from `from`"),
    ("server", "the plan sets it from `to`"),
    (
        "allow_target",
        "set allow_target = [...] once at the top of the plan",
    ),
];

pub(super) fn parse_test(
    src: Src,
    n: usize,
    v: &Value,
    hosts: &[PlanHost],
    allow: &[Cidr],
    lab: bool,
) -> Result<PlanTest, PlanError> {
    let t = src.table(v, "each [[test]]")?;
    let at = span(v);
    let kind_value = t.get("kind").ok_or_else(|| {
        src.err(
            at,
            "this [[test]] has no kind: add kind = \"tcp\", \"udp\", \"ramp\" or \"search\"",
        )
    })?;
    let kind =
        parse_kind(&src.string(kind_value, "kind")?).map_err(|m| src.err(span(kind_value), m))?;
    let name = match t.get("name") {
        Some(v) => src.text_value(v, "name")?,
        None => format!("{kind} {n}"),
    };
    let tt = TestTable {
        src,
        t,
        at,
        place: format!("[[test]] \"{name}\""),
        hosts,
        lab,
    };

    // In the lab, the generator and sink are the lab's.
    let lab_from = toml::Spanned::new(at.start..at.start, toml::de::DeValue::String("gen".into()));
    let lab_to = toml::Spanned::new(at.start..at.start, toml::de::DeValue::String("sink".into()));
    let from_value = tt.host_key(
        "from",
        &lab_from,
        format!(
            "{} has no from: add from = [\"gen\"] (the generator hosts)",
            tt.place
        ),
    )?;
    let from = tt.parse_from(from_value)?;
    let to_value = tt.host_key(
        "to",
        &lab_to,
        format!(
            "{} has no to: add to = \"sink\" (the receiving host)",
            tt.place
        ),
    )?;
    let (to, sink) = tt.parse_to(to_value, kind, &from)?;
    let dut = tt.parse_dut(&from, &to)?;
    let target = tt.parse_target(sink, &to, to_value, allow)?;
    let instances = tt.parse_instances(sink, &to, to_value, from.len())?;
    let args = tt.command_args()?;
    let sweep = super::sweep::parse_sweep(src, t, &tt.place, &args)?;
    Ok(PlanTest {
        name,
        kind,
        from,
        to,
        dut,
        target,
        instances,
        args,
        span: at,
        sweep,
    })
}

/// One `[[test]]` table being read: where it is, how errors name it, and
/// the hosts it may name.
struct TestTable<'a, 'i> {
    src: Src<'a>,
    t: &'a DeTable<'i>,
    at: Span,
    /// `[[test]] "name"`, as errors name the test.
    place: String,
    hosts: &'a [PlanHost],
    lab: bool,
}

impl<'a, 'i> TestTable<'a, 'i> {
    /// The value of `key` (`from` or `to`), the lab's own host in the lab;
    /// outside it a missing key is the error `missing`.
    fn host_key<'v>(
        &'v self,
        key: &str,
        lab_default: &'v Value<'i>,
        missing: String,
    ) -> Result<&'v Value<'i>, PlanError> {
        match self.t.get(key) {
            Some(v) => Ok(v),
            None if self.lab => Ok(lab_default),
            None => Err(self.src.err(self.at, missing)),
        }
    }

    /// The generator hosts of `from`, groups expanded, each once; none of
    /// them an iperf3 server.
    fn parse_from(&self, from_value: &Value) -> Result<Vec<String>, PlanError> {
        let (src, hosts) = (self.src, self.hosts);
        let mut from: Vec<String> = Vec::new();
        for entry in src.strings(from_value, "from")? {
            for h in hosts::expand(src, &entry, hosts)? {
                if from.contains(&h) {
                    return Err(src.err(
                        span(&entry),
                        format!("host '{h}' is in from twice: list each generator once"),
                    ));
                }
                from.push(h);
            }
        }
        if from.is_empty() {
            return Err(src.err(
                span(from_value),
                format!("from of {} is empty: name the generator hosts", self.place),
            ));
        }
        if let Some(h) = from.iter().find(|h| {
            hosts
                .iter()
                .any(|x| &x.name == *h && matches!(x.kind, super::HostKind::Iperf3(_)))
        }) {
            return Err(src.err(
                span(from_value),
                format!(
                    "'{h}' is an iperf3 server: it can only be a test's to (linerate is the client)"
                ),
            ));
        }
        Ok(from)
    }

    /// The receiving host of `to` and its `[hosts]` entry: one that can
    /// receive a `kind` test from `from`.
    fn parse_to(
        &self,
        to_value: &Value,
        kind: TestKind,
        from: &[String],
    ) -> Result<(String, &'a PlanHost), PlanError> {
        let (src, t) = (self.src, self.t);
        let to = src.string(to_value, "to")?;
        let Some(sink) = self.hosts.iter().find(|h| h.name == to) else {
            return Err(src.err(span(to_value), hosts::unknown_host(&to, self.hosts)));
        };
        if matches!(sink.kind, super::HostKind::Iperf3(_)) {
            if !matches!(kind, TestKind::Tcp | TestKind::Udp) {
                return Err(src.err(
                    span(to_value),
                    format!(
                        "'{to}' is an iperf3 server: only tcp and udp tests can run against it, not {kind}"
                    ),
                ));
            }
            if from.len() != 1 || t.get("instances").is_some() {
                return Err(src.err(
                    span(to_value),
                    format!(
                        "'{to}' is an iperf3 server, which runs one test at a time: send from one host, without instances"
                    ),
                ));
            }
            if let Some(v) = t.get("target") {
                return Err(src.err(
                    span(v),
                    format!("the iperf3 server '{to}' is the target itself; remove target"),
                ));
            }
        }
        if sink.iperf3_server.is_some() && !matches!(kind, TestKind::Tcp | TestKind::Udp) {
            return Err(src.err(
                span(to_value),
                format!(
                    "'{to}' runs linerate's iperf3 server: only tcp and udp tests can be sent to it, \
                     not {kind}; send {kind} to another host"
                ),
            ));
        }
        if from.contains(&to) {
            return Err(src.err(
                span(to_value),
                format!("'{to}' is both in from and to: a host cannot send to itself here; take it out of from"),
            ));
        }
        Ok((to, sink))
    }

    /// The host `dut` names to watch: an agent host that neither sends nor
    /// receives in this test; none in the lab.
    fn parse_dut(&self, from: &[String], to: &str) -> Result<Option<String>, PlanError> {
        let src = self.src;
        let Some(v) = self.t.get("dut") else {
            return Ok(None);
        };
        let d = src.string(v, "dut")?;
        if self.lab {
            return Err(src.err(
                span(v),
                "a [lab] test watches the lab's own DUT: remove dut (it names a host for tests between hosts)",
            ));
        }
        let Some(h) = self.hosts.iter().find(|h| h.name == d) else {
            return Err(src.err(span(v), hosts::unknown_host(&d, self.hosts)));
        };
        if matches!(h.kind, super::HostKind::Iperf3(_)) {
            return Err(src.err(
                span(v),
                format!("'{d}' is an iperf3 server: no agent runs there to watch it; dut names a host linerate starts an agent on"),
            ));
        }
        if d == to || from.contains(&d) {
            return Err(src.err(
                span(v),
                format!("'{d}' sends or receives in this test: the dut is the device between them; name another host"),
            ));
        }
        Ok(Some(d))
    }

    /// The address the test sends to: `target`, or else the sink's
    /// address; held to the safety rule.
    fn parse_target(
        &self,
        sink: &PlanHost,
        to: &str,
        to_value: &Value,
        allow: &[Cidr],
    ) -> Result<IpAddr, PlanError> {
        let src = self.src;
        let target = match self.t.get("target") {
            Some(v) => {
                let s = src.string(v, "target")?;
                let ip: IpAddr = s.parse().map_err(|_| {
                    src.err(span(v), format!("target '{s}' is not an IP address: write e.g. 198.18.0.2 or 2001:2::2"))
                })?;
                (ip, span(v))
            }
            None => match sink.address {
                Some(ip) => (ip, span(to_value)),
                None => {
                    return Err(src.err(
                        self.at,
                        format!(
                            "{} has no target: add target = \"198.18.x.y\", or address = \"...\" to [hosts.{to}]",
                            self.place
                        ),
                    ))
                }
            },
        };
        check_target(target.0, allow).map_err(|m| src.err(target.1, m))?;
        Ok(target.0)
    }

    /// `instances` per generator (1 unless set); all `from` hosts' clients
    /// must fit the sink's iperf3 server's slots.
    fn parse_instances(
        &self,
        sink: &PlanHost,
        to: &str,
        to_value: &Value,
        generators: usize,
    ) -> Result<u16, PlanError> {
        let t = self.t;
        let instances = match t.get("instances") {
            None => 1,
            // The range bounds it to u16.
            Some(v) => u16::try_from(self.src.int(v, "instances", 1, i64::from(MAX_INSTANCES))?)
                .unwrap_or(1),
        };
        if let Some(s) = &sink.iperf3_server {
            // Every client starts at once: one over the server's slots would
            // hear "busy" at once, so the plan is refused here instead.
            let clients = generators * usize::from(instances);
            if clients > usize::from(s.max_clients) {
                let at = t.get("instances").map_or(span(to_value), span);
                return Err(self.src.err(
                    at,
                    format!(
                        "{} starts {clients} iperf3 clients at once ({} generator{} × {instances} \
                         instance{}) but the iperf3 server on '{to}' takes max_clients = {}: the \
                         others would be refused as busy; raise max_clients in [hosts.{to}] \
                         iperf3_server (at most {}), or send from fewer hosts",
                        self.place,
                        generators,
                        if generators == 1 { "" } else { "s" },
                        if instances == 1 { "" } else { "s" },
                        s.max_clients,
                        crate::iperf3::slots::MAX_CLIENTS
                    ),
                ));
            }
        }
        Ok(instances)
    }

    /// Every key the plan does not own, as the command's options; the
    /// options the plan sets itself are refused.
    fn command_args(&self) -> Result<Vec<PlanArg>, PlanError> {
        let mut args = Vec::new();
        for (key, value) in entries(self.t) {
            let k = key.get_ref().as_ref();
            if TEST_KEYS.contains(&k) {
                continue;
            }
            if let Some((_, why)) = RESERVED.iter().find(|(r, _)| *r == k) {
                return Err(self
                    .src
                    .err(span(key), format!("{k} cannot be set in a [[test]]: {why}")));
            }
            args.extend(self.src.arg(key, value)?);
        }
        Ok(args)
    }
}

fn parse_kind(s: &str) -> Result<TestKind, Invalid> {
    const KINDS: [TestKind; 5] = [
        TestKind::Tcp,
        TestKind::Udp,
        TestKind::Ramp,
        TestKind::Search,
        TestKind::Http,
    ];
    if let Some(k) = KINDS.iter().find(|k| k.as_str() == s) {
        return Ok(*k);
    }
    if s == "latency" {
        return Err(Invalid(format!(
            "kind \"{s}\" is not supported yet in plans: use tcp, udp, ramp, search or http"
        )));
    }
    let hint = suggest(s, KINDS.iter().map(|k| k.as_str()))
        .map(|k| format!("did you mean \"{k}\"? "))
        .unwrap_or_default();
    Err(Invalid(format!(
        "unknown kind \"{s}\": {hint}kind is one of tcp, udp, ramp, search, http"
    )))
}

/// The generator's safety rule, checked here so the error points at the plan.
fn check_target(ip: IpAddr, allow: &[Cidr]) -> Result<(), Invalid> {
    let host_prefix = if ip.is_ipv4() { 32 } else { 128 };
    crate::engine::check_destination(ip, allow).map_err(|_| {
        Invalid(format!(
            "target {ip} is outside loopback, 198.18.0.0/15 and 2001:2::/48: load tests belong on \
             isolated test networks (RFC 6815); if this is one, add allow_target = [\"{ip}/{host_prefix}\"] \
             (or its prefix) at the top of the plan"
        ))
    })
}
