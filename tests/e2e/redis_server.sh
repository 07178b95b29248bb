# Sourced by the e2e tests of the Redis store, after lib.sh: real redis-servers of the test's
# own in $WORK, stopped by pid when the test ends. No mock of Redis anywhere.

REDIS_PIDS=()
# CONT: a server a test stopped (SIGSTOP) and did not resume ends too. $WORK is removed once they
# are gone (a sentinel rewrites its configuration as it ends), 5 s at most.
stop_all_redis() {
  local pid waited
  for pid in "${REDIS_PIDS[@]}"; do kill "$pid" 2>/dev/null && kill -CONT "$pid" 2>/dev/null || true; done
  for pid in "${REDIS_PIDS[@]}"; do
    for waited in $(seq 500); do kill -0 "$pid" 2>/dev/null && sleep 0.01 || break; done
  done
  rm -rf "$WORK"
}
trap stop_all_redis EXIT

# start_redis NAME [redis-server options...]: starts a server in $WORK/NAME listening on the unix
# socket $WORK/NAME/sock and on a free loopback TCP port, written to $WORK/NAME/port; its pid is
# in $WORK/NAME/pid.
start_redis() {
  start_on_a_free_port "redis-server $1" "$1" launch_redis redis_answers "${@:2}"
}

# launch_redis DIR PORT ARGS...: becomes the redis-server (so that its pid is the server's).
launch_redis() {
  rm -f "$1/sock"
  exec redis-server --port "$2" --bind 127.0.0.1 --unixsocket "$1/sock" --save '' \
    --appendonly no --dir "$1" --logfile "$1/log" "${@:3}"
}

# start_redis_again NAME [redis-server options...]: server NAME, stopped (stop_redis), started
# again on its port and socket, as a restart does; returns once it answers.
start_redis_again() {
  local dir=$WORK/$1 port waited
  port=$(cat "$dir/port")
  launch_redis "$dir" "$port" "${@:2}" >/dev/null 2>&1 &
  echo $! >"$dir/pid"
  REDIS_PIDS+=($!)
  disown
  for waited in $(seq 500); do
    redis_answers "$dir" "$port" && return 0
    sleep 0.01
  done
  fail "redis-server $1 did not start again on port $port"
}

# redis_answers DIR PORT: the server answers on its socket and its port.
redis_answers() {
  redis-cli -s "$1/sock" ping 2>/dev/null | grep -q -e PONG -e NOAUTH &&
    redis-cli -p "$2" ping 2>/dev/null | grep -q -e PONG -e NOAUTH
}

# start_on_a_free_port WHAT NAME LAUNCH READY ARGS...: `LAUNCH DIR PORT ARGS...` in the background
# on a random port, until `READY DIR PORT ARGS...` holds; another port when the server ends (the
# port was taken), five at most. DIR is $WORK/NAME; its files pid and port say which.
start_on_a_free_port() {
  local what=$1 dir=$WORK/$2 launch=$3 ready=$4 port tries waited
  shift 4
  mkdir -p "$dir"
  for tries in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    "$launch" "$dir" "$port" "$@" >/dev/null 2>&1 &
    echo $! >"$dir/pid"
    REDIS_PIDS+=($!)
    disown # not a job of the test: no "Killed" notices, and `wait` does not wait for it
    echo "$port" >"$dir/port"
    for waited in $(seq 500); do
      "$ready" "$dir" "$port" "$@" && return 0
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.01
    done
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
  done
  fail "$what did not start"
}

# stop_redis NAME [SIGNAL]: stops it (KILL: as a crash) and waits until it is gone.
stop_redis() {
  local pid
  pid=$(cat "$WORK/$1/pid")
  kill "-${2:-TERM}" "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
}

# redis_cli NAME ARGS...: redis-cli on server NAME's socket.
redis_cli() {
  local name=$1
  shift
  redis-cli -s "$WORK/$name/sock" "$@"
}

