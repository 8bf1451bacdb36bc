#!/usr/bin/env bash
# linerate HTTP benchmark (issue 10): in one run, on one lab, with one file:
#
#   client  linerate http --url  vs  curl (N processes) against nginx (sendfile on)
#           and against linerate serve, 1 and 4 connections, HTTP
#   http2   linerate http --http2  vs  h2load  against nginx (listen http2,
#           h2c), 1 and 4 connections, one stream per connection
#   server  linerate serve       vs  nginx           with the same client (linerate http)
#           HTTP and HTTPS (nginx: OpenSSL in user space; linerate: rustls,
#           kTLS where the kernel has the tls ULP), 1, 4 and 64 connections,
#           --rounds rounds (default 3), the order of the two servers
#           flipping each round; the median and min-max of each ratio
#
# Prints Gbit/s, ratios (linerate / anchor) and CPU per byte (ns of CPU per
# byte moved, user + system of the side being compared).
#
# Lab: two network namespaces joined by a veth pair, 198.18.30.1 (client) ->
# 198.18.30.2 (server). The file is warmed into the page cache first.
#
# Usage: bench/http.sh [--seconds N] [--size BYTES] [--rounds N] [--http2-only]
#   --seconds N    seconds per measurement (default 5)
#   --size BYTES   size of the file served (default 256M; dd syntax)
#   --rounds N     rounds of the client, http2 and server rows (default 3)
#   --http2-only   only the http2 rows (and http-requests.sh's HTTP/2 rows)
# Namespaces are named lrhb<pid>-c/-s (LR_BENCH_PREFIX replaces "lrhb").
# Then runs bench/http-requests.sh (requests/s vs wrk and h2load) with the
# same --rounds, unless LR_BENCH_NO_REQUESTS is set.
#
# A benchmark, not a test: exits 0 whatever the figures; non-zero only when
# the lab cannot be built or a tool is missing. Needs root; installs nginx,
# curl and nghttp2-client (h2load) with apt-get if missing. Everything it
# starts is removed on exit.
set -euo pipefail

secs=5; size=256M; rounds=3; h2only=
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) secs=${2:?--seconds needs a value}; shift ;;
    --size) size=${2:?--size needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --http2-only) h2only=1 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "bench/http.sh needs root (network namespaces)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd); repo=$(dirname "$here")
. "$here/pair.sh"
need nginx nginx; need curl curl; need python3 python3; need openssl openssl
need h2load nghttp2-client; need /usr/bin/time time
lr_binary "$repo"
pair_lab "${LR_BENCH_PREFIX:-lrhb}$$" hb 198.18.30 lr-http-bench

mkdir -p "$work/root"
dd if=/dev/urandom of="$work/root/file.bin" bs=1M count=1 status=none
dd if=/dev/zero of="$work/root/file.bin" bs="$size" count=1 oflag=append conv=notrunc status=none 2>/dev/null \
  || head -c "$size" /dev/zero >> "$work/root/file.bin"
cat "$work/root/file.bin" > /dev/null   # warm the page cache
bytes=$(stat -c %s "$work/root/file.bin")

cat > "$work/openssl.cnf" <<EOF
[req]
distinguished_name=dn
x509_extensions=v3
prompt=no
[dn]
CN=linerate-bench
[v3]
basicConstraints=critical,CA:FALSE
subjectAltName=IP:$S
keyUsage=digitalSignature
extendedKeyUsage=serverAuth
EOF
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -config "$work/openssl.cnf" -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat > "$work/nginx.conf" <<EOF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work;
  uwsgi_temp_path $work; scgi_temp_path $work;
  server { listen $S:8081; root $work/root; }
  server { listen $S:8444 ssl; root $work/root; ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem; }
  # HTTP/2 in clear text (h2c), without sendfile as in http-requests.sh.
  server { listen $S:8082 http2; root $work/root; sendfile off; }
}
EOF
ip netns exec "$sns" nginx -c "$work/nginx.conf" & pids+=($!)
ip netns exec "$sns" "$lr" serve --no-results --listen $S:8080 --root "$work/root" >/dev/null & pids+=($!)
ip netns exec "$sns" "$lr" serve --no-results --listen $S:8443 --root "$work/root" --tls \
  --cert "$work/cert.pem" --key "$work/key.pem" >/dev/null & pids+=($!)
