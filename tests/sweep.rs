//! Issue 21 item 1: sweeps. `--sweep` on a test command in a namespace
//! pair, and a plan with `[lab]` sweeping the DUT mode and the frame size:
//! every point a test of its own with its coordinates, and the run's
//! record of the sweep.

use crate::util::*;
use serde_json::Value;

fn results(dir: &std::path::Path) -> Value {
    let run = only_run_dir(dir);
    serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap()
}

/// (key, value) pairs of a test's sweep point.
fn coords(t: &Value) -> Vec<(String, String)> {
    t["sweep"]["coords"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["key"].as_str().unwrap().to_string(),
                c["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn issue21_sweep_flag_runs_every_point() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let pair = NsPair::new("hsw", "f", "hsw", "198.18.31");
    let dir = tempdir("sweep-flag");
    let out = run(&[
        "udp",
        "--client",
        &format!("ns:{}", pair.client),
        "--server",
        &format!("ns:{}", pair.server),
        "--target",
        "198.18.31.2",
        "--duration",
        "1",
        "--tx-engine",
        "socket",
        "--rx-engine",
        "socket",
        "--frame-size",
        "1000",
        "--sweep",
        "frame-size=64,512",
        "--sweep",
        "rate=1kpps,2kpps",
        "--rows",
        "frame_size",
        "--cols",
        "rate",
        "--no-progress",
        "--results-dir",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r = results(&dir);
    let tests = r["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 4, "{stderr}");
    let want = [
        ("64", "1kpps", 64, 1000.0),
        ("64", "2kpps", 64, 2000.0),
        ("512", "1kpps", 512, 1000.0),
        ("512", "2kpps", 512, 2000.0),
    ];
    for (i, (t, (f, rate, size, pps))) in tests.iter().zip(want).enumerate() {
        assert_eq!(
            coords(t),
            [
                ("frame_size".to_string(), f.to_string()),
                ("rate".to_string(), rate.to_string())
            ]
        );
        assert_eq!(t["sweep"]["index"], i);
        assert_eq!(t["sweep"]["sweep"], "udp");
        assert_eq!(t["name"], format!("udp frame_size={f} rate={rate}"));
        assert_eq!(t["status"], "ok", "{t}");
        // Each point ran with its own values, not the 1000 B typed before.
        assert_eq!(t["params"]["frame"]["fixed"], size, "{}", t["params"]);
        assert_eq!(t["params"]["rate_pps"], pps);
        assert_eq!(t["sweep"]["coords"][0]["number"], f64::from(size));
        assert!(t["sweep"]["coords"][1].get("number").is_none());
    }
    let s = &r["sweeps"][0];
    assert_eq!(s["name"], "udp");
    assert_eq!(s["axes"], serde_json::json!(["frame_size", "rate"]));
    assert_eq!(s["rows"], serde_json::json!(["frame_size"]));
    assert_eq!(s["cols"], serde_json::json!(["rate"]));
    assert_eq!(s["points"], 4);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("sweep udp: 4 points"), "{stdout}");
    // A bad value is refused before anything runs, naming its point.
    let out = run(&[
        "udp",
        "--target",
        "127.0.0.1",
        "--no-results",
        "--sweep",
        "frame-size=64,12",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sweep point \"udp frame_size=12\""),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn issue21_plan_sweeps_the_lab_dut() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let dir = tempdir("sweep-lab");
    let plan = dir.join("matrix.toml");
    std::fs::write(
        &plan,
        "name = \"hsw-matrix\"\n[lab]\ndut = \"route\"\n[[test]]\nname = \"m\"\nkind = \"udp\"\n\
         duration = 1\nrate = \"2kpps\"\nsweep = { dut = [\"route\", \"nat\"], frame_size = [64, 512] }\n\
         rows = [\"frame_size\"]\ncols = [\"dut\"]\ncell = \"rx_pps\"\n",
    )
    .unwrap();
    let res = dir.join("res");
    let out = run(&[
        "run",
        plan.to_str().unwrap(),
        "--no-progress",
        "--results-dir",
        res.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r = results(&res);
    let tests = r["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 4, "{stderr}");
    // Built once per DUT mode, each point in its own mode's lab.
    let labs = r["labs"].as_array().unwrap();
    assert_eq!(labs.len(), 2, "{stderr}");
    let want = [
        ("route", "64"),
        ("route", "512"),
        ("nat", "64"),
        ("nat", "512"),
    ];
    for (t, (dut, f)) in tests.iter().zip(want) {
        assert_eq!(
            coords(t),
            [
                ("dut".to_string(), dut.to_string()),
                ("frame_size".to_string(), f.to_string())
            ]
        );
        assert_eq!(t["name"], format!("m dut={dut} frame_size={f}"));
        assert_eq!(t["status"], "ok", "{t}");
        let lab = t["params"]["lab"].as_u64().unwrap() as usize;
        assert_eq!(
            labs[lab]["dut_mode"], dut,
            "point {dut} ran in {}",
            labs[lab]
        );
        let rx: u64 = t["directions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["rx_packets"].as_u64().unwrap())
            .sum();
        assert!(rx > 1000, "{dut} {f}: {rx} frames arrived");
    }
    let s = &r["sweeps"][0];
    assert_eq!(s["axes"], serde_json::json!(["dut", "frame_size"]));
    assert_eq!(s["cell"], "rx_pps");
    assert_eq!(s["points"], 4);
    let _ = std::fs::remove_dir_all(&dir);
}
