//! `linerate http`: its flags and the download tests they describe.

use super::common::{secs, Common};
use super::parse::parse_size;
use crate::orchestrate::config::{Command, DutMode, LabSpec, Pair, TestSpec};
use crate::orchestrate::config::{HttpServerSide, HttpTest, HttpUrl};
use crate::orchestrate::values::check_destination;
use crate::proto::http::Content;
use crate::proto::http::Trust;
use crate::proto::Cidr;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::PathBuf;

/// Flags of `linerate http`.
#[derive(Args, Debug, Clone)]
pub struct HttpArgs {
    /// Where the client runs: `local`, `ns:NAME` or `ssh://[user@]host[:port]`.
    #[arg(long, default_value = "local")]
    pub client: String,
    /// Where linerate's server runs: `local`, `ns:NAME` or `ssh://[user@]host[:port]`.
    #[arg(long, default_value = "local")]
    pub server: String,
    /// The server's address the client connects to (with --server).
    #[arg(long, required_unless_present_any = ["url", "lab"], value_parser = super::parse::parse_host)]
    pub target: Option<super::parse::HostAddr>,
    /// Build a namespace lab (gen -> routing DUT -> sink) and download across it:
    /// the client on gen, linerate's server on sink.
    #[arg(long, conflicts_with_all = ["target", "url", "client", "server"])]
    pub lab: bool,
    /// Accepted for plans (unused by HTTP tests).
    #[arg(long, hide = true)]
    pub client_address: Option<IpAddr>,
    /// Download from a server linerate did not start (nginx, caddy, ...): http(s)://ADDR[:PORT]/PATH.
    #[arg(long, conflicts_with_all = ["target", "matrix", "root", "size", "cold"])]
    pub url: Option<String>,
    /// Seconds to run.
    #[arg(long, short = 't', default_value_t = 10.0, value_name = "SECS", value_parser = super::parse::parse_secs)]
    pub duration: f64,
    /// Connections (the matrix's second column; default 1, or 4 with --matrix).
    #[arg(long, short = 'c')]
    pub connections: Option<u16>,
    /// Stop after this many downloads in all instead of after --duration.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Send this many requests per second in all, on a fixed schedule spread
    /// over the connections; latency is then measured from each request's
    /// intended send time (coordinated omission corrected, as wrk2 does).
    #[arg(long, value_name = "REQ/S", conflicts_with = "matrix")]
    pub rate: Option<f64>,
    /// Size of the generated object linerate's server sends (default 100M).
    #[arg(long, value_parser = parse_size, conflicts_with = "root")]
    pub size: Option<u64>,
    /// Serve real files from this directory on the server's host (with --path).
    #[arg(long, value_name = "DIR", requires = "path")]
    pub root: Option<PathBuf>,
    /// The file to download under --root (e.g. /big.bin).
    #[arg(long, value_name = "/PATH")]
    pub path: Option<String>,
    /// HTTPS.
    #[arg(long)]
    pub tls: bool,
    /// HTTPS with kernel TLS where the kernel has the tls ULP (T3).
    #[arg(long)]
    pub ktls: bool,
    /// Speak HTTP/2 (with --url): ALPN h2 over https, prior knowledge (h2c)
    /// over http; one request at a time per connection, as h2load's default.
    #[arg(long)]
    pub http2: bool,
    /// Accept any server certificate (self-signed servers), as curl -k.
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// Trust this CA certificate (PEM) for --url https://.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// Evict --root files from the page cache first and name what bound the run.
    #[arg(long, requires = "root")]
    pub cold: bool,
    /// TCP congestion control of linerate's server, which sends the bodies (e.g. cubic, bbr).
    #[arg(long, conflicts_with = "url")]
    pub cc: Option<String>,
    /// Seconds the server gives a client to send its request head.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = super::parse::parse_secs)]
    pub request_timeout: f64,
    /// Run the T1 HTTP / T2 HTTPS / T3 HTTPS+kTLS × 1 / -c N connection matrix.
    #[arg(long)]
    pub matrix: bool,
    /// The request method (HEAD: responses carry no body).
    #[arg(long, default_value = "GET")]
    pub method: crate::proto::http::HttpMethod,
    /// Add a request header 'Name: value' (repeatable); Host, Content-Length, Transfer-Encoding
    /// and Connection are the client's own.
    #[arg(long, short = 'H', value_name = "'NAME: VALUE'", value_parser = crate::orchestrate::values::parse_header)]
    pub header: Vec<(String, String)>,
    /// The request body (sent with a Content-Length; at most 64 KiB).
    #[arg(long, value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// The request body, read from this file (at most 64 KiB).
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    /// Ramp the open connections through k6-like stages DURATION:CONNECTIONS,... (e.g.
    /// 10s:1,20s:64,10s:0), each linear from the previous target (0 at first); replaces -c and -t.
    #[arg(long, value_name = "STAGES", value_parser = crate::orchestrate::values::ramp_stages,
          conflicts_with_all = ["connections", "duration", "matrix", "rate", "requests"])]
    pub ramp_connections: Option<crate::orchestrate::values::RampStages>,
    /// Mark the client's and linerate's server's packets with this DSCP (as `linerate tcp --dscp`).
    #[arg(long, value_name = "DSCP")]
    pub dscp: Option<crate::proto::Dscp>,
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: super::common::SweepArgs,
    #[command(flatten)]
    pub criteria: super::criteria_args::CriteriaArgs,
}

