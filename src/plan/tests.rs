use super::*;

const EXAMPLE: &str = r#"name = "chr-100g"
allow_target = ["192.0.2.0/24"]
[ssh]
config = "lab_ssh_config"
options = ["ServerAliveInterval=5"]
accept_new = true
connect_timeout = 5
[hosts.gen1]
ssh = "root@192.0.2.10"
linerate = "/usr/local/bin/linerate"
ports = ["enp65s0f0"]
address = "198.18.20.1"
[hosts.sink]
ssh = "root@192.0.2.20"
[[test]]
name = "tcp 3x10 streams"
kind = "tcp"
from = ["gen1"]
to = "sink"
target = "198.18.20.1"
streams = 10
instances = 3
duration = 10
"#;

fn ok(text: &str) -> Plan {
    match parse("PLAN.toml", text) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// The error of a bad plan, checked for position and wording.
fn bad(text: &str, line: usize, column: usize, words: &str) -> PlanError {
    let e = match parse("PLAN.toml", text) {
        Ok(_) => panic!("parsed, but should fail with '{words}':\n{text}"),
        Err(e) => e,
    };
    assert_eq!(
        (e.line, e.column),
        (line, column),
        "wrong place for: {e}\n{text}"
    );
    assert!(e.message.contains(words), "'{words}' not in: {e}");
    assert_eq!(
        e.to_string(),
        format!("PLAN.toml:{line}:{column}: {}", e.message)
    );
    e
}

const HOSTS: &str =
    "[hosts.gen]\nnetns = \"gen\"\n[hosts.sink]\nnetns = \"sink\"\naddress = \"198.18.0.2\"\n";

/// A valid plan with one test whose body is `test` (after kind/from/to).
fn with_test(test: &str) -> String {
    format!("{HOSTS}[[test]]\nkind = \"udp\"\nfrom = \"gen\"\nto = \"sink\"\n{test}")
}

#[test]
fn the_example_plan() {
    let p = ok(EXAMPLE);
    assert_eq!(p.name, "chr-100g");
    assert_eq!(
        p.allow_target,
        vec!["192.0.2.0/24".parse::<Cidr>().unwrap()]
    );
    assert_eq!(
        p.ssh,
        PlanSsh {
            config: Some("lab_ssh_config".into()),
            options: vec!["ServerAliveInterval=5".into()],
            accept_new: true,
            remote_binary: None,
            push: false,
            connect_timeout: Some(5),
        }
    );
    let gen1 = p.host("gen1").unwrap();
    assert_eq!(gen1.kind, HostKind::Ssh("root@192.0.2.10".into()));
    assert_eq!(gen1.linerate.as_deref(), Some("/usr/local/bin/linerate"));
    assert_eq!(gen1.ports, vec!["enp65s0f0"]);
    assert_eq!(gen1.address, Some("198.18.20.1".parse().unwrap()));
    assert_eq!(p.locate(gen1.span), (8, 1));
    let t = &p.tests[0];
    assert_eq!(t.name, "tcp 3x10 streams");
    assert_eq!(t.kind, TestKind::Tcp);
    assert_eq!(
        (t.from.clone(), t.to.as_str()),
        (vec!["gen1".to_string()], "sink")
    );
    assert_eq!(t.target, "198.18.20.1".parse::<IpAddr>().unwrap());
    assert_eq!(t.instances, 3);
    assert_eq!(t.argv(), vec!["--streams=10", "--duration=10"]);
    assert_eq!(p.locate(t.args[0].span), (21, 1));
    assert_eq!(p.locate(t.args[1].value_span), (23, 12));
}

#[test]
fn twelve_generators_in_a_dozen_lines() {
    let text = r#"[hosts."gen[1-12]"]
ssh = "root@192.0.2.{n}"
address = "198.18.1.{n}"
[hosts.sink]
ssh = "root@192.0.2.20"
address = "198.18.20.1"
[[test]]
kind = "udp"
from = "gen*"
to = "sink"
frame_size = 64
"#;
    assert!(text.lines().count() <= 12);
    let p = ok(text);
    assert_eq!(p.name, "PLAN");
    assert_eq!(p.hosts.len(), 13);
    let want: Vec<String> = (1..=12).map(|n| format!("gen{n}")).collect();
    assert_eq!(
        p.tests[0].from, want,
        "numeric order, not gen1, gen10, gen11, gen12, gen2"
    );
    assert_eq!(p.tests[0].name, "udp 1");
    assert_eq!(p.tests[0].target, "198.18.20.1".parse::<IpAddr>().unwrap());
    let gen12 = p.host("gen12").unwrap();
    assert_eq!(gen12.kind, HostKind::Ssh("root@192.0.2.12".into()));
    assert_eq!(gen12.address, Some("198.18.1.12".parse().unwrap()));
    assert_eq!(p.locate(gen12.span), (1, 1));
}

#[test]
fn netns_local_padding_and_ranges_in_from() {
    let p = ok(r#"name = "mixed"
[hosts."gen[01-03]"]
netns = "lr-gen{n}"
ports = ["eth{n}"]
[hosts.here]
local = true
[hosts.sink]
netns = "sink"
[[test]]
kind = "tcp"
from = ["gen[02-03]", "here"]
to = "sink"
target = "127.0.0.1"
[[test]]
kind = "search"
from = "gen01"
to = "sink"
target = "::1"
"#);
    let names: Vec<&str> = p.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["gen01", "gen02", "gen03", "here", "sink"]);
    assert_eq!(p.hosts[1].kind, HostKind::Netns("lr-gen02".into()));
    assert_eq!(p.hosts[2].ports, vec!["eth03"]);
    assert_eq!(p.hosts[3].kind, HostKind::Local);
    assert_eq!(p.tests[0].from, ["gen02", "gen03", "here"]);
    assert_eq!(p.tests[0].instances, 1);
    assert_eq!(p.tests[1].name, "search 2");
    assert_eq!(p.tests[1].from, ["gen01"]);
}

#[test]
fn command_options_become_plan_args() {
    let p = ok(&with_test(
        r#"frame_size = 1518
rate = "50%"
reverse = true
bidir = false
only = ["udp 64B", "tcp 1"]
flows = 0x10
dut_loss = 0.5
duration = 10.0
line_rate = 1e10
offset = -5
cpus = []
"#,
    ));
    let t = &p.tests[0];
    let keys: Vec<&str> = t.args.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "frame_size",
            "rate",
            "reverse",
            "only",
            "flows",
            "dut_loss",
            "duration",
            "line_rate",
            "offset"
        ],
        "file order; false and [] left out"
    );
    assert_eq!(t.args[0].flag, "--frame-size");
    assert_eq!(
        t.argv(),
        [
            "--frame-size=1518",
            "--rate=50%",
            "--reverse",
            "--only=udp 64B",
            "--only=tcp 1",
            "--flows=16",
            "--dut-loss=0.5",
            "--duration=10",
            "--line-rate=10000000000",
            "--offset=-5",
        ]
    );
    assert!(t.args[2].values.is_empty());
    assert_eq!(t.args[3].values, ["udp 64B", "tcp 1"]);
}

