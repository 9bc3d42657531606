#!/usr/bin/env bash
# Start-up and idle-memory figures for `switchyard serve` with the embedded PostgreSQL:
#   - time from exec to the first `GET /readyz` 200, with an existing cluster (median of N runs)
#   - idle RSS of the switchyard process alone (PostgreSQL excluded), after it settles
# Usage: bench/startup.sh [runs]   (uses target/release/switchyard; builds it if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=${SWITCHYARD_BIN:-target/release/switchyard}
[ -x "$bin" ] || SQLX_OFFLINE=true cargo build --release --bin switchyard
dir=$(mktemp -d /tmp/switchyard-bench.XXXXXX)
chmod 755 "$dir"
port=$((20000 + RANDOM % 20000))
export SWITCHYARD_DATA_DIR="$dir/data" SWITCHYARD_LISTEN="127.0.0.1:$port" SWITCHYARD_STATUS_LISTEN="127.0.0.1:$((port + 1))"
unset DATABASE_URL

wait_ready() {
  until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.005; done
}

# First start creates the cluster (not measured).
"$bin" serve >/dev/null 2>&1 & pid=$!
wait_ready; kill -TERM $pid; wait $pid || true

times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  "$bin" serve >/dev/null 2>&1 & pid=$!
  wait_ready
  times+=($(( ($(date +%s%N) - start) / 1000000 )))
  kill -TERM $pid; wait $pid || true
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
echo "start to /readyz 200 with an existing cluster (ms, $runs runs): $(echo $sorted) — median $(echo "$sorted" | sed -n "$(( (runs + 1) / 2 ))p")"

"$bin" serve >/dev/null 2>&1 & pid=$!
wait_ready
for _ in $(seq 20); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; done
sleep 3 # let it settle: this is the idle figure, not a synchronisation
echo "idle RSS of switchyard serve (PostgreSQL excluded): $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
kill -TERM $pid; wait $pid || true
rm -rf "$dir"
