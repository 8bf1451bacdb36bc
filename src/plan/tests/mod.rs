//! Plans that parse: the brief's example, host patterns, command options.

mod bad;
mod fuzz;
mod served;

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
        .check_args(t, &["streams", "frame-size", "duration"], &["interval"])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "PLAN.toml:10:1: unknown key 'stream' in [[test]] \"udp 1\" (linerate udp has no --stream); did you mean 'streams'?"
    );
    assert!(p.check_args(t, &["stream"], &[]).is_ok());
    // A run-wide flag in a test says where it goes instead.
    let e = p
        .check_args(t, &["streams"], &["interval", "stream"])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "PLAN.toml:10:1: 'stream' in [[test]] \"udp 1\" is a setting of the whole run, not of one test: give it to `linerate run` (`linerate run PLAN.toml --stream ...`), and it applies to every test"
    );
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

/// `dut` names a host that watches the device under test: one of the
/// plan's hosts, never a sender, the sink, an iperf3 server or in a lab.
#[test]
fn a_test_names_its_dut_host() {
    let hosts = format!(
        "{HOSTS}[hosts.router]\nnetns = \"router\"\n[hosts.far]\niperf3 = \"198.18.0.9\"\n"
    );
    let t = |body: &str| {
        format!("{hosts}[[test]]\nkind = \"udp\"\nfrom = \"gen\"\nto = \"sink\"\n{body}")
    };
    let p = ok(&t("dut = \"router\"\n"));
    assert_eq!(p.tests[0].dut.as_deref(), Some("router"));
    assert_eq!(ok(&t("")).tests[0].dut, None);
    bad(&t("dut = \"routr\"\n"), 14, 7, "routr");
    bad(
        &t("dut = \"sink\"\n"),
        14,
        7,
        "sends or receives in this test",
    );
    bad(
        &t("dut = \"gen\"\n"),
        14,
        7,
        "sends or receives in this test",
    );
    bad(&t("dut = \"far\"\n"), 14, 7, "iperf3 server");
    bad(
        "[lab]\ndut = \"route\"\n[[test]]\nkind = \"udp\"\ndut = \"x\"\n",
        5,
        7,
        "watches the lab's own DUT",
    );
}

const VM_PLAN: &str = r#"name = "vm"
[hosts.gen]
netns = "vmgen"
[hosts.r1.vm]
kernel = "debian:bookworm"
cpus = 2
memory = 512
nics = [{ netns = "vmgen", address = "198.18.5.1/24", peer = "198.18.5.2/24" }, { netns = "vmsink", bridge = "br0", address = "198.19.5.1/24", gateway = "198.19.5.254", mtu = 9000 }]
[[test]]
kind = "udp"
from = "gen"
to = "r1"
"#;

#[test]
fn vm_hosts_name_their_guest_and_nics() {
    let p = ok(VM_PLAN);
    let HostKind::Vm(vm) = &p.hosts[1].kind else {
        panic!("r1 is not a VM: {:?}", p.hosts[1].kind)
    };
    assert_eq!(
        vm.spec.kernel,
        crate::vm::KernelSource::Debian("bookworm".into())
    );
    assert_eq!((vm.spec.cpus, vm.spec.memory_mib), (2, 512));
    assert_eq!(vm.nics.len(), 2);
    assert_eq!(vm.nics[0].netns.as_deref(), Some("vmgen"));
    assert_eq!(
        vm.nics[0].peer.map(|c| c.to_string()).as_deref(),
        Some("198.18.5.2/24")
    );
    assert_eq!(vm.nics[1].bridge.as_deref(), Some("br0"));
    assert_eq!(vm.nics[1].mtu, Some(9000));
    assert_eq!(vm.nics[1].gateway, Some("198.19.5.254".parse().unwrap()));
    // The guest's first address is the host's: the test's default target.
    assert_eq!(p.hosts[1].address, Some("198.18.5.1".parse().unwrap()));
    assert_eq!(p.tests[0].target, "198.18.5.1".parse::<IpAddr>().unwrap());
}

#[test]
fn bad_vm_hosts_say_where() {
    let with = |vm: &str| VM_PLAN.replacen(VM_PLAN.lines().nth(7).unwrap_or(""), vm, 1);
    bad(&with("nics = []"), 8, 8, "1 to 8 NICs");
    bad(
        &with("nics = [{ netns = \"vmgen\", address = \"198.18.5.1\" }]"),
        8,
        38,
        "no prefix length",
    );
    bad(
        &with("nics = [{ netns = \"vmgen\", bridge = \"br0\", peer = \"198.18.5.2/24\" }]"),
        8,
        51,
        "not both",
    );
    bad(
        &with("nics = [{ netns = \"vmgen\", adress = \"198.18.5.1/24\" }]"),
        8,
        28,
        "adress",
    );
    bad(
        &VM_PLAN.replace("cpus = 2", "cpus = 0"),
        6,
        8,
        "cpus must be 1..=64",
    );
    bad(
        &VM_PLAN.replace("debian:bookworm", "debian:../x"),
        5,
        10,
        "not a Debian release",
    );
    bad(&VM_PLAN.replace("cpus = 2", "speed = 1"), 6, 1, "speed");
    // A range of VM hosts would give each guest the same addresses.
    bad(
        &VM_PLAN.replace("[hosts.r1.vm]", "[\"hosts\".\"r[1-2]\".vm]"),
        4,
        19,
        "cannot be a range",
    );
}
