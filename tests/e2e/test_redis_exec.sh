#!/usr/bin/env bash
# exec and acquire over Redis: 4 "hosts" (separate state directories) share one bucket; TCP and
# unix URLs; passwords; a server without the script's function; a damaged key; status and reset;
# bad URLs.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
sock=$WORK/main/sock
tcp=redis://127.0.0.1:$(cat "$WORK/main/port")

# 4 hosts x 5 starts at 20/s: 20 starts take 19/20 s and are spread out; without the shared
# bucket each host would start its 5 within 250 ms.
start=$(now_ns)
loops=()
for host in 1 2 3 4; do
  url=unix://$sock
  [ $host -le 2 ] && url=$tcp
  for _ in $(seq 5); do
    RATELIMIT_STATE_DIR=$WORK/host$host "$RATELIMIT" exec --redis "$url" --rate 20/s --key shared \
      -- sh -c 'date +%s%N >>"$0"' "$WORK/starts.$host"
  done &
  loops+=($!)
done
wait "${loops[@]}"
ms=$(ms_since "$start")
[ "$ms" -ge 900 ] && [ "$ms" -lt 3500 ] || fail "4 hosts x 5 at 20/s took ${ms} ms, expected about 950"
expect_paced_starts 20 "$WORK"/starts.*
# The host agent's socket and lock aside, nothing: no bucket file.
[ -z "$(ls "$WORK"/host1 2>/dev/null | grep -v -e '^\.' -e '^agent\.sock$' -e '^agent\.lock$')" ] ||
  fail "a bucket file was written on a host"

export RATELIMIT_STATE_DIR=$WORK/state
export RATELIMIT_REDIS=unix://$sock

# $RATELIMIT_REDIS is used; status shows the bucket, reset forgets it.
expect_status 0 "$RATELIMIT" acquire --rate 4/s --key env --permits 2
"$RATELIMIT" status --key env >"$WORK/status"
grep -qE '^env +4/s +burst 1s +0\.00 +in 0\.[0-9]+s$' "$WORK/status" || fail "status: $(cat "$WORK/status")"
[ "$(redis_cli main exists 'ratelimit:{env}')" = 1 ] || fail "no key ratelimit:{env}"
expect_status 0 "$RATELIMIT" reset --key env
[ "$(redis_cli main exists 'ratelimit:{env}')" = 0 ] || fail "reset left the key"
expect_status 66 "$RATELIMIT" status --key env
expect_stderr "ratelimit: no bucket 'env' in Redis at unix://$sock"

# --try over Redis: the second caller is refused at once (75).
expect_status 0 "$RATELIMIT" acquire --rate 1/s --key try
expect_status 75 "$RATELIMIT" acquire --rate 1/s --key try --try

# The script's library is loaded again after FUNCTION FLUSH, and books once.
"$RATELIMIT" acquire --rate 2/s --key flush
redis_cli main function flush >/dev/null
start=$(now_ns)
"$RATELIMIT" acquire --rate 2/s --key flush
"$RATELIMIT" acquire --rate 2/s --key flush
ms=$(ms_since "$start")
[ "$ms" -ge 900 ] && [ "$ms" -lt 2500 ] || fail "after FUNCTION FLUSH 2 acquires at 2/s took ${ms} ms"

# A key holding garbage or another type: a fresh bucket, said with -v.
redis_cli main set 'ratelimit:{junk}' garbage >/dev/null
expect_status 0 "$RATELIMIT" acquire -v --rate 1/s --key junk
expect_stderr "ratelimit: key 'junk': a string, not a bucket in Redis; starting a fresh bucket"
redis_cli main del 'ratelimit:{junk}' >/dev/null
redis_cli main lpush 'ratelimit:{junk}' x >/dev/null
"$RATELIMIT" status --key junk >"$WORK/status"
grep -q '^junk: unusable (a list, not a bucket): fresh on next use' "$WORK/status" ||
  fail "status of a list: $(cat "$WORK/status")"

# Bad URLs: 64, the password never shown.
expect_status 64 "$RATELIMIT" acquire --redis 'redis://:hunter2@localhost:0' --rate 1 --key x
expect_stderr "ratelimit: bad Redis URL 'redis://:***@localhost:0': the port must be a number from 1 to 65535"
expect_status 64 "$RATELIMIT" exec --redis 'http://cache' --rate 1 --key x -- true
expect_status 64 "$RATELIMIT" status --redis 'unix://relative.sock'

# A server without functions (as before Redis 7.0): one line saying what it needs, 69, through
# the agent and without it.
start_redis old --rename-command FCALL '""'
needs_functions="the server has no Redis functions (FCALL): ratelimit needs Redis 7.0 or later"
for agent in "" --no-agent; do
  expect_status 69 "$RATELIMIT" exec $agent --redis "unix://$WORK/old/sock" --rate 1 --key p \
    -- touch "$WORK/ran"
  expect_stderr "ratelimit: Redis at unix://$WORK/old/sock: $needs_functions"
  [ ! -e "$WORK/ran" ] || fail "the command ran ($agent) although the server has no functions"
done

# requirepass: the right password works over TCP and unix; a wrong one exits 69 without showing it.
start_redis locked --requirepass 's3cr:et'
locked_port=$(cat "$WORK/locked/port")
expect_status 0 "$RATELIMIT" acquire --redis "redis://:s3cr%3Aet@127.0.0.1:$locked_port" --rate 1 --key p
expect_status 0 "$RATELIMIT" acquire --redis "unix://:s3cr%3Aet@$WORK/locked/sock" --rate 1 --key q
expect_status 69 "$RATELIMIT" exec --redis "redis://:wrong@127.0.0.1:$locked_port" --rate 1 --key p \
  -- touch "$WORK/ran"
grep -q WRONGPASS "$WORK/stderr" && ! grep -q wrong@ "$WORK/stderr" ||
  fail "wrong password: $(cat "$WORK/stderr")"
[ ! -e "$WORK/ran" ] || fail "the command ran although Redis refused"
# No password: one line that says how to give one, whether the server answers NOAUTH or (Redis 7,
# to a long command before AUTH) a protocol error.
needs_password="the server needs a password: give it in the URL, as redis://:PASSWORD@host or unix://:PASSWORD@/path (USER:PASSWORD for an ACL user)"
expect_status 69 "$RATELIMIT" acquire --redis "unix://$WORK/locked/sock" --rate 1 --key p
expect_stderr "ratelimit: Redis at unix://$WORK/locked/sock: $needs_password"
expect_status 69 "$RATELIMIT" acquire --redis "redis://127.0.0.1:$locked_port" --rate 1 --key p
expect_stderr "ratelimit: Redis at redis://127.0.0.1:$locked_port: $needs_password"