for url in http://$S:8081/file.bin http://$S:8080/file.bin; do
  for _ in $(seq 100); do
    ip netns exec "$cns" curl -s -o /dev/null -r 0-0 "$url" && break; sleep 0.1
  done
done
for _ in $(seq 100); do
  ip netns exec "$cns" bash -c "exec 3<>/dev/tcp/$S/8082" 2>/dev/null && break; sleep 0.1
done

# CPU ticks (user + system) of processes, by pid (a process's stat counts
# its threads, ended ones included).
ticks() {
  local t=0 pid
  for pid in "$@"; do
    [ -r /proc/"$pid"/stat ] || continue
    t=$((t + $(awk '{print $14 + $15}' /proc/"$pid"/stat)))
  done
  echo "$t"
}
hz=$(getconf CLK_TCK)
server_pids() { # the server processes listening on a port in the server namespace
  ip netns exec "$sns" ss -ltnpH "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u
}

# linerate's client: prints "gbps cpu_ns_per_byte(client)"
lr_client() { # url conns [flags...]
  local extra=("${@:3}"); [[ $1 == https* ]] && extra+=(--cacert "$work/cert.pem")
  "$lr" http --client "ns:$cns" --url "$1" -t "$secs" -c "$2" "${extra[@]}" \
    --json --no-progress --no-results 2>/dev/null | python3 -c "$lr_figures"
}
lr_figures='
import json, sys
t = json.load(sys.stdin)["tests"][0]["http"]
c = t["client"]
cpu_s = (c["cpu"]["user_pct"] + c["cpu"]["system_pct"]) / 100 * c["elapsed_s"]
print("%.3f %.3f" % (t["goodput_bps"] / 1e9, cpu_s * 1e9 / max(c["body_bytes"], 1)))'

# curl: N processes, each downloading the file over one keep-alive connection
# a fixed number of times (about $secs at 8 Gbit/s per connection), every
# download complete; timed from start to the last one's end. Prints "gbps
# cpu_ns_per_byte(client)".
curl_client() { # url conns
  local reps=$(( (secs * 1000000000 / bytes) + 1 )) urls=() i
  for i in $(seq "$reps"); do urls+=(-o /dev/null "$1"); done
  local t0 t1 out="$work/curl.out"
  : > "$out"
  TIMEFORMAT='%U %S'
  t0=$(date +%s.%N)
  { time (for i in $(seq "$2"); do
      ip netns exec "$cns" curl -s -w '%{size_download}\n' "${urls[@]}" >> "$out" &
    done; wait) ; } 2> "$work/curl.time"
  t1=$(date +%s.%N)
  python3 - "$out" "$work/curl.time" "$t0" "$t1" <<'EOF'
import sys
got = sum(int(l) for l in open(sys.argv[1]) if l.strip().isdigit())
u, s = (float(x) for x in open(sys.argv[2]).read().split()[-2:])
wall = float(sys.argv[4]) - float(sys.argv[3])
print(f"{got * 8 / wall / 1e9:.3f} {(u + s) * 1e9 / max(got, 1):.3f}")
EOF
}

