#!/usr/bin/env bash
# A pipe bounds its wait (issue 39): --timeout ends it when the next turn is further away, and
# --stop-at-quota when a quota holds the next turn back; either way with exit 75 and one line, what
# was written whole, and the rest of the input unread (a file) or left in the pipe. A keyed pipe
# stops at its key's quota.
# Timing: a turn 1 s away against --timeout 500ms, with loose margins (RESOURCE_LOCK timing).
source "$E2E_LIB"
export RATELIMIT_STATE_DIR=$WORK/state
cd "$WORK"

# expect_quota_stop WRITTEN: the last stderr is --stop-at-quota's line. A quota counts in 64 slots
# of its period, so the time it is spent for is a day and up to two slots (45 minutes).
expect_quota_stop() {
  local actual
  actual=$(cat "$WORK/stderr")
  [[ $actual =~ ^"ratelimit: stopped: a quota is spent for "1d([0-9]+m)?([0-9]+s)?" more; $1 written, the rest left unread"$ ]] ||
    fail "stderr was '$actual', expected a quota spent for a day and $1 written"
}
seq 10 >lines
random_file bytes 1000

# --timeout, lines from a file: the first line is free, the second's turn is an hour away.
expect_status 75 "$RATELIMIT" -l --rate 1/h --timeout 1m lines -o out
expect_stderr "ratelimit: stopped: the next turn was 1h away, longer than --timeout 1m; 1 line written, the rest left unread"
[ "$(cat out)" = 1 ] || fail "--timeout wrote: $(cat out)"
# Standard input from a file: what the pipe did not write is still there for the next reader.
{
  "$RATELIMIT" -l --rate 1/h --timeout 1m && echo "status 0" || echo "status $?"
  cat
} <lines >out 2>/dev/null
[ "$(cat out)" = "$(printf '1\nstatus 75\n'; seq 2 10)" ] || fail "stdin after --timeout: $(cat out)"

# Bytes, from a pipe into a pipe (spliced): one chunk goes, the rest stays in the input pipe.
head -c 1000 bytes | {
  status=0
  "$RATELIMIT" --rate 100 --chunk 100 --timeout 500ms 2>"$WORK/stderr" | cat >out ||
    status=${PIPESTATUS[0]}
  echo "status $status" >status
  cat >rest
}
[ "$(cat status)" = "status 75" ] || fail "--timeout on a pipe: $(cat status) $(cat "$WORK/stderr")"
expect_stderr "ratelimit: stopped: the next turn was 1s away, longer than --timeout 500ms; 100 bytes written, the rest left unread"
cat out rest | cmp - bytes || fail "bytes written and left in the pipe are not the input"
[ "$(wc -c <out)" -eq 100 ] || fail "--timeout on a pipe wrote $(wc -c <out) bytes"
# A turn within the bound is waited for.
"$RATELIMIT" -l --rate 20/s --timeout 1s lines -o out || fail "a short wait ended the pipe"
cmp out lines

# --stop-at-quota: three lines a day, the fourth waits for tomorrow.
expect_status 75 "$RATELIMIT" -l --rate 1k --quota 3/d --stop-at-quota lines -o out
expect_quota_stop "3 lines"
[ "$(cat out)" = "$(seq 3)" ] || fail "--stop-at-quota wrote: $(cat out)"
expect_status 75 "$RATELIMIT" -l --rate 1k --quota 3/d --stop-at-quota --stats=json lines -o out
grep -q '"ending":"quota_spent"' "$WORK/stderr" || fail "--stats=json: $(cat "$WORK/stderr")"
expect_error "ratelimit: --stop-at-quota needs a --quota, or a --key whose users give one" \
  "$RATELIMIT" -l --rate 1k --stop-at-quota lines
# Lines from a pipe: each line's turn is asked for before it is read, so the fourth stays in the
# pipe for the next reader.
seq 10 | {
  "$RATELIMIT" -l --quota 3/d --stop-at-quota >out 2>"$WORK/stderr" && echo "status 0" >status ||
    echo "status $?" >status
  cat >rest
}
[ "$(cat status)" = "status 75" ] || fail "--stop-at-quota on a pipe: $(cat status) $(cat "$WORK/stderr")"
expect_quota_stop "3 lines"
[ "$(cat out)" = "$(seq 3)" ] || fail "--stop-at-quota on a pipe wrote: $(cat out)"
[ "$(cat rest)" = "$(seq 4 10)" ] || fail "--stop-at-quota on a pipe left: $(cat rest)"

# A key's quota spent by an earlier run: the next runs write nothing and stop at once, on the state
# file and in Redis (through the host agent and without), and take nothing from the key: its
# bucket is not booked ahead (next free "now"), its quota has counted the 3 lines written.
source "$(dirname "${BASH_SOURCE[0]}")/redis_server.sh"
start_redis main
for variant in state_file redis redis_no_agent; do
  use_store "$variant" "$WORK/state"
  # shellcheck disable=SC2086 # the store's options, split
  expect_status 75 "$RATELIMIT" -l --rate 1k --quota 3/d --key "nightly-$variant" $store \
    --stop-at-quota lines -o out
  expect_quota_stop "3 lines"
  for run in 2 3 4; do
    # shellcheck disable=SC2086
    expect_status 75 timeout 20 "$RATELIMIT" -l --rate 1k --quota 3/d --key "nightly-$variant" \
      $store --stop-at-quota lines -o out
    expect_quota_stop "0 lines"
    [ ! -s out ] || fail "a spent key's quota let through ($variant, run $run): $(cat out)"
    # shellcheck disable=SC2086
    "$RATELIMIT" status --key "nightly-$variant" $store >status
    [[ $(sed -n 2p status) =~ " now"$ ]] ||
      fail "the key is booked ahead after run $run ($variant): $(cat status)"
    [[ $(tail -1 status) =~ ^"nightly-$variant: quota 3/d: 3 used in the window, next unit free in 1d" ]] ||
      fail "the key's quota after run $run ($variant): $(cat status)"
  done

  # Lines from a pipe: exactly the three lines the quota allows go, the rest stays in the pipe, and
  # the next run on the spent key writes nothing and stops at once.
  for run in 1 2; do
    seq 10 | {
      # shellcheck disable=SC2086
      timeout 20 "$RATELIMIT" -l --quota 3/d --key "piped-$variant" $store --stop-at-quota \
        >out 2>"$WORK/stderr" && echo "status 0" >status || echo "status $?" >status
      cat >rest
    }
    [ "$(cat status)" = "status 75" ] ||
      fail "a pipe's run $run ($variant): $(cat status) $(cat "$WORK/stderr")"
    if [ "$run" = 1 ]; then
      expect_quota_stop "3 lines"
      [ "$(cat out)" = "$(seq 3)" ] || fail "a pipe's run 1 ($variant) wrote: $(cat out)"
      [ "$(cat rest)" = "$(seq 4 10)" ] || fail "a pipe's run 1 ($variant) left: $(cat rest)"
    else
      expect_quota_stop "0 lines"
      [ ! -s out ] || fail "a pipe's run 2 on a spent key ($variant) wrote: $(cat out)"
      [ "$(cat rest)" = "$(seq 10)" ] || fail "a pipe's run 2 ($variant) left: $(cat rest)"
    fi
    # shellcheck disable=SC2086
    "$RATELIMIT" status --key "piped-$variant" $store >status
    [[ $(tail -1 status) =~ ^"piped-$variant: quota 3/d: 3 used in the window, next unit free in 1d" ]] ||
      fail "the piped key's quota after run $run ($variant): $(cat status)"
  done
done
