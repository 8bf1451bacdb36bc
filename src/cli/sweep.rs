//! Sweeps on the test commands (issue 21): `--sweep KEY=V1,V2,…` (with
//! `--zip`, `--rows`, `--cols`, `--fail-fast`) becomes one validated
//! command per point. Each point is the user's own command line with the
//! swept flags replaced by the point's values, parsed by clap and converted
//! exactly as a single run would be, so a value means what it means on the
//! command line. What every sweep shares with plans when it runs (the tagging of
//! a point's results, the terminal's list of points) is in
//! `orchestrate::sweep`.

use super::common::{SweepArgs, SWEEP_FLAGS};
use super::Cli;
use crate::model::sweep::{Axis, SweepSpec};
use crate::orchestrate::config::{Command as Cmd, SweepConfig};
use anyhow::{anyhow, bail, Result};
use clap::CommandFactory;

/// Flags a sweep point may not change: where results go and what decides
/// the run belong to the whole sweep.
const FIXED: [&str; 17] = [
    "help",
    "json",
    "results-dir",
    "name",
    "no-results",
    "no-progress",
    "repeat",
    "baseline",
    "tolerance",
    "junit",
    "expect",
    "ssh-config",
    "ssh-option",
    "ssh-accept-new",
    "connect-timeout",
    "remote-binary",
    "push",
];

/// The long flags of `linerate <sub>` a sweep may vary.
fn sweepable(sub: &clap::Command) -> Vec<&clap::Arg> {
    sub.get_arguments()
        .filter(|a| {
            a.get_long()
                .is_some_and(|l| !FIXED.contains(&l) && !SWEEP_FLAGS.contains(&l))
        })
        .collect()
}

/// `frame-size` and `frame_size` are the same key; coordinates use `_`,
/// as plans do.
fn key_name(k: &str) -> String {
    k.trim().trim_start_matches("--").replace('-', "_")
}

