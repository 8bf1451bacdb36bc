//! The layer rule of ARCHITECTURE.md, checked on the source: every module
//! imports only its own layer and those below it (`linerate::LAYERS`), and
//! no files import each other in a circle. Reads `src/` as text, so it needs
//! no tool beyond the test itself.
//!
//! An import is any path that starts at `crate::`, `super::` or `self::`
//! (in `use` lines, use groups and inline paths); it points at the longest
//! prefix that names a file module. A parent declaring a child (`mod x;`)
//! is ownership, not an import. Test modules (`#[cfg(test)]`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module a file is: src/a/b.rs and src/a/b/mod.rs are ["a", "b"].
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut m: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

/// Drops comments, string and char literals and `#[cfg(test)]` items, so
/// only code is searched for paths.
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if b.get(i + 1) == Some(&b'#') || (b.get(i + 1) == Some(&b'"')) => {
                // Raw string r"..." or r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"')
                    || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
                {
                    out.push('r');
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    if j >= b.len() {
                        break;
                    }
                    if b[j] == b'"'
                        && b[j + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&c| c == b'#')
                            .count()
                            == hashes
                    {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') || (b.get(i + 1) == Some(&b'\\')) => {
                // A char literal ('x' or '\n'); lifetimes ('a) are left alone.
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            }
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    // Test modules may reach anywhere; they are not part of the layering.
    let test_mod = out
        .match_indices("#[cfg(test)]")
        .find(|(at, m)| out[at + m.len()..].trim_start().starts_with("mod "));
    match test_mod {
        Some((at, _)) => out[..at].to_string(),
        None => out,
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path a file names from `crate::`, `super::` or `self::`, made
/// absolute (a list of segments from the crate root).
fn paths_in(code: &str, me: &Module, is_mod_file: bool) -> Vec<Module> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':';
        let rest: String = chars[i..chars.len().min(i + 8)].iter().collect();
        let base = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|b| rest.starts_with(b));
        let Some(base) = base.filter(|_| starts_word) else {
            i += 1;
            continue;
        };
        // The module `super` and `self` are relative to: a mod.rs file is
        // its folder's module, another file is itself.
        let mut prefix: Module = match base {
            "crate::" => vec![],
            "self::" => me.clone(),
            _ => {
                let mut p = me.clone();
                p.pop();
                let _ = is_mod_file;
                p
            }
        };
        i += base.len();
        // Further `super::` steps.
        loop {
            let rest: String = chars[i..chars.len().min(i + 7)].iter().collect();
            if rest == "super::" {
                prefix.pop();
                i += 7;
            } else {
                break;
            }
        }
        collect_tree(&chars, &mut i, prefix, &mut found);
    }
    found
}

/// Reads `a::b::{c, d::e}` at `i`, pushing each full path.
fn collect_tree(chars: &[char], i: &mut usize, prefix: Module, found: &mut Vec<Module>) {
    let mut path = prefix;
    loop {
        if chars.get(*i) == Some(&'{') {
            *i += 1;
            loop {
                while chars
                    .get(*i)
                    .is_some_and(|c| c.is_whitespace() || *c == ',')
                {
                    *i += 1;
                }
                match chars.get(*i) {
                    None => return,
                    Some('}') => {
                        *i += 1;
                        return;
                    }
                    _ => {
                        let before = *i;
                        collect_tree(chars, i, path.clone(), found);
                        // `as name` and other tails up to the next item.
                        while chars.get(*i).is_some_and(|c| *c != ',' && *c != '}') {
                            *i += 1;
                        }
                        if *i == before {
                            *i += 1;
                        }
                    }
                }
            }
        }
        let start = *i;
        while *i < chars.len() && is_ident(chars[*i]) {
            *i += 1;
        }
        if *i > start {
            path.push(chars[start..*i].iter().collect());
        }
        let next2: String = chars[*i..chars.len().min(*i + 2)].iter().collect();
        if next2 == "::" && *i > start {
            *i += 2;
            continue;
        }
        if path.last().is_some_and(|s| s == "self") {
            path.pop();
        }
        found.push(path);
        return;
    }
}

