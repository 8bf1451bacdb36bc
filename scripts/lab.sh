#!/usr/bin/env bash
# Quick start, part one: install what is needed, build linerate, install its
# shell completions and man pages, run the lab.
# Extra arguments go to `linerate lab` (e.g. --quick, --dut nat, --ipv6).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --locked
bin=./target/release/linerate

# Completions (bash, zsh, fish) and man pages, made by the binary from its
# own flags: system-wide as root, else under the user's data directory.
if [ "$(id -u)" = 0 ]; then
    data=/usr/local/share
else
    data="${XDG_DATA_HOME:-$HOME/.local/share}"
fi
install_extras() {
    mkdir -p "$data/bash-completion/completions" "$data/zsh/site-functions" \
        "$data/fish/vendor_completions.d" "$data/man/man1"
    "$bin" completions bash >"$data/bash-completion/completions/linerate"
    "$bin" completions zsh >"$data/zsh/site-functions/_linerate"
    "$bin" completions fish >"$data/fish/vendor_completions.d/linerate.fish"
    "$bin" man --dir "$data/man/man1" 2>/dev/null
}
if install_extras; then
    echo "completions and man pages installed under $data (man linerate, man linerate-tcp, ...)"
else
    echo "warning: could not install completions and man pages under $data; the lab runs anyway" >&2
fi

exec "$bin" lab "$@"
