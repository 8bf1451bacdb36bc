//! iperf3 interop on the command line: `linerate tcp|udp --server
//! iperf3://HOST[:PORT]` (a stock iperf3 server as the far end) and
//! `linerate serve --iperf3` (stock iperf3 clients test against linerate).
//! Flags become an [`Iperf3Test`] or a server configuration here
//! (`orchestrate::iperf3_serve` serves); each test is recorded as a `TestResult` whose far-end figures are marked as
//! such: the far end's roles say "far end" and its own results are kept in
//! `far_end`.

use super::common::{direction, duration, Common, Endpoints};
use super::parse::parse_host;
use super::serve::ServeArgs;
use crate::model::stderr::errln;
use crate::model::units::Rate;
use crate::orchestrate::config::Endpoint;
use crate::orchestrate::config::Iperf3Test;
use crate::orchestrate::config::RunOpts;
use crate::orchestrate::config::{Iperf3ServerConfig as ServerConfig, Iperf3ServerLimits};
use crate::orchestrate::iperf3_serve::Iperf3Serve;
use crate::proto::iperf3::{self as wire, ClientJob, Mode, TestParams, Transport};
use crate::proto::{Direction, FrameSpec};
use anyhow::{anyhow, bail, Result};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub const SCHEME: &str = "iperf3://";

/// How long a far end may stay silent when an answer is due.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether an endpoint names an iperf3 server.
pub fn is_iperf3(endpoint: &str) -> bool {
    endpoint.starts_with(SCHEME)
}

/// `iperf3://HOST[:PORT]`: the server's address (a name resolves here,
/// IPv4 first unless `ipv6`), port 5201 unless given.
pub fn parse_server(s: &str, ipv6: bool) -> Result<SocketAddr> {
    let rest = s
        .strip_prefix(SCHEME)
        .ok_or_else(|| anyhow!("'{s}' is not an iperf3:// endpoint"))?
        .trim_end_matches('/');
    let (host, port) = if let Some(r) = rest.strip_prefix('[') {
        let (h, tail) = r
            .split_once(']')
            .ok_or_else(|| anyhow!("{s}: an IPv6 address needs its closing ]"))?;
        (h, tail.strip_prefix(':'))
    } else if rest.matches(':').count() == 1 {
        let (h, p) = rest.split_once(':').unwrap_or((rest, ""));
        (h, Some(p))
    } else {
        (rest, None)
    };
    let port = match port {
        None => wire::DEFAULT_PORT,
        Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
            anyhow!("{s}: port '{p}' is not 1..=65535 (write iperf3://HOST:5201)")
        })?,
    };
    let addr = parse_host(host)
        .map_err(|e| anyhow!("{s}: {e:#}"))?
        .pick(ipv6)?;
    Ok(SocketAddr::new(addr, port))
}

/// The iperf3 server of `--server`, checked against the allow-list, and
/// the flags that have no meaning against one refused.
fn server_of(e: &Endpoints, common: &Common) -> Result<SocketAddr> {
    if e.target.is_some() {
        bail!("--target: the iperf3:// server is the target; drop --target");
    }
    if e.port.is_some() {
        bail!("--port: an iperf3 server takes its streams on its own port; give it as iperf3://HOST:PORT");
    }
    if e.dscp.is_some() {
        bail!(
            "--dscp: not yet against an iperf3 server; run linerate at both ends to mark and count"
        );
    }
    if e.dut_host.is_some() {
        bail!("--dut-host: tests against an iperf3 server do not watch a DUT; drop --dut-host, or run linerate at both ends (--server ns:NAME or ssh://HOST) to watch one");
    }
    let server = parse_server(&e.server, e.ipv6)?;
    crate::orchestrate::values::check_destination(server.ip(), &common.allow_target).map_err(|m| {
        anyhow!("{m}; an iperf3 server on the internet is outside them: name it with --allow-target {}/{} if you mean to load it",
            server.ip(), if server.is_ipv6() { 128 } else { 32 })
    })?;
    Ok(server)
}

/// Where the client runs (`--client`: local, ns:NAME, ssh://…).
fn client_of(e: &Endpoints) -> Result<Endpoint> {
    super::common::endpoint("--client", &e.client)
}

