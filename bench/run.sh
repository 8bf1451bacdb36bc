#!/usr/bin/env bash
# linerate benchmark: linerate and its anchor tools (iperf3, trafgen) run side
# by side in one lab built once by this script, interleaved round by round.
#
# Lab (same as ../shared/bench/anchors.sh): two network namespaces joined by
# a veth pair, 198.18.0.1 -> 198.18.0.2; with --routed a Linux router namespace
# sits between them (198.18.1.2 -> dut -> 198.19.1.2).
#
# Usage: bench/run.sh [--routed] [--seconds N] [--rounds R] [--live-only] [--iperf3-only]
#   --routed      put a routing DUT namespace between sender and sink
#   --seconds N   seconds per measurement (default 5)
#   --rounds R    measurements per tool; the table shows the median (default 3;
#                 5 with --iperf3-only, whose rows also show the median of the
#                 per-round ratios, each round's two runs back to back)
#   --live-only   only trafgen (1 core), the live engine and its floor
#   --iperf3-only only the iperf3 interop rows (linerate and iperf3 -c against one iperf3 -s)
#
# Measurements per round (the order of tools alternates between rounds):
#   tcp 1 stream    linerate tcp -P 1        vs  iperf3 -P 1         (goodput)
#   tcp 4 streams   linerate tcp -P 4        vs  iperf3 -P 4         (goodput)
#   iperf3 interop  linerate tcp --server iperf3://DST -P 1 and -P 4 vs iperf3 -c -P 1/-P 4,
#                   both against the same stock iperf3 -s (goal >= 1.0x: the far end is
#                   the same program, the client side must not cost throughput);
#                   each as users run it (linerate's default block towards iperf3
#                   is 768 KiB, iperf3 -c's 128 KiB); and reported: against
#                   iperf3 -c -l 768K, the same block
#   udp 64 B        linerate udp 64 B frames vs  trafgen --cpus 1    (sink veth rx_packets/s)
#                   (--tx-engine socket)     vs  iperf3 -u -b 0 -l 18 (packets received/s)
#   udp 64 B packet linerate udp 64 B frames vs  trafgen --cpus 1
#                   (--tx-engine packet: AF_PACKET, qdisc bypass)
#   udp 64 B 2 thr  linerate udp --threads 2  vs  linerate 1 thread, trafgen --cpus 2
#                   (packet engine, 16 flows by source port; scaling reported)
#   udp 64 B xdp    linerate udp --tx-engine xdp (copy mode on veth), reported
#   udp 64 B live   linerate udp --tx-engine live --rx-engine xdp, one sender thread, counted
#                   at the sink veth (rx_packets/s) vs trafgen --cpus 1 (goal
#                   >= 12x) and vs the floor (goal >= 0.8x)
#   live floor      the same live-frames path with floor.bpf.c (XDP_TX of a
#                   constant frame, no per-frame work), run by the example
#                   binary target/release/examples/xdp_floor (not a linerate
#                   command), counted the same way. Both with GRO and threaded
#                   NAPI on the sender's veth peer for the measurement (XDP
#                   frames need NAPI there; threaded, the peer's receive work
#                   leaves the generator's core). Also reported: frames the
#                   generator sent per second (the run's repeat count), live
#                   vs floor, which a socket sink cannot absorb on 2 cores.
#   self-test       linerate lab's back-to-back self-test vs trafgen --cpus 1
#                   (goal >= 10x: the tester's ceiling with the default engines)
#   lab DUT         linerate lab --quick --only "udp 64B var2": what the routing
#                   DUT forwards, the verdict's kind (goal: dut) and the busy %
#                   of the generator's core and of the DUT's core (the DUT's
#                   saturated, the generator's not); reported
#   rss many flows  linerate udp 64 B with --flow-mode ports --flows 4096 (the most
#                   the ports mode takes between two namespaces; var1/var2 with
#                   65,535 flows need the lab): the largest agent RSS (<= 64 MiB)
#   agent peak RSS  the largest max_rss_bytes of any linerate agent in any run
#
# This is a benchmark, not a test: it exits 0 whatever the figures are; it
# exits non-zero only if the lab cannot be built or a tool is missing.
# Needs root. Installs iperf3 and netsniff-ng (trafgen) with apt-get if missing.
# Traffic stays in the namespaces it creates (198.18.0.0/15); all namespaces
# and processes it starts are removed on exit.
set -euo pipefail

