#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# test_backoff_http.sh over Redis, as the issue's fleet: 3 hosts (3 state directories, an agent
# each) x 2 loops of curl on one key kept in one Redis, against the service of 8/s (burst 8) that
# answers 429 with Retry-After: 1; the key at 20/s. After the first 5 s of a 15 s run, fewer than
# 10 % of the requests get 429; a single Retry-After of 3 s holds every host.
source "$E2E_LIB"
source "$(dirname "$0")/redis_server.sh"
source "$(dirname "$0")/backoff_http.sh"
trap 'stop_service; stop_agents_and_redis' EXIT
start_redis main
export RATELIMIT_REDIS=unix://$WORK/main/sock

# run_hosts SECONDS: 2 curl loops on key api from each of 3 hosts at once.
run_hosts() {
  local host pids=() pid
  for host in 1 2 3; do
    (RATELIMIT_STATE_DIR=$WORK/host$host run_loops 2 "$1" api --rate 20/s) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || fail "a host's curl loops failed"; done
}

start_service 8 8 1 3
run_hosts 15
stop_service
expect_few_429s_after_5s

# A single long Retry-After, 2 s into a run: from its report on, no host sends a request until it
# ends.
"$RATELIMIT" reset --key api
start_service 8 8 1 3
( sleep 2 && kill -USR2 "$service_pid" ) &
run_hosts 8
stop_service
expect_nothing_during_the_long_retry_after
