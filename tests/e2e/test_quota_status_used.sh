#!/usr/bin/env bash
# `status` "used in the window" after pipes a quota held (issue 39), on the state file and in
# Redis (through the host agent and without): a held pipe's booking goes a window ahead, and the
# window ending now still holds what went through, not that booking.
# Timing: each held pipe is stopped after a second (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
head -c 30000 /dev/urandom >"$WORK/input"

# used_of STORE_OPTIONS...: what `status --json` says the key's quota used in the window.
used_of() {
  "$RATELIMIT" status --key "used-$variant" --json "$@" >"$WORK/status.json" ||
    fail "status failed ($variant)"
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["buckets"][0]["quotas"][0]["used"])' \
    "$WORK/status.json"
}

# held_pipe STORE_OPTIONS...: a pipe on the key stopped by SIGINT after 1 s; prints what it wrote.
held_pipe() {
  interrupted_after_1s "the held pipe ($variant)" \
    "$RATELIMIT" --rate 10M --quota 50kB/d --key "used-$variant" "$@" "$WORK/input"
  wc -c <"$WORK/out"
}

for variant in state_file redis redis_no_agent; do
  use_store "$variant" "$WORK/records"
  # shellcheck disable=SC2086 # the store's options, split
  "$RATELIMIT" --rate 10M --quota 50kB/d --key "used-$variant" $store "$WORK/input" -o "$WORK/out" ||
    fail "the first pipe failed ($variant)"
  # shellcheck disable=SC2086
  used=$(used_of $store)
  [ "$used" = 30000 ] || fail "after the first pipe: $used used ($variant)"

  # The second pipe sends what the quota still allows, then waits for tomorrow.
  # shellcheck disable=SC2086
  written=$(held_pipe $store)
  [ "$written" -gt 0 ] && [ "$written" -le 20000 ] || fail "the held pipe wrote $written bytes ($variant)"
  # shellcheck disable=SC2086
  used=$(used_of $store)
  # What it wrote, and what it was granted in the window and had not written yet when stopped.
  [ "$used" -ge $((30000 + written)) ] && [ "$used" -le 50000 ] ||
    fail "after the held pipe wrote $written bytes: $used used ($variant)"

  # A third pipe sends nothing: the window holds what it held.
  # shellcheck disable=SC2086
  [ "$(held_pipe $store)" = 0 ] || fail "the third pipe wrote ($variant)"
  # shellcheck disable=SC2086
  after=$(used_of $store)
  [ "$after" = "$used" ] || fail "after a pipe that sent nothing: $after used, was $used ($variant)"
done