/// The test an agent runs as the client of `server`.
pub fn client_test(
    name: String,
    direction: Direction,
    server: SocketAddr,
    params: TestParams,
    common: &Common,
) -> Iperf3Test {
    Iperf3Test {
        name,
        direction,
        job: ClientJob {
            server,
            params: params.to_wire(),
            cpus: common.cpus.clone().map(|c| c.0).unwrap_or_default(),
            answer_timeout_ms: ANSWER_TIMEOUT.as_millis() as u64,
            allow: common.allow_target.clone(),
        },
        params,
        interval: common
            .line_interval()
            .unwrap_or(std::time::Duration::from_secs(1)),
        serve: None,
    }
}

fn mode(d: Direction) -> Mode {
    match d {
        Direction::Forward => Mode::ClientSends,
        Direction::Reverse => Mode::Reverse,
        Direction::Both => Mode::Bidir,
    }
}

/// The TCP block size towards an iperf3 server when `--buffer` is not
/// given. The block is also what the server reads or writes at a time:
/// iperf3 3.x serves every stream from one thread, one block per stream
/// each time it wakes. 768 KiB beat iperf3's 128 KiB in every shape we ran
/// (1 to 16 streams, -R, --bidir: bench/README.md, "The server's block"); 1 MiB, its
/// largest, was slower than 768 KiB at 4 streams, for `iperf3 -c -l 1M`
/// too. The server holds a block per stream, so many streams get smaller
/// blocks: at most [`FAR_END_BLOCKS`] in all, never below 128 KiB. A test
/// with a rate keeps 128 KiB: the server is not the limit there, and an
/// iperf3 server paces what it sends (-R) a block at a time, so a large
/// block would make a slow rate bursty.
fn default_block(streams: u16, mode: Mode, paced: bool) -> u32 {
    if paced {
        return wire::DEFAULT_TCP_LEN;
    }
    let buffers = u32::from(streams.max(1)) * if mode == Mode::Bidir { 2 } else { 1 };
    (FAR_END_BLOCKS / buffers).clamp(wire::DEFAULT_TCP_LEN, BLOCK) / 4096 * 4096
}

/// The default block towards an iperf3 server, for a few streams.
const BLOCK: u32 = 768 * 1024;
/// What the default blocks may take at the server, all streams together.
const FAR_END_BLOCKS: u32 = 32 << 20;

/// `linerate tcp --server iperf3://...`.
pub fn tcp_test(a: &super::tcp::TcpArgs) -> Result<(Endpoint, Iperf3Test)> {
    let server = server_of(&a.ends, &a.common)?;
    if !(1..=wire::MAX_STREAMS as u16).contains(&a.streams) {
        bail!(
            "--streams {}: iperf3 servers take 1..={}",
            a.streams,
            wire::MAX_STREAMS
        );
    }
    if a.probes.latency {
        bail!("--latency needs linerate's responder at the far end; an iperf3 server has none");
    }
    if a.vlan.is_some() {
        bail!("--vlan puts linerate's own ends on a VLAN sub-interface; an iperf3 server uses its host's own interfaces: put it on a VLAN device there and leave --vlan out");
    }
    let mode = mode(direction(&a.ends));
    let len = a
        .buffer
        .unwrap_or_else(|| default_block(a.streams, mode, a.rate.is_some()));
    if !(1..=wire::MAX_TCP_LEN).contains(&len) {
        bail!(
            "--buffer {len}: iperf3 takes blocks of 1..={} bytes",
            wire::MAX_TCP_LEN
        );
    }
    let total_bps = a
        .rate
        .map(|r| super::tcp::tcp_rate_bps(r, a.common.line_rate_bps()))
        .transpose()?;
    let params = TestParams {
        transport: Transport::Tcp,
        streams: u32::from(a.streams),
        mode,
        time_s: duration(a.ends.duration)?.as_secs_f64(),
        omit_s: super::parse::omit_secs(a.omit)?,
        len,
        // iperf3 paces each stream to -b: share the direction's rate.
        bandwidth_bps: total_bps.map_or(0, |b| (b / f64::from(a.streams)) as u64),
        counters_64bit: false,
        congestion: a.cc.clone(),
        client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
    };
    let name = format!(
        "iperf3 tcp {} stream{}",
        a.streams,
        if a.streams == 1 { "" } else { "s" }
    );
    Ok((
        client_of(&a.ends)?,
        client_test(name, direction(&a.ends), server, params, &a.common),
    ))
}

