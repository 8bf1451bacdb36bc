//! The agent's control channel, spoken by hand over its stdin/stdout.

use crate::util::bin;
use linerate::proto::{self, Request, Response, PROTO_VERSION};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn agent() -> Child {
    Command::new(bin())
        .args(["agent", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting agent")
}

fn wait_exit(c: &mut Child, within: Duration) -> Option<i32> {
    let t = Instant::now();
    while t.elapsed() < within {
        if let Some(s) = c.try_wait().unwrap() {
            return Some(s.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    None
}

fn hello(version: u16) -> Request {
    Request::Hello {
        proto_version: version,
        linerate_version: env!("CARGO_PKG_VERSION").into(),
    }
}

#[test]
fn handshake_snapshot_and_exit_on_eof() {
    let _g = crate::util::shared();
    let mut a = agent();
    let mut w = a.stdin.take().unwrap();
    let mut r = std::io::BufReader::new(a.stdout.take().unwrap());
    proto::write_frame(&mut w, &hello(PROTO_VERSION)).unwrap();
    match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
        Response::HelloAck {
            proto_version, pid, ..
        } => {
            assert_eq!(proto_version, PROTO_VERSION);
            assert_eq!(pid, a.id());
        }
        other => panic!("{other:?}"),
    }
    proto::write_frame(&mut w, &Request::Snapshot).unwrap();
    loop {
        match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
            Response::Heartbeat { .. } => continue,
            Response::Snapshot { snapshot } => {
                assert!(snapshot.interfaces.iter().any(|i| i.name == "lo"));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    drop(w); // the controller goes away
    assert_eq!(
        wait_exit(&mut a, Duration::from_secs(5)),
        Some(0),
        "agent must exit on EOF"
    );
}

#[test]
fn version_mismatch_is_refused() {
    let _g = crate::util::shared();
    let mut a = agent();
    let mut w = a.stdin.take().unwrap();
    let mut r = std::io::BufReader::new(a.stdout.take().unwrap());
    proto::write_frame(&mut w, &hello(PROTO_VERSION + 7)).unwrap();
    match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
        Response::Error { message, .. } => {
            assert!(message.contains("version mismatch"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(wait_exit(&mut a, Duration::from_secs(5)).is_some());
}

#[test]
fn another_linerate_version_is_refused() {
    let _g = crate::util::shared();
    let mut a = agent();
    let mut w = a.stdin.take().unwrap();
    let mut r = std::io::BufReader::new(a.stdout.take().unwrap());
    let hello = Request::Hello {
        proto_version: PROTO_VERSION,
        linerate_version: "0.0.1".into(),
    };
    proto::write_frame(&mut w, &hello).unwrap();
    match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
        Response::Error { message, .. } => {
            assert!(message.contains("linerate version mismatch"), "{message}");
            assert!(
                message.contains("0.0.1") && message.contains("--push"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(wait_exit(&mut a, Duration::from_secs(5)).is_some());
}

#[test]
fn requests_before_hello_are_refused() {
    let _g = crate::util::shared();
    let mut a = agent();
    let mut w = a.stdin.take().unwrap();
    let mut r = std::io::BufReader::new(a.stdout.take().unwrap());
    proto::write_frame(&mut w, &Request::Snapshot).unwrap();
    match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
        Response::Error { message, .. } => assert!(message.contains("hello"), "{message}"),
        other => panic!("{other:?}"),
    }
    drop(w);
    let _ = wait_exit(&mut a, Duration::from_secs(5));
}

#[test]
fn garbage_and_oversize_input_end_the_agent_cleanly() {
    let _g = crate::util::shared();
    for bytes in [
        vec![0xff, 0xff, 0xff, 0xff, b'{'], // 4 GiB announced
        b"\x00\x00\x00\x05hello".to_vec(),  // not JSON
        b"\x00\x00\x00\x02{}".to_vec(),     // JSON, not a message
        vec![0, 0, 0, 0],                   // empty frame
    ] {
        let mut a = agent();
        let mut w = a.stdin.take().unwrap();
        w.write_all(&bytes).unwrap();
        w.flush().unwrap();
        let code = wait_exit(&mut a, Duration::from_secs(5));
        assert_eq!(code, Some(1), "input {bytes:?}");
        let mut err = String::new();
        use std::io::Read;
        a.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(err.contains("agent:"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn agent_refuses_unsafe_destinations_and_over_cap_durations() {
    let _g = crate::util::shared();
    use linerate::proto::{FlowSpec, FrameSpec, Job};
    let mut a = Command::new(bin())
        .args(["agent", "--stdio", "--max-duration", "5"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut w = a.stdin.take().unwrap();
    let mut r = std::io::BufReader::new(a.stdout.take().unwrap());
    proto::write_frame(&mut w, &hello(PROTO_VERSION)).unwrap();
    let _ = proto::read_message::<Response>(&mut r).unwrap();
    let send = |dst: &str, ms: u64| Request::Start {
        test: 1,
        job: Job::UdpSend {
            flows: vec![FlowSpec {
                id: 0,
                src: None,
                src_port: 0,
                dst: dst.parse().unwrap(),
            }],
            frame: FrameSpec::Fixed(64),
            rate: Some(linerate::proto::RateProfile::constant(10.0)),
            duration_ms: ms,
            batch: 1,
            interval_ms: 1000,
            cpus: vec![],
            allow: vec![],
            tx_engine: Default::default(),
            threads: 0,
            vlan: None,
            dscp: None,
            max_frames: None,
            window: None,
        },
        start_at_unix_ns: None,
    };
    for (req, want) in [
        (send("8.8.8.8:53", 1000), "refusing"),
        (send("127.0.0.1:9", 60_000), "cap"),
    ] {
        proto::write_frame(&mut w, &req).unwrap();
        loop {
            match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
                Response::Heartbeat { .. } => continue,
                Response::Error { message, .. } => {
                    assert!(message.contains(want), "{message}");
                    break;
                }
                other => panic!("expected an error, got {other:?}"),
            }
        }
    }
    drop(w);
    let _ = wait_exit(&mut a, Duration::from_secs(5));
}

/// Issue 34: a controller that floods requests and never reads the answers
/// stops the agent's work, not its memory: the queues between the control
/// channel and the agent are bounded, so the agent stops taking requests
/// (the controller's writes wait) and its RSS stays flat.
#[test]
fn an_unread_agent_keeps_its_memory_bounded() {
    let _g = crate::util::shared();
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let mut a = agent();
    let mut w = a.stdin.take().unwrap();
    let _unread = a.stdout.take().unwrap();
    let pid = a.id();
    proto::write_frame(&mut w, &hello(PROTO_VERSION)).unwrap();
    let sent = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&sent);
    // The writer blocks once the pipes and queues are full.
    std::thread::spawn(move || {
        while count.load(Ordering::Relaxed) < 200_000
            && proto::write_frame(&mut w, &Request::Snapshot).is_ok()
        {
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    let at3 = sent.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    let at4 = sent.load(Ordering::Relaxed);
    let rss_kib = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap();
    let _ = a.kill();
    let _ = a.wait();
    // Unbounded, the agent kept answering into memory (over 100 MB at
    // 200,000 requests) and kept taking requests.
    assert_eq!(
        at3, at4,
        "the agent kept taking requests nobody read the answers of"
    );
    assert!(
        rss_kib < 60 * 1024,
        "agent RSS {rss_kib} KiB after {at4} requests"
    );
}
