#!/usr/bin/env bash
# The host agent on Sentinel: two exec loops on one key through one agent while the master is
# killed and the replica promoted. The agent finds the new master and goes on: every exec runs
# (no error, as on the direct path: test_redis_sentinel.sh), grants within rate x time + burst
# (+2 for replication lag and scheduling), the same agent throughout, and the new master sees the
# agent's connection, not one per call.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
# Under ThreadSanitizer too (label threaded), for the agent's threads: tests/e2e/under_tsan.sh.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

start_redis master
start_redis replica --replicaof 127.0.0.1 "$(cat "$WORK/master/port")"
start_sentinel sentinel cache master
wait_for_replica sentinel cache
export RATELIMIT_REDIS=redis-sentinel://127.0.0.1:$(cat "$WORK/sentinel/port")/cache

expect_status 0 "$RATELIMIT" exec --rate 10/s --key k --redis-timeout 5s -- true
wait_for_file "$WORK/state/agent.sock"
pid=$(cat "$WORK/state/agent.lock")

exec_loop loop1 30 &
loop1=$!
exec_loop loop2 30 &
loop2=$!
sleep 1
before=$(connections replica)
stop_redis master KILL
killed=$(now_ns)
wait $loop1 $loop2
for loop in loop1 loop2; do
  seq 30 | cmp -s - "$WORK/$loop.out" || fail "$loop's output differs: $(cat "$WORK/$loop.err")"
  [ ! -s "$WORK/$loop.err" ] || fail "$loop: $(cat "$WORK/$loop.err")"
done
starts_within_bound "$killed"
read -r _ _ _ after <"$WORK/bound"
[ "$after" -ge 10 ] || fail "only $after starts after the kill"

# The same agent followed the failover, on one connection to the new master (the sentinel's and
# the replication's own connections aside), and the bucket lives there now.
[ "$(cat "$WORK/state/agent.lock")" = "$pid" ] && running "$pid" || fail "the agent did not survive the failover"
[ $(($(connections replica) - before)) -le 8 ] ||
  fail "$(($(connections replica) - before)) connections to the new master: the calls did not go through the agent"
[ "$(redis_cli replica exists 'ratelimit:{k}')" = 1 ] || fail "no bucket on the new master"
"$RATELIMIT" status --json >"$WORK/status.json"
python3 -c '
import json, sys
agent = json.load(open(sys.argv[1]))["agent"]
assert agent["pid"] == int(sys.argv[2]) and agent["decisions"] >= 61, agent
' "$WORK/status.json" "$pid" || fail "status --json: $(cat "$WORK/status.json")"
