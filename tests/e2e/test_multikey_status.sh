#!/usr/bin/env bash
# `status` lists an exec or acquire call of several keys on the state file while it waits for its
# turn, naming the key that holds it (multikey_status_shared.sh); test_multikey_status_redis.sh:
# the same in Redis.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/multikey_status_shared.sh"

expect_waiting_calls_in_status "$WORK/state" --state-dir "$WORK/state"
expect_slot_and_pause_waits_in_status "$WORK/state" --state-dir "$WORK/state"
