# Sourced by the e2e tests of the Redis backend, after lib.sh: real redis-servers of the test's
# own in $WORK, stopped by pid when the test ends. No mock of Redis anywhere.

REDIS_PIDS=()
trap 'for pid in "${REDIS_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

# start_redis NAME [redis-server options...]: starts a server in $WORK/NAME listening on the unix
# socket $WORK/NAME/sock and on a free loopback TCP port, written to $WORK/NAME/port; its pid is
# in $WORK/NAME/pid.
start_redis() {
  local name=$1 dir=$WORK/$1 port tries
  shift
  mkdir -p "$dir"
  for tries in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    rm -f "$dir/sock"
    redis-server --port "$port" --bind 127.0.0.1 --unixsocket "$dir/sock" --save '' \
      --appendonly no --dir "$dir" --logfile "$dir/log" "$@" >/dev/null 2>&1 &
    echo $! >"$dir/pid"
    REDIS_PIDS+=($!)
    disown # not a job of the test: no "Killed" notices, and `wait` does not wait for it
    echo "$port" >"$dir/port"
    local waited=0
    while [ $waited -lt 500 ]; do
      if redis-cli -s "$dir/sock" ping 2>/dev/null | grep -q -e PONG -e NOAUTH; then
        redis-cli -p "$port" ping 2>/dev/null | grep -q -e PONG -e NOAUTH && return 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break # the port was taken: try another
      sleep 0.01
      waited=$((waited + 1))
    done
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
  done
  fail "redis-server $name did not start"
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
  local name=$1 dir=$2 tls_port=$((20000 + RANDOM % 40000))
  shift 2
  start_redis "$name" --tls-port "$tls_port" --tls-cert-file "$dir/server.crt" \
    --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no "$@"
  echo "$tls_port" >"$WORK/$name/tls-port"
}

# start_sentinel NAME MASTER_NAME MASTER_SERVER: a redis-sentinel in $WORK/NAME on a free loopback
# port ($WORK/NAME/port) watching server MASTER_SERVER as MASTER_NAME, with a quorum of 1 and a
# master deemed down after 300 ms; returns once it knows the master's replicas, if it has any.
start_sentinel() {
  local name=$1 master_name=$2 dir=$WORK/$1 port tries waited
  local master_port
  master_port=$(cat "$WORK/$3/port")
  mkdir -p "$dir"
  for tries in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    cat >"$dir/sentinel.conf" <<CONF
port $port
bind 127.0.0.1
dir $dir
logfile $dir/log
sentinel monitor $master_name 127.0.0.1 $master_port 1
sentinel down-after-milliseconds $master_name 300
sentinel failover-timeout $master_name 3000
CONF
    redis-sentinel "$dir/sentinel.conf" >/dev/null 2>&1 &
    echo $! >"$dir/pid"
    REDIS_PIDS+=($!)
    disown
    echo "$port" >"$dir/port"
    waited=0
    while [ $waited -lt 500 ]; do
      if redis-cli -p "$port" sentinel get-master-addr-by-name "$master_name" 2>/dev/null |
        grep -q "$master_port"; then
        return 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.01
      waited=$((waited + 1))
    done
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
  done
  fail "redis-sentinel $name did not start"
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
