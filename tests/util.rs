use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Condvar, Mutex};

/// The suite's lock, of three kinds, over the machine's two cores.
/// Tests that use both cores flat out or measure at the machine's limit
/// (the self-test, full-rate labs, searches that end at the tester's limit,
/// CPU and latency figures of a busy host) or need what the host has one
/// of (the stall watch: a lab beside holds it) hold both: `serial()`. Tests
/// that measure but were shown to hold with one core busy beside them
/// (`stress-ng --cpu 1`: the suite ran green that way) hold one:
/// `one_core()`, so two of them run side by side. Tests that only check
/// behaviour (errors, refusals, flags, protocol exchanges, short functional
/// runs whose assertions do not depend on the machine's speed) share the
/// other: `shared()`, as many at once as the test threads allow, beside one
/// `one_core()` test at most and never beside a `serial()` one. Shared and
/// one-core tests name their namespaces, links, ports and files uniquely,
/// and check no global state (`assert_nothing_left` checks only names no
/// test makes).
///
/// Shared tests go first: a shared test starts whenever the lock allows,
/// even while others wait. With std's RwLock, which prefers a waiting
/// writer, a shared test waited behind every exclusive one queued before
/// it, so shared tests seldom overlapped (CI 2026-11-28: 250 s of shared
/// tests, the integration run 91 s longer than with one lock). Shared and
/// one-core tests are few and finite, so exclusive ones are not starved.
static LOCK: Mutex<Holders> = Mutex::new(Holders {
    shared: 0,
    cores: 0,
});
static RELEASED: Condvar = Condvar::new();

/// The machine's cores as the lock counts them.
const CORES: usize = 2;

pub(crate) struct Holders {
    /// Shared tests running: together they hold one core.
    pub(crate) shared: usize,
    /// Cores held by serial (both) and one-core tests (one each).
    pub(crate) cores: usize,
}

impl Holders {
    fn busy(&self) -> usize {
        self.cores + usize::from(self.shared > 0)
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Exclusive,
    Core,
    Shared,
}

/// Holds the suite's lock for a test. With `LINERATE_TEST_TIMES` set to a
/// file, each test's seconds under the lock (not its wait for it) are
/// appended there with the kind it held: where the suite's time goes.
pub struct Serial {
    kind: Kind,
    since: std::time::Instant,
    cpu: Option<(u64, u64)>,
    own: Option<u64>,
}

/// Whether a test of `kind` may start while `h` hold the lock.
pub(crate) fn admits(h: &Holders, kind: Kind) -> bool {
    match kind {
        Kind::Exclusive => h.busy() == 0,
        Kind::Core => h.busy() < CORES,
        Kind::Shared => h.shared > 0 || h.busy() < CORES,
    }
}

fn take(kind: Kind) -> Serial {
    let mut h = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if admits(&h, kind) {
            break;
        }
        h = RELEASED.wait(h).unwrap_or_else(|e| e.into_inner());
    }
    match kind {
        Kind::Exclusive => h.cores = CORES,
        Kind::Core => h.cores += 1,
        Kind::Shared => h.shared += 1,
    }
    Serial {
        kind,
        since: std::time::Instant::now(),
        cpu: cpu_ticks(),
        own: own_cpu_ticks(),
    }
}

/// The exclusive lock: no other test that takes a lock runs meanwhile.
pub fn serial() -> Serial {
    take(Kind::Exclusive)
}

/// One of the two cores: beside another one-core test, or beside shared
/// tests, never beside a serial one.
pub fn one_core() -> Serial {
    take(Kind::Core)
}

/// The shared lock: other shared tests run beside this one, exclusive
/// tests wait for all of them.
pub fn shared() -> Serial {
    take(Kind::Shared)
}

/// The host's busy and total CPU ticks (all cores) from /proc/stat.
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4)?;
    Some((total - idle, total))
}

/// CPU ticks of the test process and of the children it has waited for
/// (the linerate commands a test runs, with their agents): utime, stime,
/// cutime and cstime of /proc/self/stat. During an exclusive test they are
/// that test's own; kernel threads (NAPI, softirq) are not in them.
fn own_cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the comm field: state is field 3, utime field 14.
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    Some(f.iter().sum())
}

impl Drop for Serial {
    fn drop(&mut self) {
        self.record();
        let mut h = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        match self.kind {
            Kind::Exclusive => h.cores = 0,
            Kind::Core => h.cores -= 1,
            Kind::Shared => h.shared -= 1,
        }
        RELEASED.notify_all();
    }
}

