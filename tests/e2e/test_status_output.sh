#!/usr/bin/env bash
# status as users read it: rates as written, waits as 59m59s, aligned columns, escaped keys, a
# hostile file skipped, --json, running pipes; reset of an unknown key; nothing created by looking.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

expect_status 0 "$RATELIMIT" status
[ ! -e "$RATELIMIT_STATE_DIR" ] || fail "status created the state directory"
expect_status 66 "$RATELIMIT" reset --key nope
expect_stderr "ratelimit: no bucket 'nope' in $RATELIMIT_STATE_DIR"
[ ! -e "$RATELIMIT_STATE_DIR" ] || fail "reset created the state directory"

"$RATELIMIT" acquire --rate 1/h --key hourly
"$RATELIMIT" acquire --rate 100/m --key a-very-long-key-name-for-the-mail-queue
"$RATELIMIT" acquire --rate 1G --key big
"$RATELIMIT" acquire --rate 2 --key $'bad\tkey\x01'
ln -s /etc/passwd "$RATELIMIT_STATE_DIR/evil.bucket"

expect_status 0 "$RATELIMIT" status
"$RATELIMIT" status >"$WORK/status"
grep -Eq '^hourly +1/h +burst 1s +0\.00 +in 59m5[0-9]s$' "$WORK/status" || fail "hourly: $(cat "$WORK/status")"
grep -Eq '^a-very-long-key-name-for-the-mail-queue +100/m +burst 1s ' "$WORK/status" || fail "100/m: $(cat "$WORK/status")"
grep -Eq '^big +1G +burst 1s ' "$WORK/status" || fail "1G: $(cat "$WORK/status")"
grep -Fq 'bad\x09key\x01 ' "$WORK/status" || fail "control characters not escaped: $(cat -A "$WORK/status")"
grep -q '^evil: unusable (.*symbolic link' "$WORK/status" || fail "the hostile file is not reported: $(cat "$WORK/status")"
# Aligned: the RATE column starts at the same place on every bucket line.
[ "$(grep -E '^(KEY|hourly|big|a-very) ' "$WORK/status" | awk '{ print index($0, $2) }' | sort -u | wc -l)" -eq 1 ] ||
  fail "columns not aligned: $(cat "$WORK/status")"

"$RATELIMIT" status --json >"$WORK/json"
python3 -c '
import json, sys
status = json.load(open(sys.argv[1]))
keys = {bucket["key"]: bucket for bucket in status["buckets"]}
assert keys["hourly"]["rate"] == "1/h", keys
assert keys["bad\tkey\x01"]["permits_per_second"] == 2, keys
assert "symbolic link" in keys["evil"]["problem"], keys
' "$WORK/json" || fail "status --json: $(cat "$WORK/json")"

# A running pipe is listed with its process id, its rate and what it moved.
sleep 5 | "$RATELIMIT" --rate 1k >/dev/null &
pipe_pid=$!
for _ in $(seq 100); do
  [ -f "$RATELIMIT_STATE_DIR/pipe-$pipe_pid.status" ] && break
  sleep 0.05
done
"$RATELIMIT" status | grep -Eq "^$pipe_pid +bytes +1kB +0 +0$" || fail "the pipe is not listed: $("$RATELIMIT" status)"
"$RATELIMIT" status --json | grep -Fq "{\"pid\":$pipe_pid,\"counts\":\"bytes\",\"rate\":\"1kB\",\"units_per_second\":1000,\"units\":0,\"bytes\":0}" ||
  fail "the pipe is not in the JSON: $("$RATELIMIT" status --json)"
kill "$pipe_pid"

expect_status 0 "$RATELIMIT" reset --key big
expect_status 66 "$RATELIMIT" reset --key big
