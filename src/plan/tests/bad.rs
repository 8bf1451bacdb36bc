//! Plans that fail, each at an exact line and column.

use super::{bad, with_test, HOSTS};

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
}

/// Host names and range hosts (`gen[1-3]`) that cannot be.
#[test]
fn bad_host_names_and_ranges() {
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
}

/// A `[[test]]`'s kind, its `from` and `to` hosts, its target and its name.
#[test]
fn bad_test_kinds_and_hosts() {
    let t = |body: &str| format!("{HOSTS}[[test]]\n{body}");
    bad(&t("kind = \"latency\"\n"), 7, 8, "not supported yet");
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
