//! HTTP and HTTPS downloads (issue 10) between two namespaces joined by a
//! veth pair (client 198.18.20.1, server 198.18.20.2): curl and linerate's
//! client against `linerate serve`, linerate's client against nginx, bad
//! requests answered while another download goes on, the T1/T2/T3 matrix.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = "198.18.20.2";

type Pair = NsPair;

impl NsPair {
    fn new_http(tag: &str) -> Self {
        NsPair::new("lrh", tag, "h", "198.18.20")
    }

    fn curl(&self, args: &[&str]) -> Output {
        let mut v = vec!["curl", "-s", "--max-time", "20"];
        v.extend_from_slice(args);
        self.exec(&self.client.clone(), &v)
    }

    /// Waits until `url` answers at all (curl exit 0, any status).
    fn wait_up(&self, url: &str) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if self
                .curl(&["-k", "-o", "/dev/null", "-r", "0-0", url])
                .status
                .success()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{url} did not come up");
    }

    /// A raw request over bash's /dev/tcp: the first response line.
    fn raw(&self, port: u16, request: &str, wait_s: u32) -> String {
        let script = format!(
            "exec 3<>/dev/tcp/{SERVER}/{port}; printf '{request}' >&3; timeout {wait_s} head -n1 <&3"
        );
        let out = self.exec(&self.client.clone(), &["bash", "-c", &script]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn sha256(data: &[u8]) -> String {
    use std::io::Write;
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A root with a 20 MB file of random bytes, a symlink out and a secret
/// beside it; returns (root, the file's bytes).
fn make_root(dir: &Path) -> (PathBuf, Vec<u8>) {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mut data = vec![0u8; 20_000_000];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(root.join("big.bin"), &data).unwrap();
    std::fs::write(dir.join("secret"), b"not for you\n").unwrap();
    std::os::unix::fs::symlink(dir.join("secret"), root.join("out")).unwrap();
    (root, data)
}

fn status(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn run_json_ok(args: &[&str]) -> Value {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "linerate {args:?}: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}); stderr:\n{stderr}"));
    v
}

fn cross_checks_ok(t: &Value) {
    let checks = t["cross_checks"].as_array().unwrap();
    assert!(!checks.is_empty(), "no cross-checks in {t}");
    for c in checks {
        assert_eq!(c["flagged"], false, "cross-check flagged: {c}");
    }
}

#[test]
fn serve_answers_curl_and_linerate_byte_exact_and_survives_bad_clients() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let dir = tempdir("http-serve");
    let (root, data) = make_root(&dir);
    let want = sha256(&data);
    let mut p = Pair::new_http("a");
    let root_s = root.to_str().unwrap();
    let cert = dir.join("cert.pem");
    let server = p.server.clone();
    p.spawn(
        &server,
        &[
            bin(),
            "serve",
            "--listen",
            "198.18.20.2:8080",
            "--root",
            root_s,
            "--request-timeout",
            "1",
            "--duration",
            "60",
        ],
    );
    p.spawn(
        &server,
        &[
            bin(),
            "serve",
            "--listen",
            "198.18.20.2:8443",
            "--root",
            root_s,
            "--tls",
            "--write-cert",
            cert.to_str().unwrap(),
            "--duration",
            "60",
        ],
    );
    p.wait_up("http://198.18.20.2:8080/big.bin");
    p.wait_up("https://198.18.20.2:8443/big.bin");

    // curl, byte-exact, whole and ranged, over HTTP and HTTPS.
    let body = p.curl(&["http://198.18.20.2:8080/big.bin"]).stdout;
    assert_eq!(sha256(&body), want, "HTTP body differs");
    let part = p
        .curl(&["-r", "1000-1999", "http://198.18.20.2:8080/big.bin"])
        .stdout;
    assert_eq!(part, data[1000..2000], "Range 1000-1999 differs");
    let code = p.curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-r",
        "30000000-",
        "http://198.18.20.2:8080/big.bin",
    ]);
    assert_eq!(status(&code), "416");
    let tls = p
        .curl(&[
            "--cacert",
            cert.to_str().unwrap(),
            "https://198.18.20.2:8443/big.bin",
        ])
        .stdout;
    assert_eq!(sha256(&tls), want, "HTTPS (--cacert) body differs");
    let tls12 = p
        .curl(&[
            "-k",
            "--tls-max",
            "1.2",
            "-r",
            "5-9",
            "https://198.18.20.2:8443/big.bin",
        ])
        .stdout;
    assert_eq!(tls12, data[5..10], "TLS 1.2 range differs");

    // A slow download goes on while bad clients are answered.
    let client = p.client.clone();
    let slow_out = dir.join("slow.bin");
    let slow = Command::new("ip")
        .args([
            "netns",
            "exec",
            &client,
            "curl",
            "-s",
            "--limit-rate",
            "8M",
            "-o",
        ])
        .arg(&slow_out)
        .arg("http://198.18.20.2:8080/big.bin")
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let code = |args: &[&str]| {
        let mut v = vec!["-o", "/dev/null", "-w", "%{http_code}"];
        v.extend_from_slice(args);
        status(&p.curl(&v))
    };
    assert_eq!(
        code(&["--path-as-is", "http://198.18.20.2:8080/../secret"]),
        "403"
    );
    assert_eq!(
        code(&["--path-as-is", "http://198.18.20.2:8080/%2e%2e/secret"]),
        "403"
    );
    assert_eq!(
        code(&["http://198.18.20.2:8080/out"]),
        "403",
        "symlink out of the root"
    );
    assert_eq!(code(&["http://198.18.20.2:8080/etc/passwd"]), "404");
    let big = format!("X-Big: {}", "a".repeat(20_000));
    assert_eq!(
        code(&["-H", &big, "http://198.18.20.2:8080/big.bin"]),
        "431"
    );
    assert!(p
        .raw(8080, "BLAH\\r\\n\\r\\n", 3)
        .starts_with("HTTP/1.1 400"));
    let t0 = Instant::now();
    let line = p.raw(8080, "GET /big.bin HTTP/1.1\\r\\nHost: x\\r\\n", 5);
    assert!(
        line.starts_with("HTTP/1.1 408"),
        "never-finished request: {line:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "timeout took {:?}",
        t0.elapsed()
    );
    let slow = slow.wait_with_output().unwrap();
    assert!(slow.status.success());
    assert_eq!(
        sha256(&std::fs::read(&slow_out).unwrap()),
        want,
        "the slow download broke"
    );

    // linerate's client against the standalone server, cross-checked with
    // the client namespace's kernel counters.
    let results = dir.join("results");
    let doc = run_json_ok(&[
        "http",
        "--client",
        &format!("ns:{client}"),
        "--url",
        "http://198.18.20.2:8080/big.bin",
        "-t",
        "1.5",
        "-c",
        "2",
        "--json",
        "--no-progress",
        "--results-dir",
        results.to_str().unwrap(),
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{t}");
    let h = &t["http"];
    assert!(h["client"]["requests"].as_u64().unwrap() >= 2, "{h}");
    assert!(f(&h["goodput_bps"]) > 1e8, "{h}");
    assert_eq!(h["client"]["status_counts"][0]["status"], 200);
    assert!(h["client"]["latency"]["p99_us"].as_u64().unwrap() > 0);
    assert_eq!(h["client"]["connections"].as_array().unwrap().len(), 2);
    cross_checks_ok(t);
    assert!(
        t["cross_checks"].to_string().contains("kernel rx_bytes"),
        "{}",
        t["cross_checks"]
    );
    // HTTPS with the generated certificate, linerate's side.
    let doc = run_json_ok(&[
        "http",
        "--client",
        &format!("ns:{client}"),
        "--url",
        "https://198.18.20.2:8443/big.bin",
        "--cacert",
        cert.to_str().unwrap(),
        "-t",
        "1",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let h = &doc["tests"][0]["http"];
    assert!(h["client"]["requests"].as_u64().unwrap() >= 1, "{h}");
    assert!(
        h["client"]["tls_version"].as_str().unwrap().contains("TLS"),
        "{h}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn matrix_in_the_lab_prints_six_rows_across_the_dut() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let out = run(&[
        "http",
        "--lab",
        "--matrix",
        "-t",
        "1",
        "-c",
        "2",
        "--size",
        "20M",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    for row in ["T1.1", "T1.2", "T2.1", "T2.2", "T3.1", "T3.2"] {
        assert!(
            stderr.lines().any(|l| l.starts_with(row)),
            "row {row} missing from the matrix:\n{stderr}"
        );
    }
    assert_eq!(doc["labs"][0]["kind"], "dut", "{}", doc["labs"]);
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 6);
    for t in tests {
        assert_eq!(t["status"], "ok", "{t}");
        assert!(f(&t["http"]["goodput_bps"]) > 1e8, "{}", t["name"]);
        cross_checks_ok(t);
    }
    assert_nothing_left(&lab_pids(&doc));
}

#[test]
fn matrix_between_agents_reports_ktls_fallback() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let p = Pair::new_http("m");
    let out = run(&[
        "http",
        "--client",
        &format!("ns:{}", p.client),
        "--server",
        &format!("ns:{}", p.server),
        "--target",
        SERVER,
        "--matrix",
        "-t",
        "1",
        "-c",
        "2",
        "--size",
        "20M",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    for row in ["T1.1", "T1.2", "T2.1", "T2.2", "T3.1", "T3.2"] {
        assert!(
            stderr.lines().any(|l| l.starts_with(row)),
            "row {row} missing from the matrix:\n{stderr}"
        );
    }
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 6);
    for t in tests {
        assert_eq!(t["status"], "ok", "{t}");
        let h = &t["http"];
        assert!(f(&h["goodput_bps"]) > 1e8, "{}: {h}", t["name"]);
        assert!(h["server"]["requests"].as_u64().unwrap() >= 1);
        cross_checks_ok(t);
    }
    let t3 = &tests[4]["http"];
    assert_eq!(t3["row"], "T3.1");
    assert_eq!(t3["server"]["ktls"]["requested"], true);
    let ulp = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
    if ulp.split_whitespace().any(|u| u == "tls") {
        assert_eq!(t3["server"]["ktls"]["in_use"], true, "{t3}");
    } else {
        eprintln!("kTLS live path skipped: this kernel has no tls ULP; checking the fallback");
        assert_eq!(t3["server"]["ktls"]["in_use"], false);
        assert_eq!(
            t3["server"]["ktls"]["note"],
            "kTLS not available on this kernel (tls ULP missing)"
        );
        assert!(stderr.contains("kTLS not available on this kernel (tls ULP missing)"));
    }
    assert_eq!(tests[0]["http"]["tls"], false);
    assert_eq!(tests[2]["http"]["tls"], true);
}

#[test]
fn linerate_client_against_nginx() {
    if !require_root() {
        return;
    }
    if Command::new("nginx").arg("-v").output().is_err() {
        let ok = Command::new("apt-get")
            .args(["install", "-y", "-qq", "nginx"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            crate::util::skip("nginx is not installed and apt-get could not install it");
            return;
        }
    }
    let _g = one_core();
    let dir = tempdir("http-nginx");
    let (root, _) = make_root(&dir);
    let (key, cert) = leaf_cert(&dir, "198.18.20.2");
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\ndaemon off;\n\
             events {{ worker_connections 256; }}\nhttp {{\n access_log off;\n sendfile on;\n \
             client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d}; \
             uwsgi_temp_path {d}; scgi_temp_path {d};\n \
             server {{ listen 198.18.20.2:8081; root {r}; }}\n \
             server {{ listen 198.18.20.2:8444 ssl; root {r}; ssl_certificate {c}; ssl_certificate_key {k}; }}\n}}\n",
            d = dir.display(),
            r = root.display(),
            c = cert.display(),
            k = key.display()
        ),
    )
    .unwrap();
    let mut p = Pair::new_http("n");
    let server = p.server.clone();
    p.spawn(&server, &["nginx", "-c", conf.to_str().unwrap()]);
    p.wait_up("http://198.18.20.2:8081/big.bin");
    let client = format!("ns:{}", p.client);
    let doc = run_json_ok(&[
        "http",
        "--client",
        &client,
        "--url",
        "http://198.18.20.2:8081/big.bin",
        "-t",
        "1",
        "-c",
        "2",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{t}");
    assert!(
        t["http"]["client"]["requests"].as_u64().unwrap() >= 2,
        "{t}"
    );
    assert!(f(&t["http"]["goodput_bps"]) > 1e8);
    cross_checks_ok(t);
    let doc = run_json_ok(&[
        "http",
        "--client",
        &client,
        "--url",
        "https://198.18.20.2:8444/big.bin",
        "--cacert",
        cert.to_str().unwrap(),
        "-t",
        "1",
        "--json",
        "--no-progress",
        "--no-results",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["status"], "ok", "{t}");
    assert!(
        t["http"]["client"]["requests"].as_u64().unwrap() >= 1,
        "{t}"
    );
    cross_checks_ok(t);
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
}
