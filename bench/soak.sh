#!/usr/bin/env bash
# Soak: a long run at full rate must keep memory flat and counters exact.
#
# Builds gen ─ dut ─ sink in network namespaces (the DUT routes), then for
# MINUTES (or SECONDS) at once: UDP from gen to sink with no rate cap (as fast as the
# tester sends: the highest rate it sustains), TCP alongside on the same
# path, and `linerate monitor` from gen probing the sink (a responder and
# ICMP) in 1-second windows. Every minute (a third of a soak shorter than
# two minutes) it samples each linerate process's RSS and open descriptors
# (controllers and agents). At the end it checks, per process: RSS growth
# after the first sample at most 5 % or
# at most 1 MiB (a one-time step, such as code first run late, is not a
# leak; a 2-minute soak sees one as 5 % of an 8 MiB agent),
# descriptors at the end within 2 of the first sample's; and for UDP:
# sent = received + lost exactly, lost = DUT drops + tester drops exactly.
# Prints a table; exits 1 when a check fails, 2 when it could not run.
# Stopped by a signal (SIGINT, SIGTERM: a time limit around it), it still
# prints the memory table of the samples so far, says it was cut short and
# exits 130. Allow it N + 1 minutes: setup and the runs' ends add ~30 s.
#
#   bench/soak.sh [--minutes N | --seconds N]     (default 60 min; run as root)
#
# BIN picks the binary (default target/release/linerate), PREFIX the
# namespace names (default lrsoak<pid>), KEEP=1 keeps the output directory.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=60
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=${2:?--minutes takes a number}; shift 2 ;;
    --minutes=*) MINUTES=${1#--minutes=}; shift ;;
    --seconds) SECONDS_ASKED=${2:?--seconds takes a number}; shift 2 ;;
    --seconds=*) SECONDS_ASKED=${1#--seconds=}; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (try --minutes N or --seconds N)" >&2; exit 2 ;;
  esac
done
case "$MINUTES" in
  ''|*[!0-9]*|0) echo "soak.sh: --minutes takes a whole number of minutes, 1 or more (got '$MINUTES')" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (network namespaces, XDP)" >&2; exit 2; }
BIN=${BIN:-target/release/linerate}
[ -x "$BIN" ] || cargo build --release --locked
BIN=$(realpath "$BIN")
P=${PREFIX:-lrsoak$$}
G=${P}g D=${P}d S=${P}s
SECS=$((MINUTES * 60))
if [ -n "${SECONDS_ASKED:-}" ]; then
  case "$SECONDS_ASKED" in
    ''|*[!0-9]*) echo "soak.sh: --seconds takes a whole number, 30 or more (got '$SECONDS_ASKED')" >&2; exit 2 ;;
  esac
  [ "$SECONDS_ASKED" -ge 30 ] || { echo "soak.sh: --seconds takes a whole number, 30 or more (got '$SECONDS_ASKED'): a shorter run shows no trend" >&2; exit 2; }
  SECS=$SECONDS_ASKED
fi
# Samples every minute; a soak under two minutes takes three.
STEP=60
[ "$SECS" -ge 120 ] || STEP=$((SECS / 3))
OUT=$(mktemp -d /tmp/linerate-soak.XXXXXX)
PIDS=()

SLEEPER=
cleanup() {
  [ -z "$SLEEPER" ] || kill "$SLEEPER" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in "$G" "$D" "$S"; do ip netns del "$ns" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$OUT"
}
trap cleanup EXIT
# A signal (a time limit, Ctrl-C) still gets the table of what was sampled.
on_signal() {
  trap - INT TERM
  echo
  echo "soak: INTERRUPTED by a signal after $(($(date +%s) - ${start:-$(date +%s)})) s of ${SECS} s; memory table of the samples so far:"
  [ -s "${OUT}/samples" ] && memory_table || true
  echo "soak: NOT COMPLETE (output kept in $OUT)"
  KEEP=1
  exit 130
}
trap on_signal INT TERM

