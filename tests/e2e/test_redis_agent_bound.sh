#!/usr/bin/env bash
# The host agent is never worse than no agent: a stopped agent costs a call a tenth of its
# --redis-timeout twice at most, then the call goes to Redis itself (-v says so): acquire is
# granted, --try is decided by Redis, a keyed pipe stalls well under a second. A hung server costs
# each of the callers queued at the agent its own --redis-timeout. An agent that ends when idle
# loses no caller that comes as it ends.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
export RATELIMIT_REDIS=redis://127.0.0.1:$(cat "$WORK/main/port")

# The agent stopped (SIGSTOP) while Redis answers.
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key started
wait_for_file "$WORK/state/agent.sock"
agent=$(cat "$WORK/state/agent.lock")
kill -STOP "$agent"
start=$(now_ns)
expect_status 0 "$RATELIMIT" acquire -v --rate 100/s --key stopped --redis-timeout 300ms
ms=$(ms_since "$start")
[ "$ms" -lt 1000 ] || fail "acquire with the agent stopped took ${ms} ms"
grep -Fq "the ratelimit agent showed no sign of life within 0.03s; to Redis at redis://127.0.0.1:" \
  "$WORK/stderr" || fail "-v did not say the call went direct: $(cat "$WORK/stderr")"
# --try: the first permit of a key is free, the next one a minute later: decided by Redis, not
# refused for the time the agent took.
start=$(now_ns)
expect_status 0 "$RATELIMIT" acquire --rate 1/m --key tried --try
expect_status 75 "$RATELIMIT" acquire --rate 1/m --key tried --try
ms=$(ms_since "$start")
[ "$ms" -lt 2000 ] || fail "two --try with the agent stopped took ${ms} ms"
# A pipe on a key: 200 kB at 1 MB/s (a burst of one second's worth of bytes).
head -c 200000 /dev/urandom >"$WORK/in"
start=$(now_ns)
expect_status 0 "$RATELIMIT" --rate 1MB/s --key piped -o "$WORK/out" "$WORK/in"
ms=$(ms_since "$start")
cmp -s "$WORK/in" "$WORK/out" || fail "the pipe's output differs from its input"
[ "$ms" -lt 1000 ] || fail "a keyed pipe with the agent stopped took ${ms} ms"
# Started again, it serves the next calls; the requests it held, whose callers went direct, are
# not served.
kill -CONT "$agent"
decisions_before=$("$RATELIMIT" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["decisions"])')
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key resumed
"$RATELIMIT" status --json | python3 -c '
import json, sys
agent = json.load(sys.stdin)["agent"]
assert agent["pid"] == int(sys.argv[1]) and agent["decisions"] == int(sys.argv[2]) + 1, agent
' "$agent" "$decisions_before" || fail "the agent after SIGCONT: $("$RATELIMIT" status --json)"

# A hung server: 4 callers, 250 ms apart, each with --redis-timeout 1s, queued at the agent
# behind each other; each ends (69) by its own timeout + 100 ms, not after those before it. The
# timeout as a caller of its own measures it (its start and exit included): --no-agent.
kill -STOP "$(cat "$WORK/main/pid")"
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --rate 100/s --key hung --redis-timeout 1s --no-agent
own_timeout=$(ms_since "$start")
callers=()
for caller in 1 2 3 4; do
  (
    start=$(now_ns)
    status=0
    "$RATELIMIT" acquire --rate 100/s --key hung --redis-timeout 1s 2>"$WORK/hung.$caller.err" ||
      status=$?
    echo "$status $(ms_since "$start")" >"$WORK/hung.$caller"
  ) &
  callers+=($!)
  sleep 0.25
done
wait "${callers[@]}"
kill -CONT "$(cat "$WORK/main/pid")"
for caller in 1 2 3 4; do
  read -r status ms <"$WORK/hung.$caller"
  [ "$status" -eq 69 ] || fail "caller $caller of the hung server exited $status: $(cat "$WORK/hung.$caller.err")"
  [ "$ms" -le $((own_timeout + 100)) ] ||
    fail "caller $caller of the hung server ended after ${ms} ms (--redis-timeout 1s: ${own_timeout} ms direct)"
  grep -Fq ": no reply within 1s" "$WORK/hung.$caller.err" ||
    fail "caller $caller of the hung server said: $(cat "$WORK/hung.$caller.err")"
done

# An agent that ends after 5 ms idle, under 8 loops of 60 calls: it ends and starts again all
# the time, and every call is granted (main at 17dd7a1 failed 1 in 168, and 40 in these 480).
export RATELIMIT_STATE_DIR=$WORK/idle RATELIMIT_AGENT_IDLE=5ms
loops=()
for loop in 1 2 3 4 5 6 7 8; do
  for _ in $(seq 60); do
    status=0
    "$RATELIMIT" acquire --rate 1000/s --key idle 2>>"$WORK/idle.err" || status=$?
    echo "$status"
  done >"$WORK/idle.$loop" &
  loops+=($!)
done
wait "${loops[@]}"
failed=$(cat "$WORK"/idle.[1-8] | grep -vc '^0$' || true)
[ "$failed" -eq 0 ] || fail "$failed of 480 calls failed while the agent ended when idle: $(head -3 "$WORK/idle.err")"
[ ! -s "$WORK/idle.err" ] || fail "stderr of the calls: $(head -3 "$WORK/idle.err")"
