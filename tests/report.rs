//! `linerate report`: HTML, comparison, exports.
//!
//! The browser tests open reports in Debian's headless Chromium (installed
//! by `scripts/deps.sh chromium` when missing, which needs root) and read
//! what a person would see from the DOM after the scripts ran: every chart
//! drew every series (report.js counts the pixels each series changed), the
//! tables show the values of results.json, and no script error or blocked
//! request happened. A screenshot of the lab run's report is left in
//! `target/tmp/report-lab.png` for a person to look at.

pub mod browser;

use crate::util::*;
use browser::{check_page, check_tables, chromium, fits_1400, open, row_cells};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "linerate {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn lab_run(base: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["lab", "--duration", "1", "--no-progress", "--results-dir"];
    let b = base.to_str().unwrap();
    args.push(b);
    args.extend_from_slice(extra);
    ok(&args);
    only_run_dir(base)
}

// ---------------------------------------------------------------- tests

#[test]
fn chart_data_matches_the_snapshot() {
    let _g = crate::util::shared();
    let dir = tempdir("report-snapshot");
    let mut got = serde_json::Map::new();
    for (name, args) in [
        ("lab", vec![fixture("lab-both.json")]),
        ("paced", vec![fixture("udp-paced.json")]),
        (
            "comparison",
            vec![
                fixture("lab-both.json"),
                fixture("udp-paced.json"),
                fixture("lab-both.json"),
            ],
        ),
        ("ramp", vec![fixture("ramp.json")]),
        ("search", vec![fixture("search.json")]),
        (
            "ramp-comparison",
            vec![fixture("ramp.json"), fixture("ramp.json")],
        ),
    ] {
        let out = dir.join(format!("{name}.html"));
        let mut a = vec!["report".to_string()];
        a.extend(args.iter().map(|p| p.display().to_string()));
        if name == "ramp-comparison" {
            a.extend(["--label", "before", "--label", "after"].map(String::from));
        }
        if name == "comparison" {
            a.extend(
                [
                    "--label", "route", "--label", "loopback", "--label", "again",
                ]
                .map(String::from),
            );
        }
        a.extend(["-o".into(), out.display().to_string()]);
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let html = std::fs::read_to_string(&out).unwrap();
        let start = html
            .find("<script type=\"application/json\" id=\"lr-chart-data\">")
            .unwrap();
        let json = &html[start..];
        let json = &json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()];
        got.insert(name.into(), serde_json::from_str(json).unwrap());
    }
    let got = Value::Object(got);
    let snap = fixture("charts.snap.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&snap, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let want = read_json(&snap);
    assert!(
        got == want,
        "chart data changed; if that is intended, run with UPDATE_SNAPSHOTS=1 and review \
         the diff of {}\ngot: {}",
        snap.display(),
        serde_json::to_string_pretty(&got).unwrap()
    );
}

#[test]
fn csv_has_a_row_per_direction_and_per_interval() {
    let _g = crate::util::shared();
    let doc = read_json(&fixture("lab-both.json"));
    let out = ok(&[
        "report",
        "--format",
        "csv",
        fixture("lab-both.json").to_str().unwrap(),
    ]);
    let dirs: usize = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["directions"].as_array().unwrap().len())
        .sum();
    let intervals: usize = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["directions"].as_array().unwrap())
        .map(|d| d["intervals"].as_array().unwrap().len())
        .sum();
    // Python's csv module reads it as a spreadsheet would.
    let py = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import csv,sys,collections\n\
             rows=list(csv.DictReader(sys.stdin))\n\
             c=collections.Counter(r['kind'] for r in rows)\n\
             assert all(len(r)==len(rows[0]) for r in rows)\n\
             s=[r for r in rows if r['kind']=='summary']\n\
             assert s[0]['bottleneck'].startswith('CPU0 100 %: '), s[0]['bottleneck']\n\
             assert all(r['bottleneck']=='' for r in rows if r['kind']=='interval')\n\
             print(c['summary'], c['interval'], s[-1]['test'], s[-1]['rx_pps'])",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn();
    let Ok(mut py) = py else {
        crate::util::skip("the python check: no /usr/bin/python3");
        return;
    };
    use std::io::Write;
    py.stdin.take().unwrap().write_all(out.as_bytes()).unwrap();
    let res = py.wait_with_output().unwrap();
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let line = String::from_utf8(res.stdout).unwrap();
    let last = doc["tests"].as_array().unwrap().last().unwrap();
    let last_dir = last["directions"].as_array().unwrap().last().unwrap();
    assert_eq!(
        line.trim(),
        format!(
            "{dirs} {intervals} {} {}",
            last["name"].as_str().unwrap(),
            f(&last_dir["rx_pps"])
        )
    );
}

