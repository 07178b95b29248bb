#!/usr/bin/env bash
# Memory is what the input needs, a stop signal in record modes leaves unread what the next chunk
# does not need, and a write into a pipe never blocks outside the signal-aware wait.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"

# A chunk of 900M is an upper bound, not a 900 MB buffer: 5 MB pass under a 400 MB address space.
random_file "$WORK/in" 5000000
(
  ulimit -v 400000
  expect_status 0 "$RATELIMIT" --chunk 900M --rate 1G "$WORK/in" -o "$WORK/out"
)
cmp "$WORK/in" "$WORK/out" || fail "--chunk 900M changed the data"

# A stop signal at 5 lines/s writes the lines due and at most the next chunk, not what a large
# read took ahead (it was 45,541 lines); the rest stays unread.
seq 300000 >"$WORK/lines"
start=$(now_ns)
"$RATELIMIT" -l --rate 5 "$WORK/lines" >"$WORK/out" &
pid=$!
sleep 0.5
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
elapsed_ms=$(ms_since "$start")
[ "$status" -eq 143 ] || fail "SIGTERM in line mode: exit $status"
written=$(wc -l <"$WORK/out")
# The lines due until the kill (the first is free), the next chunk (1 line) and one cut by a read.
most=$((elapsed_ms * 5 / 1000 + 3))
[ "$written" -ge 1 ] && [ "$written" -le "$most" ] ||
  fail "a stop at 5 lines/s after $elapsed_ms ms wrote $written lines (at most $most)"
cmp -n "$(stat -c %s "$WORK/out")" "$WORK/lines" "$WORK/out" || fail "line mode stop: not a prefix"

# The same from a pipe: what was not read is still in it for the next reader.
start=$(now_ns)
seq 100000 | {
  "$RATELIMIT" -l --rate 5 >"$WORK/out" &
  sleep 0.5
  kill -TERM $!
  wait $! || true
  cat >"$WORK/rest"
}
elapsed_ms=$(ms_since "$start")
cat "$WORK/out" "$WORK/rest" | cmp - <(seq 100000) || fail "lines were lost or repeated at a stop"
written=$(wc -l <"$WORK/out")
[ "$written" -le $((elapsed_ms * 5 / 1000 + 3)) ] ||
  fail "a stop from a pipe after $elapsed_ms ms wrote $written lines"

# Writes into a pipe go through a non-blocking description of ratelimit's own (the caller's stays
# blocking), so the only wait for room is the signal-aware poll.
mkfifo "$WORK/fifo"
{ exec sleep 30; } >"$WORK/fifo" &
producer=$!
"$RATELIMIT" --rate 1k <"$WORK/fifo" | sleep 30 &
sleep 0.3
pid=$(pgrep -n -f "^$RATELIMIT --rate 1k") || fail "ratelimit did not start"
output_pipe=$(readlink "/proc/$pid/fd/1")
nonblocking=0
for fd in /proc/"$pid"/fd/*; do
  number=${fd##*/}
  [ "$number" -gt 2 ] && [ "$(readlink "$fd")" = "$output_pipe" ] || continue
  flags=$(awk '/^flags:/ { print $2 }' "/proc/$pid/fdinfo/$number")
  (((8#$flags & 8#4000) != 0)) && nonblocking=1
done
flags=$(awk '/^flags:/ { print $2 }' "/proc/$pid/fdinfo/1")
(((8#$flags & 8#4000) == 0)) || fail "the caller's standard output was made non-blocking"
kill -TERM "$pid" "$producer"
wait "$producer" 2>/dev/null || true
pkill -P $$ -x sleep 2>/dev/null || true
[ "$nonblocking" -eq 1 ] || fail "no non-blocking description of the output pipe"
