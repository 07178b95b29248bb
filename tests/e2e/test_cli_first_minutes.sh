#!/usr/bin/env bash
# What a new user met in the first minutes (issue 27): a flag without its value, a unit or a
# timetable written as another tool writes it, messages that name what is counted, `status` with
# nothing to show, and --help agreeing with the tool. Each is one line on stderr and a documented
# exit code, before anything runs.
source "$E2E_LIB"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export RATELIMIT_STATE_DIR=$WORK/state
cd "$WORK"

# An option followed by another option: its value is missing, whatever the command. Before, acquire
# offered an exec line, exec ran "k" (127) and the pipe read a file "k" (66).
expect_error "ratelimit: --redis needs a URL before --key" \
  "$RATELIMIT" acquire --redis --key k --rate 1/s
expect_error "ratelimit: --redis needs a URL before --key" \
  "$RATELIMIT" exec --redis --key k --rate 1/s -- true
expect_error "ratelimit: --redis needs a URL before --key" "$RATELIMIT" --redis --key k --rate 1/s
expect_error "ratelimit: --key needs a NAME before --rate" "$RATELIMIT" acquire --key --rate 1/s
expect_error "ratelimit: --state-dir needs a DIR before -k" \
  "$RATELIMIT" acquire --rate 1/s --state-dir -k k
expect_error "ratelimit: --rate needs a RATE" "$RATELIMIT" --rate
expect_error "ratelimit: -o needs a FILE before --" "$RATELIMIT" --rate 1k -o -- file
# A value that begins with a dash is a value: - is standard output.
[ "$(echo hi | "$RATELIMIT" --rate 1k -o -)" = hi ] || fail "-o - did not write to standard output"

# A unit as another tool writes it: pv's 10m is 10M, or 10 a minute.
expect_error "ratelimit: --rate: invalid rate '10m': unknown unit 'm': did you mean 10M or 10/m?" \
  "$RATELIMIT" --rate 10m
expect_error "ratelimit: --rate: invalid rate '5s': unknown unit 's': did you mean 5/s?" \
  "$RATELIMIT" acquire --key k --rate 5s
# A timetable's entry written with a space instead of a comma.
expect_error "ratelimit: --rate: invalid rate 'Mon-08:00 1M': a timetable's entries are [DAY-]HH:MM,RATE: did you mean 'Mon-08:00,1M'?" \
  "$RATELIMIT" --rate "Mon-08:00 1M"
expect_error "ratelimit: --rate: invalid rate '08:00 1M 18:00 10M': a timetable's entries are [DAY-]HH:MM,RATE: did you mean '08:00,1M 18:00,10M'?" \
  "$RATELIMIT" --rate "08:00 1M 18:00 10M"
expect_error "ratelimit: --rate: invalid rate '08:00': a timetable's entries are [DAY-]HH:MM,RATE, e.g. 'Mon-08:00,1M'" \
  "$RATELIMIT" --rate 08:00
# The unit split from its number gets the same hint as written together, under every command.
expect_error "ratelimit: stray word 'kb': did you mean --rate 5kB (or 5kbit)?" \
  "$RATELIMIT" acquire --key k --rate 5 kb
expect_error "ratelimit: no file 'kb/s': did you mean --rate 5kB/s (or 5kbit/s)?" "$RATELIMIT" --rate 5 kb/s
# A decimal comma, named with its option as every other bad value is.
expect_error "ratelimit: --rate: invalid rate '1,5M': use a decimal point (1.5M)" "$RATELIMIT" --rate 1,5M

# What is counted, by name.
expect_error "ratelimit: rate '5MB' is in bytes or bits, but this command counts lines: write it without B/bit" \
  "$RATELIMIT" -l --rate 5MB
expect_error "ratelimit: rate '5MB' is in bytes or bits, but this command counts permits: write it without B/bit" \
  "$RATELIMIT" acquire --key k --rate 5MB

# A state directory that cannot be used: its error alone, not after a warning about the FIFO.
expect_status 69 "$RATELIMIT" --state-dir /proc/nope --key x --rate 1k </dev/null
[ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "an unusable state directory said: $(cat "$WORK/stderr")"
grep -q "FIFO" "$WORK/stderr" && fail "an unusable state directory warned of the FIFO: $(cat "$WORK/stderr")"

# status with nothing to show says so.
[ "$("$RATELIMIT" status)" = "no pipes or keys" ] || fail "status with nothing running: $("$RATELIMIT" status)"
mkdir -p "$WORK/state"
[ "$("$RATELIMIT" status)" = "no pipes or keys" ] || fail "status with an empty state directory: $("$RATELIMIT" status)"

# --help: a command comes first; --redis and --redis-timeout say what they take.
"$RATELIMIT" --help >"$WORK/help"
grep -qx "Usage: ratelimit \[OPTIONS\] \[FILE...\]" "$WORK/help" || fail "usage: $(head -3 "$WORK/help")"
grep -qx "       ratelimit COMMAND \[OPTIONS\] ..." "$WORK/help" || fail "usage: $(head -3 "$WORK/help")"
grep -q -- "--redis URL " "$WORK/help" || fail "--redis shows no URL: $(grep -- --redis "$WORK/help")"
grep -q -- "--redis-timeout DURATION .*\[default: 1s\]" "$WORK/help" ||
  fail "--redis-timeout: $(grep -A1 -- --redis-timeout "$WORK/help")"
grep -q -- "--stats\[=text|json\]" "$WORK/help" || fail "--stats: $(grep -- --stats "$WORK/help")"
echo hi | "$RATELIMIT" --rate 1k --stats=text >/dev/null 2>"$WORK/stats"
grep -q "^ratelimit: 3 bytes in" "$WORK/stats" || fail "--stats=text: $(cat "$WORK/stats")"
# The man page says how large a chunk is as --chunk does.
grep -q "hundredth" "$root/man/ratelimit.1" && fail "the man page still says a hundredth of a second"
exit 0
