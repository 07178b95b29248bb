#!/usr/bin/env bash
# A file is read ahead in large reads; a stop signal (SIGTERM) writes no more than what is due
# and puts back the rest of what was read (the file's offset moves back), so the next reader of
# the same open file continues where the output ended.
source "$E2E_LIB"

random_file "$WORK/in" 100000

# stopped_by SIGNAL EXIT OUTPUT: the file shaped at 20 kB/s into OUTPUT, stopped by SIGNAL after
# 0.3 s; it must exit EXIT and leave the rest of the file, from where OUTPUT ends, to the next
# reader of the same open file ($WORK/rest).
stopped_by() {
  local signal=$1 expected=$2 output=$3 status=0
  {
    env --default-signal="$signal" "$RATELIMIT" --rate 20k -o "$output" &
    local pipe=$!
    sleep 0.3
    kill -"$signal" "$pipe"
    wait "$pipe" || status=$?
    cat >"$WORK/rest"
  } <"$WORK/in"
  [ "$status" -eq "$expected" ] || fail "SIG$signal: exit $status, expected $expected"
  cat "$output" "$WORK/rest" | cmp -s "$WORK/in" - ||
    fail "the rest of the file after SIG$signal is not where the output ended"
}

stopped_by TERM 143 "$WORK/shaped"
# About 0.3 s of 20 kB/s and a second's burst at most, not the 100 kB read ahead.
shaped=$(wc -c <"$WORK/shaped")
[ "$shaped" -lt 40000 ] || fail "the stop wrote $shaped bytes: what was read ahead went out"

# SIGKILL cannot be caught, so nothing is put back then: the offset the next reader shares must
# never have moved past what was written. Lines at 2000/s for 1 s: the rest of the file is the
# next reader's, a chunk at most read twice (the one under way when the kill came).
seq 40000 >"$WORK/lines"
{
  "$RATELIMIT" -l --rate 2000 -o "$WORK/killed" &
  pipe=$!
  sleep 1
  kill -KILL "$pipe"
  wait "$pipe" 2>/dev/null || true # no "Killed" notice
  cat >"$WORK/after_kill"
} <"$WORK/lines"
written=$(wc -l <"$WORK/killed")
[ "$written" -gt 0 ] && [ "$written" -lt 40000 ] || fail "SIGKILL after 1 s: $written lines written"
first_after=$(head -n 1 "$WORK/after_kill")
last_written=$(tail -n 1 "$WORK/killed")
# Lines written then read again: at most one chunk's (at 2000/s: well under 1000 lines).
[ -n "$first_after" ] && [ "$first_after" -le $((last_written + 1)) ] &&
  [ "$first_after" -gt $((last_written - 1000)) ] ||
  fail "after SIGKILL the next reader starts at line '$first_after', the output ended at $last_written"
tail -n 1 "$WORK/after_kill" | grep -qx 40000 || fail "the next reader did not get the file's end"

# SIGQUIT is a stop signal as SIGTERM: 131, and what was read ahead goes back.
stopped_by QUIT 131 "$WORK/quit"
