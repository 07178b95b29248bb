# Sourced by test_multikey_status.sh (state file) and test_multikey_status_redis.sh (Redis through
# the host agent): while an exec or acquire call of several keys waits for its turn, `status`
# lists it with the key that holds it and each key's own wait; once it ends (a stop signal
# included), or is killed, it is listed no more.

# waiting_call_line PID STORE...: the line `status` gives the call PID, once it does (within 10 s).
waiting_call_line() {
  local pid=$1 tries=0 line
  shift
  while :; do
    "$RATELIMIT" status "$@" >"$WORK/status.out" 2>&1 || fail "status: $(cat "$WORK/status.out")"
    line=$(grep -E "^[a-z]+ $pid: " "$WORK/status.out" || true)
    [ -z "$line" ] || break
    [ $((tries += 1)) -le 100 ] || fail "status did not list the waiting call $pid: $(cat "$WORK/status.out")"
    sleep 0.1
  done
  echo "$line"
}

# expect_no_waiting_call PID STATE_DIR STORE...: neither `status` nor the state directory
# (STATE_DIR) has the call PID any more.
expect_no_waiting_call() {
  local pid=$1 state_dir=$2
  shift 2
  "$RATELIMIT" status "$@" >"$WORK/status.out" 2>&1 || fail "status: $(cat "$WORK/status.out")"
  ! grep -Eq "^[a-z]+ $pid: " "$WORK/status.out" ||
    fail "status lists a call that ended: $(cat "$WORK/status.out")"
  "$RATELIMIT" status --json "$@" >"$WORK/status.json" 2>&1 || fail "status --json: $(cat "$WORK/status.json")"
  grep -Fq '"calls":[]' "$WORK/status.json" || fail "status --json lists a call that ended: $(cat "$WORK/status.json")"
  [ ! -e "$state_dir/call-$pid.status" ] || fail "the record of call $pid was left behind"
}

# expect_interrupted PID ERR_FILE STATE_DIR STORE...: Ctrl-C ends the wait of call PID (exit 130),
# and its record with it.
expect_interrupted() {
  local pid=$1 err=$2 state_dir=$3 status=0
  shift 3
  kill -INT "$pid"
  wait "$pid" || status=$?
  [ "$status" -eq 130 ] || fail "SIGINT while waiting: exit $status, expected 130: $(cat "$err")"
  expect_no_waiting_call "$pid" "$state_dir" "$@"
}

