#!/usr/bin/env bash
# A 10 s Redis outage under each --on-redis-error policy, in about a minute: 4 pipes as 4 hosts
# (their own state directories) share one key of 100 kB/s (burst 1 s) through a redis-server on a
# unix socket, killed (SIGKILL) 2 s in and started again 10 s later. For each policy:
#   delivered  the bytes the 4 hosts wrote during the outage (from the kill to the restart);
#   bound      what the man page's formula allows: N x share x rate x (T + burst) + 3 chunks a host
#              (fail: the 2 chunks a host booked before the kill; allow: none);
#   back       from the restart to the first write of the key by a pipe again (sampled every 50 ms).
# Writes bench/results/outage.md. RATELIMIT=path skips the bench build (any Release binary).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages redis-server redis-tools
use_bench_binary
E2E=$RATELIMIT_ROOT/tests/e2e
source "$E2E/lib.sh"
source "$E2E/redis_server.sh"
set +e

hosts=4
rate=100000
outage_s=10
# Each host's source: 100 MB, far more than the rate moves in the run (allow, unthrottled, may
# move all of it: its row then says so by its size).
head -c 100000000 /dev/zero >"$WORK/zeros"

bytes_written() { cat "$WORK"/out.* 2>/dev/null | wc -c; }

rows=""
for policy in fail allow local local:25%; do
  name=redis-${policy//[:%]/}
  start_redis "$name"
  sock=$WORK/$name/sock
  rm -f "$WORK"/out.* "$WORK"/err.*
  pipes=()
  for host in $(seq $hosts); do
    RATELIMIT_STATE_DIR=$WORK/$name-host$host "$RATELIMIT" --rate $rate --key outage \
      --redis "unix://$sock" --on-redis-error "$policy" <"$WORK/zeros" >"$WORK/out.$host" \
      2>"$WORK/err.$host" &
    pipes+=($!)
  done
  sleep 2
  kill -KILL "$(cat "$WORK/$name/pid")"
  killed=$(now_ns)
  before=$(bytes_written)
  sleep $outage_s
  after=$(bytes_written)
  outage_ms=$(ms_since "$killed")
  start_redis "$name"
  restarted=$(now_ns)
  back=""
  for _ in $(seq 60); do
    if [ -n "$(redis-cli -s "$sock" hget 'ratelimit:{outage}' free_ns 2>/dev/null)" ]; then
      back="$(ms_since "$restarted") ms"
      break
    fi
    sleep 0.05
  done
  # Each host asks about once a second: 2 s for all of them to be back.
  [ -n "$back" ] && sleep 2
  kill "${pipes[@]}" 2>/dev/null
  statuses=""
  for pipe in "${pipes[@]}"; do
    wait "$pipe" 2>/dev/null
    statuses+="$? "
  done
  kill "$(cat "$WORK/$name/pid")" 2>/dev/null
  delivered=$((after - before))
  share=1
  [ "$policy" = local:25% ] && share=0.25
  # Three chunks a host: the 2 booked on the key before the kill and the first of its own
  # bucket; at 100 kB/s a chunk is 108 ms of the rate, 10.8 kB.
  bound=$(awk -v p="$policy" -v n=$hosts -v s=$share -v r=$rate -v ms="$outage_ms" 'BEGIN {
    chunk = 0.108 * r
    if (p == "allow") { print "none"; exit }
    if (p == "fail") { printf "%d", n * 2 * chunk; exit }
    chunks = n * 3 * chunk
    printf "%d", n * s * r * (ms / 1000 + 1) + chunks }')
  said_back=$(cat "$WORK"/err.* | grep -c 'answers again; back on the shared bucket')
  ratio=$(awk -v d=$delivered -v r=$rate -v ms="$outage_ms" 'BEGIN { printf "%.2f", d / (r * ms / 1000) }')
  row="| $policy | $outage_ms ms | $delivered B | $bound | $ratio | ${back:-not within 3 s} | $said_back of $hosts | $statuses|"
  echo "$row" >&2
  rows+="$row"$'\n'
done

{
  echo "# A Redis outage (scripts/bench_outage.sh)"
  echo
  echo "$hosts pipes as $hosts hosts (their own state directories) on one key of $((rate / 1000)) kB/s, burst 1 s,"
  echo "through redis-server on a unix socket, SIGKILLed 2 s in and started again ${outage_s} s later."
  echo "delivered: bytes the hosts wrote between the kill and the restart; bound: N x share x rate"
  echo "x (T + burst) + 3 chunks a host (man page, --on-redis-error); back: restart to the key written"
  echo "again (sampled every 50 ms; fail: the pipes had ended; allow: they may have run out of input);"
  echo "x rate: delivered / (the key's rate x the outage); said back: hosts that printed the return line;"
  echo "exit statuses: 143 is the bench's SIGTERM at the end of the row, 2 s after the key is back."
  echo "Command: scripts/bench_outage.sh (RATELIMIT=build/release/src/ratelimit to skip the build)."
  echo "$(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg) at the end, $(date -u +%F)."
  echo
  echo "| policy | outage | delivered | bound | x rate | back on the key | said back | exit statuses |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s' "$rows"
} >"$RESULTS/outage.md"
cat "$RESULTS/outage.md"