impl Serial {
    fn record(&self) {
        let Some(path) = std::env::var_os("LINERATE_TEST_TIMES") else {
            return;
        };
        let name = std::thread::current().name().unwrap_or("?").to_string();
        // How busy the host's cores were while the test held the lock:
        // exclusive tests that mostly wait could share it.
        let busy = match (self.cpu, cpu_ticks()) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                format!("{:.0}%", 100.0 * (b1 - b0) as f64 / (t1 - t0) as f64)
            }
            _ => "?".into(),
        };
        let kind = match self.kind {
            Kind::Exclusive => "exclusive",
            Kind::Core => "one-core",
            Kind::Shared => "shared",
        };
        // The test's own processes, in seconds of one core (clock ticks
        // are 1/100 s on Linux): an exclusive test with little of it
        // mostly waits, and could share the lock.
        let own = match (self.own, own_cpu_ticks(), self.kind) {
            (Some(a), Some(b), Kind::Exclusive) => format!(" own {:.1}", (b - a) as f64 / 100.0),
            _ => String::new(),
        };
        let line = format!(
            "{:.1} {busy} {kind} {name}{own}\n",
            self.since.elapsed().as_secs_f64()
        );
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_linerate")
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Namespace tests need root. Outside CI a non-root run skips them loudly;
/// in CI (CI=true) not being root is a failure, so a skip never hides there.
pub fn require_root() -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run the tests as root"
    );
    skip("needs root");
    false
}

/// Says that the running test skips and why: a `SKIP: test: why` line on
/// stderr, and the same line appended to the file `LINERATE_SKIP_LOG`
/// names (scripts/test.sh sets it and counts the lines beside the passes),
/// so a run without root or a tool cannot look green by accident. The
/// test's name is its thread's, as the test harness names it.
/// Whether qemu-system-x86_64 runs here; a skip line when not (and a
/// failure in CI, whose setup installs it). For the VM tests.
pub fn have_qemu() -> bool {
    let ok = Command::new("qemu-system-x86_64")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have qemu-system-x86 (scripts/test.sh installs it)"
        );
        skip("needs qemu-system-x86_64 (apt-get install qemu-system-x86 busybox-static)");
    }
    ok
}

pub fn skip(why: &str) {
    let thread = std::thread::current();
    let line = format!("SKIP: {}: {why}", thread.name().unwrap_or("?"));
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("LINERATE_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// A scratch directory of this test process's (`/tmp/lr-test-PID-NAME-N`),
/// empty and its own: N counts the calls, so tests that run side by side
/// and name theirs alike never share one. The first call also removes
/// what earlier test processes left there (a failed test keeps its files,
/// and some tests never remove theirs): every `lr-test-PID-*` whose
/// process is gone.
pub fn tempdir(name: &str) -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    SWEPT.call_once(sweep_stale_scratch);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("lr-test-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes the scratch files and directories of test processes that have
/// ended.
fn sweep_stale_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("lr-test-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || pid_alive(pid) {
            continue;
        }
        let p = e.path();
        let _ = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
    }
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("running linerate")
}

/// Runs the binary, expects success and a JSON document on stdout.
pub fn run_json(args: &[&str]) -> Value {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "linerate {args:?} failed ({}):\n{stderr}",
        out.status
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub fn only_run_dir(base: &Path) -> PathBuf {
    let dirs: Vec<_> = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "expected one run directory in {}: {dirs:?}",
        base.display()
    );
    dirs[0].clone()
}

/// Every pid of every lab node in a results document.
pub fn lab_pids(doc: &Value) -> Vec<u32> {
    doc["labs"]
        .as_array()
        .map(|labs| {
            labs.iter()
                .flat_map(|l| l["nodes"].as_array().cloned().unwrap_or_default())
                .filter_map(|n| n["pid"].as_u64().map(|p| p as u32))
                .collect()
        })
        .unwrap_or_default()
}

pub fn pid_alive(pid: u32) -> bool {
    // A zombie has no namespaces left; only a running process can hold one.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Interfaces in this (the caller's) namespace.
pub fn root_interfaces() -> Vec<String> {
    std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|n| n.trim().to_string()))
        .collect()
}

