#!/usr/bin/env bash
# --chunk as a time between writes: `--chunk 1s` at 100 B/s writes 100 bytes a second (not a
# byte every 10 ms, the default); a time out of range or not a time is one line and 64.
# RESOURCE_LOCK timing
source "$E2E_LIB"

random_file "$WORK/in" 200
"$RATELIMIT" --rate 100 --chunk 1s "$WORK/in" -o "$WORK/out" &
pipe=$!
sleep 0.5
# At 0.5 s the first second's write, all of it: the default would have written about 50 bytes.
early=$(wc -c <"$WORK/out")
wait "$pipe" || fail "--chunk 1s exited $?"
[ "$early" -eq 100 ] || fail "--chunk 1s: $early bytes after 0.5 s, expected one write of 100"
cmp -s "$WORK/in" "$WORK/out" || fail "--chunk 1s changed the data"

expect_status 0 "$RATELIMIT" --rate 1M --chunk 50ms "$WORK/in" -o "$WORK/out"
cmp -s "$WORK/in" "$WORK/out" || fail "--chunk 50ms changed the data"

for chunk in 0ms 0.5ms 2m -5ms 1e300s 5xs; do
  expect_status 64 "$RATELIMIT" --rate 10 --chunk "$chunk" "$WORK/in"
  [ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "--chunk $chunk: not one line: $(cat "$WORK/stderr")"
  grep -q "^ratelimit: .*'$chunk'" "$WORK/stderr" ||
    fail "--chunk $chunk: the value is not named: $(cat "$WORK/stderr")"
done
expect_status 64 "$RATELIMIT" --rate 10 --chunk 0ms "$WORK/in"
expect_stderr "ratelimit: --chunk: invalid chunk '0ms': a time between writes must be from 1ms to 1m"