routed=0; secs=5; rounds=""; liveonly=0; iperf3only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --routed) routed=1 ;;
    --live-only) liveonly=1 ;;
    --iperf3-only) iperf3only=1 ;;
    --seconds) secs=${2:?--seconds needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    -h|--help) sed -n '2,61p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# The iperf3 rows alone take about 40 s a round: 5 rounds by default there.
[ -n "$rounds" ] || { [ $iperf3only = 1 ] && rounds=5 || rounds=3; }
case "$secs$rounds" in *[!0-9]*) echo "--seconds and --rounds take positive integers" >&2; exit 2 ;; esac
[ "$secs" -ge 1 ] && [ "$rounds" -ge 1 ] || { echo "--seconds and --rounds must be >= 1" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench/run.sh needs root (network namespaces)" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")

need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2 ..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
need iperf3 iperf3; need trafgen netsniff-ng; need python3 python3; need ping iputils-ping

if [ ! -x "$repo/target/release/linerate" ] || [ ! -x "$repo/target/release/examples/xdp_floor" ]; then
  echo "building linerate and the live-frames floor (cargo build --release) ..." >&2
  (cd "$repo" && cargo build --release --quiet && cargo build --release --quiet --example xdp_floor)
fi

# ---------------------------------------------------------------- cleanup ---
p="lrb$$"; src="$p-src"; dst="$p-dst"; dut="$p-dut"
tmp=$(mktemp -d /tmp/linerate-bench.XXXXXX)
cur=""   # pid of the measurement running now
cleanup() {
  set +e
  trap - INT TERM
  # Our own background jobs (the measurement running now, the iperf3 server).
  for pid in $cur $(jobs -p); do kill "$pid" 2>/dev/null; done
  for pid in $cur $(jobs -p); do wait "$pid" 2>/dev/null; done
  # Anything still running inside our own namespaces was started by this
  # script (an agent orphaned by a timeout, say): end it by pid.
  for n in "$src" "$dst" "$dut"; do
    for pid in $(ip netns pids "$n" 2>/dev/null); do kill "$pid" 2>/dev/null; done
  done
  sleep 0.2
  for n in "$src" "$dst" "$dut"; do
    for pid in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$n" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A private copy of the binary, so a concurrent `cargo build` cannot swap it
# out in the middle of a run (agents are started from current_exe()).
cp "$repo/target/release/linerate" "$tmp/linerate"
cp "$repo/target/release/examples/xdp_floor" "$tmp/xdp_floor"
lr="$tmp/linerate"

# -------------------------------------------------------------------- lab ---
ip netns add "$src"; ip netns add "$dst"
ip -n "$src" link set lo up; ip -n "$dst" link set lo up
if [ $routed = 1 ]; then
  ip netns add "$dut"; ip -n "$dut" link set lo up
  ip link add s0 netns "$src" type veth peer name d0 netns "$dut"
  ip link add d1 netns "$dut" type veth peer name t0 netns "$dst"
  ip -n "$src" addr add 198.18.1.2/24 dev s0; ip -n "$dut" addr add 198.18.1.1/24 dev d0
  ip -n "$dut" addr add 198.19.1.1/24 dev d1; ip -n "$dst" addr add 198.19.1.2/24 dev t0
  for x in "$src s0" "$dut d0" "$dut d1" "$dst t0"; do set -- $x; ip -n "$1" link set "$2" up; done
  ip -n "$src" route add default via 198.18.1.1; ip -n "$dst" route add default via 198.19.1.1
  ip netns exec "$dut" sysctl -qw net.ipv4.ip_forward=1
  dip=198.19.1.2; sip=198.18.1.2; gw=198.18.1.1; mode="routed (src -> dut -> dst)"
else
  ip link add s0 netns "$src" type veth peer name t0 netns "$dst"
  ip -n "$src" addr add 198.18.0.1/24 dev s0; ip -n "$dst" addr add 198.18.0.2/24 dev t0
  ip -n "$src" link set s0 up; ip -n "$dst" link set t0 up
  dip=198.18.0.2; sip=198.18.0.1; gw=$dip; mode="direct veth (src -> dst)"
fi
sdev=s0; rdev=t0

# iperf3 server in the sink namespace; restarted if it ever dies.
srv=""
ensure_iperf3_server() {
  [ -n "$srv" ] && kill -0 "$srv" 2>/dev/null && return 0
  ip netns exec "$dst" iperf3 -s -p 5201 >/dev/null 2>&1 & srv=$!
  sleep 0.5
}
ensure_iperf3_server

# trafgen frame: one flow, 18 B payload = 64 B frame with FCS, to the MAC of
# the next hop (the peer, or the DUT with --routed).
ip netns exec "$src" ping -c1 -W2 "$dip" >/dev/null 2>&1 || true
mac=$(ip -n "$src" neigh show "$gw" | awk '{print $5; exit}')
smac=$(ip -n "$src" -br link show "$sdev" | awk '{print $3}')
[ -n "$mac" ] || { echo "could not resolve the MAC of $gw" >&2; exit 1; }
printf '{ eth(da=%s, sa=%s), ipv4(saddr=%s, daddr=%s, ttl=64), udp(sp=1025, dp=9), fill(0x78, 18) }\n' \
  "$mac" "$smac" "$sip" "$dip" >"$tmp/t.cfg"
sleep 0.5

# ------------------------------------------------------------ measurement ---
tmo=$((secs + 60))          # a hung tool must not hang the benchmark
raw="$tmp/raw.tsv"; : >"$raw"   # round  key  tool  value  extra...
rec() { printf '%s\n' "$*" | tr ' ' '\t' >>"$raw"; }
say() { printf '  %-28s %s\n' "$1" "$2"; }
# Run a measurement as a background job and wait for it, so that Ctrl-C or
# TERM interrupt the benchmark at once (bash runs traps only between
# foreground commands, but does interrupt `wait`).
run() { local rc=0; "$@" & cur=$!; wait "$cur" || rc=$?; cur=""; return $rc; }

# linerate: $1 = key, rest = linerate arguments
run_linerate() {
  local key=$1; shift
  local out="$tmp/lr.json" err="$tmp/lr.err"
  if ! run timeout "$tmo" "$lr" "$@" --client "ns:$src" --server "ns:$dst" --target "$dip" \
       -t "$secs" --json --no-progress --no-results >"$out" 2>"$err"; then
    say "linerate $key" "FAILED: $(tail -n 2 "$err" | tr '\n' ' ')"
    rec "$round" "$key" linerate nan; return 0
  fi
  python3 - "$out" "$round" "$key" "$raw" <<'EOF' || { say "linerate $key" "FAILED: unreadable JSON"; rec "$round" "$key" linerate nan; }
import json, sys
path, rnd, key, raw = sys.argv[1:]
try:
    t = json.load(open(path))["tests"][0]
    d = t["directions"][0]
except Exception as e:
    print(f"  {'linerate ' + key:<28} FAILED: unreadable JSON ({e})")
    open(raw, "a").write(f"{rnd}\t{key}\tlinerate\tnan\n"); sys.exit(0)
rss = max((x.get(s) or {}).get("max_rss_bytes") or 0
          for x in t["directions"] for s in ("sender_summary", "receiver_summary"))
cpu = " ".join(f"{c['role']} {c['process_pct']:.0f}%" for c in t.get("cpu") or [])
if t.get("status") != "ok":
    print(f"  {'linerate ' + key:<28} status {t.get('status')}: {t.get('error')}")
if key.startswith("tcp"):
    v = d["rx_l2_bps"] or 0.0
    extra = f"retr {d.get('retransmits')}"
    shown = f"{v/1e9:9.2f} Gbit/s"
else:
    v = d["rx_pps"] or 0.0
    eng = (d.get("sender_summary") or {}).get("tx_engine") or "?"
    note = (d.get("sender_summary") or {}).get("tx_engine_note")
    extra = (f"tx {d['tx_pps']/1e3:.1f} kpps, loss {100*(d['loss_ratio'] or 0):.2f} %, "
             f"tester drops {d.get('tester_drops')}, engine {eng}" + (f" [{note}]" if note else ""))
    shown = f"{v/1e3:9.1f} kpps rx"
print(f"  {'linerate ' + key:<28} {shown}  ({extra}; cpu {cpu}; peak rss {rss/2**20:.1f} MiB)")
with open(raw, "a") as f:
    f.write(f"{rnd}\t{key}\tlinerate\t{v}\n")
    f.write(f"{rnd}\trss\tlinerate\t{rss}\n")
    f.write(f"{rnd}\t{key}_rss\tlinerate\t{rss}\n")
EOF
}

# iperf3 TCP: $1 = streams, $2 = block (-l) if not iperf3's default
run_iperf3_tcp() {
  local P=$1 key="tcp$1${2:+l$2}" out="$tmp/ip.json"
  ensure_iperf3_server
  if ! run timeout "$tmo" ip netns exec "$src" iperf3 -c "$dip" -t "$secs" -P "$P" ${2:+-l "$2"} -J >"$out" 2>&1; then
    say "iperf3 $key" "FAILED: $(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('error',''))" "$out" 2>/dev/null | head -c 200)"
    rec "$round" "$key" iperf3 nan; return 0
  fi
  python3 - "$out" "$round" "$key" "$raw" <<'EOF' || { say "iperf3 $key" "FAILED: unreadable JSON"; rec "$round" "$key" iperf3 nan; }
import json, sys
path, rnd, key, raw = sys.argv[1:]
e = json.load(open(path))["end"]
v = e["sum_received"]["bits_per_second"]
retr = e["sum_sent"].get("retransmits")
cpu = e.get("cpu_utilization_percent") or {}
print(f"  {'iperf3 ' + key:<28} {v/1e9:9.2f} Gbit/s  (retr {retr}; cpu host {cpu.get('host_total', 0):.0f}% "
      f"remote {cpu.get('remote_total', 0):.0f}%)")
open(raw, "a").write(f"{rnd}\t{key}\tiperf3\t{v}\n")
EOF
}

