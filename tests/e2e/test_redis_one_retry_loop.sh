#!/usr/bin/env bash
# One retry loop per request (RetryPolicy), direct (--no-agent) and through the agent, against a
# Sentinel master that hangs on writes (CLIENT PAUSE WRITE: each FCALL goes out and its reply
# never comes, so it may have run). The tries are counted as the master's new connections (each
# try finds the master again: one connection, one send).
# `acquire --timeout 1s` is sent once per try (direct: each try but the last told under -v, "asking
# the sentinels for the master"), answered at its one deadline although the failover budget is
# 20 s, and not tried after it: through the agent, the agent's loop follows the failover within
# the caller's deadline and the caller's loop does not run it again.
# (A give-back or rate set sent once: tests/redis/redis_store_test.cpp, RedisRetries.)
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

start_redis master
start_sentinel sentinel cache master
url=redis-sentinel://127.0.0.1:$(cat "$WORK/sentinel/port")/cache

options=(--redis "$url" --redis-timeout 200ms --redis-failover-timeout 20s --key k)
for mode in --no-agent --agent; do
  if [ "$mode" = --agent ]; then unset RATELIMIT_NO_AGENT; else export RATELIMIT_NO_AGENT=1; fi
  # The key exists and the agent (if any) is running before the master hangs.
  expect_status 0 "$RATELIMIT" acquire "${options[@]}" --rate 10/s
  redis_cli master client pause 60000 write >/dev/null

  before=$(connections master)
  start=$(now_ns)
  expect_status 75 "$RATELIMIT" acquire -v "${options[@]}" --rate 10/s --permits 100 --timeout 1s
  ms=$(ms_since "$start")
  after=$(connections master)
  # The connection that asks is one more.
  sent=$((after - before - 1))
  # One deadline: --timeout 1s, its last try's share included.
  [ "$ms" -ge 950 ] && [ "$ms" -lt 1900 ] || fail "$mode: acquire --timeout 1s answered after ${ms} ms"
  # Each try is 200 ms and a pause of 50 ms: 5 tries at most, each sent once.
  [ "$sent" -ge 2 ] && [ "$sent" -le 5 ] || fail "$mode: acquire sent $sent times within its 1 s"
  if [ "$mode" = --no-agent ]; then
    # Each try but the last said so.
    tries=$(($(grep -c "asking the sentinels for the master" "$WORK/stderr" || true) + 1))
    [ "$sent" -le "$tries" ] || fail "$mode: acquire sent $sent times in $tries tries: $(cat "$WORK/stderr")"
  fi
  # Nothing tries it after its deadline (through the agent: the agent's loop ended with it).
  sleep 1
  late=$(($(connections master) - after - 1))
  [ "$late" -eq 0 ] || fail "$mode: $late more tries after the caller's deadline"
  redis_cli master client unpause >/dev/null
done
