//! Command-line flags (stage one: close to what the user typed) and their
//! conversion into the validated configuration (stage two,
//! [`crate::orchestrate::config`]), which the orchestration layer runs. Nothing
//! below this module sees a clap type. Plan files reach the same stage two:
//! each `[[test]]` is turned into the flags of its ad-hoc command and parsed
//! here, so a plan accepts exactly what the command line does.
//!
//! One file per command holds its flags and the function that turns them
//! into the validated configuration; the flag groups several commands share
//! are in `common` and `target`, the value parsers in `parse`;
//! `completions` makes shell completions and man pages from them. This file
//! holds the command enum on top of them. This layer parses and
//! dispatches: it holds no trial runner and writes nothing into the
//! results document (`tests/layers.rs` holds it to that).

pub mod agent;
pub mod check;
pub mod common;
pub mod completions;
pub mod criteria_args;
pub mod hints;
pub mod http;
pub mod iperf3;
pub mod lab;
pub mod latency;
pub mod monitor;
pub mod parse;
pub mod plan_config;
pub mod ramp;
pub mod report;
pub mod run_args;
pub mod search;
pub mod serve;
pub mod sweep;
pub mod target;
pub mod tcp;
pub mod udp;

use crate::orchestrate::config::{Command as Cmd, TestSpec};
use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "linerate",
    version,
    about = "A network loadtest lab in one binary",
    long_about = "linerate measures what a link, host or router forwards, from 64-byte packets to \
                  bulk TCP, on the ordinary Linux network stack. `linerate lab` builds a throwaway \
                  gen -> DUT -> sink lab of network namespaces and runs the standard suite."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Print every column of the tables, however wide the terminal (by
    /// default they fit its width, or COLUMNS, dropping the least needed
    /// columns and saying which)
    #[arg(long, global = true)]
    pub wide: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build a namespace lab (gen -> DUT -> sink), run the standard suite, tear it down.
    #[command(after_help = criteria_args::EXIT_CODES)]
    Lab(lab::LabArgs),
    /// TCP bulk test between two endpoints you name (local, ns:NAME, ssh://host).
    #[command(after_help = criteria_args::EXIT_CODES,
              mut_arg("expect", |a| a.help(criteria_args::expect_help("tcp"))))]
    Tcp(tcp::TcpArgs),
    /// UDP packet-stream test between two endpoints you name.
    #[command(after_help = criteria_args::EXIT_CODES,
              mut_arg("expect", |a| a.help(criteria_args::expect_help("udp"))))]
    Udp(udp::UdpArgs),
    /// Latency under load: probes idle, during a TCP or UDP load, and idle after (rrul's shape).
    #[command(after_help = criteria_args::EXIT_CODES,
              mut_arg("expect", |a| a.help(criteria_args::expect_help("latency"))))]
    Latency(latency::LatencyArgs),
    /// Monitor latency for hours or days: responders and ICMP echo, smokeping-style windows.
    Monitor(monitor::MonitorArgs),
    /// HTTP/HTTPS downloads: N connections against `linerate serve` or any --url; --matrix runs T1/T2/T3.
    #[command(after_help = criteria_args::EXIT_CODES,
              mut_arg("expect", |a| a.help(criteria_args::expect_help("http"))))]
    Http(http::HttpArgs),
    /// Serve downloads over HTTP/1.1 or HTTPS (sendfile, rustls, kTLS where present) until Ctrl-C.
    Serve(serve::ServeArgs),
    /// Load ramp (warmup, linear ramp, hold) with the saturation point, trex-loadtest style.
    #[command(after_help = criteria_args::EXIT_CODES,
              mut_arg("expect", |a| a.help(criteria_args::expect_help("ramp"))))]
    Ramp(ramp::RampArgs),
    /// Throughput search: MLRsearch NDR/PDR, RFC 2544 throughput and frame loss.
    #[command(after_help = criteria_args::EXIT_CODES,
              mut_arg("expect", |a| a.help(criteria_args::expect_help("search"))))]
    Search(search::SearchArgs),
    /// Run a plan file: named hosts (local, netns, ssh) and the tests between them.
    #[command(after_help = criteria_args::EXIT_CODES)]
    Run(run_args::RunArgs),
    /// Explain likely bottlenecks of this host from sysfs/procfs evidence.
    Doctor(linerate_doctor::DoctorArgs),
    /// Run as an agent speaking the control protocol on stdin/stdout (started by the controller).
    Agent(agent::AgentArgs),
    /// Write the HTML report (or CSV / Prometheus exports) of one or more run directories.
    Report(report::ReportFlags),
    /// Check a finished run: criteria (--expect) and a comparison with a baseline run.
    Check(check::CheckArgs),
    /// Print the JSON Schema of results.json.
    Schema,
    /// Print a shell completion script (bash, zsh, fish), made from these flags.
    Completions(completions::CompletionsArgs),
    /// Print linerate's man page (or a command's), or write all of them with --dir.
    Man(completions::ManArgs),
}