# h2load for --seconds, one thread, one stream per connection (its
# default): body bytes received ("traffic: ... data"), as linerate counts
# them, over its run time. Prints "gbps cpu_ns_per_byte(client)".
h2load_client() { # url conns
  /usr/bin/time -f "%U %S" -o "$work/h2load.time" \
    ip netns exec "$cns" h2load -t1 -c "$2" -D "$secs" "$1" > "$work/h2load.out" 2>/dev/null || true
  python3 - "$work/h2load.out" "$work/h2load.time" <<'EOF'
import re, sys
out = open(sys.argv[1]).read()
u, s = (float(x) for x in open(sys.argv[2]).read().split()[-2:])
took = re.search(r"finished in ([0-9.]+)(m?s)", out)
data = re.search(r"traffic:.*\((\d+)\) data", out)
if not (took and data):
    print("0 0")
else:
    wall = float(took.group(1)) / (1000 if took.group(2) == "ms" else 1)
    got = int(data.group(1))
    print(f"{got * 8 / wall / 1e9:.3f} {(u + s) * 1e9 / max(got, 1):.3f}")
EOF
}

# A server measured with linerate's client: prints "gbps cpu_ns_per_byte(server)".
server_run() { # url port conns
  local pids_s; pids_s=$(server_pids "$2")
  local a b res
  a=$(ticks $pids_s $(for q in $pids_s; do pgrep -P "$q"; done))
  res=$(lr_client "$1" "${3:-1}")
  b=$(ticks $pids_s $(for q in $pids_s; do pgrep -P "$q"; done))
  python3 -c "
g, _ = '$res'.split()
g = float(g); secs = $secs
byts = g * 1e9 / 8 * secs
print(f'{g:.3f} {($b - $a) / $hz * 1e9 / max(byts, 1):.3f}')"
}

ratio() { python3 -c "a, b = $1, $2; print(f'{a / b:.2f}x' if b > 0 else '-')"; }

printf '%-42s %10s %10s %10s %10s %8s\n' measurement "linerate" "ns CPU/B" anchor "ns CPU/B" ratio
row() { # name lin_result anchor_result
  set -- "$1" $2 $3
  printf '%-42s %10s %10s %10s %10s %8s\n' "$1" "$2" "$3" "$4" "$5" "$(ratio "$2" "$4")"
}
# The http2 rows: every round measures linerate --http2 and h2load at 1
# and 4 connections against nginx (h2c), h2load first in odd rounds,
# linerate first in even ones.
hruns="$work/http2-runs"; : > "$hruns"
for r in $(seq "$rounds"); do
  for c in 1 4; do
    u=http://$S:8082/file.bin
    if [ $((r % 2)) = 1 ]; then k=$(h2load_client "$u" "$c"); l=$(lr_client "$u" "$c" --http2)
    else l=$(lr_client "$u" "$c" --http2); k=$(h2load_client "$u" "$c"); fi
    echo "$c $r $l $k" >> "$hruns"
    printf '  round %s: http2 vs h2load, %s conn: %s vs %s Gbit/s\n' "$r" "$c" "${l%% *}" "${k%% *}"
  done
done
python3 - "$hruns" <<'EOF2'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    c, r, lg, lc, kg, kc = line.split()
    rows.setdefault(int(c), []).append((float(lg), float(lc), float(kg), float(kc)))
for c, v in sorted(rows.items()):
    med = lambda i: statistics.median(x[i] for x in v)
    ratios = [x[0] / x[2] for x in v if x[2] > 0]
    rr = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
    name = f"http2 vs h2load, nginx h2c, {c} conn (Gbit/s)"
    print(f"{name:<42} {med(0):10.3f} {med(1):10.3f} {med(2):10.3f} {med(3):10.3f} {rr}")
EOF2
if [ -n "$h2only" ]; then
  echo "file: $bytes bytes from the page cache; $secs s per measurement; medians of $rounds rounds, ratio median (min-max); CPU per byte is the client's user+system time"
  if [ -z "${LR_BENCH_NO_REQUESTS:-}" ]; then
    echo
    bash "$here/http-requests.sh" --rounds "$rounds" --http2-only
  fi
  exit 0
