# Sourced by the quota tests of shared keys, after lib.sh: the rules every store keeps, and many
# processes acquiring from one quota, with the busiest window of their grants, each known to lie
# between its request's sending and its answer's arrival, plus the store's wait (acquire -vv).

# expect_quota_rules STORE_OPTIONS...: on key "refused" of the store, a refused request takes
# nothing, status shows the quota (text and JSON), another caller's quota follows the key's and
# says so, set --key replaces it, and reset clears it.
expect_quota_rules() {
  # Refused takes nothing: 3 an hour, the 4th --try is refused and the key still counts 3.
  for _ in 1 2 3; do "$RATELIMIT" acquire --quota 3/h --key refused "$@"; done
  expect_status 75 "$RATELIMIT" acquire --quota 3/h --try --key refused "$@"
  expect_status 75 "$RATELIMIT" acquire --quota 3/h --timeout 1s --key refused "$@"
  "$RATELIMIT" status --key refused "$@" >"$WORK/status"
  grep -q "refused: quota 3/h: 3 used in the window, next unit free in" "$WORK/status" ||
    fail "status shows: $(cat "$WORK/status")"
  "$RATELIMIT" status --key refused --json "$@" >"$WORK/status.json"
  python3 -c '
import json, sys
quota = json.load(open(sys.argv[1]))["buckets"][0]["quotas"][0]
assert quota["limit"] == 3 and quota["used"] == 3 and quota["period_seconds"] == 3600, quota
assert quota["next_free_in_seconds"] > 3000, quota' "$WORK/status.json" ||
    fail "status --json shows: $(cat "$WORK/status.json")"
  # Another caller's quotas follow the key's (and say so); set --key replaces them (the new quota
  # keeps the count of the old one of its period); reset clears them.
  expect_status 75 "$RATELIMIT" acquire --quota 4/h --try --key refused "$@"
  grep -q "has rate off, burst 1s, quota 3/h: this call follows it, not its own rate off, burst 1s, quota 4/h (to make them the key's: ratelimit set --key refused --quota 4/h)" "$WORK/stderr" ||
    fail "the followed quota was not told: $(cat "$WORK/stderr")"
  expect_status 0 "$RATELIMIT" set --key refused --quota 4/h "$@"
  expect_stderr "ratelimit: key 'refused' now has rate off, burst 1s, quota 4/h (was rate off, burst 1s, quota 3/h)"
  expect_status 0 "$RATELIMIT" acquire --quota 4/h --try --key refused "$@"
  expect_status 75 "$RATELIMIT" acquire --quota 4/h --try --key refused "$@"
  "$RATELIMIT" reset --key refused "$@"
  expect_status 0 "$RATELIMIT" acquire --rate 1/s --try --key refused "$@"
  "$RATELIMIT" status --key refused "$@" >"$WORK/status"
  ! grep -q quota "$WORK/status" || fail "reset kept the quota: $(cat "$WORK/status")"
}

quota_windows="$(dirname "${BASH_SOURCE[0]}")/quota_windows.py"

# acquire_in_parallel NAME PROCESSES TIMES ACQUIRE_OPTIONS...: PROCESSES processes, each running
# `ratelimit acquire -vv ACQUIRE_OPTIONS...` TIMES times in turn; their grants go to
# $WORK/NAME.grants.* as "<from_ns> <to_ns> <permits>" lines: each grant's moment in the store
# lies between the two (quota_windows.py within). Meanwhile the distance of the wall clock from
# the monotonic one is noted in $WORK/NAME.clocks (quota_windows.py clocks).
acquire_in_parallel() {
  local name=$1 processes=$2 times=$3 process pids=() watcher
  local moment='\([0-9]*\)\.\([0-9]\{9\}\)'
  shift 3
  python3 "$quota_windows" clocks "$WORK/$name.clocks" &
  watcher=$!
  until [ -s "$WORK/$name.clocks" ]; do
    kill -0 "$watcher" 2>/dev/null || fail "the clocks' watcher ended before its first reading"
    sleep 0.01
  done
  for process in $(seq "$processes"); do
    (
      for _ in $(seq "$times"); do "$RATELIMIT" acquire -vv "$@" 2>&1 >/dev/null; done |
        sed -n "s/.*: \([0-9]*\) permits\{0,1\} granted between $moment and $moment s on the monotonic clock\$/\2\3 \4\5 \1/p" \
          >"$WORK/$name.grants.$process"
    ) &
    pids+=($!)
  done
  # Its own: the caller may have a server in the background.
  wait "${pids[@]}"
  kill "$watcher"
  wait "$watcher" || true
}

# expect_quota_kept NAME LIMIT PERIOD_S GRANTS [wall]: acquire_in_parallel NAME made GRANTS grants
# in all, no window of PERIOD_S seconds certainly holds more than LIMIT of them, and the busiest
# holds at least 90% of LIMIT certainly (the quota does not idle, and the grants' moments are
# known closely enough for the first check to fail if the quota let more through). `wall`: the
# store decides on the wall clock (Redis), and the windows are measured on it.
expect_quota_kept() {
  local name=$1 limit=$2 period=$3 grants=$4 total certain possible width moved
  local clock=() on="the monotonic clock"
  if [ "${5:-}" = wall ]; then clock=(--wall "$WORK/$name.clocks") on="the wall clock"; fi
  total=$(cat "$WORK/$name".grants.* | wc -l)
  [ "$total" -eq "$grants" ] || fail "$name: $total grants, expected $grants"
  read -r certain possible width < <(python3 "$quota_windows" within "${clock[@]}" "$period" \
    "$WORK/$name".grants.*)
  moved=$(python3 "$quota_windows" moved "$WORK/$name.clocks")
  echo "$name: $certain grants certainly in the busiest ${period} s window on $on ($possible" \
    "possibly; grant moments known within $width ms, median), quota $limit; the wall clock" \
    "moved $moved ms against the monotonic one meanwhile"
  if [ "$certain" -gt "$limit" ]; then
    python3 "$quota_windows" within --show "${clock[@]}" "$period" "$WORK/$name".grants.* >/dev/null
    fail "$name: $certain grants in one ${period} s window, quota $limit"
  fi
  [ "$certain" -ge $((limit * 9 / 10)) ] ||
    fail "$name: only $certain grants certainly in the busiest ${period} s window: the quota idles"
}
