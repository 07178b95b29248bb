#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# test_backoff_throttle.sh on a key kept in Redis, through the host agent (label threaded): a
# pause holds acquire, exec and pipes on the key until it ends, the rate in force is cut, status
# shows both, pauses do not add up, exec --throttled-status reports through the script; the hash
# gains a `backoff` field only once throttled. Waits are only checked from below, with generous
# upper bounds.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/backoff_throttle.sh"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
export RATELIMIT_REDIS=unix://$WORK/main/sock
field() { redis-cli -s "$WORK/main/sock" HGET "ratelimit:{$1}" "$2"; }

# No bucket to back off: 66.
expect_status 66 "$RATELIMIT" throttle --key api --retry-after 1

# A key never throttled has no `backoff` field.
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s
[ -z "$(field api backoff)" ] || fail "a key never throttled holds backoff '$(field api backoff)'"

# A throttle with Retry-After 2: nothing is granted on the key for 2 s, pipes included.
throttle_api_for_two_seconds
grep -q '^[0-9]* [0-9]* 20 1 [0-9]*$' <<<"$(field api backoff)" ||
  fail "the throttled key holds backoff '$(field api backoff)'"
# The key does not expire before its pause ends and its rate in force is back at 20/s: 5 s
# (kBackoffRecovery) after the pause.
ttl=$(redis-cli -s "$WORK/main/sock" PTTL "ratelimit:{api}")
[ "$ttl" -ge 6900 ] || fail "the paused key expires in $ttl ms, before its recovery ends"
expect_the_pause_to_hold_api

# -v on a caller says that it waited for the pause.
expect_v_to_say_it_waited

# Pauses do not add up: two reports of 1 s are one pause, not 2 s.
expect_pauses_not_to_add_up
"$RATELIMIT" status --key sum | grep -q "^sum: backing off: .*, 2 throttles, " ||
  fail "status did not count two throttles: $("$RATELIMIT" status --key sum)"

# exec --throttled-status: the command's status 75 reports the throttle; --retry runs it again.
expect_exec_to_report_and_retry 75

# reset forgets the back-off with the bucket.
expect_status 0 "$RATELIMIT" reset --key api
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s
[ -z "$(field api backoff)" ] || fail "reset left backoff '$(field api backoff)'"

end_test
