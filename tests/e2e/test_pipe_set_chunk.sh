#!/usr/bin/env bash
# `ratelimit set` to a lower rate also shrinks the default chunk: at 1 kB/s after 1 MB/s the output
# grows by about 1000 bytes a second, not by the old 10000-byte chunk every 10 s. Timing: loose
# bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

yes | "$RATELIMIT" --rate 1M -o "$WORK/out" 2>/dev/null &
sleep 0.5
pid=$(pgrep -n -f "^$RATELIMIT --rate 1M -o $WORK/out") || fail "ratelimit did not start"
expect_status 0 "$RATELIMIT" set "$pid" --rate 1k
sleep 0.5
before=$(stat -c %s "$WORK/out")
start=$(now_ns)
sleep 2
after=$(stat -c %s "$WORK/out")
elapsed_ms=$(ms_since "$start")
kill -TERM "$pid"
wait || true
growth=$((after - before))
# 1000 bytes a second over the measured time, give or take two chunks of 10 and timer slack.
low=$((elapsed_ms * 1000 / 1000 - 500))
high=$((elapsed_ms * 1000 / 1000 + 500))
[ "$growth" -ge "$low" ] && [ "$growth" -le "$high" ] ||
  fail "at 1 kB/s the output grew by $growth bytes in $elapsed_ms ms"
