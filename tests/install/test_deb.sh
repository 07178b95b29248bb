#!/usr/bin/env bash
# cpack -G DEB builds a package with the binary, its shared-library dependency and the files a
# user expects.
set -euo pipefail
build_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

(cd "$work" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" >"$work/log" 2>&1) ||
  { cat "$work/log"; fail "cpack failed"; }
deb=$(ls "$work"/ratelimit_*.deb)
dpkg-deb --field "$deb" Package | grep -qx ratelimit || fail "wrong package name"
# libstdc++ and fmt are linked in (process start-up cost, see src/CMakeLists.txt): libc is the
# one shared library, and dpkg-shlibdeps must have found it.
depends=$(dpkg-deb --field "$deb" Depends)
[[ $depends == "libc6 (>= "*")" ]] || fail "Depends is '$depends', expected libc6 alone"
contents=$(dpkg-deb --contents "$deb")
for file in ./usr/bin/ratelimit ./usr/include/ratelimit/rate_limiter.hpp \
  ./usr/lib/cmake/ratelimit/ratelimitConfig.cmake ./usr/share/man/man1/ratelimit.1 \
  ./usr/share/bash-completion/completions/ratelimit; do
  grep -q " $file\$" <<<"$contents" || fail "the package lacks $file"
done