for ns in "$G" "$D" "$S"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add lrg0 netns "$G" type veth peer name lrd0 netns "$D"
ip link add lrd1 netns "$D" type veth peer name lrs0 netns "$S"
for x in "$G lrg0" "$D lrd0" "$D lrd1" "$S lrs0"; do
  set -- $x; ip -n "$1" link set "$2" up
done
ip -n "$G" addr add 198.18.1.1/24 dev lrg0
ip -n "$D" addr add 198.18.1.2/24 dev lrd0
ip -n "$D" addr add 198.19.1.1/24 dev lrd1
ip -n "$S" addr add 198.19.1.2/24 dev lrs0
ip -n "$G" route add 198.19.1.0/24 via 198.18.1.2
ip -n "$S" route add 198.18.1.0/24 via 198.19.1.1
ip netns exec "$D" sysctl -qw net.ipv4.ip_forward=1
# NAPI on the DUT's ingress, as the lab gives it (live frames need it).
ip netns exec "$D" ethtool -K lrd0 gro on >/dev/null

echo "soak: ${SECS} s through $G → $D → $S; output in $OUT"
"$BIN" udp --client "ns:$G" --server "ns:$S" --target 198.19.1.2 -p 5301 -t "$SECS" \
  --no-progress --json --results-dir "$OUT/results" --name soak-udp \
  >"$OUT/udp.json" 2>"$OUT/udp.log" &
PIDS+=($!)
"$BIN" tcp --client "ns:$G" --server "ns:$S" --target 198.19.1.2 -p 5302 -t "$SECS" \
  --no-progress --json --no-results >"$OUT/tcp.json" 2>"$OUT/tcp.log" &
PIDS+=($!)
ip netns exec "$G" "$BIN" monitor --responder "ns:$S=198.19.1.2" --icmp 198.19.1.2 \
  --window 1 --probes 20 --duration "$SECS" --out "$OUT/monitor" \
  >"$OUT/monitor.out" 2>"$OUT/monitor.log" &
PIDS+=($!)

# Every linerate process of this soak: the three controllers and their
# descendants (agents), as "pid role".
procs() {
  local roles=(udp tcp monitor) i=0 tree
  tree=$(ps -e -o pid=,ppid=)
  for top in "${PIDS[@]}"; do
    local all=("$top") frontier=("$top")
    while [ ${#frontier[@]} -gt 0 ]; do
      local next=()
      for f in "${frontier[@]}"; do
        for c in $(awk -v p="$f" '$2 == p {print $1}' <<<"$tree"); do all+=("$c"); next+=("$c"); done
      done
      frontier=("${next[@]+"${next[@]}"}")
    done
    for p in "${all[@]}"; do
      local cmd; cmd=$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null) || continue
      case "$cmd" in
        *"agent --stdio --netns $G"*) echo "$p ${roles[$i]}-agent-gen" ;;
        *"agent --stdio --netns $S"*) echo "$p ${roles[$i]}-agent-sink" ;;
        *"agent --stdio"*) echo "$p ${roles[$i]}-agent" ;;
        "$BIN "*) echo "$p ${roles[$i]}" ;;
      esac
    done
    i=$((i + 1))
  done
}
# Both print nothing for a process that is gone: a process may end
# between listing and sampling (under set -e and pipefail, a failing `ls`
# there once ended the whole script silently, right after a sample).
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }
fds() { [ -d "/proc/$1/fd" ] || return 0; find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l || true; }