# linerate as the client of the stock iperf3 server: $1 = streams. The
# figure is the server's received goodput (from the results exchange), as
# iperf3 -c's sum_received is.
run_linerate_iperf3() {
  local P=$1 key="ip3tcp$1" out="$tmp/lr3.json" err="$tmp/lr3.err"
  ensure_iperf3_server
  if ! run timeout "$tmo" ip netns exec "$src" "$lr" tcp --server "iperf3://$dip" -P "$P" -t "$secs" \
       --json --no-progress --no-results >"$out" 2>"$err"; then
    say "linerate $key" "FAILED: $(tail -n 2 "$err" | tr '\n' ' ')"
    rec "$round" "$key" linerate nan; return 0
  fi
  python3 - "$out" "$round" "$key" "$raw" <<'EOF' || { say "linerate $key" "FAILED: unreadable JSON"; rec "$round" "$key" linerate nan; }
import json, sys
path, rnd, key, raw = sys.argv[1:]
t = json.load(open(path))["tests"][0]
d = t["directions"][0]
v = d["rx_l2_bps"] or 0.0
cpu = " ".join(f"{c['role']} {c['process_pct']:.0f}%" for c in t.get("cpu") or [])
print(f"  {'linerate ' + key:<28} {v/1e9:9.2f} Gbit/s  (retr {d.get('retransmits')}; cpu {cpu})")
open(raw, "a").write(f"{rnd}\t{key}\tlinerate\t{v}\n")
EOF
}

