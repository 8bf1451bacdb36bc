//! The `linerate` binary: parses the command line (stage one), converts it
//! into a validated configuration (stage two) and hands over to the library.
#![forbid(unsafe_code)]

use linerate::cli::{self, plan_config};
use linerate::model::signals;
use linerate::orchestrate::app;
use linerate::results;

use clap::Parser;
use std::process::ExitCode;

/// `eprintln!` that never panics: a closed stderr (`2>&1 | head`) ends the
/// messages, not the process (see `linerate::model::stderr`).
macro_rules! errln {
    ($($arg:tt)*) => {
        linerate::model::stderr::line(&format!($($arg)*))
    };
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(c) => c,
        // Help and version print on stdout (a closed pipe is ignored), errors
        // on stderr, with a hint for flags users bring from iperf3.
        Err(e) => {
            let text: Vec<String> = args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            cli::hints::with_hint(e, &text).exit()
        }
    };
    linerate::report::columns::set_wide(cli.wide);
    let code = match cli.command {
        cli::Command::Agent(a) => app::agent(&cli::agent::agent(&a)),
        cli::Command::Report(a) => linerate::report::run(&cli::report::report(&a)),
        cli::Command::Check(a) => cli::check::check(&a),
        cli::Command::Monitor(a) => match cli::monitor::monitor_config(&a) {
            Err(e) => {
                errln!("error: {e:#}");
                2
            }
            Ok(cfg) => {
                if let Err(e) = signals::install_signal_handlers() {
                    errln!("error: installing signal handlers: {e}");
                    return ExitCode::from(1);
                }
                cli::monitor::run(&a, cfg)
            }
        },
        cli::Command::Serve(a) if a.iperf3 => {
            if let Err(e) = signals::install_signal_handlers() {
                errln!("error: installing signal handlers: {e}");
                return ExitCode::from(1);
            }
            cli::iperf3::serve(&a)
        }
        cli::Command::Serve(a) => match cli::serve::serve_config(&a) {
            Ok(cfg) => {
                if let Err(e) = signals::install_signal_handlers() {
                    errln!("error: installing signal handlers: {e}");
                    return ExitCode::from(1);
                }
                cli::serve::run(&a, &cfg)
            }
            Err(e) => {
                errln!("error: {e:#}");
                2
            }
        },
        cli::Command::Completions(a) => cli::completions::completions(&a),
        cli::Command::Man(a) => cli::completions::man(&a),
        cli::Command::Schema => {
            let s = serde_json::to_string_pretty(&results::json_schema()).unwrap_or_default();
            linerate::model::stdout::println(&s);
            0
        }
        cli::Command::Doctor(a) => {
            let mut out = std::io::stdout().lock();
            linerate_doctor::run_cli(&a, &mut out)
        }
        command => match configure(command, &args) {
            Err(e) => {
                errln!("error: {e:#}");
                2
            }
            Ok(config) => {
                if let Err(e) = signals::install_signal_handlers() {
                    errln!("error: installing signal handlers: {e}");
                    return ExitCode::from(1);
                }
                app::execute(config)
            }
        },
    };
    linerate::plan::trust::remove_copies();
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Stage two: a plan file or the flags of a controller command become one
/// validated configuration.
fn configure(
    command: cli::Command,
    args: &[std::ffi::OsString],
) -> anyhow::Result<linerate::orchestrate::config::Command> {
    let criteria = command.criteria_args().map(|c| c.opts()).transpose()?;
    if let Some(c) = &criteria {
        cli::criteria_args::check_measured(&c.expect, &command.name(), &command.figure_flags())?;
        if c.abort.is_some() {
            linerate::orchestrate::abort::check_command(&command.name(), false)?;
        }
    }
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let sweep = match command.sweep_args() {
        Some(flags) => cli::sweep::configure(&text, &command.name(), flags)?,
        None => None,
    };
    let mut config = match (sweep, command) {
        (Some((sweep, opts)), _) => linerate::orchestrate::config::Command::Sweep(sweep, opts),
        (None, cli::Command::Run(a)) => plan_config::run_config(&a)?,
        (None, other) => cli::to_config(other)?,
    };
    linerate::orchestrate::latency_at::check_clock(&config)?;
    if let Some(c) = criteria {
        if c.abort.is_some() {
            let iperf3 = matches!(config, linerate::orchestrate::config::Command::Iperf3(..));
            linerate::orchestrate::abort::check_command("", iperf3)?;
        }
        config.set_criteria(c);
    }
    Ok(config)
}
