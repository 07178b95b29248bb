#!/usr/bin/env bash
# Another holder of a bucket's lock (a process stopped with Ctrl-Z inside its update, here flock(1)
# holding it) never makes a caller outwait its limits: --try does not wait for the lock (75),
# --timeout bounds the wait for it, and SIGINT or SIGTERM ends it at once (130, 143).
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
set -m

"$RATELIMIT" acquire --rate 1000/s --key held
[ -e "$WORK/state/held.bucket" ] || fail "no state file for key held"
# -o: the lock is flock's own, so killing flock lets it go.
flock -o "$WORK/state/held.bucket" sleep 30 &
holder=$!
# The job is a process group of its own (set -m): flock and its sleep go together.
trap 'kill -- "-$holder" 2>/dev/null || true; rm -rf "$WORK"' EXIT
sleep 0.3

start=$(now_ns)
expect_status 75 "$RATELIMIT" acquire --rate 1000/s --key held --try
ms=$(ms_since "$start")
[ "$ms" -lt 1000 ] || fail "--try waited ${ms} ms for another holder's lock"

start=$(now_ns)
expect_status 75 "$RATELIMIT" exec --rate 1000/s --key held --timeout 300ms -- touch "$WORK/ran"
ms=$(ms_since "$start")
[ ! -e "$WORK/ran" ] || fail "exec --timeout ran its command without the bucket"
[ "$ms" -ge 250 ] && [ "$ms" -lt 2000 ] || fail "--timeout 300ms waited ${ms} ms for the lock"

# A caller without a timeout, waiting for the lock.
for signal in INT TERM; do
  expect_ended_by_signal "$signal" "while waiting for the lock" 1000 \
    "$RATELIMIT" exec --rate 1000/s --key held -- touch "$WORK/ran"
  [ ! -e "$WORK/ran" ] || fail "the command ran after SIG$signal"
done

# A pipe on the key: Ctrl-C while it waits for the lock ends it at once, nothing written.
printf 'data\n' | "$RATELIMIT" --rate 1000 --key held >"$WORK/pipe.out" &
waiter=$!
sleep 0.5
start=$(now_ns)
kill -INT "$waiter"
status=0
wait "$waiter" || status=$?
ms=$(ms_since "$start")
[ "$status" -eq 130 ] || fail "SIGINT to a pipe waiting for the lock: exit $status, expected 130"
[ "$ms" -lt 1000 ] || fail "SIGINT to a pipe waiting for the lock took ${ms} ms to end it"
[ ! -s "$WORK/pipe.out" ] || fail "a pipe without its turn wrote '$(cat "$WORK/pipe.out")'"

# Once the holder lets go, the waiters' bucket goes on.
kill -- "-$holder"
wait "$holder" || true
expect_status 0 "$RATELIMIT" acquire --rate 1000/s --key held --timeout 2s