# iperf3 UDP, 18 B payload + 8 UDP + 20 IPv4 + 14 Ethernet + 4 FCS = 64 B frame
run_iperf3_udp() {
  local out="$tmp/ip.json"
  ensure_iperf3_server
  if ! run timeout "$tmo" ip netns exec "$src" iperf3 -c "$dip" -u -b 0 -l 18 -t "$secs" -J >"$out" 2>&1; then
    say "iperf3 -u udp64" "FAILED: $(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('error',''))" "$out" 2>/dev/null | head -c 200)"
    rec "$round" udp64 iperf3 nan; return 0
  fi
  python3 - "$out" "$round" "$raw" <<'EOF' || { say "iperf3 -u udp64" "FAILED: unreadable JSON"; rec "$round" udp64 iperf3 nan; }
import json, sys
path, rnd, raw = sys.argv[1:]
s = json.load(open(path))["end"]["sum"]
v = s["packets"] * (1 - s["lost_percent"] / 100) / s["seconds"]
print(f"  {'iperf3 -u -l 18 udp64':<28} {v/1e3:9.1f} kpps rx  (tx {s['packets']/s['seconds']/1e3:.1f} kpps, "
      f"loss {s['lost_percent']:.2f} %)")
open(raw, "a").write(f"{rnd}\tudp64\tiperf3\t{v}\n")
EOF
}

# trafgen, one core; received pps = sink veth rx_packets delta / seconds
run_trafgen() {
  # $1: cores (default 1); results are recorded as udp64 (1 core) or udp64mt.
  local cores=${1:-1} key=udp64 rx0 rx1 tx0 tx1 rc=0
  [ "$cores" = 1 ] || key=udp64mt
  rx0=$(ip netns exec "$dst" cat "/sys/class/net/$rdev/statistics/rx_packets")
  tx0=$(ip netns exec "$src" cat "/sys/class/net/$sdev/statistics/tx_packets")
  run ip netns exec "$src" timeout "$secs" trafgen --dev "$sdev" --conf "$tmp/t.cfg" --cpus "$cores" -q \
    >"$tmp/tg.out" 2>&1 || rc=$?
  rx1=$(ip netns exec "$dst" cat "/sys/class/net/$rdev/statistics/rx_packets")
  tx1=$(ip netns exec "$src" cat "/sys/class/net/$sdev/statistics/tx_packets")
  if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then   # 124 = stopped by timeout, as intended
    say "trafgen $key" "FAILED (exit $rc): $(tail -n 2 "$tmp/tg.out" | tr '\n' ' ')"
    rec "$round" "$key" trafgen nan; return 0
  fi
  local v=$(( (rx1 - rx0) / secs ))
  say "trafgen ($cores core) $key" "$(python3 -c "import sys; print(f'{int(sys.argv[1])/1e3:9.1f} kpps rx  (tx {int(sys.argv[2])/1e3:.1f} kpps on $sdev)')" "$v" "$(( (tx1 - tx0) / secs ))")"
  rec "$round" "$key" trafgen "$v"
}

