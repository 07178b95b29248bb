#!/usr/bin/env bash
# A Sentinel failover with the default options is not an outage. Three sentinels (quorum 2):
# - the first one SIGSTOPped: acquire --redis-timeout 2s answers within its share, well under 2 s;
# - the master SIGKILLed, down-after-milliseconds 5000 (a failover of about 6 s): a pipe at
#   200 kB/s (--key up) across it is byte-exact and exits 0, and a loop of acquires loses no call;
#   8 loops of acquires at --redis-timeout 500ms never exit 70 and grant within rate x time + burst;
# - the master and the first sentinel SIGSTOPped together mid-pipe: the pipe goes on, byte-exact.
# One sentinel naming a dead master, two others naming two masters: acquire finds one and warns
# once of the split brain. A master refusing writes for want of replicas (NOREPLICAS) is asked
# again until --redis-failover-timeout.
# test_redis_failover_no_agent.sh runs it with --no-agent.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state

# start_deployment SET DOWN_AFTER_MS: SET-master, its replica SET-replica and three sentinels
# SET-s1..3 watching it as SET; RATELIMIT_REDIS names them, SET-s1 first.
start_deployment() {
  local set=$1 i ports=()
  start_redis "$set-master"
  start_redis "$set-replica" --replicaof 127.0.0.1 "$(cat "$WORK/$set-master/port")"
  for i in 1 2 3; do
    SENTINEL_QUORUM=2 SENTINEL_DOWN_AFTER=$2 start_sentinel "$set-s$i" "$set" "$set-master"
    ports+=("127.0.0.1:$(cat "$WORK/$set-s$i/port")")
  done
  wait_for_replica "$set-s1" "$set"
  # Until each sentinel has heard of the other two (they say hello every 2 s): a failover needs
  # two votes.
  for i in 1 2 3; do
    waited=0
    until redis-cli -p "$(cat "$WORK/$set-s$i/port")" sentinel master "$set" |
      grep -A1 -x num-other-sentinels | grep -qx 2; do
      [ $waited -lt 1000 ] || fail "sentinel $set-s$i never heard of the others"
      sleep 0.01
      waited=$((waited + 1))
    done
  done
  export RATELIMIT_REDIS=redis-sentinel://$(IFS=,; echo "${ports[*]}")/$set
}

# A sentinel that hangs costs its share of --redis-timeout (2 s / 4), not the whole.
start_deployment one 5000
kill -STOP "$(cat "$WORK/one-s1/pid")"
start=$(now_ns)
expect_status 0 "$RATELIMIT" acquire --redis-timeout 2s --rate 10/s --key fair
ms=$(ms_since "$start")
[ "$ms" -lt 1500 ] || fail "with the first sentinel stopped, acquire took ${ms} ms"
kill -CONT "$(cat "$WORK/one-s1/pid")"

# The master SIGKILLed 2 s into a 3 MB pipe at 200 kB/s, while a loop of acquires runs: the
# sentinels take about 6 s to fail over, within --redis-failover-timeout's default.
random_file "$WORK/in" 3000000
"$RATELIMIT" --key up --rate 200kB/s <"$WORK/in" >"$WORK/pipe.out" 2>"$WORK/pipe.err" &
pipe=$!
(
  for i in $(seq 40); do
    status=0
    "$RATELIMIT" acquire --rate 4/s --key calls 2>>"$WORK/loop.err" || status=$?
    echo "$i $status" >>"$WORK/loop.out"
  done
) &
loop=$!
# 8 loops of acquires at --redis-timeout 500ms on one key until the pipe ends: none exits 70, and
# the grants keep within rate x time + burst (+ 8 in flight).
eights=()
for i in $(seq 8); do
  (
    until [ -e "$WORK/pipe.done" ]; do
      status=0
      "$RATELIMIT" acquire --rate 20/s --key eight --redis-timeout 500ms 2>>"$WORK/eight.err" ||
        status=$?
      echo "$(now_ns) $status" >>"$WORK/eight.$i"
    done
  ) &
  eights+=($!)
done
sleep 2
stop_redis one-master KILL
status=0
wait $pipe || status=$?
: >"$WORK/pipe.done"
wait "${eights[@]}"
cat "$WORK"/eight.[1-8] | sort -n >"$WORK/eight.all"
! awk '$2 == 70' "$WORK/eight.all" | grep -q . || fail "acquires at --redis-timeout 500ms exited 70: $(head -3 "$WORK/eight.err")"
awk '$2 == 0 { if (!first) first = $1; last = $1; n++ }
  END { bound = 20 * (last - first) / 1e9 + 20 + 8; if (n > bound) { print n " grants, bound " bound; exit 1 } }' \
  "$WORK/eight.all" || fail "8 loops across the failover granted too many"
