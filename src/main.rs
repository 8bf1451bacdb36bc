//! The `linerate` binary: parses the command line and hands over to the library.
#![deny(unsafe_code)]

use linerate::{adhoc, agent, cli, controller, results, suite};

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let code = match cli.command {
        cli::Command::Agent(a) => {
            let netns = match a.netns.as_deref() {
                None => agent::Netns::Current,
                Some("new") => agent::Netns::New,
                Some(n) => agent::Netns::Named(n.to_string()),
            };
            let limits = agent::Limits {
                max_duration: std::time::Duration::from_secs(a.max_duration),
                max_rate_pps: a.max_rate,
            };
            match agent::run(netns, limits) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("agent: {e:#}");
                    1
                }
            }
        }
        cli::Command::Report(a) => linerate::report::run(&a),
        cli::Command::Schema => {
            let s = serde_json::to_string_pretty(&results::json_schema()).unwrap_or_default();
            println!("{s}");
            0
        }
        cli::Command::Doctor(a) => {
            let mut out = std::io::stdout().lock();
            linerate_doctor::run_cli(&a, &mut out)
        }
        command => {
            if let Err(e) = controller::install_signal_handlers() {
                eprintln!("error: installing signal handlers: {e}");
                return ExitCode::from(1);
            }
            match command {
                cli::Command::Lab(a) => suite::lab(&a),
                cli::Command::Tcp(a) => adhoc::tcp(&a),
                cli::Command::Udp(a) => adhoc::udp(&a),
                cli::Command::Ramp(a) => linerate::loadtest::ramp(&a),
                cli::Command::Search(a) => linerate::loadtest::search_cmd(&a),
                _ => 2,
            }
        }
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
