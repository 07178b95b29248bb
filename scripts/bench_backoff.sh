#!/usr/bin/env bash
# Backing off together (issue 40), against a real HTTP service on loopback
# (tests/e2e/http_429_server.py): a hidden token bucket of 8/s (burst 8) answering 429 with
# Retry-After: 1 beyond it, whose capacity halves at 15 s (another client arrives); 6 loops of
# curl sharing a key configured at 20/s, 30 s: on one host (state file), or with `redis` as the
# issue's fleet: 3 hosts (3 state directories, an agent each) x 2 loops over one redis-server of
# the script's own (unix socket in a temp dir). Each way in three ways:
#   none      ratelimit acquire, then curl: no back-off (what ratelimit did before);
#   retry     the same with curl --retry 5, each transfer honouring Retry-After on its own;
#   together  ratelimit acquire, then curl; a 429 reported with `ratelimit throttle`.
# For each: the requests per second and the share answered 429 from 5 s to 15 s, the share of
# the service's capacity used then (8/s), and the same from 20 s to 30 s (4/s). Then a single
# Retry-After of 30 s, 5 s into a run of `together`: the requests that reached the service
# during it (0.1 s of grace for a request sent between the 429 and its report).
#   RATELIMIT=build/release/src/ratelimit scripts/bench_backoff.sh [redis]   measures that binary
# Writes bench/results/backoff.md (redis: backoff_redis.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${RATELIMIT:-}" ]; then
  source "$root/scripts/setup.sh"
  build_bench_tree
fi
export RATELIMIT
source "$root/tests/e2e/lib.sh"
source "$root/tests/e2e/backoff_http.sh"
store=${1:-file}
case $store in
  file)
    trap 'stop_service; rm -rf "$WORK"' EXIT
    results=$root/bench/results/backoff.md hosts=1 loops_per_host=6
    setup="6 loops of curl on one host (state file)"
    ;;
  redis)
    source "$root/tests/e2e/redis_server.sh"
    trap 'stop_service; stop_agents_and_redis' EXIT
    start_redis redis
    export RATELIMIT_REDIS=unix://$WORK/redis/sock
    results=$root/bench/results/backoff_redis.md hosts=3 loops_per_host=2
    setup="3 hosts (3 state directories, an agent each) x 2 loops of curl over one Redis"
    ;;
  *)
    echo "usage: scripts/bench_backoff.sh [file|redis]" >&2
    exit 64
    ;;
esac
seconds=${BENCH_SECONDS:-30}

# One loop of each way but together (curl_loop).
plain_loop() {
  local until=$(($(now_ns) + $1 * 1000000000)) key=$2 way=$3
  shift 3
  while [ "$(now_ns)" -lt "$until" ]; do
    "$RATELIMIT" acquire --key "$key" "$@" || return 1
    case $way in
      none) curl -s -o /dev/null "$service_url" || true ;;
      retry) curl -s -o /dev/null --retry 5 "$service_url" || true ;;
    esac
  done
}

# run_fleet WAY SECONDS [NAME]: the loops of WAY for SECONDS on key api-NAME (NAME: WAY by
# default), $loops_per_host on each of $hosts hosts (a state directory $WORK/NAME-hostN each: its
# own agent over Redis), until all have ended.
run_fleet() {
  local way=$1 name=${3:-$1} pids=() pid host
  for host in $(seq "$hosts"); do
    for _ in $(seq "$loops_per_host"); do
      if [ "$way" = together ]; then
        RATELIMIT_STATE_DIR=$WORK/$name-host$host curl_loop "$2" "api-$name" --rate 20/s &
      else
        RATELIMIT_STATE_DIR=$WORK/$name-host$host plain_loop "$2" "api-$name" "$way" --rate 20/s &
      fi
      pids+=($!)
    done
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

# measure WAY: one run of the fleet; prints its row of the table.
measure() {
  local way=$1
  start_service 8 8 1 30
  ( sleep 15 && kill -USR1 "$service_pid" ) &
  run_fleet "$way" "$seconds"
  stop_service
  awk -v way="$way" '
    $1 >= 5 && $1 < 15 { n1++; if ($2 == 429) t1++; else ok1++ }
    $1 >= 20 && $1 < 30 { n2++; if ($2 == 429) t2++; else ok2++ }
    END {
      printf "| %s | %.1f/s, %.1f %% 429 | %.0f %% | %.1f/s, %.1f %% 429 | %.0f %% |\n", way,
        n1 / 10, 100 * t1 / n1, 100 * ok1 / 10 / 8, n2 / 10, 100 * t2 / n2, 100 * ok2 / 10 / 4
    }' "$WORK/service.log"
}

long_pause() {
  start_service 8 8 1 30
  ( sleep 5 && kill -USR2 "$service_pid" ) &
  run_fleet together 40 long
  stop_service
  awk '$3 == 30 && !at { at = $1 } at && $1 > at + 0.1 && $1 < at + 30 { n++ }
       at && $1 >= at + 30 { after++ }
       END { printf "%d requests during the 30 s (after: %d in the next %.0f s)\n", n, after, 40 - at - 30 }' \
    "$WORK/service.log"
}

load=$(uptime)
{
  echo "# Backing off together"
  echo
  echo "\`scripts/bench_backoff.sh\` ($(date -u +%Y-%m-%d), $("$RATELIMIT" --version | head -1)); load: $load"
  echo
  echo "$setup, key at 20/s; the service: 8/s (burst 8), 429 with"
  echo "Retry-After: 1 beyond it, 4/s from 15 s on. Rates are requests per second reaching it; used:"
  echo "successes against its capacity."
  echo
  echo "| way | 5-15 s: requests, 429s | used of 8/s | 20-30 s: requests, 429s | used of 4/s |"
  echo "| --- | --- | --- | --- | --- |"
  for way in none retry together; do measure "$way"; done
  echo
  echo "A single Retry-After: 30, 5 s into a run of the same loops backing off together: $(long_pause)."
} | tee "$results"