#[test]
fn caller_reports_cli_errors_at_the_key() {
    let text = with_test("stream = 10\n");
    let p = ok(&text);
    let t = &p.tests[0];
    let e = p
        .check_args(t, &["streams", "frame-size", "duration"])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "PLAN.toml:10:1: unknown key 'stream' in [[test]] \"udp 1\" (linerate udp has no --stream); did you mean 'streams'?"
    );
    assert!(p.check_args(t, &["stream"]).is_ok());
    let e = p.error_at(t.args[0].value_span, "invalid value '10' for '--stream'");
    assert_eq!((e.line, e.column), (10, 10));
    assert_eq!(p.locate(t.span), (6, 1));
}

#[test]
fn locate_counts_characters_and_lines() {
    assert_eq!(locate("", 0), (1, 1));
    assert_eq!(locate("ab\ncd", 4), (2, 2));
    assert_eq!(locate("ab\n", 3), (2, 1));
    assert_eq!(
        locate("é=1", 2),
        (1, 2),
        "column in characters; inside a character rounds down"
    );
    assert_eq!(locate("é=1", 1), (1, 1));
    assert_eq!(locate("x", 99), (1, 2));
}

#[test]
fn host_patterns() {
    use hosts::{natural, parse_pattern};
    assert_eq!(parse_pattern("gen").unwrap(), ("gen", None));
    assert!(parse_pattern("gen[1-12]").is_ok());
    for bad in [
        "gen[]",
        "gen[1-]",
        "gen[a-b]",
        "[1-2]",
        "gen[1-2]x",
        "gen[3-1]",
        "gen[1-999]",
        "gen]",
        "gen[01-100]",
    ] {
        assert!(parse_pattern(bad).is_err(), "{bad}");
    }
    let mut v = vec!["gen10", "gen2", "gen1", "b", "gen02", "a10"];
    v.sort_by(|a, b| natural(a, b));
    assert_eq!(v, ["a10", "b", "gen1", "gen2", "gen02", "gen10"]);
}

