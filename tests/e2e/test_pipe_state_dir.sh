#!/usr/bin/env bash
# A pipe started with --state-dir keeps its control FIFO and status there: `status --state-dir`
# lists it and `set PID --state-dir` reaches it, whatever $RATELIMIT_STATE_DIR says; without the
# option `set` looks in the environment's directory and finds no such pipe.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/from-environment
given=$WORK/given

# listed_rate SECONDS PID: the rate column of pipe PID in `status --state-dir $given`, polled.
listed_rate() {
  local rate tries
  for ((tries = 0; tries < $1 * 20; tries++)); do
    rate=$("$RATELIMIT" status --state-dir "$given" | awk -v pid="$2" '$1 == pid && $2 == "lines" { print $3 }')
    [ -n "$rate" ] && { echo "$rate"; return; }
    sleep 0.05
  done
}

yes | "$RATELIMIT" --lines --rate 200/s --state-dir "$given" >/dev/null &
pid=$!
# A failed check must not leave the pipe running.
trap 'kill "$pid" 2>/dev/null; rm -rf "$WORK"' EXIT
[ "$(listed_rate 10 "$pid")" = 200/s ] ||
  fail "status --state-dir does not list the pipe: $("$RATELIMIT" status --state-dir "$given")"
[ -p "$given/pipe-$pid.records" ] || fail "no FIFO in --state-dir: $(ls -A "$given")"
[ ! -e "$RATELIMIT_STATE_DIR/pipe-$pid.records" ] || fail "the FIFO is in \$RATELIMIT_STATE_DIR"
"$RATELIMIT" status | awk -v pid="$pid" '$1 == pid { found = 1 } END { exit found }' ||
  fail "status without --state-dir lists the pipe: $("$RATELIMIT" status)"

expect_status 0 "$RATELIMIT" set "$pid" --state-dir "$given" --rate 20/s
expect_stderr "ratelimit: pipe $pid now at 20 lines/s (was 200 lines/s)"
expect_status 66 "$RATELIMIT" set "$pid" --rate 30/s
expect_stderr "ratelimit: no ratelimit pipe runs as process $pid (no pipe-$pid.bytes or .records in $RATELIMIT_STATE_DIR)"

