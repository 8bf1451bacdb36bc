//! Reading reports in Debian's headless Chromium: installing it through
//! scripts/deps.sh when missing, opening a page (optionally with no network
//! at all), and checking from the serialised DOM what a person would see.
//! The DOM is read with a few string helpers: Chromium serialises it with
//! double-quoted attributes, and that is all they need.

use crate::util::{f, is_root, tempdir};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Attributes of every `<name ...>` start tag, in document order. Chromium
/// serialises the DOM with double-quoted attributes, which is all this reads.
fn tags(html: &str, name: &str) -> Vec<HashMap<String, String>> {
    let open = format!("<{name} ");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        let end = rest.find('>').unwrap_or(rest.len());
        out.push(attrs(&rest[..end]));
    }
    out
}

fn attrs(s: &str) -> HashMap<String, String> {
    let mut m = HashMap::new();
    let mut rest = s.trim();
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq]
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .to_string();
        let after = &rest[eq + 2..];
        let close = after.find('"').unwrap_or(after.len());
        m.insert(key, unescape(&after[..close]));
        rest = &after[(close + 1).min(after.len())..];
    }
    m
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The table cells (`<td ...>text</td>`) of the row that starts with the
/// given attributes, as (attributes, visible text).
pub fn row_cells(dom: &str, row_attrs: &str) -> Vec<(HashMap<String, String>, String)> {
    let Some(start) = dom.find(row_attrs) else {
        return Vec::new();
    };
    let row = &dom[start..];
    let row = &row[..row.find("</tr>").unwrap_or(row.len())];
    let mut cells = Vec::new();
    let mut rest = row;
    while let Some(i) = rest.find("<td") {
        rest = &rest[i + 3..];
        let gt = rest.find('>').unwrap();
        let a = attrs(&rest[..gt]);
        let body = &rest[gt + 1..];
        let end = body.find("</td>").unwrap_or(body.len());
        cells.push((a, strip_tags(&body[..end])));
        rest = &body[end..];
    }
    cells
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in s.chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    unescape(out.trim())
}

/// "117,718 pps" → 117718, "20.2 Gbit/s" → 2.02e10, "0.8 %" → 0.8.
fn parse_shown(text: &str) -> f64 {
    let t = text.replace(',', "");
    let mut parts = t.split_whitespace();
    let n: f64 = parts.next().unwrap().parse().unwrap_or(f64::NAN);
    let unit = parts.next().unwrap_or("");
    let k = match unit.chars().next() {
        Some('k') => 1e3,
        Some('M') => 1e6,
        Some('G') => 1e9,
        Some('T') => 1e12,
        _ => 1.0,
    };
    n * k
}

/// What a person sees after the page's scripts ran, and what the browser
/// said on the way.
pub struct Opened {
    pub dom: String,
    pub log: String,
}

/// Debian's chromium, installed through scripts/deps.sh when missing.
pub fn chromium() -> Option<&'static str> {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        let have = || {
            Command::new("sh")
                .args(["-c", "command -v chromium"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        if have() {
            return true;
        }
        if !is_root() {
            return false;
        }
        let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
        let st = Command::new("bash")
            .arg(deps)
            .args(["chromium", "python3-prometheus-client"])
            .status()
            .expect("running scripts/deps.sh");
        assert!(st.success(), "scripts/deps.sh chromium failed");
        have()
    });
    if found {
        return Some("chromium");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have chromium (run the tests as root so scripts/deps.sh can install it)"
    );
    eprintln!("skipping: needs chromium (apt-get install chromium, or run as root)");
    None
}

fn chromium_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--hide-scrollbars",
        // Any request the page made would fail here (it makes none).
        "--proxy-server=127.0.0.1:9",
        "--virtual-time-budget=5000",
        "--enable-logging=stderr",
        "--v=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// Opens `page` headless (in a network namespace of its own with no network
