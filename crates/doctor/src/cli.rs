//! The `linerate doctor` command: raw flags (`DoctorArgs`, strings as typed)
//! are validated into `Options` first, then the inspection (or capture)
//! runs and the report is printed. The binary only parses the command line
//! and calls `run_cli`.
//!
//! Exit status: 0 no warnings, 1 a warning or critical finding, 2 doctor
//! could not run (bad argument, unreadable root, capture not written).

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;

use crate::parse::{parse_cpu_list, parse_duration, parse_rate, BadValue};
use crate::{capture, exit_code, inspect, render_text, Error, Options, Report};

/// Exit status when doctor could not run at all.
const EXIT_USAGE: i32 = 2;

/// Flags of `linerate doctor`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct DoctorArgs {
    /// Directory holding the host's sys/ and proc/: / for this host, or a
    /// fixture or extracted capture.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Also write every file read to FILE.tar.gz; extract it and pass its
    /// directory as --root to reproduce the report elsewhere.
    #[arg(long, value_name = "FILE.tar.gz")]
    pub capture: Option<PathBuf>,

    /// Interface the test uses (repeat, or separate with commas). Default:
    /// every physical NIC whose link is up.
    #[arg(long = "nic", value_name = "IFACE", value_delimiter = ',')]
    pub nics: Vec<String>,

    /// Cores the test runs on, e.g. 0-3,8. Enables the checks that compare
    /// IRQs, NUMA node and SMT siblings with the test's cores.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Rate the test wants in bits/s, e.g. 100G, 25G, 10000M (with --rtt:
    /// socket buffers are checked against the bandwidth-delay product).
    #[arg(long, value_name = "RATE")]
    pub target_rate: Option<String>,

    /// Round-trip time of the test path, e.g. 1ms, 200us.
    #[arg(long, value_name = "DURATION")]
    pub rtt: Option<String>,

    /// Print the report as JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Colour the text report: auto (stdout is a terminal and NO_COLOR is
    /// unset), always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// When to colour the text report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl DoctorArgs {
    /// Validates the raw flags into options (the second parsing stage).
    pub fn to_options(&self) -> Result<Options, Error> {
        let cpus = match &self.cpus {
            None => None,
            Some(raw) => {
                let invalid = |reason: BadValue| Error::InvalidArgument {
                    flag: "--cpus",
                    value: raw.clone(),
                    reason: reason.0,
                    hint: "give CPU numbers and ranges such as 0-3,8",
                };
                let list = parse_cpu_list(raw).map_err(invalid)?;
                if list.is_empty() {
                    return Err(invalid(BadValue("the list is empty".into())));
                }
                Some(list)
            }
        };
        let target_rate_bps = self
            .target_rate
            .as_deref()
            .map(|raw| {
                parse_rate(raw).map_err(|reason| Error::InvalidArgument {
                    flag: "--target-rate",
                    value: raw.to_string(),
                    reason: reason.0,
                    hint: "give bits per second such as 100G, 25G or 10000M",
                })
            })
            .transpose()?;
        let rtt = self
            .rtt
            .as_deref()
            .map(|raw| {
                parse_duration(raw).map_err(|reason| Error::InvalidArgument {
                    flag: "--rtt",
                    value: raw.to_string(),
                    reason: reason.0,
                    hint: "give a time with its unit such as 1ms or 200us",
                })
            })
            .transpose()?;
        let mut nics = Vec::new();
        for nic in self.nics.iter().map(|n| n.trim()) {
            if nic.is_empty() {
                return Err(Error::InvalidArgument {
                    flag: "--nic",
                    value: self.nics.join(","),
                    reason: "an interface name is empty".into(),
                    hint: "give names such as eth0 or eth0,eth1",
                });
            }
            if !nics.iter().any(|n| n == nic) {
                nics.push(nic.to_string());
            }
        }
        Ok(Options {
            root: self.root.clone(),
            nics,
            cpus,
            target_rate_bps,
            rtt,
        })
    }

    fn color(&self) -> bool {
        match self.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none() && io::stdout().is_terminal()
            }
        }
    }
}

/// Runs `linerate doctor`: prints the report (text or JSON) to `out` and
/// messages (errors, the capture note) to stderr; returns the exit status.
pub fn run_cli(args: &DoctorArgs, out: &mut dyn Write) -> i32 {
    run_cli_to(args, out, &mut io::stderr())
}

/// Like [`run_cli`] with messages written to `err` instead of stderr.
pub fn run_cli_to(args: &DoctorArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    match run(args, out, err) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "linerate doctor: {e}");
            EXIT_USAGE
        }
    }
}

fn run(args: &DoctorArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, Error> {
    let opts = args.to_options()?;
    let report: Report = match &args.capture {
        Some(path) => {
            let summary = capture(&opts, path)?;
            let _ = writeln!(
                err,
                "linerate doctor: wrote {} ({} files, {} bytes); extract it and run \
                 `linerate doctor --root DIR` to reproduce this report",
                summary.path.display(),
                summary.files,
                summary.bytes
            );
            summary.report
        }
        None => inspect(&opts)?,
    };
    let text = if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(e) => {
                let _ = writeln!(err, "linerate doctor: encoding the report as JSON: {e}");
                return Ok(EXIT_USAGE);
            }
        }
    } else {
        render_text(&report, args.color())
    };
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        if e.kind() != io::ErrorKind::BrokenPipe {
            let _ = writeln!(err, "linerate doctor: writing the report: {e}");
            return Ok(EXIT_USAGE);
        }
    }
    Ok(exit_code(&report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        doctor: DoctorArgs,
    }

    fn args(argv: &[&str]) -> DoctorArgs {
        let mut full = vec!["doctor"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).unwrap().doctor
    }

    #[test]
    fn flags_parse_into_options() {
        let a = args(&[
            "--root",
            "/tmp/x",
            "--nic",
            "eth0,eth1",
            "--nic",
            "eth0",
            "--cpus",
            "0-3,8",
            "--target-rate",
            "100G",
            "--rtt",
            "200us",
        ]);
        let o = a.to_options().unwrap();
        assert_eq!(o.root, PathBuf::from("/tmp/x"));
        assert_eq!(o.nics, ["eth0", "eth1"]);
        assert_eq!(o.cpus, Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(o.target_rate_bps, Some(100e9));
        assert_eq!(o.rtt, Some(std::time::Duration::from_micros(200)));
    }

    #[test]
    fn defaults() {
        let o = args(&[]).to_options().unwrap();
        assert_eq!(o, Options::default());
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (argv, flag) in [
            (["--cpus", "0-x"], "--cpus"),
            (["--cpus", ""], "--cpus"),
            (["--target-rate", "10GB"], "--target-rate"),
            (["--rtt", "5"], "--rtt"),
        ] {
            let e = args(&argv).to_options().unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
    }
}
