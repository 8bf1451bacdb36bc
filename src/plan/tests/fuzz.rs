//! Seeded mutations of valid plans and random bytes: `parse` never panics,
//! and every error points inside the text.

use super::{with_test, EXAMPLE};
use crate::plan::{parse, PlanError};

/// Deterministic xorshift64*: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Byte flips, truncation, and swapped, dropped or repeated lines and keys.
fn mutate(rng: &mut Rng, base: &str) -> String {
    const WORDS: &[&str] = &[
        "name",
        "kind",
        "from",
        "to",
        "target",
        "instances",
        "ssh",
        "netns",
        "local",
        "hosts",
        "test",
        "[[test]]",
        "[hosts.x]",
        "\"gen[1-3]\"",
        "{n}",
        "*",
        "=",
        "[",
        "]",
        "\"",
        "\n",
        "é",
        "0x",
        "-1",
        "1e999",
        "true",
        "198.18.0.1",
        "\u{0}",
    ];
    let mut bytes = base.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            1 => bytes.truncate(rng.below(bytes.len() + 1)),
            2 => {
                let w = WORDS[rng.below(WORDS.len())].as_bytes();
                let i = rng.below(bytes.len() + 1);
                bytes.splice(i..i, w.iter().copied());
            }
            3 | 4 => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    match rng.below(3) {
                        0 => lines.swap(a, b),
                        1 => {
                            lines.remove(a);
                        }
                        _ => lines.insert(a, lines[b]),
                    }
                }
                bytes = lines.join("\n").into_bytes();
            }
            _ => {
                // Swap one key for another.
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let (from, to) = (WORDS[rng.below(12)], WORDS[rng.below(12)]);
                bytes = text.replacen(from, to, 1).into_bytes();
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn assert_inside(text: &str, e: &PlanError) {
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        (1..=lines.len()).contains(&e.line),
        "line {} outside the text ({} lines): {e}\n{text:?}",
        e.line,
        lines.len()
    );
    let len = lines[e.line - 1].chars().count();
    assert!(
        (1..=len + 1).contains(&e.column),
        "column {} outside line {} ({len} characters): {e}\n{text:?}",
        e.column,
        e.line
    );
    assert!(!e.message.is_empty());
}

#[test]
fn mutated_plans_never_panic_and_errors_point_inside() {
    let bases = [
        EXAMPLE.to_string(),
        with_test("frame_size = [64, 1518]\nreverse = true\n"),
        "[hosts.\"gen[01-12]\"]\nssh = \"root@[2001:db8::{n}]:22\"\n[hosts.sink]\nlocal = true\naddress = \"::1\"\n[[test]]\nkind = \"ramp\"\nfrom = [\"gen*\"]\nto = \"sink\"\n".to_string(),
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let (mut parsed, mut failed) = (0, 0);
    for i in 0..3000 {
        let text = mutate(&mut rng, &bases[i % bases.len()]);
        match parse("PLAN.toml", &text) {
            Ok(p) => {
                parsed += 1;
                for t in &p.tests {
                    for a in &t.args {
                        let (line, col) = p.locate(a.span);
                        assert_inside(&text, &p.error_at(a.span, "x"));
                        assert!(line >= 1 && col >= 1);
                    }
                }
            }
            Err(e) => {
                failed += 1;
                assert_inside(&text, &e);
            }
        }
    }
    // Both paths exercised, so the check means something.
    assert!(
        parsed > 100 && failed > 100,
        "parsed {parsed}, failed {failed}"
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut rng = Rng(7);
    for _ in 0..2000 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| (rng.next() >> 32) as u8).collect();
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse("PLAN.toml", &text) {
            assert_inside(&text, &e);
        }
    }
}