#[test]
fn prometheus_exposition_parses() {
    let _g = crate::util::shared();
    let dir = tempdir("report-prom");
    let out = dir.join("linerate.prom");
    ok(&[
        "report",
        "--format",
        "prometheus",
        fixture("lab-both.json").to_str().unwrap(),
        fixture("udp-paced.json").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("linerate_received_packets_per_second{run=\"fixture\",test=\"udp imix var2\",direction=\"gen_to_sink\"}"));
    assert!(text.contains("linerate_cross_check_flagged{run=\"paced\""));
    if Command::new("/usr/bin/python3")
        .args(["-c", "import prometheus_client"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        if is_root() {
            let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
            let st = Command::new("bash")
                .arg(deps)
                .arg("python3-prometheus-client")
                .status()
                .unwrap();
            assert!(st.success());
        } else {
            crate::util::skip("the parser check: python3-prometheus-client is not installed");
            return;
        }
    }
    // The official client's parser: names, types, labels and values.
    let res = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as p\n\
             fams=list(p(open(sys.argv[1]).read()))\n\
             n=sum(len(f.samples) for f in fams)\n\
             assert all(f.name.startswith('linerate_') for f in fams)\n\
             print(len(fams), n)",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let counts = String::from_utf8(res.stdout).unwrap();
    let fams: usize = counts.split_whitespace().next().unwrap().parse().unwrap();
    assert!(fams >= 20, "{counts}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_of_a_real_lab_run_renders_in_chromium() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let Some(browser) = chromium() else { return };
    let base = tempdir("report-lab");
    let dir = lab_run(
        &base,
        &["--only", "udp 64B one flow", "--only", "tcp 1 stream"],
    );
    let doc = read_json(&dir.join("results.json"));
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).expect("every lab run writes report.html");
    assert!(html.len() < 1_500_000, "report is {} bytes", html.len());
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page names no URL"
    );
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-lab.png");
    let o = open(browser, &page, Some(&shot), false);
    let charts = check_page(&o).unwrap_or_else(|e| panic!("{e}\n{}", o.log));
    fits_1400(&o).unwrap_or_else(|e| panic!("{e}"));
    let ok_tests = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "ok")
        .count();
    let (cpu, charts): (Vec<_>, Vec<_>) = charts.iter().partition(|(id, _)| id.starts_with("cpu"));
    assert_eq!(charts.len(), ok_tests, "a chart per test: {charts:?}");
    assert_eq!(
        cpu.len(),
        ok_tests,
        "a per-core CPU chart per test: {cpu:?}"
    );
    for (id, labels) in &cpu {
        assert!(
            labels.iter().any(|l| l == "system" || l == "softirq"),
            "{id}: {labels:?}"
        );
    }
    assert_eq!(
        html.matches("class=\"verdict").count(),
        ok_tests,
        "a bottleneck verdict per test"
    );
    for (id, labels) in &charts {
        assert!(
            labels.iter().any(|l| l.starts_with("received")),
            "{id}: {labels:?}"
        );
        assert!(
            labels
                .iter()
                .any(|l| l.starts_with("offered") || l.starts_with("sent")),
            "{id}: {labels:?}"
        );
    }
    check_tables(&o.dom, &doc);
    // Regenerating from the directory gives the same page.
    ok(&["report", dir.to_str().unwrap()]);
    eprintln!("screenshot: {}", shot.display());
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn report_of_three_runs_compares_them() {
    if !require_root() {
        return;
    }
    let _g = one_core();
    let Some(browser) = chromium() else { return };
    let base = tempdir("report-three");
    let mut dirs = Vec::new();
    for mode in ["route", "nat", "fw"] {
        let b = base.join(mode);
        dirs.push(lab_run(&b, &["--dut", mode, "--only", "udp 64B one flow"]));
    }
    let page = base.join("compare.html");
    let mut args = vec!["report"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["-o", page.to_str().unwrap()]);
    ok(&args);
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-compare.png");
    let o = open(browser, &page, Some(&shot), false);
    let charts = check_page(&o).unwrap_or_else(|e| panic!("{e}\n{}", o.log));
    fits_1400(&o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(charts.len(), 1, "{charts:?}");
    let labels = &charts[0].1;
    for run in ["lab-route", "lab-nat", "lab-fw"] {
        assert!(
            labels.iter().any(|l| l == run),
            "series of {run}: {labels:?}"
        );
        assert!(
            labels
                .iter()
                .any(|l| l == &format!("{run} ideal (offered)")),
            "{labels:?}"
        );
    }
    // The differences table has every run's figure and a Δ for the later ones.
    let cells = row_cells(
        &o.dom,
        "<tr data-test=\"udp 64B one flow\" data-direction=\"gen_to_sink\" data-figure=\"rx_pps\"",
    );
    let values: Vec<f64> = cells
        .iter()
        .filter_map(|(a, _)| a.get("data-value").map(|v| v.parse().unwrap()))
        .collect();
    let deltas = cells
        .iter()
        .filter(|(a, _)| a.contains_key("data-delta"))
        .count();
    assert_eq!((values.len(), deltas), (3, 2), "{cells:?}");
    for (d, v) in dirs.iter().zip(&values) {
        let doc = read_json(&d.join("results.json"));
        assert_eq!(
            f(&test_named(&doc, "udp 64B one flow")["directions"][0]["rx_pps"]),
            *v
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn report_opens_with_no_network_at_all() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let Some(browser) = chromium() else { return };
    let dir = tempdir("report-offline");
    let page = dir.join("report.html");
    ok(&[
        "report",
        fixture("udp-paced.json").to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(
        html.contains("default-src 'none'"),
        "the page forbids every fetch"
    );
    // A network namespace of its own: not even loopback is up.
    let o = open(browser, &page, None, true);
    let charts = check_page(&o).unwrap_or_else(|e| panic!("{e}\n{}", o.log));
    assert_eq!(charts.len(), 1);
    assert!(
        charts[0].1.iter().any(|l| l.starts_with("target")),
        "{charts:?}"
    );
    // The flagged cross-checks of this fixture are highlighted.
    assert!(o.dom.contains("<tr class=\"flagged\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ramp_and_search_reports_render() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let Some(browser) = chromium() else { return };
    let dir = tempdir("report-ramps");
    let ramp = read_json(&fixture("ramp.json"));
    let page = dir.join("ramp.html");
    ok(&[
        "report",
        fixture("ramp.json").to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let o = open(browser, &page, None, false);
    let charts = check_page(&o).unwrap_or_else(|e| panic!("{e}\n{}", o.log));
    let dirs = ramp["ramps"][0]["directions"].as_array().unwrap();
    assert_eq!(charts.len(), 2 * dirs.len() + 1, "{charts:?}");
    assert!(charts.iter().any(|(_, l)| l
        .iter()
        .any(|l| l.starts_with("ideal: forwarded = offered"))));
    assert!(charts
        .iter()
        .any(|(_, l)| l.iter().any(|l| l.starts_with("threshold"))));
    let sat = f(&dirs[0]["summary"]["saturation"]["offered_pps"]);
    let cells = row_cells(
        &o.dom,
        "<tr data-ramp=\"ramp bench\" data-direction=\"gen_to_sink\"",
    );
    let shown = cells
        .iter()
        .find(|(a, _)| a.get("data-key").map(String::as_str) == Some("saturation_offered_pps"))
        .map(|(a, t)| (a["data-value"].parse::<f64>().unwrap(), t.clone()))
        .expect("saturation cell");
    assert_eq!(shown.0, sat);
    assert_eq!(
        shown.1.replace([',', ' '], "").trim_end_matches("pps"),
        format!("{}", sat.round())
    );

    let search = read_json(&fixture("search.json"));
    let page = dir.join("search.html");
    ok(&[
        "report",
        fixture("search.json").to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let o = open(browser, &page, None, false);
    let charts = check_page(&o).unwrap_or_else(|e| panic!("{e}\n{}", o.log));
    assert_eq!(charts.len(), search["searches"].as_array().unwrap().len());
    for x in search["searches"].as_array().unwrap() {
        let ndr = x["mlr"]["goals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["goal"]["name"] == "ndr")
            .unwrap();
        let sel = format!(
            "<tr data-search=\"{}\" data-result=\"NDR (loss ≤ 0.0 %)\"",
            x["name"].as_str().unwrap()
        );
        let cells = row_cells(&o.dom, &sel);
        let v: f64 = cells
            .iter()
            .find(|(a, _)| a.get("data-key").map(String::as_str) == Some("rate_pps"))
            .map(|(a, _)| a["data-value"].parse().unwrap())
            .unwrap_or_else(|| panic!("no NDR row {sel}"));
        assert_eq!(v, f(&ndr["conditional_throughput_pps"]));
    }

    // Two runs of a ramp overlaid, each with its saturation point.
    let page = dir.join("ramps.html");
    ok(&[
        "report",
        fixture("ramp.json").to_str().unwrap(),
        fixture("ramp.json").to_str().unwrap(),
        "--label",
        "before",
        "--label",
        "after",
        "-o",
        page.to_str().unwrap(),
    ]);
    let o = open(browser, &page, None, false);
    let charts = check_page(&o).unwrap_or_else(|e| panic!("{e}\n{}", o.log));
    assert!(
        charts.iter().any(|(id, l)| id.starts_with("cmpramp")
            && l.contains(&"before".to_string())
            && l.contains(&"after".to_string())),
        "{charts:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The checks above fail when a chart does not draw: a chart with no data,
/// and a page whose chart library is gone.
#[test]
fn browser_checks_catch_charts_that_do_not_render() {
    if !require_root() {
        return;
    }
    let _g = shared();
    let Some(browser) = chromium() else { return };
    let dir = tempdir("report-broken");
    let page = dir.join("good.html");
    ok(&[
        "report",
        fixture("lab-both.json").to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(check_page(&open(browser, &page, None, false)).is_ok());

    // One series of the first chart has no values left.
    let start = html.find("id=\"lr-chart-data\">").unwrap();
    let data_at = start + html[start..].find("\"data\":[[").unwrap();
    let second = data_at + html[data_at..].find("],[").unwrap() + 3;
    let end = second + html[second..].find(']').unwrap();
    let n = html[second..end].split(',').count();
    let nulls = vec!["null"; n].join(",");
    let broken = format!("{}{nulls}{}", &html[..second], &html[end..]);
    let p = dir.join("no-data.html");
    std::fs::write(&p, broken).unwrap();
    let e = check_page(&open(browser, &p, None, false)).unwrap_err();
    assert!(
        e.contains("series drawn") || e.contains("drew 0 pixels"),
        "{e}"
    );

    // No chart library.
    let broken = html.replacen("var uPlot=function", "var notUPlot=function", 1);
    assert_ne!(broken, html);
    let p = dir.join("no-library.html");
    std::fs::write(&p, broken).unwrap();
    let e = check_page(&open(browser, &p, None, false)).unwrap_err();
    assert!(e.contains("script errors"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_errors_say_what_to_do() {
    let _g = crate::util::shared();
    // A run that is not there is a usage error, as with `check` (issue 38).
    let out = run(&["report", "/nonexistent/run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give a run directory"));
    let f = fixture("lab-both.json");
    let out = run(&[
        "report",
        f.to_str().unwrap(),
        "--label",
        "a",
        "--label",
        "b",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one per run"));
}
