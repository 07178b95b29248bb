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
# Issue 39. An option of other commands names them, and what the pipe does instead; before, CLI11
# said "not expected: --try; did you mean --try?" and set took --permits's value for its PID.
expect_error "ratelimit: --try is an option of exec and acquire, not of the pipe: a pipe bounds its wait with --timeout DURATION, or ends at a spent quota with --stop-at-quota" \
  "$RATELIMIT" --rate 5 --try
expect_error "ratelimit: --permits is an option of exec and acquire, not of the pipe: a pipe takes one permit per unit it writes" \
  "$RATELIMIT" --rate 5 --permits 2
expect_error "ratelimit: --max-inflight is an option of exec, not of the pipe" \
  "$RATELIMIT" --rate 5 --max-inflight=2
expect_error "ratelimit: --max-inflight is an option of exec, not of acquire" \
  "$RATELIMIT" acquire --rate 5 --key k --max-inflight 2
expect_error "ratelimit: --permits is an option of exec and acquire, not of set" \
  "$RATELIMIT" set --key k --rate 5 --permits 2
# Units as other tools write them.
expect_error "ratelimit: --rate: invalid rate '10mb': unknown unit 'mb': did you mean 10MB or 10Mbit?" \
  "$RATELIMIT" --rate 10mb
expect_error "ratelimit: --rate: invalid rate '10mB/s': unknown unit 'mB/s': did you mean 10MB/s?" \
  "$RATELIMIT" --rate 10mB/s
expect_error "ratelimit: --rate: invalid rate '10 MB/s': a rate has no spaces: did you mean 10MB/s?" \
  "$RATELIMIT" --rate "10 MB/s"
expect_error "ratelimit: no file 'MB/s': did you mean --rate 10MB/s?" "$RATELIMIT" --rate 10 MB/s
# An option given twice.
expect_error "ratelimit: --rate given twice ('5', then '6'): give it once" "$RATELIMIT" --rate 5 --rate 6
expect_error "ratelimit: -r given twice ('5/s', then '6/s'): give it once" \
  "$RATELIMIT" exec --rate=5/s -r 6/s -- true
# --redis on a pipe without a key would share nothing.
expect_error "ratelimit: --redis without --key: a pipe shares a bucket only by a key's name; add --key NAME" \
  "$RATELIMIT" --rate 5 --redis redis://127.0.0.1:1
# The manual from the source tree, as --help says; and cmake --install puts both where PATH and
# man find them.
"$RATELIMIT" --help | grep -q "in the source tree 'man ./man/ratelimit.1'" || fail "--help names no manual"
[ -f "$root/man/ratelimit.1" ] || fail "no man/ratelimit.1 in the source tree"
build=$(dirname "$(dirname "$RATELIMIT")")
cmake --install "$build" --prefix "$WORK/prefix" >/dev/null
[ -x "$WORK/prefix/bin/ratelimit" ] && [ -f "$WORK/prefix/share/man/man1/ratelimit.1" ] ||
  fail "cmake --install put: $(cd "$WORK/prefix" && find . -type f | sort | tr '\n' ' ')"
# -s/--size: a percentage and ETA on standard input, as pv -s.
head -c 5000 /dev/zero | "$RATELIMIT" --rate 1M --size 5000 --progress=force 2>"$WORK/progress" >/dev/null
tr '\r' '\n' <"$WORK/progress" | grep -q "100%" || fail "--size: $(tr '\r' '\n' <"$WORK/progress" | tail -2)"
head -c 5000 /dev/zero | "$RATELIMIT" --rate 1M --progress=force 2>"$WORK/progress" >/dev/null
tr '\r' '\n' <"$WORK/progress" | grep -q "%" && fail "a percentage without --size: $(cat "$WORK/progress")"
seq 4 | "$RATELIMIT" -l --rate 1k -s 4 --progress=force 2>"$WORK/progress" >/dev/null
tr '\r' '\n' <"$WORK/progress" | grep -q "100%" || fail "-l -s 4: $(tr '\r' '\n' <"$WORK/progress" | tail -2)"
expect_error "ratelimit: size '4kB' is in bytes or bits, but this command counts lines: write it without B/bit" \
  "$RATELIMIT" -l --rate 1k -s 4kB
# The man page says how large a chunk is as --chunk does.
grep -q "hundredth" "$root/man/ratelimit.1" && fail "the man page still says a hundredth of a second"
exit 0
