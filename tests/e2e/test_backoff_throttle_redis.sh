#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# test_backoff_throttle.sh on a key kept in Redis, through the host agent (label threaded): a
# pause holds acquire, exec and pipes on the key until it ends, the rate in force is cut, status
# shows both, pauses do not add up, exec --throttled-status reports through the script; the hash
# gains a `backoff` field only once throttled. Waits are only checked from below, with generous
# upper bounds.
source "$E2E_LIB"
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
start=$(now_ns)
expect_status 0 "$RATELIMIT" throttle --key api --retry-after 2 -v
expect_stderr "ratelimit: key 'api' throttled: rate cut, rate in force 14/s, paused for 2s"
grep -q '^[0-9]* [0-9]* 20 1 [0-9]*$' <<<"$(field api backoff)" ||
  fail "the throttled key holds backoff '$(field api backoff)'"
# The key does not expire before its pause ends and its rate in force is back at 20/s: 5 s
# (kBackoffRecovery) after the pause.
ttl=$(redis-cli -s "$WORK/main/sock" PTTL "ratelimit:{api}")
[ "$ttl" -ge 6900 ] || fail "the paused key expires in $ttl ms, before its recovery ends"
expect_status 75 "$RATELIMIT" acquire --key api --rate 20/s --try
expect_status 75 "$RATELIMIT" exec --key api --rate 20/s --try -- true
status=$("$RATELIMIT" status --key api)
grep -q "^api: backing off: rate in force 1[4-9][.0-9]*/s of 20/s, paused for 1[.0-9]*s more, 1 throttle, the last [.0-9]*s ago$" <<<"$status" ||
  fail "status did not show the back-off: $status"
"$RATELIMIT" status --key api --json | grep -q '"backoff":{"permits_per_second_in_force":1[4-9][.0-9e-]*,"paused_for_seconds":1[.0-9e-]*,"throttles":1,"last_throttle_seconds_ago":[.0-9e-]*}' ||
  fail "status --json did not show the back-off: $("$RATELIMIT" status --key api --json)"
printf 'a\nb\n' | "$RATELIMIT" -l --rate 20/s --key api >"$WORK/piped"
ms=$(ms_since "$start")
[ "$ms" -ge 1950 ] && [ "$ms" -lt 6000 ] || fail "a pipe on the key ended ${ms} ms into a pause of 2 s"
[ "$(cat "$WORK/piped")" = "$(printf 'a\nb')" ] || fail "the pipe lost lines"

# -v on a caller says that it waited for the pause.
expect_status 0 "$RATELIMIT" throttle --key api --retry-after 1
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s -v
grep -q "^ratelimit: key 'api' is backing off: waited 0.[0-9]*s for its pause$" "$WORK/stderr" ||
  fail "acquire -v did not say it waited for the pause: $(cat "$WORK/stderr")"

# Pauses do not add up: two reports of 1 s are one pause, not 2 s.
expect_status 0 "$RATELIMIT" acquire --key sum --rate 20/s
start=$(now_ns)
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 1
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 1
expect_status 0 "$RATELIMIT" acquire --key sum --rate 20/s
ms=$(ms_since "$start")
[ "$ms" -ge 950 ] && [ "$ms" -lt 1900 ] || fail "two reports of Retry-After 1 held the key ${ms} ms, expected 1 s"
"$RATELIMIT" status --key sum | grep -q "^sum: backing off: .*, 2 throttles, " ||
  fail "status did not count two throttles: $("$RATELIMIT" status --key sum)"

# exec --throttled-status: the command's status 75 reports the throttle; --retry runs it again.
expect_status 0 "$RATELIMIT" acquire --key ex --rate 50/s
cat >"$WORK/flaky.sh" <<'SCRIPT'
#!/bin/sh
echo run >>"$1"
[ "$(wc -l <"$1")" -ge 3 ] && exit 0
exit 75
SCRIPT
chmod +x "$WORK/flaky.sh"
expect_status 0 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status 75 --retry 5 -- "$WORK/flaky.sh" "$WORK/runs"
[ "$(wc -l <"$WORK/runs")" -eq 3 ] || fail "--retry 5 ran the command $(wc -l <"$WORK/runs") times, expected 3"
"$RATELIMIT" status --key ex | grep -q "^ex: backing off: .*, 2 throttles, " ||
  fail "exec did not report its throttles: $("$RATELIMIT" status --key ex)"

# reset forgets the back-off with the bucket.
expect_status 0 "$RATELIMIT" reset --key api
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s
[ -z "$(field api backoff)" ] || fail "reset left backoff '$(field api backoff)'"

end_test
