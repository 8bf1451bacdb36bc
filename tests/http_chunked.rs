//! The chunked transfer coding on both HTTP/1.1 sides (issues 33 and 38),
//! on loopback: `linerate serve` reads chunked request bodies (curl's and
//! raw ones in pieces) and refuses malformed chunking; `linerate http`
//! reads chunked responses from a small server in a thread, on one
//! kept-alive connection, and bodies that end at the close.

use crate::util::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Everything the server sends until it closes or `wait` passes.
fn read_all(s: &TcpStream, wait: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut v = Vec::new();
    let mut buf = [0u8; 65536];
    let mut r = s;
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        v.extend_from_slice(&buf[..n]);
    }
    v
}

fn responses(v: &[u8]) -> usize {
    v.windows(9).filter(|w| w == b"HTTP/1.1 ").count()
}

/// `linerate serve --json` on `listen` until SIGTERM; returns once it
/// listens.
fn serve(listen: &str) -> Child {
    let child = Command::new(bin())
        .args(["serve", "--listen", listen, "--size", "1000"])
        .args([
            "--json",
            "--no-progress",
            "--no-results",
            "--duration",
            "30",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(listen).is_err() {
        assert!(
            Instant::now() < deadline,
            "serve did not listen on {listen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Stops `serve` (SIGTERM, by its pid) and reads its summary.
fn stop(child: Child) -> Value {
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("serve --json: stdout is not JSON ({e}); stderr:\n{err}"))
}

fn status_count(summary: &Value, status: u64) -> u64 {
    summary["status_counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == status)
        .map_or(0, |s| n(&s["count"]))
}

#[test]
fn serve_reads_chunked_request_bodies_and_refuses_malformed_ones() {
    let _g = shared();
    let listen = format!("127.0.0.1:{}", free_port());
    let child = serve(&listen);
    let url = format!("http://{listen}/obj");

    // curl streams a file as a chunked POST, twice on one connection.
    let dir = tempdir("chunked-curl");
    let file = dir.join("body");
    std::fs::write(&file, vec![b'x'; 200_000]).unwrap();
    let data = format!("@{}", file.display());
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "20",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
        ])
        .args(["-H", "Transfer-Encoding: chunked", "--data-binary", &data])
        .args(["-w", "%{http_code} %{num_connects}\n", &url, &url])
        .output()
        .expect("curl");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said, "200 1\n200 0\n", "two 200s on one connection");

    // Raw: a chunked body in pieces, with extensions and trailers, then a
    // GET on the same connection (the body is never taken for a request).
    let mut c = TcpStream::connect(&listen).unwrap();
    c.set_nodelay(true).unwrap();
    let pieces: [&[u8]; 6] = [
        b"PUT /obj HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"1",
        b"0;ext=\"a b\"\r\n0123456789",
        b"abcdef\r\n3\r",
        b"\nxyz\r\n0\r\nX-Sum: 19\r\n",
        b"\r\nGET /obj HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ];
    for p in pieces {
        c.write_all(p).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = read_all(&c, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&got);
    assert!(got.starts_with(b"HTTP/1.1 200"), "{text}");
    assert_eq!(responses(&got), 2, "{text}");
    let good = 2 * 200_000 + 19;

    // Malformed chunking: 400 and a close; over the body cap: 413; a
    // coding the server does not decode: 501. None carries data, so the
    // count above is exact.
    let inner = "GET /obj HTTP/1.1\r\nHost: x\r\n\r\n";
    let cases = [
        ("chunked", "zz\r\n", 400),
        ("chunked", "00000000000000001\r\n", 400),
        ("chunked", "5\nhello\r\n0\r\n\r\n", 400),
        ("chunked", "0\r\nX-Bad\r\n\r\n", 400),
        ("chunked", "100001\r\n", 413),
        ("gzip, chunked", "0\r\n\r\n", 501),
        ("gzip", "", 400),
    ];
    for (te, body, status) in cases {
        let mut c = TcpStream::connect(&listen).unwrap();
        let req = format!(
            "POST /obj HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: {te}\r\n\r\n{body}{inner}"
        );
        c.write_all(req.as_bytes()).unwrap();
        let got = read_all(&c, Duration::from_secs(5));
        let text = String::from_utf8_lossy(&got);
        assert!(
            got.starts_with(format!("HTTP/1.1 {status}").as_bytes()),
            "{te} {body:?}: {text}"
        );
        assert_eq!(responses(&got), 1, "{te} {body:?}: closed after: {text}");
    }
    let s = stop(child)["summary"].clone();
    assert_eq!(n(&s["request_body_bytes"]), good, "{s}");
    assert_eq!(status_count(&s, 200), 4, "{s}");
    assert_eq!(status_count(&s, 400), 5, "{s}");
    assert_eq!(status_count(&s, 413), 1, "{s}");
    assert_eq!(status_count(&s, 501), 1, "{s}");
}

/// The chunks of every response of [`chunked_server`]: a large one (the
/// client drops its data in the kernel), small ones, one cut mid-size-line.
const CHUNKS: [usize; 4] = [1 << 20, 1, 4096, 7];

/// A server in a thread: on each connection, answers every request for
/// `/chunked` with [`CHUNKS`] (written in pieces, with an extension and
/// trailers) kept alive, `/close` with 3000 bytes and a close, `/bad`
/// with a chunk size that is not hex. Counts connections.
fn chunked_server() -> (u16, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conns = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&conns);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            counted.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || answer(s));
        }
    });
    (port, conns)
}

