//! The README's and docs/'s shell blocks: the README is the first hour and
//! its "Reference" section lists the pages of docs/ in reading order; the
//! README and then each page in that order are read as one document.
//! Every ```sh, ```bash and ```console block
//! carries a marker on the line before it, either `<!-- readme-test: NAME
//! -->` (the block runs here as it stands, in order, with this build of
//! linerate first on PATH) or `<!-- readme-skip: REASON -->` (why it
//! cannot: ssh hosts, minutes of lab searches, files of the user's own).
//! A block with neither fails the test, so a new example is never left
//! untested silently. After the blocks, every plan in examples/ runs
//! against the namespaces they made. A user who copies them gets what the
//! README says.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What the line before a shell block says of it.
#[derive(Debug, Clone, PartialEq)]
enum Mark {
    /// `<!-- readme-test: NAME -->`: runs.
    Run(String),
    /// `<!-- readme-skip: REASON -->`: does not, for REASON.
    Skip(String),
    /// Neither: an error.
    None,
}

/// A shell block: its line number (from 1), its mark and its text.
struct Block {
    line: usize,
    mark: Mark,
    body: String,
}

/// The marker `<!-- KEY: VALUE -->` on `line`, if it is one.
fn marker<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.trim()
        .strip_prefix("<!--")?
        .trim_start()
        .strip_prefix(key)?
        .strip_prefix(':')?
        .strip_suffix("-->")
        .map(str::trim)
}

/// Every shell block of `readme` (```sh, ```bash, ```console, indented or
/// not) with the marker on the line before it.
fn shell_blocks(readme: &str) -> Vec<Block> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let Some(lang) = fence.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let shell = matches!(lang.trim(), "sh" | "bash" | "console");
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i]);
            i += 1;
        }
        i += 1;
        if !shell {
            continue;
        }
        let before = if start > 0 { lines[start - 1] } else { "" };
        let mark = match (marker(before, "readme-test"), marker(before, "readme-skip")) {
            (Some(name), _) => Mark::Run(name.to_string()),
            (None, Some(reason)) => Mark::Skip(reason.to_string()),
            (None, None) => Mark::None,
        };
        out.push(Block {
            line: start + 1,
            mark,
            body: body.join("\n"),
        });
    }
    out
}

/// What is wrong with the marks of `readme`'s shell blocks: a block with
/// no marker, a skip without a reason, a name used twice.
fn unmarked(readme: &str) -> Vec<String> {
    unmarked_in("README.md", readme, &mut Vec::new())
}

/// As [`unmarked`], for the page `file`, with the names of the pages read
/// before it.
fn unmarked_in(file: &str, readme: &str, names: &mut Vec<String>) -> Vec<String> {
    let mut errors = Vec::new();
    for b in shell_blocks(readme) {
        match &b.mark {
            Mark::None => errors.push(format!(
                "{file}:{}: a shell block with neither <!-- readme-test: NAME --> nor \
                 <!-- readme-skip: REASON --> on the line before it",
                b.line
            )),
            Mark::Skip(r) if r.len() < 10 => errors.push(format!(
                "{file}:{}: readme-skip needs a reason (why it cannot run here)",
                b.line
            )),
            Mark::Run(n) if names.contains(n) => {
                errors.push(format!("{file}:{}: readme-test {n} twice", b.line))
            }
            Mark::Run(n) => names.push(n.clone()),
            Mark::Skip(_) => {}
        }
    }
    errors
}

/// The README and the pages its "Reference" section links in docs/, in
/// that order: (path, text). Fails when a page of docs/ is not linked
/// there, so no page is left out of the checks.
fn pages() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let reference = readme
        .split("\n## Reference\n")
        .nth(1)
        .expect("the README has a Reference section")
        .split("\n## ")
        .next()
        .unwrap_or("");
    let mut linked: Vec<String> = Vec::new();
    for part in reference.split("](docs/").skip(1) {
        if let Some(name) = part.split(')').next() {
            let path = format!("docs/{name}");
            if !linked.contains(&path) {
                linked.push(path);
            }
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| format!("docs/{}", e.file_name().to_string_lossy()))
        .filter(|p| p.ends_with(".md"))
        .collect();
    on_disk.sort();
    let mut sorted = linked.clone();
    sorted.sort();
    assert_eq!(
        sorted, on_disk,
        "every page of docs/ is linked from the README's Reference, once"
    );
    let mut out = vec![("README.md".to_string(), readme)];
    for path in linked {
        let text = std::fs::read_to_string(repo().join(&path)).expect(&path);
        out.push((path, text));
    }
    out
}

