//! Plan files for `linerate run PLAN.toml`: parsing and validation, nothing else.
//!
//! Owns the plan format: the hosts (ssh, netns, local, and `gen[1-12]`
//! ranges; a stock iperf3 server, or linerate's own on a host,
//! `served`), the `[ssh]` settings and the `[[test]]` list. Parsing reads no
//! file and starts nothing: the caller passes the file's name and text and
//! gets a validated [`Plan`] or a [`PlanError`] that says `file:line:column`.
//! The one exception is [`trust`], what an untrusted plan may not do: it
//! reads the ssh config a plan names and keeps a private copy for ssh.
//!
//! It must not re-implement the ad-hoc commands' options: every key of a
//! `[[test]]` that the plan does not own comes back as a [`PlanArg`] (`frame_size
//! = 1518` → `--frame-size=1518`) for the caller to hand to the real CLI parser,
//! whose errors [`Plan::error_at`] places at the key.
//!
//! ```toml
//! name = "chr-100g"
//! allow_target = ["192.0.2.0/24"]
//! [hosts."gen[1-12]"]
//! ssh = "root@192.0.2.{n}"
//! [hosts.sink]
//! ssh = "root@192.0.2.20"
//! address = "198.18.20.1"
//! [[test]]
//! kind = "udp"
//! from = "gen*"
//! to = "sink"
//! frame_size = 64
//! ```

pub mod config;
mod hosts;
pub mod served;
mod sweep;
mod test_table;
pub mod trust;
mod value;
mod vmhost;

#[cfg(test)]
mod tests;

use crate::proto::Cidr;
use std::net::IpAddr;
use toml::de::{DeArray, DeTable, DeValue};
use value::{span, Src};

pub use sweep::LAB_KEYS;
pub use value::suggest;

const TOP_KEYS: &[&str] = &["name", "allow_target", "ssh", "hosts", "test", "lab"];
const SSH_KEYS: &[&str] = &[
    "config",
    "options",
    "accept_new",
    "remote_binary",
    "push",
    "connect_timeout",
];
/// The most parallel instances a test may run on each generator.
pub const MAX_INSTANCES: u16 = 64;
/// The most tests one plan may hold: checked on the text before the TOML
/// is parsed, so a plan of a million tests costs no memory.
pub const MAX_TESTS: usize = 10_000;

/// How many `[[test]]` headers the text has, counted line by line before
/// any parsing (an inline `test = [...]` array is counted after).
fn count_test_headers(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            let Some(inner) = l.strip_prefix("[[").and_then(|r| r.split("]]").next()) else {
                return false;
            };
            matches!(inner.trim(), "test" | "\"test\"" | "'test'")
        })
        .count()
}

fn too_many_tests(n: usize) -> String {
    format!(
        "the plan has {n} tests; a plan holds at most {MAX_TESTS}: split it into several plans \
         (or use a ramp or search test, which runs many trials as one test)"
    )
}

/// A byte range of the plan's text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    fn at(offset: usize) -> Span {
        Span {
            start: offset,
            end: offset,
        }
    }
}

impl From<std::ops::Range<usize>> for Span {
    fn from(r: std::ops::Range<usize>) -> Span {
        Span {
            start: r.start,
            end: r.end,
        }
    }
}

/// What is wrong with a plan, where (1-based line and column, in characters),
/// and what to do about it. Displays as `file:line:column: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct PlanError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A value in a plan that fails a check, with the reason as the user reads
/// it; the parser places it at the value's line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<String> for Invalid {
    fn from(reason: String) -> Self {
        Invalid(reason)
    }
}

impl From<&str> for Invalid {
    fn from(reason: &str) -> Self {
        Invalid(reason.to_string())
    }
}

