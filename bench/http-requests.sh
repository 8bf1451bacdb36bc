#!/usr/bin/env bash
# linerate request-rate benchmark (issue 18): many small requests, keep-alive
# HTTP/1.1, no pipelining, 64 connections, a 1 KiB object:
#
#   linerate http  vs  wrk  and  h2load --h1      against nginx
#                                                 and against `linerate serve`
#
# Each round runs every client against every server for --seconds; after
# --rounds rounds it prints requests/s per tool (median, min-max) and the
# ratio linerate / the better of wrk and h2load per round (median, min-max).
#
# Lab: two network namespaces joined by a veth pair, 198.18.31.1 (client) ->
# 198.18.31.2 (server).
#
# Usage: bench/http-requests.sh [--seconds N] [--rounds N] [--connections N]
#
# A benchmark, not a test: exits 0 whatever the figures; non-zero only when
# the lab cannot be built or a tool is missing. Needs root; installs nginx,
# wrk and nghttp2-client (h2load) with apt-get if missing. Everything it
# starts is removed on exit.
set -euo pipefail

secs=5; rounds=3; conns=64
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=${2:?--seconds needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --connections) conns=${2:?--connections needs a value}; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/http-requests.sh needs root (network namespaces)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
. "$here/pair.sh"
need nginx nginx; need wrk wrk; need h2load nghttp2-client; need python3 python3
lr_binary "$repo"
pair_lab "lrrq$$" rq 198.18.31 lr-http-requests

mkdir -p "$work/root"
head -c 1024 /dev/urandom > "$work/root/1k.bin"
cat > "$work/nginx.conf" <<EOF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen $S:8081; root $work/root; }
}
EOF
ip netns exec "$sns" nginx -c "$work/nginx.conf" & pids+=($!)
ip netns exec "$sns" "$lr" serve --no-results --listen $S:8080 --size 1k >/dev/null & pids+=($!)
for port in 8081 8080; do
  for _ in $(seq 100); do
    ip netns exec "$cns" bash -c "exec 3<>/dev/tcp/$S/$port" 2>/dev/null && break
    sleep 0.1
  done
done
sleep 0.5

# requests/s of one tool against one URL
rps_linerate() {
  ip netns exec "$cns" "$lr" http --url "$1" -c "$conns" -t "$secs" --json --no-progress \
    --no-results 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["tests"][0]["http"]["requests_per_s"])'
}
rps_wrk() {
  ip netns exec "$cns" wrk -t2 -c"$conns" -d"${secs}s" "$1" 2>/dev/null \
    | awk '/^Requests\/sec:/ {print $2}'
}
rps_h2load() {
  ip netns exec "$cns" h2load --h1 -t2 -c"$conns" -D"$secs" "$1" 2>/dev/null \
    | awk '/^finished in/ {gsub(",", "", $4); print $4}'
}

declare -A got
servers="nginx=http://$S:8081/1k.bin serve=http://$S:8080/1k.bin"
for r in $(seq "$rounds"); do
  for sv in $servers; do
    name=${sv%%=*}; url=${sv#*=}
    for tool in linerate wrk h2load; do
      v=$("rps_$tool" "$url" || true)
      got[$name.$tool.$r]=${v:-0}
      printf 'round %d  %-6s %-9s %12.0f requests/s\n' "$r" "$name" "$tool" "${v:-0}" >&2
    done
  done
done

echo "requests/s, $conns connections, 1 KiB object, keep-alive HTTP/1.1, ${secs} s x $rounds rounds"
echo "host: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for sv in $servers; do
  name=${sv%%=*}
  for tool in linerate wrk h2load; do
    vals=""; for r in $(seq "$rounds"); do vals="$vals ${got[$name.$tool.$r]}"; done
    echo "$name $tool $vals"
  done
  ratios=""
  for r in $(seq "$rounds"); do
    ratios="$ratios $(python3 -c "import sys; l,w,h=map(float,sys.argv[1:]); print(l/max(w,h,1e-9))" \
      "${got[$name.linerate.$r]}" "${got[$name.wrk.$r]}" "${got[$name.h2load.$r]}")"
  done
  echo "$name ratio $ratios"
done | python3 -c '
import statistics, sys
for line in sys.stdin:
    name, tool, *v = line.split()
    v = [float(x) for x in v]
    if tool == "ratio":
        print(f"  {name:6} linerate / better of wrk, h2load: median {statistics.median(v):.2f}x  (min-max {min(v):.2f}-{max(v):.2f})")
    else:
        print(f"  {name:6} {tool:9} median {statistics.median(v):10.0f}  (min-max {min(v):.0f}-{max(v):.0f})")
'
