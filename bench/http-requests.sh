#!/usr/bin/env bash
# linerate request-rate benchmark (issue 18): many small requests, keep-alive
# HTTP/1.1, no pipelining, 64 connections, a 1 KiB object:
#
#   linerate http  vs  wrk  and  h2load --h1      against nginx
#                                                 and against `linerate serve`
#   linerate http --http2  vs  h2load (h2c)       against nginx (listen http2)
#
# Beside each rate it prints the client's CPU time per request (user +
# system of the client process), which shows how much of a request's cost
# is the client's own and how much the kernel's, and the client's sleeps
# per request (voluntary context switches of all its threads): a client
# that sleeps between responses must be woken by the response's arrival,
# which is work on the server's side (see bench/README.md).
#
# Each round runs every client against every server for --seconds; after
# --rounds rounds it prints requests/s per tool (median, min-max) and the
# ratio linerate / the better of wrk and h2load per round (median, min-max).
#
# Lab: two network namespaces joined by a veth pair, 198.18.31.1 (client) ->
# 198.18.31.2 (server).
#
# Usage: bench/http-requests.sh [--seconds N] [--rounds N] [--connections N] [--pin]
#                               [--http2-only]
#
# --http2-only runs only the HTTP/2 rows (linerate --http2 and h2load).
#
# --pin gives each side a core of its own: every client (one thread each:
# wrk -t1, h2load -t1, linerate's one event loop) on CPU 0, the servers
# (nginx with one worker, `linerate serve --workers 1`) on CPU 1. Beside
# each rate it then prints how busy each core was (user + system + softirq
# from /proc/stat): with the server's core full and the client's not, the
# client is not the limit, and its core's time per request is what the
# client costs, the kernel's TCP work it triggers included; the server
# core's time per request (busy share / rate) is what each request costs
# the server, waking the client included.
#
# A benchmark, not a test: exits 0 whatever the figures; non-zero only when
# the lab cannot be built or a tool is missing. Needs root; installs nginx,
# wrk and nghttp2-client (h2load) with apt-get if missing. Everything it
# starts is removed on exit.
set -euo pipefail

secs=5; rounds=3; conns=64; pin=; h2only=
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=${2:?--seconds needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --connections) conns=${2:?--connections needs a value}; shift ;;
    --pin) pin=1 ;;
    --http2-only) h2only=1 ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/http-requests.sh needs root (network namespaces)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
. "$here/pair.sh"
need nginx nginx; need wrk wrk; need /usr/bin/time time; need h2load nghttp2-client; need python3 python3
lr_binary "$repo"
pair_lab "lrrq$$" rq 198.18.31 lr-http-requests

mkdir -p "$work/root"
head -c 1024 /dev/urandom > "$work/root/1k.bin"
# Pinned: clients on CPU 0 with one thread, servers on CPU 1 with one.
if [ -n "$pin" ]; then
  [ "$(nproc)" -ge 2 ] || { echo "--pin needs 2 CPUs" >&2; exit 2; }
  cpin="taskset -c 0"; spin="taskset -c 1"; threads=1; workers=1
else
  cpin=""; spin=""; threads=2; workers=2
fi
cat > "$work/nginx.conf" <<EOF
worker_processes $workers;
pid $work/nginx.pid;
error_log $work/error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen $S:8081; root $work/root; }
  # HTTP/2 without sendfile: nginx 1.22 with sendfile on held every small
  # HTTP/2 response ~40 ms here (h2load and linerate alike: 1,450 requests/s).
  server { listen $S:8082 http2; root $work/root; sendfile off; }
}
EOF
ip netns exec "$sns" $spin nginx -c "$work/nginx.conf" & pids+=($!)
ip netns exec "$sns" $spin "$lr" serve --no-results --listen $S:8080 --size 1k --workers "$workers" >/dev/null & pids+=($!)
for port in 8081 8082 8080; do
  for _ in $(seq 100); do
    ip netns exec "$cns" bash -c "exec 3<>/dev/tcp/$S/$port" 2>/dev/null && break
    sleep 0.1
  done
done
sleep 0.5

