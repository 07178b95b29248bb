#!/usr/bin/env bash
# The Redis store against a redis-server of its own (unix socket, loopback TCP and TLS), in
# about a minute:
#   exec        4 processes acting as 4 hosts (separate state directories) x 10 execs sharing
#               20/s: total time (ideal 1.95 s) and the most starts in any 1 s window (ideal 21);
#   pipes       4 pipes on 4 "hosts" sharing 1 MB/s through one key: the sum of their outputs
#               against the rate and its worst 100 ms window (bench/pipe_probe traces);
#   latency     the wall time of one `ratelimit acquire` at a rate that never waits, with --redis
#               over the unix socket, TCP and TLS (rediss://, a test CA, the session of the
#               previous call resumed), connecting from the process (--no-agent) and through the
#               host agent, against the state file and /bin/true (a process start's floor):
#               BENCH_LATENCY_ROUNDS rounds (default 500), each calling every path once in a
#               shuffled order; per path the mean, the difference from the same round's state-file
#               call (mean +- 95% interval, median) and the caller's CPU. Alone with
#               `scripts/bench_redis.sh latency` (any Release binary as $RATELIMIT): the figures
#               go to standard output, bench/results/redis.md is left as it is;
#   kept        the script's round trip on a kept connection, as a pipe makes it (redis-benchmark,
#               one client, median) over each transport;
#   throughput  the script's decisions per second from 8 concurrent clients (redis-benchmark
#               running FCALL) on one key and on 8 keys, and the server's CPU per decision,
#               against a minimal GCRA script (written here) in alternating rounds
#               (BENCH_ROUNDS, default 5; medians); over TLS on one key;
#   handshakes  the server's CPU and the wall time per `ratelimit acquire` over TCP and over TLS,
#               with an EC and an RSA-2048 server certificate, each TLS one making a full
#               handshake (a state directory that keeps no session) against one resuming the
#               session the previous call kept (BENCH_ROUNDS alternating rounds; medians).
# Writes bench/results/redis.md.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
source "$(dirname "${BASH_SOURCE[0]}")/redis_bench.sh"
ensure_packages redis-server redis-tools openssl
case ${1:-all} in
  all) build_bench_tree ;;
  latency) use_bench_binary ;;
  *)
    echo "usage: scripts/bench_redis.sh [latency]" >&2
    exit 64
    ;;
esac

TMP=$(mktemp -d)
start_bench_server
trap 'kill "$server" 2>/dev/null; rm -rf "$TMP"' EXIT
until redis-cli -s "$TMP/redis/sock" ping >/dev/null 2>&1; do
  # A port taken ends the server (one in the ephemeral range may be a connection's in TIME_WAIT,
  # from the calls of an earlier run): another port, instead of waiting forever.
  kill -0 "$server" 2>/dev/null || start_bench_server
  sleep 0.01
done
UNIX_URL=unix://$TMP/redis/sock
TCP_URL=redis://127.0.0.1:$port
TLS_URL=rediss://localhost:$tls_port
TLS_CA=(--redis-tls-ca "$tls/ca.crt")
export RATELIMIT_REDIS=$UNIX_URL

# The paths the latency section times, each a function named latency_NAME calling it once.
LATENCY_PATHS=(floor file unix tcp tls agent-unix agent-tcp agent-tls)
latency_floor() { /bin/true; }
latency_file() { RATELIMIT_REDIS='' "$RATELIMIT" acquire --rate 1e9 --key lat; }
latency_unix() { "$RATELIMIT" acquire --rate 1e9 --key lat --redis "$UNIX_URL" --no-agent; }
latency_tcp() { "$RATELIMIT" acquire --rate 1e9 --key lat --redis "$TCP_URL" --no-agent; }
latency_tls() { "$RATELIMIT" acquire --rate 1e9 --key lat --redis "$TLS_URL" "${TLS_CA[@]}" --no-agent; }
latency_agent-unix() { "$RATELIMIT" acquire --rate 1e9 --key lat --redis "$UNIX_URL"; }
latency_agent-tcp() { "$RATELIMIT" acquire --rate 1e9 --key lat --redis "$TCP_URL"; }
latency_agent-tls() { "$RATELIMIT" acquire --rate 1e9 --key lat --redis "$TLS_URL" "${TLS_CA[@]}"; }

