#!/usr/bin/env bash
# Redis Cluster of three masters on loopback, reached through one seed node: keys on every node
# (MOVED followed, -v names the node that answered), status and reset find each key's node, and a
# pipe and an exec loop go on, byte-exact, while their key's slot is migrated to another node
# (ASK, then MOVED). The seed node paused: 69 within --redis-timeout, a stop signal within 1 s; a
# node that a MOVED names gone: 69 within --redis-failover-timeout.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state

start_cluster n1 n2 n3
port() { cat "$WORK/$1/port"; }
export RATELIMIT_REDIS=redis://127.0.0.1:$(port n1)

# owner NAME: the node holding the bucket of key NAME.
owner() {
  local node
  for node in n1 n2 n3; do
    [ "$(redis_cli "$node" exists "ratelimit:{$1}")" = 1 ] && echo "$node"
  done
}

# One key per node (at 1/m, so that it outlives the test): redis-cli gives the three masters the slot ranges in the order they were named.
declare -A key_of
on_n2=()
i=0
for slot in $(for i in $(seq 0 60); do echo "cluster keyslot k$i"; done | redis_cli n1); do
  if [ "$slot" -le 5460 ]; then node=n1; elif [ "$slot" -le 10922 ]; then node=n2; else node=n3; fi
  [ -n "${key_of[$node]:-}" ] || key_of[$node]=k$i
  [ $node != n2 ] || on_n2+=("k$i")
  i=$((i + 1))
done
for node in n1 n2 n3; do
  key=${key_of[$node]}
  expect_status 0 "$RATELIMIT" acquire -v --rate 1/m --key "$key"
  [ "$(owner "$key")" = "$node" ] || fail "key $key is on '$(owner "$key")', not on $node"
  slot=$(redis_cli n1 cluster keyslot "$key")
  if [ "$node" = n1 ]; then
    expect_stderr ""
  else
    expect_stderr "ratelimit: Redis Cluster: ratelimit:{$key} answered by redis://127.0.0.1:$(port "$node") after MOVED $slot from $RATELIMIT_REDIS"
  fi
done

# status without a key lists every master's keys; with a key, and reset, find its node.
"$RATELIMIT" status >"$WORK/status"
for node in n1 n2 n3; do
  grep -q "${key_of[$node]}" "$WORK/status" || fail "status lacks ${key_of[$node]}: $(cat "$WORK/status")"
done
"$RATELIMIT" status --key "${key_of[n3]}" >"$WORK/status"
grep -q "${key_of[n3]}" "$WORK/status" || fail "status --key: $(cat "$WORK/status")"
expect_status 0 "$RATELIMIT" reset --key "${key_of[n3]}"
[ -z "$(owner "${key_of[n3]}")" ] || fail "reset left ${key_of[n3]} on $(owner "${key_of[n3]}")"

# The slots of a pipe's key and of an exec loop's key (both on n2) move to n3 mid-run: each key is
# still on n2 (served there), then migrated (ASK to n3), then the slot is n3's (MOVED).
key=${key_of[n2]}
exec_key=${on_n2[1]}
slot=$(redis_cli n1 cluster keyslot "$key")
expect_status 0 "$RATELIMIT" reset --key "$key" # its 1/m bucket
id2=$(redis_cli n2 cluster myid)
id3=$(redis_cli n3 cluster myid)
# migrate_to_n3 STAGE KEY...: STAGE 1 marks each KEY's slot as moving from n2 to n3, 2 migrates
# each KEY, 3 gives each slot to n3.
migrate_to_n3() {
  local stage=$1 name slot node
  shift
  for name in "$@"; do
    slot=$(redis_cli n1 cluster keyslot "$name")
    case $stage in
      1)
        redis_cli n3 cluster setslot "$slot" importing "$id2" >/dev/null
        redis_cli n2 cluster setslot "$slot" migrating "$id3" >/dev/null
        ;;
      2) redis_cli n2 migrate 127.0.0.1 "$(port n3)" "" 0 5000 keys "ratelimit:{$name}" >/dev/null ;;
      3) for node in n3 n2 n1; do redis_cli "$node" cluster setslot "$slot" node "$id3" >/dev/null; done ;;
    esac
  done
}
random_file "$WORK/in" 900000
"$RATELIMIT" -v --key "$key" --rate 150k <"$WORK/in" >"$WORK/pipe.out" 2>"$WORK/pipe.err" &
pipe=$!
(
  for i in $(seq 15); do
    "$RATELIMIT" exec --rate 10/s --key "$exec_key" -- echo "$i" || echo "exec $i exited $?" >&2
  done >"$WORK/loop.out" 2>"$WORK/loop.err"
) &
loop=$!
sleep 1
migrate_to_n3 1 "$key" "$exec_key"
sleep 0.3
migrate_to_n3 2 "$key" "$exec_key"
sleep 0.5
migrate_to_n3 3 "$key" "$exec_key"
status=0
wait $pipe || status=$?
[ "$status" -eq 0 ] || fail "the pipe exited $status across the resharding: $(cat "$WORK/pipe.err")"
wait $loop
cmp -s "$WORK/in" "$WORK/pipe.out" || fail "the pipe's output differs after the resharding"
seq 15 | cmp -s - "$WORK/loop.out" || fail "the exec loop's output differs: $(cat "$WORK/loop.err")"
[ ! -s "$WORK/loop.err" ] || fail "exec loop: $(cat "$WORK/loop.err")"
[ "$(owner "$key")" = n3 ] || fail "the key is on '$(owner "$key")' after the resharding"
n3_url=redis://127.0.0.1:$(port n3)
grep -q "answered by $n3_url after ASK $slot from redis://127.0.0.1:$(port n2)" "$WORK/pipe.err" ||
  fail "the pipe never followed an ASK: $(cat "$WORK/pipe.err")"
# Said once, not once per booking while the slot migrates.
[ "$(grep -c "after ASK" "$WORK/pipe.err")" -eq 1 ] ||
  fail "the ASK was said more than once: $(cat "$WORK/pipe.err")"
grep -q "answered by $n3_url after MOVED $slot from redis://127.0.0.1:$(port n2)" "$WORK/pipe.err" ||
  fail "the pipe never followed a MOVED: $(cat "$WORK/pipe.err")"

# A paused seed node: 69 after --redis-timeout; a stop signal at once. A node that a MOVED names
# gone (without a replica to promote): 69 after --redis-failover-timeout, naming it.
key=${key_of[n1]}
redis_cli n1 client pause 5000 all >/dev/null
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-timeout 300ms --rate 10/s --key "$key"
ms=$(ms_since "$start")
[ "$ms" -ge 300 ] && [ "$ms" -lt 1800 ] || fail "a paused node was given up after ${ms} ms"
expect_ended_by_signal TERM "while a node is paused" 1000 \
  "$RATELIMIT" acquire --redis-timeout 30s --rate 10/s --key "$key"
redis_cli n1 client unpause >/dev/null
stop_redis n2 KILL
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --redis-failover-timeout 500ms --rate 10/s --key "${on_n2[2]}"
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at redis://127.0.0.1:$(port n1): no answer for ratelimit:{${on_n2[2]}} within 0.5s of a failover (Redis at redis://127.0.0.1:$(port n2): Connection refused); raise --redis-failover-timeout above cluster-node-timeout plus the election"
[ "$ms" -ge 500 ] && [ "$ms" -lt 2000 ] || fail "a node that is gone was given up after ${ms} ms"
