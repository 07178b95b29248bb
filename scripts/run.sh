#!/usr/bin/env bash
# Sets up (packages, Release build) and runs ratelimit with the arguments given. Says what it
# installs or builds, one line each on stderr; silent when the build is up to date.
# Example: scripts/run.sh --rate 20k --progress README.md > /dev/null
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages "${RATELIMIT_BUILD_PACKAGES[@]}"
FIRST_BUILD_TIME="3 minutes on 2 cores" build_tree release -DCMAKE_BUILD_TYPE=Release \
  -DRATELIMIT_BUILD_TESTS=OFF
exec "$RATELIMIT_ROOT/build/release/src/ratelimit" "$@"
