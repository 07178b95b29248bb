#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# A timetable switches the rate at its wall-clock time (within 100 ms), in local time as TZ says.
source "$E2E_LIB"

boundary_in 3

# A line every 2 s until the boundary, then no limit: the change must not wait for a line.
seq 200000 >"$WORK/in"
"$RATELIMIT" -l --rate "$before,30/m $at,off" --stats=json "$WORK/in" >"$WORK/out" 2>"$WORK/stats"
cmp "$WORK/in" "$WORK/out"
grep -q '"rate":null,"rate_text":"off","average_above_rate":false,"ending":"end_of_input","rate_changes":\[{"unix_time":[0-9.]*,"rate":null,"rate_text":"off"}\]' \
  "$WORK/stats" || fail "not one change to no limit in $(cat "$WORK/stats")"
expect_change_at_boundary "$WORK/stats"

# The progress line and the text summary follow a timetable too.
seq 100 | "$RATELIMIT" -l --rate "$before,1k $at,off" --progress=force --stats >/dev/null 2>"$WORK/stderr" ||
  fail "--progress with a timetable: $(cat "$WORK/stderr")"

# Entries in the wrong shape are refused with the entry named.
expect_status 64 "$RATELIMIT" -l --rate "$before,20 25:00,off" "$WORK/in"
expect_stderr "ratelimit: --rate: invalid timetable entry '25:00,off': the hour must be from 0 to 23"
expect_status 64 "$RATELIMIT" -l --rate "$before,20kB" "$WORK/in"
expect_stderr "ratelimit: invalid timetable entry '$before,20kB': rate '20kB' is in bytes or bits, but this command counts lines: write it without B/bit"

# A timetable is at most 4000 bytes as a key keeps it; the error does not repeat all of it.
long=$(for hour in $(seq -w 0 23); do for minute in 00 05 10 15 20 25 30 35 40 45 50 55; do
  printf '%s:%s,1.23456789k ' "$hour" "$minute"
done; done)
expect_status 64 "$RATELIMIT" -l --rate "$long" "$WORK/in"
expect_stderr "ratelimit: --rate: invalid timetable of 288 entries: too long (7199 bytes as a key keeps it, at most 4000)"