/// An `http(s)://host[:port]/path` URL, resolved on this host.
fn parse_url(url: &str) -> Result<(bool, HttpUrl)> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        bail!("--url {url}: write http://ADDR[:PORT]/PATH or https://…");
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        bail!("--url {url}: no host");
    }
    // A port after the host (IPv6 literals are bracketed).
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (
            h,
            p.parse::<u16>()
                .map_err(|_| anyhow!("--url {url}: bad port '{p}'"))?,
        ),
        _ => (authority, if tls { 443 } else { 80 }),
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let target = (bare, port)
        .to_socket_addrs()
        .with_context(|| format!("--url {url}: resolving {bare}"))?
        .next()
        .ok_or_else(|| anyhow!("--url {url}: {bare} has no address"))?;
    Ok((
        tls,
        HttpUrl {
            url: url.to_string(),
            target,
            host: bare.to_string(),
            path: path.to_string(),
        },
    ))
}

/// `linerate http`'s command: between two endpoints, or with `--lab`
/// through a lab's routed DUT.
pub fn http_command(a: &HttpArgs) -> Result<Command> {
    let (pair, spec) = http_tests(a)?;
    let opts = a.common.run_opts_with_lines()?;
    // As for tcp: the server (the sender) on this host's kernel.
    if let Some(cc) = &a.cc {
        if a.lab || !a.server.starts_with("ssh://") {
            super::tcp::check_cc(cc)?;
        }
    }
    if a.lab {
        let lab = LabSpec {
            dut: Some(DutMode::Route),
            fw_rules: 0,
            mtu: 1500,
            queues: 1,
            dut_loss_pct: None,
            dut_police_pps: None,
            rps: Default::default(),
            senders: Default::default(),
            dut_shape: None,
            dut_remark: None,
            dut_netem: None,
            stick_vlans: crate::orchestrate::values::DEFAULT_STICK_VLANS,
            dut_vm: None,
            dut_bond: false,
        };
        return Ok(Command::LabBench(lab, spec, opts));
    }
    Ok(Command::Pair(pair, spec, opts))
}