/// The sweep the flags of `linerate <sub>` describe, if any: `args` is the
/// whole command line as typed. What decides the run is set on it after
/// ([`Cmd::set_criteria`] sets it on every point).
pub fn configure(
    args: &[String],
    sub: &str,
    flags: &SweepArgs,
) -> Result<Option<(SweepConfig, crate::orchestrate::config::RunOpts)>> {
    if flags.sweep.is_empty() {
        return Ok(None);
    }
    let cli = Cli::command();
    let Some(cmd) = cli.find_subcommand(sub) else {
        bail!("linerate has no command '{sub}' to sweep");
    };
    let can = sweepable(cmd);
    let find = |k: &str| {
        let flag = key_name(k).replace('_', "-");
        can.iter().copied().find(|a| a.get_long() == Some(&flag))
    };
    let list = || {
        let mut v: Vec<String> = can
            .iter()
            .filter_map(|a| a.get_long())
            .map(|l| l.replace('-', "_"))
            .collect();
        v.sort();
        v.join(", ")
    };
    let mut axes = Vec::new();
    let mut args_of = Vec::new();
    for s in &flags.sweep {
        let Some((k, values)) = s.split_once('=') else {
            bail!("--sweep '{s}': write KEY=V1,V2,... (e.g. --sweep frame-size=64,1518)");
        };
        let Some(arg) = find(k) else {
            let hint = crate::plan::suggest(&key_name(k), list().split(", ").collect::<Vec<_>>())
                .map(|h| format!("did you mean '{h}'? "))
                .unwrap_or_default();
            bail!(
                "--sweep {s}: linerate {sub} has no flag --{} to sweep; {hint}the flags it can \
                 sweep are {}",
                k.trim().trim_start_matches("--"),
                list()
            );
        };
        let values: Vec<String> = values
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        axes.push(Axis {
            key: key_name(k),
            values,
        });
        args_of.push(arg);
    }
    let known = |k: &str, what: &str| -> Result<String> {
        let key = key_name(k);
        if axes.iter().any(|a| a.key == key) {
            Ok(key)
        } else {
            let swept: Vec<&str> = axes.iter().map(|a| a.key.as_str()).collect();
            bail!(
                "{what} {k}: only swept flags can be {what} axes (this sweep has {}); add --sweep {k}=...",
                swept.join(", ")
            )
        }
    };
    let zip = flags
        .zip
        .iter()
        .map(|g| g.split(',').map(|k| known(k, "--zip")).collect())
        .collect::<Result<Vec<Vec<String>>>>()?;
    let rows = flags
        .rows
        .iter()
        .map(|k| known(k, "--rows"))
        .collect::<Result<Vec<_>>>()?;
    let cols = flags
        .cols
        .iter()
        .map(|k| known(k, "--cols"))
        .collect::<Result<Vec<_>>>()?;
    let name = output_name(args).unwrap_or_else(|| sub.to_string());
    let spec = SweepSpec {
        name,
        axes,
        zip,
        order: vec![],
    };
    let points = spec
        .expand(crate::plan::MAX_TESTS)
        .map_err(|e| anyhow!("--sweep: {e}"))?;
    let info = spec
        .info(rows, cols, None)
        .map_err(|e| anyhow!("--sweep: {e}"))?;
    let strip: Vec<&clap::Arg> = args_of
        .iter()
        .copied()
        .chain(
            cmd.get_arguments()
                .filter(|a| a.get_long().is_some_and(|l| SWEEP_FLAGS.contains(&l))),
        )
        .collect();
    let base = strip_flags(args, sub, &strip);
    let mut out = Vec::with_capacity(points.len());
    let mut opts = None;
    for p in points {
        let mut argv = base.clone();
        for (c, arg) in p.point.coords.iter().zip(&args_of) {
            let flag = arg.get_long().unwrap_or_default();
            if arg.get_action().takes_values() {
                argv.push(format!("--{flag}={}", c.value));
            } else {
                match c.value.as_str() {
                    "true" | "yes" | "on" => argv.push(format!("--{flag}")),
                    "false" | "no" | "off" => {}
                    v => bail!(
                        "--sweep {}: --{flag} is a switch; sweep it with true,false (not '{v}')",
                        c.key
                    ),
                }
            }
        }
        let parsed = <Cli as clap::Parser>::try_parse_from(&argv).map_err(|e| {
            let first = e.render().to_string();
            let first = first.lines().next().unwrap_or_default().to_string();
            anyhow!(
                "sweep point \"{}\": {}",
                p.name,
                first.trim_start_matches("error: ")
            )
        })?;
        let config = super::to_config(parsed.command)
            .map_err(|e| e.context(format!("sweep point \"{}\"", p.name)))?;
        let point_opts = match &config {
            Cmd::Pair(_, _, o) | Cmd::LabBench(_, _, o) | Cmd::Iperf3(_, _, o) => o.clone(),
            _ => bail!("linerate {sub} cannot be swept"),
        };
        opts.get_or_insert(point_opts);
        out.push((p, config));
    }
    let opts = opts.ok_or_else(|| anyhow!("--sweep gave no points"))?;
    Ok(Some((
        SweepConfig {
            info,
            points: out,
            fail_fast: flags.fail_fast,
        },
        opts,
    )))
}

/// `--name N` as typed, the sweep's name.
fn output_name(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if let Some(v) = a.strip_prefix("--name=") {
            return Some(v.to_string());
        }
        if a == "--name" {
            return it.next().cloned();
        }
    }
    None
}

