#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 20: about
# a minute in all) from the corpus in tests/fuzz/corpus; new finds go to a scratch directory, a
# crash stops with the reproducer's path. Usage: scripts/fuzz.sh [SECONDS]
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages "${RATELIMIT_BUILD_PACKAGES[@]}" clang
seconds=${1:-20}

build_tree fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRATELIMIT_FUZZ=ON \
  -DRATELIMIT_BUILD_CLI=OFF -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_INSTALL=OFF
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in fuzz_units fuzz_state_record fuzz_pipe_engine; do
  mkdir -p "$scratch/$target"
  echo "== $target: ${seconds} s"
  status=0
  "$RATELIMIT_ROOT/build/fuzz/tests/fuzz/$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$RATELIMIT_ROOT/build/fuzz/$target-" "$scratch/$target" \
    "$RATELIMIT_ROOT/tests/fuzz/corpus/$target" >"$scratch/$target.log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|new_units_added)' "$scratch/$target.log" || true
  if [ "$status" -ne 0 ]; then
    grep -E -A30 '^==[0-9]+==|^SUMMARY|artifact' "$scratch/$target.log" >&2 || cat "$scratch/$target.log" >&2
    echo "ratelimit fuzz: $target failed" >&2
    exit 1
  fi
done
