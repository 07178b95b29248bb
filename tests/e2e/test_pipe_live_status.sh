#!/usr/bin/env bash
# What `status` and `set` say of a running pipe: its rate in force and the units it moved so far,
# growing while it runs; `set` confirms the old rate and the new one; a pipe killed with SIGKILL
# (no chance to tidy up) is no longer listed, in text or JSON, and `set` says it is gone.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# units_listed SECONDS PID RATE [ABOVE]: the units column of pipe PID in `status` once it shows
# RATE (and more than ABOVE units), polled for up to SECONDS; empty if it never does.
units_listed() {
  local units tries
  for ((tries = 0; tries < $1 * 20; tries++)); do
    units=$("$RATELIMIT" status | awk -v pid="$2" -v rate="$3" '$1 == pid && $2 == "lines" && $3 == rate { print $4 }')
    [ -n "$units" ] && [ "$units" -gt "${4:--1}" ] && { echo "$units"; return; }
    sleep 0.05
  done
}

yes | "$RATELIMIT" --lines --rate 200/s >/dev/null &
pid=$!
first=$(units_listed 10 "$pid" 200/s)
[ -n "$first" ] || fail "the pipe is not listed at 200/s: $("$RATELIMIT" status)"
# Published about once a second: the count grows within a few.
later=$(units_listed 5 "$pid" 200/s "$first")
[ -n "$later" ] || fail "the unit count does not grow from $first: $("$RATELIMIT" status)"
# Lines of "y\n": two bytes each, as said.
"$RATELIMIT" status | awk -v pid="$pid" '$1 == pid && $5 >= 2 * $4 && $5 <= 2 * $4 + 2 { found = 1 } END { exit !found }' ||
  fail "bytes do not match the lines: $("$RATELIMIT" status)"

expect_status 0 "$RATELIMIT" set "$pid" --rate 20/s
expect_stderr "ratelimit: pipe $pid now at 20 lines/s (was 200 lines/s)"
[ -n "$(units_listed 5 "$pid" 20/s)" ] || fail "status does not show the new rate: $("$RATELIMIT" status)"
expect_status 0 "$RATELIMIT" set "$pid" --rate 1k/s
expect_stderr "ratelimit: pipe $pid now at 1k lines/s (was 20 lines/s)"

kill -9 "$pid"
wait "$pid" 2>/dev/null || true
[ -p "$RATELIMIT_STATE_DIR/pipe-$pid.records" ] || fail "test premise: SIGKILL left the FIFO"
[ -f "$RATELIMIT_STATE_DIR/pipe-$pid.status" ] || fail "test premise: SIGKILL left the status"
"$RATELIMIT" status >"$WORK/status"
[ "$(cat "$WORK/status")" = "no pipes or keys" ] ||
  fail "a killed pipe is listed: $(cat "$WORK/status")"
"$RATELIMIT" status --json | grep -Fq '"pipes":[]' || fail "a killed pipe is in the JSON: $("$RATELIMIT" status --json)"
expect_status 66 "$RATELIMIT" set "$pid" --rate 5
expect_stderr "ratelimit: no ratelimit pipe runs as process $pid (no pipe-$pid.bytes or .records in $WORK/state)"

# The next pipe tidies up what the killed one left.
echo hi | "$RATELIMIT" --rate 1k >/dev/null
[ ! -e "$RATELIMIT_STATE_DIR/pipe-$pid.records" ] && [ ! -e "$RATELIMIT_STATE_DIR/pipe-$pid.status" ] ||
  fail "the killed pipe's files are left: $(ls "$RATELIMIT_STATE_DIR")"
