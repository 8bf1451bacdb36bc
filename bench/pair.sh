# Shared by bench/http.sh and bench/http-requests.sh (sourced, not run):
# tools installed on demand, linerate's binary, and a client and a server
# namespace joined by a veth pair, removed on exit with what was started.

# need COMMAND PACKAGE: installs PACKAGE with apt-get when COMMAND is missing.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2 ..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

# lr_binary REPO: sets lr to REPO's release binary (under CARGO_TARGET_DIR
# when it is set, as cargo puts it), building it if missing.
lr_binary() {
  lr="${CARGO_TARGET_DIR:-$1/target}/release/linerate"
  if [ ! -x "$lr" ]; then
    (cd "$1" && cargo build --release --quiet)
  fi
}

# pair_lab NAME DEV NET WORKNAME: namespaces NAME-c and NAME-s (cns, sns),
# veth DEV0 (client, NET.1/24) and DEV1 (server, NET.2/24), S=NET.2, a
# work directory (work); processes appended to pids are stopped on exit
# (SIGTERM, then SIGKILL), the namespaces and work directory removed.
pair_lab() {
  cns="$1-c"; sns="$1-s"; S="$3.2"
  work=$(mktemp -d "/tmp/$4.XXXXXX")
  pids=()
  trap pair_cleanup EXIT INT TERM
  ip netns add "$cns"; ip netns add "$sns"
  ip -n "$cns" link set lo up; ip -n "$sns" link set lo up
  ip link add "${2}0" netns "$cns" type veth peer name "${2}1" netns "$sns"
  ip -n "$cns" addr add "$3.1/24" dev "${2}0"; ip -n "$cns" link set "${2}0" up
  ip -n "$sns" addr add "$3.2/24" dev "${2}1"; ip -n "$sns" link set "${2}1" up
}

pair_cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  ip netns del "$cns" 2>/dev/null || true
  ip netns del "$sns" 2>/dev/null || true
  rm -rf "$work"
}
