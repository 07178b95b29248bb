#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# `ratelimit throttle` and `exec --throttled-status` on the state file: a pause holds acquire,
# exec and pipes on the key until it ends, the rate in force is cut, status shows both; bad
# values are one line and exit 64, a key without a bucket 66. Waits are only checked from below
# (a wait cannot be shorter on a busy machine), with generous upper bounds.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/backoff_throttle.sh"
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
throttle_api_for_two_seconds
version=$(od -An -tu4 -j8 -N4 "$WORK/state/api.bucket" | tr -d ' ')
[ "$version" = 9 ] || fail "a throttled key was written as version $version, expected 9"
expect_the_pause_to_hold_api
# Once the pause has ended, -v says nothing of it.
expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s -v
expect_stderr ""

# -v on a caller says that it waited for the pause.
expect_v_to_say_it_waited

# Pauses do not add up: two reports of 1 s are one pause, not 2 s.
expect_pauses_not_to_add_up

# An HTTP date, in each of its three forms: a date already past holds nothing.
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 'Sun, 06 Nov 1994 08:49:37 GMT'
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 'Sunday, 06-Nov-94 08:49:37 GMT'
expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 'Sun Nov  6 08:49:37 1994'
expect_status 0 "$RATELIMIT" acquire --key sum --rate 20/s --timeout 500ms

# exec --throttled-status: the command's status 75 reports the throttle; --retry runs it again
# and exec exits with its last status.
expect_exec_to_report_and_retry 75,76
rm "$WORK/runs"
expect_status 75 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status 75 --retry 1 -- "$WORK/flaky.sh" "$WORK/runs"
[ "$(wc -l <"$WORK/runs")" -eq 2 ] || fail "--retry 1 ran the command $(wc -l <"$WORK/runs") times, expected 2"
expect_status 3 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status 75 -- sh -c 'exit 3'

end_test