/// A validated plan. Only [`parse`] makes one.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file name the caller passed, as errors show it.
    pub file: String,
    /// `name`, or the file name without directory and extension.
    pub name: String,
    /// Destinations allowed besides loopback and the benchmarking ranges.
    pub allow_target: Vec<Cidr>,
    pub ssh: PlanSsh,
    /// In file order, ranges expanded in place; names are unique.
    pub hosts: Vec<PlanHost>,
    /// In file order; names are unique.
    pub tests: Vec<PlanTest>,
    /// `[lab]`: the plan runs in the lab linerate builds; its hosts are
    /// the lab's `gen` and `sink` namespaces.
    pub lab: Option<PlanLab>,
    text: String,
}

/// `[lab]`: the settings of the lab the plan's tests run in, as
/// `linerate lab` flags (`dut = "nat"` → `--dut=nat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanLab {
    pub settings: Vec<PlanArg>,
    pub span: Span,
}

/// A `[[test]]`'s `sweep` table and its companions: the options it
/// varies, in the order written, each value with its place in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSweep {
    pub axes: Vec<PlanAxis>,
    /// `zip = [["frame_size", "rate"]]`: keys that move together.
    pub zip: Vec<Vec<String>>,
    /// `order = [...]`: the expansion order, slowest first.
    pub order: Vec<String>,
    /// Pivot hints: `rows`, `cols`, `cell`.
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub cell: Option<String>,
    /// The `sweep` key.
    pub span: Span,
    /// `zip`'s value (where a zip error points).
    pub zip_span: Span,
}

/// One swept option: `frame_size = [64, 1518]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanAxis {
    pub key: String,
    /// `--frame-size`.
    pub flag: String,
    /// Each value as the command line spells it, with its place; a TOML
    /// boolean is `true`/`false` (a switch on or off).
    pub values: Vec<(String, Span)>,
    /// The key inside `sweep`.
    pub span: Span,
}

/// `[ssh]`: how the controller runs ssh, as the CLI's ssh flags say it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanSsh {
    /// `-F FILE`.
    pub config: Option<String>,
    /// `-o K=V` each; none of them turns host-key checking or BatchMode off.
    pub options: Vec<String>,
    /// Accept host keys not seen before (StrictHostKeyChecking=accept-new).
    pub accept_new: bool,
    /// Path of linerate on the hosts, unless a host says otherwise.
    pub remote_binary: Option<String>,
    /// Copy this binary to the hosts first.
    pub push: bool,
    /// Seconds, 1..=3600.
    pub connect_timeout: Option<u32>,
}

/// One host of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanHost {
    pub name: String,
    pub kind: HostKind,
    /// Path of linerate on an ssh host (`linerate = "..."`).
    pub linerate: Option<String>,
    /// Physical ports (interface names) of this host for the lab.
    pub ports: Vec<String>,
    /// The host's test address: a test's default target, and a generator's client address.
    pub address: Option<IpAddr>,
    /// `iperf3_server`: linerate's own iperf3 server runs here for the
    /// tests sent to this host, each generator and instance a client.
    pub iperf3_server: Option<served::PlanServer>,
    /// The host's table (`[hosts.gen1]`); for a range, the range's table.
    pub span: Span,
}

/// How the controller reaches a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKind {
    /// This machine, this namespace.
    Local,
    /// An existing network namespace on this machine (1..=15 characters of `[A-Za-z0-9_.-]`).
    Netns(String),
    /// `user@host[:port]`, `[v6]:port` or `ssh://…` as written (checked only roughly).
    Ssh(String),
    /// A namespace of the lab a plan with `[lab]` runs in (`gen`, `sink`).
    Lab,
    /// A stock iperf3 server (`iperf3 = "host[:port]"`): no agent runs
    /// there; tcp and udp tests use it as their far end.
    Iperf3(std::net::SocketAddr),
    /// A guest linerate boots (`vm = { kernel, cpus, memory, nics }`), its
    /// agent inside; its NICs are taps placed as each NIC says.
    Vm(Box<crate::vm::host::VmHost>),
}

