#!/usr/bin/env bash
# The source tree keeps its floor order and its store rooms (check_layers.sh), and the check does
# see each kind of wrong arrow when one is planted in a copy of the tree.
set -euo pipefail
src=${1:?usage: test_layers.sh SRC_DIR}
check=$(dirname "$0")/check_layers.sh
bash "$check" "$src"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Plants `include` in a copy of `file`; the check must refuse it, its output matching `expected`.
expect_refused() {
  local what=$1 file=$2 include=$3 expected=${4:-includes \"$3\"}
  rm -rf "$scratch/src"
  cp -r "$src" "$scratch/src"
  printf '#include "%s"\n' "$include" >>"$scratch/src/$file"
  if bash "$check" "$scratch/src" >"$scratch/out"; then
    echo "FAIL: $what ($file including $include) was not refused"
    exit 1
  fi
  grep -qF "$expected" "$scratch/out" || { cat "$scratch/out"; exit 1; }
}
expect_refused "an arrow up a floor" io/posix.hpp cli/commands.hpp
expect_refused "a circle" state/state_directory.hpp stores/bucket_store.hpp
expect_refused "a store's folder entered from outside" cli/units.cpp stores/redis/redis_url.hpp
expect_refused "one store's folder entering another's" stores/redis/open_redis_store.cpp \
  stores/state_file/state_file_format.hpp
expect_refused "an undeclared folder" pipe/engine.hpp nowhere/thing.hpp
expect_refused "a circle inside a folder" stores/redis/redis_options.hpp \
  stores/redis/redis_topology.hpp "stores/redis: files include each other in a circle"
expect_refused "a circle through a header's .cpp" stores/bucket_store.cpp stores/multi_key.hpp \
  "stores: files include each other in a circle"
expect_refused "a circle by a name without its folder" cli/units.hpp bucket_options.hpp \
  "cli: files include each other in a circle"
echo "layers: ok"
