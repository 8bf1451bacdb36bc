//! Sweeps on the test commands (issue 21): `--sweep KEY=V1,V2,…` (with
//! `--zip`, `--rows`, `--cols`, `--fail-fast`) becomes one validated
//! command per point. Each point is the user's own command line with the
//! swept flags replaced by the point's values, parsed by clap and converted
//! exactly as a single run would be, so a value means what it means on the
//! command line. Also what every sweep shares with plans: the tagging of a
//! point's results and the terminal's list of points.

use super::common::{SweepArgs, SWEEP_FLAGS};
use super::Cli;
use crate::model::sweep::{Axis, Point, SweepSpec};
use crate::orchestrate::config::{Command as Cmd, SweepConfig};
use crate::results::criteria::Marks;
use crate::results::{RunResults, TestStatus};
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

/// Tags what the run added since `from` as the sweep point `p`: its
/// coordinates on every test, ramp and search, and the point's name on
/// them (one of a kind takes the name, several keep theirs after it).
pub fn tag_point(r: &mut RunResults, from: Marks, p: &Point) {
    let name = |old: &str, several: bool| {
        if several && old != p.name {
            format!("{} ({old})", p.name)
        } else {
            p.name.clone()
        }
    };
    let n = r.tests.len().saturating_sub(from.tests);
    for t in r.tests.iter_mut().skip(from.tests) {
        t.name = name(&t.name, n > 1);
        t.sweep = Some(p.point.clone());
    }
    let n = r.ramps.len().saturating_sub(from.ramps);
    for x in r.ramps.iter_mut().skip(from.ramps) {
        x.name = name(&x.name, n > 1);
        x.sweep = Some(p.point.clone());
    }
    let n = r.searches.len().saturating_sub(from.searches);
    for x in r.searches.iter_mut().skip(from.searches) {
        x.name = name(&x.name, n > 1);
        x.sweep = Some(p.point.clone());
    }
}

/// Records the end of point `p` begun at `from`: an error that left no
/// test behind becomes a failed test of that name, an error after its
/// tests fails the last one; then the point is tagged. Returns whether the
/// point failed.
pub fn finish_point(
    r: &mut RunResults,
    from: Marks,
    p: &Point,
    kind: &str,
    error: Option<&anyhow::Error>,
) -> bool {
    if let Some(e) = error {
        let msg = format!("{e:#}");
        if r.tests.len() == from.tests {
            r.tests.push(failed_test(&p.name, kind, msg));
        } else if let Some(t) = r.tests.last_mut() {
            if t.status == TestStatus::Ok {
                t.status = TestStatus::Failed;
            }
            t.error.get_or_insert(msg);
        }
    }
    tag_point(r, from, p);
    error.is_some()
        || r.tests[from.tests.min(r.tests.len())..]
            .iter()
            .any(|t| t.status == TestStatus::Failed)
}

/// A test that could not run: a row with the reason, so the matrix has
/// every cell.
fn failed_test(name: &str, kind: &str, error: String) -> crate::results::TestResult {
    use crate::results::{Protocol, TestParams, TestResult};
    let params = TestParams {
        protocol: match kind {
            "tcp" => Protocol::Tcp,
            "http" => Protocol::Http,
            _ => Protocol::Udp,
        },
        ip_version: 4,
        direction: crate::proto::Direction::Forward,
        duration_s: 0.0,
        frame: None,
        average_frame_bytes: None,
        flow_mode: None,
        flows: None,
        rate_pps: None,
        rate_profile: None,
        streams: None,
        congestion: None,
        rate_bps: None,
        cpus: vec![],
        lab: None,
        omit_s: 0.0,
        window_bytes: None,
    };
    let mut t = TestResult::new(name, crate::model::clock::now_rfc3339(), params);
    t.status = TestStatus::Failed;
    t.error = Some(error);
    t
}

/// The terminal's list of every sweep's points and their status, after
/// the results table. The pivot table (issue 21 item 2) goes in
/// [`pivot_hook`].
pub fn points_list(r: &RunResults, run_dir: Option<&std::path::Path>) -> Option<String> {
    if r.sweeps.is_empty() {
        return None;
    }
    let mut out = String::new();
    for s in &r.sweeps {
        out.push_str(&format!(
            "\nsweep {}: {} point{} over {}\n",
            s.name,
            s.points,
            if s.points == 1 { "" } else { "s" },
            s.axes.join(" x ")
        ));
        let mut seen = 0;
        for t in r
            .tests
            .iter()
            .filter(|t| t.sweep.as_ref().is_some_and(|p| p.sweep == s.name))
        {
            seen += 1;
            let status = match t.status {
                TestStatus::Ok => "ok",
                TestStatus::Failed => "FAILED",
                TestStatus::Interrupted => "interrupted",
            };
            let why = match (&t.status, &t.error) {
                (TestStatus::Failed, Some(e)) => format!(": {e}"),
                _ => String::new(),
            };
            out.push_str(&format!("  {status:<11} {}{why}\n", t.name));
        }
        if seen < s.points {
            out.push_str(&format!("  ({} points not run)\n", s.points - seen));
        }
    }
    if let Some(t) = pivot_hook(r, run_dir) {
        out.push_str(&t);
    }
    Some(out)
}

/// The pivot tables of the run's sweeps (issue 21 item 2), and
/// `pivot.csv` in the run directory; a pivot that cannot be built says why
/// instead of a table.
pub fn pivot_hook(r: &RunResults, run_dir: Option<&std::path::Path>) -> Option<String> {
    let opts = crate::report::pivot::PivotOpts::default();
    match crate::report::pivot::for_run(r, run_dir, &opts) {
        Ok(t) => t,
        Err(e) => Some(format!("\npivot table: {e:#}\n")),
    }
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
