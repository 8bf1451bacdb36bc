//! A plan with linerate's own iperf3 server on one of its hosts (issue 37,
//! part 5 from plans): three generator namespaces test against one server
//! namespace at once, each client's bytes agree with what the server
//! counted for it (found by its cookie), and the server ends with the test.

use crate::util::{ip, require_root, run_json, serial, tempdir};
use serde_json::Value;
use std::process::Command;

const GENS: usize = 3;

/// A server namespace with a bridge (198.18.41.1/24) and a generator
/// namespace per port (198.18.41.1N/24), removed on drop.
struct Star {
    names: Vec<String>,
}

impl Star {
    fn new() -> Star {
        let id = std::process::id() % 100_000;
        let srv = format!("lrs{id}");
        let mut names = vec![srv.clone()];
        ip(&["netns", "add", &srv]);
        let star = |n: &mut Vec<String>| Star {
            names: std::mem::take(n),
        };
        let mut s = star(&mut names);
        ip(&["-n", &srv, "link", "set", "lo", "up"]);
        ip(&["-n", &srv, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &srv, "addr", "add", "198.18.41.1/24", "dev", "br0"]);
        ip(&["-n", &srv, "link", "set", "br0", "up"]);
        for g in 1..=GENS {
            let ns = format!("lrg{id}x{g}");
            ip(&["netns", "add", &ns]);
            s.names.push(ns.clone());
            let (dev, port) = (format!("g{g}"), format!("p{g}"));
            ip(&[
                "link", "add", &dev, "netns", &ns, "type", "veth", "peer", "name", &port, "netns",
                &srv,
            ]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("198.18.41.1{g}/24"),
                "dev",
                &dev,
            ]);
            ip(&["-n", &ns, "link", "set", &dev, "up"]);
            ip(&["-n", &srv, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &srv, "link", "set", &port, "up"]);
        }
        s
    }

    fn srv(&self) -> &str {
        &self.names[0]
    }

    /// `{n}` stands for the generator's number in a range host.
    fn gen_pattern(&self) -> String {
        self.names[1].trim_end_matches('1').to_string() + "{n}"
    }
}

impl Drop for Star {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn bytes_of(streams: &Value, sends: bool) -> u64 {
    streams
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["sends"] == sends)
        .map(|s| s["bytes"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn issue37_plan_many_generators_at_one_linerate_iperf3_server() {
    if !require_root() {
        return;
    }
    let _s = serial();
    let star = Star::new();
    let dir = tempdir("iperf3-plan");
    let plan = dir.join("many.toml");
    std::fs::write(
        &plan,
        format!(
            r#"name = "many-clients"
[hosts."gen[1-{GENS}]"]
netns = "{}"
address = "198.18.41.1{{n}}"
[hosts.srv]
netns = "{}"
address = "198.18.41.1"
iperf3_server = {{ port = 5301, max_clients = {GENS} }}
[[test]]
name = "tcp"
kind = "tcp"
from = "gen*"
to = "srv"
duration = 2
[[test]]
name = "tcp reverse"
kind = "tcp"
from = "gen*"
to = "srv"
reverse = true
duration = 1
"#,
            star.gen_pattern(),
            star.srv()
        ),
    )
    .unwrap();
    let results = dir.join("results");
    let t0 = std::time::Instant::now();
    let doc = run_json(&[
        "run",
        plan.to_str().unwrap(),
        "--no-progress",
        "--json",
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    eprintln!("plan ran in {:.1} s", t0.elapsed().as_secs_f64());
    assert_eq!(doc["status"], "complete", "{doc}");
    let tests = doc["tests"].as_array().expect("tests");
    assert_eq!(tests.len(), 2 * GENS, "a result per client and test");
    let mut peers = Vec::new();
    for (k, t) in tests.iter().enumerate() {
        let name = t["name"].as_str().unwrap_or("");
        let reverse = k >= GENS;
        let want = format!(
            "{} gen{}",
            if reverse { "tcp reverse" } else { "tcp" },
            k % GENS + 1
        );
        assert_eq!(name, want);
        assert_eq!(t["status"], "ok", "{name}: {}", t["error"]);
        // The server's own count of this client, from its agent.
        let served = &t["server_record"];
        let peer = served["peer"].as_str().unwrap_or("");
        assert!(
            peer.starts_with(&format!("198.18.41.1{}:", k % GENS + 1)),
            "{name}: served {peer}"
        );
        peers.push(peer.to_string());
        assert!(
            served.get("cookie").is_none(),
            "{name}: the cookie is not kept"
        );
        let d = &t["directions"][0];
        let (client_bytes, server_bytes) = if reverse {
            (
                d["receiver_summary"]["rx_bytes"].as_u64().unwrap_or(0),
                bytes_of(&served["streams"], true),
            )
        } else {
            (
                d["sender_summary"]["tx_bytes"].as_u64().unwrap_or(0),
                bytes_of(&served["streams"], false),
            )
        };
        assert!(client_bytes > 1_000_000, "{name}: {client_bytes} bytes");
        assert_eq!(
            client_bytes, server_bytes,
            "{name}: client and server disagree"
        );
        let check = t["cross_checks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| {
                c["what"]
                    .as_str()
                    .is_some_and(|w| w.contains("its agent's count"))
            })
            .unwrap_or_else(|| panic!("{name}: no check against the server's count"));
        assert_eq!(check["flagged"], false, "{name}: {check}");
        assert_eq!(check["application"], check["kernel"], "{name}: {check}");
    }
    peers.sort();
    peers.dedup();
    assert_eq!(peers.len(), 2 * GENS, "each client's own record: {peers:?}");
    // The server ended with its test: nothing listens on its port.
    let out = Command::new("ip")
        .args(["netns", "exec", star.srv(), "ss", "-Htln", "sport = :5301"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "the iperf3 server outlived its plan"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
