#!/usr/bin/env bash
# A restart is not an outage: a server that refuses connections for less than the restart budget
# (5 s) is waited for, and only past it does --on-redis-error apply. --try answers at once,
# --timeout at its bound, SIGINT ends the wait at once. test_redis_restart_no_agent.sh runs it
# with --no-agent.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"

start_redis rr
url=redis://127.0.0.1:$(cat "$WORK/rr/port")

# restarts: the server stopped for 0.3 s, then again for 1.5 s, as a restart closes its port.
restarts() {
  sleep 0.5
  stop_redis rr
  sleep 0.3
  start_redis_again rr
  sleep 0.5
  stop_redis rr
  sleep 1.5
  start_redis_again rr
}

# 1. 40 execs at 20/s, policy fail (the default): not one fails.
(
  for i in $(seq 40); do
    "$RATELIMIT" exec --rate 20/s --key rr --redis "$url" -- true 2>>"$WORK/loop.err" ||
      echo "exec $i exited $?" >>"$WORK/loop.err"
  done
  : >"$WORK/loop.done"
) &
loop=$!
restarts
wait $loop
[ ! -s "$WORK/loop.err" ] || fail "execs across two restarts: $(cat "$WORK/loop.err")"

# 2. A pipe on the key under fail across the same restarts: exit 0, the output is the input, and
# nothing is said.
seq 400 >"$WORK/lines"
"$RATELIMIT" -l --rate 100 --key rp --redis "$url" <"$WORK/lines" >"$WORK/pipe.out" \
  2>"$WORK/pipe.err" &
pipe=$!
restarts
status=0
wait $pipe || status=$?
[ "$status" -eq 0 ] || fail "the pipe across two restarts exited $status: $(cat "$WORK/pipe.err")"
cmp "$WORK/lines" "$WORK/pipe.out" || fail "the pipe across two restarts: output differs"
[ ! -s "$WORK/pipe.err" ] || fail "the pipe across two restarts said: $(cat "$WORK/pipe.err")"

# 3. While the port is closed: --try answers at once, --timeout at its bound (both 69: the store
# could not answer), SIGINT ends the wait at once, and past the budget the policy applies, said
# with how long the server was waited for.
stop_redis rr
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --try --rate 1/s --key t --redis "$url"
ms=$(ms_since "$start")
# Through the agent, its kept connection may still be found closed before the refusal is met.
case $(cat "$WORK/stderr") in
"ratelimit: Redis at $url: Connection refused" | \
  "ratelimit: Redis at $url: the server closed the connection"* | \
  "ratelimit: Redis at $url: Connection reset by peer"*) ;;
*) fail "--try on a closed port said '$(cat "$WORK/stderr")'" ;;
esac
[ "$ms" -lt 1000 ] || fail "--try on a closed port answered after ${ms} ms"
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --timeout 1s --rate 1/s --key t --redis "$url"
ms=$(ms_since "$start")
[ "$ms" -ge 800 ] && [ "$ms" -lt 2500 ] || fail "--timeout 1s on a closed port answered after ${ms} ms"
expect_ended_by_signal INT "acquire waiting for a restart" 500 \
  "$RATELIMIT" acquire --rate 1/s --key t --redis "$url"
start=$(now_ns)
expect_status 0 "$RATELIMIT" exec --on-redis-error=allow --rate 1/s --key t --redis "$url" -- true
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at $url: Connection refused for 5s; running unthrottled (--on-redis-error=allow)"
[ "$ms" -ge 4900 ] && [ "$ms" -lt 8000 ] || fail "allow applied after ${ms} ms, not after the 5 s budget"
start=$(now_ns)
expect_status 69 "$RATELIMIT" acquire --rate 1/s --key t --redis "$url"
ms=$(ms_since "$start")
expect_stderr "ratelimit: Redis at $url: Connection refused for 5s"
[ "$ms" -ge 4900 ] && [ "$ms" -lt 8000 ] || fail "fail applied after ${ms} ms, not after the 5 s budget"
