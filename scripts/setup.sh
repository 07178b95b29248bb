# Sourced by scripts/run.sh and scripts/test.sh: installs what the build needs and builds.
set -euo pipefail

RATELIMIT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RATELIMIT_BUILD_PACKAGES=(cmake g++ make libcli11-dev libfmt-dev libgtest-dev libgmock-dev libhiredis-dev
  libssl-dev libc-ares-dev nlohmann-json3-dev)

# ensure_packages PACKAGE...: installs the Debian packages that are missing (as root), or says
# which are missing and stops. Silent when none is missing.
ensure_packages() {
  local missing=() package
  local installed
  installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null || true)
  for package in "$@"; do
    grep -qx "$package installed" <<<"$installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "ratelimit: missing packages: ${missing[*]} (install them, or run as root)" >&2
    return 69
  fi
  echo "ratelimit: installing packages: ${missing[*]} ..." >&2
  local log
  log=$(mktemp)
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "ratelimit: installing ${missing[*]} failed" >&2
    return 1
  fi
  rm -f "$log"
}

# build_tree NAME CMAKE_ARGS...: configures and builds $RATELIMIT_ROOT/build/NAME, its output in
# build/NAME.log. Says so in one line when it compiles anything, with $FIRST_BUILD_TIME (how long a
# new tree takes) if the caller gives it; a tree up to date takes a second and prints nothing. On
# failure, shows the log.
build_tree() {
  local name=$1
  shift
  local dir="$RATELIMIT_ROOT/build/$name"
  local log="$dir.log" announcement="ratelimit: rebuilding build/$name ..."
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    echo "ratelimit: building build/$name for the first time${FIRST_BUILD_TIME:+ (about $FIRST_BUILD_TIME)} ..." >&2
    announcement=
  fi
  mkdir -p "$dir"
  # cmake --build configures again by itself when a CMakeLists.txt changed; the configure step
  # here is for a new tree or other options.
  if ! { { cache_holds "$dir" "$@" || cmake -S "$RATELIMIT_ROOT" -B "$dir" "$@"; } &&
    cmake --build "$dir" -j "$(nproc)"; } 2>&1 | announce_compiling "$announcement" >"$log"; then
    cat "$log" >&2
    echo "ratelimit: build of $dir failed" >&2
    return 1
  fi
}

# cache_holds DIR CMAKE_ARGS...: whether DIR's CMake cache holds every -DNAME=VALUE given.
cache_holds() {
  local cache=$1/CMakeCache.txt arg name cached
  shift
  [ -f "$cache" ] || return 1
  for arg in "$@"; do
    [[ $arg == -D*=* ]] || return 1
    name=${arg%%=*}
    name=${name#-D}
    cached=$(grep -m1 "^${name%%:*}:" "$cache") || return 1
    [ "${cached#*=}" = "${arg#*=}" ] || return 1
  done
}

# announce_compiling ANNOUNCEMENT: copies a build's output, and prints ANNOUNCEMENT (if any) to
# stderr once, when the build starts compiling or linking.
announce_compiling() {
  local announcement=$1 line
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if [ -n "$announcement" ] && [[ $line =~ ^\[\ *[0-9]+%\]\ (Building|Linking) ]]; then
      echo "$announcement" >&2
      announcement=
    fi
  done
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

# The benchmarks' binary: $RATELIMIT when set (any Release build), else the bench tree's.
use_bench_binary() {
  if [ -n "${RATELIMIT:-}" ]; then
    RESULTS=$RATELIMIT_ROOT/bench/results
  else
    build_bench_tree
  fi
  export RATELIMIT
}
