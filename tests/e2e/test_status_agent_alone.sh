#!/usr/bin/env bash
# `status` with no pipe or key but a host agent says both on one line (issue 39): before, it printed
# "no pipes or keys", a blank line, then the agent's line, which reads as nothing and then something.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
export RATELIMIT_REDIS=unix://$WORK/main/sock

expect_status 0 "$RATELIMIT" acquire --rate 100/s --key gone
wait_for_file "$WORK/state/agent.sock"
pid=$(cat "$WORK/state/agent.lock")
"$RATELIMIT" reset --key gone 2>/dev/null
"$RATELIMIT" status >"$WORK/status"
grep -qxE "no pipes or keys; agent: pid $pid, 1 Redis connection, [0-9]+ decisions? served" "$WORK/status" ||
  fail "status: $(cat "$WORK/status")"
[ "$(wc -l <"$WORK/status")" -eq 1 ] || fail "status said more than one line: $(cat "$WORK/status")"
