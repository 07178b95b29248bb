#!/usr/bin/env bash
# Redis behind Sentinel: one master, one replica, one sentinel. A pipe with --key and two exec
# loops on one key while the master is killed and the replica promoted: they go on on the new
# master, outputs byte-exact, grants within rate x time + burst (+2 for replication lag and
# scheduling). A master demoted under a running pipe (READONLY): the pipe finds it again. No master
# within --redis-timeout: 69 after the timeout; the sentinel naming a master that is gone: 69 after
# --redis-failover-timeout, naming it; a stop signal ends the search at once.
# test_redis_sentinel_no_agent.sh runs it with --no-agent.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state

# A bad URL: one line, 64, the password never shown.
expect_status 64 "$RATELIMIT" acquire --redis 'redis-sentinel://:secret@127.0.0.1:1' --rate 1/s --key k
expect_stderr "ratelimit: bad Redis URL 'redis-sentinel://:***@127.0.0.1:1': expected /MASTER_NAME after the sentinels: redis-sentinel://host:port[,host:port...]/MASTER_NAME[/db]"

start_redis master
start_redis replica --replicaof 127.0.0.1 "$(cat "$WORK/master/port")"
start_sentinel sentinel cache master
wait_for_replica sentinel cache
sentinel_port=$(cat "$WORK/sentinel/port")
export RATELIMIT_REDIS=redis-sentinel://127.0.0.1:$sentinel_port/cache

# The master is found and says so under -v; a name the sentinel does not know is 69 within
# --redis-timeout.
expect_status 0 "$RATELIMIT" acquire -v --rate 10/s --key first
expect_stderr "ratelimit: Redis Sentinel: the master of 'cache' is redis://127.0.0.1:$(cat "$WORK/master/port")"
# The sentinels are asked in turn: one that is down is passed over.
expect_status 0 "$RATELIMIT" acquire --redis "redis-sentinel://127.0.0.1:1,127.0.0.1:$sentinel_port/cache" \
  --rate 10/s --key first
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis "redis-sentinel://127.0.0.1:$sentinel_port/other" \
  --redis-timeout 300ms --rate 10/s --key first
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at redis-sentinel://127.0.0.1:$sentinel_port/other: no master 'other' within 300ms (redis-sentinel://127.0.0.1:$sentinel_port knows no master 'other')"
[ "$ms" -ge 300 ] && [ "$ms" -lt 1800 ] || fail "an unknown master was given up after ${ms} ms"

random_file "$WORK/in" 500000
start=$(now_ns)
"$RATELIMIT" -v --key p --rate 150k --redis-timeout 5s <"$WORK/in" >"$WORK/pipe.out" \
  2>"$WORK/pipe.err" &
pipe=$!
exec_loop loop1 30 &
loop1=$!
exec_loop loop2 30 &
loop2=$!
sleep 1
stop_redis master KILL
killed=$(now_ns)
status=0
wait $pipe || status=$?
[ "$status" -eq 0 ] || fail "the pipe exited $status across the failover: $(cat "$WORK/pipe.err")"
# Looked at once the pipe ends: a key left idle expires once its bucket is full again (~2.5 s).
[ "$(redis_cli replica exists 'ratelimit:{p}')" = 1 ] || fail "the pipe's key is not on the new master"
wait $loop1 $loop2
cmp -s "$WORK/in" "$WORK/pipe.out" || fail "the pipe's output differs after the failover"
for loop in loop1 loop2; do
  seq 30 | cmp -s - "$WORK/$loop.out" || fail "$loop's output differs: $(cat "$WORK/$loop.err")"
  ! grep -q exited "$WORK/$loop.err" || fail "$loop: $(cat "$WORK/$loop.err")"
done
new_master=redis://127.0.0.1:$(cat "$WORK/replica/port")
# Said by the caller that met the failover: through the agent, that may be an exec of the loops
# (not under -v).
if [ -n "${E2E_NO_AGENT:-}" ]; then
  grep -q "Redis Sentinel: the master of 'cache' is $new_master" "$WORK/pipe.err" ||
    fail "the pipe did not say it found the new master: $(cat "$WORK/pipe.err")"
fi
starts_within_bound "$killed"
read -r _ gap _ _ <"$WORK/bound"
echo "failover: gap $gap ms from the kill to the first start on the new master" >&2

# A master demoted under a running pipe answers READONLY: the pipe asks again, the sentinel still
# names it but ROLE says replica, and once it is master again (within --redis-timeout) the pipe
# goes on.
start_redis other
random_file "$WORK/in2" 300000
"$RATELIMIT" -v --key p2 --rate 150k --redis-timeout 5s <"$WORK/in2" >"$WORK/pipe2.out" \
  2>"$WORK/pipe2.err" &
pipe=$!
sleep 0.7
redis_cli replica replicaof 127.0.0.1 "$(cat "$WORK/other/port")" >/dev/null
sleep 0.3
redis_cli replica replicaof no one >/dev/null
status=0
wait $pipe || status=$?
[ "$status" -eq 0 ] || fail "the pipe exited $status across a demotion: $(cat "$WORK/pipe2.err")"
cmp -s "$WORK/in2" "$WORK/pipe2.out" || fail "the pipe's output differs after a demotion"
grep -q "Redis Sentinel: $new_master is no longer the master of 'cache' (READONLY)" \
  "$WORK/pipe2.err" || fail "no READONLY seen: $(cat "$WORK/pipe2.err")"

# No master at all, the sentinel naming one that is gone (a failover that never ends): 69 once
# --redis-failover-timeout is over, naming it; a stop signal ends the search within 1 s.
stop_redis replica KILL
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-failover-timeout 1500ms --rate 10/s --key k
ms=$(ms_since "$start")
grep -q "^ratelimit: Redis at $RATELIMIT_REDIS: no master 'cache' within 1.5s of a failover (.*); raise --redis-failover-timeout above the sentinels' down-after-milliseconds plus the election$" "$WORK/stderr" ||
  fail "no master: $(cat "$WORK/stderr")"
[ "$ms" -ge 1500 ] && [ "$ms" -lt 3000 ] || fail "no master was given up after ${ms} ms"
expect_ended_by_signal TERM "during the search" 1000 \
  "$RATELIMIT" acquire --redis-timeout 30s --rate 10/s --key k
