#!/usr/bin/env bash
# Micro-benchmark of the core's acquire()/reserve(), uncontended and with 2 threads (Google
# Benchmark, medians of 3 repetitions). Prints the table and writes it to bench/results/core.txt.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
build_bench_tree
"$RATELIMIT_ROOT/build/bench/bench/ratelimit_core_bench" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="$RATELIMIT_ROOT/bench/results/core.txt" \
  --benchmark_out_format=console "$@"
