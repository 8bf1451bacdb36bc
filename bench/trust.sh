#!/usr/bin/env bash
# Answers a user can trust (issue 33), in one run of the lab's routing DUT:
#  1. the floor: what the DUT forwards when the live engine sends to it as
#     fast as it can (the lab's unpaced "udp 64B var2" row), and the
#     self-test's sent vs counted frames (the tester's own ceiling);
#  2. N plain searches of bench-var2-64b (the lab's goals: NDR 0 %, PDR
#     0.5 %, 2 % width, 1 s trials, 2 s sums): how many end DUT-limited
#     (both goals regular), the median and range of NDR and PDR, and the
#     PDR against the floor;
#  3. the same searches against the DUT policed to a fixed capacity: their
#     spread, which should be within a few percent.
# Not a test: it prints figures, no verdict on noise.
# Usage: bench/trust.sh [--runs N] [--police PPS]
# Needs root (the lab), builds target/release/linerate if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10; police=200kpps
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift ;;
    --police) police=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/trust.sh needs root (it builds a lab)" >&2; exit 2; }
[ -x target/release/linerate ] || cargo build --release --locked
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bin="$tmp/linerate"; cp target/release/linerate "$bin"
lr() { "$bin" "$@" --no-progress --json --results-dir "$tmp/runs" 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }; }
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"

lr lab --only "udp 64B var2" --no-search >"$tmp/floor.json"
python3 - "$tmp/floor.json" >"$tmp/floor" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {t["name"]: t["directions"][0] for t in d["tests"]}
st = rows["self-test udp 64B var2"]
fl = rows["udp 64B var2"]
print(fl["rx_pps"])
print("self-test: sent %.0f pps, counted %.0f (%.1f %%), tester drops %d" % (
    st["tx_pps"], st["rx_pps"], 100 * st["rx_pps"] / max(st["tx_pps"], 1), st["tester_drops"]), file=sys.stderr)
print("floor: the DUT forwarded %.0f pps of %.0f offered (unpaced)" % (fl["rx_pps"], fl["tx_pps"]), file=sys.stderr)
EOF
floor=$(head -1 "$tmp/floor")

goals=(--width 2 --final-trial 1 --duration-sum 2)
summary() {
  python3 - "$1" "$2" "$floor" <<'EOF'
import json, sys, statistics
d = json.load(open(sys.argv[1])); label = sys.argv[2]; floor = float(sys.argv[3])
vals = {"ndr": [], "pdr": []}; regular = 0; ends = []
for s in d["searches"]:
    gs = {g["goal"]["name"]: g for g in s["mlr"]["goals"]}
    ok = all(g["regular"] for g in gs.values())
    regular += ok
    ends.append("regular" if ok else ",".join(sorted({str(g["irregular"]) for g in gs.values() if g["irregular"]})))
    for k in vals:
        g = gs[k]
        v = g["conditional_throughput_pps"] or g["relevant_lower_bound_pps"]
        if v: vals[k].append(v)
n = len(d["searches"])
print("%s: %d of %d searches DUT-limited (both goals regular); ends: %s" % (label, regular, n, ", ".join(ends)))
for k, v in vals.items():
    if not v: continue
    med = statistics.median(v)
    print("  %s median %.0f pps, range %.0f..%.0f (±%.1f %%)%s" % (
        k, med, min(v), max(v), (max(v) - min(v)) / 2 / med * 100,
        "; %.2fx the floor" % (med / floor) if label.startswith("plain") else ""))
EOF
}
lr search --lab --profile bench-var2-64b "${goals[@]}" --repeat "$runs" >"$tmp/plain.json"
summary "$tmp/plain.json" "plain search --lab --profile bench-var2-64b"
lr search --lab --profile bench-var2-64b "${goals[@]}" --dut-police "$police" --repeat "$runs" >"$tmp/police.json"
summary "$tmp/police.json" "policed to $police"
