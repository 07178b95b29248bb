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
# calls the service; a 429 is reported with its Retry-After. The moments (Unix seconds, read
# without a process: $EPOCHREALTIME) each permit's request was sent are added to $WORK/sent, and
# each report's start and end with its Retry-After to $WORK/reports.
curl_loop() {
  local until=$(($(now_ns) + $1 * 1000000000)) key=$2 code retry_after reporting
  local headers="$WORK/headers.$BASHPID"
  shift 2
  while [ "$(now_ns)" -lt "$until" ]; do
    "$RATELIMIT" acquire --key "$key" "$@" || return 1
    echo "$EPOCHREALTIME" >>"$WORK/sent"
    code=$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' "$service_url") || code=000
    if [ "$code" = 429 ]; then
      retry_after=$(sed -n 's/^[Rr]etry-[Aa]fter: *//p' "$headers" | tr -d '\r')
      reporting=$EPOCHREALTIME
      "$RATELIMIT" throttle --key "$key" --retry-after "$retry_after" || return 1
      echo "$reporting $EPOCHREALTIME $retry_after" >>"$WORK/reports"
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

# expect_nothing_during_the_long_retry_after: no request sent ($WORK/sent) from 0.1 s after the
# report of the service's Retry-After of 3 s ended ($WORK/reports) until 3 s after it started,
# some after. Measured from the report, not from the 429: on a loaded machine the loops may take
# their permits (granted before the report) long after the 429 was answered; 0.1 s of grace for
# a permit granted just before the report's end, whose loop was slow to say it sent.
expect_nothing_during_the_long_retry_after() {
  local reported during after
  reported=$(awk '$3 == 3 { print $1, $2; exit }' "$WORK/reports")
  [ -n "$reported" ] || fail "the service never answered Retry-After: 3"
  read -r during after < <(awk -v reported="$reported" '
    BEGIN { split(reported, moment, " ") }
    $1 > moment[2] + 0.1 && $1 < moment[1] + 3 { during++ }
    $1 >= moment[1] + 3 { after++ }
    END { print during + 0, after + 0 }' "$WORK/sent")
  [ "$during" -eq 0 ] || fail "$during requests were sent during the Retry-After of 3 s"
  [ "$after" -gt 0 ] || fail "no request after the Retry-After of 3 s ended"
}
