#!/usr/bin/env bash
# Sequential and concurrent loops share one bucket; a running command does not hold it.
# Bounds are loose so that they hold on a loaded machine, yet fail without a shared bucket.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# 11 sequential starts at 10/s: the first is free, then one every 100 ms.
start=$(now_ns)
for _ in $(seq 11); do "$RATELIMIT" exec --rate 10/s --key seq -- true; done
ms=$(ms_since "$start")
[ "$ms" -ge 950 ] && [ "$ms" -lt 3000 ] || fail "11 execs at 10/s took ${ms} ms, expected about 1000"

# acquire paces the same way.
start=$(now_ns)
for _ in $(seq 6); do "$RATELIMIT" acquire --rate 10/s --key acq; done
ms=$(ms_since "$start")
[ "$ms" -ge 450 ] && [ "$ms" -lt 2500 ] || fail "6 acquires at 10/s took ${ms} ms, expected about 500"

# 4 loops of 5 starts share 20/s: 20 starts take 19/20 s, and the starts are spread out.
start=$(now_ns)
for loop in 1 2 3 4; do
  for _ in $(seq 5); do
    "$RATELIMIT" exec --rate 20/s --key shared -- sh -c 'date +%s%N >>"$0"' "$WORK/starts.$loop"
  done &
done
wait
ms=$(ms_since "$start")
[ "$ms" -ge 900 ] && [ "$ms" -lt 3500 ] || fail "4 loops x 5 at 20/s took ${ms} ms, expected about 950"
expect_paced_starts 20 "$WORK"/starts.*

# --permits 5 at 10/s: the next caller waits half a second.
"$RATELIMIT" acquire --rate 10/s --key many --permits 5
start=$(now_ns)
"$RATELIMIT" acquire --rate 10/s --key many
ms=$(ms_since "$start")
[ "$ms" -ge 400 ] && [ "$ms" -lt 2000 ] || fail "after --permits 5 at 10/s the next waited ${ms} ms"

# A command that runs for 3 s does not block the next caller of its key.
"$RATELIMIT" exec --rate 100/s --key long -- sh -c ': >"$0"; exec sleep 3' "$WORK/sleeping" &
sleeper=$!
wait_for_file "$WORK/sleeping"
start=$(now_ns)
expect_status 0 "$RATELIMIT" exec --rate 100/s --key long -- true
ms=$(ms_since "$start")
kill "$sleeper"
[ "$ms" -lt 1000 ] || fail "the next caller waited ${ms} ms behind a running command"
