#!/usr/bin/env bash
# Live control says what happened: a pipe that cannot be controlled warns at start, `set` names
# the directory it looked in and confirms the old and the new rate, `status` finds the pipe's process id.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

mkdir "$WORK/unsafe"
chmod 777 "$WORK/unsafe"
out=$(echo hi | RATELIMIT_STATE_DIR=$WORK/unsafe "$RATELIMIT" --rate 1k 2>"$WORK/stderr")
[ "$out" = hi ] || fail "the pipe did not run"
grep -qx "ratelimit: warning: no control FIFO in $WORK/unsafe (missing or unsafe): 'ratelimit set [0-9]*' cannot change this pipe's rate" \
  "$WORK/stderr" || fail "no warning for an uncontrollable pipe: $(cat "$WORK/stderr")"

expect_status 66 "$RATELIMIT" set 999999 --rate 5
expect_stderr "ratelimit: no ratelimit pipe runs as process 999999 (no pipe-999999.bytes or .records in $WORK/state)"

sleep 5 | "$RATELIMIT" --rate 1k >/dev/null &
for _ in $(seq 100); do
  pid=$("$RATELIMIT" status | awk '$2 == "bytes" && $3 != "-" { print $1 }')
  [ -n "$pid" ] && break
  sleep 0.05
done
[ -n "$pid" ] || fail "status lists no running pipe"
expect_status 0 "$RATELIMIT" set "$pid" --rate 50MiB/s
expect_stderr "ratelimit: pipe $pid now at 50MiB/s (was 1kB/s)"
kill "$pid"