/// The blocks marked `readme-test`, by name.
fn marked_blocks(readme: &str) -> Vec<(String, String)> {
    shell_blocks(readme)
        .into_iter()
        .filter_map(|b| match b.mark {
            Mark::Run(name) => Some((name, b.body)),
            _ => None,
        })
        .collect()
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

/// A block with its 3-second durations cut to 1 s (2 s where `--omit 1`
/// must leave a second to count): the test proves each command runs as
/// written, which a shorter load proves as well, in a third of the time.
fn shortened(block: &str) -> String {
    let lines = block.lines().map(|line| {
        let one = if line.contains("--omit") { "2" } else { "1" };
        let mut prev = "";
        let words: Vec<String> = line
            .split(' ')
            .map(|w| {
                let out = match (prev, w) {
                    ("-t", "3") => one.to_string(),
                    ("-t", "3s") => format!("{one}s"),
                    _ => w.to_string(),
                };
                prev = w;
                out
            })
            .collect();
        words.join(" ")
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// A plan with every test's `duration = N` set to 1 s.
fn short_durations(plan: &str) -> String {
    plan.lines()
        .map(|l| {
            if l.trim_start().starts_with("duration =") {
                "duration = 1"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn short_plans_keep_all_but_their_durations() {
    let _g = crate::util::shared();
    let plan = "[[test]]\nname = \"a\"\nduration = 3\nrate = \"1kpps\"\n  duration = 20";
    assert_eq!(
        short_durations(plan),
        "[[test]]\nname = \"a\"\nduration = 1\nrate = \"1kpps\"\nduration = 1"
    );
}

#[test]
fn the_readme_blocks_are_marked_and_parse() {
    let _g = crate::util::shared();
    let pages = pages();
    let mut names = Vec::new();
    let errors: Vec<String> = pages
        .iter()
        .flat_map(|(file, text)| unmarked_in(file, text, &mut names))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let blocks: Vec<(String, String)> = pages
        .iter()
        .flat_map(|(_, text)| marked_blocks(text))
        .collect();
    let names: Vec<&str> = blocks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["first", "adhoc", "sweep", "dscp", "latency"],
        "the README's tested blocks"
    );
    assert!(blocks[0].1.contains("ip netns add gen"), "{}", blocks[0].1);
    let adhoc = shortened(&blocks[1].1);
    assert!(!adhoc.contains("-t 3"), "{adhoc}");
    assert!(adhoc.contains("-t 1s --rate 500M"), "{adhoc}");
    assert!(adhoc.contains("-t 2 --omit 1"), "{adhoc}");
    // Issue 38: the sweep targets the first test's sink.
    assert!(
        blocks[2].1.contains("--target 198.19.0.1"),
        "{}",
        blocks[2].1
    );
    assert!(blocks[3].1.contains("--dscp ef"), "{}", blocks[3].1);
    let skipped = pages
        .iter()
        .flat_map(|(_, text)| shell_blocks(text))
        .filter(|b| matches!(b.mark, Mark::Skip(_)))
        .count();
    // The README is the first hour: its first page has the first test and
    // the ad-hoc examples, both run here.
    assert_eq!(blocks[0].0, "first");
    assert!(
        marked_blocks(&pages[0].1).len() >= 2,
        "the README's own tested blocks"
    );
    assert!(skipped >= 10, "{skipped} skipped blocks");
}

/// The check finds what it is for: a block without a marker, in any of
/// the shells' fences, indented or not; other fences are not shell.
#[test]
fn a_shell_block_without_a_marker_is_found() {
    let _g = crate::util::shared();
    let doc = "text\n\n<!-- readme-test: a -->\n```sh\nlinerate tcp\n```\n\n\
               ```console\n$ linerate udp\n```\n\n  ```bash\n  ls\n  ```\n\n\
               <!-- readme-skip: x -->\n```sh\nls\n```\n\n```toml\na = 1\n```\n\n```\nplain\n```\n";
    let errors = unmarked(doc);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("README.md:8:"), "{errors:?}");
    assert!(errors[1].starts_with("README.md:12:"), "{errors:?}");
    assert!(errors[2].contains("needs a reason"), "{errors:?}");
    assert_eq!(
        marked_blocks(doc),
        [("a".to_string(), "linerate tcp".to_string())]
    );
}

#[test]
fn the_readme_first_test_adhoc_examples_and_example_plans_run() {
    if !require_root() {
        return;
    }
    let _g = one_core();
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
    let pages = pages();
    let bin_dir = Path::new(bin()).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let work = tempdir("readme");
    for (name, block) in pages.iter().flat_map(|(_, text)| marked_blocks(text)) {
        eprintln!("README block {name}");
        sh(&shortened(&block), &path, &work);
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
        // Shortened as the blocks are: 1 s tests check that each plan
        // runs; their rates are other tests' business.
        let text = std::fs::read_to_string(&plan).expect("an example plan");
        let short = work.join(plan.file_name().expect("a plan's file name"));
        std::fs::write(&short, short_durations(&text)).expect("writing the shortened plan");
        let out = Command::new(bin())
            .arg("run")
            .arg(&short)
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
