#!/usr/bin/env bash
# Load harness: drives `celgate serve` over TLS and HTTP/2 with h2load (Debian's
# nghttp2-client) using Pod CREATE AdmissionReviews built from ../shared/bench/pod.json,
# against one policy holding the 10 validations of ../shared/bench/pss-validations.yaml and
# 9 policies that do not match. Reports throughput, then p50/p99 latency at half that rate.
#
#   bash benches/load/run.sh [seconds per run, default 10]
#
# CELGATE_BIN=path serves with that binary instead of building this tree's (to compare two
# builds on the same machine).
#
# Client and server share this machine's cores: figures are for both together.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_RUN="${1:-10}"
SHARED="${CELGATE_SHARED:-../shared}"
command -v h2load >/dev/null || { echo "h2load missing: apt-get install nghttp2-client" >&2; exit 1; }
if [ -z "${CELGATE_BIN:-}" ]; then
  cargo build --release --quiet
  CELGATE_BIN=./target/release/celgate
fi
work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 benches/load/setup.py "$SHARED" "$work"
port=$((20000 + RANDOM % 20000))
"$CELGATE_BIN" serve --policies "$work/policies" --self-signed --ca-out "$work/ca.pem" \
  --listen "127.0.0.1:$port" --metrics-listen off --log-level warn --max-inflight 4096 &
server=$!
for _ in $(seq 1 100); do
  curl -sf --cacert "$work/ca.pem" "https://localhost:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
url="https://127.0.0.1:$port/validate?timeout=10s"
common=(-H 'content-type: application/json' -d "$work/review.json" -t 1)
echo "== throughput: 16 connections x 16 streams, ${SECONDS_PER_RUN}s"
h2load "${common[@]}" -c 16 -m 16 -D "$SECONDS_PER_RUN" --warm-up-time=2 --log-file="$work/max.log" "$url" > "$work/max.out"
grep -E '^finished in|requests:|status codes:' "$work/max.out"
rps=$(awk '/^finished in/ {gsub(",", "", $4); print int($4)}' "$work/max.out")
python3 benches/load/latency.py "$work/max.log" "at full load"
half=$((rps / 2)); per_client=$(( (half + 15) / 16 ))
echo "== latency at half that rate: $((per_client * 16)) req/s (16 connections x $per_client req/s)"
h2load "${common[@]}" -c 16 -m 1 --rps "$per_client" -D "$SECONDS_PER_RUN" --warm-up-time=2 --log-file="$work/half.log" "$url" > "$work/half.out"
grep -E '^finished in|requests:|status codes:' "$work/half.out"
python3 benches/load/latency.py "$work/half.log" "at half rate"
