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

# make_tls_files DIR: in DIR, a test CA (ca.crt), a server certificate it signed for localhost and
# 127.0.0.1 (server.crt, server.key), a client certificate (client.crt, client.key), and for the
# failures: another CA (other-ca.crt), a server certificate for another name (other-name.crt,
# .key) and one that expired as it was made (expired.crt, .key). EC keys: fast to make.
make_tls_files() {
  local dir=$1 name
  mkdir -p "$dir"
  (
    cd "$dir"
    new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
    new_key ca.key
    openssl req -x509 -key ca.key -out ca.crt -days 2 -subj /CN=ratelimit-test-ca 2>/dev/null
    new_key other-ca.key
    openssl req -x509 -key other-ca.key -out other-ca.crt -days 2 -subj /CN=another-ca 2>/dev/null
    # sign NAME DAYS SUBJECT_ALT_NAMES: NAME.key and NAME.crt, signed by ca.key.
    sign() {
      new_key "$1.key"
      openssl req -new -key "$1.key" -subj "/CN=$1" -addext "subjectAltName=$3" -out "$1.csr" \
        2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -set_serial "$RANDOM$RANDOM" \
        -days "$2" -copy_extensions copy -out "$1.crt" 2>/dev/null
    }
    sign server 2 DNS:localhost,IP:127.0.0.1
    sign client 2 DNS:ratelimit-client
    sign other-name 2 DNS:elsewhere.test
    sign expired 0 DNS:localhost,IP:127.0.0.1
  )
  for name in ca.crt server.crt client.crt other-name.crt expired.crt; do
    [ -s "$dir/$name" ] || fail "openssl did not make $dir/$name"
  done
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
