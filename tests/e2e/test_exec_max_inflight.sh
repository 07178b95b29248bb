#!/usr/bin/env bash
# --max-inflight N: at most N commands of a key run at once; a slot is freed when its command
# exits, also when it is killed.
# Timing: loose bounds, run alone (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state

# 6 commands of 0.5 s with 2 slots: at most (and at some point exactly) 2 run at once.
for _ in $(seq 6); do
  "$RATELIMIT" exec --rate 1000/s --key m --max-inflight 2 -- \
    sh -c 'echo + >>"$0"; sleep 0.5; echo - >>"$0"' "$WORK/log" &
done
wait
peak=$(awk '/\+/ { n++ } /-/ { n-- } { if (n > max) max = n } END { print max }' "$WORK/log")
[ "$(grep -c + "$WORK/log")" -eq 6 ] || fail "not every command ran"
[ "$peak" -eq 2 ] || fail "$peak commands ran at once with --max-inflight 2"

# A slot held by a running command refuses --try, and is freed when the command is killed.
"$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 -- sh -c ': >"$0"; exec sleep 30' "$WORK/holding" &
holder=$!
wait_for_file "$WORK/holding"
expect_status 75 "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 --try -- touch "$WORK/ran"
expect_status 75 "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 --timeout 200ms -- touch "$WORK/ran"
[ ! -e "$WORK/ran" ] || fail "a command ran without a free slot"
kill -KILL "$holder"  # the command itself: exec kept the pid
wait "$holder" || true
expect_status 0 "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 --timeout 2s -- touch "$WORK/ran"
[ -e "$WORK/ran" ] || fail "the slot of a killed command was not freed"

# The slot is given back when the command exits.
expect_status 0 "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 --try -- true
expect_status 0 "$RATELIMIT" exec --rate 1000/s --key k --max-inflight 1 --try -- true
