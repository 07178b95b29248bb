#!/usr/bin/env bash
# Rates are shown as they were written (issue 27): a pipe's period (1/10s, not 6/m), a burst in
# units (5, not 1.667s), `set` confirming on one line under 80 columns, `set --key` saying what it
# did; a pipe's timetable in `status` as a key's is, and a key's entry that the key has not taken
# yet marked as such.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# A pipe at one line per ten seconds, and one on a weekly timetable.
mkfifo "$WORK/slow" "$WORK/weekly"
"$RATELIMIT" -l --rate 1/10s <"$WORK/slow" >/dev/null 2>"$WORK/slow.stderr" &
slow=$!
"$RATELIMIT" --rate 'Mon-08:00,512k Sat-00:00,off' <"$WORK/weekly" >/dev/null 2>"$WORK/weekly.stderr" &
weekly=$!
exec 3>"$WORK/slow" 4>"$WORK/weekly"
wait_for_file "$WORK/state/pipe-$slow.records"
wait_for_file "$WORK/state/pipe-$weekly.bytes"

"$RATELIMIT" status >"$WORK/status"
grep -Eq "TIMETABLE ENTRY +NEXT ENTRY" "$WORK/status" || fail "no timetable columns: $(cat "$WORK/status")"
grep -Eq "^$weekly +bytes +(512kB/s|off) .*(Mon-08:00,512kB/s +Sat-00:00,off|Sat-00:00,off +Mon-08:00,512kB/s) in " \
  "$WORK/status" || fail "the timetable pipe shows: $(cat "$WORK/status")"
grep -Eq "^$slow +lines +1/10s " "$WORK/status" || fail "the slow pipe shows: $(cat "$WORK/status")"
"$RATELIMIT" status --json >"$WORK/status.json"
grep -q "\"pid\":$weekly,[^}]*\"timetable\":\"Mon-08:00,512000;Sat-00:00,off\",\"timetable_entry\":" \
  "$WORK/status.json" || fail "status --json: $(cat "$WORK/status.json")"

# set: the rate now as written, with what the pipe counts, and before as the pipe's --rate was.
expect_status 0 "$RATELIMIT" set "$slow" --rate 100
expect_stderr "ratelimit: pipe $slow now at 100 lines/s (was 1 line/10s)"
# The timetable's entry in force depends on the day (off from Saturday to Monday 08:00): `set`
# names the one that `status` showed.
weekly_rate=$(awk -v pid="$weekly" '$1 == pid { print $3 }' "$WORK/status")
expect_status 0 "$RATELIMIT" set "$weekly" --rate 10MiB/s
expect_stderr "ratelimit: pipe $weekly now at 10MiB/s (was $weekly_rate)"
expect_status 0 "$RATELIMIT" set "$weekly" --rate "Mon-08:00,512k Sat-00:00,off"
grep -Eq "^ratelimit: pipe $weekly follows the timetable: $weekly_rate now \(was 10MiB/s\)$" \
  "$WORK/stderr" || fail "set to a timetable said: $(cat "$WORK/stderr")"
[ "$(wc -L <"$WORK/stderr")" -lt 80 ] || fail "set said more than 79 columns: $(cat "$WORK/stderr")"
exec 3>&- 4>&-
wait "$slow" "$weekly" || fail "a pipe failed: $(cat "$WORK/slow.stderr" "$WORK/weekly.stderr")"

# A key's settings that a request follows are told in the request's notation, the burst in the
# unit given.
expect_status 0 "$RATELIMIT" acquire --key n --rate 1/s
expect_status 0 "$RATELIMIT" acquire --key n --rate 1/10s --burst 5
expect_stderr "ratelimit: key 'n' has rate 10/10s, burst 1: this call follows it, not its own rate 1/10s, burst 5 (to make them the key's: ratelimit set --key n --rate 1/10s --burst 5)"
expect_status 0 "$RATELIMIT" set --key n --rate 7/s
expect_stderr "ratelimit: key 'n' now at 7/s (was 1/s)"
expect_status 0 "$RATELIMIT" set --key n --rate 5MB/s
expect_stderr "ratelimit: key 'n' now at 5MB/s (was 7B/s)"
expect_status 0 "$RATELIMIT" set --key nosuch --rate 7/s
expect_stderr "ratelimit: key 'nosuch' now has rate 7/s, burst 1s (a new key)"

# A key whose timetable a user in another time zone applied: the entry in force here is not the
# key's rate until someone here uses it. The first entry begins this UTC hour, the second nine
# hours later, this hour in Tokyo.
utc_hour=$(date -u +%H)
tokyo_hour=$(printf '%02d' $(((10#$utc_hour + 9) % 24)))
TZ=UTC "$RATELIMIT" acquire --key tz --rate "$utc_hour:00,2/s $tokyo_hour:00,50/s" ||
  fail "acquire with a timetable failed"
TZ=UTC "$RATELIMIT" status --key tz >"$WORK/utc"
grep -Eq "^tz +2/s .* $utc_hour:00,2/s +$tokyo_hour:00,50/s in " "$WORK/utc" || fail "in UTC: $(cat "$WORK/utc")"
TZ=Asia/Tokyo "$RATELIMIT" status --key tz >"$WORK/tokyo"
grep -Eq "^tz +2/s .* $tokyo_hour:00,50/s from next use +$utc_hour:00,2/s in " "$WORK/tokyo" ||
  fail "in Tokyo: $(cat "$WORK/tokyo")"
TZ=Asia/Tokyo "$RATELIMIT" status --key tz --json | grep -q '"entry_from_next_use":true' ||
  fail "in Tokyo, JSON: $(TZ=Asia/Tokyo "$RATELIMIT" status --key tz --json)"
TZ=Asia/Tokyo "$RATELIMIT" acquire --key tz --rate "$utc_hour:00,2/s $tokyo_hour:00,50/s" ||
  fail "acquire in Tokyo failed"
TZ=Asia/Tokyo "$RATELIMIT" status --key tz >"$WORK/tokyo"
grep -Eq "^tz +50/s .* $tokyo_hour:00,50/s +$utc_hour:00,2/s in " "$WORK/tokyo" ||
  fail "in Tokyo once used there: $(cat "$WORK/tokyo")"
exit 0
