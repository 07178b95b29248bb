#!/usr/bin/env bash
# Four pipes on one --key, of 0.25, 0.5, 0.75 and 1 s of a 1 MB/s rate, each ending before the
# next, on the state file and on Redis: byte-exact outputs whose sum is the key's rate within 2 %
# (a pipe that ends leaves no turn idle: its last chunk is booked exactly), and no 100 ms window
# holds more than 1.3 times the rate x 0.1 s (a short last chunk and the next pipe's chunk on the
# key do not go out together: chunks go in parts spread over their time). Each read of the
# outputs is timestamped by a reader of its own.
# Timing: up to three attempts per store on a loaded machine (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
command -v redis-server >/dev/null || skip "redis-server is not installed"
start_redis main

for i in 0 1 2 3; do random_file "$WORK/in$i" $((250000 * (i + 1))); done

# timed_reader FIFO OUT TRACE: copies FIFO to OUT, one line "seconds bytes" per read in TRACE.
timed_reader() {
  python3 -c '
import os, sys, time
source = os.open(sys.argv[1], os.O_RDONLY)
with open(sys.argv[2], "wb") as out, open(sys.argv[3], "w") as trace:
    while True:
        data = os.read(source, 1 << 20)
        if not data:
            break
        trace.write("%.6f %d\n" % (time.monotonic(), len(data)))
        out.write(data)' "$@"
}

# four_pipes KEY STORE_ARGS...: one run, each output compared with its input; writes to
# $WORK/result what merged_traces.awk says of the outputs: the error of their sum against the rate,
# their worst 100 ms window as a multiple of the rate x 0.1 s, and each pipe's share.
four_pipes() {
  local key=$1 i pids=()
  shift
  for i in 0 1 2 3; do
    rm -f "$WORK/fifo$i"
    mkfifo "$WORK/fifo$i"
    timed_reader "$WORK/fifo$i" "$WORK/out$i" "$WORK/trace$i" &
    pids+=($!)
  done
  for i in 0 1 2 3; do
    "$RATELIMIT" --rate 1M --key "$key" "$@" <"$WORK/in$i" >"$WORK/fifo$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for i in 0 1 2 3; do
    cmp -s "$WORK/in$i" "$WORK/out$i" || fail "pipe $i on key $key ($*) changed its data"
  done
  for i in 0 1 2 3; do awk -v pipe=$i '{ print $1, $2, pipe }' "$WORK/trace$i"; done | sort -n -k1,1 |
    awk -v rate=1000000 -v pipes=4 -f "$(dirname "${BASH_SOURCE[0]}")/merged_traces.awk" >"$WORK/result"
}

for store in state_file redis; do
  store_args=()
  [ "$store" = redis ] && store_args=(--redis "unix://$WORK/main/sock")
  results=""
  for attempt in 1 2 3; do
    four_pipes "four-$store-$attempt" "${store_args[@]}"
    error=$(grep -o 'error=[^%]*' "$WORK/result" | cut -d= -f2)
    window=$(grep -o 'window=[^ ]*' "$WORK/result" | cut -d= -f2)
    results+=" [$(cat "$WORK/result")]"
    awk -v e="$error" -v w="$window" 'BEGIN { exit !(e >= -2 && e <= 2 && w <= 1.3) }' && continue 2
  done
  fail "four pipes on one key ($store) in three attempts:$results (error within 2 %, window at most 1.3 expected)"
done
