#!/usr/bin/env bash
# Timing checks: run alone (RESOURCE_LOCK timing).
# A pipe on a key honours a pause exactly (issue 40), on the state file and on Redis through the
# host agent (label threaded): once `ratelimit throttle --retry-after 2` has returned, nothing more
# goes out until the pause ends (the line booked ahead before it included), then the rest goes,
# byte-exact; -v says the wait in one line, as acquire and exec do.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

# pause_holds_pipe LABEL: 40 lines at 5/s through a pipe on key 'p'; a throttle once 3 lines are
# out. The lines are 200 ms apart, so the line booked ahead before the throttle would come
# 200-400 ms after it: what is out 100 ms after the throttle returned must stay so for 1.5 s.
pause_holds_pipe() {
  local label=$1 out=$WORK/$1.out err=$WORK/$1.err pid before after
  seq 40 | "$RATELIMIT" -l --rate 5/s --key p -v >"$out" 2>"$err" &
  pid=$!
  for _ in $(seq 500); do
    [ "$(wc -l <"$out")" -ge 3 ] && break
    sleep 0.01
  done
  expect_status 0 "$RATELIMIT" throttle --key p --retry-after 2
  sleep 0.1
  before=$(wc -l <"$out")
  sleep 1.5
  after=$(wc -l <"$out")
  [ "$after" -eq "$before" ] ||
    fail "$label: $before lines out 0.1 s after the throttle, $after 1.5 s later, during the pause"
  wait "$pid" || fail "$label: the pipe exited $?: $(cat "$err")"
  cmp -s "$out" <(seq 40) || fail "$label: the pipe's output differs from its input"
  [ "$(grep -c "^ratelimit: key 'p' is backing off: waited 1\.[0-9]*s for its pause$" "$err")" = 1 ] ||
    fail "$label: -v did not say the wait for the pause once: $(cat "$err")"
  [ "$(grep -vc "is backing off" "$err")" = 0 ] || fail "$label: more on stderr: $(cat "$err")"
}

export RATELIMIT_STATE_DIR=$WORK/state
pause_holds_pipe state_file

start_redis main
export RATELIMIT_REDIS=unix://$WORK/main/sock
pause_holds_pipe redis