# The table of memory and descriptors, first sample → last, per process;
# sets fail=1 when a check fails.
memory_table() {
  echo
  echo "Memory and descriptors, first sample (${STEP} s) → end:"
  printf '%-22s %10s %10s %8s %6s %6s  %s\n' process rss_first rss_end growth fds_1 fds_end verdict
  local role r1 f1 r2 f2 growth verdict
  for role in $(awk '{print $3}' "$OUT/samples" | sort -u); do
    read -r r1 f1 < <(awk -v r="$role" '$3 == r {print $4, $5; exit}' "$OUT/samples")
    read -r r2 f2 < <(awk -v r="$role" '$3 == r {x = $4 " " $5} END {print x}' "$OUT/samples")
    growth=$(awk -v a="$r1" -v b="$r2" 'BEGIN { if (a > 0) printf "%.1f", (b - a) * 100 / a; else print "n/a" }')
    verdict=ok
    # A leak grows by over 5 % and by over 1 MiB (1024 KiB).
    if awk -v g="$growth" -v a="$r1" -v b="$r2" 'BEGIN { exit !(g == "n/a" || (g > 5 && b - a > 1024)) }'; then
      verdict="RSS grew"; fail=1
    fi
    # Flat: within 2 of the first sample's count (a monitor renewing its
    # responder session holds the old one open for 10 s).
    if [ $((f2 - f1)) -gt 2 ] || [ $((f1 - f2)) -gt 2 ]; then verdict="$verdict; fds changed"; fail=1; fi
    printf '%-22s %10s %10s %7s%% %6s %6s  %s\n' "$role" "$r1" "$r2" "$growth" "$f1" "$f2" "$verdict"
  done
}

# samples: "minute pid role rss_kib fds", one line per process per sample;
# the last sample is taken 10 s before the end, while everything still runs.
: >"$OUT/samples"
start=$(date +%s)
sample_at=()
for ((at = STEP; at < SECS - 10; at += STEP)); do sample_at+=("$at"); done
sample_at+=($((SECS - 10)))
printf '%8s %-22s %8s %6s\n' minute process rss_kib fds
for at in "${sample_at[@]}"; do
  now=$(($(date +%s) - start))
  # In the background: a trapped signal interrupts `wait`, not `sleep`.
  if [ "$at" -gt "$now" ]; then sleep $((at - now)) & SLEEPER=$!; wait $SLEEPER; fi
  label=$(awk -v s="$at" 'BEGIN { printf "%.1f", s / 60 }')
  while read -r pid role; do
    r=$(rss "$pid"); n=$(fds "$pid")
    [ -n "$r" ] && [ -n "$n" ] && [ -d "/proc/$pid" ] || continue
    echo "$label $pid $role $r $n" >>"$OUT/samples"
    printf '%8s %-22s %8s %6s\n' "$label" "$role" "$r" "$n"
  done < <(procs)
done

status=0
for p in "${PIDS[@]}"; do wait "$p" || status=$?; done
PIDS=()
[ "$status" = 0 ] || echo "soak: a run exited $status (logs: $OUT/*.log)"

fail=0
memory_table

echo
echo "UDP counters over the whole soak:"
if ! python3 - "$OUT/udp.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = 0
for t in doc["tests"]:
    for d in t["directions"]:
        tx, rx, lost = d["tx_packets"], d["rx_packets"], d["lost"]
        dut, tester = d["dut_lost"], d["tester_drops"]
        exact = tx == rx + lost and lost == dut + tester and tx > 0
        bad |= not exact
        print(f"  {d['direction']}: sent {tx} = received {rx} + DUT drops {dut} + tester drops {tester}"
              f" ({'exact' if exact else 'NOT EXACT: off by ' + str(tx - rx - dut - tester)}),"
              f" {d['tx_pps']:.0f} pps offered, {d['rx_pps']:.0f} pps received,"
              f" {d['reordered']} reordered, {d['duplicates']} duplicates")
    if t["status"] != "ok":
        bad = 1
        print(f"  {t['name']}: {t['status']}: {t.get('error')}")
sys.exit(bad)
EOF
then fail=1; fi
python3 - "$OUT/tcp.json" "$OUT/monitor" <<'EOF' || true
import json, os, sys
doc = json.load(open(sys.argv[1]))
for t in doc["tests"]:
    for d in t["directions"]:
        print(f"TCP alongside: {d['rx_l2_bps'] / 1e6:.0f} Mbit/s goodput, status {t['status']}")
lines = 0
for f in os.listdir(sys.argv[2]):
    if f.startswith("monitor.ndjson"):
        lines += sum(1 for _ in open(os.path.join(sys.argv[2], f)))
print(f"monitor: {lines} journal lines")
EOF
if [ "$fail" = 0 ] && [ "$status" = 0 ]; then echo "soak: ok"; exit 0; fi
echo "soak: FAILED (output kept in $OUT)"; KEEP=1; exit 1