fn answer(mut s: TcpStream) {
    s.set_nodelay(true).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&b[..n]),
            }
            continue;
        };
        let req = String::from_utf8_lossy(&head[..end]).to_string();
        head.drain(..end + 4);
        let w: std::io::Result<()> = if req.starts_with("GET /chunked ") {
            (|| {
                s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")?;
                for (i, &len) in CHUNKS.iter().enumerate() {
                    let size = format!("{len:x}");
                    if i == 2 {
                        // The size line arrives in two pieces.
                        s.write_all(&size.as_bytes()[..1])?;
                        std::thread::sleep(Duration::from_millis(5));
                        s.write_all(format!("{};ext=1\r\n", &size[1..]).as_bytes())?;
                    } else {
                        s.write_all(format!("{size}\r\n").as_bytes())?;
                    }
                    s.write_all(&vec![b'c'; len])?;
                    s.write_all(b"\r\n")?;
                }
                s.write_all(b"0\r\nX-Trailer: t\r\n\r\n")
            })()
        } else if req.starts_with("GET /close ") {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
            let _ = s.write_all(&[b'z'; 3000]);
            return;
        } else {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
            return;
        };
        if w.is_err() {
            return;
        }
    }
}

/// `linerate http --url URL ARGS` on loopback: the one test's document,
/// whether the run passed or not.
fn http(url: &str, args: &[&str]) -> Value {
    let mut v = vec!["http", "--url", url];
    v.extend_from_slice(args);
    v.extend_from_slice(&["--json", "--no-progress", "--no-results"]);
    let out = run(&v);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    doc["tests"][0].clone()
}

#[test]
fn the_client_reads_chunked_responses_and_bodies_that_end_at_the_close() {
    let _g = shared();
    let (port, conns) = chunked_server();
    let one: u64 = CHUNKS.iter().map(|&c| c as u64).sum();

    // Five chunked responses on one kept-alive connection, byte exact.
    let t = http(
        &format!("http://127.0.0.1:{port}/chunked"),
        &["-c", "1", "--requests", "5"],
    );
    assert_eq!(t["status"], "ok", "{t}");
    let c = &t["http"]["client"];
    assert_eq!(n(&c["requests"]), 5, "{c}");
    assert_eq!(n(&c["errors"]), 0, "{c}");
    assert_eq!(n(&c["body_bytes"]), 5 * one, "decoded bytes only: {c}");
    assert_eq!(n(&c["object_bytes"]), one, "{c}");
    assert!(
        n(&c["wire_bytes"]) > 5 * one,
        "framing counts on the wire: {c}"
    );
    assert_eq!(
        conns.load(Ordering::Relaxed),
        1,
        "one kept-alive connection"
    );

    // No length, no chunking: the body ends at the close, a connection each.
    let t = http(
        &format!("http://127.0.0.1:{port}/close"),
        &["-c", "1", "--requests", "3"],
    );
    assert_eq!(t["status"], "ok", "{t}");
    let c = &t["http"]["client"];
    assert_eq!(
        (n(&c["requests"]), n(&c["errors"]), n(&c["body_bytes"])),
        (3, 0, 9000),
        "{c}"
    );
    assert_eq!(conns.load(Ordering::Relaxed), 4);

    // Malformed chunking is a protocol error that says so.
    let t = http(
        &format!("http://127.0.0.1:{port}/bad"),
        &["-c", "1", "--requests", "2"],
    );
    let c = &t["http"]["client"];
    assert_eq!(n(&c["requests"]), 0, "{c}");
    assert!(n(&c["error_kinds"]["protocol"]) >= 1, "{c}");
    assert!(t.to_string().contains("malformed chunked body"), "{t}");
}
