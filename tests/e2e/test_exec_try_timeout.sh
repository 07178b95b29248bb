#!/usr/bin/env bash
# --try never waits and runs nothing when refused; --timeout waits at most that long.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

expect_status 0 "$RATELIMIT" exec --rate 1/s --key t --try -- touch "$WORK/first"
[ -e "$WORK/first" ] || fail "the first --try did not run its command"
start=$(now_ns)
expect_status 75 "$RATELIMIT" exec --rate 1/s --key t --try -- touch "$WORK/second"
ms=$(ms_since "$start")
[ ! -e "$WORK/second" ] || fail "a refused --try ran its command"
[ "$ms" -lt 500 ] || fail "--try waited ${ms} ms"
expect_status 75 "$RATELIMIT" acquire --rate 1/s --key t --try

# The permit is due in under a second: a 100 ms timeout refuses at once, 3 s waits for it.
start=$(now_ns)
expect_status 75 "$RATELIMIT" exec --rate 1/s --key t --timeout 100ms -- touch "$WORK/third"
ms=$(ms_since "$start")
[ ! -e "$WORK/third" ] || fail "a timed-out exec ran its command"
[ "$ms" -lt 500 ] || fail "a refused --timeout waited ${ms} ms"
start=$(now_ns)
expect_status 0 "$RATELIMIT" exec --rate 1/s --key t --timeout 3s -- touch "$WORK/fourth"
ms=$(ms_since "$start")
[ -e "$WORK/fourth" ] || fail "exec --timeout 3s did not run its command"
[ "$ms" -ge 300 ] && [ "$ms" -lt 2500 ] || fail "exec --timeout 3s waited ${ms} ms, expected under 1 s"

# 12 callers at once on a fresh bucket of 1/min: the lock lets exactly one through.
for i in $(seq 12); do
  ("$RATELIMIT" acquire --rate 1/m --key race --try && touch "$WORK/granted.$i") &
done
wait
granted=$(find "$WORK" -name 'granted.*' | wc -l)
[ "$granted" -eq 1 ] || fail "$granted of 12 simultaneous --try callers were granted, expected 1"
