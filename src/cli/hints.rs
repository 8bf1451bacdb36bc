//! Hints for the flags a user brings from iperf3. Clap reports such a flag
//! as "unexpected argument '-b'"; this adds a `tip:` line naming linerate's
//! flag for the same thing, so habits cost one retry, not a manual.

use clap::builder::StyledStr;
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The hint for an iperf3 flag `arg` given to `command` (`tcp`, `udp`, …),
/// if linerate has a counterpart or a reason it needs none.
pub fn iperf3_hint(command: Option<&str>, arg: &str) -> Option<String> {
    let flag = arg.split_once('=').map_or(arg, |(f, _)| f);
    let udp = command == Some("udp");
    let tcp = command == Some("tcp");
    let hint = match flag {
        "-c" | "--client" => {
            "iperf3's -c HOST is --target HOST here (the address the traffic goes to); \
             linerate's --client names where its sender runs: local, ns:NAME or ssh://host"
                .to_string()
        }
        "-s" => "linerate starts both ends itself: --server names where the receiver runs \
                 (local, ns:NAME or ssh://host); a standing HTTP server is `linerate serve`"
            .to_string(),
        "-p" => "the data port is --port N (of `linerate tcp` and `linerate udp`)".to_string(),
        "-b" | "--bitrate" | "--bandwidth" if command == Some("http") => {
            "`linerate http --rate` is requests per second (REQ/S), not a bit rate; a capped \
             bit rate is `linerate tcp -b 1G`"
                .to_string()
        }
        "-b" | "--bitrate" | "--bandwidth" => {
            "the rate is --rate (-b on tcp, udp and latency), with a unit: 100Mbps, 1Gbps, \
             800kpps, 50%"
                .to_string()
        }
        "-i" => "per-interval lines are --interval SECS (tcp, udp, ramp, search, ...)".to_string(),
        "-l" | "--length" if udp => {
            "the size is --frame-size BYTES, the whole Ethernet frame with its FCS \
             (iperf3's -l is the UDP payload: a 1472-byte payload over IPv4 is --frame-size 1518)"
                .to_string()
        }
        "-l" | "--length" if tcp => "bytes per write are --buffer BYTES".to_string(),
        "-l" | "--length" => {
            "UDP: --frame-size BYTES (the Ethernet frame with FCS); TCP: --buffer BYTES".to_string()
        }
        "-J" => "the results document as JSON on stdout is --json".to_string(),
        "-u" | "--udp" => "UDP is its own command: `linerate udp --target ADDR ...`".to_string(),
        "-P" | "--parallel" if udp => {
            "UDP spreads load over --flows N (with --flow-mode ports) and --threads N".to_string()
        }
        "--parallel" => "parallel TCP streams are -P N (--streams N)".to_string(),
        "--time" => "the test's length is -t/--duration (10, 10s, 2m, 500ms)".to_string(),
        "-C" | "--congestion" => "the congestion control is --cc NAME".to_string(),
        "-B" | "--bind" => "the client's own address is --client-address ADDR".to_string(),
        "-6" | "--version6" => {
            "give --target an IPv6 address, or a host name with --ipv6".to_string()
        }
        "-4" | "--version4" => "host names resolve to IPv4 unless --ipv6 is given".to_string(),
        "-n" | "--bytes" | "-k" | "--blockcount" => {
            "linerate runs for a time, not a byte count: -t SECS".to_string()
        }
        "-Z" | "--zerocopy" => {
            "linerate's TCP sender always sends with sendfile (no copy)".to_string()
        }
        "-R" if !tcp && !udp => {
            "-R (reverse) is a flag of `linerate tcp` and `linerate udp`".to_string()
        }
        _ => return None,
    };
    Some(hint)
}

/// The subcommand of a command line: its first argument after the program
/// name that is not a flag.
pub fn subcommand(args: &[String]) -> Option<&str> {
    args.iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
}

