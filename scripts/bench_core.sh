#!/usr/bin/env bash
# Micro-benchmark of the core's acquire()/reserve(), uncontended and with 2 threads.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages "${RATELIMIT_BUILD_PACKAGES[@]}" libbenchmark-dev
build_tree bench -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_CLI=OFF \
  -DRATELIMIT_BUILD_BENCH=ON
"$RATELIMIT_ROOT/build/bench/bench/ratelimit_core_bench" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true "$@"
