#!/usr/bin/env bash
# status as users read it: rates as written (2/s, 1G/s, off, 1e300/s), waits as 59m59s, aligned
# columns, escaped keys, a hostile file skipped, --json valid whatever the rates and key bytes,
# running pipes with what they count and their key; an unknown key (escaped) for status, reset
# and set; nothing created by looking.
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

expect_status 0 "$RATELIMIT" status
[ ! -e "$RATELIMIT_STATE_DIR" ] || fail "status created the state directory"
expect_status 66 "$RATELIMIT" reset --key nope
expect_stderr "ratelimit: no bucket 'nope' in $RATELIMIT_STATE_DIR"
[ ! -e "$RATELIMIT_STATE_DIR" ] || fail "reset created the state directory"
# An unknown key is named escaped by each command, as status lists keys (set makes it).
for command in status reset; do
  expect_status 66 "$RATELIMIT" $command --key $'no\tkey\x01'
  expect_stderr "ratelimit: no bucket 'no\\x09key\\x01' in $RATELIMIT_STATE_DIR"
done

"$RATELIMIT" acquire --rate 1/h --key hourly
"$RATELIMIT" acquire --rate 100/m --key a-very-long-key-name-for-the-mail-queue
"$RATELIMIT" acquire --rate 1G --key big
"$RATELIMIT" acquire --rate 2 --key $'bad\tkey\x01'
ln -s /etc/passwd "$RATELIMIT_STATE_DIR/evil.bucket"

expect_status 0 "$RATELIMIT" status
"$RATELIMIT" status >"$WORK/status"
grep -Eq '^hourly +1/h +burst 1s +0\.00 +in 59m5[0-9]s$' "$WORK/status" || fail "hourly: $(cat "$WORK/status")"
grep -Eq '^a-very-long-key-name-for-the-mail-queue +100/m +burst 1s ' "$WORK/status" || fail "100/m: $(cat "$WORK/status")"
grep -Eq '^big +1G/s +burst 1s ' "$WORK/status" || fail "1G: $(cat "$WORK/status")"
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
assert status["agent"] is None, status  # no host agent runs
' "$WORK/json" || fail "status --json: $(cat "$WORK/json")"

# Readable at the extremes, and valid JSON: a key under an "off" entry, --rate 1e300, a key of
# bytes that are not UTF-8.
"$RATELIMIT" acquire --rate "00:00,off" --key unlimited
"$RATELIMIT" acquire --rate 1e300 --key huge
"$RATELIMIT" acquire --rate 2/s --key $'\xff\xfelatin'
"$RATELIMIT" status >"$WORK/status"
grep -Eq '^unlimited +off +burst 1s +unlimited +now +00:00,off +00:00,off in ' "$WORK/status" ||
  fail "off: $(cat "$WORK/status")"
grep -Eq '^huge +1e300/s +burst 1s ' "$WORK/status" || fail "1e300: $(cat "$WORK/status")"
grep -Eq '^\\xff\\xfelatin +2/s ' "$WORK/status" || fail "bytes not escaped: $(cat -A "$WORK/status")"
if grep -Eq 'inf|e\+' "$WORK/status"; then fail "unreadable numbers: $(cat "$WORK/status")"; fi
"$RATELIMIT" status --json >"$WORK/json"
python3 -c '
import json, sys
status = json.load(open(sys.argv[1]))
keys = {bucket["key"]: bucket for bucket in status["buckets"]}
assert keys["unlimited"]["rate"] == "off", keys
assert keys["unlimited"]["permits_per_second"] is None, keys
assert keys["unlimited"]["stored_permits"] is None, keys
assert keys["huge"]["rate"] == "1e300/s", keys
assert keys["huge"]["permits_per_second"] == 1e300, keys
latin = keys["\\xff\\xfelatin"]
assert bytes.fromhex(latin["key_hex"]) == b"\xff\xfelatin", latin
assert "key_hex" not in keys["hourly"], keys
' "$WORK/json" || fail "status --json: $(cat -A "$WORK/json")"

# wait_for_control PID: until pipe PID has made its FIFO (it publishes its status once asked).
wait_for_control() {
  for _ in $(seq 100); do
    [ -p "$RATELIMIT_STATE_DIR/pipe-$1.bytes" ] || [ -p "$RATELIMIT_STATE_DIR/pipe-$1.records" ] && return
    sleep 0.05
  done
}

# A running pipe is listed with its process id, what it counts, its rate as written, what it
# moved and the key it shares ("-" for none).
sleep 5 | "$RATELIMIT" --rate 1k >/dev/null &
pipe_pid=$!
sleep 5 | "$RATELIMIT" -l --rate 8/s --key $'shared\xff' >/dev/null &
lines_pid=$!
sleep 5 | "$RATELIMIT" --rate 8Mbit/s >/dev/null &
bits_pid=$!
wait_for_control "$pipe_pid"
wait_for_control "$lines_pid"
wait_for_control "$bits_pid"
# Nobody has asked yet: no status file (a file per pipe at its start cost slow pipes CPU).
[ ! -e "$RATELIMIT_STATE_DIR/pipe-$pipe_pid.status" ] || fail "a pipe nobody asked published a status"
"$RATELIMIT" status >"$WORK/status"
grep -Eq '^PIPE PID +COUNTS +RATE +UNITS +BYTES +KEY$' "$WORK/status" || fail "no KEY column: $(cat "$WORK/status")"
grep -Eq "^$pipe_pid +bytes +1kB/s +0 +0 +-$" "$WORK/status" || fail "the pipe is not listed: $(cat "$WORK/status")"
grep -Eq "^$lines_pid +lines +8/s +0 +0 +shared\\\\xff$" "$WORK/status" || fail "the -l pipe is not listed: $(cat "$WORK/status")"
grep -Eq "^$bits_pid +bytes +8Mbit/s +0 +0 +-$" "$WORK/status" || fail "the 8Mbit/s pipe is not listed: $(cat "$WORK/status")"
"$RATELIMIT" status --json >"$WORK/json"
grep -Fq "{\"pid\":$pipe_pid,\"counts\":\"bytes\",\"rate\":\"1kB/s\",\"units_per_second\":1000,\"units\":0,\"bytes\":0,\"key\":null}" "$WORK/json" ||
  fail "the pipe is not in the JSON: $(cat "$WORK/json")"
python3 -c '
import json, sys
pipes = {pipe["pid"]: pipe for pipe in json.load(open(sys.argv[1]))["pipes"]}
lines = pipes[int(sys.argv[2])]
assert lines["counts"] == "lines" and lines["rate"] == "8/s", lines
assert bytes.fromhex(lines["key_hex"]) == b"shared\xff", lines
' "$WORK/json" "$lines_pid" || fail "the -l pipe in the JSON: $(cat "$WORK/json")"
kill "$pipe_pid" "$lines_pid" "$bits_pid"

expect_status 0 "$RATELIMIT" reset --key big
expect_status 66 "$RATELIMIT" reset --key big
