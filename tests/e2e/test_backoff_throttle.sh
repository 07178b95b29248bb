#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# `ratelimit throttle` and `exec --throttled-status` on the state file: a pause holds acquire,
# exec and pipes on the key until it ends, the rate in force is cut, status shows both; bad
# values are one line and exit 64, a key without a bucket 66. Waits are only checked from below
# (a wait cannot be shorter on a busy machine), with generous upper bounds.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# Bad values: one line naming the value, 64; no bucket to back off: 66.
expect_error "ratelimit: --retry-after: invalid Retry-After 'soon': seconds (30) or an HTTP date (Wed, 21 Oct 2026 07:28:00 GMT)" \
  "$RATELIMIT" throttle --key api --retry-after soon
expect_error "ratelimit: --retry-after: invalid Retry-After 'Sunday, 06-Nov-94 25:49:37 GMT': seconds (30) or an HTTP date (Wed, 21 Oct 2026 07:28:00 GMT)" \
  "$RATELIMIT" throttle --key api --retry-after 'Sunday, 06-Nov-94 25:49:37 GMT'
expect_error "ratelimit: --retry-after: invalid Retry-After 'Sun Nov 31 08:49:37 1994': seconds (30) or an HTTP date (Wed, 21 Oct 2026 07:28:00 GMT)" \
  "$RATELIMIT" throttle --key api --retry-after 'Sun Nov 31 08:49:37 1994'
expect_status 66 "$RATELIMIT" throttle --key api --retry-after 1
expect_stderr "ratelimit: no bucket 'api' in $WORK/state"
expect_error "ratelimit: --retry requires --throttled-status" \
  "$RATELIMIT" exec --key api --rate 1/s --retry 2 -- true

# A key never throttled writes the record it wrote before (version 8).
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s
version=$(od -An -tu4 -j8 -N4 "$WORK/state/api.bucket" | tr -d ' ')
[ "$version" = 8 ] || fail "a key never throttled was written as version $version, expected 8"

# A throttle with Retry-After 2: nothing is granted on the key for 2 s, pipes included.
start=$(now_ns)
expect_status 0 "$RATELIMIT" throttle --key api --retry-after 2 -v
expect_stderr "ratelimit: key 'api' throttled: rate cut, rate in force 14/s, paused for 2s"
version=$(od -An -tu4 -j8 -N4 "$WORK/state/api.bucket" | tr -d ' ')
[ "$version" = 9 ] || fail "a throttled key was written as version $version, expected 9"
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
# Once the pause has ended, -v says nothing of it.
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s -v
expect_stderr ""

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

# An HTTP date, in each of its three forms: a date already past holds nothing.
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 'Sun, 06 Nov 1994 08:49:37 GMT'
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 'Sunday, 06-Nov-94 08:49:37 GMT'
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 'Sun Nov  6 08:49:37 1994'
expect_status 0 "$RATELIMIT" acquire --key sum --rate 20/s --timeout 500ms

# exec --throttled-status: the command's status 75 reports the throttle; --retry runs it again
# and exec exits with its last status.
expect_status 0 "$RATELIMIT" acquire --key ex --rate 50/s
cat >"$WORK/flaky.sh" <<'SCRIPT'
#!/bin/sh
echo run >>"$1"
[ "$(wc -l <"$1")" -ge 3 ] && exit 0
exit 75
SCRIPT
chmod +x "$WORK/flaky.sh"
expect_status 0 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status 75,76 --retry 5 -- "$WORK/flaky.sh" "$WORK/runs"
[ "$(wc -l <"$WORK/runs")" -eq 3 ] || fail "--retry 5 ran the command $(wc -l <"$WORK/runs") times, expected 3"
"$RATELIMIT" status --key ex | grep -q "^ex: backing off: .*, 2 throttles, " ||
  fail "exec did not report its throttles: $("$RATELIMIT" status --key ex)"
rm "$WORK/runs"
expect_status 75 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status 75 --retry 1 -- "$WORK/flaky.sh" "$WORK/runs"
[ "$(wc -l <"$WORK/runs")" -eq 2 ] || fail "--retry 1 ran the command $(wc -l <"$WORK/runs") times, expected 2"
expect_status 3 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status 75 -- sh -c 'exit 3'

end_test
