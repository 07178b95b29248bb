#!/usr/bin/env bash
# Quotas (issue 29): the busiest window against N for the quota tests' workloads (each grant known
# to lie between its request's sending and its answer's arrival, plus the wait: acquire -vv), the
# core's cost per decision with 0, 1 and 4 quotas, and the Redis script's server CPU per decision
# with 0, 1 and 4 quotas against a minimal GCRA script (redis_bench.sh; BENCH_ROUNDS alternating
# rounds, default 5, medians), on a redis-server of its own. Prints the figures for bench/results/quota.md.
#   scripts/bench_quota.sh                 builds the bench tree (build/bench) and measures it
#   RATELIMIT=... CORE_BENCH=... scripts/bench_quota.sh   measures those binaries instead
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${RATELIMIT:-}" ] || [ -z "${CORE_BENCH:-}" ]; then
  source "$root/scripts/setup.sh"
  build_bench_tree
  CORE_BENCH=$RATELIMIT_ROOT/build/bench/bench/ratelimit_core_bench
fi
source "$root/scripts/redis_bench.sh"
# acquire_in_parallel, as the e2e tests measure grants.
source "$root/tests/e2e/quota_shared.sh"
windows="python3 $root/tests/e2e/quota_windows.py"
work=$(mktemp -d)
WORK=$work
start_socket_redis "$work/redis"
trap 'kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

echo "== core: one decision (QuotaBucket::reserve) with 0, 1 and 4 quotas"
"$CORE_BENCH" --benchmark_filter=BM_QuotaDecision --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true

# busiest_grants NAME STORE_OPTIONS...: 8 processes x 200 'acquire --quota 50/2s --key q'.
busiest_grants() {
  local name=$1 start clock=()
  shift
  # Redis decides on its wall clock: the windows are measured on it.
  if [ "$name" = redis ]; then clock=(--wall "$work/$name.clocks"); fi
  start=$(date +%s%N)
  acquire_in_parallel "$name" 8 200 --quota 50/2s --key q "$@"
  local ms=$((($(date +%s%N) - start) / 1000000)) certain possible width
  read -r certain possible width < <($windows within "${clock[@]}" 2 "$work/$name".grants.*)
  echo "busiest 2 s window: $certain grants certainly in it, $possible possibly, of N = 50" \
    "(each grant's moment known within $width ms, median; $(cat "$work/$name".grants.* | wc -l)" \
    "grants in $ms ms)"
}
echo "== 8 processes x 200 'acquire --quota 50/2s --key q' (state file), grants as they come"
busiest_grants state_file --state-dir "$work/state"
echo "== the same with the key in Redis (unix socket)"
busiest_grants redis --redis "unix://$work/redis/sock"

echo "== pipe --quota 100k/2s, no rate, 1 MB of input, measured where the reader receives it"
head -c 1000000 /dev/urandom >"$work/in"
start=$(date +%s%N)
$windows read "$work/out" "$work/reads" bytes "$RATELIMIT" --quota 100k/2s "$work/in"
cmp "$work/in" "$work/out"
echo "busiest 2 s window: $($windows busiest 2 "$work/reads") bytes of N = 100000" \
  "(1000000 bytes in $((($(date +%s%N) - start) / 1000000)) ms, byte-exact)"

echo "== pipe --rate 10MB/s --quota 500k/1s, 2 MB: the rate and the quota"
head -c 2000000 /dev/urandom >"$work/in"
start=$(date +%s%N)
$windows read "$work/out" "$work/reads" bytes "$RATELIMIT" --rate 10MB/s --quota 500k/1s "$work/in"
cmp "$work/in" "$work/out"
echo "busiest 1 s window: $($windows busiest 1 "$work/reads") bytes of N = 500000" \
  "(2000000 bytes in $((($(date +%s%N) - start) / 1000000)) ms)"

echo "== Redis: the script's server CPU per decision with 0, 1 and 4 quotas, against GCRA"
BENCH_REDIS_SOCK=$work/redis/sock
BENCH_TMP=$work
load_gcra_script
read -ra bucket <<<"$(bucket_call "$work/redis/sock" "$root/src/stores/redis/redis_bucket.lua")"
# Quotas that never hold (limit 10^15), of 1 s, 1 m, 1 h and 1 d, as LIMIT/PERIOD_NS/SLOT_US.
q_second=1000000000000000/1000000000/15625
q_minute=1000000000000000/60000000000/937500
q_hour=1000000000000000/3600000000000/56250000
q_day=1000000000000000/86400000000000/1350000000
# reserve QUOTA_SPECS [LIMIT SLOT]...: one key's reserve at 1e9/s (never waits), as `acquire`
# sends it (redis_bench.sh's ACQUIRE_ARGUMENTS) with those quotas: their specs in the caller's
# texts, their limits and slot lengths before the notation.
reserve() {
  local specs=$1 arguments=("${ACQUIRE_ARGUMENTS[@]}")
  shift
  arguments[4]="${arguments[4]%0,}${specs:+$specs,}0,"
  throughput -s "$work/redis/sock" "${bucket[@]}" 1 "ratelimit:{quotas$#}" "${arguments[@]:0:9}" \
    "$@" "${arguments[9]}"
}
none() { reserve ""; }
one() { reserve "$q_hour" 1000000000000000 56250000; }
four() {
  reserve "$q_second $q_minute $q_hour $q_day" 1000000000000000 15625 1000000000000000 937500 \
    1000000000000000 56250000 1000000000000000 1350000000
}
gcra_unix() { gcra -s "$work/redis/sock"; }
rounds=${BENCH_ROUNDS:-5}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
alternating_rounds "$rounds" gcra gcra_unix none none one one four four
for name in gcra none one four; do
  echo "$name: $(cut -d' ' -f1 "$work/$name" | median) decisions/s," \
    "$(cut -d' ' -f2 "$work/$name" | median) us of server CPU each"
done
echo "(medians of $rounds alternating rounds of 100000 from 8 clients; load average" \
  "$load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after)"
