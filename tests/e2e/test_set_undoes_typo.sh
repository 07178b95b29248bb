#!/usr/bin/env bash
# A mistyped rate books the next turn far ahead (one permit at 0.001/s: 16 minutes; 1e-300: the
# 292-year limit). Setting the rate meant with `set` converts what is still owed to the new rate
# (permits, not time), so the key or the pipe flows again at once, in the state file and in Redis.
# A lowered rate keeps the booked time (Guava's setRate).
source "$E2E_LIB"
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
export RATELIMIT_STATE_DIR=$WORK/state
start_redis main

for store in "" "--redis unix://$WORK/main/sock"; do
  for typo in 0.001 1e-300; do
    # shellcheck disable=SC2086 # the store's options are words
    expect_status 0 "$RATELIMIT" acquire $store --rate "$typo" --key "y$typo"
    # shellcheck disable=SC2086
    expect_status 0 "$RATELIMIT" set $store --key "y$typo" --rate 5/s
    # What one permit at 0.001/s owes takes 0.2 ms at 5/s: the next request goes within its
    # timeout (on main it waited the 16 minutes).
    # shellcheck disable=SC2086
    expect_status 0 "$RATELIMIT" acquire $store --rate 5/s --key "y$typo" --timeout 1s
  done
  # Lowered: the turn booked at 5/s stays 0.2 s ahead, not 200 s (5/s owed at 0.005/s).
  # shellcheck disable=SC2086
  expect_status 0 "$RATELIMIT" acquire $store --rate 5/s --key low
  # shellcheck disable=SC2086
  expect_status 0 "$RATELIMIT" set $store --key low --rate 0.005
  # shellcheck disable=SC2086
  expect_status 0 "$RATELIMIT" acquire $store --rate 0.005 --key low --timeout 1s
done

# A pipe's own bucket: 3 lines at 0.001/s, the first at once and the next booked 1000 s ahead;
# set to 1000/s, the rest comes out at once.
mkfifo "$WORK/lines"
"$RATELIMIT" -l --rate 0.001 <"$WORK/lines" >"$WORK/out" 2>"$WORK/pipe.err" &
pipe=$!
exec 3>"$WORK/lines"
printf '1\n2\n3\n' >&3
exec 3>&-
wait_for_file "$WORK/state/pipe-$pipe.records"
until [ -s "$WORK/out" ]; do sleep 0.01; done
expect_status 0 "$RATELIMIT" set "$pipe" --rate 1000
for _ in $(seq 500); do
  kill -0 "$pipe" 2>/dev/null || break
  sleep 0.01
done
if kill -0 "$pipe" 2>/dev/null; then
  kill "$pipe"
  fail "the pipe still waits its 0.001/s turn 5 s after 'set --rate 1000': $(cat "$WORK/out" | tr '\n' ' ')"
fi
wait "$pipe" || fail "the pipe failed: $(cat "$WORK/pipe.err")"
printf '1\n2\n3\n' | cmp -s - "$WORK/out" || fail "the pipe wrote $(cat "$WORK/out")"