# make_tls_files DIR: the certificates of make_tls_files.sh in DIR.
make_tls_files() {
  "$(dirname "${BASH_SOURCE[0]}")/make_tls_files.sh" "$1" || fail "openssl did not make the TLS files"
}

# start_tls_redis NAME DIR [redis-server options...]: start_redis NAME, also serving TLS with DIR's
# server certificate (make_tls_files) on a free port, written to $WORK/NAME/tls-port; clients
# are not asked for certificates.
start_tls_redis() {
  start_on_a_free_port "redis-server $1" "$1" launch_tls_redis redis_answers "$2" "${@:3}"
}

# launch_tls_redis DIR PORT TLS_DIR ARGS...: launch_redis, with TLS on a port of its own picked
# at each launch (written to DIR/tls-port), so that a TLS port found taken is not tried again.
launch_tls_redis() {
  local tls_port=$((20000 + RANDOM % 40000))
  echo "$tls_port" >"$1/tls-port"
  launch_redis "$1" "$2" --tls-port "$tls_port" --tls-cert-file "$3/server.crt" \
    --tls-key-file "$3/server.key" --tls-ca-cert-file "$3/ca.crt" --tls-auth-clients no "${@:4}"
}

# start_tls_main: TLS files in $WORK/tls and a server "main" serving them; sets $tls, $port (its
# TLS port), $url (rediss://localhost:PORT) and $ca (the --redis-tls-ca option of its CA).
start_tls_main() {
  tls=$WORK/tls
  make_tls_files "$tls"
  start_tls_redis main "$tls"
  port=$(cat "$WORK/main/tls-port")
  url=rediss://localhost:$port
  ca=(--redis-tls-ca "$tls/ca.crt")
}

# start_sentinel NAME MASTER_NAME MASTER_SERVER: a redis-sentinel in $WORK/NAME on a free loopback
# port ($WORK/NAME/port) watching server MASTER_SERVER as MASTER_NAME, with a quorum of
# $SENTINEL_QUORUM (default 1) and a master deemed down after $SENTINEL_DOWN_AFTER ms (default
# 300); returns once it knows the master's address.
start_sentinel() {
  start_on_a_free_port "redis-sentinel $1" "$1" launch_sentinel sentinel_knows_master "$2" \
    "$(cat "$WORK/$3/port")"
}

# launch_sentinel DIR PORT MASTER_NAME MASTER_PORT: becomes the redis-sentinel.
launch_sentinel() {
  cat >"$1/sentinel.conf" <<CONF
port $2
bind 127.0.0.1
dir $1
logfile $1/log
sentinel monitor $3 127.0.0.1 $4 ${SENTINEL_QUORUM:-1}
sentinel down-after-milliseconds $3 ${SENTINEL_DOWN_AFTER:-300}
sentinel failover-timeout $3 3000
CONF
  exec redis-sentinel "$1/sentinel.conf"
}

# sentinel_knows_master DIR PORT MASTER_NAME MASTER_PORT: it answers with the master's address.
sentinel_knows_master() {
  redis-cli -p "$2" sentinel get-master-addr-by-name "$3" 2>/dev/null | grep -q "$4"
}

# wait_for_replica SENTINEL MASTER_NAME: until the sentinel lists a replica that is in sync.
wait_for_replica() {
  local port waited=0
  port=$(cat "$WORK/$1/port")
  while [ $waited -lt 1000 ]; do
    redis-cli -p "$port" sentinel replicas "$2" 2>/dev/null | grep -qx 'master-link-status' &&
      redis-cli -p "$port" sentinel replicas "$2" | grep -A1 -x 'master-link-status' | grep -qx ok &&
      return 0
    sleep 0.01
    waited=$((waited + 1))
  done
  fail "sentinel $1 never saw a replica of $2 in sync"
}