# expect_waiting_calls_in_status STATE_DIR STORE...
expect_waiting_calls_in_status() {
  local state_dir=$1 pid line status
  shift
  local keys=(--key a --rate 1/s --key b --rate 1/min)
  expect_status 0 "$RATELIMIT" acquire "${keys[@]}" "$@"
  # The second waits about a minute, for key 'b'. Background jobs ignore SIGINT unless told.
  env --default-signal=INT "$RATELIMIT" acquire "${keys[@]}" "$@" 2>"$WORK/acquire.err" &
  pid=$!
  line=$(waiting_call_line $pid "$@")
  [[ $line =~ ^acquire\ $pid:\ waits\ for\ key\ \'b\'\ \([0-9.]+(ms|s|m[0-9.]*s?)\ left\)\;\ held\ by\ key\ \'a\'\ [0-9.]+(ms|s),\ key\ \'b\'\ [0-9.]+(s|m[0-9.]*s?)$ ]] ||
    fail "status did not say which key holds the call: $line"
  "$RATELIMIT" status --json "$@" >"$WORK/status.json" 2>&1 || fail "status --json: $(cat "$WORK/status.json")"
  python3 - "$WORK/status.json" "$pid" <<'PY' || fail "status --json: $(cat "$WORK/status.json")"
import json, sys
calls = json.load(open(sys.argv[1]))["calls"]
assert len(calls) == 1, calls
call = calls[0]
assert call["pid"] == int(sys.argv[2]) and call["command"] == "acquire", call
assert [key["key"] for key in call["keys"]] == ["a", "b"] and call["held_by"] == "b", call
assert call["keys"][0]["held_seconds"] <= 1.0 < 30.0 < call["keys"][1]["held_seconds"], call
assert 0 < call["wait_left_seconds"] <= 60.0, call
PY
  expect_interrupted $pid "$WORK/acquire.err" "$state_dir" "$@"

  # exec is listed as exec (the command replaces the process after the wait); SIGTERM ends it.
  "$RATELIMIT" exec "${keys[@]}" "$@" -- true 2>"$WORK/exec.err" &
  pid=$!
  line=$(waiting_call_line $pid "$@")
  [[ $line == "exec $pid: waits for key 'b' ("* ]] || fail "status of a waiting exec: $line"
  kill -TERM $pid
  status=0
  wait $pid || status=$?
  [ "$status" -eq 143 ] || fail "SIGTERM while waiting: exit $status, expected 143: $(cat "$WORK/exec.err")"
  expect_no_waiting_call $pid "$state_dir" "$@"

  # Killed before it could remove its record: not listed, as its process is gone.
  "$RATELIMIT" acquire "${keys[@]}" "$@" 2>/dev/null &
  pid=$!
  waiting_call_line $pid "$@" >/dev/null
  kill -KILL $pid
  { wait $pid; } 2>/dev/null || true
  [ -e "$state_dir/call-$pid.status" ] || fail "no record of call $pid to leave behind"
  "$RATELIMIT" status "$@" >"$WORK/status.out" 2>&1 || fail "status: $(cat "$WORK/status.out")"
  ! grep -Eq "^acquire $pid: " "$WORK/status.out" ||
    fail "status lists a killed call: $(cat "$WORK/status.out")"

  # One key: nothing new in the status.
  env --default-signal=INT "$RATELIMIT" acquire --key b --rate 1/min "$@" 2>/dev/null &
  pid=$!
  sleep 0.5
  "$RATELIMIT" status "$@" >"$WORK/status.out" 2>&1 || fail "status: $(cat "$WORK/status.out")"
  ! grep -Eq "^acquire " "$WORK/status.out" || fail "status lists a call of one key: $(cat "$WORK/status.out")"
  kill -INT $pid
  wait $pid || true
}

# expect_slot_and_pause_waits_in_status STATE_DIR STORE...: a call of several keys is listed too
# while it waits for a --max-inflight slot of its first key, and for a pause (back-off) reported
# on a key while it waited for its turn.
expect_slot_and_pause_waits_in_status() {
  local state_dir=$1 running pid line
  shift
  # One exec runs (5 s) with the only slot of key s:a; the next waits for the slot.
  "$RATELIMIT" exec --max-inflight 1 --key s:a --rate 100/s --key s:b --rate 100/s "$@" -- \
    sleep 5 &
  running=$!
  sleep 0.5
  env --default-signal=INT "$RATELIMIT" exec --max-inflight 1 --key s:a --rate 100/s --key s:b \
    --rate 100/s "$@" -- true 2>"$WORK/slot.err" &
  pid=$!
  line=$(waiting_call_line $pid "$@")
  [ "$line" = "exec $pid: waits for a --max-inflight slot of key 's:a'; keys 's:a', 's:b'" ] ||
    fail "status of a call waiting for a slot: $line"
  "$RATELIMIT" status --json "$@" >"$WORK/status.json" 2>&1 || fail "status --json: $(cat "$WORK/status.json")"
  grep -Fq "{\"pid\":$pid,\"command\":\"exec\",\"waits_for\":\"slot\",\"keys\":[{\"key\":\"s:a\",\"held_seconds\":0},{\"key\":\"s:b\",\"held_seconds\":0}],\"held_by\":\"s:a\",\"wait_left_seconds\":null}" \
    "$WORK/status.json" || fail "status --json of a call waiting for a slot: $(cat "$WORK/status.json")"
  expect_interrupted $pid "$WORK/slot.err" "$state_dir" "$@"
  kill -TERM $running
  wait $running 2>/dev/null || true

  # p:b was throttled before (so calls look for a pause after their turn); the second call waits
  # for its turn (2 s at the halved rate) when a pause of 20 s is reported on p:b.
  local keys=(--key p:a --rate 1/s --key p:b --rate 1/s)
  expect_status 0 "$RATELIMIT" acquire "${keys[@]}" "$@"
  expect_status 0 "$RATELIMIT" throttle --key p:b "$@"
  env --default-signal=INT "$RATELIMIT" acquire "${keys[@]}" "$@" 2>"$WORK/pause.err" &
  pid=$!
  line=$(waiting_call_line $pid "$@")
  expect_status 0 "$RATELIMIT" throttle --key p:b --retry-after 20 "$@"
  local tries=0
  until [[ $line =~ ^acquire\ $pid:\ waits\ for\ the\ pause\ of\ key\ \'p:b\'\ \(1[0-9.]+s\ left\)\;\ keys\ \'p:a\',\ \'p:b\'$ ]]; do
    [ $((tries += 1)) -le 50 ] || fail "status did not list the wait for the pause: $line"
    sleep 0.1
    line=$(waiting_call_line $pid "$@")
  done
  "$RATELIMIT" status --json "$@" >"$WORK/status.json" 2>&1 || fail "status --json: $(cat "$WORK/status.json")"
  grep -Eq "\{\"pid\":$pid,\"command\":\"acquire\",\"waits_for\":\"pause\",\"keys\":\[\{\"key\":\"p:a\",\"held_seconds\":0\},\{\"key\":\"p:b\",\"held_seconds\":0\}\],\"held_by\":\"p:b\",\"wait_left_seconds\":1[0-9.]+\}" \
    "$WORK/status.json" || fail "status --json of a call waiting for a pause: $(cat "$WORK/status.json")"
  expect_interrupted $pid "$WORK/pause.err" "$state_dir" "$@"
}
