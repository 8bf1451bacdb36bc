#!/usr/bin/env bash
# Quick start, part one: install what is needed, build linerate, run the lab.
# Extra arguments go to `linerate lab` (e.g. --quick, --dut nat, --ipv6).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --locked
exec ./target/release/linerate lab "$@"