/// UDP payload bytes in a frame of `frame` bytes (FCS included).
pub fn udp_payload(frame: u32, ipv6: bool) -> u32 {
    frame.saturating_sub(if ipv6 {
        14 + 40 + 8 + 4
    } else {
        14 + 20 + 8 + 4
    })
}

/// `linerate udp --server iperf3://...`: `--flows N` streams (each its
/// own source port), `--rate` shared by them.
pub fn udp_test(a: &super::udp::UdpArgs) -> Result<(Endpoint, Iperf3Test)> {
    let server = server_of(&a.ends, &a.common)?;
    let FrameSpec::Fixed(frame) = a.frame_size else {
        bail!("--frame-size imix: iperf3 sends one datagram size; give a size in bytes");
    };
    let len = udp_payload(frame, server.is_ipv6());
    if !(wire::MIN_UDP_LEN..=wire::MAX_UDP_LEN).contains(&len) {
        bail!(
            "--frame-size {frame}: its {len}-byte UDP payload is outside iperf3's {}..={}; give {}..={} bytes",
            wire::MIN_UDP_LEN,
            wire::MAX_UDP_LEN,
            frame - len + wire::MIN_UDP_LEN,
            frame - len + wire::MAX_UDP_LEN
        );
    }
    if a.probes.latency {
        bail!("--latency needs linerate's responder at the far end; an iperf3 server has none");
    }
    let streams = u32::from(a.flows.unwrap_or(1));
    if !(1..=wire::MAX_STREAMS).contains(&streams) {
        bail!(
            "--flows {streams}: iperf3 servers take 1..={} streams",
            wire::MAX_STREAMS
        );
    }
    let pps = a
        .rate
        .map(|r: Rate| r.pps(f64::from(frame), a.common.line_rate_bps()));
    let params = TestParams {
        transport: Transport::Udp,
        streams,
        mode: mode(direction(&a.ends)),
        time_s: duration(a.ends.duration)?.as_secs_f64(),
        omit_s: super::parse::omit_secs(a.omit)?,
        len,
        // iperf3's -b counts payload bits per stream.
        bandwidth_bps: pps.map_or(0, |p| {
            (p * f64::from(len) * 8.0 / f64::from(streams)) as u64
        }),
        counters_64bit: false,
        congestion: None,
        client_version: Some(format!("linerate {}", env!("CARGO_PKG_VERSION"))),
    };
    Ok((
        client_of(&a.ends)?,
        client_test(
            format!("iperf3 udp {frame}"),
            direction(&a.ends),
            server,
            params,
            &a.common,
        ),
    ))
}

/// `linerate serve --iperf3`: serves stock iperf3 clients until Ctrl-C
/// (or `--duration`), a results directory per test. Returns the exit status.
pub fn serve(a: &ServeArgs) -> i32 {
    match serve_config(a) {
        Ok(cfg) => crate::orchestrate::iperf3_serve::serve(&cfg),
        Err(e) => {
            errln!("error: {e:#}");
            2
        }
    }
}

