#!/usr/bin/env bash
# Ctrl-C (SIGINT) or SIGTERM while waiting: exit 130 or 143, the command never runs. A waiter
# killed with SIGKILL leaves the bucket usable. exec --throttled-status passes a stop signal on
# to its command.
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

# exec --throttled-status runs the command as its child: a stop signal sent to ratelimit alone
# is passed on to the command, and exec exits at once with the command's status (its handler's,
# or 128 + the signal), neither reporting it nor running it again, the child gone.
# stop_command SIGNAL STATUS SCRIPT: SCRIPT writes its pid to $0, then runs for 30 s.
stop_command() {
  local signal=$1 expected=$2 script=$3 runner status=0 start ms
  rm -f "$WORK/command.pid"
  "$RATELIMIT" exec --rate 20/s --key t --throttled-status "75,$expected" --retry 3 -- \
    sh -c "$script" "$WORK/command.pid" &
  runner=$!
  wait_for_file "$WORK/command.pid"
  sleep 0.2
  start=$(now_ns)
  kill "-$signal" "$runner"
  wait "$runner" || status=$?
  ms=$(ms_since "$start")
  [ "$status" -eq "$expected" ] || fail "SIG$signal to exec --throttled-status: exit $status, expected $expected"
  [ "$ms" -lt 5000 ] || fail "SIG$signal to exec --throttled-status: it ended after ${ms} ms"
  ! running "$(cat "$WORK/command.pid")" || fail "SIG$signal to exec --throttled-status left its command running"
  [ "$(wc -l <"$WORK/command.pid")" -eq 1 ] || fail "SIG$signal to exec --throttled-status ran the command again"
  "$RATELIMIT" status --key t | grep -q "backing off" && fail "SIG$signal to exec --throttled-status reported a throttle"
  "$RATELIMIT" reset --key t
}
stop_command TERM 7 'echo $$ >>"$0"; trap "kill \$!; exit 7" TERM; sleep 30 & wait'
stop_command INT 8 'echo $$ >>"$0"; trap "kill \$!; exit 8" INT; sleep 30 & wait'
stop_command TERM 143 'echo $$ >>"$0"; exec sleep 30'

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
