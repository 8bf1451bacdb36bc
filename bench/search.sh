#!/usr/bin/env bash
# Search and rate-control benchmark (not a test: it prints figures, no verdict
# on noise). Runs in linerate's own lab, with the DUT policed to a known rate:
#  1. time to NDR+PDR: one MLRsearch against two binary searches (RFC 2544
#     method with 0 % and 0.5 % acceptable loss), same final trial length and
#     width, and the answers each found;
#  2. rate-control accuracy: per-second offered vs asked rate at 10 %, 50 %
#     and 100 % of the tester's self-test capacity, back to back.
# Usage: bench/search.sh [--police PPS] [--width PCT] [--seconds N]
# Needs root (the lab), builds target/release/linerate if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
police=50kpps; width=1; secs=4
while [ $# -gt 0 ]; do
  case "$1" in
    --police) police=$2; shift ;;
    --width) width=$2; shift ;;
    --seconds) secs=$2; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/search.sh needs root (it builds a lab)" >&2; exit 2; }
[ -x target/release/linerate ] || cargo build --release --locked
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bin="$tmp/linerate"; cp target/release/linerate "$bin"
lr() { "$bin" "$@" --no-progress --json --results-dir "$tmp/runs" 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }; }
py() { python3 -c "$1" "$2"; }
common=(--lab --dut-police "$police" --profile bench --min-rate 2kpps --max-rate 100kpps --width "$width")

echo "linerate search benchmark  $(date -u '+%F %T') UTC"
echo "host: kernel $(uname -r), nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg); DUT policed to $police"
echo

t0=$(date +%s.%N)
lr search "${common[@]}" --method mlr --final-trial 1 --duration-sum 1 >"$tmp/mlr.json"
t1=$(date +%s.%N)
lr search "${common[@]}" --method rfc2544 --trial 1 --no-waits >"$tmp/ndr.json"
t2=$(date +%s.%N)
lr search "${common[@]}" --method rfc2544 --trial 1 --no-waits --acceptable-loss 0.5 >"$tmp/pdr.json"
t3=$(date +%s.%N)

python3 - "$tmp" "$t0" "$t1" "$t2" "$t3" <<'PY'
import json, sys
d, t0, t1, t2, t3 = sys.argv[1], *map(float, sys.argv[2:])
mlr = json.load(open(f"{d}/mlr.json"))["searches"][0]["mlr"]
ndr = json.load(open(f"{d}/ndr.json"))["searches"][0]["rfc2544"]
pdr = json.load(open(f"{d}/pdr.json"))["searches"][0]["rfc2544"]
g = {x["goal"]["name"]: x for x in mlr["goals"]}
val = lambda x: x.get("conditional_throughput_pps") or x.get("relevant_lower_bound_pps")
print(f"{'search':34} {'trials':>6} {'trial time s':>12} {'wall s':>7}  answer")
print(f"{'MLRsearch NDR+PDR':34} {len(mlr['trials']):>6} {mlr['trial_time_s']:>12.1f} {t1-t0:>7.1f}  "
      f"NDR {val(g['ndr']) or 0:.0f} pps, PDR {val(g['pdr']) or 0:.0f} pps")
print(f"{'binary search, 0 % loss (NDR)':34} {len(ndr['trials']):>6} {ndr['trial_time_s']:>12.1f} {t2-t1:>7.1f}  {ndr['throughput_pps'] or 0:.0f} pps")
print(f"{'binary search, 0.5 % loss (PDR)':34} {len(pdr['trials']):>6} {pdr['trial_time_s']:>12.1f} {t3-t2:>7.1f}  {pdr['throughput_pps'] or 0:.0f} pps")
two = ndr["trial_time_s"] + pdr["trial_time_s"]
print(f"ratio MLRsearch / two binary searches: trial time {mlr['trial_time_s']/two:.2f}, wall {(t1-t0)/((t3-t1)):.2f}")
PY

echo
cap=$(lr lab --only self-test --duration "$secs" | python3 -c "import json,sys; print(round(json.load(sys.stdin)['tests'][0]['directions'][0]['rx_pps']))")
echo "tester self-test capacity: $cap pps (64 B var2, back to back)"
printf '%-8s %10s %12s %12s %10s\n' "share" "asked pps" "worst 1 s %" "mean off %" "limited"
for pct in 10 50 100; do
  rate=$(( cap * pct / 100 ))
  lr ramp --lab --back-to-back --profile bench-var2-64b --warmup 0 --ramp 0 --hold "$secs" --ramp-to "${rate}pps" >"$tmp/r.json"
  python3 - "$tmp/r.json" "$pct" "$rate" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); pct, rate = sys.argv[2], float(sys.argv[3])
s = doc["ramps"][0]["directions"][0]["samples"]
errs = [abs(x["offered_pps"] - x["intended_pps"]) / x["intended_pps"] * 100 for x in s if x["intended_pps"] > 0]
lim = sum(1 for x in s if x["tester_limited"])
print(f"{pct+' %':8} {rate:>10.0f} {max(errs):>12.3f} {sum(errs)/len(errs):>12.3f} {lim:>5}/{len(s)}")
PY
done