/// Asserts that a lab left nothing: its agents are gone, and no lab interface
/// or lr-* namespace exists.
pub fn assert_nothing_left(pids: &[u32]) {
    for _ in 0..100 {
        if pids.iter().all(|&p| !pid_alive(p)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for &p in pids {
        assert!(!pid_alive(p), "agent {p} is still running");
    }
    let ifs = root_interfaces();
    for name in ["gen0", "sink0", "dut0", "dut1"] {
        assert!(
            !ifs.iter().any(|i| i == name),
            "{name} left in the root namespace"
        );
    }
    let ns: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !ns.iter().any(|n| n.starts_with("lr-")),
        "namespaces left: {ns:?}"
    );
}

pub fn test_named<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test named {name} in {}", doc["tests"]))
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Runs `ip ARGS`, failing the test with ip's own error when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A client and a server namespace joined by a veth pair (`DEV_c` ↔
/// `DEV_s` with `NET.1/24` and `NET.2/24`), removed on drop with what was
/// started in them: SIGTERM first (nginx's master takes its workers down),
/// then SIGKILL after 3 s.
pub struct NsPair {
    pub client: String,
    pub server: String,
    children: Vec<std::process::Child>,
}

impl NsPair {
    /// `prefix` and `tag` name the namespaces (`PREFIX<pid>TAG-c/-s`),
    /// `dev` the veth ends (`DEVc0`, `DEVs0`), `net` the /24's first three
    /// octets (e.g. `198.18.20`).
    pub fn new(prefix: &str, tag: &str, dev: &str, net: &str) -> Self {
        let p = format!("{prefix}{}{tag}", std::process::id());
        let pair = NsPair {
            client: format!("{p}-c"),
            server: format!("{p}-s"),
            children: vec![],
        };
        for n in [&pair.client, &pair.server] {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        let (c, s) = (format!("{dev}c0"), format!("{dev}s0"));
        ip(&[
            "link",
            "add",
            &c,
            "netns",
            &pair.client,
            "type",
            "veth",
            "peer",
            "name",
            &s,
            "netns",
            &pair.server,
        ]);
        for (n, d, host) in [(&pair.client, &c, 1), (&pair.server, &s, 2)] {
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("{net}.{host}/24"),
                "dev",
                d,
            ]);
            ip(&["-n", n, "link", "set", d, "up"]);
        }
        pair
    }

    /// Runs a command in a namespace and waits for it.
    pub fn exec(&self, ns: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// Starts a command in a namespace, stopped when the pair goes; its pid.
    pub fn spawn(&mut self, ns: &str, args: &[&str]) -> u32 {
        let c = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawning in a namespace");
        let pid = c.id();
        self.children.push(c);
        pid
    }
}

impl NsPair {
    /// Waits (10 s at most) until something listens on TCP `port` in the
    /// server namespace: a run started before that is refused, and a
    /// refused connection is an error of the run.
    pub fn wait_listening(&self, port: u16) {
        let t0 = std::time::Instant::now();
        let filter = format!("sport = :{port}");
        loop {
            let out = Command::new("ip")
                .args(["netns", "exec", &self.server, "ss", "-Htln", &filter])
                .output()
                .expect("ss");
            if !out.stdout.is_empty() {
                return;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "nothing listens on port {port} in {} after 10 s",
                self.server
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for NsPair {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
        }
        for c in &mut self.children {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_secs(3) {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in [&self.client, &self.server] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// A local agent (`linerate agent --stdio`) running one latency responder
/// session on 127.0.0.1 for `client` 127.0.0.1: the agent (ended by
/// dropping `input` and waiting), its control input, and the port.
pub struct Responder {
    pub agent: std::process::Child,
    pub input: std::process::ChildStdin,
    /// Its answers, kept open while it runs (a closed pipe would end it).
    pub output: std::io::BufReader<std::process::ChildStdout>,
    pub port: u16,
}

pub fn local_responder(token: u64, session: std::time::Duration, max_pps: u32) -> Responder {
    use linerate::proto::{self, Job, Request, Response, PROTO_VERSION};
    use std::process::Stdio;
    let mut a = Command::new(bin())
        .args(["agent", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut w = a.stdin.take().unwrap();
    let mut r = std::io::BufReader::new(a.stdout.take().unwrap());
    let mut call = |req: &Request| {
        proto::write_frame(&mut w, req).unwrap();
        loop {
            match proto::read_message::<Response>(&mut r).unwrap().unwrap() {
                Response::Heartbeat { .. } => continue,
                other => return other,
            }
        }
    };
    call(&Request::Hello {
        proto_version: PROTO_VERSION,
        linerate_version: env!("CARGO_PKG_VERSION").into(),
    });
    let port = match call(&Request::Start {
        test: 1,
        job: Job::LatencyRespond {
            bind: "127.0.0.1".parse().unwrap(),
            token,
            client: "127.0.0.1".parse().unwrap(),
            duration_ms: session.as_millis() as u64,
            max_pps,
            dscp: None,
        },
        start_at_unix_ns: None,
    }) {
        Response::Started { port: Some(p), .. } => p,
        other => panic!("{other:?}"),
    };
    Responder {
        agent: a,
        input: w,
        output: r,
        port,
    }
}

/// Two namespaces, `PREFIX-a` and `PREFIX-b`, joined by a veth pair
/// (`PREFIXa0` NET.1/24 ↔ `PREFIXb0` NET.2/24): a reaches `target` (held on
/// b's loopback) only through its default route, as a host reaches the
/// world through its gateway. Removed on drop.
pub struct DefaultRoutePair {
    names: [String; 2],
}

impl DefaultRoutePair {
    pub fn new(prefix: &str, net: &str, target: &str) -> Self {
        let names = [format!("{prefix}-a"), format!("{prefix}-b")];
        let devs = [format!("{prefix}a0"), format!("{prefix}b0")];
        for n in &names {
            // Left over from a killed run, if at all.
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(std::process::Stdio::null())
                .status();
            ip(&["netns", "add", n]);
        }
        ip(&[
            "link", "add", &devs[0], "netns", &names[0], "type", "veth", "peer", "name", &devs[1],
            "netns", &names[1],
        ]);
        let host = |h: u8| format!("{net}.{h}");
        for (k, (n, d)) in names.iter().zip(&devs).enumerate() {
            let own = format!("{}/24", host(k as u8 + 1));
            ip(&["-n", n, "addr", "add", &own, "dev", d]);
            ip(&["-n", n, "link", "set", d, "up"]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n",
            &names[1],
            "addr",
            "add",
            &format!("{target}/32"),
            "dev",
            "lo",
        ]);
        ip(&["-n", &names[0], "route", "add", "default", "via", &host(2)]);
        ip(&["-n", &names[1], "route", "add", "default", "via", &host(1)]);
        DefaultRoutePair { names }
    }
}

impl Drop for DefaultRoutePair {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// An nginx configuration in `dir` (`dir/nginx.conf`, returned) serving a
/// 1 KiB file at /1k.bin from `dir/root` on `listen` with `workers`
/// workers and `extra` in its http block; requests go to `dir/access.log`.
pub fn nginx_site(dir: &Path, workers: u32, listen: &str, extra: &str) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("1k.bin"), vec![b'x'; 1024]).unwrap();
    let d = dir.to_str().unwrap();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes {workers};\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             daemon off;\nevents {{ worker_connections 256; }}\nhttp {{\n \
             access_log {d}/access.log;\n {extra}\n client_body_temp_path {d};\n \
             proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n \
             scgi_temp_path {d};\n server {{ listen {listen}; root {}; }}\n}}\n",
            root.display()
        ),
    )
    .unwrap();
    conf
}

/// Lines in a log file (0 when it does not exist yet).
pub fn log_lines(log: &Path) -> u64 {
    std::fs::read_to_string(log).map_or(0, |t| t.lines().count() as u64)
}

/// A self-signed leaf certificate for `ip` (not a CA: webpki refuses a CA
/// as an end entity), made with openssl: (key, certificate) PEM paths.
pub fn leaf_cert(dir: &Path, ip: &str) -> (PathBuf, PathBuf) {
    let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
    let ossl = dir.join("openssl.cnf");
    std::fs::write(
        &ossl,
        format!(
            "[req]\ndistinguished_name=dn\nx509_extensions=v3\nprompt=no\n[dn]\nCN=linerate-test\n\
             [v3]\nbasicConstraints=critical,CA:FALSE\nsubjectAltName=IP:{ip}\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .unwrap();
    let ok = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args([
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-config",
        ])
        .arg(&ossl)
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    (key, cert)
}

/// The frames test `t` lost, allowed only as a stall's: none, unless the
/// hypervisor held a CPU at least a tick (`steal_ms`) and the loss is no
/// more than `pps` offers in the stolen time plus a tick (the rule
/// `TrialOutcome::disturbed` applies to a search's trials). Panics on
/// loss beyond that.
pub fn disturbed_loss(t: &serde_json::Value, pps: f64) -> u64 {
    let lost: u64 = t["directions"]
        .as_array()
        .map(|ds| ds.iter().filter_map(|d| d["lost"].as_u64()).sum())
        .unwrap_or(0);
    if lost > 0 {
        let steal = t["steal_ms"].as_f64().unwrap_or(0.0);
        assert!(
            steal >= 10.0 && lost as f64 <= pps * (steal + 10.0) / 1000.0,
            "{} lost {lost} frames at {pps} pps with {steal} ms of steal: the DUT's loss, not the host's",
            t["name"]
        );
        eprintln!(
            "{}: {lost} frames lost while the hypervisor held a CPU {steal} ms (allowed)",
            t["name"]
        );
    }
    lost
}