#[test]
fn syntax_and_unknown_keys() {
    bad(
        "name = \"x\"\nhosts = [\n",
        2,
        10,
        "TOML syntax: unclosed array",
    );
    bad(
        "name = chr\n",
        1,
        8,
        "TOML syntax: string values must be quoted",
    );
    bad(
        "nmae = \"x\"\n",
        1,
        1,
        "unknown key 'nmae' at the top of the plan; did you mean 'name'?",
    );
    bad(&format!("{HOSTS}[[tests]]\n"), 6, 3, "did you mean 'test'?");
    bad(
        "[hosts.a]\nlocal = true\nadress = \"198.18.0.1\"\n",
        3,
        1,
        "unknown key 'adress' in [hosts.a]; did you mean 'address'?",
    );
    bad(
        "[ssh]\nconect_timeout = 5\n",
        2,
        1,
        "unknown key 'conect_timeout' in [ssh]; did you mean 'connect_timeout'?",
    );
    bad(
        "[ssh]\nzzz = 5\n",
        2,
        1,
        "the keys here are config, options",
    );
    bad("name = \"x\"\n", 2, 1, "no [hosts]");
    bad(HOSTS, 6, 1, "no [[test]]");
    bad(
        &format!("{HOSTS}[test]\nkind = \"tcp\"\n"),
        6,
        1,
        "two brackets",
    );
    bad("hosts = {}\n", 1, 9, "[hosts] is empty");
    bad("hosts = 3\n", 1, 9, "hosts must be a table, not an integer");
}

#[test]
fn bad_hosts() {
    bad(
        "[hosts.a]\nlinerate = \"x\"\n",
        1,
        1,
        "says nowhere how to reach it",
    );
    bad(
        "[hosts.a]\nnetns = \"a\"\nlocal = true\n",
        3,
        1,
        "has both netns and local",
    );
    bad(
        "[hosts.a]\nlocal = false\n",
        2,
        9,
        "local = false says nothing",
    );
    bad("[hosts.a]\nssh = \"root@ host\"\n", 2, 7, "without spaces");
    bad(
        "[hosts.a]\nssh = \"-oProxyCommand=x\"\n",
        2,
        7,
        "starts with '-'",
    );
    bad("[hosts.a]\nssh = \"root@h:99999\"\n", 2, 7, "port '99999'");
    bad("[hosts.a]\nssh = \"@h\"\n", 2, 7, "empty user");
    bad(
        "[hosts.a]\nnetns = \"much-too-long-name\"\n",
        2,
        9,
        "1 to 15",
    );
    bad(
        "[hosts.a]\nlocal = true\nlinerate = \"/x\"\n",
        3,
        12,
        "ssh hosts only",
    );
    bad(
        "[hosts.a]\nlocal = true\naddress = \"198.18.0.300\"\n",
        3,
        11,
        "not an IP address",
    );
    bad(
        "[hosts.a]\nlocal = true\nports = [\"eth0\", \"a/b\"]\n",
        3,
        18,
        "not an interface name",
    );
    bad("[hosts.\"a b\"]\nlocal = true\n", 1, 8, "not a host name");
    bad(
        "[hosts.\"gen[1-3]\"]\nssh = \"root@192.0.2.1\"\n",
        2,
        7,
        "every host of this range would be the same",
    );
    bad(
        "[hosts.\"gen[1-3]\"]\nnetns = \"gen\"\n",
        2,
        9,
        "put {n} where",
    );
    bad(
        "[hosts.gen]\nnetns = \"gen{n}\"\n",
        2,
        9,
        "only means something in a range host",
    );
    bad(
        "[hosts.\"gen[1-3]\"]\nnetns = \"g{n}\"\n[hosts.gen2]\nlocal = true\n",
        3,
        8,
        "host 'gen2' is defined twice: by [hosts.\"gen[1-3]\"] on line 1",
    );
    bad(
        "[hosts.\"gen[5-1]\"]\nlocal = true\n",
        1,
        8,
        "runs backwards",
    );
    bad(
        "[hosts.gen]\nlocal = true\n[hosts.gen]\nlocal = true\n",
        3,
        8,
        "TOML syntax: duplicate key",
    );
}

