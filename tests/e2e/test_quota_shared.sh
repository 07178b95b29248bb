#!/usr/bin/env bash
# --quota on a key in the state file: 8 processes x 200 acquires never exceed the quota in any
# window of its period, measured from the moments the store granted them (acquire -vv); a refused
# request takes nothing; status shows the quota; reset clears it. test_quota_redis.sh: the same
# in Redis.
# Timing: grants measured as they come (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/quota_shared.sh"
state=(--state-dir "$WORK/state")

expect_status 64 "$RATELIMIT" acquire --quota 3/h --permits 4 --key q "${state[@]}"
expect_stderr "ratelimit: --permits 4 is more than quota '3/h' ever allows"

expect_quota_rules "${state[@]}"

# 8 processes x 200 acquires at 50 in any 2 s: about 64 s.
acquire_in_parallel state_file 8 200 --quota 50/2s --key q "${state[@]}"
expect_quota_kept state_file 50 2 1600
