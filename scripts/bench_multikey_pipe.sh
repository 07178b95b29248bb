#!/usr/bin/env bash
# Pipes with several keys (issue 42): two pipes of 200 kB, each on its own host key (80 kB/s),
# sharing a fleet key (50 kB/s), on the state file, on Redis through the host agent and on Redis
# with --no-agent, ROUNDS times each (default 3): the pair's sum rate against the fleet's 50 kB/s
# (process starts and Guava's free first chunk included), and both outputs byte-exact.
#   scripts/bench_multikey_pipe.sh                builds the bench tree and measures its binary
#   RATELIMIT=... scripts/bench_multikey_pipe.sh  measures that binary instead
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/setup.sh"
source "$root/scripts/redis_bench.sh"
use_bench_binary
rounds=${ROUNDS:-3}
WORK=$(mktemp -d)
start_socket_redis "$WORK/redis"
stop() {
  [ -s "$WORK/state/agent.lock" ] && kill "$(cat "$WORK/state/agent.lock")" 2>/dev/null
  kill "$server" 2>/dev/null
  rm -rf "$WORK"
}
trap stop EXIT
export RATELIMIT_STATE_DIR=$WORK/state RATELIMIT_AGENT_IDLE=10s
unset RATELIMIT_NO_AGENT
head -c 200000 /dev/urandom >"$WORK/in"
sleep 0.5

# pair LABEL STORE_OPTIONS...: the two pipes at once, and their sum rate.
pair() {
  local label=$1 start end first exact=byte-exact
  shift
  start=$(date +%s%N)
  "$RATELIMIT" --key "$label:a" --rate 80kB/s --key "$label:fleet" --rate 50kB/s "$@" \
    "$WORK/in" -o "$WORK/a" &
  first=$!
  "$RATELIMIT" --key "$label:b" --rate 80kB/s --key "$label:fleet" --rate 50kB/s "$@" \
    "$WORK/in" -o "$WORK/b"
  wait "$first"
  end=$(date +%s%N)
  cmp -s "$WORK/in" "$WORK/a" && cmp -s "$WORK/in" "$WORK/b" || exact=DIFFERS
  awk -v label="$label" -v ns=$((end - start)) -v exact=$exact 'BEGIN {
    printf "%s: 400000 bytes in %.3f s, %.0f B/s (%+.2f %% of the fleet key'"'"'s 50000), %s\n",
      label, ns / 1e9, 400000 / (ns / 1e9), (400000 / (ns / 1e9) / 50000 - 1) * 100, exact }'
}

echo "load before: $(uptime)"
for round in $(seq "$rounds"); do
  pair "file$round" --state-dir "$WORK/state"
  pair "agent$round" --redis "unix://$WORK/redis/sock"
  pair "direct$round" --redis "unix://$WORK/redis/sock" --no-agent
done
echo "load after: $(uptime)"
