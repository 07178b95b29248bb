#!/usr/bin/env bash
# Sets up and runs every test: all of them on a Release build (the Redis ones against redis-servers
# of their own), the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer, the
# threaded tests under ThreadSanitizer, then about a minute of libFuzzer.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages "${RATELIMIT_BUILD_PACKAGES[@]}" libbenchmark-dev tmux strace dpkg-dev \
  bash-completion fish groff-base mandoc file redis-server redis-tools redis-sentinel tzdata python3 \
  openssl iproute2 curl

run_ctest() {
  local dir=$1
  shift
  ctest --test-dir "$RATELIMIT_ROOT/build/$dir" --output-on-failure -j "$(nproc)" "$@"
}

echo "== Release: every test"
build_tree release -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_TESTS=ON -DRATELIMIT_BUILD_BENCH=ON
run_ctest release

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: unit tests"
build_tree asan -DCMAKE_BUILD_TYPE=Debug -DRATELIMIT_SANITIZE=address,undefined
run_ctest asan -L unit

echo "== ThreadSanitizer: threaded tests"
build_tree tsan -DCMAKE_BUILD_TYPE=Debug -DRATELIMIT_SANITIZE=thread
run_ctest tsan -L threaded

echo "== libFuzzer: parsers, state records and key names, the pipe engine (about a minute)"
"$RATELIMIT_ROOT/scripts/fuzz.sh" 20
