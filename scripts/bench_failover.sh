#!/usr/bin/env bash
# A Sentinel failover under load, with ratelimit's default options: a master, its replica and one
# sentinel on loopback, with Sentinel's default down-after-milliseconds (30000) and with 5000
# (DOWN_AFTER="30000 5000", RUNS=2 each: about 2 minutes); 2 exec loops as 2 hosts on one key at
# 20/s and a pipe at 1 MB/s on another while the master is killed (SIGKILL) 2 s in. Per run:
#   gap     the time from the kill to the first exec granted by the new master (-v names it);
#   excess  the pipe's worst window beyond rate x its length + burst (+ one read): what the
#           replication lag let the new master grant again.
# Writes bench/results/failover.md. RATELIMIT=path skips the bench build (any Release binary).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages redis-server redis-tools redis-sentinel
use_bench_binary
E2E=$RATELIMIT_ROOT/tests/e2e
source "$E2E/lib.sh"
source "$E2E/redis_server.sh"
set +e

# reader.py: copies nothing, logs "monotonic_seconds cumulative_bytes" per read of stdin.
cat >"$WORK/reader.py" <<'PY'
import os, sys, time
total = 0
with open(sys.argv[1], "w") as log:
    while True:
        data = os.read(0, 1 << 16)
        if not data:
            break
        total += len(data)
        log.write(f"{time.monotonic()} {total}\n")
        log.flush()
PY
rows=""
run=0
for down_after in ${DOWN_AFTER:-30000 5000}; do
for repeat in $(seq "${RUNS:-2}"); do
  run=$((run + 1))
  export SENTINEL_DOWN_AFTER=$down_after
  start_redis "master$run"
  start_redis "replica$run" --replicaof 127.0.0.1 "$(cat "$WORK/master$run/port")"
  start_sentinel "sentinel$run" "cache$run" "master$run"
  wait_for_replica "sentinel$run" "cache$run"
  export RATELIMIT_REDIS=redis-sentinel://127.0.0.1:$(cat "$WORK/sentinel$run/port")/cache$run
  new_master=redis://127.0.0.1:$(cat "$WORK/replica$run/port")
  starts=$WORK/starts$run
  : >"$starts"
  # Past the failover: the kill at 2 s, down-after, the election, and 5 s on the new master.
  end=$(($(now_ns) + (down_after + 10000) * 1000000))
  loops=()
  # 2 exec loops: each start labelled with the master that granted it (-v names each one found).
  for host in 1 2; do
    (
      while [ "$(now_ns)" -lt $end ]; do
        RATELIMIT_STATE_DIR=$WORK/host$host "$RATELIMIT" exec -v --rate 20/s --key k \
          -- date +%s%N >"$WORK/exec$host.out" 2>"$WORK/exec$host.err"
        label=old
        grep -q "is $new_master" "$WORK/exec$host.err" && label=new
        echo "$(cat "$WORK/exec$host.out") $label" >>"$starts"
      done
    ) &
    loops+=($!)
  done
  # A pipe at 1 MB/s (burst 1 s) on its own key, its output timed by reader.py, its exit status
  # kept.
  head -c 5000000 /dev/zero | {
    RATELIMIT_STATE_DIR=$WORK/host3 "$RATELIMIT" --key bytes --rate 1M
    echo $? >"$WORK/pipe_status$run"
  } | python3 "$WORK/reader.py" "$WORK/reads$run" &
  pipe=$!
  sleep 2
  killed=$(now_ns)
  kill -KILL "$(cat "$WORK/master$run/pid")"
  wait "${loops[@]}"
  wait "$pipe"
  gap=$(awk -v killed="$killed" '$2 == "new" && (first == "" || $1 < first) { first = $1 }
    END { printf "%.0f", (first - killed) / 1e6 }' "$starts")
  excess=$(python3 - "$WORK/reads$run" <<'PY'
import sys
samples = [tuple(map(float, line.split())) for line in open(sys.argv[1])]
# Bytes written in (t_i, t_j] against rate x (t_j - t_i) + burst + one 64 kB read of slack.
worst = 0.0
for i in range(len(samples)):
    for j in range(i + 1, len(samples)):
        over = samples[j][1] - samples[i][1] - (1e6 * (samples[j][0] - samples[i][0]) + 1e6 + 65536)
        worst = max(worst, over)
print(f"{worst:.0f} B; {samples[-1][1] / 1e6:.1f} MB in {samples[-1][0] - samples[0][0]:.1f} s", end="")
PY
)
  row="| $down_after ms | $run | $(wc -l <"$starts") starts, $(grep -c ' new$' "$starts") on the new master | $gap ms | $excess, exit $(cat "$WORK/pipe_status$run") |"
  echo "$row" >&2
  rows+="$row"$'\n'
  kill "$(cat "$WORK/sentinel$run/pid")" "$(cat "$WORK/replica$run/pid")" 2>/dev/null
done
done

{
  echo "# Sentinel failover (scripts/bench_failover.sh)"
  echo
  echo "2 exec loops on one key at 20/s and a pipe at 1 MB/s on another, through redis-sentinel://"
  echo "with ratelimit's default options; the master SIGKILLed 2 s in; one sentinel (quorum 1) with"
  echo "the down-after-milliseconds of the first column. Command: scripts/bench_failover.sh"
  echo "(DOWN_AFTER=\"${DOWN_AFTER:-30000 5000}\" RUNS=${RUNS:-2})."
  echo "$(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg) at the end, $(date -u +%F)."
  echo
  echo "| down-after | run | exec grants | gap: kill to the first exec granted by the new master | pipe: worst window beyond rate x time + burst |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s' "$rows"
} >"$RESULTS/failover.md"
cat "$RESULTS/failover.md"
