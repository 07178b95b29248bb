#!/usr/bin/env bash
# A shared key's rate and burst in `status` as its users wrote them (issue 27 item 8): 10MB/s, not
# 10M/s; 20 lines/s; 2/s with a burst of 5, not 2.5s; 100/m with a burst of 2m; KiB; a key of
# quotas alone shows no rate and no burst (issue 29). Quotas as the key's users write them
# (5000/h, 300/10m, 50GB/d; not 5000/1h or 50000000000/1d). In the state file and in Redis, as
# text and as JSON; a Redis key without a notation shows as before.
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
start_redis main
REDIS=

# kept KEY: with $REDIS set, the key is kept in Redis until the test ends: an idle key expires a
# second or two after its bucket is full again, sooner than a loaded machine gets to look at it.
kept() {
  [ -z "$REDIS" ] && return
  redis_cli main persist "ratelimit:{$1}" >/dev/null
  [ "$(redis_cli main exists "ratelimit:{$1}")" = 1 ] || fail "no key '$1' in Redis"
}

# make_keys [STORE OPTIONS...]: one key of each notation.
make_keys() {
  printf x | "$RATELIMIT" --rate 10MB/s --key mb "$@" >/dev/null || fail "a pipe at 10MB/s failed"
  kept mb
  printf 'a\nb\n' | "$RATELIMIT" -l --rate 20/s --key lines "$@" >/dev/null || fail "a pipe at 20 lines/s failed"
  kept lines
  printf x | "$RATELIMIT" --rate 512KiB/s --burst 64KiB --key kib "$@" >/dev/null || fail "a pipe at 512KiB/s failed"
  kept kib
  expect_status 0 "$RATELIMIT" acquire --rate 2/s --burst 5 --key permits "$@"
  kept permits
  expect_status 0 "$RATELIMIT" acquire --rate 100/m --burst 2m --key minute "$@"
  kept minute
  expect_status 0 "$RATELIMIT" acquire --quota 3/h --key quota "$@"
  kept quota
  expect_status 0 "$RATELIMIT" acquire --rate 10/s --quota 5000/h --quota 300/10m --key api "$@"
  kept api
  printf x | "$RATELIMIT" --rate 10MB/s --quota 50GB/d --key backup "$@" >/dev/null ||
    fail "a pipe with --quota 50GB/d failed"
  kept backup
}

# check_keys WHERE [STORE OPTIONS...]: status shows each key as it was written.
check_keys() {
  local where=$1
  shift
  "$RATELIMIT" status "$@" >"$WORK/status" || fail "$where: status failed"
  local expected lines=('^mb +10MB/s +burst 1s ' '^lines +20 lines/s +burst 1s '
    '^kib +512KiB/s +burst 64KiB ' '^permits +2/s +burst 5 ' '^minute +100/m +burst 2m '
    '^quota +off +- +- +now$' '^quota: quota 3/h: 1 used in the window, next unit free now$'
    '^api: quota 5000/h: 1 used in the window, ' '^api: quota 300/10m: 1 used in the window, '
    '^backup: quota 50GB/d: [0-9]+ used in the window, ')
  for expected in "${lines[@]}"; do
    grep -Eq -- "$expected" "$WORK/status" || fail "$where: no line '$expected' in: $(cat "$WORK/status")"
  done
  "$RATELIMIT" status --json "$@" >"$WORK/status.json" || fail "$where: status --json failed"
  python3 -c '
import json, sys
buckets = {bucket["key"]: bucket for bucket in json.load(open(sys.argv[1]))["buckets"]}
def shown(key, *fields):
    return [buckets[key].get(field) for field in fields]
assert shown("mb", "rate", "counts", "burst", "burst_seconds") == ["10MB/s", "bytes", "1s", 1], buckets["mb"]
assert shown("lines", "rate", "counts") == ["20/s", "lines"], buckets["lines"]
assert shown("kib", "rate", "burst") == ["512KiB/s", "64KiB"], buckets["kib"]
assert shown("permits", "rate", "counts", "burst") == ["2/s", "permits", "5"], buckets["permits"]
assert shown("minute", "rate", "burst", "burst_seconds") == ["100/m", "2m", 120], buckets["minute"]
quota = buckets["quota"]
assert shown("quota", "rate", "shape", "permits_per_second") == ["off", None, None], quota
assert "burst" not in quota and "burst_seconds" not in quota, quota
assert quota["quotas"][0]["quota"] == "3/h" and quota["quotas"][0]["used"] == 1, quota
def quotas(key):
    return [(quota["quota"], quota["limit"], quota["period_seconds"]) for quota in buckets[key]["quotas"]]
assert quotas("api") == [("5000/h", 5000, 3600), ("300/10m", 300, 600)], buckets["api"]
assert quotas("backup") == [("50GB/d", 50000000000, 86400)], buckets["backup"]
' "$WORK/status.json" || fail "$where: status --json: $(cat "$WORK/status.json")"
}

make_keys
check_keys "state file"

redis=(--redis "unix://$WORK/main/sock")
REDIS=1
make_keys "${redis[@]}"
check_keys Redis "${redis[@]}"
[ "$(redis_cli main hget 'ratelimit:{mb}' notation)" = "bytes si 1 time" ] ||
  fail "the notation kept in Redis: $(redis_cli main hgetall 'ratelimit:{mb}')"

# A key without a notation (its parameters set by an older ratelimit) shows as before.
redis_cli main hset 'ratelimit:{mb}' notation "" >/dev/null
"$RATELIMIT" status --key mb "${redis[@]}" >"$WORK/status"
grep -Eq '^mb +10M/s +burst 1s ' "$WORK/status" || fail "a key without a notation: $(cat "$WORK/status")"

# Requests that follow the key's settings with others of their own (an acquire, a pipe) leave the
# key's notation as it is.
expect_status 0 "$RATELIMIT" acquire --rate 3/s --key permits "${redis[@]}"
kept permits
"$RATELIMIT" status --key permits "${redis[@]}" >"$WORK/status"
grep -Eq '^permits +2/s +burst 5 ' "$WORK/status" || fail "followed: $(cat "$WORK/status")"
printf 'a\n' | "$RATELIMIT" -l --rate 3/s --key permits "${redis[@]}" >/dev/null 2>&1
kept permits
"$RATELIMIT" status --key permits "${redis[@]}" >"$WORK/status"
grep -Eq '^permits +2/s +burst 5 ' "$WORK/status" || fail "kept: $(cat "$WORK/status")"
exit 0