/// One `[[test]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanTest {
    /// `name`, or `"<kind> <n>"` with n its place among the tests (1-based).
    pub name: String,
    pub kind: TestKind,
    /// Generator hosts, patterns expanded; at least one, no repeats, never `to`.
    pub from: Vec<String>,
    /// The sink host.
    pub to: String,
    /// `dut`: a host whose agent watches the device under test (its
    /// counters with each test; a UDP test's CPU time per load step).
    pub dut: Option<String>,
    /// `target`, or else the address of `to`; inside loopback, the
    /// benchmarking ranges or `allow_target`.
    pub target: IpAddr,
    /// Parallel instances per generator, 1..=[`MAX_INSTANCES`].
    pub instances: u16,
    /// The command's options, in file order.
    pub args: Vec<PlanArg>,
    /// The `[[test]]` table.
    pub span: Span,
    /// The options it sweeps, if any.
    pub sweep: Option<PlanSweep>,
}

/// The ad-hoc command a test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestKind {
    Tcp,
    Udp,
    Ramp,
    Search,
    Http,
}

impl TestKind {
    /// The command's name: `linerate tcp`, …
    pub fn as_str(self) -> &'static str {
        match self {
            TestKind::Tcp => "tcp",
            TestKind::Udp => "udp",
            TestKind::Ramp => "ramp",
            TestKind::Search => "search",
            TestKind::Http => "http",
        }
    }
}

