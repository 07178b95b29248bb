#!/usr/bin/env bash
# The CPU that shaping costs, ratelimit side by side with `pv -q -L` and `cstream -t` in one run
# (a few minutes):
#   cpu      user+sys seconds of 10 pipelines `head -c | SHAPER | cat >/dev/null` run at once for
#            5 s each at 1 kB/s, 100 kB/s and 10 MB/s, summed (many instances, so that the 10 ms
#            accounting tick does not hide the cost), the pipeline's own processes included.
#            Rounds alternate the shapers' order; the median of the rounds is reported, as other
#            work on the machine makes single figures noisy. Ratios are against pv.
#   window   the most bytes in any 100 ms window / (rate x 0.1 s), one run each through
#            bench/pipe_probe;
#   calls    `strace -c -f` of one 5 s run of ratelimit alone at 1 kB/s, from a file to
#            /dev/null (the buffered path) and from a pipe to a pipe (the splice path): system
#            calls per write.
# BENCH_ROUNDS (default 5) sets the rounds; BENCH_BASELINE=/path/to/ratelimit adds a column for
# another build of ratelimit (e.g. main's), measured in the same rounds.
# Writes bench/results/cpu.md.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages pv cstream strace
build_bench_tree

ROUNDS=${BENCH_ROUNDS:-5}
PIPES=10
SECONDS_EACH=5
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# pv second: the ratios are against it. `--chunk 10ms` writes ten times as often as the default
# (and pv), trading wake-ups for a finer grain.
names=(ratelimit "pv -L" "cstream -t" "ratelimit --chunk 10ms")
commands=("$RATELIMIT --rate RATE" "pv -q -L RATE" "cstream -t RATE" "$RATELIMIT --rate RATE --chunk 10ms")
if [ -n "${BENCH_BASELINE:-}" ]; then
  names+=(baseline)
  commands+=("$BENCH_BASELINE --rate RATE")
fi

# pipelines_cpu RATE COMMAND: user+sys seconds of $PIPES pipelines run at once, COMMAND's RATE
# replaced by the rate.
pipelines_cpu() {
  local rate=$1 command=${2//RATE/$1}
  bash -c '
    for _ in $(seq "$1"); do
      (head -c "$2" /dev/zero | $3 | cat >/dev/null) &
    done
    wait
    times' _ "$PIPES" $((rate * SECONDS_EACH)) "$command" | tail -1 |
    awk '{ gsub(/[ms]/, " "); split($0, t, " "); print t[1] * 60 + t[2] + t[3] * 60 + t[4] }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

rates=(1000 100000 10000000)
echo "== CPU: $PIPES pipelines x ${SECONDS_EACH} s, $ROUNDS rounds" >&2
for round in $(seq "$ROUNDS"); do
  for rate in "${rates[@]}"; do
    # Each round starts with another shaper, so that none always runs first or last.
    for offset in $(seq 0 $((${#names[@]} - 1))); do
      i=$(((offset + round) % ${#names[@]}))
      pipelines_cpu "$rate" "${commands[$i]}" >>"$TMP/cpu_${rate}_$i"
    done
  done
  echo "  round $round done" >&2
done

echo "== worst 100 ms window" >&2
# window RATE COMMAND: the probe's worst window as a multiple of rate x 0.1 s.
window() {
  local rate=$1 command=${2//RATE/$1}
  rm -f "$TMP/fifo"
  mkfifo "$TMP/fifo"
  "$PROBE" --input "$TMP/fifo" >"$TMP/probe.out" &
  local probe=$!
  sleep 0.1
  # shellcheck disable=SC2086
  head -c $((rate * SECONDS_EACH)) /dev/zero | $command >"$TMP/fifo"
  wait "$probe"
  sed -n 's/.*max_window=\([0-9]*\).*/\1/p' "$TMP/probe.out" |
    awk -v rate="$rate" '{ printf "%.2f", $1 / (rate * 0.1) }'
}
declare -A windows
for rate in "${rates[@]}"; do
  for i in "${!names[@]}"; do windows[$rate,$i]=$(window "$rate" "${commands[$i]}"); done
done

echo "== system calls per write at 1 kB/s" >&2
head -c $((1000 * SECONDS_EACH)) /dev/zero >"$TMP/input"
# calls_per_write STRACE_OUTPUT: "N calls, M writes: X per write" from `strace -c`.
calls_per_write() {
  awk '/^-/ { table = !table; next } table && NF >= 5 {
      calls += $4; if ($NF == "write" || $NF == "splice") writes += $4 }
    END { printf "%d calls for %d writes: %.2f per write", calls, writes, calls / writes }' "$1"
}
strace -c -f -o "$TMP/strace_buffered" "$RATELIMIT" --rate 1000 "$TMP/input" >/dev/null
cat "$TMP/input" | strace -c -f -o "$TMP/strace_spliced" "$RATELIMIT" --rate 1000 | cat >/dev/null
buffered_calls=$(calls_per_write "$TMP/strace_buffered")
spliced_calls=$(calls_per_write "$TMP/strace_spliced")
echo "  file to /dev/null: $buffered_calls; pipe to pipe: $spliced_calls" >&2

{
  echo "# CPU while shaping"
  echo
  echo "Produced by \`scripts/bench_cpu.sh\` (BENCH_ROUNDS=$ROUNDS) on $(date -u +%Y-%m-%d)," \
    "$(nproc) cores ($(uname -r)); $(pv --version | head -1 | cut -d' ' -f1-2)," \
    "cstream $(dpkg-query -W -f='${Version}' cstream)."
  echo
  echo "CPU: user+sys seconds of $PIPES pipelines \`head -c | SHAPER | cat >/dev/null\` at once," \
    "${SECONDS_EACH} s of data each, the pipeline's processes included; median of $ROUNDS" \
    "alternating rounds. Window: the most bytes in any 100 ms window / (rate x 0.1 s)."
  echo
  header="| rate |"
  rule="| --- |"
  for name in "${names[@]}"; do
    header+=" $name CPU s | vs pv | window |"
    rule+=" --- | --- | --- |"
  done
  echo "$header"
  echo "$rule"
  for rate in "${rates[@]}"; do
    pv_cpu=$(median <"$TMP/cpu_${rate}_1")
    row="| $rate B/s |"
    for i in "${!names[@]}"; do
      cpu=$(median <"$TMP/cpu_${rate}_$i")
      row+=" $cpu | $(awk -v a="$cpu" -v b="$pv_cpu" 'BEGIN { printf "%.2fx", a / b }') |"
      row+=" ${windows[$rate,$i]} |"
    done
    echo "$row"
  done
  echo
  echo "System calls of ratelimit alone, one ${SECONDS_EACH} s run at 1 kB/s (\`strace -c -f\`):"
  echo "from a file to /dev/null (read and write) $buffered_calls;"
  echo "from a pipe to a pipe (splice) $spliced_calls."
} >"$RESULTS/cpu.md"
cat "$RESULTS/cpu.md"
