# Sourced by test_backoff_throttle.sh and test_backoff_throttle_redis.sh: the checks of
# `ratelimit throttle` and `exec --throttled-status` they share, on whichever store the test
# chose (RATELIMIT_STATE_DIR or RATELIMIT_REDIS). Waits are only checked from below (a wait
# cannot be shorter on a busy machine), with generous upper bounds.

# throttle_api_for_two_seconds: key api (20/s) reports a throttle with Retry-After 2; $start is the
# moment just before.
throttle_api_for_two_seconds() {
  start=$(now_ns)
  expect_status 0 "$RATELIMIT" throttle --key api --retry-after 2 -v
  expect_stderr "ratelimit: key 'api' throttled: rate cut, rate in force 10/s, paused for 2s"
}

# expect_the_pause_to_hold_api: during that pause nothing is granted on key api, pipes included,
# and status (text and JSON) shows the back-off; a pipe ends once the pause has.
expect_the_pause_to_hold_api() {
  local status ms
  expect_status 75 "$RATELIMIT" acquire --key api --rate 20/s --try
  expect_status 75 "$RATELIMIT" exec --key api --rate 20/s --try -- true
  status=$("$RATELIMIT" status --key api)
  grep -q "^api: backing off: rate in force 10/s of 20/s, paused for 1[.0-9]*s more, 1 throttle, the last [.0-9]*s ago$" <<<"$status" ||
    fail "status did not show the back-off: $status"
  "$RATELIMIT" status --key api --json | grep -q '"backoff":{"permits_per_second_in_force":10,"paused_for_seconds":1[.0-9e-]*,"throttles":1,"last_throttle_seconds_ago":[.0-9e-]*}' ||
    fail "status --json did not show the back-off: $("$RATELIMIT" status --key api --json)"
  printf 'a\nb\n' | "$RATELIMIT" -l --rate 20/s --key api >"$WORK/piped"
  ms=$(ms_since "$start")
  [ "$ms" -ge 1950 ] && [ "$ms" -lt 6000 ] || fail "a pipe on the key ended ${ms} ms into a pause of 2 s"
  [ "$(cat "$WORK/piped")" = "$(printf 'a\nb')" ] || fail "the pipe lost lines"
}

# expect_v_to_say_it_waited: -v on a caller says that it waited for the pause.
expect_v_to_say_it_waited() {
  expect_status 0 "$RATELIMIT" throttle --key api --retry-after 1
  expect_status 0 "$RATELIMIT" acquire --key api --rate 20/s -v
  grep -q "^ratelimit: key 'api' is backing off: waited 0.[0-9]*s for its pause$" "$WORK/stderr" ||
    fail "acquire -v did not say it waited for the pause: $(cat "$WORK/stderr")"
}

# expect_pauses_not_to_add_up: two reports of 1 s on key sum are one pause, not 2 s.
expect_pauses_not_to_add_up() {
  local start ms
  expect_status 0 "$RATELIMIT" acquire --key sum --rate 20/s
  start=$(now_ns)
  expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 1
  expect_status 0 "$RATELIMIT" throttle --key sum --retry-after 1
  expect_status 0 "$RATELIMIT" acquire --key sum --rate 20/s
  ms=$(ms_since "$start")
  [ "$ms" -ge 950 ] && [ "$ms" -lt 1900 ] || fail "two reports of Retry-After 1 held the key ${ms} ms, expected 1 s"
}

# expect_exec_to_report_and_retry STATUSES: with --throttled-status STATUSES (75 among them), the
# command's status 75 reports the throttle on key ex, and --retry runs it again; $WORK/flaky.sh
# (exit 75 until its third run) and $WORK/runs are left for more checks.
expect_exec_to_report_and_retry() {
  expect_status 0 "$RATELIMIT" acquire --key ex --rate 50/s
  cat >"$WORK/flaky.sh" <<'SCRIPT'
#!/bin/sh
echo run >>"$1"
[ "$(wc -l <"$1")" -ge 3 ] && exit 0
exit 75
SCRIPT
  chmod +x "$WORK/flaky.sh"
  expect_status 0 "$RATELIMIT" exec --key ex --rate 50/s --throttled-status "$1" --retry 5 -- "$WORK/flaky.sh" "$WORK/runs"
  [ "$(wc -l <"$WORK/runs")" -eq 3 ] || fail "--retry 5 ran the command $(wc -l <"$WORK/runs") times, expected 3"
  "$RATELIMIT" status --key ex | grep -q "^ex: backing off: .*, 2 throttles, " ||
    fail "exec did not report its throttles: $("$RATELIMIT" status --key ex)"
}
