#!/usr/bin/env bash
# The host agent on a Redis Cluster of three masters reached through one seed node: calls on keys
# of every node go through one agent, which follows the MOVED replies: each key's bucket is on its
# node, and each node sees the agent's one connection, not one per call.
# Under ThreadSanitizer too (label threaded), for the agent's threads: tests/e2e/under_tsan.sh.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

start_cluster n1 n2 n3
export RATELIMIT_REDIS=redis://127.0.0.1:$(cat "$WORK/n1/port")

# One key per node: redis-cli gives the three masters the slot ranges in the order they were named.
declare -A key_of
i=0
for slot in $(for i in $(seq 0 60); do echo "cluster keyslot k$i"; done | redis_cli n1); do
  if [ "$slot" -le 5460 ]; then node=n1; elif [ "$slot" -le 10922 ]; then node=n2; else node=n3; fi
  [ -n "${key_of[$node]:-}" ] || key_of[$node]=k$i
  i=$((i + 1))
done

declare -A before
for node in n1 n2 n3; do before[$node]=$(connections "$node"); done
for round in 1 2 3 4 5; do
  for node in n1 n2 n3; do
    expect_status 0 "$RATELIMIT" acquire --rate 100/s --key "${key_of[$node]}"
  done
done
wait_for_file "$WORK/state/agent.sock"
for node in n1 n2 n3; do
  [ "$(redis_cli "$node" exists "ratelimit:{${key_of[$node]}}")" = 1 ] ||
    fail "the bucket of ${key_of[$node]} is not on $node"
  # The agent's connection and this count's own (the first call may have gone direct while the
  # agent started).
  [ $(($(connections "$node") - before[$node])) -le 3 ] ||
    fail "$(($(connections "$node") - before[$node])) connections to $node for 5 calls through the agent"
done
"$RATELIMIT" status --json >"$WORK/status.json"
python3 -c '
import json, sys
agent = json.load(open(sys.argv[1]))["agent"]
assert agent["decisions"] >= 14, agent
' "$WORK/status.json" || fail "status --json: $(cat "$WORK/status.json")"

# -v: the redirect that the agent follows for a key new to it, said by the caller as a direct
# call says it.
for i in $(seq 0 60); do
  [ "$(redis_cli n1 cluster keyslot "verbose$i")" -gt 5460 ] && break
done
key=verbose$i
expect_status 0 "$RATELIMIT" acquire --no-agent -v --rate 100/s --key "$key"
direct=$(cat "$WORK/stderr")
[[ $direct == "ratelimit: Redis Cluster: ratelimit:{$key} answered by redis://"*" after MOVED "* ]] ||
  fail "direct -v said '$direct'"
expect_status 0 "$RATELIMIT" acquire -v --rate 100/s --key "$key"
expect_stderr "$direct"
