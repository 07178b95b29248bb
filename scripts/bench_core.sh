#!/usr/bin/env bash
# Micro-benchmark of the core's acquire()/reserve(), uncontended and with 2 threads.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
build_bench_tree
"$RATELIMIT_ROOT/build/bench/bench/ratelimit_core_bench" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true "$@"
