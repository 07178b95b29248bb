#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# Backing off together against a real HTTP service on loopback: a hidden bucket of 8/s (burst 8)
# answers 429 with Retry-After: 1 beyond it; the key is configured at 20/s; 6 loops of curl on
# one state directory report their 429s (ratelimit throttle). After the first 5 s of a 15 s run,
# fewer than 10 % of the requests get 429 (without back-off about 60 % do: 20/s against 8/s).
# Then a single Retry-After of 3 s: from its report on, no request is sent until it ends, not
# even on the turns that loops had booked before the 429 (0.1 s of grace after the report, for a
# request whose permit came just before it). Without voiding booked turns, requests arrive 0.13,
# 0.2, 0.28 and 0.34 s after the 429.
source "$E2E_LIB"
source "$(dirname "$0")/backoff_http.sh"
export RATELIMIT_STATE_DIR=$WORK/state
trap 'stop_service; rm -rf "$WORK"' EXIT

start_service 8 8 1 3
run_loops 6 15 api --rate 20/s
stop_service
expect_few_429s_after_5s

# A single long Retry-After, 2 s into a run: nothing reaches the service until it ends.
"$RATELIMIT" reset --key api
start_service 8 8 1 3
( sleep 2 && kill -USR2 "$service_pid" ) &
run_loops 6 8 api --rate 20/s
stop_service
expect_nothing_during_the_long_retry_after