fn serve_config(a: &ServeArgs) -> Result<Iperf3Serve> {
    let listen = match (a.listen, a.port) {
        (Some(_), Some(_)) => bail!("give --listen ADDR:PORT or --port PORT, not both"),
        (Some(l), None) => l,
        (None, port) => SocketAddr::new(
            IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            port.unwrap_or(wire::DEFAULT_PORT),
        ),
    };
    if !(a.max_test_time > 0.0 && a.max_test_time <= wire::MAX_TIME_S) {
        bail!(
            "--max-test-time {} s is outside (0, {}] s: iperf3 clients ask for at most {} s",
            a.max_test_time,
            wire::MAX_TIME_S,
            wire::MAX_TIME_S
        );
    }
    let cfg = ServerConfig {
        listen,
        cpus: vec![],
        answer_timeout: ANSWER_TIMEOUT,
        limits: Iperf3ServerLimits {
            max_time_s: a.max_test_time,
            max_udp_send_bps: a.max_udp_send_rate.round() as u64,
            max_clients: a.max_clients as usize,
        },
    };
    let opts = RunOpts {
        name: a.output.name.clone(),
        line_rate_bps: 10e9,
        line_rate_given: false,
        criteria: Default::default(),
        results_dir: a.output.results_dir.clone(),
        write_results: !a.output.no_results,
        json: a.output.json,
        progress: false,
        interval_s: None,
        allow_target: vec![],
        cpus: vec![],
        expect_loss: false,
        ssh: Default::default(),
    };
    Ok(Iperf3Serve {
        server: cfg,
        max_udp_send_rate: a.max_udp_send_rate,
        duration_s: a.duration,
        opts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_endpoints_parse() {
        let p = |s| parse_server(s, false);
        assert_eq!(
            p("iperf3://198.18.0.2").unwrap(),
            "198.18.0.2:5201".parse().unwrap()
        );
        assert_eq!(
            p("iperf3://198.18.0.2:5202/").unwrap(),
            "198.18.0.2:5202".parse().unwrap()
        );
        assert_eq!(
            p("iperf3://[2001:2::2]:7").unwrap(),
            "[2001:2::2]:7".parse().unwrap()
        );
        assert_eq!(
            p("iperf3://2001:2::2").unwrap(),
            "[2001:2::2]:5201".parse().unwrap()
        );
        for bad in [
            "iperf3://198.18.0.2:0",
            "iperf3://198.18.0.2:x",
            "iperf3://[2001:2::2",
            "iperf3://",
            "tcp://x",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert!(is_iperf3("iperf3://h") && !is_iperf3("ns:sink"));
        assert_eq!(udp_payload(1518, false), 1472);
        assert_eq!(udp_payload(1518, true), 1452);
    }

    /// The block the server is asked to read or write: 768 KiB, less with
    /// many streams, 128 KiB with a rate, and what `--buffer` says
    /// whenever it is given.
    #[test]
    fn the_tcp_block_follows_streams_direction_and_buffer() {
        use clap::Parser;
        let len = |extra: &[&str]| -> Result<u32> {
            let mut argv = vec!["linerate", "tcp", "--server", "iperf3://198.18.0.2"];
            argv.extend_from_slice(extra);
            let cli = crate::cli::Cli::try_parse_from(&argv)?;
            let crate::cli::Command::Tcp(a) = cli.command else {
                bail!("not a tcp command");
            };
            Ok(tcp_test(&a)?.1.params.len)
        };
        assert_eq!(len(&[]).unwrap(), 768 * 1024);
        assert_eq!(len(&["-P", "16"]).unwrap(), 768 * 1024);
        assert_eq!(len(&["-R"]).unwrap(), 768 * 1024);
        assert_eq!(len(&["--bidir", "-P", "8"]).unwrap(), 768 * 1024);
        // Many streams: 32 MiB of blocks at the server in all, 128 KiB at least.
        assert_eq!(len(&["-P", "64"]).unwrap(), 512 * 1024);
        assert_eq!(len(&["--bidir", "-P", "64"]).unwrap(), 256 * 1024);
        assert_eq!(len(&["-P", "128", "-R"]).unwrap(), 256 * 1024);
        assert_eq!(len(&["--bidir", "-P", "128"]).unwrap(), 128 * 1024);
        // With a rate the server is not the limit: iperf3's block.
        assert_eq!(len(&["-R", "-b", "10M"]).unwrap(), 128 * 1024);
        assert_eq!(len(&["-b", "5G"]).unwrap(), 128 * 1024);
        assert_eq!(len(&["--buffer", "65536"]).unwrap(), 65536);
        assert_eq!(len(&["--buffer", "65536", "-b", "1G"]).unwrap(), 65536);
        assert_eq!(len(&["-P", "4", "--buffer", "1048576"]).unwrap(), 1 << 20);
        let e = len(&["--buffer", "2097152"]).unwrap_err().to_string();
        assert!(e.contains("1..=1048576"), "{e}");
    }
}
