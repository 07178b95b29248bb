#!/usr/bin/env bash
# Pipe mode side by side with `pv -L`, `cstream -t` and `mbuffer -r` (Debian's), in one run of a few minutes:
#   accuracy    steady rate (the slope of a least-squares line through units against time, the
#               last read, a part of a chunk, left out) vs the target;
#   smoothness  the most units in any 100 ms window, as a multiple of rate x 0.1 s;
#   cost        CPU seconds per GiB and throughput at a rate above what the machine can move;
#   warm-up     --warmup 4s --rate 1M against Guava's SmoothWarmingUp ramp.
# A consumer (bench/pipe_probe) timestamps every read. Writes bench/results/pipe.md, the plot
# bench/results/pipe_5kBps.png (bytes delivered over time at 5 kB/s) and pipe_warmup.png.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ensure_packages pv cstream mbuffer gnuplot-nox
build_bench_tree

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# shaped TRACE PROBE_ARGS PRODUCER SHAPER...: PRODUCER | SHAPER | pipe_probe. The probe starts
# first and opens the FIFO itself, so that its own start-up is not measured. Prints the probe's line.
shaped() {
  local trace=$1 probe_args=$2 producer=$3
  shift 3
  rm -f "$TMP/fifo"
  mkfifo "$TMP/fifo"
  # shellcheck disable=SC2086
  "$PROBE" $probe_args --trace "$trace" --input "$TMP/fifo" >"$TMP/probe.out" &
  local probe=$!
  sleep 0.1
  bash -c "$producer" | "$@" >"$TMP/fifo"
  wait "$probe"
  cat "$TMP/probe.out"
}

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

# cell LINE TARGET: "rate (error %) / window ratio" for the table.
cell() {
  local rate window
  rate=$(field steady_rate "$1")
  window=$(field max_window "$1")
  awk -v rate="$rate" -v window="$window" -v target="$2" 'BEGIN {
    if (rate == 0) { print "n/a (one burst) | " sprintf("%.2f", window / (target * 0.1)); exit }
    if (rate > 2 * target) { print "not limited | " sprintf("%.2f", window / (target * 0.1)); exit }
    printf "%.6g (%+.2f%%) | %.2f\n", rate, (rate / target - 1) * 100, window / (target * 0.1)
  }'
}

echo "== accuracy and smoothness" >&2
rows=()
# name target seconds unit(bytes|lines)
for spec in "1 kB/s:1000:4:bytes" "5 kB/s:5000:4:bytes" "100 kB/s:100000:4:bytes" \
  "10 MB/s:10000000:4:bytes" "100 MB/s:100000000:4:bytes" \
  "50 lines/s:50:4:lines" "10000 lines/s:10000:4:lines"; do
  IFS=: read -r name target seconds unit <<<"$spec"
  count=$((target * seconds))
  if [ "$unit" = bytes ]; then
    producer="head -c $count /dev/zero"
    probe_args=""
    ours=("$RATELIMIT" --rate "$target")
    pvs=(pv -q -L "$target")
  else
    producer="yes 0123456789abcdefghijklmnopqrstuvwxyz | head -n $count"
    probe_args="--lines"
    ours=("$RATELIMIT" -l --rate "$target")
    pvs=(pv -q -l -L "$target")
  fi
  slug=$(tr -c 'a-z0-9\n' '_' <<<"$target$unit")
  ratelimit_line=$(shaped "$TMP/ratelimit_$slug" "$probe_args" "$producer" "${ours[@]}")
  pv_line=$(shaped "$TMP/pv_$slug" "$probe_args" "$producer" "${pvs[@]}")
  if [ "$unit" = bytes ]; then
    cstream_line=$(shaped "$TMP/cstream_$slug" "$probe_args" "$producer" cstream -t "$target")
    cstream_cell=$(cell "$cstream_line" "$target")
    mbuffer_line=$(shaped "$TMP/mbuffer_$slug" "$probe_args" "$producer" mbuffer -q -r "$target")
    mbuffer_cell=$(cell "$mbuffer_line" "$target")
  else
    cstream_cell="no line mode | -"
    mbuffer_cell="no line mode | -"
  fi
  rows+=("| $name | $(cell "$ratelimit_line" "$target") | $(cell "$pv_line" "$target") | $cstream_cell | $mbuffer_cell |")
  echo "  $name done" >&2