/// The command line without the flags in `strip` (as `--flag V`,
/// `--flag=V`, `-f V` or `-fV`): what each point adds its values to.
fn strip_flags(args: &[String], sub: &str, strip: &[&clap::Arg]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    // Up to and including the command's name, nothing is stripped.
    for a in it.by_ref() {
        out.push(a.clone());
        if a == sub {
            break;
        }
    }
    while let Some(a) = it.next() {
        if a == "--" {
            out.push(a.clone());
            out.extend(it.by_ref().cloned());
            break;
        }
        let hit = if let Some(long) = a.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            strip
                .iter()
                .find(|s| s.get_long() == Some(name))
                .map(|s| (s, attached))
        } else if let Some(short) = a.strip_prefix('-').and_then(|r| r.chars().next()) {
            strip
                .iter()
                .find(|s| s.get_short() == Some(short))
                .map(|s| (s, a.len() > 2))
        } else {
            None
        };
        match hit {
            None => out.push(a.clone()),
            Some((s, attached)) => {
                if s.get_action().takes_values() && !attached {
                    it.next();
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn udp_args(line: &str) -> Vec<String> {
        words(&format!(
            "linerate udp --target 127.0.0.1 --no-results {line}"
        ))
    }

    fn sweep_of(line: &str) -> Result<Option<(SweepConfig, crate::orchestrate::config::RunOpts)>> {
        let args = udp_args(line);
        let cli = <Cli as clap::Parser>::try_parse_from(&args)?;
        let super::super::Command::Udp(a) = &cli.command else {
            panic!("not udp")
        };
        configure(&args, "udp", &a.sweep)
    }

    #[test]
    fn each_point_is_the_command_with_its_values() {
        let (s, _) = sweep_of("--frame-size 128 --sweep frame_size=64,1518 --sweep rate=1kpps,2kpps --rows frame-size --duration 1")
            .unwrap()
            .unwrap();
        assert_eq!(s.points.len(), 4);
        assert_eq!(s.info.axes, ["frame_size", "rate"]);
        assert_eq!(s.info.rows, ["frame_size"]);
        assert_eq!(s.info.points, 4);
        let (p, cmd) = &s.points[3];
        assert_eq!(p.name, "udp frame_size=1518 rate=2kpps");
        let Cmd::Pair(_, crate::orchestrate::config::TestSpec::Udp(t), _) = cmd else {
            panic!("not a udp pair: {cmd:?}")
        };
        assert_eq!(t.frame, crate::proto::FrameSpec::Fixed(1518));
        assert_eq!(t.rate_pps, Some(2000.0));
        assert_eq!(t.duration, std::time::Duration::from_secs(1));
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let e = sweep_of("--sweep frame_sise=64").unwrap_err().to_string();
        assert!(e.contains("did you mean 'frame_size'"), "{e}");
        assert!(e.contains("the flags it can sweep are"), "{e}");
        let e = sweep_of("--sweep results_dir=a,b").unwrap_err().to_string();
        assert!(e.contains("has no flag --results_dir"), "{e}");
        let e = sweep_of("--sweep frame-size=64,12")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sweep point \"udp frame_size=12\""), "{e}");
        let e = sweep_of("--sweep frame-size=64,128 --sweep flows=1 --zip frame-size,flows")
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 values") && e.contains("has 1"), "{e}");
        let e = sweep_of("--sweep frame-size=64 --cols rate")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only swept flags"), "{e}");
    }

    #[test]
    fn no_sweep_is_no_sweep() {
        assert!(sweep_of("--frame-size 64").unwrap().is_none());
    }

    #[test]
    fn stripping_handles_every_spelling() {
        let cli = Cli::command();
        let sub = cli.find_subcommand("udp").unwrap();
        let arg = |l: &str| {
            sub.get_arguments()
                .find(|a| a.get_long() == Some(l))
                .unwrap()
        };
        let strip = [
            arg("frame-size"),
            arg("sweep"),
            arg("fail-fast"),
            arg("interval"),
        ];
        let out = strip_flags(
            &words("linerate udp --frame-size 64 --frame-size=128 --sweep a=1 --fail-fast -i 2 -i3 --rate 1kpps"),
            "udp",
            &strip,
        );
        assert_eq!(out, words("linerate udp --rate 1kpps"));
    }
}
