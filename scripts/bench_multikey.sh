#!/usr/bin/env bash
# Several keys in one call (issue 42), on the state file and on Redis through the host agent:
#  - the crawler: 8 loops over 5 sites, `--key site:S --rate 2/s --key all --rate 5/s`, CRAWL_S
#    seconds (default 20): the worst window of each site and of the sum against rate x time +
#    burst + 1, and the sum's rate against 5/s;
#  - refusals take nothing: 4 users hammering their own 1/s key with --try every 100 ms and 16
#    others (1/s each, waiting) under a global 10/s, REFUSE_S seconds (default 20): the refusals,
#    and the global key's rate;
#  - Redis server time per decision (INFO commandstats, FCALL usec_per_call) of acquire with 1
#    key (today's single-key call), 2 and 4 keys, COST_CALLS calls each (default 300);
#  - wall time of acquire with 1 and 2 keys on the state file, COST_CALLS calls each, in BENCH_ROUNDS
#    alternating rounds (default 5), medians; in a state directory on tmpfs ($XDG_RUNTIME_DIR, else
#    /dev/shm), as users have it (a rename on a disk's journal costs a call more than its lock).
# Grants are measured as the e2e tests measure them (tests/e2e/multikey_shared.sh, acquire -vv).
#   scripts/bench_multikey.sh                builds the bench tree and measures its binary
#   RATELIMIT=... scripts/bench_multikey.sh  measures that binary instead
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/setup.sh"
source "$root/scripts/redis_bench.sh"
use_bench_binary
crawl_s=${CRAWL_S:-20} refuse_s=${REFUSE_S:-20} calls=${COST_CALLS:-300} rounds=${BENCH_ROUNDS:-5}
WORK=$(mktemp -d)
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
now_ns() { date +%s%N; }
source "$root/tests/e2e/multikey_shared.sh"
start_socket_redis "$WORK/redis"
wall_state=$(mktemp -d -p "${XDG_RUNTIME_DIR:-/dev/shm}")
stop() {
  [ -s "$WORK/state/agent.lock" ] && kill "$(cat "$WORK/state/agent.lock")" 2>/dev/null
  kill "$server" 2>/dev/null
  rm -rf "$WORK" "$wall_state"
}
trap stop EXIT
export RATELIMIT_STATE_DIR=$WORK/state RATELIMIT_AGENT_IDLE=60s
unset RATELIMIT_NO_AGENT
echo "load before: $(uptime)"

# crawl NAME STORE_OPTIONS...
crawl() {
  local name=$1 loop site pids=()
  shift
  for loop in 1 2 3 4 5 6 7 8; do
    site=$((loop % 5))
    multikey_loop "$name.$site.$loop" "$crawl_s" --key "site:$site" --rate 2/s --key all --rate 5/s "$@" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for site in 0 1 2 3 4; do expect_within_bound "$name site:$site" 2 2 "$WORK/$name.$site".*.grants; done
  expect_within_bound "$name all sites" 5 5 "$WORK/$name".*.grants
  python3 -c "print('$name: sum %+.2f %% of 5/s' % (($grant_rate / 5 - 1) * 100))"
}

# refusals NAME STORE_OPTIONS...
refusals() {
  local name=$1 loop pids=()
  shift
  for loop in 1 2 3 4; do
    hammer_loop "$name.hammer.$loop" "$refuse_s" --key "$name:hammer:$loop" --rate 1/s \
      --key "$name:global" --rate 10/s "$@" &
    pids+=($!)
  done
  for loop in $(seq 16); do
    multikey_loop "$name.user.$loop" "$refuse_s" --key "$name:user:$loop" --rate 1/s \
      --key "$name:global" --rate 10/s "$@" &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "$name: hammering users refused $(cat "$WORK/$name".hammer.*.status | grep -c '^75$') of" \
    "$(cat "$WORK/$name".hammer.*.status | wc -l) calls, granted $(cat "$WORK/$name".hammer.*.grants | wc -l)"
  for loop in 1 2 3 4; do expect_within_bound "$name hammer:$loop" 1 1 "$WORK/$name.hammer.$loop.grants"; done
  expect_within_bound "$name global" 10 10 "$WORK/$name".hammer.*.grants "$WORK/$name".user.*.grants
  python3 -c "print('$name: global %+.2f %% of 10/s' % (($grant_rate / 10 - 1) * 100))"
}

echo "== crawler, $crawl_s s: state file"
crawl crawl_file --state-dir "$WORK/state"
echo "== crawler, $crawl_s s: Redis through the agent"
crawl crawl_redis --redis "unix://$WORK/redis/sock" --redis-timeout 5s
echo "== refusals, $refuse_s s: state file"
refusals refuse_file --state-dir "$WORK/state"
echo "== refusals, $refuse_s s: Redis through the agent"
refusals refuse_redis --redis "unix://$WORK/redis/sock" --redis-timeout 5s

# key_options N PREFIX: N keys at 1e9/s (never waits).
key_options() {
  local i
  for i in $(seq "$1"); do printf -- '--key %s%s --rate 1G/s ' "$2" "$i"; done
}
echo "== Redis server time per decision (FCALL usec_per_call), $calls acquire calls each"
for keys in 1 2 4; do
  redis-cli -s "$WORK/redis/sock" config resetstat >/dev/null
  # shellcheck disable=SC2046 # the keys' options, split
  for _ in $(seq "$calls"); do
    "$RATELIMIT" acquire $(key_options "$keys" cost$keys:) --redis "unix://$WORK/redis/sock"
  done
  echo "$keys key(s): $(redis-cli -s "$WORK/redis/sock" info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_fcall:calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\).*/\2 us per call (\1 calls)/p')"
done

echo "== acquire wall time on the state file (tmpfs: $(df -T "$wall_state" | awk 'NR == 2 { print $2 }')), $calls calls, $rounds alternating rounds (medians)"
for round in $(seq "$rounds"); do
  for keys in 1 2; do
    start=$(now_ns)
    # shellcheck disable=SC2046
    for _ in $(seq "$calls"); do
      "$RATELIMIT" acquire $(key_options "$keys" wall$keys:) --state-dir "$wall_state"
    done
    echo "$keys $(((($(now_ns) - start) / calls) / 1000))" >>"$WORK/wall"
  done
done
for keys in 1 2; do
  echo "$keys key(s): $(awk -v k="$keys" '$1 == k { print $2 }' "$WORK/wall" | sort -n |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }') us per call (rounds: $(awk -v k="$keys" '$1 == k { printf "%s ", $2 }' "$WORK/wall"))"
done
echo "load after: $(uptime)"
