#!/usr/bin/env bash
# Installs what linerate needs on a fresh Debian/Ubuntu machine: the tools
# the lab calls (iproute2, nftables, ethtool), setpriv for the tests, clang,
# llvm and libbpf-dev for building the BPF programs (build.rs), and a
# Rust toolchain with rustfmt and clippy if none is present. Idempotent.
# Extra Debian packages can be named as arguments: the report's browser tests
# (tests/report.rs) run `scripts/deps.sh chromium python3-prometheus-client`
# when chromium is missing, so a plain lab needs no browser.
set -euo pipefail

need_pkgs=()
for pair in ip:iproute2 nft:nftables ethtool:ethtool setpriv:util-linux clang:clang llvm-objdump:llvm \
    /usr/include/bpf/bpf_helpers.h:libbpf-dev; do
  tool=${pair%%:*}; pkg=${pair#*:}
  command -v "$tool" >/dev/null 2>&1 || [ -e "$tool" ] || need_pkgs+=("$pkg")
done
for pkg in "$@"; do need_pkgs+=("$pkg"); done
missing=()
for pkg in "${need_pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "linerate needs these packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "installing Rust from Debian (cargo, rustfmt, clippy)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo rustc rustfmt rust-clippy >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
