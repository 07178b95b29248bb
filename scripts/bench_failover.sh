#!/usr/bin/env bash
# A Sentinel failover under load, in about a minute: a master, its replica and one sentinel
# (down-after-milliseconds 300) on loopback; 4 exec loops as 4 hosts share 20/s on one key
# (burst 1 s) while the master is killed (SIGKILL) 2 s in. Three runs; for each:
#   gap     the time from the kill to the first start granted by the new master;
#   excess  the most starts in any window beyond rate x its length + burst + 1 (the bound without
#           replication lag): what the lag let the new master grant again.
# Writes bench/results/failover.md. RATELIMIT=path skips the bench build (any Release binary).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages redis-server redis-tools redis-sentinel
if [ -z "${RATELIMIT:-}" ]; then
  build_bench_tree
else
  RESULTS=$RATELIMIT_ROOT/bench/results
fi
export RATELIMIT
E2E=$RATELIMIT_ROOT/tests/e2e
source "$E2E/lib.sh"
source "$E2E/redis_server.sh"
set +e

rows=""
for run in 1 2 3; do
  start_redis "master$run"
  start_redis "replica$run" --replicaof 127.0.0.1 "$(cat "$WORK/master$run/port")"
  start_sentinel "sentinel$run" "cache$run" "master$run"
  wait_for_replica "sentinel$run" "cache$run"
  export RATELIMIT_REDIS=redis-sentinel://127.0.0.1:$(cat "$WORK/sentinel$run/port")/cache$run
  starts=$WORK/starts$run
  : >"$starts"
  end=$(($(now_ns) + 7000000000))
  loops=()
  for host in 1 2 3 4; do
    (
      while [ "$(now_ns)" -lt $end ]; do
        RATELIMIT_STATE_DIR=$WORK/host$host "$RATELIMIT" exec --rate 20/s --key k \
          --redis-timeout 5s -- sh -c 'date +%s%N >>"$0"' "$starts" || echo "exec exited $?" >&2
      done
    ) &
    loops+=($!)
  done
  sleep 2
  killed=$(now_ns)
  kill -KILL "$(cat "$WORK/master$run/pid")"
  wait "${loops[@]}"
  row=$(sort -n "$starts" | awk -v killed="$killed" '
    { t[NR] = $1 / 1e9 }
    END {
      gap = -1
      for (i = 1; i <= NR; i++) if (t[i] * 1e9 > killed) { gap = (t[i] * 1e9 - killed) / 1e6; break }
      excess = 0
      for (i = 1; i <= NR; i++) for (j = i; j <= NR; j++) {
        over = (j - i + 1) - (20 * (t[j] - t[i]) + 20 + 1)
        if (over > excess) excess = over
      }
      printf "| %d | %d starts in %.2f s | %.0f ms | %.1f |", run, NR, t[NR] - t[1], gap, excess
    }' run="$run")
  echo "$row" >&2
  rows+="$row"$'\n'
  kill "$(cat "$WORK/sentinel$run/pid")" "$(cat "$WORK/replica$run/pid")" 2>/dev/null
done

{
  echo "# Sentinel failover (scripts/bench_failover.sh)"
  echo
  echo "4 exec loops sharing 20/s (burst 1 s) through redis-sentinel://, master SIGKILLed 2 s in;"
  echo "sentinel down-after-milliseconds 300, quorum 1. $(nproc) cores, $(date -u +%F)."
  echo
  echo "| run | grants | gap: kill to first grant on the new master | starts beyond rate x time + burst + 1 |"
  echo "| --- | --- | --- | --- |"
  printf '%s' "$rows"
} >"$RESULTS/failover.md"
cat "$RESULTS/failover.md"
