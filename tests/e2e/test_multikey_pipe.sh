#!/usr/bin/env bash
# Pipes with several keys on the state file: each chunk booked on every key at once, the longest
# wait of any key; a refused turn takes nothing from any key; `status` and --stats name the key
# that held the pipe. test_multikey_pipe_redis.sh: the same in Redis.
# Timing: loose bounds on two pipes at once (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/multikey_pipe_shared.sh"
store=(--state-dir "$WORK/state")

expect_pipe_key_rules "${store[@]}"
expect_pipe_refusal_takes_nothing "${store[@]}"
expect_pipes_share_a_fleet_key "${store[@]}"
expect_pipe_stats_name_each_keys_quotas "${store[@]}"
expect_pipe_chunks_follow_the_slowest_key "${store[@]}"
expect_pipe_follows_each_keys_timetable "${store[@]}"
