//! The README's runnable blocks (marked `<!-- readme-test: NAME -->`) run as
//! they stand, in order, with this build of linerate first on PATH; then
//! every plan in examples/ runs against the namespaces they made. A user
//! who copies them gets what the README says.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shell blocks that follow a `<!-- readme-test: NAME -->` line.
fn marked_blocks(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = readme.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l
            .trim()
            .strip_prefix("<!-- readme-test:")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```sh"),
            "README: the block after readme-test {name} must be a ```sh block, not {fence:?}"
        );
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        out.push((name.trim().to_string(), body.join("\n")));
    }
    out
}

/// Removes the README's namespaces however the test ends.
struct Namespaces;

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in ["gen", "sink"] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn sh(script: &str, path: &str, dir: &Path) {
    let out = Command::new("sh")
        .args(["-e", "-x", "-c", script])
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "README block failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_readme_blocks_are_marked_and_parse() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let blocks = marked_blocks(&readme);
    let names: Vec<&str> = blocks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["first", "adhoc", "latency"],
        "the README's tested blocks"
    );
    assert!(blocks[0].1.contains("ip netns add gen"), "{}", blocks[0].1);
}

#[test]
fn the_readme_first_test_adhoc_examples_and_example_plans_run() {
    if !require_root() {
        return;
    }
    let _g = serial();
    for ns in ["gen", "sink"] {
        if Path::new("/run/netns").join(ns).exists() {
            eprintln!(
                "skipped: a namespace named {ns} exists already (the README's example makes \
                 its own); delete it to run this test"
            );
            return;
        }
    }
    let _cleanup = Namespaces;
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let bin_dir = Path::new(bin()).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let work = tempdir("readme");
    for (name, block) in marked_blocks(&readme) {
        eprintln!("README block {name}");
        sh(&block, &path, &work);
    }
    // Every example plan, against the namespaces the README made.
    let mut plans: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    plans.sort();
    assert!(plans.len() >= 3, "{plans:?}");
    for plan in plans {
        let results = work.join("results");
        let out = Command::new(bin())
            .arg("run")
            .arg(&plan)
            .args(["--no-progress", "--json", "--results-dir"])
            .arg(&results)
            .output()
            .expect("running linerate");
        let what = plan.display();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(doc["status"], "complete", "{what}");
        let tests = doc["tests"].as_array().map(Vec::len).unwrap_or(0);
        let ramps = doc["ramps"].as_array().map(Vec::len).unwrap_or(0);
        assert!(tests + ramps > 0, "{what}: nothing ran");
        for t in doc["tests"].as_array().into_iter().flatten() {
            assert_eq!(t["status"], "ok", "{what}: {}", t["name"]);
            for d in t["directions"].as_array().into_iter().flatten() {
                assert!(
                    d["rx_packets"].as_u64().unwrap_or(0) > 0
                        || d["rx_l2_bps"].as_f64().unwrap_or(0.0) > 0.0,
                    "{what}: {} received nothing: {d}",
                    t["name"]
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}
