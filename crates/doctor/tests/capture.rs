//! The live host, capture round trips (fixtures and the live host), odd
//! files and the command line.

mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::{fixture, ids, opts, parse_args, TempDir};
use linerate_doctor::{capture, inspect, render_text, run_cli, run_cli_to, Options, Report};

#[test]
fn live_host_inspects_without_error() {
    let report = inspect(&Options::default()).unwrap();
    assert_eq!(report.root, "/");
    let text = render_text(&report, false);
    assert!(text.starts_with("linerate doctor: /"));
    serde_json::to_string(&report).unwrap();
}

fn extract(archive: &Path, into: &Path) {
    let file = fs::File::open(archive).expect("opening the capture");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.unpack(into).expect("extracting the capture");
}

fn assert_round_trip(o: &Options, name: &str) {
    let dir = TempDir::new(name);
    let archive = dir.0.join("host.tar.gz");
    let summary = capture(o, &archive).expect("capture");
    assert!(summary.files > 0);
    // Atomic write: only the archive is left, no temporary file.
    let names: Vec<_> = fs::read_dir(&dir.0)
        .expect("listing the temp dir")
        .map(|e| e.expect("dir entry").file_name())
        .collect();
    assert_eq!(names, ["host.tar.gz"]);

    let root = dir.0.join("root");
    fs::create_dir(&root).expect("creating the extraction dir");
    extract(&archive, &root);
    let replay = inspect(&Options {
        root: root.clone(),
        ..o.clone()
    })
    .expect("inspecting the extracted capture");
    assert_eq!(replay.findings, summary.report.findings, "{name}");
    assert_eq!(replay.facts, summary.report.facts, "{name}");
    assert_eq!(replay.skipped, summary.report.skipped, "{name}");
}

#[test]
fn capture_round_trips_fixtures() {
    let before = inspect(&opts("two-ccd")).unwrap();
    assert_round_trip(
        &Options {
            cpus: Some(vec![2]),
            ..opts("two-ccd")
        },
        "two-ccd",
    );
    assert_round_trip(&opts("connectx5-x4"), "connectx5");
    assert_round_trip(&opts("hot-nic"), "hot-nic");
    assert_round_trip(&opts("irqbalance"), "irqbalance");
    // The capture reproduces the fixture's own report too.
    let dir = TempDir::new("two-ccd-plain");
    let archive = dir.0.join("c.tar.gz");
    capture(&opts("two-ccd"), &archive).unwrap();
    extract(&archive, &dir.0);
    let replay = inspect(&Options {
        root: dir.0.clone(),
        ..Options::default()
    })
    .unwrap();
    assert_eq!(replay.findings, before.findings);
}

#[test]
fn capture_round_trips_the_live_host() {
    assert_round_trip(&Options::default(), "live");
}

/// Copies a tree, then replaces every file with junk: doctor must still
/// produce a report, never an error or a panic.
#[test]
fn odd_files_do_not_panic() {
    fn copy(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for e in fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                fs::copy(e.path(), target).unwrap();
            }
        }
    }
    fn spoil(dir: &Path, junk: &[u8]) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                spoil(&e.path(), junk);
            } else {
                fs::write(e.path(), junk).unwrap();
            }
        }
    }
    let junks: [&[u8]; 6] = [
        b"",
        b"\xff\xfe\x00garbage",
        b"-1\n",
        b"99999999999999999999999 GT/s\n",
        b"0-4000000000\n",
        b"1:\n:\n\n 2: 3 4-edge ,,\n",
    ];
    for (i, junk) in junks.iter().enumerate() {
        let dir = TempDir::new(&format!("odd-{i}"));
        copy(&fixture("two-ccd"), &dir.0);
        spoil(&dir.0, junk);
        let report = inspect(&Options {
            root: dir.0.clone(),
            cpus: Some(vec![2]),
            target_rate_bps: Some(1e9),
            rtt: Some(Duration::from_millis(1)),
            ..Options::default()
        })
        .unwrap();
        render_text(&report, true);
    }
}

#[test]
fn bad_cpus_list_exits_2_with_a_clear_message() {
    let args = parse_args(&["--root", "/", "--cpus", "0-x"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run_cli_to(&args, &mut out, &mut err), 2);
    let err = String::from_utf8(err).unwrap();
    assert!(out.is_empty());
    assert!(err.contains("invalid --cpus `0-x`"), "{err}");
    assert!(err.contains("not a number"), "{err}");
    assert!(err.contains("0-3,8"), "{err}");
    // The stderr-writing entry point agrees on the status.
    assert_eq!(run_cli(&args, &mut Vec::new()), 2);
}

#[test]
fn cli_prints_json_and_returns_the_exit_code() {
    let root = fixture("connectx5-x4");
    let args = parse_args(&["--root", root.to_str().unwrap(), "--json"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run_cli_to(&args, &mut out, &mut err), 1);
    let report: Report = serde_json::from_slice(&out).unwrap();
    assert_eq!(ids(&report), ["pcie_link_downgraded"]);

    let healthy = fixture("healthy");
    let args = parse_args(&["--root", healthy.to_str().unwrap(), "--color", "never"]);
    let mut out = Vec::new();
    assert_eq!(run_cli_to(&args, &mut out, &mut Vec::new()), 0);
    assert!(String::from_utf8(out).unwrap().contains("no findings"));
}

#[test]
fn cli_unknown_nic_and_root_exit_2() {
    let root = fixture("healthy");
    let args = parse_args(&["--root", root.to_str().unwrap(), "--nic", "eht0"]);
    let mut err = Vec::new();
    assert_eq!(run_cli_to(&args, &mut Vec::new(), &mut err), 2);
    let err = String::from_utf8(err).unwrap();
    assert!(err.contains("no network interface `eht0`"), "{err}");
    assert!(err.contains("eth0, lo"), "{err}");

    let args = parse_args(&["--root", "/nonexistent/doctor-root"]);
    let mut err = Vec::new();
    assert_eq!(run_cli_to(&args, &mut Vec::new(), &mut err), 2);
    assert!(String::from_utf8(err).unwrap().contains("--root"));
}

#[test]
fn cli_capture_writes_the_archive() {
    let dir = TempDir::new("cli-capture");
    let archive = dir.0.join("host.tar.gz");
    let root = fixture("hot-nic");
    let args = parse_args(&[
        "--root",
        root.to_str().unwrap(),
        "--capture",
        archive.to_str().unwrap(),
        "--json",
    ]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(run_cli_to(&args, &mut out, &mut err), 1);
    assert!(archive.is_file());
    assert!(String::from_utf8(err).unwrap().contains("wrote"));
    let report: Report = serde_json::from_slice(&out).unwrap();
    assert_eq!(ids(&report), ["nic_temperature_high"]);
}
