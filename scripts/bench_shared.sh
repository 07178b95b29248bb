#!/usr/bin/env bash
# Pipes sharing one --key:
#   four pipes  of 0.5, 1, 1.5 and 2 s of the rate on one key at 100 kB/s, 500 kB/s and 1 MB/s
#               (54 ms chunks, the default with --key), each pipe ending before the next: the sum
#               of their outputs against the rate, its worst 100 ms window against rate x 0.1 s,
#               and each pipe's share while all four are busy (ideal 25 %); every output compared with its
#               input; $RUNS runs of each (default 6), on the state file, and on Redis too when
#               redis-server is installed (a server of its own on a unix socket);
#   one pipe    --key against the same pipe in-process at 1 MB/s: rate and worst window;
#   cost        CPU seconds for 2 GiB at --rate 100G, with --key and without.
# Consumers (bench/pipe_probe --absolute) timestamp every read. Writes bench/results/shared.md.
# RATELIMIT=path/to/ratelimit uses that binary (its tree's bench/pipe_probe too) instead of
# building build/bench.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
source "$(dirname "${BASH_SOURCE[0]}")/redis_bench.sh"
use_bench_binary
PROBE=${PROBE:-$(dirname "$RATELIMIT")/../bench/pipe_probe}
RUNS=${RUNS:-6}
MERGED_TRACES=$RATELIMIT_ROOT/tests/e2e/merged_traces.awk

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export RATELIMIT_STATE_DIR=$TMP/state

# merged_stats RATE TRACE...: the sum of several probes' traces (absolute times, cumulative
# units) as tests/e2e/merged_traces.awk prints it. A shared pipe writes each 54 ms chunk in 5
# parts, so a key that lets no turn go idle spaces the writes by 10.8 ms (108 ms in-process).
merged_stats() {
  local rate=$1
  shift
  local index=0 trace
  for trace in "$@"; do
    awk -v pipe=$index '{ print $1, $2 - previous, pipe; previous = $2 }' "$trace"
    index=$((index + 1))
  done | sort -n -k1,1 | awk -v rate="$rate" -v pipes=$# -f "$MERGED_TRACES"
}

# four_pipes RATE KEY STORE_ARGS...: one run of four pipes on KEY, a new key (a key used before
# would have stored a burst), timed by probes that read the pipes' outputs directly and copy them
# to files, which are compared with the inputs. Prints merged_stats and byte_exact=yes|NO.
four_pipes() {
  local rate=$1 key=$2 i
  shift 2
  for i in 0 1 2 3; do
    head -c "$(awk -v r="$rate" -v i="$i" 'BEGIN { printf "%d", r * (i + 1) / 2 }')" /dev/urandom \
      >"$TMP/in$i"
    rm -f "$TMP/fifo$i"
    mkfifo "$TMP/fifo$i"
    "$PROBE" --trace "$TMP/trace$i" --absolute --input "$TMP/fifo$i" --copy "$TMP/out$i" \
      >/dev/null &
  done
  sleep 0.2
  for i in 0 1 2 3; do "$RATELIMIT" --rate "$rate" --key "$key" "$@" <"$TMP/in$i" >"$TMP/fifo$i" & done
  wait
  local exact=yes
  for i in 0 1 2 3; do cmp -s "$TMP/in$i" "$TMP/out$i" || exact=NO; done
  echo "$(merged_stats "$rate" "$TMP"/trace{0,1,2,3}) byte_exact=$exact"
}

# four_pipe_runs STORE_NAME STORE_ARGS...: $RUNS runs at each rate, one line each, then the worst
# window of each rate.
four_pipe_runs() {
  local store=$1 rate run line
  shift
  for rate in 100000 500000 1000000; do
    for run in $(seq "$RUNS"); do
      line=$(four_pipes "$rate" "four-$store-$rate-$run" "$@")
      echo "$store $rate B/s run $run: $line"
    done
  done
}

# worst_windows LINES: per store and rate, the range of the runs' errors, turns and worst windows,
# and whether all were exact.
worst_windows() {
  awk 'function note(name, value) { if (!((k, name) in low) || value < low[k, name]) low[k, name] = value
                                     if (!((k, name) in high) || value > high[k, name]) high[k, name] = value }
       { k = $1 " " $2
         for (i = 1; i <= NF; i++) {
           split($i, field, "=")
           if (field[1] == "window" || field[1] == "error" || field[1] == "turn") note(field[1], field[2] + 0)
           else if (field[1] == "byte_exact" && field[2] != "yes") bad[k] = 1
         }
         if (!(k in order)) { order[k] = ++n; keys[n] = k } }
       END { for (j = 1; j <= n; j++) { k = keys[j]; split(k, p, " ")
               printf "%s at %s B/s: error %+.2f%% to %+.2f%%, turn %.1f to %.1f ms, worst window %.3f to %.3f, byte-exact: %s\n",
                 p[1], p[2], low[k, "error"], high[k, "error"], low[k, "turn"], high[k, "turn"],
                 low[k, "window"], high[k, "window"], (k in bad) ? "NO" : "yes" } }'
}