impl std::fmt::Display for TestKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One command option of a test: `frame_size = 1518` → `--frame-size`, `["1518"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanArg {
    /// As written in the plan: `frame_size`.
    pub key: String,
    /// `--frame-size`.
    pub flag: String,
    /// Empty for `key = true` (a switch); one per array element otherwise.
    pub values: Vec<String>,
    /// The key.
    pub span: Span,
    /// The value (the whole array for an array).
    pub value_span: Span,
}

impl PlanArg {
    /// Command-line words: `--flag` for a switch, else `--flag=value` per value
    /// (the `=` keeps a value like `-5` from reading as a flag).
    pub fn argv(&self) -> Vec<String> {
        if self.values.is_empty() {
            return vec![self.flag.clone()];
        }
        self.values
            .iter()
            .map(|v| format!("{}={v}", self.flag))
            .collect()
    }
}

impl PlanTest {
    /// Every option's command-line words, in file order.
    pub fn argv(&self) -> Vec<String> {
        self.args.iter().flat_map(PlanArg::argv).collect()
    }
}

impl Plan {
    /// The host called `name`.
    pub fn host(&self, name: &str) -> Option<&PlanHost> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The text of the plan at `span` (`true` for a TOML boolean).
    pub fn text_at(&self, span: Span) -> Option<&str> {
        self.text.get(span.start..span.end)
    }

    /// 1-based line and column (in characters) of the start of `span`.
    pub fn locate(&self, span: Span) -> (usize, usize) {
        locate(&self.text, span.start)
    }

    /// An error at `span`, e.g. the CLI parser's verdict on a [`PlanArg`].
    pub fn error_at(&self, span: Span, message: impl std::fmt::Display) -> PlanError {
        Src {
            file: &self.file,
            text: &self.text,
        }
        .err(span, message)
    }

    /// Rejects a test option that its command does not have. `known` holds
    /// the command's long flag names (`frame-size`), as clap lists them;
    /// `run_wide` those that belong to the whole run (`linerate run`'s own
    /// flags, such as `interval`), which a test may not set for itself.
    pub fn check_args(
        &self,
        test: &PlanTest,
        known: &[&str],
        run_wide: &[&str],
    ) -> Result<(), PlanError> {
        let keys: Vec<String> = known.iter().map(|k| k.replace('-', "_")).collect();
        let Some(arg) = test.args.iter().find(|a| !keys.contains(&a.key)) else {
            return Ok(());
        };
        if let Some(flag) = run_wide.iter().find(|f| f.replace('-', "_") == arg.key) {
            return Err(self.error_at(
                arg.span,
                format!(
                    "'{}' in [[test]] \"{}\" is a setting of the whole run, not of one test: give it to `linerate run` (`linerate run {} --{flag} ...`), and it applies to every test",
                    arg.key, test.name, self.file
                ),
            ));
        }
        let hint = match suggest(&arg.key, keys.iter().map(String::as_str)) {
            Some(s) => format!("did you mean '{s}'?"),
            None => format!("`linerate {} --help` lists its options", test.kind),
        };
        Err(self.error_at(
            arg.span,
            format!(
                "unknown key '{}' in [[test]] \"{}\" (linerate {} has no {}); {hint}",
                arg.key, test.name, test.kind, arg.flag
            ),
        ))
    }
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn locate(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// Parses and validates the plan `text`; `file` is the name errors show.
pub fn parse(file: &str, text: &str) -> Result<Plan, PlanError> {
    let src = Src { file, text };
    let headers = count_test_headers(text);
    if headers > MAX_TESTS {
        return Err(src.err(Span::default(), too_many_tests(headers)));
    }
    let root = DeTable::parse(text).map_err(|e| {
        let at = e.span().map_or(Span::default(), Span::from);
        src.err(
            at,
            format!("TOML syntax: {} (fix the TOML here)", e.message()),
        )
    })?;
    let root = root.into_inner();
    src.check_keys(&root, TOP_KEYS, "at the top of the plan")?;

    let name = match root.get("name") {
        Some(v) => src.text_value(v, "name")?,
        None => default_name(file),
    };
    let allow_target = match root.get("allow_target") {
        None => Vec::new(),
        Some(v) => src
            .strings(v, "allow_target")?
            .iter()
            .map(|c| {
                c.get_ref()
                    .parse::<Cidr>()
                    .map_err(|m| src.err(span(c), format!("allow_target: {m}")))
            })
            .collect::<Result<_, _>>()?,
    };
    let ssh = match root.get("ssh") {
        None => PlanSsh::default(),
        Some(v) => parse_ssh(src, src.table(v, "ssh")?)?,
    };
    let lab = match root.get("lab") {
        None => None,
        Some(v) => Some(sweep::parse_lab(src, v)?),
    };
    let hosts = plan_hosts(src, &root, lab.as_ref())?;
    let tables = test_tables(src, &root)?;
    let mut tests: Vec<PlanTest> = Vec::with_capacity(tables.len());
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for (i, t) in tables.iter().enumerate() {
        let test = test_table::parse_test(src, i + 1, t, &hosts, &allow_target, lab.is_some())?;
        if let Some(&first) = seen.get(&test.name) {
            let first = &tests[first];
            let (line, _) = locate(text, first.span.start);
            let at = src.table(t, "test")?.get("name").map_or(test.span, span);
            return Err(src.err(
                at,
                format!(
                    "two tests are called \"{}\" (the other one is on line {line}): give each a name = \"...\" of its own",
                    test.name
                ),
            ));
        }
        seen.insert(test.name.clone(), tests.len());
        tests.push(test);
    }
    sweep::check_count(src, &tests)?;
    Ok(Plan {
        file: file.to_string(),
        name,
        allow_target,
        ssh,
        hosts,
        tests,
        lab,
        text: text.to_string(),
    })
}

/// The plan's hosts: its [hosts], or with [lab] the lab's namespaces.
fn plan_hosts(src: Src, root: &DeTable, lab: Option<&PlanLab>) -> Result<Vec<PlanHost>, PlanError> {
    let hosts = match (root.get("hosts"), lab) {
        (Some(h), Some(_)) => {
            return Err(src.err(
                span(h),
                "a plan with [lab] runs in the lab's namespaces gen and sink: remove [hosts] \
                 (or remove [lab] to test hosts of your own)",
            ))
        }
        (None, Some(_)) => sweep::lab_hosts(),
        (None, None) => {
            return Err(src.err(
                src.end(),
                "the plan has no [hosts]: add one table per host, e.g. [hosts.gen] with netns = \"gen\"",
            ))
        }
        (Some(v), None) => hosts::parse_hosts(src, src.table(v, "hosts")?)?,
    };
    if hosts.is_empty() {
        let at = root.get("hosts").map_or(src.end(), span);
        return Err(src.err(
            at,
            "[hosts] is empty: add a host, e.g. [hosts.gen] with netns = \"gen\"",
        ));
    }
    Ok(hosts)
}

/// The plan's [[test]] tables: at least one, at most [`MAX_TESTS`].
fn test_tables<'a, 'i>(src: Src, root: &'a DeTable<'i>) -> Result<&'a DeArray<'i>, PlanError> {
    let no_tests = "the plan has no [[test]]: add one, e.g. [[test]] with kind = \"tcp\", from = [\"gen\"], to = \"sink\"";
    let tables = match root.get("test") {
        None => return Err(src.err(src.end(), no_tests)),
        Some(v) => match v.get_ref() {
            DeValue::Array(a) if a.is_empty() => return Err(src.err(span(v), no_tests)),
            DeValue::Array(a) => a,
            _ => return Err(src.err(
                span(v),
                "test must be written [[test]] (two brackets): the tests are an array of tables",
            )),
        },
    };
    if tables.len() > MAX_TESTS {
        let at = root.get("test").map_or(Span::default(), span);
        return Err(src.err(at, too_many_tests(tables.len())));
    }
    Ok(tables)
}

fn default_name(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "plan".to_string())
}

fn parse_ssh(src: Src, t: &DeTable) -> Result<PlanSsh, PlanError> {
    src.check_keys(t, SSH_KEYS, "in [ssh]")?;
    let text = |k: &str| t.get(k).map(|v| src.text_value(v, k)).transpose();
    let flag = |k: &str| t.get(k).map_or(Ok(false), |v| src.bool(v, k));
    let options = match t.get("options") {
        None => Vec::new(),
        Some(v) => src
            .strings(v, "options")?
            .iter()
            .map(|o| check_ssh_option(o.get_ref()).map_err(|m| src.err(span(o), m)))
            .collect::<Result<_, _>>()?,
    };
    let connect_timeout = match t.get("connect_timeout") {
        None => None,
        // The range bounds it to u32.
        Some(v) => u32::try_from(src.int(v, "connect_timeout", 1, 3600)?).ok(),
    };
    Ok(PlanSsh {
        config: text("config")?,
        options,
        accept_new: flag("accept_new")?,
        remote_binary: text("remote_binary")?,
        push: flag("push")?,
        connect_timeout,
    })
}

/// `K=V` for `ssh -o`; never one that turns host-key checking or BatchMode
/// off, read the way ssh reads it (`StrictHostKeyChecking="no"` is `no`).
fn check_ssh_option(o: &str) -> Result<String, Invalid> {
    use crate::topology::ssh::{option_pair, unquote_words, weakens};
    let Some((k, v)) = option_pair(o) else {
        return Err(Invalid(format!(
            "ssh option '{o}' must be KEY=VALUE, as for ssh -o"
        )));
    };
    if !k.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(Invalid(format!(
            "ssh option '{o}': '{k}' is not an ssh option name (letters and digits, e.g. Port=2222)"
        )));
    }
    if let Some(why) = weakens(&k.to_ascii_lowercase(), &unquote_words(&v)) {
        return Err(Invalid(format!(
            "ssh option '{o}' is refused: {why}; linerate never turns host-key checking or \
             BatchMode off; for hosts not yet in known_hosts, set accept_new = true"
        )));
    }
    Ok(format!("{k}={v}"))
}
