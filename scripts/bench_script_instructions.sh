#!/usr/bin/env bash
# The bucket script's cost counted in instructions, which other work on the machine does not
# change (bench_script_cost.sh times it): for each SCRIPT, a redis-server of its own under
# callgrind with only it and the minimal GCRA script of redis_bench.sh loaded; the server's
# instructions per call for 2000 calls of each from one client, after 300 to warm up, with the
# arguments of a real `acquire` (the common call, as bench_script_cost.sh sends them), each
# version called as its ratelimit calls it (redis_bench.sh's bucket_call).
#   scripts/bench_script_instructions.sh [NAME=SCRIPT.lua]...   default: now=src/stores/redis/redis_bucket.lua
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/redis_bench.sh"
[ $# -gt 0 ] || set -- "now=$root/src/stores/redis/redis_bucket.lua"
calls=2000
for given in "$@"; do
  name=${given%%=*}
  work=$(mktemp -d)
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" \
    redis-server --port 0 --unixsocket "$work/sock" --save '' --appendonly no --dir "$work" \
    --logfile "$work/log" >/dev/null 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
  until redis-cli -s "$work/sock" ping >/dev/null 2>&1; do sleep 0.1; done
  BENCH_REDIS_SOCK=$work/sock
  BENCH_TMP=$work
  load_gcra_script
  read -ra bucket <<<"$(bucket_call "$work/sock" "${given#*=}")"
  line="$name:"
  for which in gcra script; do
    if [ "$which" = gcra ]; then
      command=(EVALSHA "$GCRA_SHA" 1 'gcra:{k}' 0.001 1000000)
    else
      command=("${bucket[@]}" 1 'ratelimit:{k}' "${ACQUIRE_ARGUMENTS[@]}")
    fi
    redis-benchmark -s "$work/sock" -c 1 -n 300 -q "${command[@]}" >/dev/null
    callgrind_control -z "$server" >/dev/null 2>&1
    redis-benchmark -s "$work/sock" -c 1 -n $calls -q "${command[@]}" >/dev/null
    callgrind_control -d "$which" "$server" >/dev/null 2>&1
    instructions=$(grep -hE '^(summary|totals):' "$(ls -t "$work"/callgrind."$server".* | head -1)" |
      head -1 | awk '{ print $2 }')
    line="$line $which $((instructions / calls))"
    eval "total_$which=$instructions"
  done
  echo "$line instructions per call, script/gcra $(awk -v a="$total_script" -v b="$total_gcra" \
    'BEGIN { printf "%.3f", a / b }')"
  kill "$server"
  wait "$server" 2>/dev/null || true
  rm -rf "$work"
  trap - EXIT
done