# start_cluster NAME...: one redis-server per NAME with Cluster enabled, made into one Cluster of
# masters only by redis-cli --cluster create; returns once every node says the Cluster is ok.
start_cluster() {
  local name nodes=() waited
  for name in "$@"; do
    start_redis "$name" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 5000
    nodes+=("127.0.0.1:$(cat "$WORK/$name/port")")
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/cluster-create.log" 2>&1 ||
    fail "redis-cli --cluster create failed: $(tail -3 "$WORK/cluster-create.log")"
  for name in "$@"; do
    waited=0
    until redis_cli "$name" cluster info | grep -q '^cluster_state:ok'; do
      [ $waited -lt 1000 ] || fail "the Cluster never became ok on $name"
      sleep 0.01
      waited=$((waited + 1))
    done
  done
}

# use_agents: the host agent on (lib.sh turns it off), this test's state directory in
# $WORK/state, agents that idle a minute; the agents the test starts end with it (their pids are
# in their lock files), before the servers. Every test of Redis starts so (below).
use_agents() {
  unset RATELIMIT_NO_AGENT
  export RATELIMIT_STATE_DIR=$WORK/state RATELIMIT_AGENT_IDLE=60s
  trap stop_agents_and_redis EXIT
}
# use_store VARIANT STATE_DIR: $store, the options of the store a test's VARIANT runs on: the state
# file in STATE_DIR (state_file), or server main through the host agent (redis) or straight to it
# (redis_no_agent).
use_store() {
  store="--redis unix://$WORK/main/sock"
  [ "$1" = state_file ] && store="--state-dir $2"
  if [ "$1" = redis_no_agent ]; then export RATELIMIT_NO_AGENT=1; else unset RATELIMIT_NO_AGENT; fi
}
stop_agents_and_redis() {
  local lock
  for lock in "$WORK"/*/agent.lock; do
    [ -s "$lock" ] && kill -9 "$(cat "$lock")" 2>/dev/null || true
  done
  stop_all_redis
}

# connections SERVER: the connections the server has accepted so far.
connections() { redis_cli "$1" info stats | sed -n 's/^total_connections_received:\([0-9]*\).*/\1/p'; }

# exec_loop NAME COUNT: COUNT execs on key k at 10/s, each printing its number and its start time
# (in $WORK/starts); what they print in $WORK/NAME.out, errors and exit codes in $WORK/NAME.err.
exec_loop() {
  local i
  for i in $(seq "$2"); do
    "$RATELIMIT" exec --rate 10/s --key k --redis-timeout 5s -- \
      sh -c 'echo "$1"; date +%s%N >>"$2"' sh "$i" "$WORK/starts" >>"$WORK/$1.out" \
      2>>"$WORK/$1.err" || echo "exec $i exited $?" >>"$WORK/$1.err"
  done
}

# starts_within_bound KILLED_NS: the 60 start times of two exec_loop 30s at 10/s (in $WORK/starts)
# hold in every window from one start to a later one at most rate x its length + burst (10) + 1
# (the first permit is free) + 2 (lag, scheduling), or the test fails; writes "gap MS after N" to
# $WORK/bound: from the master's kill (KILLED_NS) to the first start after it, and how many started
# after it.
starts_within_bound() {
  sort -n "$WORK/starts" | awk -v killed="$1" '
    { t[NR] = $1 / 1e9 }
    END {
      if (NR != 60) { print "starts: " NR; exit 1 }
      for (i = 1; i <= NR; i++) for (j = i; j <= NR; j++)
        if (j - i + 1 > 10 * (t[j] - t[i]) + 13) { printf "%d starts in %.3f s\n", j - i + 1, t[j] - t[i]; exit 1 }
      for (i = 1; i <= NR; i++) if (t[i] * 1e9 > killed) { after++; if (!gap) gap = (t[i] * 1e9 - killed) / 1e6 }
      printf "gap %.0f after %d\n", gap, after
    }' >"$WORK/bound" || fail "grants beyond the bound: $(cat "$WORK/bound")"
}

# Tests of Redis run as users do, through the host agent; E2E_NO_AGENT=1 (set by the tests named
# *_no_agent, which run another test again) runs them with RATELIMIT_NO_AGENT=1, as --no-agent.
[ -n "${E2E_NO_AGENT:-}" ] || use_agents
