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

# expect_few_429s_after_5s: of the requests in $WORK/service.log after the first 5 s, at least 40
# and fewer than 10 % answered 429.
expect_few_429s_after_5s() {
  local total throttled
  read -r total throttled < <(awk '$1 >= 5 { n++; if ($2 == 429) t++ } END { print n + 0, t + 0 }' \
    "$WORK/service.log")
  echo "after 5 s: $total requests, $throttled answered 429 ($(uptime))" >&2
  [ "$total" -ge 40 ] || fail "only $total requests after the first 5 s: the key held back too much"
  [ $((throttled * 10)) -lt "$total" ] ||
    fail "$throttled of $total requests after the first 5 s got 429, expected under 10 %"
}

# expect_nothing_during_the_long_retry_after: no request in $WORK/service.log during the service's
# Retry-After of 3 s (0.1 s of grace for one sent between the 429 and its report), some after.
expect_nothing_during_the_long_retry_after() {
  local at during after
  read -r at < <(awk '$3 == 3 { print $1; exit }' "$WORK/service.log")
  [ -n "$at" ] || fail "the service never answered Retry-After: 3"
  read -r during < <(awk -v at="$at" '$1 > at + 0.1 && $1 < at + 3 { n++ } END { print n + 0 }' \
    "$WORK/service.log")
  [ "$during" -eq 0 ] || fail "$during requests reached the service during its Retry-After of 3 s"
  read -r after < <(awk -v at="$at" '$1 >= at + 3 { n++ } END { print n + 0 }' "$WORK/service.log")
  [ "$after" -gt 0 ] || fail "no request after the Retry-After of 3 s ended"
}
