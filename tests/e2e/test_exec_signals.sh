#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM while waiting: exit 130 or 143, the command never runs. A waiter
# killed with SIGKILL leaves the bucket usable.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
# Job control, so that background jobs keep SIGINT as a terminal's foreground job would.
set -m

# wait_interrupted SIGNAL STATUS: a caller waiting for its permit gets SIGNAL.
wait_interrupted() {
  "$RATELIMIT" acquire --rate 0.2/s --key s  # books the next 5 s
  "$RATELIMIT" exec --rate 0.2/s --key s -- touch "$WORK/ran" &
  local waiter=$! status=0
  sleep 0.5
  kill "-$1" "$waiter"
  wait "$waiter" || status=$?
  [ "$status" -eq "$2" ] || fail "SIG$1 while waiting: exit $status, expected $2"
  [ ! -e "$WORK/ran" ] || fail "the command ran after SIG$1"
  "$RATELIMIT" reset --key s
}
wait_interrupted INT 130
wait_interrupted TERM 143
wait_interrupted HUP 129

# Stop signals the caller ignores (nohup, a non-interactive shell's background job) stay ignored.
"$RATELIMIT" acquire --rate 2/s --key i
(
  trap '' INT HUP
  exec "$RATELIMIT" exec --rate 2/s --key i -- touch "$WORK/ignored"
) &
waiter=$!
sleep 0.2
kill -INT "$waiter"
kill -HUP "$waiter"
status=0
wait "$waiter" || status=$?
[ "$status" -eq 0 ] && [ -e "$WORK/ignored" ] || fail "an ignored SIGINT or SIGHUP stopped the wait (exit $status)"

# SIGKILL while waiting: no lock is left behind, the bucket goes on.
"$RATELIMIT" acquire --rate 2/s --key k
"$RATELIMIT" exec --rate 2/s --key k -- touch "$WORK/ran" &
waiter=$!
sleep 0.1
kill -KILL "$waiter"
wait "$waiter" || true
[ ! -e "$WORK/ran" ] || fail "the command of a killed waiter ran"
start=$(now_ns)
expect_status 0 "$RATELIMIT" exec --rate 2/s --key k --timeout 3s -- true
ms=$(ms_since "$start")
[ "$ms" -lt 2500 ] || fail "after a killed waiter the next caller waited ${ms} ms"
expect_status 0 "$RATELIMIT" status --key k
