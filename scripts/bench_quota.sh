#!/usr/bin/env bash
# Quotas (issue 29): the busiest window against N for the quota tests' workloads, and the core's
# cost per decision with 0, 1 and 4 quotas. Prints the figures for bench/results/quota.md.
#   scripts/bench_quota.sh                 builds the bench tree (build/bench) and measures it
#   RATELIMIT=... CORE_BENCH=... scripts/bench_quota.sh   measures those binaries instead
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${RATELIMIT:-}" ] || [ -z "${CORE_BENCH:-}" ]; then
  source "$root/scripts/setup.sh"
  build_bench_tree
  CORE_BENCH=$RATELIMIT_ROOT/build/bench/bench/ratelimit_core_bench
fi
windows="python3 $root/tests/e2e/quota_windows.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== core: one decision (QuotaBucket::reserve) with 0, 1 and 4 quotas"
"$CORE_BENCH" --benchmark_filter=BM_QuotaDecision --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true

echo "== 8 processes x 200 'acquire --quota 50/2s --key q' (state file), grants as they come"
start=$(date +%s%N)
for process in $(seq 8); do
  (
    for _ in $(seq 200); do
      "$RATELIMIT" acquire --quota 50/2s --key q --state-dir "$work/state"
      echo "${EPOCHREALTIME/./}000 1"
    done >"$work/grants.$process"
  ) &
done
wait
echo "busiest 2 s window: $($windows busiest 2 "$work"/grants.*) grants of N = 50" \
  "($(cat "$work"/grants.* | wc -l) grants in $((($(date +%s%N) - start) / 1000000)) ms)"

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