[ "$status" -eq 0 ] || fail "the pipe exited $status across the failover: $(cat "$WORK/pipe.err")"
cmp -s "$WORK/in" "$WORK/pipe.out" || fail "the pipe's output differs after the failover"
wait $loop
[ "$(awk '$2 == 0' "$WORK/loop.out" | wc -l)" -eq 40 ] ||
  fail "acquires lost across the failover: $(awk '$2 != 0' "$WORK/loop.out" | head -3) $(head -3 "$WORK/loop.err")"
! grep -q 'split brain' "$WORK/pipe.err" "$WORK/loop.err" || fail "a split brain seen in a failover"
for i in 1 2 3; do kill "$(cat "$WORK/one-s$i/pid")"; done
stop_redis one-replica

# The master and the first sentinel SIGSTOPped together (one host lost) 2 s into a pipe.
start_deployment two 1000
random_file "$WORK/in2" 1000000
"$RATELIMIT" -v --key up2 --rate 200kB/s <"$WORK/in2" >"$WORK/pipe2.out" 2>"$WORK/pipe2.err" &
pipe=$!
sleep 2
kill -STOP "$(cat "$WORK/two-master/pid")" "$(cat "$WORK/two-s1/pid")"
status=0
wait $pipe || status=$?
kill -CONT "$(cat "$WORK/two-master/pid")" "$(cat "$WORK/two-s1/pid")"
[ "$status" -eq 0 ] || fail "the pipe exited $status after a host was lost: $(cat "$WORK/pipe2.err")"
cmp -s "$WORK/in2" "$WORK/pipe2.out" || fail "the pipe's output differs after a host was lost"
grep -q "the master of 'two' is redis://127.0.0.1:$(cat "$WORK/two-replica/port")" "$WORK/pipe2.err" ||
  fail "the pipe did not find the new master: $(cat "$WORK/pipe2.err")"
for i in 1 2 3; do kill "$(cat "$WORK/two-s$i/pid")"; done
stop_redis two-master
stop_redis two-replica

# Split brain: s1 names a dead master, s2 and s3 two live ones. acquire takes s2's after s1's
# failed (a failover, for all it knows) and warns once that s3's says it is the master too.
start_redis dead
start_redis left
start_redis right
SENTINEL_DOWN_AFTER=60000 start_sentinel split-s1 split dead
SENTINEL_DOWN_AFTER=60000 start_sentinel split-s2 split left
SENTINEL_DOWN_AFTER=60000 start_sentinel split-s3 split right
stop_redis dead KILL
expect_status 0 "$RATELIMIT" acquire --rate 10/s --key split --redis \
  "redis-sentinel://127.0.0.1:$(cat "$WORK/split-s1/port"),127.0.0.1:$(cat "$WORK/split-s2/port"),127.0.0.1:$(cat "$WORK/split-s3/port")/split"
left=redis://127.0.0.1:$(cat "$WORK/left/port")
right=redis://127.0.0.1:$(cat "$WORK/right/port")
expect_stderr "ratelimit: Redis Sentinel: $left and $right both say they are the master of 'split' (redis-sentinel://127.0.0.1:$(cat "$WORK/split-s3/port") names $right): a split brain; until one is demoted, each grants the key's rate"

# min-replicas-to-write with no replica: the master refuses (NOREPLICAS), nothing written; taken
# for a master cut off and replaced, asked again until --redis-failover-timeout, which is named.
start_redis lonely
start_sentinel lonely-s lonely lonely
redis_cli lonely config set min-replicas-to-write 1 >/dev/null
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-failover-timeout 1s --rate 10/s --key lonely \
  --redis "redis-sentinel://127.0.0.1:$(cat "$WORK/lonely-s/port")/lonely"
ms=$(ms_since "$start")
grep -q "no master 'lonely' within 1s of a failover (redis://127.0.0.1:$(cat "$WORK/lonely/port"): NOREPLICAS .*); raise --redis-failover-timeout" "$WORK/stderr" ||
  fail "NOREPLICAS: $(cat "$WORK/stderr")"
[ "$ms" -ge 1000 ] && [ "$ms" -lt 2500 ] || fail "NOREPLICAS was given up after ${ms} ms"
