//! `search --latency-at`: one-way latency at shares of the throughput a
//! search found (RFC 2544 §26.2 at 100 %), from the XDP sink's HDR
//! counts, against a lab DUT shaped with a tbf queue.

use crate::util::{assert_nothing_left, lab_pids, one_core, require_root, run, tempdir};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// floor(log2(ns)), 0 for 0: the log2 bucket the sink's older count puts
/// a frame in.
fn log2_bucket(ns: u64) -> usize {
    if ns == 0 {
        0
    } else {
        63 - ns.leading_zeros() as usize
    }
}

/// The log2 bucket holding quantile `q` of the log2 counts.
fn log2_quantile_bucket(buckets: &[u64], q: f64) -> usize {
    let total: u64 = buckets.iter().sum();
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return i;
        }
    }
    buckets.len() - 1
}

/// (b) The HDR figures of each point against a second, independent count
/// of the same frames: the sink's log2 buckets (another map, filled by
/// other code in the same program). The histogram counts every frame the
/// trial received, and each percentile lies in the log2 bucket the old
/// count puts it in, or one away where the HDR figure (a slot's highest
/// value, at most 0.8 % above the frames') crosses a power of two.
fn check_second_count(doc: &Value, l: &Value) {
    for p in l["points"].as_array().unwrap() {
        let test = &doc["tests"][p["test"].as_u64().unwrap() as usize];
        for d in p["directions"].as_array().unwrap() {
            let td = test["directions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["direction"] == d["direction"])
                .unwrap();
            let rx = td["rx_packets"].as_u64().unwrap();
            let lat = &d["latency"];
            assert_eq!(
                lat["frames"].as_u64().unwrap(),
                rx,
                "HDR count vs rx_packets"
            );
            assert_eq!(d["rx_packets"].as_u64().unwrap(), rx);
            let log2: Vec<u64> = td["receiver_summary"]["one_way_latency_log2_ns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(log2.iter().sum::<u64>(), rx, "log2 count vs rx_packets");
            for (key, q) in [
                ("p50_ns", 0.5),
                ("p90_ns", 0.9),
                ("p99_ns", 0.99),
                ("p99_9_ns", 0.999),
                ("max_ns", 1.0),
            ] {
                let v = lat[key].as_u64().unwrap();
                let hdr_bucket = log2_bucket(v);
                let old = log2_quantile_bucket(&log2, q);
                // The figure is its slot's highest value: it may sit just
                // past the power of two its frames are below.
                let low = log2_bucket(v - v / 128);
                assert!(
                    hdr_bucket == old || low == old,
                    "{} at {} %: {key} {v} ns is in log2 bucket {hdr_bucket}, the log2 count \
                     puts it in {old}",
                    d["direction"],
                    p["load_pct"]
                );
            }
            assert!(
                log2_bucket(lat["min_ns"].as_u64().unwrap()) <= log2_quantile_bucket(&log2, 0.0)
            );
        }
    }
}

/// (a) A DUT shaped to 5 Mbit/s (10.4 kpps of 64 B frames) with a 200 ms
/// tbf queue: an MLRsearch for its NDR, then latency at 1 % (as good as
/// unloaded), 10 % and 90 % of it. A 1 s trial loses nothing until it
/// offers more than the queue holds above the rate (20 % over it), so
/// the NDR found with 1 s trials is above the shaper's rate, and 90 % of
/// it (at least 2.6 % over the rate with the 5 % width) fills the queue
/// during its trial: p99 there is milliseconds, where the 10 % point
/// (below the rate; the token bucket passes it unqueued) stays near the
/// unloaded figure. No generator burst is needed for the queue to fill.
/// (b) every point's figures agree with the sink's second count.
#[test]
fn latency_rises_with_load_through_a_queue() {
    if !require_root() {
        return;
    }
    let _s = one_core();
    let base = tempdir("latat");
    let t0 = std::time::Instant::now();
    let out = run(&[
        "search",
        "--lab",
        "--profile",
        "bench",
        "--dut-shape",
        "5M,200ms",
        "--min-rate",
        "2kpps",
        "--max-rate",
        "20kpps",
        "--goal",
        "ndr=0",
        "--final-trial",
        "1",
        "--duration-sum",
        "1",
        "--width",
        "5",
        "--latency-at",
        "1,10,90",
        "--no-progress",
        "--json",
        "--results-dir",
        base.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "search failed:\n{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{err}\n({:.1} s)", t0.elapsed().as_secs_f64());
    assert_nothing_left(&lab_pids(&doc));
    let csv_dir = crate::util::only_run_dir(&base);
    let html = std::fs::read_to_string(csv_dir.join("report.html")).unwrap();
    assert!(
        html.contains("search0-lat"),
        "the report charts latency against load"
    );
    let _ = std::fs::remove_dir_all(&base);

    assert!(err.contains("one-way latency at load"), "the table: {err}");
    let l = &doc["searches"][0]["latency_at"];
    assert_eq!(l["clock"], "same host");
    assert_eq!(l["basis"], "mlr ndr lower bound");
    let points = l["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{l}");
    let p99 = |i: usize| f(&points[i]["directions"][0]["latency"]["p99_ns"]);
    let p50 = |i: usize| f(&points[i]["directions"][0]["latency"]["p50_ns"]);
    let (idle, low, high) = (p99(0), p99(1), p99(2));
    eprintln!(
        "p99: 1 % {:.1} µs, 10 % {:.1} µs, 90 % {:.1} µs; p50 {:.1} / {:.1} / {:.1} µs",
        idle / 1e3,
        low / 1e3,
        high / 1e3,
        p50(0) / 1e3,
        p50(1) / 1e3,
        p50(2) / 1e3
    );
    // At 10 % the median stays near the unloaded one: within a factor of
    // 2 plus 150 µs, the lab's NAPI polling (the DUT's every 50 µs, the
    // tester's receive every 100 µs, while frames come less than 2 ms
    // apart), which the search's note says. The tail is the host's: with
    // other work on the tester's core (CI's fuzzing) the 10 % point's p99
    // read 659 µs against 53 µs unloaded, so it is only held to lie far
    // below the queue's.
    assert!(
        p50(1) <= 2.0 * p50(0) + 150e3,
        "10 % p50 {} vs unloaded {}",
        p50(1),
        p50(0)
    );
    assert!(
        high > 2.0 * low.max(idle),
        "90 % p99 {high} is not clearly above 10 % p99 {low} (unloaded {idle})"
    );
    let note = l["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("NAPI threads poll") && err.contains(note),
        "the polling is said: {l}"
    );
    check_second_count(&doc, l);
}

/// (c) Usage errors exit 2 before anything runs, with the reason.
#[test]
fn latency_at_usage_errors() {
    let _g = crate::util::shared();
    for (v, says) in [
        ("0", "outside (0, 100]"),
        ("150", "outside (0, 100]"),
        ("abc", "is not a number"),
    ] {
        let out = run(&["search", "--lab", "--latency-at", v, "--no-results"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--latency-at {v}: {err}");
        assert!(err.contains(says), "--latency-at {v}: {err}");
    }
    // Two hosts: refused at configuration, before any ssh connection.
    let out = run(&[
        "search",
        "--client",
        "local",
        "--server",
        "ssh://lr-test@198.18.0.99",
        "--target",
        "198.18.0.99",
        "--latency-at",
        "10,90",
        "--no-results",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs the generator's and the sink's clocks to be one")
            && err.contains("ssh://198.18.0.99"),
        "{err}"
    );
    // A plan's search test with latency_at across two hosts, the same.
    let dir = tempdir("latat-plan");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        "name = \"two clocks\"\n[hosts.gen]\nlocal = true\naddress = \"198.18.0.1\"\n\
         [hosts.sink]\nssh = \"lr-test@198.18.0.99\"\naddress = \"198.18.0.99\"\n\
         [[test]]\nname = \"s\"\nkind = \"search\"\nfrom = \"gen\"\nto = \"sink\"\n\
         latency_at = [10, 90]\n",
    )
    .unwrap();
    let out = run(&["run", plan.to_str().unwrap(), "--no-results"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("test 's': its generators and sink") && err.contains("clocks to be one"),
        "{err}"
    );
}