struct Tree {
    /// Every file module of src/, by its path.
    modules: BTreeMap<Module, PathBuf>,
    /// File module → file modules it imports.
    imports: BTreeMap<Module, BTreeSet<Module>>,
}

fn read_tree() -> Tree {
    read_tree_at(&src_dir())
}

fn read_tree_at(root: &Path) -> Tree {
    let root = root.to_path_buf();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files
        .iter()
        .map(|f| (module_of(&root, f), f.clone()))
        .collect();
    let mut imports = BTreeMap::new();
    for (m, f) in &modules {
        let src = std::fs::read_to_string(f).unwrap();
        let is_mod_file = f.file_name().is_some_and(|n| n == "mod.rs");
        let mut to = BTreeSet::new();
        for p in paths_in(&code_of(&src), m, is_mod_file) {
            // The longest prefix that is a file module; `crate::sys::x` and
            // `crate::proto::x` name the crates below, kept as ["sys"] etc.
            let target = (1..=p.len())
                .rev()
                .map(|k| p[..k].to_vec())
                .find(|k| modules.contains_key(k))
                .or_else(|| {
                    p.first()
                        .filter(|s| *s == "sys" || *s == "proto")
                        .map(|s| vec![s.clone()])
                });
            if let Some(t) = target {
                if &t != m && !t.is_empty() {
                    to.insert(t);
                }
            }
        }
        imports.insert(m.clone(), to);
    }
    Tree { modules, imports }
}

fn layer_of(m: &Module) -> Option<usize> {
    let top = m.first()?;
    linerate::LAYERS
        .iter()
        .position(|l| l.iter().any(|n| n == top))
}

fn show(m: &Module) -> String {
    if m.is_empty() {
        "crate root".into()
    } else {
        m.join("/")
    }
}

#[test]
fn every_top_level_module_has_a_layer() {
    let _g = crate::util::shared();
    let t = read_tree();
    let missing: BTreeSet<String> = t
        .modules
        .keys()
        .filter(|m| !m.is_empty() && layer_of(m).is_none())
        .map(|m| m[0].clone())
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a layer: {missing:?}; add each to linerate::LAYERS in src/lib.rs \
         (and to ARCHITECTURE.md)"
    );
}

#[test]
fn no_module_imports_a_higher_layer() {
    let _g = crate::util::shared();
    let up = upward_imports(&read_tree());
    assert!(
        up.is_empty(),
        "imports from a lower layer up to a higher one (move the shared item down, \
         see ARCHITECTURE.md):\n{}",
        up.join("\n")
    );
}

fn upward_imports(t: &Tree) -> Vec<String> {
    let mut up = Vec::new();
    for (from, tos) in &t.imports {
        let Some(lf) = layer_of(from) else { continue };
        for to in tos {
            if let Some(lt) = layer_of(to) {
                if lt > lf {
                    up.push(format!(
                        "{} ({}) imports {} ({})",
                        show(from),
                        linerate::LAYERS[lf].join("/"),
                        show(to),
                        linerate::LAYERS[lt].join("/")
                    ));
                }
            }
        }
    }
    up
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let _g = crate::util::shared();
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut shown = Vec::new();
    for dir in [
        "src",
        "crates/proto/src",
        "crates/sys/src",
        "crates/doctor/src",
    ] {
        for c in circles(&read_tree_at(&base.join(dir))) {
            shown.push(format!("{dir}: {c}"));
        }
    }
    assert!(
        shown.is_empty(),
        "files that import each other in a circle (move what they share into a \
         module both use):\n{}",
        shown.join("\n")
    );
}

/// The strongly connected components of more than one file, each shown as
/// `a ↔ b ↔ c`.
fn circles(t: &Tree) -> Vec<String> {
    // Tarjan's strongly connected components over the file modules.
    struct S<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        circles: Vec<Vec<Module>>,
    }
    fn visit(s: &mut S, v: &Module) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on.insert(v.clone());
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = &w == v;
                c.push(w);
                if done {
                    break;
                }
            }
            if c.len() > 1 {
                s.circles.push(c);
            }
        }
    }
    let mut s = S {
        g: &t.imports,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        circles: Vec::new(),
    };
    for m in t.modules.keys() {
        if !s.index.contains_key(m) {
            visit(&mut s, m);
        }
    }
    s.circles
        .iter()
        .map(|c| c.iter().map(show).collect::<Vec<_>>().join(" ↔ "))
        .collect()
}

