#!/usr/bin/env bash
# One range of numbers for every store: quotas and permits up to 2^53 - 1 are counted exactly in
# the state file and in Redis (numbers are doubles in its Lua), through the host agent and
# without; beyond, they are refused with 64 before any store is asked.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
largest=9007199254740991

expect_error "ratelimit: --quota: invalid quota '9007199254740992/h': the amount must be at most $largest (2^53 - 1)" \
  "$RATELIMIT" acquire --quota 9007199254740992/h --key k --try
expect_error "ratelimit: --permits: '9007199254740992' is not a whole number from 1 to $largest" \
  "$RATELIMIT" acquire --quota 5/h --permits 9007199254740992 --key k --try

# count_granted STORE_OPTIONS...: after the whole quota in one request, how many of 50 more single
# permits are granted. The request says --timeout 1s, not --try: on a loaded machine the first
# round trip to a fresh server (the agent started, the script loaded) may outlast --try's 50 ms.
count_granted() {
  expect_status 0 "$RATELIMIT" acquire --quota $largest/h --permits $largest --key big --timeout 1s "$@"
  granted_of 50 "$RATELIMIT" acquire --quota $largest/h --key big --try "$@"
}

for variant in state_file redis redis_no_agent; do
  use_store "$variant" "$WORK/records"
  # shellcheck disable=SC2086 # the store's options, split
  granted=$(count_granted $store)
  [ "$granted" -eq 0 ] || fail "$granted of 50 granted beyond a full quota of 2^53 - 1 ($variant)"
  # shellcheck disable=SC2086
  "$RATELIMIT" status --key big --json $store >"$WORK/status.json"
  python3 -c '
import json, sys
quota = json.load(open(sys.argv[1]))["buckets"][0]["quotas"][0]
assert quota["limit"] == 9007199254740991 and quota["used"] == 9007199254740991, quota' \
    "$WORK/status.json" || fail "status --json shows $(cat "$WORK/status.json") ($variant)"
  # shellcheck disable=SC2086
  "$RATELIMIT" reset --key big $store
done