fi
# The client rows: every round measures linerate's client and curl at 1 and
# 4 connections against nginx and against linerate serve (plain HTTP),
# curl first in odd rounds, linerate first in even ones.
cruns="$work/client-runs"; : > "$cruns"
for r in $(seq "$rounds"); do
  for srv in nginx:8081 serve:8080; do
    for c in 1 4; do
      u=http://$S:${srv#*:}/file.bin
      if [ $((r % 2)) = 1 ]; then k=$(curl_client "$u" "$c"); l=$(lr_client "$u" "$c")
      else l=$(lr_client "$u" "$c"); k=$(curl_client "$u" "$c"); fi
      echo "${srv%%:*} $c $r $l $k" >> "$cruns"
      printf '  round %s: client vs curl, %-6s %s conn: %s vs %s Gbit/s\n' "$r" "${srv%%:*}" "$c" "${l%% *}" "${k%% *}"
    done
  done
done
python3 - "$cruns" <<'EOF2'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    srv, c, r, lg, lc, kg, kc = line.split()
    rows.setdefault((srv, int(c)), []).append((float(lg), float(lc), float(kg), float(kc)))
for (srv, c), v in sorted(rows.items()):
    med = lambda i: statistics.median(x[i] for x in v)
    ratios = [x[0] / x[2] for x in v if x[2] > 0]
    rr = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
    name = f"client vs curl, {srv}, {c} conn (Gbit/s)"
    print(f"{name:<42} {med(0):10.3f} {med(1):10.3f} {med(2):10.3f} {med(3):10.3f} {rr}")
EOF2
# The server rows: every round measures both servers at every connection
# count, nginx first in odd rounds, linerate first in even ones.
runs="$work/server-runs"; : > "$runs"
for r in $(seq "$rounds"); do
  for proto in HTTP HTTPS; do
    if [ "$proto" = HTTP ]; then lu=http://$S:8080/file.bin lp=8080 nu=http://$S:8081/file.bin np=8081
    else lu=https://$S:8443/file.bin lp=8443 nu=https://$S:8444/file.bin np=8444; fi
    for c in 1 4 64; do
      if [ $((r % 2)) = 1 ]; then
        n=$(server_run "$nu" "$np" "$c"); l=$(server_run "$lu" "$lp" "$c")
      else
        l=$(server_run "$lu" "$lp" "$c"); n=$(server_run "$nu" "$np" "$c")
      fi
      echo "$proto $c $r $l $n" >> "$runs"
      printf '  round %s: server vs nginx, %-5s %2s conn: %s vs %s Gbit/s\n' "$r" "$proto" "$c" "${l%% *}" "${n%% *}"
    done
  done
done
python3 - "$runs" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    proto, c, r, lg, lc, ng, nc = line.split()
    rows.setdefault((proto, int(c)), []).append((float(lg), float(lc), float(ng), float(nc)))
for (proto, c), v in sorted(rows.items()):
    med = lambda i: statistics.median(x[i] for x in v)
    ratios = [x[0] / x[2] for x in v if x[2] > 0]
    rr = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
    name = f"server vs nginx, {proto}, {c} conn (Gbit/s)"
    print(f"{name:<42} {med(0):10.3f} {med(1):10.3f} {med(2):10.3f} {med(3):10.3f} {rr}")
EOF
echo "kTLS: $(cat /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null | grep -qw tls && echo 'tls ULP present' || echo 'kTLS not available on this kernel (tls ULP missing): linerate serve used rustls in user space')"
echo "file: $bytes bytes from the page cache; $secs s per measurement; server rows: medians of $rounds rounds, ratio median (min-max); CPU per byte is the compared side's user+system time"

# Many small requests: linerate http vs wrk and h2load (bench/http-requests.sh).
if [ -z "${LR_BENCH_NO_REQUESTS:-}" ]; then
  echo
  bash "$here/http-requests.sh" --rounds "$rounds"
fi
