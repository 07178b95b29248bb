#!/usr/bin/env bash
# --stats as users read it: the average in the notation of --rate (as the progress line shows
# it), the rate as written, readable at the extremes (1e300, 1/h, off), the note when the free
# first chunk puts the average above the rate; --stats=json valid JSON whatever the rate or key.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

head -c 100000 /dev/zero >"$WORK/in"

"$RATELIMIT" --rate 80Mbit/s --stats "$WORK/in" >/dev/null 2>"$WORK/stderr"
grep -Eq '^ratelimit: 100000 bytes in [0-9.]+ s, [0-9.]+ [kMG]bit/s \(rate 80Mbit/s(; the first chunk is free)?\)$' \
  "$WORK/stderr" || fail "--stats not in the notation of 80Mbit/s: $(cat "$WORK/stderr")"

head -c 100 "$WORK/in" | "$RATELIMIT" --rate 1e300 --stats >/dev/null 2>"$WORK/stderr"
grep -Eq '^ratelimit: 100 bytes in [0-9.]+ s, [0-9.]+ [kMG]?B/s \(rate 1e300B/s\)$' "$WORK/stderr" ||
  fail "--rate 1e300: $(cat "$WORK/stderr")"

head -c 1 "$WORK/in" | "$RATELIMIT" --rate 1/h --stats >/dev/null 2>"$WORK/stderr"
# One byte, and the average per hour as the rate is written.
grep -Eq '^ratelimit: 1 byte in [0-9.]+ s, [0-9.]+ [kMG]?B/h \(rate 1B/h; the first chunk is free\)$' \
  "$WORK/stderr" || fail "--rate 1/h: $(cat "$WORK/stderr")"

# Whether the average is above the rate (the note) depends on how fast seq's lines come.
seq 3 | "$RATELIMIT" -l --rate 100 --stats >/dev/null 2>"$WORK/stderr"
grep -Eq '^ratelimit: 3 lines in [0-9.]+ s, .* lines/s \(rate 100/s(; the first chunk is free)?\), 6 bytes$' \
  "$WORK/stderr" || fail "-l: $(cat "$WORK/stderr")"

head -c 100 "$WORK/in" | "$RATELIMIT" --rate "00:00,off" --stats >/dev/null 2>"$WORK/stderr"
grep -Eq '\(rate off\)$' "$WORK/stderr" || fail "off: $(cat "$WORK/stderr")"

# json_fields FILE FIELD...: the FIELDs of FILE, which must be one JSON object, as JSON.
json_fields() {
  python3 -c '
import json, sys
summary = json.load(open(sys.argv[1]))
print(" ".join(json.dumps(summary[field]) for field in sys.argv[2:]))
' "$@"
}
head -c 100 "$WORK/in" | "$RATELIMIT" --rate 1e300 --stats=json >/dev/null 2>"$WORK/json"
[ "$(json_fields "$WORK/json" rate rate_text)" = '1e+300 "1e300B/s"' ] || fail "1e300: $(cat "$WORK/json")"
head -c 100 "$WORK/in" | "$RATELIMIT" --rate "00:00,off" --key offkey --stats=json >/dev/null 2>"$WORK/json"
[ "$(json_fields "$WORK/json" rate rate_text)" = 'null "off"' ] || fail "off: $(cat "$WORK/json")"
seq 3 | "$RATELIMIT" -l --rate 100 --key $'\xff\xfe' --stats=json >/dev/null 2>"$WORK/json"
# Whether 3 lines averaged above the rate depends on how fast the processes started: only its type.
[[ "$(json_fields "$WORK/json" unit rate_text average_above_rate)" =~ ^'"lines" "100/s" '(true|false)$ ]] ||
  fail "a non-UTF-8 key: $(cat "$WORK/json")"
