//! `iperf3_server` on a host: linerate's own iperf3 server for many
//! generators at once (seed 004), its keys and what it refuses.

use super::super::served::PlanServer;
use super::{bad, ok};

/// Twelve generators at one server, `server` its `iperf3_server` value;
/// `test` goes after the test's kind, from and to.
fn seed004(server: &str, test: &str) -> String {
    format!(
        r#"[hosts."gen[01-12]"]
ssh = "root@192.0.2.{{n}}"
[hosts.srv]
netns = "srv"
address = "198.18.40.1"
iperf3_server = {server}
[[test]]
kind = "tcp"
from = "gen*"
to = "srv"
{test}"#
    )
}

#[test]
fn twelve_generators_at_one_linerate_server() {
    let p = ok(&seed004("{ max_clients = 12 }", ""));
    let srv = p.host("srv").expect("srv");
    assert_eq!(
        srv.iperf3_server,
        Some(PlanServer {
            max_clients: 12,
            ..PlanServer::default()
        })
    );
    assert_eq!(p.tests[0].from.len(), 12);
    // Every key, as `serve --iperf3` names its flags.
    let p = ok(&seed004(
        r#"{ port = 5101, max_clients = 36, max_test_time = 600, max_udp_send_rate = "2.5G" }"#,
        "instances = 3\n",
    ));
    let s = p.host("srv").and_then(|h| h.iperf3_server).expect("server");
    assert_eq!(
        (s.port, s.max_clients, s.max_test_time_s, s.max_udp_send_bps),
        (5101, 36, 600, 2_500_000_000)
    );
    assert_eq!(p.tests[0].instances, 3);
    // `true`: serve --iperf3's defaults (one client at a time).
    let p = ok(&seed004("true", "").replace("gen*", "gen01"));
    assert_eq!(
        p.host("srv").and_then(|h| h.iperf3_server),
        Some(PlanServer::default())
    );
    let p = ok(&seed004("{ max_udp_send_rate = 0 }", "").replace("gen*", "gen01"));
    assert_eq!(
        p.host("srv")
            .and_then(|h| h.iperf3_server.map(|s| s.max_udp_send_bps)),
        Some(0)
    );
}

#[test]
fn server_keys_are_checked_where_they_are_written() {
    bad(
        &seed004("{ max_clinets = 12 }", ""),
        6,
        19,
        "unknown key 'max_clinets' in iperf3_server of [hosts.srv]; did you mean 'max_clients'?",
    );
    bad(
        &seed004("{ max_clients = 65 }", ""),
        6,
        33,
        "max_clients = 65 is more than linerate's iperf3 server takes: at most 64 tests at once",
    );
    bad(
        &seed004("{ max_clients = 0 }", ""),
        6,
        33,
        "max_clients must be 1..=",
    );
    bad(
        &seed004("{ port = 0 }", ""),
        6,
        26,
        "port must be 1..=65535",
    );
    bad(
        &seed004(r#"{ max_udp_send_rate = "fast" }"#, ""),
        6,
        39,
        "write e.g. \"10G\", or 0 for no cap",
    );
    bad(
        &seed004("false", ""),
        6,
        17,
        "iperf3_server = false says nothing",
    );
    bad(&seed004("12", ""), 6, 17, "must be true or a table");
}

#[test]
fn more_clients_than_slots_is_refused_before_anything_runs() {
    // 12 generators, 10 slots: two would hear "busy".
    bad(
        &seed004("{ max_clients = 10 }", ""),
        10,
        6,
        "starts 12 iperf3 clients at once (12 generators × 1 instance) but the iperf3 server \
         on 'srv' takes max_clients = 10",
    );
    // 12 × 3 instances over 24: the error points at instances.
    bad(
        &seed004("{ max_clients = 24 }", "instances = 3\n"),
        11,
        13,
        "starts 36 iperf3 clients at once (12 generators × 3 instances)",
    );
}

#[test]
fn only_a_host_with_an_agent_runs_the_server() {
    bad(
        "[hosts.gen]\nnetns = \"gen\"\n[hosts.far]\niperf3 = \"198.18.0.9\"\niperf3_server = true\n\
         [[test]]\nkind = \"tcp\"\nfrom = \"gen\"\nto = \"far\"\n",
        5,
        1,
        "'far' is a stock iperf3 server (iperf3 = \"...\"): no agent runs there",
    );
    // Only tcp and udp tests are sent to it.
    bad(
        &seed004("{ max_clients = 12 }", "").replace("\"tcp\"", "\"ramp\""),
        10,
        6,
        "'srv' runs linerate's iperf3 server: only tcp and udp tests",
    );
}