#[test]
fn bad_ssh_and_allow_target() {
    bad(
        "[ssh]\noptions = [\"StrictHostKeyChecking=no\"]\n",
        2,
        12,
        "never turns host-key checking",
    );
    bad(
        "[ssh]\noptions = [\"UserKnownHostsFile = /dev/null\"]\n",
        2,
        12,
        "accept_new = true",
    );
    bad("[ssh]\noptions = [\"Port\"]\n", 2, 12, "KEY=VALUE");
    bad(
        "[ssh]\nconnect_timeout = 0\n",
        2,
        19,
        "connect_timeout must be 1..=3600",
    );
    bad(
        "[ssh]\npush = \"yes\"\n",
        2,
        8,
        "push must be true or false, not a string",
    );
    bad(
        "allow_target = [\"10.0.0.0/8\", \"10.1.0.0/33\"]\n",
        1,
        31,
        "allow_target: '10.1.0.0/33': prefix length",
    );
    bad(
        "allow_target = \"lab\"\n",
        1,
        16,
        "not an address or prefix",
    );
}

#[test]
fn bad_tests() {
    // The test body starts on line 10.
    bad(
        &with_test("instances = 0\n"),
        10,
        13,
        "instances must be 1..=64",
    );
    bad(
        &with_test("instances = 65\n"),
        10,
        13,
        "instances must be 1..=64",
    );
    bad(
        &with_test("target = \"sink\"\n"),
        10,
        10,
        "target 'sink' is not an IP address",
    );
    bad(
        &with_test("target = \"8.8.8.8\"\n"),
        10,
        10,
        "allow_target = [\"8.8.8.8/32\"]",
    );
    bad(
        &with_test("frame-size = 64\n"),
        10,
        1,
        "write 'frame_size' (with _ for -)",
    );
    bad(
        &with_test("rate = { pps = 1 }\n"),
        10,
        8,
        "rate cannot be a table",
    );
    bad(
        &with_test("only = [[1]]\n"),
        10,
        9,
        "only cannot be an array",
    );
    bad(
        &with_test("reverse = [true]\n"),
        10,
        12,
        "write reverse = true or false",
    );
    bad(
        &with_test("when = 1979-05-27\n"),
        10,
        8,
        "when cannot be a datetime",
    );
    bad(
        &with_test("client = \"ns:gen\"\n"),
        10,
        1,
        "the plan sets it from `from`",
    );
    bad(
        &with_test("allow_target = [\"8.8.8.0/24\"]\n"),
        10,
        1,
        "at the top of the plan",
    );
    bad(&with_test("name = \"\"\n"), 10, 8, "name is empty");
    let t = |body: &str| format!("{HOSTS}[[test]]\n{body}");
    bad(&t("kind = \"http\"\n"), 7, 8, "not supported yet");
    bad(&t("kind = \"tpc\"\n"), 7, 8, "did you mean \"tcp\"?");
    bad(&t("from = \"gen\"\n"), 6, 1, "has no kind");
    bad(
        &t("kind = \"tcp\"\nto = \"sink\"\n"),
        6,
        1,
        "[[test]] \"tcp 1\" has no from",
    );
    bad(&t("kind = \"tcp\"\nfrom = \"gen\"\n"), 6, 1, "has no to");
    bad(
        &t("kind = \"tcp\"\nfrom = []\nto = \"sink\"\n"),
        8,
        8,
        "from of [[test]] \"tcp 1\" is empty",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = [\"gen\", \"gne\"]\nto = \"sink\"\n"),
        8,
        16,
        "no host 'gne' in [hosts]: did you mean 'gen'? the hosts are gen, sink",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = \"g*x\"\nto = \"sink\"\n"),
        8,
        8,
        "matches no host",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = \"gen[1-2]\"\nto = \"sink\"\n"),
        8,
        8,
        "names 'gen1', which is not in [hosts]",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = [\"gen\", \"g*\"]\nto = \"sink\"\n"),
        8,
        16,
        "host 'gen' is in from twice",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = \"gen\"\nto = \"snk\"\n"),
        9,
        6,
        "did you mean 'sink'?",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = \"*\"\nto = \"sink\"\n"),
        9,
        6,
        "'sink' is both in from and to",
    );
    bad(
        &t("kind = \"tcp\"\nfrom = \"sink\"\nto = \"gen\"\n"),
        6,
        1,
        "has no target: add target",
    );
    let two = format!("{HOSTS}[[test]]\nkind = \"tcp\"\nfrom = \"gen\"\nto = \"sink\"\n[[test]]\nname = \"tcp 1\"\nkind = \"udp\"\nfrom = \"gen\"\nto = \"sink\"\n");
    bad(
        &two,
        11,
        8,
        "two tests are called \"tcp 1\" (the other one is on line 6)",
    );
}