# measure_latency: times every path of LATENCY_PATHS in BENCH_LATENCY_ROUNDS rounds and sets
# $latency_result to a table of them. Timing each path in a block of its own, or in a fixed
# order, lets the machine's drift between blocks (or a path's place in the order) into the
# differences; a shuffled order in every round and differences within a round leave it out.
measure_latency() {
  local rounds=${BENCH_LATENCY_ROUNDS:-500} round i j swap name start end load_before agent
  local agent_cpu_before agent_cpu_after order=()
  local log=$TMP/latency.log
  export RATELIMIT_STATE_DIR=$TMP/latency
  # Every path before the timing: the TLS session kept for the direct calls to resume, and once
  # the agent that the first call started listens, each of its routes connected.
  for name in "${LATENCY_PATHS[@]}"; do "latency_$name"; done
  until [ -S "$RATELIMIT_STATE_DIR/agent.sock" ]; do sleep 0.01; done
  for name in "${LATENCY_PATHS[@]}"; do "latency_$name"; done
  agent=$(cat "$RATELIMIT_STATE_DIR/agent.lock")
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  agent_cpu_before=$(thread_cpu_ns "$agent")
  # Per call: "call ROUND NAME START END" and after it the output of `times`, whose second line
  # is the CPU of the shell's children so far (the agent is not one): a call's CPU is the
  # difference from the reading before it. Between a call's two readings of $EPOCHREALTIME,
  # nothing but the call is forked.
  exec 3>"$log"
  times >&3
  for ((round = 0; round < rounds; round++)); do
    order=("${LATENCY_PATHS[@]}")
    for ((i = ${#order[@]} - 1; i > 0; i--)); do
      j=$((RANDOM % (i + 1)))
      swap=${order[i]}
      order[i]=${order[j]}
      order[j]=$swap
    done
    for name in "${order[@]}"; do
      start=$EPOCHREALTIME
      "latency_$name"
      end=$EPOCHREALTIME
      echo "call $round $name $start $end" >&3
      times >&3
    done
  done
  exec 3>&-
  agent_cpu_after=$(thread_cpu_ns "$agent")
  kill "$agent"
  latency_result=$(latency_table "$log" "$rounds" "$load_before" \
    $(((agent_cpu_after - agent_cpu_before) / (3 * rounds))))
}

# thread_cpu_ns PID: the CPU time of PID's threads so far, in nanoseconds.
thread_cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ sum += $1 } END { printf "%.0f", sum }'; }

# latency_table LOG ROUNDS LOAD_BEFORE AGENT_NS_PER_CALL: measure_latency's log as a Markdown table.
latency_table() {
  local log=$1 rounds=$2 load_before=$3 agent_ns=$4 name
  # seconds of `times`' "1m2.345s"
  awk '
    function seconds(text) { split(text, part, "m"); sub("s", "", part[2]); return part[1] * 60 + part[2] }
    $1 == "call" { name = $3; round = $2; wall = ($5 - $4) * 1000; line = 0; next }
    { if (++line % 2 == 0) { cpu = seconds($1) + seconds($2)
        if (name != "") print name, round, wall, (cpu - before) * 1000
        before = cpu } }' "$log" >"$TMP/latency.calls"
  echo "| path | mean wall, ms | minus the same round's state file: mean ± 95%, ms | median, ms | caller's CPU, ms |"
  echo "|---|---|---|---|---|"
  for name in "${LATENCY_PATHS[@]}"; do
    awk -v name="$name" '$1 == "file" { file[$2] = $3 } $1 == name { wall[$2] = $3; cpu[$2] = $4 }
      END { for (r in wall) print wall[r] - file[r], wall[r], cpu[r] }' "$TMP/latency.calls" >"$TMP/latency.$name"
    printf '| %s | %s | %s | %s | %s |\n' "$name" \
      "$(awk '{ s += $2 } END { printf "%.3f", s / NR }' "$TMP/latency.$name")" \
      "$(awk '{ s += $1; q += $1 * $1 } END { m = s / NR; sd = sqrt((q - NR * m * m) / (NR - 1))
          printf "%+.3f ± %.3f", m, 1.96 * sd / sqrt(NR) }' "$TMP/latency.$name")" \
      "$(cut -d' ' -f1 "$TMP/latency.$name" | median | awk '{ printf "%+.3f", $1 }')" \
      "$(awk '{ s += $3 } END { printf "%.3f", s / NR }' "$TMP/latency.$name")"
  done
  echo
  echo "$rounds rounds; the agent's own CPU per call through it: $(awk -v ns="$agent_ns" 'BEGIN { printf "%.3f", ns / 1e6 }') ms; load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after."
}

if [ "${1:-all}" = latency ]; then
  measure_latency
  echo "$latency_result"
  exit 0
fi

echo "== 4 hosts x 10 execs sharing 20/s" >&2
start=$(date +%s%N)
loops=()
for host in 1 2 3 4; do
  for _ in $(seq 10); do
    RATELIMIT_STATE_DIR=$TMP/host$host "$RATELIMIT" exec --rate 20/s --key execs -- \
      sh -c 'date +%s%N >>"$0"' "$TMP/starts.$host"
  done &
  loops+=($!)
done
wait "${loops[@]}"
exec_seconds=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
exec_window=$(sort -n "$TMP"/starts.* | awk '{ t[NR] = $1 } END {
  for (i = 1; i <= NR; i++) { n = 0; for (j = i; j <= NR && t[j] - t[i] < 1e9; j++) n++
    if (n > most) most = n }
  print most }')
exec_result="40 starts in ${exec_seconds} s (ideal 1.95), at most $exec_window in any 1 s window"
echo "$exec_result" >&2

echo "== 4 pipes on 4 hosts sharing 1 MB/s through one key" >&2
for i in 0 1 2 3; do
  head -c 1000000 /dev/urandom >"$TMP/in$i"
  mkfifo "$TMP/fifo$i"
  "$PROBE" --trace "$TMP/trace$i" --absolute --input "$TMP/fifo$i" >/dev/null &
done
sleep 0.2
pipes=()
for i in 0 1 2 3; do
  RATELIMIT_STATE_DIR=$TMP/host$i "$RATELIMIT" --rate 1M --key pipes <"$TMP/in$i" |
    tee "$TMP/out$i" >"$TMP/fifo$i" &
  pipes+=($!)
done
wait "${pipes[@]}"
sleep 0.2
exact=yes
for i in 0 1 2 3; do cmp -s "$TMP/in$i" "$TMP/out$i" || exact=NO; done
# The sum of the traces: steady rate after the first read, the mean time from one write to the
# next (reads of one pipe within 5 ms are one write), worst 100 ms window / (rate x 0.1 s).
pipes_result=$(for i in 0 1 2 3; do
  awk -v pipe="$i" '{ print $1, $2 - previous, pipe; previous = $2 }' "$TMP/trace$i"
done | sort -n -k1,1 | awk '{ time[NR] = $1; units[NR] = $2; total += $2
    if (!(($3) in last) || $1 - last[$3] > 0.005) write_time[++writes] = $1
    last[$3] = $1 } END {
    steady = (total - units[1]) / (time[NR] - time[1]); start = 0; sum = 0
    for (i = 1; i <= NR; i++) { sum += units[i]
      while (time[i] - time[start + 1] >= 0.1) sum -= units[++start]
      if (sum > worst) worst = sum }
    printf "sum %.0f B/s (%+.2f%%), a write every %.1f ms, worst 100 ms window %.3f x the rate",
      steady, (steady / 1e6 - 1) * 100, 1000 * (write_time[writes] - write_time[1]) / (writes - 1),
      worst / 1e5 }')
pipes_result="$pipes_result, byte-exact: $exact"
echo "$pipes_result" >&2

measure_latency

echo "== decisions per second, 8 clients, against a minimal GCRA script" >&2
read -ra bucket <<<"$(bucket_call "$TMP/redis/sock" "$RATELIMIT_ROOT/src/stores/redis/redis_bucket.lua")"
BENCH_REDIS_SOCK=$TMP/redis/sock
BENCH_TMP=$TMP
load_gcra_script
unix_options=(-s "$TMP/redis/sock")
tls_options=(-h 127.0.0.1 -p "$tls_port" --tls --cacert "$tls/ca.crt")
ours() { throughput "$@" "${bucket[@]}" 1 'ratelimit:{bench__rand_int__}' reserve "" 1 9223372036854775807 "1,bursty,1e9,1,0,3,0,0,0," bursty 0 1e9 1; }
ROUNDS=${BENCH_ROUNDS:-5}
# Other work on the machine slows both scripts: the load average before and after, with the figures.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
ours_unix() { ours "${unix_options[@]}"; }
gcra_unix() { gcra "${unix_options[@]}"; }
alternating_rounds "$ROUNDS" ours ours_unix gcra gcra_unix
ours "${unix_options[@]}" -r 8 >"$TMP/ours8"
ours "${tls_options[@]}" >"$TMP/ours_tls"
ours_rps=$(cut -d' ' -f1 "$TMP/ours" | median)
ours_cpu=$(cut -d' ' -f2 "$TMP/ours" | median)
gcra_rps=$(cut -d' ' -f1 "$TMP/gcra" | median)
gcra_cpu=$(cut -d' ' -f2 "$TMP/gcra" | median)
read -r eight_rps eight_cpu <"$TMP/ours8"
read -r tls_rps tls_cpu <"$TMP/ours_tls"
ratio=$(awk -v a="$ours_cpu" -v b="$gcra_cpu" 'BEGIN { printf "%.2f", a / b }')
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
throughput_result="one key: ${ours_rps}/s, ${ours_cpu} us of server CPU each; minimal GCRA script on one key: ${gcra_rps}/s, ${gcra_cpu} us each (ratelimit's script ${ratio}x; medians of $ROUNDS alternating rounds of 100000; load average $load_before before, $load_after after); 8 keys: ${eight_rps}/s, ${eight_cpu} us each; over TLS, one key: ${tls_rps}/s, ${tls_cpu} us each"
echo "$throughput_result" >&2

echo "== server CPU per acquire: TCP, TLS full handshake, TLS resumed" >&2
# Each call connects: not through the host agent, which keeps its connection.
export RATELIMIT_NO_AGENT=1
# An RSA-2048 server certificate too: what most CAs issue, and dearer to the server than EC.
openssl req -new -newkey rsa:2048 -nodes -keyout "$tls/rsa.key" -subj /CN=rsa \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -out "$tls/rsa.csr" 2>/dev/null
openssl x509 -req -in "$tls/rsa.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -set_serial 2 -days 2 \
  -copy_extensions copy -out "$tls/rsa.crt" 2>/dev/null
mkdir -m 700 "$TMP/keeps"
# Writable by the group: not a safe state directory, so it keeps no session.
mkdir -m 770 "$TMP/keeps-none"
# per_call NAME STATE_DIR ACQUIRE-OPTIONS...: appends "wall_ms server_cpu_us" per acquire (means of
# 200, after one call that keeps a session if the directory may) to $TMP/per_call.NAME.
per_call() {
  local name=$1 dir=$2 count=200 before after start ns
  shift 2
  RATELIMIT_STATE_DIR=$dir "$RATELIMIT" acquire "$@" --rate 1e9 --key handshake
  before=$(server_cpu)
  start=$(date +%s%N)
  for _ in $(seq $count); do RATELIMIT_STATE_DIR=$dir "$RATELIMIT" acquire "$@" --rate 1e9 --key handshake; done
  ns=$(($(date +%s%N) - start))
  after=$(server_cpu)
  awk -v ns="$ns" -v a="$after" -v b="$before" -v n=$count \
    'BEGIN { printf "%.2f %.0f\n", ns / n / 1e6, (a - b) / n * 1e6 }' >>"$TMP/per_call.$name"
}
# per_call_medians NAME: "CPU us, wall ms" of NAME's rounds.
per_call_medians() {
  echo "$(cut -d' ' -f2 "$TMP/per_call.$1" | median) us, $(cut -d' ' -f1 "$TMP/per_call.$1" | median) ms"
}
handshake_load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
  per_call tcp "$TMP/keeps" --redis "$TCP_URL"
  for certificate in server rsa; do
    redis-cli -s "$TMP/redis/sock" config set tls-cert-file "$tls/$certificate.crt" \
      tls-key-file "$tls/$certificate.key" >/dev/null
    full() { per_call "$certificate-full" "$TMP/keeps-none" --redis "$TLS_URL" "${TLS_CA[@]}"; }
    resumed() { per_call "$certificate-resumed" "$TMP/keeps" --redis "$TLS_URL" "${TLS_CA[@]}"; }
    # Alternating which goes first, as for the scripts above.
    if [ $((round % 2)) -eq 1 ]; then full; resumed; else resumed; full; fi
  done
done
handshake_result="TCP: $(per_call_medians tcp); TLS with an EC P-256 certificate, full handshake: $(per_call_medians server-full), resumed: $(per_call_medians server-resumed); with an RSA-2048 certificate, full handshake: $(per_call_medians rsa-full), resumed: $(per_call_medians rsa-resumed) (medians of $ROUNDS alternating rounds of 200; load average $handshake_load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after)"
echo "$handshake_result" >&2

echo "== the script's round trip on a kept connection" >&2
# round_trip [redis-benchmark options]: the median of one client's FCALL round trips, in ms.
round_trip() {
  redis-benchmark -c 1 -n 20000 -q "$@" \
    "${bucket[@]}" 1 'ratelimit:{kept}' reserve "" 1 9223372036854775807 "1,bursty,1e9,1,0,3,0,0,0," bursty 0 1e9 1 |
    tr '\r' '\n' | grep -oE 'p50=[0-9.]+' | tail -1 | cut -d= -f2
}
kept_result="unix socket $(round_trip -s "$TMP/redis/sock") ms, TCP $(round_trip -h 127.0.0.1 -p "$port") ms, TLS $(round_trip "${tls_options[@]}") ms"
echo "$kept_result" >&2

{
  echo "# Redis store"
  echo
  echo "Run by \`scripts/bench_redis.sh\` on $(nproc) cores, $(date -u +%Y-%m-%d), $(redis-server --version | awk '{ print $1, $2, $3 }')."
  echo
  echo "- 4 processes as 4 hosts x 10 execs sharing 20/s: $exec_result."
  echo "- 4 pipes of 1 MB on 4 hosts sharing 1 MB/s through one key: $pipes_result (each pipe's"
  echo "  last 28 kB is booked exactly and each 108 ms chunk written in 12 ms parts, so that the last"
  echo "  and the next pipe's chunk share a 100 ms window only in part; bench/results/shared.md)."
  echo "- The wall time of one \`ratelimit acquire\` that never waits (process start included):"
  echo
  sed 's/^/  /' <<<"$latency_result"
  echo
  echo "- Redis's CPU and the wall time per \`ratelimit acquire\` (a new connection each):"
  echo "  $handshake_result."
  echo "- The script's round trip on a kept connection, as a pipe makes it (one client, median):"
  echo "  $kept_result."
  echo "- The bucket script's decisions from 8 concurrent clients (redis-benchmark, FCALL):"
  echo "  $throughput_result."
} >"$RESULTS/redis.md"
cat "$RESULTS/redis.md"
