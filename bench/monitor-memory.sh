#!/usr/bin/env bash
# Memory and disk of a long `linerate monitor` run: a responder on loopback
# and ICMP echo to loopback, short windows (many lines), a small rotation
# size (many rotations). Samples the monitor's VmRSS every INTERVAL seconds
# and prints it over time, the journal's files and sizes, and whether RSS
# stayed flat after the first minute. Not a timed test: run it by hand,
# as root (ICMP raw socket), for as long as you care to (SECS).
#
#   SECS=3600 bench/monitor-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-900}
INTERVAL=${INTERVAL:-30}
WINDOW=${WINDOW:-1}
PROBES=${PROBES:-50}
BIN=${BIN:-target/release/linerate}
[ -x "$BIN" ] || cargo build --release --locked
OUT=$(mktemp -d /tmp/linerate-monitor-bench.XXXXXX)
"$BIN" monitor --responder local=127.0.0.1 --icmp 127.0.0.1 \
  --window "$WINDOW" --probes "$PROBES" --duration "$SECS" \
  --max-file-mib 1 --max-files 3 --out "$OUT/journal" \
  --metrics-textfile "$OUT/linerate.prom" 2>"$OUT/monitor.log" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
echo "monitor pid $PID, ${SECS}s, ${PROBES} probes per ${WINDOW}s window per target, journal in $OUT/journal"
printf '%8s %10s %12s\n' "t_s" "rss_kib" "journal_kib"
samples=()
t=0
while kill -0 "$PID" 2>/dev/null; do
  r=$(rss "$PID")
  j=$(du -sk "$OUT/journal" 2>/dev/null | cut -f1)
  printf '%8d %10s %12s\n' "$t" "$r" "${j:-0}"
  [ "$t" -ge 60 ] && [ "$r" != 0 ] && samples+=("$r")
  sleep "$INTERVAL"
  t=$((t + INTERVAL))
done
wait "$PID" || true
trap - EXIT
echo "journal files:"; ls -l "$OUT/journal"
tail -n 1 "$OUT/journal/monitor.ndjson"
if [ ${#samples[@]} -ge 2 ]; then
  first=${samples[0]}; last=${samples[-1]}
  max=$(printf '%s\n' "${samples[@]}" | sort -n | tail -1)
  echo "RSS after the first minute: first ${first} KiB, last ${last} KiB, max ${max} KiB, growth $((last - first)) KiB"
fi
