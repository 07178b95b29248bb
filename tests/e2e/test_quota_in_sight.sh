#!/usr/bin/env bash
# Quotas in sight (issue 39), on the state file and in Redis (through the host agent and
# without): a keyed pipe that a quota used up by an earlier run holds says "held by a quota" from
# its first progress line; --stats and --stats=json of such a pipe stopped by Ctrl-C report the
# key's quota and the time it held the pipe.
# Timing: waits of about a second on a quota (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
head -c 2000 /dev/urandom >"$WORK/input"

# held_pipe STORE_OPTIONS...: a keyed pipe on a quota that an earlier run used up, stopped by
# SIGINT after 1 s; its stderr in $WORK/stderr.
held_pipe() {
  interrupted_after_1s "the held pipe ($variant)" \
    "$RATELIMIT" --quota 2000/30s --key "seen-$variant" "$@" "$WORK/input"
  [ ! -s "$WORK/out" ] || fail "the held pipe wrote $(wc -c <"$WORK/out") bytes ($variant)"
}

for variant in state_file redis redis_no_agent; do
  use_store "$variant" "$WORK/records"
  # shellcheck disable=SC2086 # the store's options, split
  "$RATELIMIT" --quota 2000/30s --key "seen-$variant" $store "$WORK/input" -o "$WORK/out" ||
    fail "the first pipe failed ($variant)"

  # shellcheck disable=SC2086
  held_pipe $store --progress=force
  first_line=$(tr '\r' '\n' <"$WORK/stderr" | grep -m1 .)
  [[ $first_line == *", held by a quota]"* ]] ||
    fail "the first progress line is '$first_line' ($variant): $(cat -v "$WORK/stderr")"

  # shellcheck disable=SC2086
  held_pipe $store --stats
  grep -Eq '^ratelimit: 0 bytes in [0-9.]+ s, .*; held by quotas (0\.[5-9]|[1-9])[0-9.]*(ms|s)$' \
    "$WORK/stderr" || fail "--stats of the stopped pipe ($variant): $(cat "$WORK/stderr")"
  grep -Eq '^ratelimit: quota 2kB/30s: [0-9]+ used in the window$' "$WORK/stderr" ||
    fail "--stats of the stopped pipe names no quota ($variant): $(cat "$WORK/stderr")"

  # shellcheck disable=SC2086
  held_pipe $store --stats=json
  python3 -c '
import json, sys
summary = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert summary["ending"] == "stopped", summary
[quota] = summary["quotas"]
assert quota["quota"] == "2kB/30s" and quota["limit"] == 2000, summary
assert quota["period_seconds"] == 30 and quota["used"] >= 1, summary
assert summary["held_by_quotas_seconds"] >= 0.5, summary
' "$WORK/stderr" || fail "--stats=json of the stopped pipe ($variant): $(cat "$WORK/stderr")"
done
