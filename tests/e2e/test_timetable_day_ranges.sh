#!/usr/bin/env bash
# A timetable's entry may name a range of days (issue 39), `Mon-Fri-09:00,1M`, and status shows it
# as written; a day range that does not parse names its entry. Before, "Mon-Sun-00:00" was an
# unknown day.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# Every day from Monday to Sunday at 00:00: the entry in force whatever the day.
expect_status 0 "$RATELIMIT" acquire --rate "Mon-Sun-00:00,5/s" --key days
"$RATELIMIT" status --key days >"$WORK/status"
grep -q " Mon-Sun-00:00,5/s " "$WORK/status" || fail "status: $(cat "$WORK/status")"
"$RATELIMIT" status --key days --json | grep -q '"timetable":"Mon-Sun-00:00,5"' ||
  fail "status --json: $("$RATELIMIT" status --key days --json)"
# A pipe follows it too.
[ "$(seq 3 | "$RATELIMIT" -l --rate "sat-friday-00:00,1k")" = "$(seq 3)" ] || fail "a pipe on a day range"
expect_error "ratelimit: --rate: invalid timetable entry 'Mon-Fun-09:00,1M': unknown day 'Fun' (Mon..Sun, or the full name)" \
  "$RATELIMIT" --rate "Mon-Fun-09:00,1M"
