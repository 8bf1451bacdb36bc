//! The fuzz corpora and crash inputs, replayed on stable Rust: every file in
//! `fuzz/corpus/<target>/`, `fuzz/regressions/<target>/` (crashes the
//! fuzzer found, kept as regression tests) and a local `fuzz/artifacts/<target>/`
//! goes through the same checks the libFuzzer target runs (`fuzz/src/checks.rs`,
//! included here by path), so CI holds the decoders to them without nightly.

#[path = "../fuzz/src/checks.rs"]
#[allow(dead_code)]
mod checks;

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Files of `dir`, sorted; none when it does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target`'s check on every input it has; a failing input is named
/// with the panic's message, and every failure is listed, not just the first.
fn replay(target: &str) -> usize {
    let check = checks::TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .map(|(_, f)| *f)
        .unwrap();
    let mut failed = Vec::new();
    let mut n = 0;
    for kind in ["corpus", "regressions", "artifacts"] {
        for file in inputs(&fuzz_dir().join(kind).join(target)) {
            let data = std::fs::read(&file).unwrap();
            n += 1;
            if let Err(e) = panic::catch_unwind(AssertUnwindSafe(|| check(&data))) {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!("{}: {msg}", file.display()));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "fuzz target {target}: {} of {n} inputs fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
    n
}

/// Every target has a corpus to replay, and every corpus a target.
#[test]
fn fuzz_corpora_match_targets() {
    let _g = crate::util::shared();
    let names: Vec<&str> = checks::TARGETS.iter().map(|(n, _)| *n).collect();
    for n in &names {
        let dir = fuzz_dir().join("corpus").join(n);
        assert!(
            !inputs(&dir).is_empty(),
            "fuzz target {n} has no seeds in {}",
            dir.display()
        );
    }
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for kind in ["corpus", "regressions"] {
        let Ok(dirs) = std::fs::read_dir(fuzz_dir().join(kind)) else {
            continue;
        };
        for d in dirs {
            let d = d.unwrap().file_name();
            let d = d.to_string_lossy();
            assert!(names.contains(&d.as_ref()), "fuzz/{kind}/{d} has no check");
        }
    }
    for n in &names {
        assert!(
            manifest.contains(&format!("name = \"{n}\"")),
            "fuzz/Cargo.toml has no [[bin]] {n}"
        );
    }
}

#[test]
fn fuzz_replay_control() {
    let _g = crate::util::shared();
    assert!(replay("control") > 0);
}

#[test]
fn fuzz_replay_plan() {
    let _g = crate::util::shared();
    assert!(replay("plan") > 0);
}

#[test]
fn fuzz_replay_http_head() {
    let _g = crate::util::shared();
    assert!(replay("http_head") > 0);
}

#[test]
fn fuzz_replay_probe() {
    let _g = crate::util::shared();
    assert!(replay("probe") > 0);
}

#[test]
fn fuzz_replay_frame() {
    let _g = crate::util::shared();
    assert!(replay("frame") > 0);
}

#[test]
fn fuzz_replay_units() {
    let _g = crate::util::shared();
    assert!(replay("units") > 0);
}

#[test]
fn fuzz_replay_criteria() {
    let _g = crate::util::shared();
    assert!(replay("criteria") > 0);
}

#[test]
fn fuzz_replay_iperf3() {
    let _g = crate::util::shared();
    assert!(replay("iperf3") > 0);
}

#[test]
fn fuzz_replay_h2() {
    let _g = crate::util::shared();
    assert!(replay("h2") > 0);
}

#[test]
fn fuzz_replay_chunked() {
    let _g = crate::util::shared();
    assert!(replay("chunked") > 0);
}

#[test]
fn fuzz_replay_ssh_config() {
    let _g = crate::util::shared();
    assert!(replay("ssh_config") > 0);
    // The oracle sees what the check must refuse: a command run while ssh
    // reads the file, and a proxy it would start (where ssh is installed).
    let text = "Match exec \"true\"\n  Port 2222\nHost *\n  ProxyCommand nc %h %p\n";
    let seen = checks::ssh_view(text);
    checks::ssh_view_cleanup();
    if let Some((view, ran)) = seen {
        assert!(ran, "Match exec ran nothing the marker saw");
        assert!(view.contains("proxycommand nc %h %p"), "{view}");
        assert!(view.contains("port 2222"), "{view}");
    } else {
        assert!(
            std::process::Command::new("ssh")
                .arg("-V")
                .output()
                .is_err(),
            "ssh is installed but ssh -G gave no view"
        );
    }
}
