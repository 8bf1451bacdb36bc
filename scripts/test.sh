#!/usr/bin/env bash
# Quick start, part two: the whole test suite, as CI runs it. Needs root for
# the namespace tests (CI runs as root). Tests that cannot run here (no root,
# a tool missing) say so; the closing summary counts them beside the passes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh chromium python3-prometheus-client openssh-server curl nginx
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
skips=$(mktemp)
out=$(mktemp)
trap 'rm -f "$skips" "$out"' EXIT
status=0
LINERATE_SKIP_LOG="$skips" cargo test --workspace --release --locked 2>&1 | tee "$out" || status=$?
passed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) passed.*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
failed=$(sed -n 's/^test result: .* \([0-9][0-9]*\) failed.*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')
skipped=$(wc -l <"$skips")
echo
echo "summary: ${passed:-0} passed, ${failed:-0} failed, $skipped skipped"
if [ "$skipped" -gt 0 ]; then
    sed 's/^/  /' "$skips"
    echo "  (a skipped test proves nothing: run as root with the tools installed, as CI does)"
fi
exit "$status"
