#!/usr/bin/env bash
# A file is read ahead in large reads; a stop signal (SIGTERM) writes no more than what is due
# and puts back the rest of what was read (the file's offset moves back), so the next reader of
# the same open file continues where the output ended.
source "$E2E_LIB"

random_file "$WORK/in" 100000
{
  "$RATELIMIT" --rate 20k -o "$WORK/shaped" &
  pipe=$!
  sleep 0.3
  kill -TERM "$pipe"
  status=0
  wait "$pipe" || status=$?
  echo "$status" >"$WORK/status"
  cat >"$WORK/rest"
} <"$WORK/in"
[ "$(cat "$WORK/status")" -eq 143 ] || fail "SIGTERM: exit $(cat "$WORK/status"), expected 143"
# About 0.3 s of 20 kB/s and a second's burst at most, not the 100 kB read ahead.
shaped=$(wc -c <"$WORK/shaped")
[ "$shaped" -lt 40000 ] || fail "the stop wrote $shaped bytes: what was read ahead went out"
cat "$WORK/shaped" "$WORK/rest" | cmp -s "$WORK/in" - ||
  fail "the rest of the file after the stop is not where the output ended"
