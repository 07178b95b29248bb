#!/usr/bin/env bash
# Each caller of a hung server through the agent gets its 69 at its own --redis-timeout, not
# later and not earlier. Callers queued behind one in flight, and then sent in one batch, are each
# answered at their own deadline, not all at the earliest's. A caller behind one with a longer
# timeout is answered at its own (the timeout is part of the agent's route: each has its own).
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
export RATELIMIT_REDIS=redis://127.0.0.1:$(cat "$WORK/main/port")
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key warm --redis-timeout 1s
expect_status 0 "$RATELIMIT" acquire --rate 100/s --key warm --redis-timeout 3s
kill -STOP "$(cat "$WORK/main/pid")"

# What a call costs beyond its --redis-timeout here (start, exit, load): measured direct.
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --rate 100/s --key hung --redis-timeout 300ms --no-agent
overhead=$(($(ms_since "$start") - 300))

# caller NAME TIMEOUT: acquire with --redis-timeout TIMEOUT in the background; "STATUS MS" in
# $WORK/NAME, its stderr in $WORK/NAME.err.
caller() {
  (
    local start status=0
    start=$(now_ns)
    "$RATELIMIT" acquire --rate 100/s --key "$1" --redis-timeout "$2" 2>"$WORK/$1.err" || status=$?
    echo "$status $(ms_since "$start")" >"$WORK/$1"
  ) &
}
# expect_own_deadline NAME TIMEOUT_MS: NAME exited 69, "no reply", at its own timeout.
expect_own_deadline() {
  local status ms
  read -r status ms <"$WORK/$1"
  [ "$status" -eq 69 ] || fail "$1 exited $status: $(cat "$WORK/$1.err")"
  grep -Fq ": no reply within" "$WORK/$1.err" || fail "$1 said: $(cat "$WORK/$1.err")"
  [ "$ms" -ge $(($2 - 50)) ] && [ "$ms" -le $(($2 + overhead + 150)) ] ||
    fail "$1 (--redis-timeout ${2}ms) ended after ${ms} ms (a call's overhead: ${overhead} ms)"
}

# X in flight; C1 and C2 queued behind it, 300 ms apart, then sent together once X gives up.
caller x 1s
sleep 0.3
caller c1 1s
sleep 0.3
caller c2 1s
wait
expect_own_deadline x 1000
expect_own_deadline c1 1000
expect_own_deadline c2 1000

# B (300 ms) after A (3 s).
caller a 3s
sleep 0.3
caller b 300ms
wait
expect_own_deadline a 3000
expect_own_deadline b 300
kill -CONT "$(cat "$WORK/main/pid")"
