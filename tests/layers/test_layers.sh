#!/usr/bin/env bash
# The source tree keeps its floor order and its store rooms (check_layers.sh), and the check does
# see each kind of wrong arrow when one is planted in a copy of the tree.
set -euo pipefail
src=${1:?usage: test_layers.sh SRC_DIR}
check=$(dirname "$0")/check_layers.sh
bash "$check" "$src"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Appends `line` to a copy of `file` (made if there is none); the check must refuse it, its output
# matching `expected`.
expect_planted_refused() {
  local what=$1 file=$2 line=$3 expected=$4
  rm -rf "$scratch/src"
  cp -r "$src" "$scratch/src"
  printf '%s\n' "$line" >>"$scratch/src/$file"
  if bash "$check" "$scratch/src" >"$scratch/out"; then
    echo "FAIL: $what ($file with '$line') was not refused"
    exit 1
  fi
  grep -qF "$expected" "$scratch/out" || { cat "$scratch/out"; exit 1; }
}
# Plants `include` in a copy of `file`; the check must refuse it, its output matching `expected`.
expect_refused() {
  expect_planted_refused "$1" "$2" "#include \"$3\"" "${4:-includes \"$3\"}"
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
expect_planted_refused "a store's file in the stores' namespace" stores/redis/redis_url.hpp \
  "namespace ratelimit::stores {}" \
  "stores/redis/redis_url.hpp: namespace ratelimit::stores; its folder's is ratelimit::stores::redis"
expect_planted_refused "a second namespace in a folder" stores/state_file/state_file_format.cpp \
  "namespace record {}" "namespace record; its folder's is ratelimit::stores::state_file"
expect_planted_refused "the core outside the public API's namespace" core/clock.cpp \
  "namespace ratelimit::core {}" "core/clock.cpp: namespace ratelimit::core; its folder's is ratelimit"
expect_planted_refused "a file without its folder's namespace" format/planted.hpp "#pragma once" \
  "format/planted.hpp: declares no namespace; its folder's is ratelimit::format"
echo "layers: ok"
