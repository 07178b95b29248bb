#!/usr/bin/env bash
# Pipes sharing one --key, in one run of about a minute:
#   four pipes  0.5, 1, 1.5 and 2 MB on one key at 1 MB/s: the sum of their outputs against the
#               rate, its worst 100 ms window against rate x 0.1 s, and each pipe's share while all
#               four are busy (ideal 25 %); every output compared with its input;
#   one pipe    --key against the same pipe in-process at 1 MB/s: rate and worst window;
#   cost        CPU seconds for 2 GiB at --rate 100G, with --key and without.
# Consumers (bench/pipe_probe --absolute) timestamp every read. Writes bench/results/shared.md.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
build_bench_tree

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export RATELIMIT_STATE_DIR=$TMP/state

# merged_stats RATE TRACE...: the sum of several probes' traces (absolute times, cumulative
# units) as "rate=R error=E% window=W share_I=S%..." (shares over the time all were busy).
merged_stats() {
  local rate=$1
  shift
  local index=0 trace
  for trace in "$@"; do
    awk -v pipe=$index '{ print $1, $2 - previous, pipe; previous = $2 }' "$trace"
    index=$((index + 1))
  done | sort -n -k1,1 | awk -v rate="$rate" -v pipes=$# '
    { time[NR] = $1; units[NR] = $2; pipe[NR] = $3; total += $2
      if (!(($3) in first)) first[$3] = $1
      last[$3] = $1 }
    END {
      # The first read and the last, a part of a chunk, left out: a chunk of 108 ms counted over the
      # time to the last read would understate the rate by nearly a chunk.
      steady = (total - units[1] - units[NR]) / (time[NR - 1] - time[1])
      start = 0; sum = 0; worst = 0
      for (i = 1; i <= NR; i++) {
        sum += units[i]
        while (time[i] - time[start + 1] >= 0.1) sum -= units[++start]
        if (sum > worst) worst = sum
      }
      busy_from = 0; busy_to = 1e300
      for (p in first) { if (first[p] > busy_from) busy_from = first[p]; if (last[p] < busy_to) busy_to = last[p] }
      for (i = 1; i <= NR; i++) if (time[i] >= busy_from && time[i] <= busy_to) { share[pipe[i]] += units[i]; busy += units[i] }
      printf "rate=%.0f error=%+.2f%% window=%.3f", steady, (steady / rate - 1) * 100, worst / (rate * 0.1)
      if (pipes > 1) { printf " busy=%.2fs", busy_to - busy_from; for (p = 0; p < pipes; p++) printf " share_%d=%.1f%%", p, 100 * share[p] / busy }
      printf "\n"
    }'
}


echo "== four pipes on one key at 1 MB/s" >&2
sizes=(500000 1000000 1500000 2000000)
for i in 0 1 2 3; do head -c "${sizes[$i]}" /dev/urandom >"$TMP/in$i"; done
# Timed with the probes reading the pipes' outputs directly; then again into files, compared
# with the inputs (a tee between pipe and probe would add its own scheduling to the timing).
for i in 0 1 2 3; do
  mkfifo "$TMP/fifo$i"
  "$PROBE" --trace "$TMP/trace$i" --absolute --input "$TMP/fifo$i" >/dev/null &
done
sleep 0.2
for i in 0 1 2 3; do "$RATELIMIT" --rate 1M --key four <"$TMP/in$i" >"$TMP/fifo$i" & done
wait
for i in 0 1 2 3; do "$RATELIMIT" --rate 1M --key exact <"$TMP/in$i" >"$TMP/out$i" & done
wait
exact=yes
for i in 0 1 2 3; do cmp -s "$TMP/in$i" "$TMP/out$i" || exact=NO; done
four=$(merged_stats 1000000 "$TMP"/trace{0,1,2,3})
echo "$four byte_exact=$exact" >&2

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
  echo "Run by \`scripts/bench_shared.sh\` on $(nproc) cores, $(date -u +%Y-%m-%d)."
  echo
  echo "Four pipes of 0.5, 1, 1.5 and 2 MB on one key at 1 MB/s (sum of the four outputs; shares"
  echo "while all four were busy, ideal 25 %; every output byte-exact: $exact):"
  echo
  echo "    $four"
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
