#!/usr/bin/env bash
# Pipes with several keys in Redis, as on the state file (test_multikey_pipe.sh): one script call
# over all the keys per booking, through the host agent and with --no-agent, each on a Redis of
# its own.
# Timing: loose bounds on two pipes at once (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
source "$(dirname "${BASH_SOURCE[0]}")/multikey_pipe_shared.sh"

for path in agent no-agent; do
  start_redis "$path"
  store=(--redis "unix://$WORK/$path/sock" --redis-timeout 5s)
  [ "$path" = agent ] || store+=(--no-agent)
  expect_pipe_refusal_takes_nothing "${store[@]}"
  expect_pipes_share_a_fleet_key "${store[@]}"
  expect_pipe_stats_name_each_keys_quotas "${store[@]}"
  expect_pipe_chunks_follow_the_slowest_key "${store[@]}"
  expect_pipe_follows_each_keys_timetable "${store[@]}"
done
