# Sourced by the back-off tests against a service that answers 429 (tests/e2e/http_429_server.py):
# the service, and loops of curl that take their permits from a key and report its 429s.

command -v curl >/dev/null || skip "curl is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
BACKOFF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# start_service RATE BURST RETRY_AFTER LONG_RETRY_AFTER: the service on a free loopback port, its
# requests logged to $WORK/service.log; sets $service_pid and $service_url.
start_service() {
  rm -f "$WORK/service.port"
  python3 "$BACKOFF_DIR/http_429_server.py" "$WORK/service.port" "$WORK/service.log" "$@" &
  service_pid=$!
  wait_for_file "$WORK/service.port"
  service_url="http://127.0.0.1:$(cat "$WORK/service.port")/"
}

stop_service() {
  [ -n "${service_pid:-}" ] || return 0
  kill "$service_pid" 2>/dev/null || true
  wait "$service_pid" 2>/dev/null || true
}

# curl_loop SECONDS KEY ACQUIRE-OPTIONS...: until SECONDS from now, takes a permit of KEY and
# calls the service; a 429 is reported with its Retry-After.
curl_loop() {
  local until=$(($(now_ns) + $1 * 1000000000)) key=$2 code retry_after
  local headers="$WORK/headers.$BASHPID"
  shift 2
  while [ "$(now_ns)" -lt "$until" ]; do
    "$RATELIMIT" acquire --key "$key" "$@" || return 1
    code=$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' "$service_url") || code=000
    if [ "$code" = 429 ]; then
      retry_after=$(sed -n 's/^[Rr]etry-[Aa]fter: *//p' "$headers" | tr -d '\r')
      "$RATELIMIT" throttle --key "$key" --retry-after "$retry_after" || return 1
    fi
  done
}

# run_loops COUNT SECONDS KEY ACQUIRE-OPTIONS...: COUNT curl_loops at once; fails if one fails.
run_loops() {
  local count=$1 pids=() pid
  shift
  for _ in $(seq "$count"); do
    curl_loop "$@" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || fail "a curl loop failed"; done
}