/// at all when `offline`), returns the DOM after scripts ran; takes a
/// screenshot into `shot` when given.
pub fn open(browser: &str, page: &Path, shot: Option<&Path>, offline: bool) -> Opened {
    // A profile of its own per opening: tests that share the suite's lock
    // open pages of the same name at once.
    static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let profile = tempdir(&format!(
        "chromium-{}-{}",
        OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        page.file_name().unwrap().to_string_lossy()
    ));
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let run_browser = |extra: &[String]| {
        let mut cmd = if offline {
            let mut c = Command::new("unshare");
            c.args(["--net", "--", "timeout", "120", browser]);
            c
        } else {
            let mut c = Command::new("timeout");
            c.args(["120", browser]);
            c
        };
        let out = cmd
            .args(chromium_args(&profile))
            .args(extra)
            .arg(&url)
            .output()
            .expect("starting chromium");
        assert!(
            out.status.success(),
            "chromium failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    // The DOM as a 1400 px wide window lays it out (the page records
    // what overflows it in body[data-overflow]).
    let out = run_browser(&[
        "--dump-dom".to_string(),
        "--window-size=1400,3000".to_string(),
    ]);
    let mut log = String::from_utf8_lossy(&out.stderr).to_string();
    if let Some(shot) = shot {
        let out = run_browser(&[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,3000".to_string(),
        ]);
        log.push_str(&String::from_utf8_lossy(&out.stderr));
        let len = std::fs::metadata(shot).map(|m| m.len()).unwrap_or(0);
        assert!(len > 20_000, "screenshot {} is {len} bytes", shot.display());
    }
    let _ = std::fs::remove_dir_all(&profile);
    Opened {
        dom: String::from_utf8(out.stdout).unwrap(),
        log,
    }
}

/// Nothing is wider than a 1400 px window: no horizontal scrollbar on the
/// page or on any table's scroll box.
pub fn fits_1400(o: &Opened) -> Result<(), String> {
    let body = tags(&o.dom, "body").pop().ok_or("no body")?;
    match body.get("data-overflow").map(String::as_str) {
        Some("") => Ok(()),
        Some(what) => Err(format!("wider than 1400 px: {what}")),
        None => Err("the page did not measure its width (no data-overflow)".into()),
    }
}

/// Every chart drew every series, nothing went wrong in the page. Returns
/// the charts' ids and the labels of their series.
pub fn check_page(o: &Opened) -> Result<Vec<(String, Vec<String>)>, String> {
    let errors = tags(&o.dom, "pre")
        .into_iter()
        .find(|a| a.get("id").map(String::as_str) == Some("lr-errors"))
        .ok_or("no #lr-errors element: the page did not load")?;
    if errors.get("data-count").map(String::as_str) != Some("0") {
        let at = o.dom.find("id=\"lr-errors\"").unwrap_or(0);
        // 2000 bytes of context, cut where a character ends.
        let mut end = (at + 2000).min(o.dom.len());
        while !o.dom.is_char_boundary(end) {
            end -= 1;
        }
        return Err(format!("script errors: {}", &o.dom[at..end]));
    }
    for bad in ["Uncaught", "Refused to", "ERR_", "Failed to load"] {
        if let Some(line) = o.log.lines().find(|l| l.contains(bad)) {
            return Err(format!("browser log: {line}"));
        }
    }
    let figures: Vec<_> = tags(&o.dom, "figure")
        .into_iter()
        .filter(|a| a.get("data-chart").is_some())
        .collect();
    let body = tags(&o.dom, "body").pop().ok_or("no body")?;
    let expected: usize = body["data-charts"].parse().map_err(|_| "data-charts")?;
    if figures.len() != expected {
        return Err(format!(
            "{} chart figures, page has {expected} charts",
            figures.len()
        ));
    }
    if body.get("data-charts-built").map(String::as_str) != Some(&expected.to_string()) {
        return Err(format!(
            "charts built: {:?} of {expected}",
            body.get("data-charts-built")
        ));
    }
    let mut charts = Vec::new();
    for f in &figures {
        let id = &f["data-chart"];
        let want = &f["data-series-expected"];
        if f.get("data-rendered").map(String::as_str) != Some("ok")
            || f.get("data-series-drawn") != Some(want)
        {
            return Err(format!(
                "chart {id}: rendered {:?}, {:?} of {want} series drawn",
                f.get("data-rendered"),
                f.get("data-series-drawn")
            ));
        }
        // The figure's own part of the DOM: its drawn-series list and uPlot's legend.
        let at = o.dom.find(&format!("data-chart=\"{id}\"")).unwrap();
        let part = &o.dom[at..];
        let part = &part[..part.find("</figure>").unwrap()];
        let drawn = tags(part, "li");
        if drawn.len().to_string() != *want {
            return Err(format!(
                "chart {id}: {} series listed, {want} expected",
                drawn.len()
            ));
        }
        let mut labels = Vec::new();
        for s in &drawn {
            let px: u64 = s["data-pixels"].parse().unwrap_or(0);
            let points: u64 = s["data-points"].parse().unwrap_or(0);
            if px == 0 || points == 0 {
                return Err(format!(
                    "chart {id}: series {} drew {px} pixels from {points} points",
                    s["data-label"]
                ));
            }
            labels.push(s["data-label"].clone());
        }
        let legend = part.matches("u-series").count();
        if legend < drawn.len() + 1 {
            return Err(format!("chart {id}: uPlot legend has {legend} entries"));
        }
        if !part.contains("<canvas") {
            return Err(format!("chart {id}: no canvas"));
        }
        charts.push((id.clone(), labels));
    }
    Ok(charts)
}

/// The summary and cross-check tables show results.json's figures, both as
/// raw values and as the text a person reads.
pub fn check_tables(dom: &str, doc: &Value) {
    let close = |shown: f64, want: f64, rel: f64| (shown - want).abs() <= want.abs() * rel + 0.5;
    for t in doc["tests"].as_array().unwrap() {
        assert_eq!(t["status"], "ok", "{}: {}", t["name"], t["error"]);
        let tcp = t["params"]["protocol"] == "tcp";
        for d in t["directions"].as_array().unwrap() {
            let sel = format!(
                "<tr data-test=\"{}\" data-direction=\"{}\"",
                t["name"].as_str().unwrap(),
                d["direction"].as_str().unwrap()
            );
            let cells = row_cells(dom, &sel);
            assert!(!cells.is_empty(), "no summary row {sel}");
            let keys: &[(&str, f64)] = if tcp {
                &[
                    ("rx_l2_bps", 0.005),
                    ("line_rate_pct", 0.05),
                    ("retransmits", 0.0),
                ]
            } else {
                &[
                    ("rx_pps", 0.0),
                    ("rx_l2_bps", 0.005),
                    ("rx_l1_bps", 0.005),
                    ("line_rate_pct", 0.05),
                    ("loss_ratio", 0.0),
                    ("lost", 0.0),
                    ("tester_drops", 0.0),
                ]
            };
            for (key, rel) in keys {
                // No line rate known (a veth without --line-rate): a dash, no figure.
                if d[*key].is_null() {
                    continue;
                }
                let want = f(&d[*key]);
                let (a, text) = cells
                    .iter()
                    .find(|(a, _)| a.get("data-key").map(String::as_str) == Some(*key))
                    .unwrap_or_else(|| panic!("{sel}: no {key} cell"));
                let raw: f64 = a["data-value"].parse().unwrap();
                assert!(
                    (raw - want).abs() <= want.abs() * 1e-12,
                    "{sel} {key}: {raw} vs {want}"
                );
                let shown = parse_shown(text);
                let want_shown = if *key == "loss_ratio" {
                    want * 100.0
                } else {
                    want
                };
                assert!(
                    close(shown, want_shown, *rel + 0.0005),
                    "{sel} {key}: shows {text:?}, results.json has {want}"
                );
            }
        }
        for c in t["cross_checks"].as_array().unwrap() {
            let what = c["what"].as_str().unwrap();
            let at = dom
                .find(&format!(
                    "<td>{}</td>",
                    what.replace('&', "&amp;")
                        .replace('<', "&lt;")
                        .replace('>', "&gt;")
                ))
                .unwrap_or_else(|| panic!("cross-check {what} not shown"));
            let row = &dom[at..];
            let row = &row[..row.find("</tr>").unwrap()];
            for key in ["application", "kernel"] {
                let want = c[key].as_u64().unwrap();
                assert!(
                    row.contains(&format!("data-value=\"{want}\"")),
                    "cross-check {what}: {key} {want} missing in {row}"
                );
            }
        }
    }
}