# Each tool runs under GNU time: "requests/s cpu_seconds" (user + system of
# the client process and its children), so the CPU each client spends per
# request is printed beside its rate.
# With --pin, each core's busy share over the run goes to $work/cores
# ("client% server%").
stat_busy() { awk -v c="cpu$1" '$1 == c {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
timed() {
  local b0 b1
  b0=$(stat_busy 0); b1=$(stat_busy 1)
  /usr/bin/time -f "%U %S %w" -o "$work/cpu" $cpin "$@"
  python3 -c "import sys; a=list(map(float,sys.argv[1:])); print(' '.join('%.0f' % (100*(a[i+4]-a[i])/max(a[i+5]-a[i+1],1)) for i in (0,2)))" \
    $b0 $b1 $(stat_busy 0) $(stat_busy 1) > "$work/cores"
}
cpu_s() { awk '{print $1 + $2, $3}' "$work/cpu"; }
rps_linerate() {
  local v
  v=$(timed ip netns exec "$cns" "$lr" http --url "$1" -c "$conns" -t "$secs" --json --no-progress \
    --no-results 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["tests"][0]["http"]["requests_per_s"])')
  echo "$v $(cpu_s)"
}
rps_linerate_h2() {
  local v
  v=$(timed ip netns exec "$cns" "$lr" http --http2 --url "$1" -c "$conns" -t "$secs" --json --no-progress \
    --no-results 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["tests"][0]["http"]["requests_per_s"])')
  echo "$v $(cpu_s)"
}
rps_wrk() {
  local v
  v=$(timed ip netns exec "$cns" wrk -t"$threads" -c"$conns" -d"${secs}s" "$1" 2>/dev/null \
    | awk '/^Requests\/sec:/ {print $2}')
  echo "$v $(cpu_s)"
}
rps_h2load() {
  local v
  v=$(timed ip netns exec "$cns" h2load --h1 -t"$threads" -c"$conns" -D"$secs" "$1" 2>/dev/null \
    | awk '/^finished in/ {gsub(",", "", $4); print $4}')
  echo "$v $(cpu_s)"
}
rps_h2load_h2() {
  local v
  v=$(timed ip netns exec "$cns" h2load -t"$threads" -c"$conns" -D"$secs" "$1" 2>/dev/null \
    | awk '/^finished in/ {gsub(",", "", $4); print $4}')
  echo "$v $(cpu_s)"
}

declare -A got cpu cores sleeps
# HTTP/1.1 against both servers (linerate, wrk, h2load --h1); HTTP/2 with
# prior knowledge (h2c) against nginx's second port (linerate --http2, h2load).
runs="nginx:linerate:http://$S:8081/1k.bin nginx:wrk:http://$S:8081/1k.bin
nginx:h2load:http://$S:8081/1k.bin serve:linerate:http://$S:8080/1k.bin
serve:wrk:http://$S:8080/1k.bin serve:h2load:http://$S:8080/1k.bin
nginx-h2:linerate_h2:http://$S:8082/1k.bin nginx-h2:h2load_h2:http://$S:8082/1k.bin"
names="nginx serve nginx-h2"
if [ -n "$h2only" ]; then
  runs="nginx-h2:linerate_h2:http://$S:8082/1k.bin nginx-h2:h2load_h2:http://$S:8082/1k.bin"
  names=nginx-h2
fi
for r in $(seq "$rounds"); do
  for run in $runs; do
    name=${run%%:*}; rest=${run#*:}; tool=${rest%%:*}; url=${rest#*:}
    read -r v c w < <("rps_$tool" "$url" || true)
    v=${v:-0}; c=${c:-0}; w=${w:-0}
    got[$name.$tool.$r]=$v
    # CPU microseconds per request: cpu seconds / (requests/s x seconds)
    cpu[$name.$tool.$r]=$(python3 -c "import sys; v,c,s=map(float,sys.argv[1:]); print(c*1e6/(v*s) if v>0 else 0)" "$v" "$c" "$secs")
    # The client's sleeps (voluntary context switches) per request.
    sleeps[$name.$tool.$r]=$(python3 -c "import sys; v,w,s=map(float,sys.argv[1:]); print(w/(v*s) if v>0 else 0)" "$v" "$w" "$secs")
    cores[$name.$tool.$r]=$(cat "$work/cores" 2>/dev/null || echo "- -")
    printf 'round %d  %-8s %-12s %12.0f requests/s  %6.1f us CPU/request  %5.2f sleeps/request' \
      "$r" "$name" "$tool" "$v" "${cpu[$name.$tool.$r]}" "${sleeps[$name.$tool.$r]}" >&2
    if [ -n "$pin" ]; then
      read -r cc sc <<<"${cores[$name.$tool.$r]}"
      printf '  client core %s %%, server core %s %% (%.1f us/request)' "$cc" "$sc" \
        "$(python3 -c "import sys; v,b=map(float,sys.argv[1:]); print(b*1e4/v if v>0 else 0)" "$v" "$sc")" >&2
    fi
    echo >&2
  done
done

echo "requests/s, $conns connections, 1 KiB object, keep-alive, ${secs} s x $rounds rounds${pin:+, pinned: clients on CPU 0 (one thread), servers on CPU 1 (one worker)}"
echo "host: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "(CPU/request: the client's own user + system time per request; the server and the"
echo " kernel's softirq work charged elsewhere are not in it)"
{
  for name in $names; do
    if [ "$name" = nginx-h2 ]; then tools="linerate_h2 h2load_h2"; else tools="linerate wrk h2load"; fi
    for tool in $tools; do
      vals=""; cpus=""; slps=""
      for r in $(seq "$rounds"); do
        vals="$vals ${got[$name.$tool.$r]}"; cpus="$cpus ${cpu[$name.$tool.$r]}"; slps="$slps ${sleeps[$name.$tool.$r]}"
      done
      echo "$name $tool $vals"
      echo "$name cpu:$tool $cpus"
      echo "$name slp:$tool $slps"
      if [ -n "$pin" ]; then
        cc=""; sc=""; su=""
        for r in $(seq "$rounds"); do
          read -r a b <<<"${cores[$name.$tool.$r]}"; cc="$cc $a"; sc="$sc $b"
          su="$su $(python3 -c "import sys; v,b=map(float,sys.argv[1:]); print(b*1e4/v if v>0 else 0)" "${got[$name.$tool.$r]}" "$b")"
        done
        echo "$name ccore:$tool $cc"
        echo "$name score:$tool $sc"
        echo "$name sus:$tool $su"
      fi
    done
    ratios=""
    for r in $(seq "$rounds"); do
      if [ "$name" = nginx-h2 ]; then
        ratios="$ratios $(python3 -c "import sys; l,h=map(float,sys.argv[1:]); print(l/max(h,1e-9))" \
          "${got[$name.linerate_h2.$r]}" "${got[$name.h2load_h2.$r]}")"
      else
        ratios="$ratios $(python3 -c "import sys; l,w,h=map(float,sys.argv[1:]); print(l/max(w,h,1e-9))" \
          "${got[$name.linerate.$r]}" "${got[$name.wrk.$r]}" "${got[$name.h2load.$r]}")"
      fi
    done
    echo "$name ratio $ratios"
  done
} | python3 -c '
import statistics, sys
for line in sys.stdin:
    name, tool, *v = line.split()
    v = [float(x) for x in v]
    if tool == "ratio":
        other = "h2load (HTTP/2)" if name == "nginx-h2" else "better of wrk, h2load"
        print(f"  {name:8} linerate / {other}: median {statistics.median(v):.2f}x  (min-max {min(v):.2f}-{max(v):.2f})")
    elif tool.startswith("ccore:") or tool.startswith("score:"):
        side = "client" if tool.startswith("c") else "server"
        print(f"  {name:8} {tool[6:]:12} {side} core busy median {statistics.median(v):5.0f} %  (min-max {min(v):.0f}-{max(v):.0f})")
    elif tool.startswith("sus:"):
        print(f"  {name:8} {tool[4:]:12} server core per request median {statistics.median(v):5.1f} us  (min-max {min(v):.1f}-{max(v):.1f})")
    elif tool.startswith("slp:"):
        print(f"  {name:8} {tool[4:]:12} client sleeps/request median {statistics.median(v):5.2f}  (min-max {min(v):.2f}-{max(v):.2f})")
    elif tool.startswith("cpu:"):
        print(f"  {name:8} {tool[4:]:12} CPU/request median {statistics.median(v):8.1f} us  (min-max {min(v):.1f}-{max(v):.1f})")
    else:
        print(f"  {name:8} {tool:12} median {statistics.median(v):10.0f}  (min-max {min(v):.0f}-{max(v):.0f})")
'
