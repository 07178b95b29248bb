#!/usr/bin/env bash
# --quota on a key kept in Redis, as in the state file (test_quota_shared.sh): a refused request
# takes nothing, status shows the quota, another caller's replaces it, reset clears it, a pipe's
# bytes count; 8 processes x 200 acquires never exceed the quota in any window of its period,
# measured from the moments the store granted them (acquire -vv), on the wall clock by which
# Redis decides (a step of it while they run, NTP's or a virtual machine's, moves Redis's windows
# and not the monotonic clock's).
# Timing: grants measured as they come (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
source "$(dirname "${BASH_SOURCE[0]}")/quota_shared.sh"
start_redis main
redis=(--redis "unix://$WORK/main/sock")

expect_quota_rules "${redis[@]}"

# A pipe's bytes count against the key's quota in Redis as in the state file, byte-exact: a file
# that fills the quota exactly, booked no further than it holds.
random_file "$WORK/input" 100
for store in "${redis[*]}" "--state-dir $WORK/state"; do
  # shellcheck disable=SC2086 # the store's options, split
  timeout 20 "$RATELIMIT" --quota 100/h --key pipe $store "$WORK/input" -o "$WORK/output"
  cmp "$WORK/input" "$WORK/output" || fail "the pipe did not copy its input ($store)"
  # shellcheck disable=SC2086
  "$RATELIMIT" status --key pipe --json $store >"$WORK/pipe.json"
  python3 -c '
import json, sys
quota = json.load(open(sys.argv[1]))["buckets"][0]["quotas"][0]
assert quota["limit"] == 100 and quota["used"] == 100, quota
print(quota["used"])' "$WORK/pipe.json" >>"$WORK/pipe_used" ||
    fail "status --json shows: $(cat "$WORK/pipe.json")"
done
[ "$(sort -u "$WORK/pipe_used" | wc -l)" -eq 1 ] ||
  fail "the stores counted the pipe differently: $(cat "$WORK/pipe_used")"

# 8 processes x 200 acquires at 50 in any 2 s: about 64 s.
# A reply later than the default 1 s (a loaded machine) would be a failed call, and the count
# below expects every call granted.
acquire_in_parallel redis 8 200 --quota 50/2s --key q --redis-timeout 5s "${redis[@]}"
expect_quota_kept redis 50 2 1600 wall
