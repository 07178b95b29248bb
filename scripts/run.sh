#!/usr/bin/env bash
# Sets up (packages, Release build) and runs ratelimit with the arguments given.
# Example: scripts/run.sh --rate 20k --progress README.md > /dev/null
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages "${RATELIMIT_BUILD_PACKAGES[@]}"
build_tree release -DCMAKE_BUILD_TYPE=Release -DRATELIMIT_BUILD_TESTS=OFF
exec "$RATELIMIT_ROOT/build/release/src/ratelimit" "$@"
