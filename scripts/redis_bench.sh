# Sourced by the benchmarks that measure the bucket script on a redis-server (bench_redis.sh,
# bench_quota.sh, bench_agent.sh, bench_script_*.sh), after setup.sh: the server they start, and the server's CPU per
# decision against a minimal GCRA script.
# $BENCH_REDIS_SOCK is the server's unix socket, $BENCH_TMP a directory of the caller's.

# start_bench_server: a redis-server in $TMP/redis (its unix socket sock there), on a free-ish
# loopback TCP $port and a TLS $tls_port with certificates in $tls; its pid in $server.
start_bench_server() {
  mkdir -p "$TMP/redis"
  port=$((20000 + RANDOM % 40000))
  tls_port=$((port + 1))
  tls=$TMP/tls
  "$RATELIMIT_ROOT/tests/e2e/make_tls_files.sh" "$tls"
  redis-server --port "$port" --bind 127.0.0.1 --unixsocket "$TMP/redis/sock" --save '' \
    --appendonly no --dir "$TMP/redis" --logfile "$TMP/redis/log" --tls-port "$tls_port" \
    --tls-cert-file "$tls/server.crt" --tls-key-file "$tls/server.key" \
    --tls-ca-cert-file "$tls/ca.crt" --tls-auth-clients no >/dev/null 2>&1 &
  server=$!
}

# start_socket_redis DIR: a redis-server of the benchmark's own on the unix socket DIR/sock only
# (no TCP port, nothing saved, its log in DIR), answering when this returns; its pid in $server.
start_socket_redis() {
  mkdir -p "$1"
  redis-server --port 0 --unixsocket "$1/sock" --save '' --appendonly no --dir "$1" \
    --logfile "$1/log" >/dev/null 2>&1 &
  server=$!
  local tries=0
  until redis-cli -s "$1/sock" ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 1000 ] || { echo "redis-server did not start in $1 (see $1/log)" >&2; return 1; }
    sleep 0.01
  done
}

# load_gcra_script: loads the least a shared rate limit does per decision, for comparison (the
# server's TIME, one GET and one SET with an expiry: GCRA, the key holds the theoretical arrival
# time in microseconds), and sets $GCRA_SHA.
load_gcra_script() {
  cat >"$BENCH_TMP/gcra.lua" <<'LUA'
local time = redis.call("TIME")
local now = time[1] * 1e6 + time[2]
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = math.max(tonumber(redis.call("GET", KEYS[1])) or now, now)
if now < tat - tolerance then return {0, tostring(tat - tolerance - now)} end
tat = tat + interval
redis.call("SET", KEYS[1], tat, "PX", math.ceil((tat - now) / 1000) + 1)
return {1, "0"}
LUA
  GCRA_SHA=$(redis-cli -s "$BENCH_REDIS_SOCK" script load "$(cat "$BENCH_TMP/gcra.lua")")
}

# bucket_call SOCKET SCRIPT: loads SCRIPT, a version of src/stores/redis/redis_bucket.lua, on the
# server at the unix SOCKET as that version's ratelimit does, and prints the command that calls
# it, up to its count of keys: FCALL and the function's name for a function library (the lines
# before the file as src/stores/redis/redis_script.cpp.in writes them), else EVALSHA and the SHA-1
# (an older script, for comparisons). SCRIPT is read once: it may be a pipe, as <(git show ...).
bucket_call() {
  local text sha
  text=$(cat "$2" && echo .)
  text=${text%.}
  sha=$(printf '%s' "$text" | sha1sum | cut -d' ' -f1)
  if [[ $text == *redis.register_function* ]]; then
    redis-cli -s "$1" function load replace \
      "$(printf '#!lua name=ratelimit_%s\nlocal FUNCTION_NAME = "ratelimit_%s"\n%s' "$sha" "$sha" \
        "$text")" >/dev/null
    echo "FCALL ratelimit_$sha"
  else
    echo "EVALSHA $(redis-cli -s "$1" script load "$text")"
  fi
}

# The common call's ARGV as `ratelimit acquire --rate 1e9/s --key K` sends it (MONITOR shows it):
# a reserve of one permit with no timeout that keeps the key's settings, the caller's texts, the
# parts of them the common call computes with, and the rate's notation. 1e9/s never waits.
ACQUIRE_ARGUMENTS=(reserve_keeping '' 1 9223372036854775807 '1,bursty,1000000000,1,0,3,0,0,0,'
                   bursty 0 1000000000 1 'permits si 1 time')

# server_cpu: the server's CPU time so far (user + system), in seconds.
server_cpu() {
  redis-cli -s "$BENCH_REDIS_SOCK" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ { sum += $2 } END { printf "%.6f", sum }'
}

# throughput CONNECTION-OPTIONS... COMMAND...: "decisions/s us_of_server_CPU_each", from 8
# clients of redis-benchmark sending COMMAND 100000 times.
throughput() {
  local requests=100000 before after rps
  before=$(server_cpu)
  rps=$(redis-benchmark -c 8 -n $requests -q "$@" |
    tr '\r' '\n' | grep -oE '[0-9.]+ requests per second' | tail -1 | awk '{ print $1 }')
  after=$(server_cpu)
  awk -v rps="$rps" -v a="$after" -v b="$before" -v n=$requests \
    'BEGIN { printf "%.0f %.2f\n", rps, (a - b) / n * 1e6 }'
}

# gcra CONNECTION-OPTIONS...: throughput of the GCRA script on one key (load_gcra_script first).
gcra() { throughput "$@" EVALSHA "$GCRA_SHA" 1 'gcra:{bench__rand_int__}' 0.001 1000000; }

# median: the median of the numbers on standard input, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# alternating_rounds ROUNDS NAME COMMAND [NAME COMMAND]...: ROUNDS rounds of every COMMAND (a
# function taking no arguments that prints a throughput line), each round starting with the next
# one, as other work on the machine makes single figures noisy; each one's lines go to
# $BENCH_TMP/NAME.
alternating_rounds() {
  local rounds=$1 round i j
  shift
  local count=$(($# / 2)) pairs=("$@")
  for round in $(seq 0 $((rounds - 1))); do
    for i in $(seq 0 $((count - 1))); do
      j=$(((round + i) % count))
      "${pairs[$((2 * j + 1))]}" >>"$BENCH_TMP/${pairs[$((2 * j))]}"
    done
  done
}
