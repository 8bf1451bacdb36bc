//! Every integration test holds the suite's lock (`util::serial()`,
//! `util::one_core()` or `util::shared()`): a test that held none would
//! run beside an exclusive one, whose rates and times assume it runs
//! alone. Reads `tests/*.rs` as text: a test's body is from its `fn` line
//! to the first line that is only `}` (rustfmt's end of a top-level fn).

use std::path::Path;

/// The tests in `src` (a file's text) that take no lock, neither in their
/// body nor through a function of the same file that takes one.
fn lockless(src: &str) -> Vec<String> {
    let takes = |body: &str| {
        body.contains("serial()") || body.contains("one_core()") || body.contains("shared()")
    };
    let mut fns: Vec<(String, bool, String)> = Vec::new();
    let lines: Vec<&str> = src.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line
            .strip_prefix("fn ")
            .or_else(|| line.strip_prefix("pub fn "))
            .or_else(|| line.strip_prefix("pub(crate) fn "))
        else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let end = lines[i..]
            .iter()
            .position(|l| *l == "}")
            .map_or(lines.len(), |n| i + n);
        let is_test = i > 0 && lines[..i].iter().rev().take(3).any(|l| *l == "#[test]");
        fns.push((name, is_test, lines[i..end].join("\n")));
    }
    let lockers: Vec<&str> = fns
        .iter()
        .filter(|(_, t, b)| !t && takes(b))
        .map(|(n, _, _)| n.as_str())
        .collect();
    fns.iter()
        .filter(|(_, t, b)| {
            *t && !takes(b) && !lockers.iter().any(|n| b.contains(&format!("{n}(")))
        })
        .map(|(n, _, _)| n.clone())
        .collect()
}

#[test]
fn every_test_takes_a_lock() {
    let _g = crate::util::shared();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    assert!(files.len() > 40, "{files:?}");
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        for t in lockless(&src) {
            missing.push(format!("{}: {t}", f.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "tests that take none of util::serial(), util::one_core() and util::shared():\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_lock_check_finds_a_lockless_test() {
    let _g = crate::util::shared();
    let src = "#[test]\nfn a() {\n    let _g = serial();\n}\n\n\
               #[test]\nfn b() {\n    assert!(true);\n}\n\n\
               fn helper() {\n    let _g = shared();\n}\n\n\
               #[test]\nfn c() {\n    helper();\n}\n\n\
               #[test]\nfn d() {\n    let _g = one_core();\n}\n";
    assert_eq!(lockless(src), ["b"]);
}

/// Who may start beside whom: serial alone; two one-core tests, or one
/// beside any number of shared ones; shared ones beside each other.
#[test]
fn the_lock_counts_two_cores() {
    use crate::util::{admits, Holders, Kind};
    let _g = crate::util::shared();
    let h = |shared, cores| Holders { shared, cores };
    for kind in [Kind::Exclusive, Kind::Core, Kind::Shared] {
        assert!(admits(&h(0, 0), kind), "an idle lock admits anyone");
        assert!(!admits(&h(0, 2), kind), "nobody beside a serial test");
    }
    assert!(!admits(&h(1, 0), Kind::Exclusive));
    assert!(!admits(&h(0, 1), Kind::Exclusive));
    assert!(admits(&h(0, 1), Kind::Core), "two one-core tests");
    assert!(!admits(&h(0, 2), Kind::Core), "not three");
    assert!(admits(&h(3, 0), Kind::Core), "one beside shared ones");
    assert!(!admits(&h(3, 1), Kind::Core), "not two beside shared ones");
    assert!(
        admits(&h(3, 1), Kind::Shared),
        "shared ones join their group"
    );
    assert!(admits(&h(0, 1), Kind::Shared), "beside a one-core test");
}
