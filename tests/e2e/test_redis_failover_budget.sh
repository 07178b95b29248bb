#!/usr/bin/env bash
# One failover budget per request: a Sentinel master that is no master yet when the request
# connects (ROLE says replica) and, once promoted at 1.5 s, does not run the script (CLIENT PAUSE
# WRITE) costs the request one --redis-failover-timeout (2 s), not one for connecting and another
# for the command (the direct path met both). Direct (--no-agent) and through the agent.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

start_redis master
start_sentinel sentinel cache master
url=redis-sentinel://127.0.0.1:$(cat "$WORK/sentinel/port")/cache

for mode in --no-agent --agent; do
  options=(--redis "$url" --redis-timeout 200ms --redis-failover-timeout 2s --rate 10/s --key k)
  [ "$mode" = --agent ] || options+=(--no-agent)
  redis_cli master client pause 60000 write >/dev/null
  redis_cli master replicaof 127.0.0.1 1 >/dev/null
  (sleep 1.5 && redis_cli master replicaof no one >/dev/null) &
  promoter=$!
  start=$(now_ns)
  expect_status 69 "$RATELIMIT" acquire "${options[@]}"
  ms=$(ms_since "$start")
  wait $promoter
  # Through the agent, the caller may give up first (the agent began its budget later).
  grep -q -e "within 2s of a failover" -e "no answer through the ratelimit agent" "$WORK/stderr" ||
    fail "$mode: not the failover's error: $(cat "$WORK/stderr")"
  # One budget: 2 s, and the last try's 200 ms; two would be 3.5 s at least.
  [ "$ms" -ge 1900 ] && [ "$ms" -lt 2900 ] || fail "$mode: the failover took ${ms} ms, not one 2 s budget"
  redis_cli master client unpause >/dev/null
done
