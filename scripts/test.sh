#!/usr/bin/env bash
# Quick start, part two: the whole test suite, as CI runs it. Needs root for
# the namespace tests (CI runs as root).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh chromium python3-prometheus-client openssh-server curl nginx
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --release --locked
