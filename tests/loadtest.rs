//! `linerate ramp` and `linerate search` against a lab DUT policed to a
//! known rate (nftables `limit`): the answers must agree with it.

use crate::util::*;
use serde_json::Value;

const POLICE: f64 = 30_000.0;

fn lab_run(args: &[&str], name: &str) -> Value {
    let base = tempdir(name);
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--lab",
        "--dut-police",
        "30kpps",
        "--no-progress",
        "--json",
        "--results-dir",
    ]);
    all.push(base.to_str().unwrap());
    let doc = run_json(&all);
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
    doc
}

/// The policer's token bucket holds 1 % of a second of packets, so a trial
/// passes up to ~1 % above the police rate, and MLRsearch's width is 2 %
/// here; ±7 % leaves room for the tester's own pacing on a busy 2-core VM.
/// At the policer's rate, or below it where a loaded host's DUT core
/// gives out first (25.3 kpps beside stress-ng and two builds); never
/// above, and never the ends of the range searched (5 and 60 kpps).
fn near_police(v: f64) -> bool {
    (POLICE * 0.6..=POLICE * 1.07).contains(&v)
}

#[test]
fn mlrsearch_finds_the_policed_ndr_and_pdr() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let doc = lab_run(
        &[
            "search",
            "--profile",
            "bench",
            "--max-rate",
            "60kpps",
            "--min-rate",
            "5kpps",
            "--final-trial",
            "1",
            "--duration-sum",
            "2",
            "--width",
            "2",
        ],
        "mlr",
    );
    let s = &doc["searches"][0];
    assert_eq!(s["profile"], "bench");
    let mlr = &s["mlr"];
    let goals = mlr["goals"].as_array().unwrap();
    assert_eq!(goals.len(), 2);
    for g in goals {
        let v = g["conditional_throughput_pps"]
            .as_f64()
            .or(g["relevant_lower_bound_pps"].as_f64())
            .unwrap_or_else(|| panic!("no answer for {}", g["goal"]["name"]));
        assert!(
            near_police(v),
            "{}: {v} pps, police {POLICE}",
            g["goal"]["name"]
        );
    }
    // Every trial informs every goal, so one goal may be settled entirely by
    // trials run for another; together they used some.
    let used: u64 = goals
        .iter()
        .map(|g| g["trials_used"].as_u64().unwrap())
        .sum();
    assert!(used > 0);
    let trials = mlr["trials"].as_array().unwrap();
    assert!(trials.len() >= 3, "{trials:?}");
    assert!(f(&mlr["time_spent_s"]) > 0.0);
}

#[test]
fn rfc2544_short_trials_are_labelled_and_agree() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let doc = lab_run(
        &[
            "search",
            "--profile",
            "bench",
            "--method",
            "rfc2544",
            "--trial",
            "1",
            "--no-waits",
            "--max-rate",
            "60kpps",
            "--min-rate",
            "5kpps",
        ],
        "rfc2544",
    );
    let r = &doc["searches"][0]["rfc2544"];
    assert_eq!(r["rfc2544_compliant"], false);
    assert!(!r["compliance_notes"].as_array().unwrap().is_empty());
    let v = f(&r["throughput_pps"]);
    // A zero-loss binary search stops just below the police rate.
    assert!(near_police(v), "RFC 2544 throughput {v}");
}

#[test]
fn ramp_saturates_where_the_dut_is_policed() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let viz = std::env::temp_dir().join(format!("lr-viz-{}.json", std::process::id()));
    let doc = lab_run(
        &[
            "ramp",
            "--profile",
            "bench",
            "--warmup",
            "1",
            "--warmup-rate",
            "5kpps",
            "--ramp",
            "6",
            "--ramp-to",
            "60kpps",
            "--hold",
            "2",
            "--export",
            "trex-loadtest-viz",
            viz.to_str().unwrap(),
        ],
        "ramp",
    );
    let r = &doc["ramps"][0];
    let d = &r["directions"][0];
    let samples = d["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 9, "one sample per second");
    let sat = &d["summary"]["saturation"];
    // Samples are one second apart while the rate climbs 10 kpps a second,
    // so the first lossy sample lies in the step that crosses the police rate.
    let at = f(&sat["offered_pps"]);
    assert!(
        (POLICE * 0.6..=POLICE + 12_000.0).contains(&at),
        "saturation at {at}"
    );
    let peak = f(&sat["peak_received_pps"]);
    assert!(near_police(peak), "peak received {peak}");
    // The stall watch ran during the ramp, on the DUT's agent: every
    // second the DUT was read in says how long the host's CPUs were held.
    // (One watch per host: a lab beside this one could hold it, so this
    // test runs alone.)
    let watched = samples
        .iter()
        .filter(|s| s["dut"]["stall_ms"].as_f64().is_some_and(|ms| ms >= 0.0))
        .count();
    assert!(
        watched + 1 >= samples.len(),
        "{watched} of {} samples carry the stall watch's stall_ms",
        samples.len()
    );
    // The export carries what graph.rb reads.
    let v: Value = serde_json::from_slice(&std::fs::read(&viz).unwrap()).unwrap();
    let _ = std::fs::remove_file(&viz);
    for k in [
        "warmup_mult",
        "warmup_duration",
        "rampup_target",
        "rampup_duration",
        "hold_duration",
        "profile_file",
        "unidirectional",
    ] {
        assert!(!v["vars"][k].is_null(), "vars.{k} missing");
    }
    let stats = v["stats"].as_object().unwrap();
    assert!(stats.len() >= 8);
    for (_, s) in stats {
        for port in ["0", "1"] {
            for k in ["tx_pps", "rx_pps", "tx_util", "rx_util"] {
                assert!(s[port][k].is_number(), "stats.{port}.{k}");
            }
        }
    }
}

/// `linerate lab` runs a ramp and an NDR/PDR search per profile after its
/// tests and ends with the per-profile summary table.
#[test]
fn lab_profiles_end_with_the_summary_table() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let base = tempdir("lab-profiles");
    let out = run(&[
        "lab",
        "--dut-police",
        "30kpps",
        "--only",
        "self-test",
        "--only",
        "bench-var2-64b",
        "--duration",
        "3",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(
        table.contains("Per profile") && table.contains("bench-var2-64b"),
        "{table}"
    );
    assert_eq!(doc["ramps"].as_array().unwrap().len(), 1);
    let s = &doc["searches"][0];
    assert_eq!(s["profile"], "bench-var2-64b");
    let ndr = s["mlr"]["goals"][0]["conditional_throughput_pps"]
        .as_f64()
        .or(s["mlr"]["goals"][0]["relevant_lower_bound_pps"].as_f64())
        .unwrap();
    assert!(near_police(ndr), "lab NDR {ndr}");
    assert_nothing_left(&lab_pids(&doc));
    let _ = std::fs::remove_dir_all(&base);
}
