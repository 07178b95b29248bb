#!/usr/bin/env bash
# A Redis Cluster of three masters, each with a replica (cluster-node-timeout 2000), reached
# through the first node: the master of a pipe's key SIGKILLed mid-pipe, the Cluster promotes its
# replica, and the pipe (default options) goes on there, byte-exact, exit 0.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
port() { cat "$WORK/$1/port"; }

nodes=()
for name in c1 c2 c3 c4 c5 c6; do
  start_redis "$name" --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout 2000
  nodes+=("127.0.0.1:$(port "$name")")
done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$WORK/create.log" 2>&1 ||
  fail "redis-cli --cluster create failed: $(tail -3 "$WORK/create.log")"
# Until every node says the Cluster is ok and every replica is in sync.
for name in c1 c2 c3 c4 c5 c6; do
  waited=0
  until redis_cli "$name" cluster info | grep -q '^cluster_state:ok' &&
    { redis_cli "$name" info replication | grep -q '^role:master' ||
      redis_cli "$name" info replication | grep -q '^master_link_status:up'; }; do
    [ $waited -lt 1000 ] || fail "the Cluster never became ok on $name"
    sleep 0.01
    waited=$((waited + 1))
  done
done

# A key whose slot another node than the URL's serves, and that node.
for i in $(seq 100); do
  slot=$(redis_cli c1 cluster keyslot "ratelimit:{k$i}")
  owner=$(redis_cli c1 cluster nodes | awk -v slot="$slot" '/master/ {
    for (f = 9; f <= NF; f++) { split($f, r, "-"); if (slot >= r[1] && slot <= (r[2] == "" ? r[1] : r[2])) print $2 } }' |
    cut -d@ -f1)
  [ "$owner" != "127.0.0.1:$(port c1)" ] && key=k$i && break
done
for name in c1 c2 c3 c4 c5 c6; do [ "127.0.0.1:$(port "$name")" = "$owner" ] && victim=$name; done
export RATELIMIT_REDIS=redis://127.0.0.1:$(port c1)

random_file "$WORK/in" 2000000
"$RATELIMIT" -v --key "$key" --rate 200kB/s <"$WORK/in" >"$WORK/pipe.out" 2>"$WORK/pipe.err" &
pipe=$!
sleep 2
stop_redis "$victim" KILL
status=0
wait $pipe || status=$?
[ "$status" -eq 0 ] || fail "the pipe exited $status across the failover: $(cat "$WORK/pipe.err")"
cmp -s "$WORK/in" "$WORK/pipe.out" || fail "the pipe's output differs after the failover"
grep -q "Redis Cluster: .*; asking the Cluster again" "$WORK/pipe.err" ||
  fail "the pipe never saw the failover: $(cat "$WORK/pipe.err")"
promoted=$(redis_cli c1 cluster nodes | awk -v slot="$slot" '/master/ && !/fail/ {
  for (f = 9; f <= NF; f++) { split($f, r, "-"); if (slot >= r[1] && slot <= (r[2] == "" ? r[1] : r[2])) print $2 } }' |
  cut -d@ -f1)
grep -q "ratelimit:{$key} answered by redis://$promoted after MOVED $slot" "$WORK/pipe.err" ||
  fail "the pipe did not go on at the promoted replica $promoted: $(cat "$WORK/pipe.err")"
