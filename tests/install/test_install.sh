#!/usr/bin/env bash
# cmake --install into a scratch prefix puts every file in place, and a project outside the tree
# builds against the installed CMake package.
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
for file in bin/ratelimit include/ratelimit/rate_limiter.hpp include/ratelimit/token_bucket.hpp \
  include/ratelimit/clock.hpp lib/libratelimit_core.a lib/cmake/ratelimit/ratelimitConfig.cmake \
  lib/cmake/ratelimit/ratelimitConfigVersion.cmake lib/cmake/ratelimit/ratelimitTargets.cmake \
  share/man/man1/ratelimit.1 share/bash-completion/completions/ratelimit \
  share/zsh/vendor-completions/_ratelimit share/fish/vendor_completions.d/ratelimit.fish; do
  [ -e "$work/prefix/$file" ] || fail "cmake --install did not install $file"
done
"$work/prefix/bin/ratelimit" --version >/dev/null || fail "the installed binary does not run"

cmake -S "$source_dir/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  >"$work/log" 2>&1 || { cat "$work/log"; fail "configuring the consumer failed"; }
cmake --build "$work/consumer" >"$work/log" 2>&1 || { cat "$work/log"; fail "building the consumer failed"; }
"$work/consumer/consumer" | grep -q '^rate 1000, second permit waits$' ||
  fail "the consumer did not compute Guava's second wait"

# A version the package does not provide is refused.
sed 's/find_package(ratelimit 0.1 REQUIRED)/find_package(ratelimit 9.0 REQUIRED)/' \
  "$source_dir/consumer/CMakeLists.txt" >"$work/CMakeLists.txt"
cp "$source_dir/consumer/main.cpp" "$work/"
if cmake -S "$work" -B "$work/wrong" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null 2>&1; then
  fail "find_package accepted version 9.0"
fi