# NAPI on the peer of the sender's veth (the DUT's d0 with --routed), which
# XDP_TX'd frames need; only for the live rows, so the others are unchanged.
peer_ns() { if [ $routed = 1 ]; then echo "$dut"; else echo "$dst"; fi; }
peer_dev() { if [ $routed = 1 ]; then echo d0; else echo "$rdev"; fi; }
napi() {
  local t=0; [ "$1" = on ] && t=1
  ip netns exec "$(peer_ns)" ethtool -K "$(peer_dev)" gro "$1" >/dev/null 2>&1 || true
  ip netns exec "$(peer_ns)" sh -c "echo $t > /sys/class/net/$(peer_dev)/threaded" 2>/dev/null || true
}
rx_count() { ip netns exec "$dst" cat "/sys/class/net/$rdev/statistics/rx_packets"; }

# The live engine, one sender thread; rx pps at the sink veth as for trafgen.
run_live() {
  local rx0 rx1 t0 t1
  napi on; rx0=$(rx_count); t0=$(date +%s.%N)
  run_linerate udp64live-lr udp --frame-size 64 --tx-engine live --rx-engine xdp --threads 1
  rx1=$(rx_count); t1=$(date +%s.%N); napi off
  local tx
  tx=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["tests"][0]["directions"][0]["tx_pps"] or 0))' "$tmp/lr.json" 2>/dev/null || echo nan)
  rec "$round" udp64livetx linerate "$tx"
  local v
  v=$(python3 -c "import sys; print(int((int(sys.argv[2])-int(sys.argv[1]))/$secs))" "$rx0" "$rx1")
  say "linerate live (sink veth)" "$(python3 -c "import sys; print(f'{int(sys.argv[1])/1e3:9.1f} kpps rx at $rdev')" "$v")"
  rec "$round" udp64live linerate "$v"
}

# The floor: floor.bpf.c through the same live-frames path on one core.
run_floor() {
  local rx0 rx1 rc=0
  napi on; rx0=$(rx_count)
  run timeout "$tmo" ip netns exec "$src" "$tmp/xdp_floor" "$sdev" "$secs" 8192 0 >"$tmp/fl.out" 2>&1 || rc=$?
  rx1=$(rx_count); napi off
  if [ "$rc" != 0 ]; then
    say "live-frames floor" "FAILED (exit $rc): $(tail -n 2 "$tmp/fl.out" | tr '\n' ' ')"
    rec "$round" udp64live floor nan; return 0
  fi
  rec "$round" udp64livetx floor "$(awk '{print $6; exit}' "$tmp/fl.out")"
  local v=$(( (rx1 - rx0) / secs ))
  say "live-frames floor" "$(python3 -c "import sys; print(f'{int(sys.argv[1])/1e3:9.1f} kpps rx at $rdev')" "$v")  ($(cat "$tmp/fl.out"))"
  rec "$round" udp64live floor "$v"
}

# linerate lab's back-to-back self-test (its own namespaces): the tester's ceiling.
run_selftest() {
  local out="$tmp/st.json" err="$tmp/st.err"
  if ! run timeout "$tmo" "$lr" lab --quick --only self-test --json --no-progress \
       --results-dir "$tmp/st" >"$out" 2>"$err"; then
    say "linerate selftest" "FAILED: $(tail -n 2 "$err" | tr '\n' ' ')"
    rec "$round" selftest linerate nan; return 0
  fi
  local v
  v=$(python3 -c 'import json,sys; t=[t for t in json.load(open(sys.argv[1]))["tests"] if t["name"].startswith("self-test")][0]; print(int(t["directions"][0]["rx_pps"] or 0))' "$out" 2>/dev/null || echo nan)
  say "linerate lab self-test" "$(python3 -c "import sys; v=sys.argv[1]; print('n/a' if v=='nan' else f'{int(v)/1e3:9.1f} kpps rx')" "$v")"
  rec "$round" selftest linerate "$v"
}

