#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# A shared key keeps its timetable, in the state file and in Redis alike: a pipe that uses the key
# follows the timetable another command set, a second pipe with the same timetable shares the key
# without replacing anything, status shows the entry in force and the next one, and every user
# changes at the boundary. `set` gives a running pipe a timetable as well.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
seq 100000 >"$WORK/in"

# follow_key_timetable STORE_OPTION...: the story above, with the key in that store.
follow_key_timetable() {
  boundary_in 4
  local timetable="$before,5 $at,off" keyed alone second out err
  rm -f "$WORK"/out* "$WORK"/err*

  # Started with one rate, 5 lines a second: it would take hours.
  "$RATELIMIT" -l "$@" --key k --rate 5 --stats=json "$WORK/in" >"$WORK/out1" 2>"$WORK/err1" &
  keyed=$!
  # Started alone with one rate, 1 line a second, and no key.
  "$RATELIMIT" -l --rate 1 --stats=json "$WORK/in" >"$WORK/out3" 2>"$WORK/err3" &
  alone=$!
  wait_for_file "$WORK/state/pipe-$keyed.records"
  wait_for_file "$WORK/state/pipe-$alone.records"
  until "$RATELIMIT" status "$@" --key k >/dev/null 2>&1; do sleep 0.01; done

  expect_status 0 "$RATELIMIT" set "$@" --key k --rate "$timetable"
  expect_status 0 "$RATELIMIT" set "$alone" --rate "$timetable"
  grep -q "pipe $alone follows the timetable: 5 lines/s now (was 1 line/s)" \
    "$WORK/stderr" || fail "set PID with a timetable said: $(cat "$WORK/stderr")"
  "$RATELIMIT" -l "$@" --key k --rate "$timetable" --stats=json "$WORK/in" >"$WORK/out2" \
    2>"$WORK/err2" &
  second=$!

  "$RATELIMIT" status "$@" --key k >"$WORK/status"
  grep -Eq "^k +5 lines/s .* $before,5/s +$at,off in [0-9.]+s$" "$WORK/status" ||
    fail "status does not show the entry in force and the next one: $(cat "$WORK/status")"
  "$RATELIMIT" status "$@" --key k --json >"$WORK/status.json"
  grep -q "\"timetable_entry\":\"$before,5/s\",\"next_entry\":\"$at,off\",\"next_change_unix_time\":$boundary," \
    "$WORK/status.json" || fail "status --json: $(cat "$WORK/status.json")"

  wait "$keyed" "$alone" "$second"
  for out in out1 out2 out3; do cmp "$WORK/in" "$WORK/$out"; done
  grep -q "ratelimit: key 'k' follows timetable '[^']*' from now on" "$WORK/err1" ||
    fail "the first pipe did not take up the key's timetable: $(cat "$WORK/err1")"
  # The second pipe brought the key's own timetable: nothing replaced, nothing to take up.
  [ "$(grep -c "ratelimit: key" "$WORK/err2")" -eq 0 ] || fail "second pipe: $(cat "$WORK/err2")"
  for err in err1 err2 err3; do
    tail -n 1 "$WORK/$err" >"$WORK/stats"
    expect_change_at_boundary "$WORK/stats"
  done

  # A plain rate given to the key replaces its timetable; status shows none.
  expect_status 0 "$RATELIMIT" set "$@" --key k --rate 7
  "$RATELIMIT" status "$@" --key k >"$WORK/status"
  grep -q "TIMETABLE" "$WORK/status" && fail "a timetable left after a plain rate: $(cat "$WORK/status")"
  grep -Eq "^k +7 lines/s " "$WORK/status" || fail "status after set --key: $(cat "$WORK/status")"

  # exec and acquire with the key's own timetable say nothing; one with one rate follows the
  # timetable and says so.
  expect_status 0 "$RATELIMIT" acquire "$@" --key t --rate "$timetable"
  expect_status 0 "$RATELIMIT" acquire "$@" --key t --rate "$timetable"
  expect_stderr ""
  expect_status 0 "$RATELIMIT" exec "$@" --key t --rate 100 -- true
  grep -Eq "^ratelimit: key 't' has timetable '[^']*', burst 1s: this call follows it, not its own rate 100/s, burst 1s \(to make them the key's: ratelimit set --key t --rate 100\)$" \
    "$WORK/stderr" || fail "exec following a timetable said: $(cat "$WORK/stderr")"
  grep -q "$before,5" "$WORK/stderr" && grep -q "$at,off" "$WORK/stderr" ||
    fail "the key's timetable is not named: $(cat "$WORK/stderr")"
}

follow_key_timetable
start_redis store
follow_key_timetable --redis "unix://$WORK/store/sock"