// ---------------------------------------------------------------------------
// Stage two: flags → validated configuration.

impl Command {
    /// `--sweep` and its companions, on the test commands that take them.
    pub fn sweep_args(&self) -> Option<&common::SweepArgs> {
        match self {
            Command::Tcp(a) => Some(&a.sweep),
            Command::Udp(a) => Some(&a.sweep),
            Command::Latency(a) => Some(&a.sweep),
            Command::Http(a) => Some(&a.sweep),
            Command::Ramp(a) => Some(&a.sweep),
            Command::Search(a) => Some(&a.sweep),
            _ => None,
        }
    }

    /// The command's name, as typed.
    pub fn name(&self) -> String {
        match self {
            Command::Tcp(_) => "tcp",
            Command::Udp(_) => "udp",
            Command::Latency(_) => "latency",
            Command::Http(_) => "http",
            Command::Ramp(_) => "ramp",
            Command::Search(_) => "search",
            _ => "",
        }
        .to_string()
    }

    /// The flags given that add figures to what the command measures
    /// (see [`criteria_args::measured_by`]); a sweep may set any of them
    /// on a point, so with `--sweep` all count as given.
    pub fn figure_flags(&self) -> Vec<&'static str> {
        if self.sweep_args().is_some_and(|s| !s.sweep.is_empty()) {
            return vec![
                "--latency",
                "--load udp",
                "--load tcp",
                "--method mlr",
                "--method rfc2544",
            ];
        }
        let method = |m: search::MethodArg| match m {
            search::MethodArg::Mlr => vec!["--method mlr"],
            search::MethodArg::Rfc2544 => vec!["--method rfc2544"],
            search::MethodArg::Both => vec!["--method mlr", "--method rfc2544"],
            search::MethodArg::BackToBack => Vec::new(),
        };
        match self {
            Command::Tcp(a) if a.probes.latency => vec!["--latency"],
            Command::Udp(a) if a.probes.latency => vec!["--latency"],
            Command::Latency(a) => vec![match a.load {
                latency::LoadArg::Tcp => "--load tcp",
                latency::LoadArg::Udp => "--load udp",
            }],
            Command::Search(a) => method(a.method),
            _ => Vec::new(),
        }
    }

    /// The flags that decide a run, on commands that run tests.
    pub fn criteria_args(&self) -> Option<&criteria_args::CriteriaArgs> {
        match self {
            Command::Lab(a) => Some(&a.criteria),
            Command::Tcp(a) => Some(&a.criteria),
            Command::Udp(a) => Some(&a.criteria),
            Command::Latency(a) => Some(&a.criteria),
            Command::Http(a) => Some(&a.criteria),
            Command::Ramp(a) => Some(&a.criteria),
            Command::Search(a) => Some(&a.criteria),
            Command::Run(a) => Some(&a.criteria),
            Command::Monitor(_)
            | Command::Serve(_)
            | Command::Doctor(_)
            | Command::Agent(_)
            | Command::Report(_)
            | Command::Check(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Schema => None,
        }
    }
}

/// Says once, on stderr, what a rate given in bit/s or % of the line asks of
/// a packet test in pps: `--rate 1G` at 64 B frames is 1.49 Mpps, not the
/// 1 Gpps or the 1 Gbit/s of payload a user may have thought.
fn say_rate_in_pps(
    rate: Option<crate::model::units::Rate>,
    frame: crate::proto::FrameSpec,
    common: &common::Common,
) {
    let Some(rate) = rate else { return };
    let avg = crate::orchestrate::values::average_frame(frame);
    if let Some(note) =
        crate::model::units::rate_as_pps_note(rate, frame, avg, common.line_rate_bps())
    {
        crate::model::stderr::errln!("{note}");
    }
}

