# Sourced by scripts/run.sh and scripts/test.sh: installs what the build needs and builds.
set -euo pipefail

RATELIMIT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RATELIMIT_BUILD_PACKAGES=(cmake g++ make libcli11-dev libfmt-dev libgtest-dev libgmock-dev libhiredis-dev
  libssl-dev libc-ares-dev)

# ensure_packages PACKAGE...: installs the Debian packages that are missing (as root), or says
# which are missing and stops.
ensure_packages() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "ratelimit setup: missing packages: ${missing[*]} (install them, or run as root)" >&2
    return 69
  fi
  echo "ratelimit setup: installing ${missing[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# build_tree NAME CMAKE_ARGS...: configures and builds $RATELIMIT_ROOT/build/NAME, quietly unless
# something fails.
build_tree() {
  local dir="$RATELIMIT_ROOT/build/$1"
  shift
  local log="$dir.log"
  mkdir -p "$dir"
  if ! { cmake -S "$RATELIMIT_ROOT" -B "$dir" "$@" && cmake --build "$dir" -j "$(nproc)"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "ratelimit setup: build of $dir failed" >&2
    return 1
  fi
}

# The Release tree the benchmark scripts share: the binary, the core micro-benchmark and the
# measuring tools.
build_bench_tree() {
  ensure_packages "${RATELIMIT_BUILD_PACKAGES[@]}" libbenchmark-dev
  build_tree bench -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_TESTS=OFF -DRATELIMIT_BUILD_CLI=ON \
    -DRATELIMIT_BUILD_BENCH=ON
  # What the benchmarks run, and where their results go.
  RATELIMIT=$RATELIMIT_ROOT/build/bench/src/ratelimit
  PROBE=$RATELIMIT_ROOT/build/bench/bench/pipe_probe
  RESULTS=$RATELIMIT_ROOT/bench/results
  mkdir -p "$RESULTS"
}
