#!/usr/bin/env bash
# Fuzzes every decoder of outside input for SECONDS each (default 60), one
# target after another, with cargo-fuzz (libFuzzer) on nightly Rust; installs
# the nightly toolchain and cargo-fuzz when missing.
#
#   scripts/fuzz.sh [SECONDS]
#
# New inputs go to a scratch directory ($FUZZ_WORK, default a temporary one);
# fuzz/corpus/ is only read. FUZZ_MERGE=1 then adds the inputs that reach
# new code to fuzz/corpus/<target>/ (libFuzzer -merge=1, the minimisation
# `cargo fuzz cmin` does) for a commit. A crash stops that target, prints the
# input's path under fuzz/artifacts/<target>/ and the script exits 1 after
# the others ran: fix the decoder, then copy the input to
# fuzz/regressions/<target>/ so `cargo test` replays it (tests/fuzz_replay.rs).
# FUZZ_TARGETS="control plan" limits the run to those targets.
set -euo pipefail

secs=${1:-60}
case $secs in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../fuzz"

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly install cargo-fuzz --locked
fi

# Safe Rust: AddressSanitizer finds nothing the compiler does not already
# forbid and halves the exec rate; debug assertions turn overflows into crashes.
flags=(--sanitizer none --debug-assertions)
cargo +nightly fuzz build "${flags[@]}"

work=${FUZZ_WORK:-$(mktemp -d -t linerate-fuzz.XXXXXX)}
# A target's scratch files (the ssh_config oracle's) stay in the work dir.
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"
targets=${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}
failed=()
for t in $targets; do
  mkdir -p "$work/$t" "artifacts/$t"
  echo "== $t: ${secs}s (new inputs in $work/$t)"
  if ! cargo +nightly fuzz run "${flags[@]}" "$t" "$work/$t" "corpus/$t" -- \
      -max_total_time="$secs" -print_final_stats=1; then
    failed+=("$t")
    continue
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    # Only inputs that reach new edges join the corpus (hit counts do not
    # count: they would add thousands of files for little).
    cargo +nightly fuzz run "${flags[@]}" "$t" "corpus/$t" "$work/$t" -- -merge=1 -use_counters=0
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]} (inputs under fuzz/artifacts/); fix them, then keep each input in fuzz/regressions/<target>/" >&2
  exit 1
fi
echo "fuzz.sh: every target ran ${secs}s without a crash"