/// Deterministic xorshift64*: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Byte flips, truncation, and swapped, dropped or repeated lines and keys.
fn mutate(rng: &mut Rng, base: &str) -> String {
    const WORDS: &[&str] = &[
        "name",
        "kind",
        "from",
        "to",
        "target",
        "instances",
        "ssh",
        "netns",
        "local",
        "hosts",
        "test",
        "[[test]]",
        "[hosts.x]",
        "\"gen[1-3]\"",
        "{n}",
        "*",
        "=",
        "[",
        "]",
        "\"",
        "\n",
        "é",
        "0x",
        "-1",
        "1e999",
        "true",
        "198.18.0.1",
        "\u{0}",
    ];
    let mut bytes = base.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            1 => bytes.truncate(rng.below(bytes.len() + 1)),
            2 => {
                let w = WORDS[rng.below(WORDS.len())].as_bytes();
                let i = rng.below(bytes.len() + 1);
                bytes.splice(i..i, w.iter().copied());
            }
            3 | 4 => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    match rng.below(3) {
                        0 => lines.swap(a, b),
                        1 => {
                            lines.remove(a);
                        }
                        _ => lines.insert(a, lines[b]),
                    }
                }
                bytes = lines.join("\n").into_bytes();
            }
            _ => {
                // Swap one key for another.
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let (from, to) = (WORDS[rng.below(12)], WORDS[rng.below(12)]);
                bytes = text.replacen(from, to, 1).into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn assert_inside(text: &str, e: &PlanError) {
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        (1..=lines.len()).contains(&e.line),
        "line {} outside the text ({} lines): {e}\n{text:?}",
        e.line,
        lines.len()
    );
    let len = lines[e.line - 1].chars().count();
    assert!(
        (1..=len + 1).contains(&e.column),
        "column {} outside line {} ({len} characters): {e}\n{text:?}",
        e.column,
        e.line
    );
    assert!(!e.message.is_empty());
}

#[test]
fn mutated_plans_never_panic_and_errors_point_inside() {
    let bases = [
        EXAMPLE.to_string(),
        with_test("frame_size = [64, 1518]\nreverse = true\n"),
        "[hosts.\"gen[01-12]\"]\nssh = \"root@[2001:db8::{n}]:22\"\n[hosts.sink]\nlocal = true\naddress = \"::1\"\n[[test]]\nkind = \"ramp\"\nfrom = [\"gen*\"]\nto = \"sink\"\n".to_string(),
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let (mut parsed, mut failed) = (0, 0);
    for i in 0..3000 {
        let text = mutate(&mut rng, &bases[i % bases.len()]);
        match parse("PLAN.toml", &text) {
            Ok(p) => {
                parsed += 1;
                for t in &p.tests {
                    for a in &t.args {
                        let (line, col) = p.locate(a.span);
                        assert_inside(&text, &p.error_at(a.span, "x"));
                        assert!(line >= 1 && col >= 1);
                    }
                }
            }
            Err(e) => {
                failed += 1;
                assert_inside(&text, &e);
            }
        }
    }
    // Both paths exercised, so the check means something.
    assert!(
        parsed > 100 && failed > 100,
        "parsed {parsed}, failed {failed}"
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut rng = Rng(7);
    for _ in 0..2000 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| (rng.next() >> 32) as u8).collect();
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse("PLAN.toml", &text) {
            assert_inside(&text, &e);
        }
    }
}