/// `linerate http`: the endpoints and the test (or the matrix's six).
pub fn http_tests(a: &HttpArgs) -> Result<(Pair, TestSpec)> {
    let allow = a.common.allow_target.clone();
    let request = crate::orchestrate::values::request(
        a.method,
        &a.header,
        a.body.as_deref(),
        a.body_file.as_deref(),
    )
    .map_err(|e| anyhow!(e))?;
    let ramp = a.ramp_connections.clone().map(|r| r.0).unwrap_or_default();
    let duration = match ramp.is_empty() {
        true => secs("--duration", a.duration)?,
        false => crate::orchestrate::values::ramp_duration(&ramp),
    };
    let n = crate::orchestrate::values::ramp_peak(&ramp);
    let n = a.connections.unwrap_or(if a.matrix { 4 } else { n.max(1) });
    check_flags(a, n)?;
    let trust = match &a.cacert {
        Some(p) => Trust::CaPem(
            std::fs::read_to_string(p)
                .with_context(|| format!("--cacert {}: reading it", p.display()))?,
        ),
        None => Trust::Insecure,
    };
    let (url, tls, target) = destination(a, &allow)?;
    let server = url.is_none().then(|| -> Result<HttpServerSide> {
        Ok(HttpServerSide {
            content: match &a.root {
                Some(r) => Content::Root(r.clone()),
                None => Content::Size(a.size.unwrap_or(100_000_000)),
            },
            cold: a.cold,
            request_timeout: secs("--request-timeout", a.request_timeout)?,
            congestion: a.cc.clone(),
        })
    });
    let server = server.transpose()?;
    let path = a.path.clone().unwrap_or_else(|| "/".into());
    if !path.starts_with('/') {
        bail!("--path {path}: start it with / (a path under --root)");
    }
    let base = HttpTest {
        name: String::new(),
        row: None,
        ipv6: target.is_ipv6(),
        server,
        url,
        path,
        tls,
        trust,
        ktls: a.ktls,
        connections: n,
        duration,
        requests: a.requests,
        rate_per_s: a.rate,
        http2: a.http2,
        allow,
        dscp: a.dscp,
        request,
        ramp,
        interval: a.common.line_interval()?,
    };
    let tests = named(base, a.matrix, n);
    let pair = Pair {
        client: super::common::endpoint("--client", &a.client)?,
        server: super::common::endpoint("--server", &a.server)?,
        target,
        client_address: a.client_address,
        vlan: None,
        dut: None,
    };
    Ok((pair, TestSpec::Http(tests)))
}

/// Where the test goes: `--url` (its scheme says TLS), the lab's sink,
/// or `--target`, checked against the allowed targets.
fn destination(a: &HttpArgs, allow: &[Cidr]) -> Result<(Option<HttpUrl>, bool, IpAddr)> {
    Ok(match &a.url {
        Some(u) => {
            let (tls, url) = parse_url(u)?;
            if tls && !a.insecure && a.cacert.is_none() {
                bail!(
                    "--url {u}: linerate carries no public CA list; pass --cacert FILE with the \
                     server's CA (or its self-signed certificate), or --insecure"
                );
            }
            check_destination(url.target.ip(), allow).map_err(|m| anyhow!(m))?;
            let ip = url.target.ip();
            (Some(url), tls, ip)
        }
        // The lab's sink, where its server runs (routed DUT).
        None if a.lab => (None, a.tls || a.ktls, IpAddr::from([198, 19, 0, 1])),
        None => {
            let t = a
                .target
                .as_ref()
                .ok_or_else(|| anyhow!("give --target ADDR (the server's), --url URL or --lab"))?;
            let t = super::common::resolve_target(t, false)?;
            check_destination(t, allow).map_err(|m| anyhow!(m))?;
            (None, a.tls || a.ktls, t)
        }
    })
}

/// The flags `http_tests` refuses together or out of range (`n`: the
/// connections).
fn check_flags(a: &HttpArgs, n: u16) -> Result<()> {
    if n == 0 || n > 1024 {
        bail!("--connections {n} is outside 1..=1024");
    }
    if a.requests == Some(0) {
        bail!("--requests 0: ask for at least one download");
    }
    if a.http2 && a.url.is_none() {
        bail!(
            "--http2 needs --url: linerate serve speaks HTTP/1.1 only; give --url to an HTTP/2 \
             server (nginx `listen ... http2`, h2o, caddy), or leave out --http2"
        );
    }
    if a.http2 && a.ktls {
        bail!("--http2 with --ktls: kTLS is offered for HTTP/1.1 only; leave out one of them");
    }
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate {r}: give the requests per second in all, a positive number");
        }
        if r > 10_000_000.0 {
            bail!("--rate {r}: above 10 M requests/s; leave --rate out to send as fast as the server answers");
        }
    }
    Ok(())
}