/// Adds an iperf3 hint to an "unexpected argument" error, when one fits.
pub fn with_hint(mut e: clap::Error, args: &[String]) -> clap::Error {
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let Some(hint) = iperf3_hint(subcommand(args), arg) else {
        return e;
    };
    let mut tips = match e.get(ContextKind::Suggested) {
        Some(ContextValue::StyledStrs(v)) => v.clone(),
        _ => Vec::new(),
    };
    tips.insert(0, StyledStr::from(hint));
    e.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn error_text(args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let e = crate::cli::Cli::try_parse_from(&args).unwrap_err();
        with_hint(e, &args).to_string()
    }

    #[test]
    fn iperf3_flags_get_hints() {
        let t = error_text(&["linerate", "tcp", "-c", "127.0.0.1"]);
        assert!(t.contains("--target HOST"), "{t}");
        let t = error_text(&["linerate", "http", "--target", "127.0.0.1", "-b", "10M"]);
        assert!(t.contains("requests per second"), "{t}");
        let t = error_text(&[
            "linerate",
            "udp",
            "--target",
            "127.0.0.1",
            "--bitrate",
            "10M",
        ]);
        assert!(t.contains("--rate"), "{t}");
        let t = error_text(&["linerate", "http", "--target", "127.0.0.1", "-p", "80"]);
        assert!(t.contains("--port"), "{t}");
        let t = error_text(&["linerate", "udp", "--target", "127.0.0.1", "-l", "1400"]);
        assert!(t.contains("--frame-size"), "{t}");
        let t = error_text(&["linerate", "tcp", "--target", "127.0.0.1", "-l", "1400"]);
        assert!(t.contains("--buffer"), "{t}");
        let t = error_text(&["linerate", "tcp", "--target", "127.0.0.1", "-J"]);
        assert!(t.contains("--json"), "{t}");
        let t = error_text(&["linerate", "tcp", "--target", "127.0.0.1", "-u"]);
        assert!(t.contains("linerate udp"), "{t}");
        let t = error_text(&["linerate", "tcp", "--target", "127.0.0.1", "--bitrate=1G"]);
        assert!(t.contains("--rate"), "{t}");
    }

    /// Issue 38: `-b` is `--rate` wherever linerate takes a bit or packet
    /// rate, as the README says (it was refused on udp and latency).
    #[test]
    fn issue_38_dash_b_is_rate_on_every_command_with_a_rate() {
        let rate = |args: &[&str]| match crate::cli::Cli::try_parse_from(args) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Tcp(a),
                ..
            }) => a.rate,
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Udp(a),
                ..
            }) => a.rate,
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Latency(a),
                ..
            }) => a.rate,
            Ok(_) => panic!("{args:?}: another command"),
            Err(e) => panic!("{args:?}: {e}"),
        };
        let g = Some(crate::model::units::Rate::L1Bps(1e9));
        for cmd in ["tcp", "udp"] {
            assert_eq!(
                rate(&["linerate", cmd, "--target", "198.18.0.2", "-b", "1G"]),
                g
            );
        }
        assert_eq!(rate(&["linerate", "latency", "--lab", "-b", "1G"]), g);
        // Every command with a --rate that is a bit or packet rate has -b.
        let cli = <crate::cli::Cli as clap::CommandFactory>::command();
        for sub in cli.get_subcommands() {
            let Some(arg) = sub.get_arguments().find(|a| a.get_long() == Some("rate")) else {
                continue;
            };
            let shorts = arg.get_short();
            match sub.get_name() {
                // Requests per second: iperf3's -b (bit/s) would mislead.
                "http" => assert_eq!(shorts, None),
                name => assert_eq!(shorts, Some('b'), "linerate {name} --rate"),
            }
        }
    }

    #[test]
    fn other_errors_are_left_alone() {
        let t = error_text(&["linerate", "tcp", "--target", "127.0.0.1", "--no-such-flag"]);
        assert!(!t.contains("iperf3"), "{t}");
        assert!(t.contains("--no-such-flag"), "{t}");
    }
}
