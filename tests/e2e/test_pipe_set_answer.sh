#!/usr/bin/env bash
# `set PID` reports what the pipe answers, not what its last periodic status said: sets in quick
# succession each name the rate the one before set, and `status` right after a set shows it.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

mkfifo "$WORK/in"
"$RATELIMIT" -l --rate 10 <"$WORK/in" >/dev/null 2>"$WORK/pipe.stderr" &
pipe_pid=$!
exec 3>"$WORK/in" # the pipe waits for input, its FIFO open
wait_for_file "$WORK/state/pipe-$pipe_pid.records"

previous=10
for rate in 20 30 40 50 60 70; do
  expect_status 0 "$RATELIMIT" set "$pipe_pid" --rate "$rate"
  expect_stderr "ratelimit: pipe $pipe_pid now at $rate lines/s (was $previous lines/s)"
  "$RATELIMIT" status --json >"$WORK/status"
  grep -q "\"pid\":$pipe_pid,[^}]*\"units_per_second\":$rate[,}]" "$WORK/status" ||
    fail "status right after 'set --rate $rate' shows: $(cat "$WORK/status")"
  previous=$rate
done

# A timetable: the entry in force as the pipe took it.
expect_status 0 "$RATELIMIT" set "$pipe_pid" --rate "00:00,5 12:00,5"
expect_stderr "ratelimit: pipe $pipe_pid follows the timetable: 5 lines/s now (was 70 lines/s)"

exec 3>&-
wait "$pipe_pid" || fail "the pipe failed: $(cat "$WORK/pipe.stderr")"