# linerate lab, one UDP row through the routing DUT: who is the limit.
# $1 = key, rest = extra lab arguments.
run_labdut() {
  local key=$1; shift
  local out="$tmp/ld.json" err="$tmp/ld.err"
  if ! run timeout "$tmo" "$lr" lab --quick --only "udp 64B var2" --json --no-progress \
       --results-dir "$tmp/ld" "$@" >"$out" 2>"$err"; then
    say "linerate lab $key" "FAILED: $(tail -n 2 "$err" | tr '\n' ' ')"
    rec "$round" "$key" linerate nan; return 0
  fi
  python3 - "$out" "$round" "$raw" "$key" <<'EOF2' || say "linerate lab $key" "FAILED: unreadable JSON"
import json, sys
path, rnd, raw, key = sys.argv[1:]
d = json.load(open(path))
t = [t for t in d["tests"] if t["name"] == "udp 64B var2"][0]
x = t["directions"][0]
b = t.get("bottleneck") or {}
cores = (d.get("labs") or [{}])[-1].get("cores") or {}
busy = {c["cpu"]: c["busy_pct"] for c in b.get("host_cpus") or []}
gen_cpus = cores.get("generator") or []
dut_cpus = cores.get("dut") or []
g = max((busy.get(c, 0) for c in gen_cpus), default=float("nan"))
u = max((busy.get(c, 0) for c in dut_cpus), default=float("nan"))
kind = b.get("kind", "?")
print(f"  {'linerate lab ' + key:<28} {x['rx_pps']/1e3:9.1f} kpps rx (offered {x['tx_pps']/1e3:.0f} kpps, "
      f"verdict {kind}; generator core {g:.0f} %, DUT core {u:.0f} %; {b.get('verdict', '')[:90]})")
rss = max((s.get("max_rss_bytes") or 0) for s in (x.get("sender_summary") or {}, x.get("receiver_summary") or {}))
with open(raw, "a") as f:
    f.write(f"{rnd}\t{key}\tlinerate\t{x['rx_pps'] or 0}\n")
    f.write(f"{rnd}\t{key}_kind\tlinerate\t{1.0 if kind == 'dut' else 0.0}\n")
    f.write(f"{rnd}\t{key}_gen\tlinerate\t{g}\n")
    f.write(f"{rnd}\t{key}_dut\tlinerate\t{u}\n")
    f.write(f"{rnd}\t{key}_rss\tlinerate\t{rss}\n")
EOF2
}

# ----------------------------------------------------------------- header ---
cpu_model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
echo "linerate benchmark  $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host: kernel $(uname -r), cpu ${cpu_model:-unknown}, nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tools: $("$lr" --version 2>/dev/null || echo 'linerate ?'), $(iperf3 --version 2>/dev/null | head -n1 | awk '{print "iperf3 "$2}'), $(trafgen -v 2>/dev/null | head -n1 | awk '{print "trafgen "$2}')"
echo "lab: $mode, target $dip; ${secs} s per measurement, ${rounds} round(s), median reported"
echo

for round in $(seq 1 "$rounds"); do
  echo "round $round/$rounds"
  if [ $liveonly = 1 ]; then
    if [ $((round % 2)) = 1 ]; then run_trafgen; run_live; run_floor; else run_floor; run_live; run_trafgen; fi
  elif [ $iperf3only = 1 ]; then
    if [ $((round % 2)) = 1 ]; then
      run_linerate_iperf3 1; run_iperf3_tcp 1; run_iperf3_tcp 1 768K
      run_linerate_iperf3 4; run_iperf3_tcp 4; run_iperf3_tcp 4 768K
    else
      run_iperf3_tcp 1 768K; run_iperf3_tcp 1; run_linerate_iperf3 1
      run_iperf3_tcp 4 768K; run_iperf3_tcp 4; run_linerate_iperf3 4
    fi
  elif [ $((round % 2)) = 1 ]; then
    run_linerate tcp1 tcp -P 1; run_iperf3_tcp 1
    run_linerate tcp4 tcp -P 4; run_iperf3_tcp 4
    run_linerate_iperf3 1; run_iperf3_tcp 1 768K; run_linerate_iperf3 4; run_iperf3_tcp 4 768K
    run_linerate udp64 udp --frame-size 64 --tx-engine socket; run_trafgen
    run_linerate udp64pkt udp --frame-size 64 --tx-engine packet; run_iperf3_udp
    run_linerate udp64mt udp --frame-size 64 --tx-engine packet --flow-mode ports --threads 2; run_trafgen 2
    run_selftest; run_linerate udp64xdp udp --frame-size 64 --tx-engine xdp
    run_live; run_floor; run_labdut labdut
    run_linerate many udp --frame-size 64 --flow-mode ports --flows 4096
  else
    run_linerate many udp --frame-size 64 --flow-mode ports --flows 4096; run_labdut labdut
    run_floor; run_live
    run_linerate udp64xdp udp --frame-size 64 --tx-engine xdp; run_selftest
    run_trafgen 2; run_linerate udp64mt udp --frame-size 64 --tx-engine packet --flow-mode ports --threads 2
    run_iperf3_tcp 1; run_linerate tcp1 tcp -P 1
    run_iperf3_tcp 4; run_linerate tcp4 tcp -P 4
    run_iperf3_tcp 4 768K; run_linerate_iperf3 4; run_iperf3_tcp 1 768K; run_linerate_iperf3 1
    run_iperf3_udp; run_linerate udp64pkt udp --frame-size 64 --tx-engine packet
    run_trafgen; run_linerate udp64 udp --frame-size 64 --tx-engine socket
  fi
  echo
