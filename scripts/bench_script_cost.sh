#!/usr/bin/env bash
# The bucket script's server CPU per decision against a minimal GCRA script (redis_bench.sh), for
# one or more versions of the script on one redis-server of its own: BENCH_ROUNDS alternating
# rounds (default 9) of 100000 decisions from 8 clients each, the arguments of a real `acquire`
# (redis_bench.sh's ACQUIRE_ARGUMENTS, on one key that holds the caller's settings: the common call),
# each version called as its ratelimit calls it (redis_bench.sh's bucket_call: FCALL of a function
# library, or EVALSHA of an older script).
# Prints each round's figures and ratio to the same round's GCRA, then the medians.
#   scripts/bench_script_cost.sh [NAME=SCRIPT.lua]...   default: now=src/stores/redis/redis_bucket.lua
#   e.g. scripts/bench_script_cost.sh main=<(git show main:src/stores/redis/redis_bucket.lua) now=src/stores/redis/redis_bucket.lua
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/redis_bench.sh"
[ $# -gt 0 ] || set -- "now=$root/src/stores/redis/redis_bucket.lua"
work=$(mktemp -d)
start_socket_redis "$work/redis"
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
BENCH_REDIS_SOCK=$work/redis/sock
BENCH_TMP=$work
load_gcra_script
gcra_unix() { gcra -s "$work/redis/sock"; }
# script_of NAME: a function NAME that measures the script loaded as $sha_NAME on a key of its own.
pairs=(gcra gcra_unix)
names=()
for given in "$@"; do
  name=${given%%=*}
  call=$(bucket_call "$work/redis/sock" "${given#*=}")
  eval "run_$name() { throughput -s '$work/redis/sock' $call 1 'ratelimit:{cost_$name}' \
    \"\${ACQUIRE_ARGUMENTS[@]}\"; }"
  pairs+=("$name" "run_$name")
  names+=("$name")
done
rounds=${BENCH_ROUNDS:-9}
echo "load before: $(uptime)"
alternating_rounds "$rounds" "${pairs[@]}"
echo "load after:  $(uptime)"
echo "round gcra_us $(for name in "${names[@]}"; do printf '%s_us %s/gcra ' "$name" "$name"; done)"
for round in $(seq 1 "$rounds"); do
  g=$(sed -n "${round}p" "$work/gcra" | cut -d' ' -f2)
  line="$round $g"
  for name in "${names[@]}"; do
    u=$(sed -n "${round}p" "$work/$name" | cut -d' ' -f2)
    line="$line $u $(awk -v a="$u" -v b="$g" 'BEGIN { printf "%.3f", a / b }')"
    echo "$(awk -v a="$u" -v b="$g" 'BEGIN { printf "%.4f", a / b }')" >>"$work/$name.ratio"
  done
  echo "$line"
done
echo "medians: gcra $(cut -d' ' -f2 "$work/gcra" | median) us$(for name in "${names[@]}"; do
  printf ', %s %s us (per-round ratio median %s)' "$name" "$(cut -d' ' -f2 "$work/$name" | median)" \
    "$(median <"$work/$name.ratio")"; done)"
