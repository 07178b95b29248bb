#!/usr/bin/env bash
# --rate off is no limit wherever a rate is taken (issue 39), as in a timetable: a pipe, exec and
# acquire, on a key in the state file and in Redis, `set --key` and `set PID`. Before, "off" was
# refused outside timetables, and `set PID --rate off` said "no answer in 1s".
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
cd "$WORK"
random_file in 200000

# 200 kB at 1 byte a second, were the rate not off.
timeout 10 "$RATELIMIT" --rate OFF in -o out || fail "a pipe at --rate OFF"
cmp in out
start_redis main
for store in "--state-dir $WORK/state" "--redis unix://$WORK/main/sock"; do
  # shellcheck disable=SC2086 # the store's options, split
  timeout 10 "$RATELIMIT" --rate off --key pipe $store in -o out || fail "a keyed pipe at off ($store)"
  cmp in out
  for i in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    timeout 10 "$RATELIMIT" acquire --rate off --key calls --try $store ||
      fail "acquire $i at off was refused ($store)"
  done
  # shellcheck disable=SC2086
  [ "$(timeout 10 "$RATELIMIT" exec --rate off --key calls $store -- echo ran)" = ran ] ||
    fail "exec at off ($store)"
  # A key of 1/h: set off lets the next calls through at once.
  # shellcheck disable=SC2086
  "$RATELIMIT" acquire --rate 1/h --key slow $store 2>/dev/null
  # shellcheck disable=SC2086
  expect_status 0 "$RATELIMIT" set --key slow --rate off $store
  expect_stderr "ratelimit: key 'slow' now at off (was 1/h)"
  # shellcheck disable=SC2086
  "$RATELIMIT" status --key slow $store | grep -q "^slow  *off " ||
    fail "status after set off: $("$RATELIMIT" status --key slow $store)"
done

# A running pipe taken off its limit, and back on one.
mkfifo fifo
"$RATELIMIT" -l --rate 1/h <fifo >/dev/null 2>pipe.stderr &
pipe_pid=$!
exec 3>fifo
wait_for_file "$WORK/state/pipe-$pipe_pid.records"
expect_status 0 "$RATELIMIT" set "$pipe_pid" --rate off
expect_stderr "ratelimit: pipe $pipe_pid now at off (was 1 line/h)"
expect_status 0 "$RATELIMIT" set "$pipe_pid" --rate 5
expect_stderr "ratelimit: pipe $pipe_pid now at 5 lines/s (was off)"
exec 3>&-
wait "$pipe_pid" || fail "the pipe failed: $(cat pipe.stderr)"