/// Converts a controller command into its validated configuration.
pub fn to_config(command: Command) -> Result<Cmd> {
    match command {
        Command::Lab(a) => lab::lab_config(&a),
        Command::Tcp(a) if iperf3::is_iperf3(&a.ends.server) => {
            let (client, t) = iperf3::tcp_test(&a)?;
            Ok(Cmd::Iperf3(client, t, a.common.run_opts_with_lines()?))
        }
        Command::Udp(a) if iperf3::is_iperf3(&a.ends.server) => {
            let (client, t) = iperf3::udp_test(&a)?;
            Ok(Cmd::Iperf3(client, t, a.common.run_opts_with_lines()?))
        }
        Command::Tcp(a) => {
            let (pair, spec) = tcp::tcp(&a)?;
            // Endpoints on this host share its kernel: check --cc here. On
            // ssh hosts (and in plans) their agent refuses it, naming the host.
            let here = |e: &crate::orchestrate::config::Endpoint| {
                !matches!(e, crate::orchestrate::config::Endpoint::Ssh(_))
            };
            if let Some(cc) = &a.cc {
                if here(&pair.client) && here(&pair.server) {
                    tcp::check_cc(cc)?;
                }
            }
            Ok(Cmd::Pair(pair, spec, a.common.run_opts_with_lines()?))
        }
        Command::Udp(a) => {
            let (pair, spec) = udp::udp_cmd(&a)?;
            say_rate_in_pps(a.rate, a.frame_size, &a.common);
            Ok(Cmd::Pair(pair, spec, a.common.run_opts_with_lines()?))
        }
        Command::Latency(a) => {
            let spec = latency::latency_cmd(&a)?;
            if a.load == latency::LoadArg::Udp {
                say_rate_in_pps(a.rate, a.frame_size, &a.common);
            }
            // As for tcp: a lab and local or ns: endpoints share this kernel.
            let ssh = |e: &str| e.starts_with("ssh://");
            if let Some(cc) = &a.cc {
                if a.target.lab || !(ssh(&a.target.client) || ssh(&a.target.server)) {
                    tcp::check_cc(cc)?;
                }
            }
            target::bench_command(&a.target, spec, &a.common)
        }
        Command::Ramp(a) => {
            let spec = TestSpec::Ramp(ramp::ramp(&a)?);
            target::bench_command(&a.target, spec, &a.common)
        }
        Command::Search(a) => {
            let spec = TestSpec::Search(search::search_cfg(&a)?);
            target::bench_command(&a.target, spec, &a.common)
        }
        Command::Http(a) => http::http_command(&a),
        Command::Run(_)
        | Command::Serve(_)
        | Command::Doctor(_)
        | Command::Agent(_)
        | Command::Report(_)
        | Command::Check(_)
        | Command::Monitor(_)
        | Command::Completions(_)
        | Command::Man(_)
        | Command::Schema => {
            bail!("not a command with a configuration of its own")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrate::config::Endpoint;

    /// Clap checks its definitions (duplicate short flags, bad
    /// references) only in debug builds when parsing: check them always.
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn ssh_options() {
        let cli = Cli::try_parse_from([
            "linerate",
            "tcp",
            "--target",
            "198.18.0.2",
            "--client",
            "ssh://root@198.18.0.1:2222",
            "--ssh-option",
            "Compression=no",
        ])
        .unwrap();
        let Command::Tcp(a) = cli.command else {
            panic!()
        };
        let o = a.common.ssh.options().unwrap();
        assert_eq!(o.options, vec![("Compression".into(), "no".into())]);
        assert!(!o.accept_new && !o.push);
        let (p, _) = tcp::tcp(&a).unwrap();
        assert!(matches!(p.client, Endpoint::Ssh(_)));
        let mut bad = a.common.ssh.clone();
        bad.ssh_option = vec!["novalue".into()];
        assert!(bad.options().unwrap_err().to_string().contains("KEY=VALUE"));
    }
}