done

# ------------------------------------------------------------------ table ---
python3 - "$raw" "$rounds" <<'EOF'
import math, statistics, sys
raw, rounds = sys.argv[1], int(sys.argv[2])
vals = {}
# Per round too: linerate's figure over the anchor's from the same round
# (the two ran back to back), for rows where a slow drift of the machine
# over the run would bias a ratio of medians.
by_round = {}
for line in open(raw):
    rnd, key, tool, v = line.rstrip("\n").split("\t")[:4]
    vals.setdefault((key, tool), []).append(float(v))
    by_round[(rnd, key, tool)] = float(v)

def med(key, tool):
    xs = [x for x in vals.get((key, tool), []) if not math.isnan(x)]
    return statistics.median(xs) if xs else None

def paired(key, akey, atool):
    rs = []
    for (rnd, k, t), v in by_round.items():
        b = by_round.get((rnd, akey, atool))
        if k == key and t == "linerate" and b and not math.isnan(v) and not math.isnan(b):
            rs.append(v / b)
    return rs

def gbit(v): return "n/a" if v is None else f"{v/1e9:.2f} Gbit/s"
def pps(v):
    if v is None: return "n/a"
    return f"{v/1e6:.2f} Mpps" if v >= 1e6 else f"{v/1e3:.1f} kpps"

