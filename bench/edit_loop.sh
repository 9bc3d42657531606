#!/usr/bin/env bash
# The edit-build-test loop a developer lives in, measured: after an edit to a page, a use case or
# a domain rule (the file's mtime moved, as a save does), the wall time of
#   - `cargo build --test api` (what a test run needs rebuilt: the library, the binary, the suite),
#   - then one API test (`health::healthz_and_readyz_answer_without_a_token`, a fresh database),
# median of N rounds each. Also the library's own share: `cargo check --lib` after the same edit,
# which is what splitting `server/` into crates could save at most per edit (the crates below the
# edited one are not rebuilt; everything above it and the link are), and an edit to a test alone:
# the suite's own rebuild, paid after any edit whatever the crates.
# Usage: bench/edit_loop.sh [rounds]   (debug build; needs DATABASE_URL or the embedded cluster)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
export SQLX_OFFLINE=true CARGO_TERM_COLOR=never
edits=(
  "a page|server/pages/agents.rs"
  "a use case|server/app/messages.rs"
  "a domain rule|server/domain/message.rs"
  "a test|tests/api/health.rs"
)

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Warm: everything built once, so each round measures an edit, not a cold build.
cargo build --test api >/dev/null 2>&1
echo "# edit-build-test loop, debug, median of $rounds rounds ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
for edit in "${edits[@]}"; do
  what=${edit%%|*} file=${edit#*|}
  checks=() builds=() tests=()
  for _ in $(seq "$rounds"); do
    touch "$file"
    start=$(date +%s%N); cargo check --lib >/dev/null 2>&1; checks+=("$(ms "$start")")
    touch "$file"
    start=$(date +%s%N); cargo build --test api >/dev/null 2>&1; builds+=("$(ms "$start")")
    start=$(date +%s%N)
    cargo test --test api -- --exact health::healthz_and_readyz_answer_without_a_token >/dev/null 2>&1
    tests+=("$(ms "$start")")
  done
  printf '%-14s check --lib %6s ms   build --test api %6s ms   one test %6s ms\n' \
    "$what:" "$(median "${checks[@]}")" "$(median "${builds[@]}")" "$(median "${tests[@]}")"
done