/// The checker itself: it must see the imports a file really has.
#[test]
fn the_reader_sees_use_groups_super_and_inline_paths() {
    let _g = crate::util::shared();
    let me: Module = vec!["engine".into(), "tx".into()];
    let code = code_of(
        "use super::{frame::{Msg, Transmit}, IntervalClock};\n\
         // use crate::report::nothing;\n\
         let s = \"crate::cli::nope\";\n\
         fn f() { crate::host::kernel::read(); self::inner::x(); }\n\
         #[cfg(test)]\nmod tests { use crate::cli::Cli; }",
    );
    let got: BTreeSet<String> = paths_in(&code, &me, false)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "engine::frame::Msg",
        "engine::frame::Transmit",
        "engine::IntervalClock",
        "host::kernel::read",
        "engine::tx::inner::x",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(got, want);
}

/// The unsafe boundary is a crate boundary: nothing in src/ may opt out of
/// the workspace's `forbid(unsafe_code)`.
#[test]
fn unsafe_lives_only_in_crates_sys() {
    let _g = crate::util::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for c in ["proto", "doctor"] {
        rust_files(&root.join("crates").join(c).join("src"), &mut files);
    }
    let mut bad = Vec::new();
    for f in files {
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for needle in ["unsafe ", "unsafe{", "allow(unsafe_code)"] {
            if code.contains(needle) {
                bad.push(format!("{}: `{needle}`", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "unsafe outside crates/sys (move it behind a safe function there):\n{}",
        bad.join("\n")
    );
}

/// The checks themselves: a planted circle and a planted upward import are
/// found, and a clean tree passes.
#[test]
fn the_checks_find_planted_faults() {
    let _g = crate::util::shared();
    let m = |p: &str| -> Module { p.split('/').map(String::from).collect() };
    let tree = |edges: &[(&str, &str)]| {
        let mut modules = BTreeMap::new();
        let mut imports: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (a, b) in edges {
            modules.insert(m(a), PathBuf::new());
            modules.insert(m(b), PathBuf::new());
            imports.entry(m(a)).or_default().insert(m(b));
        }
        Tree { modules, imports }
    };
    let clean = tree(&[("engine/tx", "engine/frame"), ("cli/udp", "engine/tx")]);
    assert!(circles(&clean).is_empty());
    assert!(upward_imports(&clean).is_empty());
    let circle = tree(&[
        ("engine/tx", "engine/udp"),
        ("engine/udp", "engine/packet"),
        ("engine/packet", "engine/tx"),
    ]);
    assert_eq!(
        circles(&circle).len(),
        1,
        "the three-file circle is one component"
    );
    let up = upward_imports(&tree(&[("engine/tx", "cli/udp")]));
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(
        up[0].contains("engine/tx") && up[0].contains("cli/udp"),
        "{up:?}"
    );
}

/// One error style (ARCHITECTURE.md, "Errors"): no `Result<_, String>`
/// anywhere; typed errors at boundaries, anyhow in the command layer.
#[test]
fn no_result_with_a_string_error() {
    let _g = crate::util::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for c in ["proto", "sys", "doctor"] {
        rust_files(&root.join("crates").join(c).join("src"), &mut files);
    }
    let mut bad = Vec::new();
    for f in files {
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for (at, _) in code.match_indices("Result<") {
            if string_error(&code[at + "Result<".len()..]) {
                let line = code[..at].matches('\n').count() + 1;
                bad.push(format!("{}:{line}", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "Result<_, String> (give the error a type, or use anyhow in the command layer):\n{}",
        bad.join("\n")
    );
}

/// Whether the generic arguments starting at `rest` (just after `Result<`)
/// end with `String` as the error type.
fn string_error(rest: &str) -> bool {
    let mut depth = 0usize;
    // `Result<T>` (anyhow's alias) has no error argument.
    let mut last_arg_start = None;
    for (i, c) in rest.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => {
                return last_arg_start.is_some_and(|s| rest[s..i].trim() == "String")
            }
            '>' => depth -= 1,
            ',' if depth == 0 => last_arg_start = Some(i + 1),
            ';' | '{' => return false,
            _ => {}
        }
    }
    false
}

#[test]
fn the_string_error_check_reads_generics() {
    let _g = crate::util::shared();
    assert!(string_error("(), String>"));
    assert!(string_error("Vec<(u8, String)>, String> {"));
    assert!(!string_error("String>"));
    assert!(!string_error("Vec<String>>"));
    assert!(!string_error("Option<u16>, EngineError>"));
    assert!(!string_error("(String, u8), io::Error>"));
}

/// The orchestration layer (ARCHITECTURE.md) sits between `report`, which
/// it uses to print and write a run, and `plan`, whose files become its
/// configuration; the command layer is on top of both.
#[test]
fn orchestrate_sits_between_report_and_plan() {
    let _g = crate::util::shared();
    let at = |name: &str| {
        linerate::LAYERS
            .iter()
            .position(|l| l.contains(&name))
            .unwrap_or_else(|| panic!("{name} has no layer in linerate::LAYERS"))
    };
    let (report, orchestrate, plan, cli) = (at("report"), at("orchestrate"), at("plan"), at("cli"));
    assert!(
        report + 1 == orchestrate && orchestrate + 1 == plan && plan + 1 == cli,
        "layers report {report}, orchestrate {orchestrate}, plan {plan}, cli {cli}: \
         orchestrate belongs right above report and right below plan, cli on top"
    );
}

/// How thin the command layer is allowed to be: it parses flags into
/// configs and dispatches (issue 36). At most 4,500 lines of code in the
/// files under `src/cli/` (their `#[cfg(test)]` modules, at each file's
/// end, not counted) and, the goal, at most 6 crate modules imported from
/// there (besides `cli` itself); the import ceiling is where it stands, a
/// ratchet: lower it when cli/ shrinks, and never raise either to make room
/// (move the work into `src/orchestrate/` or below instead). On
/// 2026-11-27, before the orchestration layer: 9,059 lines in all (tests
/// included) and 16 modules; after it, 4,437 lines of code. On 2026-11-28,
/// 5 modules: `orchestrate`, `model`, `proto`, `plan`, `report`; a command
/// names a feature's config types through `orchestrate::config` and its
/// value parsers through `orchestrate::values`.
const CLI_MAX_LINES: usize = 4_500;
const CLI_MAX_IMPORTS: usize = 5;

/// What the command layer holds, read from the source under `root`.
struct CliFacts {
    lines: usize,
    /// Top-level crate modules imported from cli/ (not cli itself).
    imports: BTreeSet<String>,
    /// `file: impl … TrialRunner for …` in cli/.
    trial_runners: Vec<String>,
    /// `file:line: .tests.push(` and the like: writes into the results
    /// document in cli/.
    results_writes: Vec<String>,
}

/// The `Vec` fields of `RunResults` (src/results/mod.rs): the lists of the
/// results document a run appends to.
fn results_lists(root: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(root.join("results").join("mod.rs")).unwrap();
    let code = code_of(&src);
    let Some(start) = code.find("pub struct RunResults {") else {
        return Vec::new();
    };
    let body = &code[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    body.lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("pub ")?;
            let (name, ty) = l.split_once(':')?;
            ty.trim()
                .starts_with("Vec<")
                .then(|| name.trim().to_string())
        })
        .collect()
}

fn cli_facts(root: &Path) -> CliFacts {
    let lists = results_lists(root);
    let mut files = Vec::new();
    rust_files(&root.join("cli"), &mut files);
    let mut facts = CliFacts {
        lines: 0,
        imports: BTreeSet::new(),
        trial_runners: Vec::new(),
        results_writes: Vec::new(),
    };
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        facts.lines += src
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .count();
        let code = code_of(&src);
        let name = f.strip_prefix(root).unwrap_or(f).display().to_string();
        for (at, _) in code.match_indices("TrialRunner for ") {
            let line = code[..at].matches('\n').count() + 1;
            facts.trial_runners.push(format!("{name}:{line}"));
        }
        for list in &lists {
            for op in ["push(", "extend(", "insert(", "append("] {
                let needle = format!(".{list}.{op}");
                for (at, _) in code.match_indices(&needle) {
                    let line = code[..at].matches('\n').count() + 1;
                    facts
                        .results_writes
                        .push(format!("{name}:{line}: {needle}"));
                }
            }
        }
    }
    let t = read_tree_at(root);
    for (from, tos) in &t.imports {
        if from.first().is_some_and(|m| m == "cli") {
            for to in tos {
                if let Some(top) = to.first().filter(|m| *m != "cli") {
                    facts.imports.insert(top.clone());
                }
            }
        }
    }
    facts
}

#[test]
fn cli_holds_no_trial_runner_and_writes_no_results() {
    let _g = crate::util::shared();
    let f = cli_facts(&src_dir());
    assert!(
        f.trial_runners.is_empty(),
        "TrialRunner implementations in the command layer (they belong in \
         src/orchestrate/, which runs searches and ramps):\n{}",
        f.trial_runners.join("\n")
    );
    assert!(
        f.results_writes.is_empty(),
        "writes into the results document in the command layer (the run is \
         assembled in src/orchestrate/; cli/ builds a config and dispatches):\n{}",
        f.results_writes.join("\n")
    );
}

#[test]
fn cli_stays_thin() {
    let _g = crate::util::shared();
    let f = cli_facts(&src_dir());
    assert!(
        f.lines <= CLI_MAX_LINES,
        "src/cli/ has {} lines of code, more than {CLI_MAX_LINES}: what is not \
         flags, configs and dispatch belongs in src/orchestrate/ or below",
        f.lines
    );
    assert!(
        f.imports.len() <= CLI_MAX_IMPORTS,
        "src/cli/ imports {} crate modules, more than {CLI_MAX_IMPORTS}: {:?}; a command \
         builds its config (src/orchestrate/config.rs, which also names the config types \
         features own; their value parsers are in src/orchestrate/values.rs) and dispatches",
        f.imports.len(),
        f.imports
    );
}

/// The command-layer checks find a planted trial runner, a planted push
/// into the results document and a planted import, in a tree on disk.
#[test]
fn the_cli_checks_find_planted_faults() {
    let _g = crate::util::shared();
    let root = std::env::temp_dir().join(format!("lr-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for d in ["cli", "results", "search", "lab"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(
        root.join("results").join("mod.rs"),
        "pub struct RunResults {\n    pub name: String,\n    pub tests: Vec<TestResult>,\n    \
         pub searches: Vec<SearchResult>,\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("search").join("mod.rs"),
        "pub trait TrialRunner {}\n",
    )
    .unwrap();
    std::fs::write(root.join("lab").join("mod.rs"), "pub struct Lab;\n").unwrap();
    std::fs::write(
        root.join("cli").join("mod.rs"),
        "use crate::lab::Lab;\nuse crate::search::TrialRunner;\nstruct U;\n\
         impl TrialRunner for U {}\nfn f(run: &mut Run) { run.results.searches.push(x); \
         names.push(y); }\n// run.results.tests.push(z);\n#[cfg(test)]\nmod tests {\n    \
         fn t() {}\n}\n",
    )
    .unwrap();
    let f = cli_facts(&root);
    std::fs::remove_dir_all(&root).unwrap();
    assert_eq!(f.trial_runners, vec!["cli/mod.rs:4".to_string()]);
    assert_eq!(
        f.results_writes,
        vec!["cli/mod.rs:5: .searches.push(".to_string()]
    );
    let want: BTreeSet<String> = ["lab", "search"].into_iter().map(String::from).collect();
    assert_eq!(f.imports, want);
    // The unit tests at the file's end are not the layer's code.
    assert_eq!(f.lines, 6);
}

/// Issue 36: a figure is one entry in the figure registry
/// (`src/report/registry.rs`), and every output reads its name from there.
/// The registry's names (`key: "rx_l2_bps"`) as strings, in the order it
/// lists them.
fn registry_names(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("src/report/registry.rs")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("key: \""))
        .filter_map(|l| l.strip_suffix("\","))
        .map(str::to_string)
        .collect()
}

/// A source file without its `#[cfg(test)]` items (string literals kept:
/// they are what is counted).
fn without_tests(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at the brace that closes its first one (or at `;`
        // for an item without a body).
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Per name, the places outside the registry that spell it as a string:
/// files, except that all of `src/results/` (the results structs and their
/// serde names) is one place. Test code (`tests/`, `testdata.rs`,
/// `tests.rs`, `#[cfg(test)]` items) does not count.
fn name_spread(names: &[String], files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let skip = path.ends_with("report/registry.rs")
            || path.ends_with("testdata.rs")
            || path.ends_with("/tests.rs")
            || path.contains("/tests/");
        if skip {
            continue;
        }
        let code = without_tests(text);
        let place = if path.contains("src/results/") {
            "src/results/".to_string()
        } else {
            path.clone()
        };
        for n in names {
            if code.contains(&format!("\"{n}\"")) {
                out.entry(n.clone()).or_default().insert(place.clone());
            }
        }
    }
    out
}

/// The most places a figure's name may be spelled in outside the registry.
const NAME_PLACES: usize = 3;

fn source_files(root: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for c in ["proto", "doctor", "sys"] {
        let dir = root.join("crates").join(c).join("src");
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

fn name_faults(names: &[String], files: &[(String, String)]) -> Vec<String> {
    let spread = name_spread(names, files);
    let mut bad = Vec::new();
    for n in names {
        let places = spread.get(n).cloned().unwrap_or_default();
        if places.len() > NAME_PLACES {
            bad.push(format!(
                "\"{n}\" is spelled in {} places (at most {NAME_PLACES}): {}",
                places.len(),
                places.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    bad
}

#[test]
fn a_figure_name_is_spelled_in_few_files_outside_the_registry() {
    let _g = crate::util::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let names = registry_names(root);
    assert!(
        names.iter().any(|n| n == "rx_l2_bps") && names.len() >= 8,
        "the registry's names were not read: {names:?}"
    );
    let bad = name_faults(&names, &source_files(root));
    assert!(
        bad.is_empty(),
        "figure names outside the figure registry (read the key from \
         report::registry instead, see ARCHITECTURE.md):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_name_check_finds_planted_faults() {
    let _g = crate::util::shared();
    let names = vec!["rx_l2_bps".to_string()];
    let file = |p: &str, t: &str| (p.to_string(), t.to_string());
    let spelled = "fn f() -> &'static str { \"rx_l2_bps\" }\n";
    let mut files = vec![
        file("src/report/registry.rs", spelled),
        file("src/results/mod.rs", spelled),
        file("src/results/criteria.rs", spelled),
        file("src/report/a.rs", spelled),
        file("src/report/testdata.rs", spelled),
        file("src/report/pivot/tests.rs", spelled),
        file(
            "src/report/b.rs",
            "fn g() {}\n#[cfg(test)]\nmod tests { fn t() { \"rx_l2_bps\"; } }\n",
        ),
        file("src/report/c.rs", spelled),
    ];
    // results/ is one place, test code none: 3 places, allowed.
    assert!(name_faults(&names, &files).is_empty());
    files.push(file("src/cli/d.rs", spelled));
    let bad = name_faults(&names, &files);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("4 places"), "{bad:?}");
}

/// Issue 36's size goals: at most 30 functions over 80 lines and at most 8
/// files over 600 lines in src/ and crates/, and `anyhow` only in the
/// command layer. Lines are non-blank lines of code (comments, strings'
/// contents and test items left out). The caps are today's counts and may
/// only go down: a count above its cap fails, and so does one below it
/// (lower the cap in the same change).
const LONG_FN_LINES: usize = 80;
const BIG_FILE_LINES: usize = 600;
const MAX_LONG_FNS: usize = 9;
const MAX_BIG_FILES: usize = 1;
const MAX_ANYHOW_FILES: usize = 0;

/// Non-blank lines of `s`.
fn code_lines(s: &str) -> usize {
    s.lines().filter(|l| !l.trim().is_empty()).count()
}

/// Each function with a body in `code` (as [`code_of`] leaves it): its
/// name and its non-blank lines, signature to closing brace.
fn functions(code: &str) -> Vec<(String, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = code[i..].find("fn ").map(|k| k + i) {
        i = at + 3;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let name: String = code[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body's opening brace, unless a `;` ends a declaration first.
        let Some(open) = code[i..].find(['{', ';']).map(|k| k + i) else {
            break;
        };
        if b[open] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let mut close = code.len();
        for (k, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((name, code_lines(&code[at..close])));
    }
    out
}

/// Long functions, big files and files below the command layer that use
/// `anyhow`, as `path: what` lines.
fn size_facts(files: &[(String, String)]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut long, mut big, mut anyhow) = (Vec::new(), Vec::new(), Vec::new());
    for (path, text) in files {
        if path.ends_with("tests.rs") || path.ends_with("testdata.rs") || path.contains("/tests/") {
            continue;
        }
        let code = without_tests(&code_of(text));
        let n = code_lines(&code);
        if n > BIG_FILE_LINES {
            big.push(format!("{path}: {n} lines"));
        }
        for (name, n) in functions(&code) {
            if n > LONG_FN_LINES {
                long.push(format!("{path}: {name} {n} lines"));
            }
        }
        let command_layer = path.starts_with("src/cli/") || path == "src/main.rs";
        if !command_layer && code.contains("anyhow") {
            anyhow.push(path.clone());
        }
    }
    (long, big, anyhow)
}

/// A count against its ratchet: over the cap or under it is a fault.
fn ratchet(what: &str, found: &[String], cap: usize, goal: usize) -> Option<String> {
    match found.len().cmp(&cap) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(format!(
            "{} {what}, more than the {cap} allowed (the goal is {goal}); make the new one \
             smaller:\n  {}",
            found.len(),
            found.join("\n  ")
        )),
        std::cmp::Ordering::Less => Some(format!(
            "{} {what}, fewer than the cap of {cap}: lower the cap to {} in tests/layers.rs",
            found.len(),
            found.len()
        )),
    }
}

#[test]
fn long_functions_big_files_and_anyhow_only_go_down() {
    let _g = crate::util::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (long, big, anyhow) = size_facts(&source_files(root));
    let faults: Vec<String> = [
        ratchet("functions over 80 lines", &long, MAX_LONG_FNS, 30),
        ratchet("files over 600 lines", &big, MAX_BIG_FILES, 8),
        ratchet(
            "files below the command layer using anyhow",
            &anyhow,
            MAX_ANYHOW_FILES,
            0,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[test]
fn the_size_checks_find_planted_faults() {
    let _g = crate::util::shared();
    let body = "    let x = 1;\n".repeat(81);
    let long = format!("pub fn big() -> u32 {{\n{body}    x\n}}\ntrait T {{ fn f(); }}\n");
    let short = "fn small() {\n    // a comment\n\n    call();\n}\n";
    let fns = functions(&code_of(&format!("{long}{short}")));
    assert_eq!(fns.len(), 2, "{fns:?}");
    assert_eq!(fns[0], ("big".to_string(), 84));
    assert_eq!(fns[1], ("small".to_string(), 3));
    let file = |p: &str, t: &str| (p.to_string(), t.to_string());
    let (l, b, a) = size_facts(&[
        file("src/a.rs", &long),
        file("src/b.rs", &"use anyhow::Result;\n".repeat(601)),
        file("src/cli/c.rs", "use anyhow::Result;\n"),
        file(
            "src/d.rs",
            "#[cfg(test)]\nmod tests { use anyhow::Result; }\n",
        ),
    ]);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(b, vec!["src/b.rs: 601 lines".to_string()]);
    assert_eq!(a, vec!["src/b.rs".to_string()]);
    assert!(ratchet("x", &l, 1, 0).is_none());
    assert!(ratchet("x", &l, 0, 0).unwrap().contains("more than"));
    assert!(ratchet("x", &l, 2, 0)
        .unwrap()
        .contains("lower the cap to 1"));
}