done

echo "== cost at full speed (2 GiB of zeros, best of 3)" >&2
# cost SHAPER...: "cpu_seconds_per_gib throughput_MB_per_s" of the shaper alone.
cost() {
  local bytes=$((2 * 1024 * 1024 * 1024)) best_cpu=999 best_wall=999
  for _ in 1 2 3; do
    head -c "$bytes" /dev/zero | { TIMEFORMAT='%R %U %S' && time "$@"; } 2>"$TMP/time" | cat >/dev/null
    read -r wall user system <"$TMP/time"
    best_cpu=$(awk -v a="$best_cpu" -v b="$(awk -v u="$user" -v s="$system" 'BEGIN {print u + s}')" \
      'BEGIN {print (b < a) ? b : a}')
    best_wall=$(awk -v a="$best_wall" -v b="$wall" 'BEGIN {print (b < a) ? b : a}')
  done
  awk -v cpu="$best_cpu" -v wall="$best_wall" -v bytes="$bytes" \
    'BEGIN {printf "%.3f %.0f\n", cpu / 2, bytes / wall / 1e6}'
}
read -r ratelimit_cpu ratelimit_speed < <(cost "$RATELIMIT" --rate 100G)
read -r pv_cpu pv_speed < <(cost pv -q -L 100000000000)
read -r cstream_cpu cstream_speed < <(cost cstream -t 100000000000)
read -r mbuffer_cpu mbuffer_speed < <(cost mbuffer -q -r 100G)
vs_pv() { awk -v a="$1" -v b="$pv_cpu" 'BEGIN {printf "%.2fx", a / b}'; }

echo "== cost while shaping (5 s at a rate)" >&2
# shaping_cost RATE SHAPER...: the shaper's CPU milliseconds for 5 s worth of zeros at RATE
# bytes/s (a shaper that does not hold the rate finishes sooner). Smoother output means more
# wake-ups; this is their price.
shaping_cost() {
  local rate=$1
  shift
  head -c $((rate * 5)) /dev/zero | { TIMEFORMAT='%U %S' && time "$@"; } 2>"$TMP/time" |
    cat >/dev/null
  read -r user system <"$TMP/time"
  awk -v u="$user" -v s="$system" 'BEGIN {printf "%.0f ms\n", (u + s) * 1000}'
}
shaping_rows=()
for rate in 1000 10000000; do
  shaping_rows+=("| $rate B/s | $(shaping_cost "$rate" "$RATELIMIT" --rate "$rate") |\
 $(shaping_cost "$rate" pv -q -L "$rate") | $(shaping_cost "$rate" cstream -t "$rate") |\
 $(shaping_cost "$rate" mbuffer -q -r "$rate") |")
done

echo "== warm-up" >&2
shaped "$TMP/warmup" "" "head -c 7000000 /dev/zero" "$RATELIMIT" --rate 1M --warmup 4s >/dev/null
# Guava's SmoothWarmingUp from cold, cold factor 3: the time to take x permits is
# s*x + slope*(D^2 - (D-x)^2)/2 over the D = max - threshold cold permits, then x/rate; its
# inverse is the units delivered by time t. The first chunk is free (its cost is paid by the
# next), so the model is shifted by the first read. Compared every 0.5 s from 1 s on, with what
# had arrived by then (one chunk, 1/100 s of the rate, is 1 % of the model at 1 s).
awk -v rate=1e6 -v warmup=4 -v cold=3 -v out="$TMP/warmup_model" '
  function model(t) {
    return first + ((t <= warmup) ? (b - sqrt(b * b - 2 * slope * t)) / slope \
                                   : d + (t - warmup) * rate)
  }
  NR == 1 { first = $2; checkpoint = 1
            s = 1 / rate; d = 2 * warmup * rate / (1 + cold)
            slope = (cold - 1) * s / d; b = s + slope * d }
  { while ($1 >= checkpoint) {
      error = delivered / model(checkpoint) - 1; if (error < 0) error = -error
      if (error > worst) worst = error
      checkpoint += 0.5
    }
    delivered = $2
    print $1, model($1) > out }
  END { printf "%.2f\n", worst * 100 }' "$TMP/warmup" >"$TMP/warmup_error"