echo "== four pipes on one key, one ending before the next, $RUNS runs per rate" >&2
runs=$(four_pipe_runs state_file | tee /dev/stderr)
if command -v redis-server >/dev/null; then
  start_socket_redis "$TMP/redis"
  trap 'kill "$server" 2>/dev/null; rm -rf "$TMP"' EXIT
  runs+=$'\n'$(four_pipe_runs redis --redis "unix://$TMP/redis/sock" | tee /dev/stderr)
  kill "$server"
  wait "$server" 2>/dev/null || true
  trap 'rm -rf "$TMP"' EXIT
fi
summary=$(worst_windows <<<"$runs")
echo "$summary" >&2

echo "== one pipe at 1 MB/s, with --key and in-process" >&2
head -c 4000000 /dev/urandom >"$TMP/one"
one_pipe() {
  rm -f "$TMP/fifo"
  mkfifo "$TMP/fifo"
  "$PROBE" --trace "$TMP/trace" --absolute --input "$TMP/fifo" >/dev/null &
  local probe=$!
  sleep 0.2
  "$RATELIMIT" --rate 1M "$@" <"$TMP/one" >"$TMP/fifo"
  wait "$probe"
  merged_stats 1000000 "$TMP/trace"
}
alone=$(one_pipe)
keyed=$(one_pipe --key one)
echo "in-process: $alone" >&2
echo "--key:      $keyed" >&2

echo "== CPU for 2 GiB at --rate 100G" >&2
cpu() {
  local times
  TIMEFORMAT='%U %S'
  times=$({ time head -c 2G /dev/zero | "$RATELIMIT" --rate 100G "$@" >/dev/null; } 2>&1)
  awk '{ printf "%.3f", $1 + $2 }' <<<"$times"
}
# The CPU of the whole pipeline minus that of head alone: ratelimit's share.
head_only=$({ TIMEFORMAT='%U %S'; time head -c 2G /dev/zero | cat >/dev/null; } 2>&1 | awk '{ printf "%.3f", $1 + $2 }')
cpu_alone=$(cpu)
cpu_keyed=$(cpu --key cpu)
echo "head|cat: $head_only s; in-process: $cpu_alone s; --key: $cpu_keyed s (pipeline user+sys)" >&2

{
  echo "# Shared buckets (--key)"
  echo
  echo "Run by \`scripts/bench_shared.sh\` on $(nproc) cores, $(date -u +%Y-%m-%d), load average"
  echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end."
  echo
  echo "Four pipes of 0.5, 1, 1.5 and 2 s of the rate on one key, so that each ends before the next"
  echo "(54 ms chunks, the default with --key, each written in 5 parts of 10.8 ms): the sum of the"
  echo "four outputs against the rate; turn: the mean time from one write to the next, whichever"
  echo "pipe's (10.8 ms when the key never idles); window: the worst 100 ms as a multiple of the rate"
  echo "x 0.1 s; shares while all four were busy, ideal 25 %; each output compared with its input."
  echo "$RUNS runs per rate and store."
  echo
  echo "Every pipe's last chunk is short (0.26, 0.52, 0.78 and 0.04 of a chunk) and is booked"
  echo "exactly, so that the next booking on the key, another pipe's, follows at once: no turn idles."
  echo "Each part of a chunk goes at its share of the chunk's time after its turn, so that a short"
  echo "chunk and the next pipe's chunk share a 100 ms window only in part: on time a window holds"
  echo "100 ms of bookings and one part (10.8 ms; a short chunk goes in parts of 12 ms at most)."
  echo
  sed 's/^/    /' <<<"$summary"
  echo
  echo "Run by run:"
  echo
  sed 's/^/    /' <<<"$runs"
  echo
  echo "One pipe of 4 MB at 1 MB/s (window: the worst 100 ms as a multiple of the rate x 0.1 s):"
  echo
  echo "    in-process: $alone"
  echo "    --key:      $keyed"
  echo
  echo "CPU seconds (user + sys) of \`head -c 2G /dev/zero | ratelimit --rate 100G > /dev/null\`:"
  echo "in-process $cpu_alone, with --key $cpu_keyed (the pipeline without ratelimit, head | cat:"
  echo "$head_only)."
} >"$RESULTS/shared.md"
cat "$RESULTS/shared.md"
