#!/usr/bin/env bash
# cpack -G DEB builds a package with the binary, its dependencies and the files a
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
# The binary is static (process start-up cost, see src/CMakeLists.txt), so dpkg-shlibdeps finds no
# shared library to depend on.
depends=$(dpkg-deb --field "$deb" Depends)
[ -z "$depends" ] || fail "Depends is '$depends', expected none for a static binary"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/ratelimit >"$work/ratelimit"
chmod +x "$work/ratelimit"
program_headers=$(readelf --program-headers "$work/ratelimit")
if grep -q INTERP <<<"$program_headers"; then fail "the packaged binary is not static"; fi
"$work/ratelimit" --version >/dev/null || fail "the packaged binary does not run"
contents=$(dpkg-deb --contents "$deb")
for file in ./usr/bin/ratelimit ./usr/include/ratelimit/rate_limiter.hpp \
  ./usr/lib/cmake/ratelimit/ratelimitConfig.cmake ./usr/share/man/man1/ratelimit.1 \
  ./usr/share/bash-completion/completions/ratelimit; do
  grep -q " $file\$" <<<"$contents" || fail "the package lacks $file"
done