warmup_error=$(cat "$TMP/warmup_error")

echo "== plots" >&2
gnuplot <<EOF
set terminal pngcairo size 900,500
set output "$RESULTS/pipe_5kBps.png"
set title "Bytes delivered at --rate 5000 (fast producer; consumer timestamps every read)"
set xlabel "seconds since the first read"
set ylabel "bytes delivered"
set key top left
set grid
plot 5000*x + 100 with lines dashtype 2 linecolor "gray" title "exact 5000 B/s", \
     "$TMP/ratelimit_5000bytes" using 1:2 with steps linewidth 2 title "ratelimit --rate 5000", \
     "$TMP/pv_5000bytes" using 1:2 with steps linewidth 2 title "pv -L 5000", \
     "$TMP/cstream_5000bytes" using 1:2 with steps linewidth 2 title "cstream -t 5000", \
     "$TMP/mbuffer_5000bytes" using 1:2 with linespoints pointtype 7 pointsize 1.5 linewidth 2 \
       title "mbuffer -r 5000"
set output "$RESULTS/pipe_warmup.png"
set title "--rate 1M --warmup 4s: delivered bytes vs Guava's SmoothWarmingUp"
set ylabel "bytes delivered"
plot "$TMP/warmup_model" using 1:2 with lines linewidth 3 linecolor "gray" title "Guava model", \
     "$TMP/warmup" using 1:2 with steps linewidth 1 title "ratelimit"
EOF

{
  echo "# Pipe mode benchmark"
  echo
  echo "Produced by \`scripts/bench_pipe.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores" \
    "($(uname -r)); $(pv --version | head -1 | cut -d' ' -f1-2), cstream $(dpkg-query -W -f='${Version}' cstream)," \
    "mbuffer $(dpkg-query -W -f='${Version}' mbuffer)."
  echo "Fast producer (\`head -c\` of /dev/zero, or \`yes | head -n\` for lines); the consumer timestamps every read."
  echo
  echo "Steady rate: the slope of the least-squares line through the units delivered against time, read by read, the last read (the remainder, a part of a chunk) left out (target: within ±0.5 %)."
  echo "Window: the most units in any 100 ms window / (rate × 0.1 s) (target: ≤ 1.25)."
  echo
  echo "| target | ratelimit rate | window | pv -L rate | window | cstream -t rate | window | mbuffer -r rate | window |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Cost at \`--rate 100G\` (above what the machine moves), 2 GiB through pipes, best of 3:"
  echo
  echo "| | ratelimit | pv -L | cstream -t | mbuffer -r |"
  echo "| --- | --- | --- | --- | --- |"
  echo "| CPU s per GiB | $ratelimit_cpu | $pv_cpu | $cstream_cpu | $mbuffer_cpu |"
  echo "| throughput MB/s | $ratelimit_speed | $pv_speed | $cstream_speed | $mbuffer_speed |"
  echo "| CPU vs pv | $(vs_pv "$ratelimit_cpu") | 1.00x | $(vs_pv "$cstream_cpu") | $(vs_pv "$mbuffer_cpu") |"
  echo
  echo "Cost while shaping: CPU time for 5 s worth of data at the rate (ratelimit writes every 108 ms,"
  echo "above 1 MiB per write in equal parts, pv every 100 ms; 50 ms is 1 % of one core;"
  echo "scripts/bench_cpu.sh measures it over many pipes):"
  echo
  echo "| rate | ratelimit | pv -L | cstream -t | mbuffer -r |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${shaping_rows[@]}"
  echo
  echo "Warm-up (\`--rate 1M --warmup 4s\`, 7 MB): largest deviation from Guava's SmoothWarmingUp" \
    "ramp, every 0.5 s from 1 s on: **${warmup_error} %** (target: within 10 %)."
  echo
  echo "![bytes delivered at 5 kB/s](pipe_5kBps.png)"
  echo
  echo "![warm-up](pipe_warmup.png)"
} >"$RESULTS/pipe.md"
cat "$RESULTS/pipe.md"
