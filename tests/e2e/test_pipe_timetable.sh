#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# A timetable switches the rate at its wall-clock time (within 100 ms), in local time as TZ says.
# Entries are whole minutes; a zone whose offset has seconds (POSIX TZ "RLT-0:00:SS") puts a minute
# boundary a few seconds ahead, so the test takes seconds, not a minute.
source "$E2E_LIB"

# A boundary 3 s from now on the Unix clock, and the zone in which it is a whole minute.
boundary=$(($(date +%s) + 3))
offset=$(((60 - boundary % 60) % 60))
export TZ="RLT-0:00:$(printf %02d "$offset")"
before=$(date -d "@$((boundary - 60))" +%H:%M)
at=$(date -d "@$boundary" +%H:%M)
[ "$(date -d "@$boundary" +%S)" = 00 ] || fail "the test's zone $TZ does not put $at on a whole minute"

# A line every 2 s until the boundary, then no limit: the change must not wait for a line.
seq 200000 >"$WORK/in"
"$RATELIMIT" -l --rate "$before,30/m $at,off" --stats=json "$WORK/in" >"$WORK/out" 2>"$WORK/stats"
cmp "$WORK/in" "$WORK/out"
grep -q '"rate":null,"ending":"end_of_input","rate_changes":\[{"unix_time":' "$WORK/stats" ||
  fail "no change to no limit in $(cat "$WORK/stats")"
changed=$(sed 's/.*"rate_changes":\[{"unix_time":\([0-9.]*\),.*/\1/' "$WORK/stats")
late_ms=$(awk -v changed="$changed" -v boundary="$boundary" \
  'BEGIN { printf "%d", (changed - boundary) * 1000 }')
[ "$late_ms" -ge 0 ] && [ "$late_ms" -le 100 ] ||
  fail "the rate changed ${late_ms} ms after the boundary $at ($TZ), expected 0..100 ms"

# The progress line and the text summary follow a timetable too.
seq 100 | "$RATELIMIT" -l --rate "$before,1k $at,off" --progress=force --stats >/dev/null 2>"$WORK/stderr" ||
  fail "--progress with a timetable: $(cat "$WORK/stderr")"

# Entries in the wrong shape are refused with the entry named.
expect_status 64 "$RATELIMIT" -l --rate "$before,20 25:00,off" "$WORK/in"
expect_stderr "ratelimit: --rate: invalid timetable entry '25:00,off': the hour must be from 0 to 23"
expect_status 64 "$RATELIMIT" -l --rate "$before,20kB" "$WORK/in"
expect_stderr "ratelimit: invalid timetable entry '$before,20kB': rate '20kB' is in bytes or bits, but this command counts units: write it without B/bit"

# A running pipe takes one new rate, not a timetable.
expect_status 64 "$RATELIMIT" set $$ --rate "$before,20 $at,off"
expect_stderr "ratelimit: set takes one rate, not a timetable ('$before,20 $at,off'): a timetable is given to the pipe, exec or acquire that follows it"