/// The test `base` named by its protocol and connections, or with
/// `matrix` the six rows T1.1-T3.2 (HTTP, HTTPS, HTTPS+kTLS; 1 and `n`).
fn named(base: HttpTest, matrix: bool, n: u16) -> Vec<HttpTest> {
    let plural = |n: u16| if n == 1 { "" } else { "s" };
    if matrix {
        let mut v = Vec::new();
        for (t, label, tls, ktls) in [
            (1, "HTTP", false, false),
            (2, "HTTPS", true, false),
            (3, "HTTPS+kTLS", true, true),
        ] {
            for (k, c) in [(1, 1u16), (2, n)] {
                v.push(HttpTest {
                    name: format!("T{t}.{k} {label} {c} connection{}", plural(c)),
                    row: Some(format!("T{t}.{k}")),
                    tls,
                    ktls,
                    connections: c,
                    ..base.clone()
                });
            }
        }
        v
    } else {
        let label = match (base.tls, base.ktls, base.http2) {
            (false, _, true) => "h2c",
            (true, _, true) => "h2",
            (false, _, _) => "http",
            (true, false, _) => "https",
            (true, true, _) => "https+ktls",
        };
        let m = base.request.method;
        let m = if m.is_get() {
            String::new()
        } else {
            format!("{m} ")
        };
        let ramp = if base.ramp.is_empty() { "" } else { "ramp to " };
        vec![HttpTest {
            name: format!("{label} {m}{ramp}{n} connection{}", plural(n)),
            ..base
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `linerate http`'s flags alone, parsed as the command line would.
    #[derive(Parser)]
    struct Http {
        #[command(flatten)]
        a: HttpArgs,
    }

    fn parse(args: &[&str]) -> HttpArgs {
        Http::try_parse_from(std::iter::once("linerate-http").chain(args.iter().copied()))
            .unwrap()
            .a
    }

    #[test]
    fn urls() {
        let (tls, u) = parse_url("https://198.18.0.2:8443/big.bin").unwrap();
        assert!(tls);
        assert_eq!(u.target, "198.18.0.2:8443".parse().unwrap());
        assert_eq!(u.path, "/big.bin");
        let (tls, u) = parse_url("http://[2001:2::1]/").unwrap();
        assert!(!tls);
        assert_eq!(u.target.port(), 80);
        assert_eq!(u.host, "2001:2::1");
        assert!(parse_url("ftp://x/").is_err());
    }

    #[test]
    fn matrix_has_six_rows() {
        let a = parse(&["--target", "198.18.0.2", "--matrix", "-t", "1"]);
        let (_, TestSpec::Http(v)) = http_tests(&a).unwrap() else {
            panic!("not http")
        };
        let rows: Vec<_> = v.iter().filter_map(|t| t.row.clone()).collect();
        assert_eq!(rows, ["T1.1", "T1.2", "T2.1", "T2.2", "T3.1", "T3.2"]);
        assert_eq!(v[1].connections, 4);
        assert!(v[5].ktls && v[5].tls && !v[0].tls);
    }

    #[test]
    fn http2_needs_a_url_and_names_the_test() {
        let a = parse(&["--target", "198.18.0.2", "--http2"]);
        let e = http_tests(&a).unwrap_err().to_string();
        assert!(e.contains("--http2 needs --url"), "{e}");
        let a = parse(&["--url", "http://198.18.0.2/x", "--http2", "--ktls"]);
        assert!(http_tests(&a).is_err());
        for (url, name) in [
            ("http://198.18.0.2:8080/x", "h2c 4 connections"),
            ("https://198.18.0.2/x", "h2 4 connections"),
        ] {
            let a = parse(&["--url", url, "--http2", "-c", "4", "-k"]);
            let (_, TestSpec::Http(v)) = http_tests(&a).unwrap() else {
                panic!("not http")
            };
            assert!(v[0].http2, "{url}");
            assert_eq!(v[0].name, name);
        }
    }

    #[test]
    fn rate_must_be_positive() {
        let a = parse(&["--target", "198.18.0.2", "--rate", "0"]);
        let e = http_tests(&a).unwrap_err().to_string();
        assert!(e.contains("--rate 0"), "{e}");
        let a = parse(&["--target", "198.18.0.2", "--rate", "500", "-c", "8"]);
        let (_, TestSpec::Http(v)) = http_tests(&a).unwrap() else {
            panic!("not http")
        };
        assert_eq!(v[0].rate_per_s, Some(500.0));
        assert_eq!(v[0].connections, 8);
    }

    #[test]
    fn refuses_foreign_urls() {
        let a = parse(&["--url", "http://10.1.2.3/x"]);
        let e = http_tests(&a).unwrap_err().to_string();
        assert!(e.contains("--allow-target"), "{e}");
    }
}
