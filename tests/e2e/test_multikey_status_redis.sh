#!/usr/bin/env bash
# `status` lists an exec or acquire call of several keys in Redis, through the host agent, while
# it waits for its turn, as on the state file (test_multikey_status.sh): the record is kept in the
# state directory, whatever the store.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
source "$(dirname "${BASH_SOURCE[0]}")/multikey_status_shared.sh"
start_redis main

expect_waiting_calls_in_status "$RATELIMIT_STATE_DIR" --redis "unix://$WORK/main/sock" --redis-timeout 5s
expect_slot_and_pause_waits_in_status "$RATELIMIT_STATE_DIR" --redis "unix://$WORK/main/sock" --redis-timeout 5s