rows = []  # test, linerate, anchor, anchor value, ratio, target, met, line
T1, T2 = ("udp64", "trafgen"), ("udp64mt", "trafgen")
IP = ("udp64", "iperf3")
for key, label, (akey, atool), aname, fmt, tgt in [
    ("tcp1", "tcp 1 stream", ("tcp1", "iperf3"), "iperf3", gbit, 1.2),
    ("tcp4", "tcp 4 streams", ("tcp4", "iperf3"), "iperf3", gbit, 1.0),
    # Issue 20: linerate as an iperf3 client vs iperf3 -c, same iperf3 -s.
    ("ip3tcp1", "tcp 1 stream to iperf3 -s", ("tcp1", "iperf3"), "iperf3 -c", gbit, 1.0),
    ("ip3tcp4", "tcp 4 streams to iperf3 -s", ("tcp4", "iperf3"), "iperf3 -c", gbit, 1.0),
    # linerate's default block towards iperf3 (768 KiB) given to iperf3 -c too.
    ("ip3tcp1", "tcp 1 stream to iperf3 -s, same block", ("tcp1l768K", "iperf3"),
     "iperf3 -c -l 768K", gbit, None),
    ("ip3tcp4", "tcp 4 streams to iperf3 -s, same block", ("tcp4l768K", "iperf3"),
     "iperf3 -c -l 768K", gbit, None),
    ("udp64", "udp 64B rx pps, socket engine", T1, "trafgen (1 core)", pps, 1.0),
    ("udp64", "udp 64B rx pps, socket engine", IP, "iperf3 -u -l 18", pps, 1.5),
    # The lab's default engine (auto) is the packet engine: issue 9's goals.
    ("udp64pkt", "udp 64B rx pps, packet engine", T1, "trafgen (1 core)", pps, 1.2),
    ("udp64pkt", "udp 64B rx pps, packet engine", IP, "iperf3 -u -l 18", pps, 1.5),
    # The tester's own ceiling: `linerate lab`'s back-to-back self-test.
    ("selftest", "lab self-test ceiling", T1, "trafgen (1 core)", pps, 10.0),
    # The other engine, for the record (copy mode on veth).
    ("udp64xdp", "udp 64B rx pps, xdp engine", T1, "trafgen (1 core)", pps, None),
    # The live engine (issue 16): vs trafgen, and vs the live-frames floor.
    ("udp64live", "udp 64B sink rx pps, live engine", T1, "trafgen (1 core)", pps, 12.0),
    ("udp64live", "udp 64B sink rx pps, live engine", ("udp64live", "floor"),
     "live-frames floor", pps, 0.8),
    # What the generator sent (its runs' repeat counts) vs the floor's.
    ("udp64livetx", "udp 64B tx pps, live engine", ("udp64livetx", "floor"),
     "live-frames floor (tx)", pps, 0.8),
    ("udp64livetx", "udp 64B tx pps, live engine", T1, "trafgen (1 core)", pps, None),
    # --threads 2: its scaling over one thread, and trafgen on the same 2 cores.
    ("udp64mt", "udp 64B rx pps, packet, 2 threads", ("udp64pkt", "linerate"),
     "linerate 1 thread", pps, None),
    ("udp64mt", "udp 64B rx pps, packet, 2 threads", T2, "trafgen (2 cores)", pps, None),
]:
    a, b = med(key, "linerate"), med(akey, atool)
    if (key, "linerate") not in vals:
        continue  # not measured in this run (--iperf3-only, --live-only)
    ratio = a / b if a is not None and b else None
    r = "n/a" if ratio is None else f"{ratio:.2f}"
    extra = None
    if key.startswith("ip3") and tgt is not None:
        rs = paired(key, akey, atool)
        if rs:
            pr = statistics.median(rs)
            extra = ((label + " (paired)", "-", aname + ", same round", "-", f"{pr:.2f}",
                         f">= {tgt:.1f}", pr >= tgt,
                         f"median of {len(rs)} per-round ratios {pr:.2f} ({min(rs):.2f}-{max(rs):.2f})"))
    if tgt is None:
        rows.append((label, fmt(a), aname, fmt(b), r, "report", None, f"ratio {r} (reported)"))
        continue
    met = None if ratio is None else ratio >= tgt
    rows.append((label, fmt(a), aname, fmt(b), r, f">= {tgt:.1f}", met, f"ratio {r} vs >= {tgt:.1f}"))
    if extra:
        rows.append(extra)
ld = med("labdut", "linerate")
kinds = [x for x in vals.get(("labdut_kind", "linerate"), []) if not math.isnan(x)]
g, u = med("labdut_gen", "linerate"), med("labdut_dut", "linerate")
if ld is not None:
    dutl = bool(kinds) and all(k == 1.0 for k in kinds)
    rows.append(("lab udp 64B var2 via DUT", pps(ld), "verdict", f"dut in {int(sum(kinds))}/{len(kinds)}", "-",
                 "DUT-limited", dutl,
                 f"generator core {g:.0f} %, DUT core {u:.0f} %"))
manyrss = [x for x in vals.get(("many_rss", "linerate"), []) if not math.isnan(x) and x > 0]
if manyrss:
    p = max(manyrss)
    rows.append(("agent RSS, 4096 flows", f"{p/2**20:.1f} MiB", "-", "-", "-", "<= 64 MiB", p <= 64 * 2**20,
                 f"{p/2**20:.1f} MiB vs <= 64 MiB"))
rss = [x for x in vals.get(("rss", "linerate"), []) if not math.isnan(x) and x > 0]
peak = max(rss) if rss else None
rows.append(("agent peak RSS", "n/a" if peak is None else f"{peak/2**20:.1f} MiB", "-", "-", "-", "<= 64 MiB",
             None if peak is None else peak <= 64 * 2**20,
             f"{'n/a' if peak is None else f'{peak/2**20:.1f} MiB'} vs <= 64 MiB"))

hdr = ("test", "linerate", "anchor", "anchor value", "ratio", "target")
w = [max(len(hdr[i]), *(len(r[i]) for r in rows)) for i in range(6)]
print(f"medians of {rounds} round(s); ratio = linerate / anchor; peak RSS = largest of any agent in any run")
print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)).rstrip())
print("  ".join("-" * w[i] for i in range(6)))
for r in rows:
    print("  ".join(str(r[i]).ljust(w[i]) for i in range(6)).rstrip())
print()
for r in rows:
    verdict = ("reported" if r[5] == "report" else "no figure") if r[6] is None else ("met" if r[6] else "not met")
    label = r[0] + (f" vs {r[2]}" if r[2] != "-" else "")
    print(f"{label:<36} {r[7]:<28} {verdict}")
EOF
