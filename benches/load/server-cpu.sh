#!/usr/bin/env bash
# Server CPU per review (`make bench-server`): `celgate serve` on the bundled example policies
# (examples/policies) over TLS and HTTP/2, driven by h2load (Debian's nghttp2-client) with
# Pod CREATE AdmissionReviews the policies allow and deny (benches/load/server_cpu_setup.py).
# The server's utime+stime (/proc/<pid>/stat) before and after each phase, divided by the
# reviews answered, is its CPU per review: the client's own CPU is not in it, so the figure
# holds on a machine the client shares.
#
#   bash benches/load/server-cpu.sh [reviews per phase, default 100000]
#
# Phases, on one freshly started server: `warm-up` (its first WARMUP reviews, allowed; default
# 20000), then `allowed` and `denied` (each REVIEWS). Each line: phase, reviews, server CPU
# µs/review, user and system shares, throughput (reviews/s, client and server together), the
# status codes, and the load average (/proc/loadavg) before the phase: a loaded machine
# inflates every figure, so compare builds alternated on one machine (CELGATE_BIN=path serves
# with that binary instead of building this tree's release one).
set -euo pipefail
cd "$(dirname "$0")/../.."
REVIEWS="${1:-${REVIEWS:-100000}}"
WARMUP="${WARMUP:-20000}"
command -v h2load >/dev/null || { echo "h2load missing: apt-get install nghttp2-client" >&2; exit 1; }
if [ -z "${CELGATE_BIN:-}" ]; then
  cargo build --release --quiet
  CELGATE_BIN=./target/release/celgate
fi
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
python3 benches/load/server_cpu_setup.py "$work"
port=$((20000 + RANDOM % 20000))
# Logs at the default level (info) as deployed; they go to a file, not the terminal.
"$CELGATE_BIN" serve --policies examples/policies --self-signed --ca-out "$work/ca.pem" \
  --listen "127.0.0.1:$port" --metrics-listen off --max-inflight 4096 ${CELGATE_SERVE_FLAGS:-} \
  2>"$work/server.log" &
server=$!
for _ in $(seq 1 100); do
  curl -sf --cacert "$work/ca.pem" "https://localhost:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
url="https://127.0.0.1:$port/validate?timeout=10s"
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14, $15}' "/proc/$server/stat"; }
printf '%-8s %8s %12s %6s %6s %10s  %-22s %s\n' phase reviews 'cpu_us/rev' user% sys% 'reviews/s' status 'loadavg(1,5,15)'
phase() {
  local name=$1 body=$2 n=$3 load before after out
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  before=$(cpu)
  out=$(h2load -H 'content-type: application/json' -d "$body" -t 1 -c 16 -m 16 -n "$n" "$url")
  after=$(cpu)
  read -r u0 s0 <<<"$before"; read -r u1 s1 <<<"$after"
  local rps status
  rps=$(awk '/^finished in/ {gsub(",", "", $4); print int($4)}' <<<"$out")
  status=$(awk '/^status codes:/ {gsub(",", ""); print "2xx=" $3 " 4xx=" $7 " 5xx=" $9}' <<<"$out")
  awk -v n="$n" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v t="$ticks" -v name="$name" \
      -v rps="$rps" -v status="$status" -v load="$load" 'BEGIN {
    tot = u + s; us = tot / t * 1e6 / n
    printf "%-8s %8d %12.1f %6.0f %6.0f %10d  %-22s %s\n", name, n, us,
      (tot ? 100 * u / tot : 0), (tot ? 100 * s / tot : 0), rps, status, load }'
}
phase warm-up "$work/allowed.json" "$WARMUP"
phase allowed "$work/allowed.json" "$REVIEWS"
phase denied "$work/denied.json" "$REVIEWS"
